"""The store that yank, unyank, status and prune change: opened once, with the command's options."""

from __future__ import annotations

from ..config import Flags
from ..errors import UsageError
from ..record import FILES
from ..store import Store, open_store


def store_of(flags: Flags, command: str, *, remote: bool = False) -> Store:
    """The store, opened with the resolved options (an s3:// store's put arguments and Cache-Control, a folder's
    lock wait); UsageError for a missing store folder, or for an ``s3://`` store unless ``remote`` (every command
    here takes one now; the flag stays for a command that cannot)."""
    from .. import config

    opts = config.resolve(flags)
    store = opts.store
    if store.local is None and not remote:
        raise UsageError(f"{command} changes a local store folder, not {store}; run it where the store is a folder "
                         "(copy it down), then publish")
    if store.local is not None and not (store.local / FILES).is_dir():
        raise UsageError(f"no store at {store.local} (no files/ folder): check --store (or `store` in the config), "
                         "or run `kernel-factory build` first")
    return open_store(store, opts)
