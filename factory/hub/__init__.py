"""``kernel-factory serve --hub``: the store as a read-only Hugging Face Hub for kernels (docs/hub.md).

members.py maps a wheel's members back to the Hub's ``build/<variant>/`` paths; wheels.py checks a wheel (its
sha256 in the index, every member against its RECORD) before any byte of it is served and streams members;
catalog.py turns the store's records into repositories, revisions and refs; answers.py answers one request
(no sockets); server.py runs it with uvicorn.
"""
