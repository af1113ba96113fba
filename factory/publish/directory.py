"""A local folder (or ``file://`` URL) as a publish destination: each file copied under a temporary name beside
its target, then renamed (never a hard link: a write to the published file would change the store's).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import Unreachable
from ..nofollow import Tree, copy_file, remove_stale_tmp
from .base import Destination, LocalFile, State

# A destination has no lock: a hidden temporary file this old belongs to a publish that was killed.
STALE_TMP_S = 3600


class DirectoryDestination(Destination):
    """Publish into ``root``; deletes only a killed publish's hidden leftovers and withdrawn files it put there."""

    workers = 8

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.display = str(self.root)
        self.tree = Tree(self.root)  # its folders opened without following a link (nofollow.Tree), then checked

    def prepare(self, files: Sequence[LocalFile], *, dry_run: bool = False) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise Unreachable(f"--to {self.root} is a file, not a folder; give a folder")
        if dry_run:  # nothing is made or cleaned; a missing folder only means every file is new
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Unreachable(f"cannot create {self.root}: {exc.strerror}; fix --to or its permissions") from None
        if not os.access(self.root, os.W_OK):
            raise Unreachable(f"cannot write to {self.root}; fix --to or its permissions")
        remove_stale_tmp(self.root, time.time() - STALE_TMP_S)

    def state(self, file: LocalFile) -> State:
        target = self.root / file.rel
        if target.is_symlink():  # replaced by the rename of put, never followed
            return "changed"
        if not target.is_file():
            return "new"
        sa, sb = file.path.stat(), target.stat()
        if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
            return "same"
        if sa.st_size != sb.st_size:
            return "changed"
        # Compared here, every time (filecmp.cmp would answer from its cache of (size, mtime) signatures).
        with open(file.path, "rb") as fa, open(target, "rb") as fb:
            while True:
                ca, cb = fa.read(1 << 20), fb.read(1 << 20)
                if ca != cb:
                    return "changed"
                if not ca:
                    return "same"

    def has(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def put(self, file: LocalFile) -> None:
        folder, _, name = file.rel.rpartition("/")
        try:
            copy_file(file.path, Path(self.tree.folder(folder), name))  # a copy: see the module docstring
        except OSError as exc:
            raise Unreachable(f"cannot write {self.root / file.rel}: {exc.strerror}; fix --to or free space") from None

    def same_root(self, root: Path) -> bool:
        return self.root.resolve() == root.resolve()

    def remove(self, rel: str, size: int) -> bool:
        """Delete ``rel`` if a regular file of ``size`` bytes (never through a link), then the folders left empty."""
        folder, _, name = rel.rpartition("/")
        where = self.tree.checked(folder)  # each folder lstat'ed: never through a link
        if where is None:
            return False
        parent = Path(where)
        target = parent / name
        try:
            st = os.lstat(target)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return False
        try:
            os.unlink(target)
            while parent != Path(self.tree.root) and not os.listdir(parent):
                os.rmdir(parent)
                parent = parent.parent
        except OSError as exc:
            raise Unreachable(f"cannot remove {self.root / rel}: {exc.strerror}; fix --to or its permissions") from None
        return True
