"""Prune old versions and carry withdrawals to folder and S3 destinations; kill -9 at each step.

Stores are synthesized as in test_withdraw.py (whose helpers these tests share) and served on 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from index_synth import index_pages
from kernel_factory.index.command import index_with_adoption
from kernel_factory.index.pages import DEFAULT_BASE_URL
from kernel_factory.publish.run import list_root
from servers import PASSWORD, USER, page_links, pypi_server
from support import http_server, kf
from test_publish_s3 import bucket_keys
from test_withdraw import CPU_ROOT, assert_links_resolve, cli, make_store, pip_fails, snapshot, uv_pick

pytestmark = pytest.mark.integration


# --- prune --------------------------------------------------------------------------------------------------

SERIES = ("1.0.1", "1.0.2", "1.0.3", "1.0.4", "2.0.0", "2.0.1", "2.0.2")


def set_revisions(store: Path) -> None:
    """Give each version its own commit (the synthetic records share one), as a Hub branch would."""
    from kernel_factory.nofollow import write_bytes

    for path in sorted((store / "files").glob("*.whl.json")):
        data = json.loads(path.read_bytes())
        data["revision"] = data["kernel_version"].replace(".", "").ljust(40, "a")
        write_bytes(path, (json.dumps(data) + "\n").encode())
    index_with_adoption(str(store), store, None, DEFAULT_BASE_URL)


def wheels(store: Path) -> set[str]:
    return {p.name for p in (store / "files").glob("*.whl")}


def test_prune_dry_run_then_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    files = {p.name: p.read_bytes() for p in (store / "files").iterdir()}
    assert cli("prune", "--keep-per-major", "2", "--store", store, "--dry-run", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    going = [f"img2grey-{v}+{label}-py3-none-linux_x86_64.whl" for v in ("1.0.1", "1.0.2", "2.0.0")
             for label in ("torch213cpucxx11", "torch27cu128cxx11")]  # fmt: skip
    assert sorted(doc["removed"]) == sorted(going)
    expected_bytes = sum(len(files[n]) + len(files[f"{n}.metadata"]) + len(files[f"{n}.json"]) for n in going)
    assert doc["bytes"] == expected_bytes and doc["dry_run"] is True
    assert doc["kept"]["img2grey 2.0.2"] == ["newest", "keep-per-major 2"]
    assert {p.name: p.read_bytes() for p in (store / "files").iterdir()} == files  # a dry run changes nothing
    assert cli("prune", "--keep-per-major", "2", "--store", store) == 0
    out = capsys.readouterr().out
    assert f"prune: removed 6 wheel(s) of 3 version(s), freed {expected_bytes / 1e6:.1f} MB ({expected_bytes} bytes)" \
        in out
    assert wheels(store) == set(n for n in files if n.endswith(".whl")) - set(going)
    assert not any((store / "files" / f"{n}{ext}").exists() for n in going for ext in ("", ".metadata", ".json"))
    assert_links_resolve(store)
    with http_server(store) as url:
        assert "No matching distribution" in pip_fails(f"{url}/simple", "img2grey==1.0.2+torch213cpucxx11")
        assert uv_pick(f"{url}/{CPU_ROOT}", "img2grey<2") == "img2grey==1.0.4+torch213cpucxx11"


def test_prune_rules_from_the_config_and_a_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    set_revisions(store)
    lock = tmp_path / "kernels.lock"
    lock.write_text(json.dumps([{"dependency": {"repo-id": "kernels-community/img2grey", "version": 1},
                                 "lock": {"commit": "101".ljust(40, "a")}}]))  # fmt: skip
    config = tmp_path / "factory.toml"
    config.write_text(f'[factory]\nstore = "{store}"\n\n[prune]\nkeep-per-major = 1\nkeep-locked = "kernels.lock"\n')
    assert cli("prune", "--config", config, "--json", "-q") == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted({name.split("-")[1].split("+")[0] for name in doc["removed"]}) == ["1.0.2", "1.0.3", "2.0.0",
                                                                                     "2.0.1"]  # fmt: skip
    assert doc["kept"] == {"img2grey 1.0.1": ["locked"], "img2grey 1.0.4": ["keep-per-major 1"],
                           "img2grey 2.0.2": ["newest", "keep-per-major 1"],
                           "my-kernel 0.1.0": ["newest", "keep-per-major 1"]}  # fmt: skip
    config.write_text(f'[factory]\nstore = "{store}"\n\n[prune]\nkeep-per-majr = 1\n')
    proc = kf("prune", "--config", config)
    assert proc.returncode == 2 and "unknown key 'keep-per-majr'; did you mean 'keep-per-major'?" in proc.stderr


def test_prune_named_versions_refuses_locked_and_newest(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    set_revisions(store)
    lock = tmp_path / "kernels.lock"
    lock.write_text(json.dumps([{"repo_id": "kernels-community/img2grey", "sha": "102".ljust(40, "a"),
                                 "variants": {}}]))  # the older lock format  # fmt: skip
    before = snapshot(store)
    proc = kf("prune", "img2grey<1.0.4", "--keep-locked", lock, "--store", store)
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1, proc.stderr
    assert "img2grey 1.0.2 is pinned by a kernels.lock given with --keep-locked" in proc.stderr
    proc = kf("prune", "img2grey>=2.0.1", "--store", store)
    assert proc.returncode == 3 and "img2grey 2.0.2 is the project's newest version" in proc.stderr
    assert snapshot(store) == before
    assert cli("prune", "img2grey==1.0.3+torch27cu128cxx11", "--keep-locked", lock, "--store", store, "--json",
               "-q") == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["removed"] == [
        "img2grey-1.0.3+torch27cu128cxx11-py3-none-linux_x86_64.whl"]
    assert_links_resolve(store)


def start_prune(store: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", "prune", "--keep-per-major", "1", "--store",
                             str(store), "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.parametrize("when", ["journal", "deleting", "second-index"])
def test_kill_9_at_each_step_leaves_a_store_the_next_prune_finishes(tmp_path: Path, when: str) -> None:
    """kill -9 of the prune's main process when the journal appears, when the first record is deleted, and when
    every file is gone (the last index run): every page links only files that are there, and the next prune
    leaves the store and pages an uninterrupted prune leaves."""
    versions = tuple(f"1.0.{i}" for i in range(40))
    original = make_store(tmp_path / "original", versions)
    reference = tmp_path / "reference"
    shutil.copytree(original, reference)
    assert cli("prune", "--keep-per-major", "1", "--store", reference, "-q") == 0
    store = tmp_path / "killed"
    shutil.copytree(original, store)
    first = store / "files" / "img2grey-1.0.0+torch213cpucxx11-py3-none-linux_x86_64.whl.json"
    last = store / "files" / "img2grey-1.0.9+torch27cu128cxx11-py3-none-linux_x86_64.whl"
    journal = store / "files" / ".prune-pending.json"
    def seen() -> bool:
        if when == "journal":
            return journal.exists()
        return not (first if when == "deleting" else last).exists()

    proc = start_prune(store)
    while proc.poll() is None and not seen():
        pass
    proc.kill()  # the main process alone, as kill -9 PID does
    proc.wait(30)
    assert proc.returncode == -9, f"the prune ended ({proc.returncode}) before the kill: make the store larger"
    assert_links_resolve(store)
    assert cli("prune", "--keep-per-major", "1", "--store", store, "-q") == 0
    assert snapshot(store) == snapshot(reference)
    assert not journal.exists()


# --- publish ------------------------------------------------------------------------------------------------


def test_publish_carries_prune_and_yank_to_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    dest = tmp_path / "site"
    assert cli("publish", "--store", store, "--to", dest, "-q") == 0
    (dest / "files" / "someone-else-1.0-py3-none-any.whl").write_bytes(b"theirs")  # not kernel-factory's
    changed = dest / "files" / "img2grey-1.0.1+torch27cu128cxx11-py3-none-linux_x86_64.whl.metadata"
    changed.write_bytes(b"edited at the destination")  # no longer the file kernel-factory put there
    assert cli("prune", "--keep-per-major", "2", "--store", store, "-q") == 0
    assert cli("yank", "img2grey==2.0.2", "--store", store, "-q") == 0
    capsys.readouterr()
    assert cli("publish", "--store", store, "--to", dest, "--dry-run", "--json") == 0
    dry = json.loads(capsys.readouterr().out)
    assert len(dry["removed"]) == 18 and (dest / "files/img2grey-1.0.1+torch27cu128cxx11-py3-none-linux_x86_64.whl"
                                          ).exists()  # fmt: skip
    assert cli("publish", "--store", store, "--to", dest, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(doc["removed"]) == sorted(r for r in dry["removed"] if not r.endswith(changed.name))
    left = {p.name for p in (dest / "files").iterdir()}
    assert left == {p.name for p in (store / "files").iterdir() if not p.name.startswith(".")} | {
        "someone-else-1.0-py3-none-any.whl", changed.name}
    assert_links_resolve(dest)
    assert cli("publish", "--store", store, "--to", dest, "--json") == 0  # nothing more to do
    assert json.loads(capsys.readouterr().out)["removed"] == []
    with http_server(dest) as url:
        assert uv_pick(f"{url}/{CPU_ROOT}", "img2grey") == "img2grey==2.0.1+torch213cpucxx11"


def test_publish_carries_prune_to_s3_only_its_own_objects(tmp_path: Path, s3: Any,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    s3.create_bucket(Bucket="withdraw")
    to = "s3://withdraw/site"
    assert cli("publish", "--store", store, "--to", to, "-q") == 0
    s3.put_object(Bucket="withdraw", Key="site/files/someone-else-1.0-py3-none-any.whl", Body=b"theirs")
    old = "site/files/img2grey-1.0.1+torch27cu128cxx11-py3-none-linux_x86_64.whl.metadata"
    s3.put_object(Bucket="withdraw", Key=old, Body=b"x" * 104)  # same size, not put by kernel-factory (no sha256)
    assert cli("prune", "--keep-per-major", "2", "--store", store, "-q") == 0
    capsys.readouterr()
    assert cli("publish", "--store", store, "--to", to, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["removed"]) == 17 and old.removeprefix("site/") not in doc["removed"]
    keys = bucket_keys(s3, "withdraw", "site")
    local = {f.rel for f in list_root(store)}
    assert keys == local | {"files/someone-else-1.0-py3-none-any.whl", old.removeprefix("site/")}
    assert_bucket_links_resolve(s3, "withdraw", "site")


def test_kill_9_during_publish_deletions_then_the_next_publish_finishes(tmp_path: Path) -> None:
    store = make_store(tmp_path, tuple(f"1.0.{i}" for i in range(40)))
    dest, reference = tmp_path / "site", tmp_path / "reference"
    for to in (dest, reference):
        assert cli("publish", "--store", store, "--to", to, "-q") == 0
    assert cli("prune", "--keep-per-major", "1", "--store", store, "-q") == 0
    assert cli("publish", "--store", store, "--to", reference, "-q") == 0
    last = dest / "files" / "img2grey-1.0.0+torch213cpucxx11-py3-none-linux_x86_64.whl"  # among the last to go
    first = dest / "files" / "img2grey-1.0.0+torch213cpucxx11-py3-none-linux_x86_64.whl.json"
    proc = subprocess.Popen([sys.executable, "-m", "kernel_factory", "publish", "--store", str(store), "--to",
                             str(dest), "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    while proc.poll() is None and first.exists():
        pass
    proc.kill()
    proc.wait(30)
    assert proc.returncode == -9, f"the publish ended ({proc.returncode}) before the kill"
    assert last.exists()  # wheels go last: this one was still there when the kill came
    assert_links_resolve(dest)
    assert cli("publish", "--store", store, "--to", dest, "-q") == 0
    assert index_pages(dest) == index_pages(reference)
    assert sorted(p.name for p in (dest / "files").iterdir()) == sorted(p.name for p in (reference / "files").iterdir())


def assert_bucket_links_resolve(s3: Any, bucket: str, prefix: str) -> None:
    """Every link of every page in the bucket to files/ names an object there."""
    keys = bucket_keys(s3, bucket, prefix)
    for key in (k for k in keys if k.endswith(".html")):
        text = s3.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read().decode()
        missing = [link for link in page_links(key, text) if link.startswith("files/") and link not in keys]
        assert not missing, f"{key} links missing objects {missing}"


def test_publish_to_an_upload_endpoint_names_what_it_cannot_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", PASSWORD)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    store = make_store(tmp_path, ("1.0.1", "1.0.2"))
    (tmp_path / "pypi").mkdir()
    with pypi_server(tmp_path / "pypi") as url:
        assert cli("publish", "--store", store, "--to", url, "-q") == 0
        assert cli("prune", "--keep-per-major", "1", "--store", store, "-q") == 0
        capsys.readouterr()
        assert cli("publish", "--store", store, "--to", url, "-q") == 0
        err = capsys.readouterr().err
        assert ("warning: 2 file(s) this store withdrew are still at " in err and "the upload API cannot delete: "
                "remove them on the server" in err), err  # fmt: skip
        assert "img2grey-1.0.1+torch213cpucxx11-py3-none-linux_x86_64.whl" in err
        assert cli("publish", "--store", store, "--to", url, "-q") == 0
        assert "withdrew" not in capsys.readouterr().err  # named once
