"""local/cache/fs.py directly: the blob hash and the link text a snapshot holds (its folders, opened without
following a link, are nofollow.Folder: tests/unit/test_nofollow.py)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from kernel_factory.atomic import CHUNK
from kernel_factory.local.cache import fs as cachefs


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, 2 * CHUNK + 7])
def test_sha256_fd_hashes_the_whole_file_from_its_start(tmp_path: Path, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        os.read(fd, 5)  # wherever the descriptor stands
        assert cachefs.sha256_fd(fd) == hashlib.sha256(data).hexdigest()
        assert cachefs.sha256_fd(fd) == hashlib.sha256(data).hexdigest()  # again: from the start
    finally:
        os.close(fd)


@pytest.mark.parametrize(("rel", "text"), [
    ("a.py", "../../../../blobs/h"),
    ("x/a.py", "../../../../../blobs/h"),
    ("x/y/a.so", "../../../../../../blobs/h"),
])
def test_relative_blob_resolves_from_the_snapshot_to_the_blob(tmp_path: Path, rel: str, text: str) -> None:
    assert cachefs.relative_blob(rel, "h") == text
    repo = tmp_path / "kernels--org--act"
    link = repo / "snapshots" / ("a" * 40) / "build" / "torch-universal" / rel
    link.parent.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "blobs" / "h").write_text("blob")
    link.symlink_to(cachefs.relative_blob(rel, "h"))
    assert link.read_text() == "blob"
