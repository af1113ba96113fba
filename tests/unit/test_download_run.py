"""``download`` whole (local/download/command.py's ``run_download``): a kernels.lock and an index folder -> the Hub
cache, with the interpreter's probe replaced by its facts. Exact exit codes, exact lines, exact files; huggingface_hub's
scan_cache_dir is the oracle of the cache after each run (success, refusal, a full disk mid-way, a race)."""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cache_oracle import no_scratch_left, scan
from download_kit import CPU, SHA1, SHA2, SHA3, Index, env, files_of, kernel_wheel
from kernel_factory.errors import Unreachable, UsageError
from kernel_factory.local import cache
from kernel_factory.local.download import command as download
from kernel_factory.local.download.command import DownloadArgs, run_download
from kernel_factory.nofollow import LinkRefused


class Run:
    """A project folder with a kernels.lock, an index folder, the cache, and ``download`` run with them."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp, self.capsys = tmp_path, capsys
        self.index = Index(tmp_path / "index")
        self.project = tmp_path / "project"
        self.project.mkdir()
        self.cache = tmp_path / "cache"
        monkeypatch.setenv("KERNELS_CACHE", str(self.cache))
        monkeypatch.setattr(download, "probe", lambda python: env())

    def wheel(self, name: str, revision: str = SHA1, variant: str = "torch-universal", version: str = "1.0.0",
              **how: Any) -> str:
        return self.index.add(kernel_wheel(self.tmp / "w" / name / revision, name, version, variant,
                                           revision=revision, **how))

    def lock(self, *entries: tuple[str, str, int]) -> None:
        (self.project / "kernels.lock").write_text(json.dumps([
            {"dependency": {"repo-id": repo_id, "version": major}, "lock": {"commit": sha}}
            for repo_id, sha, major in entries]))

    def __call__(self) -> tuple[int, list[str], list[str]]:
        code = run_download(DownloadArgs(str(self.project), str(self.index.root)))
        out = self.capsys.readouterr()
        return code, out.out.splitlines(), out.err.splitlines()

    def snapshot(self, repo: str, sha: str, variant: str = "torch-universal") -> Path:
        return self.cache / f"kernels--org--{repo}" / "snapshots" / sha / "build" / variant


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(tmp_path, monkeypatch, capsys)


def test_a_lock_is_downloaded_then_found_in_the_cache(run: Run) -> None:
    relu = run.wheel("relu", variant=CPU, depends=[{"repo-id": "org/dep", "version": 1}])
    dep = run.wheel("dep", SHA2)
    run.lock(("org/relu", SHA1, 1))
    assert run() == (0, [
        f"org/relu  {SHA1[:12]}  {CPU}  {relu}  (downloaded)",
        f"org/dep  {SHA2[:12]}  torch-universal  {dep}  (downloaded)",
        f"2 kernels in {run.cache}: 2 downloaded, 0 already there"], [])
    assert scan(run.cache) == {"org/relu": {SHA1: ["v1"]}, "org/dep": {SHA2: ["v1"]}}
    folder = run.snapshot("relu", SHA1, CPU)
    assert sorted(p.name for p in folder.iterdir()) == ["__init__.py", "metadata.json"]
    assert (folder / "__init__.py").read_bytes() == b"X = 1\n"
    record = json.loads((folder.parent.parent / download.FILES).read_text())
    assert record == {CPU: {"wheel": relu, "sha256": run.index.entries["relu"][0]["hashes"]["sha256"],
                            "files": files_of(), "depends": [{"repo-id": "org/dep", "version": 1}], "package": "relu"}}
    no_scratch_left(run.cache)

    shutil.rmtree(run.index.root / "files")  # nothing is downloaded again
    assert run() == (0, [
        f"org/relu  {SHA1[:12]}  {CPU}  {relu}  (already there)",
        f"org/dep  {SHA2[:12]}  torch-universal  {dep}  (already there)",
        f"2 kernels in {run.cache}: 0 downloaded, 2 already there"], [])
    assert scan(run.cache) == {"org/relu": {SHA1: ["v1"]}, "org/dep": {SHA2: ["v1"]}}


def test_one_kernel_is_one_kernel(run: Run) -> None:
    relu = run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    assert run() == (0, [f"org/relu  {SHA1[:12]}  torch-universal  {relu}  (downloaded)",
                         f"1 kernel in {run.cache}: 1 downloaded, 0 already there"], [])


def test_an_empty_lock_places_nothing(run: Run) -> None:
    run.lock()
    assert run() == (0, [f"0 kernels in {run.cache}: 0 downloaded, 0 already there"], [])
    assert scan(run.cache) == {}


def test_the_index_url_and_the_lock_are_required(run: Run) -> None:
    with pytest.raises(UsageError) as info:
        run_download(DownloadArgs(str(run.project), ""))
    assert str(info.value) == "download needs --index-url URL (the index kernel-factory publishes)"
    with pytest.raises(UsageError) as info:
        run_download(DownloadArgs(str(run.project), str(run.index.root)))
    assert str(info.value) == (f"{run.project / 'kernels.lock'}: no such file; run `kernels lock {run.project}` "
                               "first, or give the project's folder")
    (run.project / "kernels.lock").mkdir()  # a folder is no lock file
    with pytest.raises(UsageError, match="kernels.lock: no such file"):
        run_download(DownloadArgs(str(run.project), str(run.index.root)))
    assert not run.cache.exists()


def test_the_cache_folder_is_made_with_its_parents(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    relu = run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    run.cache = run.tmp / "a" / "b" / "cache"
    monkeypatch.setenv("KERNELS_CACHE", str(run.cache))
    assert run()[0] == 0 and run.snapshot("relu", SHA1).is_dir() and relu
    assert scan(run.cache) == {"org/relu": {SHA1: ["v1"]}}


def test_every_problem_is_said_once_and_nothing_is_placed(run: Run) -> None:
    """A fine kernel, one the index lacks, one without a fitting build, two that depend on a missing one."""
    run.wheel("relu")
    run.wheel("old", variant="torch212-cxx11-cpu-x86_64-linux")
    run.wheel("a", depends=[{"repo-id": "org/gone", "version": 1}])
    run.wheel("b", depends=[{"repo-id": "org/gone", "version": 1}])
    run.lock(("org/relu", SHA1, 1), ("org/nosuch", SHA1, 1), ("org/old", SHA1, 1), ("org/a", SHA1, 1),
             ("org/b", SHA1, 1))
    code, out, err = run()
    root = run.index.root
    assert (code, out) == (3, [])
    assert err == [
        f"error: org/nosuch (kernels.lock): {root} has no project nosuch (no simple/nosuch/ page); publish it there "
        "or fix --index-url",
        f"error: org/old at {SHA1[:12]} (kernels.lock): no build on {root} fits torch213cpucxx11 on x86_64-linux; "
        "builds there are, nearest first:",
        "  torch212cpucxx11  manylinux_2_28_x86_64  1.0.0  (torch 2.12, cpu, cxx11)",
        f"error: org/gone (kernel-depends of org/a): {root} has no project gone (no simple/gone/ page); "
        "publish it there or fix --index-url",
        f"nothing was installed in {run.cache}"]
    assert scan(run.cache) == {}
    no_scratch_left(run.cache)


def test_a_refusal_is_one_escaped_line(run: Run) -> None:
    run.wheel("relu", prov={"repo_id": "evil/x\x1b[31m"})
    run.lock(("org/relu", SHA1, 1))
    code, out, err = run()
    assert (code, out) == (3, [])
    assert err == ["error: relu-1.0.0-py3-none-any.whl comes from evil/x\\x1b[31m, not org/relu; fix the index",
                   f"nothing was installed in {run.cache}"]
    assert scan(run.cache) == {}


def test_an_unreachable_index_stops_the_run(run: Run) -> None:
    run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    page = run.index.root / "simple" / "relu" / "index.json"
    page.unlink()
    page.symlink_to(page.name)  # a link to itself: it cannot be read
    with pytest.raises(Unreachable) as info:
        run()
    assert str(info.value) == f"--index-url: cannot read {page} (Too many levels of symbolic links); check the path"
    assert not run.cache.exists() or scan(run.cache) == {}


# -- placing: all or nothing -----------------------------------------------------------------------------------


def failing_place(monkeypatch: pytest.MonkeyPatch, at: int, error: BaseException) -> list[tuple[str, list[str]]]:
    """Writer.place as it is, but the call number ``at`` (from 1) raises ``error``; the calls, listed."""
    real, calls = cache.Writer.place, []

    def place(self: cache.Writer, item: cache.Placement) -> Path:
        calls.append((item.repo_id, list(item.refs)))
        if len(calls) == at:
            raise error
        return real(self, item)

    monkeypatch.setattr(cache.Writer, "place", place)
    return calls


def full(path: Path) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


@pytest.mark.parametrize("at", [2, 3, 4])
def test_a_full_disk_takes_back_every_snapshot_and_ref_of_the_run(run: Run, monkeypatch: pytest.MonkeyPatch,
                                                                   at: int) -> None:
    """An earlier run left relu at SHA1 (refs/v1); this one moves relu to SHA2 and adds act. The disk fills at
    the second snapshot (2), at relu's ref (3) or at act's ref (4): the cache is as the earlier run left it."""
    run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    assert run()[0] == 0
    run.wheel("relu", SHA2, version="1.1.0")
    run.wheel("act", SHA1)
    run.lock(("org/relu", SHA2, 1), ("org/act", SHA1, 1))
    calls = failing_place(monkeypatch, at, full(run.cache / "x"))
    with pytest.raises(Unreachable) as info:
        run()
    assert str(info.value) == (f"{run.cache / 'x'}: No space left on device; nothing was installed: make room "
                               "there, or point KERNELS_CACHE at another folder")
    assert calls[:at] == [("org/relu", []), ("org/act", []), ("org/relu", ["v1"]), ("org/act", ["v1"])][:at]
    # act's blobs, once published, stay (another run may link to them); its snapshot and ref are gone
    assert scan(run.cache) == ({"org/relu": {SHA1: ["v1"]}, "org/act": {}} if at > 2 else {"org/relu": {SHA1: ["v1"]}})
    assert (run.cache / "kernels--org--relu" / "refs" / "v1").read_text() == SHA1
    act = run.cache / "kernels--org--act"
    assert sorted(p.name for p in act.iterdir()) == ["blobs", "snapshots"] if at > 2 else not act.exists()
    assert run.capsys.readouterr().out == ""
    no_scratch_left(run.cache)


def test_a_new_ref_is_removed_again_and_an_old_snapshot_kept(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """relu at SHA1 is in the cache without a ref; the run adds refs/v1 there (same commit), then fails."""
    run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    run()
    (run.cache / "kernels--org--relu" / "refs" / "v1").unlink()
    run.wheel("act")
    run.lock(("org/relu", SHA1, 1), ("org/act", SHA1, 1))
    failing_place(monkeypatch, 2, cache.CacheUnusable("the Hub cache: full", full(run.cache / "blobs")))
    with pytest.raises(Unreachable) as info:
        run()
    assert str(info.value) == (f"{run.cache / 'blobs'}: No space left on device; nothing was installed: make room "
                               "there, or point KERNELS_CACHE at another folder")
    assert scan(run.cache) == {"org/relu": {SHA1: []}, "org/act": {}}  # act's published blobs stay, unused
    assert not (run.cache / "kernels--org--relu" / "refs" / "v1").exists()


def test_a_full_disk_without_a_file_name_names_the_cache(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    failing_place(monkeypatch, 1, cache.CacheUnusable("the Hub cache: full",
                                                         OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
    with pytest.raises(Unreachable) as info:
        run()
    assert str(info.value) == (f"{run.cache}: No space left on device; nothing was installed: make room there, or "
                               "point KERNELS_CACHE at another folder")


def test_a_copy_that_fails_for_space_is_a_full_disk(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """shutil.Error carries the errno in its text only."""
    run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    failing_place(monkeypatch, 1, shutil.Error([("a", "b", f"[Errno 28] {os.strerror(errno.ENOSPC)}")]))
    with pytest.raises(Unreachable) as info:
        run()
    assert str(info.value) == (f"{run.cache}: No space left on device; nothing was installed: make room there, or "
                               "point KERNELS_CACHE at another folder")
    assert scan(run.cache) == {}


@pytest.mark.parametrize("error", [OSError(errno.ENOENT, "gone"), shutil.Error([("a", "b", "odd")])])
def test_another_os_error_goes_on_as_it_is(run: Run, monkeypatch: pytest.MonkeyPatch, error: OSError) -> None:
    run.wheel("relu")
    run.lock(("org/relu", SHA1, 1))
    failing_place(monkeypatch, 1, error)
    with pytest.raises(type(error)) as info:
        run()
    assert info.value is error
    assert scan(run.cache) == {}


def test_a_bug_while_placing_takes_nothing_back(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a file system's failure is rolled back (a bug leaves the checked, complete snapshots it made)."""
    run.wheel("relu")
    run.wheel("act")
    run.lock(("org/relu", SHA1, 1), ("org/act", SHA1, 1))
    failing_place(monkeypatch, 2, RuntimeError("bug"))
    with pytest.raises(RuntimeError):
        run()
    assert scan(run.cache) == {"org/relu": {SHA1: []}}


# -- placing: what is there already ------------------------------------------------------------------------------


def hub_snapshot(cache: Path, repo: str, sha: str, variant: str, files: dict[str, bytes]) -> Path:
    """A snapshot as huggingface_hub writes it (no marker): links into blobs/."""
    folder = cache / f"kernels--org--{repo}" / "snapshots" / sha / "build" / variant
    folder.mkdir(parents=True)
    blobs = cache / f"kernels--org--{repo}" / "blobs"
    blobs.mkdir(exist_ok=True)
    for rel, data in files.items():
        (blobs / rel).write_bytes(data)
        (folder / rel).symlink_to(os.path.relpath(blobs / rel, folder))
    return folder


def test_the_hubs_own_copy_is_used_as_it_is(run: Run) -> None:
    run.wheel("relu")
    hub_snapshot(run.cache, "relu", SHA1, "torch-universal", {"__init__.py": b"hub\n", "metadata.json": b"{}"})
    run.lock(("org/relu", SHA1, 1))
    assert run() == (0, [f"org/relu  {SHA1[:12]}  torch-universal  (the Hub's copy, already there)",
                         f"1 kernel in {run.cache}: 0 downloaded, 1 already there"], [])
    assert scan(run.cache) == {"org/relu": {SHA1: ["v1"]}}
    assert (run.snapshot("relu", SHA1) / "__init__.py").read_bytes() == b"hub\n"
    assert not (run.snapshot("relu", SHA1).parent.parent / download.FILES).exists()


def test_a_hub_snapshot_without_the_variant_is_refused_and_the_rest_placed(run: Run) -> None:
    run.wheel("relu")
    act = run.wheel("act")
    hub_snapshot(run.cache, "relu", SHA1, CPU, {"__init__.py": b"hub\n", "metadata.json": b"{}"})
    run.lock(("org/relu", SHA1, 1), ("org/act", SHA1, 0))
    code, out, err = run()
    assert (code, out) == (3, [f"org/act  {SHA1[:12]}  torch-universal  {act}  (downloaded)",
                               f"2 kernels in {run.cache}: 1 downloaded, 1 already there"])
    assert err == [f"error: org/relu: snapshot {SHA1} in {run.cache} came from the Hub without build/torch-universal; "
                   "left as it is: load it with the Hub's variant, or point KERNELS_CACHE at another folder"]
    assert scan(run.cache) == {"org/relu": {SHA1: []}, "org/act": {SHA1: ["v0"]}}


def test_what_was_placed_is_checked_again(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer changes a file between the move and the check: refused, left, not counted, no ref."""
    relu = run.wheel("relu")
    act = run.wheel("act")
    run.lock(("org/relu", SHA1, 1), ("org/act", SHA1, 0))
    real = cache.Writer.place

    def place(self: cache.Writer, item: cache.Placement) -> Path:
        target = real(self, item)
        if item.repo_id == "org/relu" and not item.refs:
            (target / "__init__.py").unlink()
            (target / "__init__.py").write_bytes(b"X = 666\n")
        return target

    monkeypatch.setattr(cache.Writer, "place", place)
    code, out, err = run()
    assert (code, out) == (3, [f"org/act  {SHA1[:12]}  torch-universal  {act}  (downloaded)",
                               f"2 kernels in {run.cache}: 1 downloaded, 1 already there"])
    assert err == [f"error: {run.snapshot('relu', SHA1)} holds other files than {relu} (an earlier wheel of this "
                   "commit); left as it is: remove that folder and run again"]
    assert scan(run.cache) == {"org/relu": {SHA1: []}, "org/act": {SHA1: ["v0"]}}
    assert not (run.snapshot("relu", SHA1).parent.parent / download.FILES).exists()


def test_a_ref_kernel_factory_did_not_write_is_left_with_a_note(run: Run) -> None:
    relu = run.wheel("relu")
    hub_snapshot(run.cache, "relu", SHA3, "torch-universal", {"__init__.py": b"hub\n", "metadata.json": b"{}"})
    refs = run.cache / "kernels--org--relu" / "refs"
    refs.mkdir()
    (refs / "v1").write_text(SHA3)
    run.lock(("org/relu", SHA1, 1))
    assert run() == (0, [f"org/relu  {SHA1[:12]}  torch-universal  {relu}  (downloaded)",
                         f"1 kernel in {run.cache}: 1 downloaded, 0 already there"], [
        f"note: org/relu: refs/v1 in {run.cache} names {SHA3}, which kernel-factory did not write; left as it is: "
        f"use revision='{SHA1}' or a lock file"])
    assert scan(run.cache) == {"org/relu": {SHA1: [], SHA3: ["v1"]}}


def test_a_lock_by_revision_name_writes_that_ref(run: Run) -> None:
    relu = run.wheel("relu")
    (run.project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": "org/relu", "revision": "main"}, "lock": {"commit": SHA1}},
        {"repo_id": "org/old", "sha": SHA2}]))  # the old format: no ref
    run.wheel("old", SHA2)
    code, out, _ = run()
    assert code == 0 and out[0] == f"org/relu  {SHA1[:12]}  torch-universal  {relu}  (downloaded)"
    assert scan(run.cache) == {"org/relu": {SHA1: ["main"]}, "org/old": {SHA2: []}}


def test_a_dependency_in_the_lock_is_fetched_once(run: Run) -> None:
    run.wheel("a", depends=[{"repo-id": "org/dep", "version": 0}])
    run.wheel("b", depends=[{"repo-id": "org/dep", "version": 0}])
    dep = run.wheel("dep", SHA2)
    run.lock(("org/a", SHA1, 1), ("org/b", SHA1, 1), ("org/dep", SHA2, 0))
    code, out, err = run()
    assert (code, err) == (0, [])
    assert out[2:] == [f"org/dep  {SHA2[:12]}  torch-universal  {dep}  (downloaded)",
                       f"3 kernels in {run.cache}: 3 downloaded, 0 already there"]


def with_member(wheel: Path, name: str, data: bytes) -> None:
    """``wheel`` rewritten with one more member of its package, listed in its RECORD."""
    with zipfile.ZipFile(wheel) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    record = next(n for n in members if n.endswith(".dist-info/RECORD"))
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    members[record] += f"{name},sha256={digest},{len(data)}\n".encode()
    members[name] = data
    with zipfile.ZipFile(wheel, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)


BYTECODE = "is bytecode, which a kernel wheel never carries (kernels loads the sources)"


@pytest.mark.parametrize(("name", "what"), [
    ("relu/x.pyc", BYTECODE),
    ("relu/__pycache__/x.cpython-311.pyc", BYTECODE),
    ("relu/__pycache__/ops.layer-12.py311.nbi", BYTECODE),  # numba's cache beside the bytecode: not .pyc
    ("relu/a\x1bb.py", "has a control character in its name"),
])  # fmt: skip
def test_a_member_the_cache_writer_would_not_place_is_refused_before_anything_is_placed(
    run: Run, name: str, what: str
) -> None:
    """The wheel's RECORD vouches for a file the cache writer leaves out (bytecode) or refuses (a control character
    in its name): the wheel's check refuses it, with download's own advice, before act is placed."""
    run.wheel("act")
    wheel = kernel_wheel(run.tmp / "w" / "relu", "relu", revision=SHA2)
    with_member(wheel, name, b"bytecode")
    run.index.add(wheel)
    run.lock(("org/act", SHA1, 1), ("org/relu", SHA2, 1))
    shown = name.replace("\x1b", "\\x1b")
    assert run() == (3, [], [
        f"error: {wheel.name}: member '{shown}' {what}; nothing was installed: rebuild the wheel",
        f"nothing was installed in {run.cache}"])
    assert scan(run.cache) == {}
    no_scratch_left(run.cache)


def test_a_refusal_of_the_cache_writer_takes_back_the_kernels_placed_before_it(run: Run, tmp_path: Path) -> None:
    """relu's folder in the cache has a planted link (its snapshots/ pointing elsewhere): the writer refuses it
    after act was placed, and act is taken back; nothing is written through the link."""
    run.wheel("act")
    run.wheel("relu", SHA2)
    run.lock(("org/act", SHA1, 1), ("org/relu", SHA2, 1))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    repo = run.cache / "kernels--org--relu"
    repo.mkdir(parents=True)
    (repo / "snapshots").symlink_to(elsewhere)
    with pytest.raises(LinkRefused) as info:  # exit 4
        run()
    assert str(info.value) == (
        f"{repo / 'snapshots'} -> {elsewhere}: a symbolic link in the Hub cache where kernel-factory expects a "
        "folder, and it never writes or reads through a link; remove the link (rm, not rm -r) and run again")
    assert run.capsys.readouterr().out == ""
    assert scan(run.cache) == {"org/act": {}, "org/relu": {}}  # act's snapshot taken back; its blobs stay, unused
    assert list(elsewhere.iterdir()) == []
    no_scratch_left(run.cache)
