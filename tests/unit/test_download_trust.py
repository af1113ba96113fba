"""``download`` (run_download whole, the index a folder) against a cache others write too (issue 48): its "already
there" shortcut trusts no record others could forge or reach through a planted link, the Hub's own snapshot is
held to an old-format lock's hash, a lock the cache satisfies writes nothing, and refs follow the lock.
huggingface_hub's scan_cache_dir is the oracle after each run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from cache_oracle import scan
from download_kit import SHA1, SHA2
from kernel_factory.local.download import command as download
from kernel_factory.nofollow import LinkRefused
from kernel_factory.verify.lockfile import files_lock_hash
from test_download_run import Run

REPO = "kernels--org--relu"


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(tmp_path, monkeypatch, capsys)


def forge(run: Run, sha: str = SHA1) -> Path:
    """What another writer of the repository folder can do: the variant's __init__.py swapped for its own bytes
    (a new blob, the link moved to it) and download's record rewritten to match."""
    snap = run.cache / REPO / "snapshots" / sha
    evil = b"import os  # the attacker's\n"
    digest = hashlib.sha256(evil).hexdigest()
    (run.cache / REPO / "blobs" / digest).write_bytes(evil)
    link = snap / "build" / "torch-universal" / "__init__.py"
    link.unlink()
    link.symlink_to(f"../../../../blobs/{digest}")
    record = json.loads((snap / download.FILES).read_text())
    record["torch-universal"]["files"]["__init__.py"] = digest
    (snap / download.FILES).unlink()
    (snap / download.FILES).write_text(json.dumps(record))
    return snap / download.FILES


@pytest.mark.parametrize("how", ["other owner", "writable by others"])
def test_a_forged_record_is_no_shortcut(run: Run, how: str) -> None:
    relu = run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    assert run()[0] == 0
    record = forge(run)
    if how == "other owner":
        os.chown(record, 65534, 65534)
    else:
        record.chmod(0o666)
    code, _, err = run()
    assert code == 3 and relu
    assert err == [f"error: org/relu: snapshot {SHA1} in {run.cache} already holds build/torch-universal with other "
                   "bytes (written by download); left as it is: a commit's snapshot never changes; remove that "
                   "snapshot to replace it"]


def test_a_planted_link_at_the_repository_folder_is_not_read_through(run: Run, tmp_path: Path) -> None:
    run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    assert run()[0] == 0
    forge(run)
    elsewhere = tmp_path / "attackers"
    (run.cache / REPO).rename(elsewhere)
    (run.cache / REPO).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(LinkRefused) as info:  # exit 4
        run()
    assert str(info.value) == (f"{run.cache / REPO} -> {elsewhere}: a symbolic link in the Hub cache where "
                               "kernel-factory expects a folder, and it never writes or reads through a link; remove "
                               "the link (rm, not rm -r) and run again")


def test_the_hubs_snapshot_is_held_to_the_old_format_locks_hash(run: Run, tmp_path: Path) -> None:
    run.wheel("relu")
    good = tmp_path / "good"
    good.mkdir()
    (good / "__init__.py").write_bytes(b"X = 1\n")
    (good / "metadata.json").write_text(json.dumps({"name": "relu"}))
    lock_hash = files_lock_hash([(p.name, p) for p in good.iterdir()])
    (run.project / "kernels.lock").write_text(json.dumps([
        {"repo_id": "org/relu", "sha": SHA1, "variants": {"torch-universal": {"hash": lock_hash,
                                                                             "hash_type": "git_lfs_concat"}}}]))
    hub = run.cache / REPO / "snapshots" / SHA1 / "build" / "torch-universal"
    hub.mkdir(parents=True)
    (hub / "__init__.py").write_text("import os  # not the locked bytes\n")
    (hub / "metadata.json").write_text(json.dumps({"name": "relu"}))
    code, out, err = run()
    assert code == 3
    assert err == [f"error: the Hub's copy at {hub}: its files do not match the kernels.lock hash of org/relu "
                   f"torch-universal ({lock_hash[:19]}...); nothing was installed: check the index, or re-lock with "
                   "`kernels lock` (docs/download.md); left as it is: remove that snapshot and run again"]
    shutil.copy(good / "__init__.py", hub / "__init__.py")  # the locked bytes: kept as the Hub's copy
    assert run()[:2] == (0, [f"org/relu  {SHA1[:12]}  torch-universal  (the Hub's copy, already there)",
                             f"1 kernel in {run.cache}: 0 downloaded, 1 already there"])


def test_a_lock_the_cache_satisfies_writes_nothing(run: Run) -> None:
    relu = run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    assert run()[0] == 0
    shutil.rmtree(run.cache / ".locks")
    before = {str(p): p.lstat().st_mtime_ns for p in [run.cache, *run.cache.rglob("*")]}
    assert run() == (0, [f"org/relu  {SHA1[:12]}  torch-universal  {relu}  (already there)",
                         f"1 kernel in {run.cache}: 0 downloaded, 1 already there"], [])
    assert {str(p): p.lstat().st_mtime_ns for p in [run.cache, *run.cache.rglob("*")]} == before


def test_refs_follow_the_lock_back_to_a_commit_already_in_the_cache(run: Run) -> None:
    run.wheel("relu")
    run.wheel("relu", SHA2, version="1.1.0")
    for sha in (SHA1, SHA2, SHA1):
        run.lock(("org/relu", sha, 1))
        assert run()[0] == 0
        assert (run.cache / REPO / "refs" / "v1").read_text() == sha
    assert scan(run.cache) == {"org/relu": {SHA1: ["v1"], SHA2: []}}
