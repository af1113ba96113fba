"""One writer at a time per store: an advisory lock file beside the records."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .. import atomic
from ..errors import UsageError
from . import Store
from .local import LocalStore

LOCK_NAME = ".kernel-factory.lock"


@contextmanager
def store_lock(store: Store, wait_s: float | None = None) -> Iterator[None]:
    """Hold the store's lock; wait up to ``wait_s`` seconds (env KERNEL_FACTORY_LOCK_WAIT, default 600)."""
    if not isinstance(store, LocalStore):  # S3 stores: shards write distinct keys; no lock needed
        yield
        return
    if wait_s is None:
        wait_s = float(os.environ.get("KERNEL_FACTORY_LOCK_WAIT", "600"))
    store.root.mkdir(parents=True, exist_ok=True)
    path = store.root / LOCK_NAME
    with open(path, "a+") as f:
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise UsageError(
                        f"{store.root}: another kernel-factory run holds {LOCK_NAME}; wait for it to finish "
                        "(or raise KERNEL_FACTORY_LOCK_WAIT)"
                    ) from None
                if not told:
                    print(f"waiting for another kernel-factory run on {store.root} ...", file=sys.stderr)
                    told = True
                time.sleep(0.2)
        try:
            atomic.remove_stale_tmp(store.root, time.time())  # leftovers of killed runs, anywhere below
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
