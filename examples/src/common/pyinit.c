/* An abi3 Python extension entry point returning an empty module.
 *
 * The kernel's ops are registered with the PyTorch dispatcher by static
 * initialisers (TORCH_LIBRARY) when the shared object is loaded; the Python
 * module only exists so that `from . import <KERNEL_NS>` loads it.
 * Build with -DKERNEL_NS=<module name>. */
#define Py_LIMITED_API 0x03090000
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

PyMODINIT_FUNC KF_CONCAT(PyInit_, KERNEL_NS)(void) { return PyModule_Create(&module_def); }
