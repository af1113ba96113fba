"""``kernel-factory download`` checks what the lock and the index promise, against hostile and broken indexes.

The site of test_download.py (real wheels built by ``kernel-factory build``), copied and altered here the way a
broken mirror or an attacker would: records removed, links pointed elsewhere, wheels swapped, re-zipped or
inflated, provenance rewritten. Every run goes through the installed tool; huggingface_hub's ``scan_cache_dir``
is the independent oracle of the cache after each one (what it holds, and that it has nothing to warn about).
"""

# ruff: noqa: F811  (the fixtures of test_download.py, imported, are parameters here)
from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import scan_cache_dir
from support import clean_env, http_server, kf, run, tmpfs_at
from test_download import CPU, download, leftovers, sha_of, site, torch_venv  # noqa: F401  (module fixtures reused)

pytestmark = pytest.mark.integration
PYONLY = "pyonly-0.2.0-py3-none-any.whl"
IMG = "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
SECRET = "s3cr3t-pw"


def cache_state(cache: Path) -> dict[str, list[str]]:
    """What scan_cache_dir sees: repo id -> its commits; it must have no warnings."""
    if not cache.exists():
        return {}
    info = scan_cache_dir(cache)
    assert info.warnings == [], info.warnings
    return {r.repo_id: sorted(rev.commit_hash for rev in r.revisions) for r in info.repos}


def scratch_left(cache: Path) -> list[str]:
    """What is in ``.locks/`` but an empty ``kernel-factory/`` (the writer's scratch folders live in it)."""
    locks = cache / ".locks"
    ours = locks / "kernel-factory"
    if not locks.is_dir():
        return []
    return sorted(p.name for p in locks.iterdir() if p != ours or any(ours.iterdir()))


def lock(project: Path, entries: list[dict[str, Any]]) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    (project / "kernels.lock").write_text(json.dumps(entries))
    return project


def new_lock(repo_id: str, sha: str, version: int) -> dict[str, Any]:
    return {"dependency": {"repo-id": repo_id, "version": version}, "lock": {"commit": sha}}


def git_lock_hash(repo: Path, sha: str, variant: str) -> str:
    """kernels' git_lfs_concat hash of build/<variant> at ``sha``, from git's own blob ids (no LFS here)."""
    prefix = f"build/{variant}/"
    out = run("git", "-C", repo, "ls-tree", "-r", sha, "--", prefix).stdout
    entries = []
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        entries.append((path.removeprefix(prefix).encode(), bytes.fromhex(meta.split()[2])))
    m = hashlib.sha256()
    for rel, blob in sorted(entries):
        m.update(rel)
        m.update(blob)
    return f"sha256-{m.hexdigest()}"


def page(folder: Path, project: str, hrefs: list[str]) -> None:
    """A PEP 503 page ``folder/simple/<project>/index.html`` listing ``hrefs``."""
    where = folder / "simple" / project
    where.mkdir(parents=True, exist_ok=True)
    links = "".join(f'<a href="{h}">{h.rsplit("/", 1)[-1].split("#")[0]}</a>\n' for h in hrefs)
    (where / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rezip(src: Path, dest: Path, *, provenance: dict[str, Any] | None = None,
          extra: tuple[str, int] | None = None) -> Path:
    """``src`` written again as ``dest``: its provenance replaced, or a member of ``extra[1]`` zero bytes added."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if provenance is not None and info.filename.endswith(".dist-info/kernel_factory.json"):
                data = json.dumps(provenance).encode()
            zout.writestr(info, data)
        if extra is not None:
            info = zipfile.ZipInfo(extra[0])
            info.compress_type = zipfile.ZIP_DEFLATED
            with zout.open(info, "w", force_zip64=True) as f:
                block = b"\0" * (1 << 20)
                for _ in range(extra[1] >> 20):
                    f.write(block)
    return dest


def provenance_of(wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/kernel_factory.json"))
        data: dict[str, Any] = json.loads(zf.read(name))
        return data


# -- the lock's hashes ------------------------------------------------------------------------------------------


def test_the_old_locks_hashes_are_checked(example_repos: Path, site: Path, torch_venv: Path,
                                          tmp_path: Path) -> None:
    img = sha_of(example_repos, "img2grey", "v1.1.2")
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    good_img = git_lock_hash(example_repos / "img2grey", img, CPU)
    good_py = git_lock_hash(example_repos / "pyonly", pyonly, "torch-universal")  # a nested build
    other = git_lock_hash(example_repos / "img2grey", sha_of(example_repos, "img2grey", "v1.1.0"), CPU)
    cache = tmp_path / "cache"
    with http_server(site) as url:
        bad = download(lock(tmp_path / "bad", [
            {"repo_id": "example/img2grey", "sha": img},  # no hashes: nothing to check, and fine
            {"repo_id": "example/pyonly", "sha": pyonly, "variants": {"torch-universal": {"hash": other}}}]),
            url, torch_venv, cache)
        assert bad.returncode == 3, bad.stdout + bad.stderr
        assert bad.stderr.splitlines() == [
            f"error: {PYONLY}: its files do not match the kernels.lock hash of example/pyonly torch-universal "
            f"({other[:19]}...); nothing was installed: check the index, or re-lock with `kernels lock` "
            "(docs/download.md)",
            f"nothing was installed in {cache}"]
        assert cache_state(cache) == {} and scratch_left(cache) == []  # img2grey, which was fine, is not there

        unlocked = download(lock(tmp_path / "variant", [
            {"repo_id": "example/img2grey", "sha": img, "variants": {"torch-universal": {"hash": good_img}}}]),
            url, torch_venv, cache)
        assert unlocked.returncode == 3
        assert unlocked.stderr.splitlines()[0] == (
            f"error: {IMG}: kernels.lock locks example/img2grey for torch-universal, not {CPU}; re-lock with "
            "`kernels lock`, or build that variant")

        # The Hub's img2grey build has a compat folder (img2grey/__init__.py): the wheel holds the variant byte for
        # byte, compat folder included, so the lock's hash is made from it and matches.
        compat = download(lock(tmp_path / "compat", [
            {"repo_id": "example/img2grey", "sha": img, "variants": {CPU: {"hash": good_img}}}]), url, torch_venv,
            tmp_path / "cache-compat")
        assert compat.returncode == 0, compat.stdout + compat.stderr
        assert cache_state(tmp_path / "cache-compat") == {"example/img2grey": [img]}

        good = download(lock(tmp_path / "good", [
            {"repo_id": "example/pyonly", "sha": pyonly, "variants": {"torch-universal": {"hash": good_py}}}]),
            url, torch_venv, cache)
        assert good.returncode == 0, good.stdout + good.stderr
        assert cache_state(cache) == {"example/pyonly": [pyonly]}
        assert scratch_left(cache) == []
        # What is already in the cache is held to the lock's hash as well.
        again = download(lock(tmp_path / "again", [
            {"repo_id": "example/pyonly", "sha": pyonly, "variants": {"torch-universal": {"hash": other}}}]),
            url, torch_venv, cache)
    assert again.returncode == 3, again.stdout + again.stderr
    assert again.stderr.splitlines()[0].startswith(
        f"error: {PYONLY}: its files do not match the kernels.lock hash of example/pyonly torch-universal")


# -- the wheel's own word, without records -------------------------------------------------------------------


@pytest.fixture
def bare(site: Path, tmp_path: Path) -> Path:
    """A copy of the site without the records (files/<wheel>.json): a plain mirror."""
    copy = tmp_path / "bare"
    shutil.copytree(site, copy)
    for record in (copy / "files").glob("*.json"):
        record.unlink()
    return copy


def test_without_records_the_provenance_decides(example_repos: Path, bare: Path, torch_venv: Path,
                                                tmp_path: Path) -> None:
    old = sha_of(example_repos, "img2grey", "v1.1.0")
    cache = tmp_path / "cache"
    with http_server(bare) as url:
        proc = download(lock(tmp_path / "p", [new_lock("example/img2grey", old, 1)]), url, torch_venv, cache)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.splitlines()[0] == (
            f"example/img2grey  {old[:12]}  {CPU}  img2grey-1.1.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
            "  (downloaded)")
        assert cache_state(cache) == {"example/img2grey": [old]}

        missing = "b" * 40
        gone = download(lock(tmp_path / "q", [new_lock("example/img2grey", missing, 1)]), url, torch_venv,
                        tmp_path / "c2")
    assert gone.returncode == 3, gone.stdout + gone.stderr
    lines = gone.stderr.splitlines()
    assert lines[0] == (f"error: example/img2grey at {missing[:12]} (kernels.lock): {url} has no build of that "
                        f"commit; the builds there that fit torch213cpucxx11 on x86_64-linux are of other commits:")
    assert f"  {sha_of(example_repos, 'img2grey', 'v1.1.2')[:12]}  1.1.2+torch213cpucxx11" in lines
    assert f"  {old[:12]}  1.1.0+torch213cpucxx11" in lines
    assert lines[-2:] == ["  publish a build of the locked commit, or re-lock with `kernels lock`",
                          f"nothing was installed in {tmp_path / 'c2'}"]
    assert "no build on" not in gone.stderr and cache_state(tmp_path / "c2") == {}


def test_a_locked_commit_the_index_lacks_is_named_with_records(example_repos: Path, site: Path,
                                                              torch_venv: Path, tmp_path: Path) -> None:
    missing = "c" * 40
    with http_server(site) as url:
        proc = download(lock(tmp_path / "p", [new_lock("example/pyonly", missing, 0)]), url, torch_venv,
                        tmp_path / "cache")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: example/pyonly at {missing[:12]} (kernels.lock): {url} has no build of that commit; the builds "
        "there that fit torch213cpucxx11 on x86_64-linux are of other commits:",
        f"  {sha_of(example_repos, 'pyonly', 'v0.2.0')[:12]}  0.2.0",
        "  publish a build of the locked commit, or re-lock with `kernels lock`",
        f"nothing was installed in {tmp_path / 'cache'}"]


def test_a_wheel_of_another_repository_is_refused(example_repos: Path, bare: Path, torch_venv: Path,
                                                  tmp_path: Path) -> None:
    """The page of img2grey lists pyonly's wheel (no records to tell): its provenance names example/pyonly."""
    wheel = bare / "files" / PYONLY
    page(bare, "img2grey", [f"../../files/{PYONLY}#sha256={sha256(wheel)}"])
    shutil.rmtree(bare / "variants")
    cache = tmp_path / "cache"
    with http_server(bare) as url:
        proc = download(lock(tmp_path / "p", [new_lock("example/img2grey", sha_of(example_repos, "pyonly", "v0.2.0"),
                                                        0)]), url, torch_venv, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (
        f"error: {PYONLY} comes from example/pyonly, not example/img2grey; fix the index")
    assert cache_state(cache) == {} and scratch_left(cache) == []


def test_control_characters_from_the_wheel_are_escaped(example_repos: Path, bare: Path, torch_venv: Path,
                                                       tmp_path: Path) -> None:
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    prov = provenance_of(bare / "files" / PYONLY)
    cache = tmp_path / "cache"
    for field, value, expected in [
        ("repo_id", "example/\x1b[2Jpyonly", f"error: {PYONLY} comes from example/\\x1b[2Jpyonly, not example/pyonly; "
                                             "fix the index"),
        ("kernel-depends", [{"repo-id": "example/\x1b]0;owned\x07", "version": 1}],
         f"error: {PYONLY}: its kernel-depends names 'example/\\x1b]0;owned\\x07', which is not an org/name "
         "repository id; rebuild it"),
        ("variant", "torch\x1b[31m-universal",
         f"error: {PYONLY}: its kernel_factory.json names variant 'torch\\x1b[31m-universal', whose label is not "
         "the wheel's; rebuild it"),
    ]:
        wheel = rezip(bare / "files" / PYONLY, tmp_path / PYONLY, provenance={**prov, field: value})
        shutil.copy(wheel, bare / "files" / PYONLY)
        shutil.rmtree(bare / "variants", ignore_errors=True)
        page(bare, "pyonly", [f"../../files/{PYONLY}#sha256={sha256(wheel)}"])
        with http_server(bare) as url:
            proc = download(lock(tmp_path / "p", [new_lock("example/pyonly", pyonly, 0)]), url, torch_venv, cache)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stderr
        assert proc.stderr.splitlines()[0] == expected
        assert cache_state(cache) == {}


# -- links and limits ------------------------------------------------------------------------------------------


def test_links_leave_not_the_index_origin(example_repos: Path, bare: Path, torch_venv: Path,
                                          tmp_path: Path) -> None:
    wheel = bare / "files" / PYONLY
    digest = sha256(wheel)
    shutil.rmtree(bare / "variants")
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    cache = tmp_path / "cache"
    for href in (wheel.as_uri(), f"http://127.0.0.2:9/files/{PYONLY}", f"https://127.0.0.1/files/{PYONLY}"):
        page(bare, "pyonly", [f"{href}#sha256={digest}"])
        with http_server(bare) as url:
            proc = download(lock(tmp_path / "p", [new_lock("example/pyonly", pyonly, 0)]), url, torch_venv, cache)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert proc.stderr.splitlines()[0] == (
            f"error: {url} links to {href}, which is not on the index's own origin; nothing is read from there: "
            "fix the index")
        assert cache_state(cache) == {}
    # The same file:// link from a local index is the index's own.
    page(bare, "pyonly", [f"{wheel.as_uri()}#sha256={digest}"])
    local = download(lock(tmp_path / "p", [new_lock("example/pyonly", pyonly, 0)]), bare.as_uri(), torch_venv, cache)
    assert local.returncode == 0, local.stderr
    assert cache_state(cache) == {"example/pyonly": [pyonly]}


def test_a_zip_bomb_is_refused(example_repos: Path, bare: Path, torch_venv: Path, tmp_path: Path) -> None:
    """256 MiB of zeros in a wheel of a few hundred KiB."""
    bomb = rezip(bare / "files" / PYONLY, tmp_path / PYONLY, extra=("_pyonly_kernel/zeros.bin", 256 << 20))
    assert bomb.stat().st_size < 512 * 1024
    shutil.copy(bomb, bare / "files" / PYONLY)
    shutil.rmtree(bare / "variants")
    page(bare, "pyonly", [f"../../files/{PYONLY}#sha256={sha256(bomb)}"])
    cache = tmp_path / "cache"
    with http_server(bare) as url:
        proc = download(lock(tmp_path / "p", [new_lock("example/pyonly", sha_of(example_repos, "pyonly", "v0.2.0"),
                                                        0)]), url, torch_venv, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    size = bomb.stat().st_size
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"error: {PYONLY}: its files inflate to ") and first.endswith(
        f"bytes, more than the {100 * size} allowed for a wheel of {size} bytes (a zip bomb?); nothing was "
        "installed: rebuild the wheel"), first
    assert cache_state(cache) == {} and scratch_left(cache) == []


def test_a_wheel_bigger_than_its_page_says_is_refused(example_repos: Path, bare: Path, torch_venv: Path,
                                                      tmp_path: Path) -> None:
    """A local index whose PEP 691 page gives the wheel a size of 100 bytes."""
    wheel = bare / "files" / PYONLY
    shutil.rmtree(bare / "variants")
    doc = {"meta": {"api-version": "1.1"}, "name": "pyonly", "versions": ["0.2.0"],
           "files": [{"filename": PYONLY, "url": f"../../files/{PYONLY}", "hashes": {"sha256": sha256(wheel)},
                      "size": 100}]}
    (bare / "simple" / "pyonly" / "index.json").write_text(json.dumps(doc))
    cache = tmp_path / "cache"
    proc = download(lock(tmp_path / "p", [new_lock("example/pyonly", sha_of(example_repos, "pyonly", "v0.2.0"), 0)]),
                    str(bare), torch_venv, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (
        f"error: {PYONLY}: more than the 100 bytes the index page gives; nothing was installed: republish the wheel "
        "or check the mirror")
    assert cache_state(cache) == {} and scratch_left(cache) == []


def test_a_file_not_in_the_record_or_not_matching_it_is_refused(example_repos: Path, bare: Path,
                                                                torch_venv: Path, tmp_path: Path) -> None:
    """The wheel's files are checked against its RECORD as they are unpacked."""
    src = bare / "files" / PYONLY
    shutil.rmtree(bare / "variants")
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    with zipfile.ZipFile(src) as zf:
        record_name = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(zf.read(record_name).decode())))
    init = next(r[0] for r in rows if r[0].endswith("/__init__.py"))
    changed = tmp_path / "changed.whl"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(changed, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info, zin.read(info) + (b"\nimport os\n" if info.filename == init else b""))
    cache = tmp_path / "cache"
    shutil.copy(changed, src)
    page(bare, "pyonly", [f"../../files/{PYONLY}#sha256={sha256(changed)}"])
    with http_server(bare) as url:
        proc = download(lock(tmp_path / "p", [new_lock("example/pyonly", pyonly, 0)]), url, torch_venv, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (f"error: {PYONLY}: '{init}' does not match its RECORD sha256; nothing was "
                                           "installed: republish the wheel")
    assert cache_state(cache) == {} and scratch_left(cache) == []


# -- secrets, mistakes -----------------------------------------------------------------------------------------


def test_the_password_is_never_printed(example_repos: Path, site: Path, torch_venv: Path, tmp_path: Path) -> None:
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    wheel = copy / "files" / PYONLY
    wheel.write_bytes(wheel.read_bytes() + b"\0")  # the hash mismatch
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    cases = {
        "missing": (new_lock("example/nosuch", "a" * 40, 1), 3),
        "no-fit": (new_lock("example/oldgrey", sha_of(site.parent, "oldgrey", "v1.0.0"), 1), 3),
        "mismatch": (new_lock("example/pyonly", pyonly, 0), 3),
        "other-commit": (new_lock("example/pyonly", "d" * 40, 0), 3),
    }
    with http_server(copy) as url:
        authed = url.replace("http://", f"http://user:{SECRET}@")
        for name, (entry, code) in cases.items():
            proc = download(lock(tmp_path / name, [entry]), authed, torch_venv, tmp_path / "cache")
            assert proc.returncode == code, (name, proc.stderr)
            assert SECRET not in proc.stdout + proc.stderr, (name, proc.stderr)
            assert url in proc.stderr, (name, proc.stderr)
        for args, code in ((["--kernel", "oldgrey"], 3), (["--kernel", "oldgrey", "--json"], 3),
                           (["--kernel", "img2gray"], 2)):  # no build fits: 3; no such project: 2
            which = kf("which", "--python", torch_venv, "--index-url", authed, *args, env=clean_env())
            assert which.returncode == code, (args, which.stderr)
            assert SECRET not in which.stdout + which.stderr, which.stdout + which.stderr
            assert url in which.stdout + which.stderr
    dead = download(lock(tmp_path / "dead", [new_lock("example/pyonly", pyonly, 0)]),
                    f"http://user:{SECRET}@127.0.0.1:9", torch_venv, tmp_path / "cache")
    assert dead.returncode == 4 and SECRET not in dead.stdout + dead.stderr and "127.0.0.1:9" in dead.stderr
    assert cache_state(tmp_path / "cache") == {}


def test_an_index_url_naming_simple_and_a_misspelt_kernel(site: Path, torch_venv: Path,
                                                          tmp_path: Path) -> None:
    with http_server(site) as url:
        for args in (["download", lock(tmp_path / "p", [new_lock("example/pyonly", "a" * 40, 0)]), "--python",
                      torch_venv], ["which", "--python", torch_venv, "--kernel", "pyonly"]):
            proc = kf(*[str(a) for a in args], "--index-url", f"{url}/simple/",
                      env=clean_env(KERNELS_CACHE=str(tmp_path / "c")))
            assert proc.returncode == 2, proc.stderr
            assert proc.stderr.splitlines() == [
                f"error: --index-url {url}/simple/ names a simple/ root; give the index root, the folder holding "
                f"simple/ and variants/: --index-url {url}"]
        which = kf("which", "--python", torch_venv, "--index-url", url, "--kernel", "img2gray", env=clean_env())
        missing = download(lock(tmp_path / "q", [new_lock("example/img2gray", "a" * 40, 1)]), url, torch_venv,
                           tmp_path / "c")
    assert which.returncode == 2, which.stderr
    assert which.stderr.splitlines() == [
        f"error: --kernel img2gray: no such project at {url}/simple/; did you mean img2grey?"]
    assert missing.returncode == 3
    assert missing.stderr.splitlines()[0] == (
        f"error: example/img2gray (kernels.lock): {url} has no project img2gray (no simple/img2gray/ page); did you "
        "mean img2grey?; publish it there or fix --index-url")


# -- a full disk ----------------------------------------------------------------------------------------------


def test_a_full_cache_places_all_or_nothing(example_repos: Path, site: Path, torch_venv: Path,
                                            tmp_path: Path) -> None:
    """The cache on a tmpfs filled up but for N KiB, for growing N: each run places both kernels, or exits 4 with
    one line and nothing of it visible (needs root to mount, as test_disk_faults.py; skipped otherwise)."""
    project = lock(tmp_path / "p", [new_lock("example/pyonly", sha_of(example_repos, "pyonly", "v0.2.0"), 0),
                                    new_lock("example/img2grey", sha_of(example_repos, "img2grey", "v1.1.2"), 1)])
    outcomes = []
    with tmpfs_at(tmp_path / "tmpfs", "4m") as mnt, http_server(site) as url:
        for free_kib in (0, 8, 24, 48, 96, 144, 192, 256, 384, 1024):
            cache = mnt / f"cache-{free_kib}"
            cache.mkdir()
            filler = mnt / "filler"
            with open(filler, "wb", buffering=0) as f, pytest.raises(OSError, match="No space left"):
                while True:
                    f.write(b"\1" * (1 << 14))
            with open(filler, "r+b") as f:
                f.truncate(max(filler.stat().st_size - free_kib * 1024, 0))
            proc = download(project, url, torch_venv, cache)
            filler.unlink()
            state = cache_state(cache)
            outcomes.append(proc.returncode)
            if proc.returncode == 0:
                assert sorted(state) == ["example/img2grey", "example/pyonly"], proc.stderr
                assert (cache / "kernels--example--img2grey" / "refs" / "v1").is_file()
                break
            assert proc.returncode == 4, proc.stdout + proc.stderr
            assert len(proc.stderr.splitlines()) == 1 and proc.stderr.rstrip().endswith(
                ": No space left on device; nothing was installed: make room there, or point KERNELS_CACHE at "
                "another folder"), proc.stderr
            # no snapshot and no ref of the run; blobs it had linked stay (docs/download.md: another run's snapshot
            # may link to them by then), so a kernel placed before the failure is a repository with no revision
            assert all(revisions == [] for revisions in state.values()), state
            assert [p.relative_to(cache).as_posix() for p in cache.glob("*/*/*") if "/blobs/" not in p.as_posix()
                    and p.parts[-3] != ".locks"] == []
            kept = {"kernels--" + repo_id.replace("/", "--") for repo_id in state}
            assert scratch_left(cache) == [] and [n for n in leftovers(cache) if n not in kept] == []
    assert outcomes[0] == 4 and outcomes[-1] == 0, outcomes


# -- a killed run ----------------------------------------------------------------------------------------------

STALL = """
import http.server, sys, time
from pathlib import Path
root = Path(sys.argv[1])
class H(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=str(root), **k)
    def do_GET(self):
        if self.path.endswith(".whl") and sys.argv[3] == "redirect" and self.headers["Host"].startswith("127."):
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{sys.argv[2]}{self.path}")
            self.end_headers()
            return
        if self.path.endswith(".whl") and sys.argv[3] == "stall":
            data = (root / self.path.lstrip("/")).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            print("STALLED", flush=True)
            time.sleep(120)
            return
        super().do_GET()
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), H).serve_forever()
"""


def test_a_killed_run_leaves_nothing_the_cache_scan_warns_about(example_repos: Path, site: Path,
                                                                torch_venv: Path, tmp_path: Path) -> None:
    """kill -9 of the main process alone while it downloads a wheel (the server sends half, then stalls)."""
    from support import free_port, wait_http

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", STALL, str(site), str(port), "stall"], stdout=subprocess.PIPE,
                              text=True)
    cache = tmp_path / "cache"
    try:
        wait_http(f"http://127.0.0.1:{port}/simple/")
        project = lock(tmp_path / "p", [new_lock("example/pyonly", sha_of(example_repos, "pyonly", "v0.2.0"), 0)])
        proc = subprocess.Popen([sys.executable, "-m", "kernel_factory", "download", str(project), "--index-url",
                                 f"http://127.0.0.1:{port}", "--python", str(torch_venv)],
                                env=clean_env(KERNELS_CACHE=str(cache)), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "STALLED"
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
    finally:
        server.kill()
        server.wait(10)
        if server.stdout is not None:
            server.stdout.close()
    assert cache_state(cache) == {}  # no warnings: the partial wheel lies in .locks/, which the scan skips
    assert [p.name for p in cache.iterdir()] == [".locks"]


def test_a_redirect_off_the_origin_is_refused(example_repos: Path, site: Path, torch_venv: Path,
                                             tmp_path: Path) -> None:
    """The index answers the wheel with a redirect to another host name (the same server): refused as a link."""
    from support import free_port, wait_http

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", STALL, str(site), str(port), "redirect"])
    cache = tmp_path / "cache"
    try:
        wait_http(f"http://127.0.0.1:{port}/simple/")
        project = lock(tmp_path / "p", [new_lock("example/pyonly", sha_of(example_repos, "pyonly", "v0.2.0"), 0)])
        proc = download(project, f"http://127.0.0.1:{port}", torch_venv, cache)
    finally:
        server.kill()
        server.wait(10)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (
        f"error: http://127.0.0.1:{port} links to http://localhost:{port}/files/{PYONLY}, which is not on the index's "
        "own origin; nothing is read from there: fix the index")
    assert cache_state(cache) == {} and scratch_left(cache) == []
