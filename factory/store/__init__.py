"""The store: the source of truth. Wheels, their ``.metadata`` files and ``.json`` records under ``<root>/files/``.

The index is rendered from the records alone. ``open_store`` picks the backend
for a location: a local folder (local.py) or ``s3://bucket/prefix`` (s3.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..record import Record


class Store(Protocol):
    """Where wheels and records live: a local folder (local.py) or S3 (s3.py).

    ``records()`` lists the valid records whose wheel is there (check.py checks each one) and leaves in
    ``damaged`` one line per record it skipped: damaged, invalid, or without its wheel.
    """

    damaged: list[str]

    def records(self) -> list[Record]: ...

    def put(self, wheel: Path, metadata: bytes, record: Record) -> None: ...


def open_store(location: str | Path, options: Any = None) -> Store:
    """A local folder, or ``s3://bucket/prefix`` (s3.py; ``options``: config.Options for its puts' headers)."""
    text = str(location)
    if text.startswith("s3://"):
        from ..publish.s3 import DEFAULT_PUT, PutOptions
        from .s3 import S3Store

        return S3Store(text, put=DEFAULT_PUT if options is None else PutOptions.from_options(options))
    from .local import LocalStore

    return LocalStore(Path(text.removeprefix("file://")))
