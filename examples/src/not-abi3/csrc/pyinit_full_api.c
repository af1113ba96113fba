/* Python entry point compiled WITHOUT Py_LIMITED_API: PyUnicode_AsUTF8 is not
 * part of the limited API for Python 3.9 (it joined in 3.13), so a file named
 * *.abi3.so that calls it is not really abi3 (the negative abi3audit case).
 * Build with -DKERNEL_NS=<module name>. */
#include <Python.h>

#define KF_CONCAT_(a, b) a##b
#define KF_CONCAT(a, b) KF_CONCAT_(a, b)
#define KF_STRINGIFY_(x) #x
#define KF_STRINGIFY(x) KF_STRINGIFY_(x)

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    KF_STRINGIFY(KERNEL_NS), /* m_name */
    NULL,                    /* m_doc */
    -1,                      /* m_size */
    NULL,                    /* m_methods */
};

PyMODINIT_FUNC KF_CONCAT(PyInit_, KERNEL_NS)(void) {
  PyObject* module = PyModule_Create(&module_def);
  if (module == NULL) {
    return NULL;
  }
  PyObject* name = PyModule_GetNameObject(module);
  const char* utf8 = name == NULL ? NULL : PyUnicode_AsUTF8(name);
  if (utf8 == NULL || PyModule_AddStringConstant(module, "build_name", utf8) < 0) {
    Py_XDECREF(name);
    Py_DECREF(module);
    return NULL;
  }
  Py_DECREF(name);
  return module;
}
