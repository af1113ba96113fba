"""``kernel-factory serve --hub``: the store as a read-only Hugging Face Hub for kernels (docs/hub.md).

catalog.py turns the store's records into repositories, revisions and refs (and keeps what a running Hub knows);
wheels.py checks a wheel (its sha256 in the index, every member against its RECORD) before any byte of it is
served and streams members; answers.py answers one request (no sockets); server.py checks the arguments and runs
it with uvicorn.
"""
