"""What every publish destination shares: the ``Destination`` protocol and the local files it is given."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from ..nofollow import file_digest

State = Literal["new", "changed", "same"]


@dataclass
class LocalFile:
    """One file of the local root: its path relative to the root (``/``-separated) and size."""

    rel: str
    path: Path
    size: int
    _sha256: str | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]

    def sha256(self) -> str:
        if self._sha256 is None:
            self._sha256 = file_digest(self.path, "sha256", follow=False)  # never through a link
        return self._sha256


class Destination(Protocol):
    """Where a root is published: directory.py, s3.py and upload.py beside this file subclass it for its defaults."""

    display: str  # how the destination is named in messages (never with secrets)
    workers: int  # threads that check and put files (1 where the client is not thread-safe)

    def wants(self, file: LocalFile) -> bool:
        """Whether this destination takes ``file`` at all (an upload endpoint takes wheels only)."""
        return True

    def prepare(self, files: Sequence[LocalFile], *, dry_run: bool = False) -> None:
        """Check the destination is usable and learn what it holds (Unreachable); ``dry_run``: change nothing."""

    def state(self, file: LocalFile) -> State:
        """``new``, ``changed`` or ``same`` (already there with equal bytes)."""

    def has(self, rel: str) -> bool:
        """Whether a file is at ``rel`` (relative to the published root) there now (after ``prepare``)."""

    def put(self, file: LocalFile) -> None:
        """Publish ``file`` (each file whole or not at all); Refused for this file only."""

    def same_root(self, root: Path) -> bool:
        """Whether publishing here would write into the folder ``root`` itself (a folder destination only)."""
        return False

    def close(self) -> None:
        return None
