"""download's own record in the cache (local/download/command.py's ``FILES`` beside a snapshot's marker): which files it
hashes, and a commit holding two variants, each found again by its own wheel. The interpreter's probe is replaced by
its facts; the index is a folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from download_kit import CPU, SHA1, SHA2, Index, env, kernel_wheel
from huggingface_hub import scan_cache_dir
from kernel_factory.local.download import command as download
from kernel_factory.local.download.command import DownloadArgs, _file_hashes, run_download


def test_file_hashes_leave_out_bytecode_at_any_depth(tmp_path: Path) -> None:
    files = {"a.py": b"a", "b.pyc": b"compiled", "c.py": b"c", "d.txt": b"d", "sub/e.py": b"e",
             "sub/deeper/f.so": b"\0f", "__pycache__/a.cpython-311.pyc": b"x", "__pycache__/notes.txt": b"n",
             "sub/__pycache__/g.txt": b"g", "__pycache__x/h.py": b"h"}
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    assert _file_hashes(tmp_path) == {rel: hashlib.sha256(files[rel]).hexdigest() for rel in (
        "a.py", "c.py", "d.txt", "sub/e.py", "sub/deeper/f.so", "__pycache__x/h.py")}


def test_each_variant_of_a_commit_is_found_again_by_its_own_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The index had a universal wheel of relu's commit, then a CPU build of the same commit too (preferred): the
    snapshot holds both variants and the record both wheels; a third run downloads nothing."""
    index = Index(tmp_path / "index")
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELS_CACHE", str(cache))
    monkeypatch.setattr(download, "probe", lambda python: env())
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": "org/relu", "version": 1}, "lock": {"commit": SHA1}}]))

    def run() -> list[str]:
        assert run_download(DownloadArgs(str(project), str(index.root))) == 0
        out = capsys.readouterr()
        assert out.err == ""
        return out.out.splitlines()

    universal = index.add(kernel_wheel(tmp_path / "u", "relu"))
    assert run()[0] == f"org/relu  {SHA1[:12]}  torch-universal  {universal}  (downloaded)"
    cpu = index.add(kernel_wheel(tmp_path / "c", "relu", variant=CPU, code=b"X = 'cpu'\n"))
    assert run()[0] == f"org/relu  {SHA1[:12]}  {CPU}  {cpu}  (downloaded)"
    record = json.loads((cache / "kernels--org--relu" / "snapshots" / SHA1 / download.FILES).read_text())
    assert list(record) == ["torch-universal", CPU] and record[CPU]["wheel"] == cpu
    (index.root / "files" / cpu).unlink()  # a download would fail now
    assert run() == [f"org/relu  {SHA1[:12]}  {CPU}  {cpu}  (already there)",
                     f"1 kernel in {cache}: 0 downloaded, 1 already there"]
    info = scan_cache_dir(cache)
    assert info.warnings == []
    assert [(r.repo_id, [(rev.commit_hash, sorted(rev.refs)) for rev in r.revisions]) for r in info.repos] == [
        ("org/relu", [(SHA1, ["v1"])])]


def test_the_hubs_copy_does_not_stop_the_kernels_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    index = Index(tmp_path / "index")
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELS_CACHE", str(cache))
    monkeypatch.setattr(download, "probe", lambda python: env())
    index.add(kernel_wheel(tmp_path / "r", "relu"))
    act = index.add(kernel_wheel(tmp_path / "a", "act", revision=SHA2))
    hub = cache / "kernels--org--relu" / "snapshots" / SHA1 / "build" / "torch-universal"
    hub.mkdir(parents=True)
    (hub / "__init__.py").write_text("hub\n")
    (hub / "metadata.json").write_text("{}")
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": "org/relu", "version": 1}, "lock": {"commit": SHA1}},
        {"dependency": {"repo-id": "org/act", "version": 1}, "lock": {"commit": SHA2}}]))
    assert run_download(DownloadArgs(str(project), str(index.root))) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"org/relu  {SHA1[:12]}  torch-universal  (the Hub's copy, already there)",
        f"org/act  {SHA2[:12]}  torch-universal  {act}  (downloaded)",
        f"2 kernels in {cache}: 1 downloaded, 1 already there"]
    assert (cache / "kernels--org--act" / "refs" / "v1").read_text() == SHA2
    assert (cache / "kernels--org--relu" / "refs" / "v1").read_text() == SHA1
