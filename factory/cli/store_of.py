"""The local store folder that yank, unyank, status and prune change (with the store lock's wait)."""

from __future__ import annotations

from pathlib import Path

from ..config import Flags, Location
from ..errors import UsageError
from ..record import FILES


def local_store(flags: Flags, command: str) -> tuple[Location, Path, float]:
    """(the store, its folder, how long to wait for its lock); UsageError for a remote or missing store."""
    from .. import config

    opts = config.resolve(flags)
    store = opts.store
    if store.local is None:
        raise UsageError(f"{command} changes a local store folder, not {store}; run it where the store is a folder "
                         "(copy it down), then publish")
    if not (store.local / FILES).is_dir():
        raise UsageError(f"no store at {store.local} (no files/ folder): check --store (or `store` in the config), "
                         "or run `kernel-factory build` first")
    return store, store.local, opts.environment.lock_wait_s
