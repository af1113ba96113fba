"""The shipped templates, compiled (kernel_factory.index.precompiled)."""
