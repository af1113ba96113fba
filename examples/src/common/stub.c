/* Empty stand-in for libc10.so, libtorch.so and libtorch_cpu.so when
 * cross-linking for aarch64: only the soname (-Wl,-soname,...) matters, the
 * linker leaves the torch symbols undefined for the loader to resolve. */
