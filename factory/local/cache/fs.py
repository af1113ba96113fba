"""What the Hub cache's writer and readers need beyond link-safe access: modes, trust, hashes, link text.

The Hub cache may be shared by many environments and users (a cluster's ``HF_HOME``), so anything below its
root may have been planted. Its folders are opened one level at a time and never through a link by
``nofollow.Folder`` (factory/nofollow.py, the one home of link-safe access), made with ``where=HUB_CACHE`` so each
refusal names the Hub cache; ``open_root`` opens its root. The cache root itself is the user's choice and may be
a link (``HF_HOME`` on a scratch file system is common); everything from it down is checked.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ...atomic import stream_digest
from ...nofollow import HUB_CACHE, Folder

#: what vfat and exFAT answer where a link (symbolic or hard) or a mode cannot be made there
NOT_HERE = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS)


def set_mode(target: int | str, mode: int) -> None:
    """chmod ``target`` (a descriptor, or a path in the run's private folder), as huggingface_hub does: where
    the file system keeps no modes (vfat, exFAT) the failure is passed over."""
    try:
        os.chmod(target, mode)
    except OSError as exc:
        if exc.errno not in NOT_HERE:
            raise


def trusted(st: os.stat_result) -> bool:
    """Whether a file already in the cache can be taken as it is: owned by this user, writable by no one else
    and linked nowhere else (a hard link to a file outside the cache would let its owner change it later)."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022 and st.st_nlink == 1


def sha256_fd(fd: int) -> str:
    """The sha256 hex digest of what ``fd`` holds from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    with open(fd, "rb", buffering=0, closefd=False) as f:
        return stream_digest(f)


def relative_blob(rel: str, hexdigest: str) -> str:
    """The link text from ``snapshots/<sha>/build/<variant>/<rel>`` to ``blobs/<hex>``, relative as
    huggingface_hub writes it."""
    return "/".join([".."] * (3 + rel.count("/") + 1) + ["blobs", hexdigest])


def open_root(path: Path, *, create: bool = True) -> Folder:
    """The Hub cache's root folder (made if missing, with ``create``; it may be a link: the user's choice); the
    folders below it name the Hub cache in their refusals."""
    return Folder.root(path, HUB_CACHE, create=create)
