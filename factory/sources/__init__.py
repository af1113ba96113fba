"""Sources of kernel repositories (the ``Source`` protocol, base.py): the Hub (hub.py) and local folders or git
repositories (local.py)."""

from __future__ import annotations

from pathlib import Path

from ..config import Variables
from .base import Source


def open_source(location: str, *, repo_id: str | None = None, repo_type: str | None = None,
                hub: bool = False, env: Variables) -> Source:
    """A local path (folder or git repository) or a Hub repository id (always, with ``hub``); ``env``: what
    config.resolve read from the environment (Options.variables)."""
    from .local import LocalSource, looks_local

    if not hub and looks_local(location):
        return LocalSource(Path(location), repo_id=repo_id, source_date_epoch=env.source_date_epoch)
    from .hub import HubSource

    return HubSource(location, repo_type=repo_type, env=env)
