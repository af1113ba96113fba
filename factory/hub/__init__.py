"""``kernel-factory serve --hub``: the store as a read-only Hugging Face Hub for kernels (docs/hub.md)."""
