"""kernel-factory: wheels and a static index for Hugging Face Kernel Hub kernels."""

__version__ = "0.1.0"
