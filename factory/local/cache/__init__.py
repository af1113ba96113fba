"""The Hugging Face Hub cache that kernels reads offline: its one writer and the readers the commands need.

``download`` and ``local-kernels --cache`` write through ``Writer`` and read through the functions named here;
nothing outside this package imports its modules (an import-linter contract). The rules of the writer are in
writer.py; underneath it, place.py judges, stages and moves one variant in, stage.py copies and checks bytes
in a private scratch folder, read.py reads back and takes back by descriptors, fs.py holds the modes, trust and
hashes the cache needs; every folder is opened by nofollow.Folder (factory/nofollow.py), never through a link.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from . import writer
from .place import MARKER, ORIGINS, CacheConflict, Made, Placement, origin_of
from .read import read_own, repo_folder, take_back, variant_holds, write_own
from .stage import CacheRefused
from .writer import SHA, CacheUnusable, cache_root, is_ours, read_ref, scratch, valid_ref

__all__ = ["MARKER", "ORIGINS", "SHA", "CacheConflict", "CacheRefused", "CacheUnusable", "Placement",
           "Writer", "cache_root", "is_ours", "origin_of", "read_own", "read_ref", "repo_folder", "scratch",
           "valid_ref", "variant_holds", "write_own"]


class Writer:
    """One command's writes into the cache at ``root``: ``origin`` ("download" or "local-kernels") goes in the
    marker of each snapshot it makes, and ``notes`` gets a line for each ref left as it was (and each link an
    earlier kernel-factory left, now a checked copy). It keeps what each call put in the cache, so that
    ``take_back`` undoes all of it (download's all or nothing)."""

    def __init__(self, root: Path, origin: str, notes: list[str] | None = None) -> None:
        self.root, self.origin = root, origin
        self.notes: list[str] = notes if notes is not None else []
        self._made: dict[str, list[Made]] = {}  # repository id -> what this writer put there, in order

    def place(self, item: Placement) -> Path:
        """``item`` in the cache, every byte checked first; the variant folder kernels will load (writer.place)."""
        return writer.place(self.root, item, origin=self.origin, notes=self.notes,
                            made=self._made.setdefault(item.repo_id, []))

    def set_refs(self, repo_id: str, sha: str, refs: Iterable[str]) -> None:
        """Point each of ``refs`` at ``sha``, whose snapshot is in the cache already (writer.set_refs)."""
        writer.set_refs(self.root, repo_id, sha, refs, origin=self.origin, notes=self.notes,
                        made=self._made.setdefault(repo_id, []))

    def take_back(self) -> None:
        """Undo what this writer put in the cache, by identity: no blob, nothing others placed (read.take_back)."""
        for repo_id, made in self._made.items():
            take_back(self.root, repo_id, made)
