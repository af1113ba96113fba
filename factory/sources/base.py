"""The ``Source`` protocol: one kernel repository, at any revision; and ``Refs``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Refs:
    """Branch and tag names -> commit sha."""

    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


class Source(Protocol):
    """One kernel repository, at any revision."""

    #: Hub repository id ("org/name"), or None for a local source without one.
    repo_id: str | None
    #: Repository name (last path component), used for the distribution name fallback.
    name: str
    #: Human-readable location for messages ("kernels-community/relu", "/path/to/repo").
    display: str

    def refs(self) -> Refs:
        ...

    def resolve(self, revision: str) -> str:
        """A branch, tag or (possibly short) commit -> full commit sha; VersionNotFound if unknown."""

    def commit_count(self, sha: str) -> int:
        """Number of commits reachable from ``sha`` (including it)."""

    def commit_time(self, sha: str) -> int:
        """Commit time of ``sha`` as a Unix timestamp."""

    def variants(self, sha: str) -> list[str]:
        """Names of the folders under ``build/`` at ``sha``, sorted."""

    def read_text(self, sha: str, path: str) -> str | None:
        """A small top-level file (README.md, CARD.md) at ``sha``, or None if absent."""

    def fetch(self, sha: str, variant: str, into: Path | None = None) -> Path:
        """A local folder holding ``build/<variant>/`` at ``sha`` exactly as in the repository; what it writes
        goes into a folder made in ``into`` (None: TMPDIR), removed by ``release``."""

    def lfs_paths(self, sha: str, variant: str) -> set[str]:
        """Paths (relative to build/<variant>/) stored with LFS, whose lock hash is the LFS object's own."""

    def sizes(self, sha: str, variant: str) -> tuple[int, int] | None:
        """(bytes of build/<variant>/, bytes ``fetch`` writes into scratch for it), or None when not known."""

    def downloads(self) -> list[Path]:
        """Folders where a fetch in progress writes its partial files (``*.incomplete``), for progress; [] if none."""

    def release(self) -> None:
        """Remove every folder ``fetch`` made (a variant can be gigabytes); a later fetch makes a fresh one."""
