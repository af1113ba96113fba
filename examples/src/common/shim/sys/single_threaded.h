/* Shim for glibc's <sys/single_threaded.h>, put first on the include path
 * with -isystem.
 *
 * GCC 12's libstdc++ reads `__libc_single_threaded` (a glibc 2.32 symbol) to
 * skip atomic reference counting in std::shared_ptr and friends. That one
 * reference makes a shared object require GLIBC_2.32, i.e. manylinux_2_34.
 * Declaring it as a constant 0 here ("maybe multi-threaded") keeps the atomic
 * path, drops the versioned reference, and the result audits as
 * manylinux_2_28. Must be compiled as C++ (libstdc++ reads
 * `::__libc_single_threaded`). */
#ifndef _SYS_SINGLE_THREADED_H
#define _SYS_SINGLE_THREADED_H
static constexpr char __libc_single_threaded = 0;
#endif
