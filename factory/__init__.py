"""kernel-factory: wheels and a static index for Hugging Face Kernel Hub kernels."""

from pathlib import Path

__version__ = "0.1.0"

#: The shipped index templates (index_templates/ in the repository, package data in the wheel).
TEMPLATES = Path(__file__).parent / "templates"
