"""One installed kernel wheel, as LOCAL_KERNELS would name it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class InstalledKernel:
    """One installed kernel wheel, as LOCAL_KERNELS would name it."""

    dist: str  # distribution name as installed
    version: str  # installed version, local label included
    key: str  # LOCAL_KERNELS key: the Hub repository id, else the kernel's name
    repo_id: str | None
    name: str
    variant: str | None
    folder: Path  # LOCAL_KERNELS' PATH: the installed variant root (wheel/layout.py; older wheels: the package)
    metadata: dict[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # why LOCAL_KERNELS cannot point at it at all
    revision: str | None = None  # the commit it was built from (provenance), a sha for a Hub build
    ref: str | None = None  # the branch or tag that named that commit (provenance)
    files: tuple[tuple[str, str], ...] = ()  # the variant root's files as RECORD lists them: (path, sha256 hex)
    files_problem: str | None = None  # why RECORD cannot vouch for the package folder's bytes (None: it can)
    signed: bool = False  # the package carries the Hub's metadata.json.sigstore

    @property
    def title(self) -> str:
        who = f" ({self.repo_id})" if self.repo_id else ""
        return f"{self.name}{who} {self.version}"
