"""``local-kernels --cache`` through the installed tool, with huggingface_hub's scan_cache_dir as the oracle.

Each test pip-installs hand-made kernel wheels (laid out as ``to-wheel`` lays them out, with a real RECORD) into
a fresh venv that reaches torch 2.13 CPU and kernels (tests/integration/test_local_kernels_offline.py), runs
``python -m kernel_factory local-kernels --cache`` there, and reads the cache back with ``scan_cache_dir``: no
warnings after a success, a refusal, a full disk or a kill -9, and the refs and snapshots it should hold. What
sits at a commit must stay that commit's bytes whatever happens to the venv afterwards (upgrade, uninstall, an
in-place write), and nothing may be written through a planted link.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import cached_venv, kf, run, tmpfs_at
from test_kernels_loaders import files_of, scan
from test_local_kernels_offline import KERNELS_REQ, judged, kernel_venv, offline_env

SHA1, SHA2 = "1" * 40, "2" * 40
VARIANT = "torch-universal"


def kernel_wheel(out: Path, *, dist: str = "act", repo_id: str = "example/act", version: str = "1.0.0",
                 sha: str = SHA1, body: str = "WHO = 'one'\n", extra: dict[str, bytes] | None = None) -> Path:
    """A universal kernel wheel as to-wheel makes it: package ``act`` with metadata.json, provenance, RECORD."""
    pkg, info = "act", f"{dist.replace('-', '_')}-{version}.dist-info"
    meta = {"name": "act", "id": "_act_0000000", "version": 1, "license": "Apache-2.0", "python-depends": [],
            "backend": {"type": "cpu"}}
    prov = {"repo_id": repo_id, "revision": sha, "ref": f"v{version}", "variant": VARIANT, "digest": None,
            "factory_version": "0.1.0", "package": pkg, "name": "act", "kernel_version": version}
    files = {
        f"{pkg}/__init__.py": body.encode(),
        f"{pkg}/layers/__init__.py": b"LAYER = 1\n",
        f"{pkg}/metadata.json": json.dumps(meta).encode(),
        **{f"{pkg}/{name}": data for name, data in (extra or {}).items()},
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/kernel_factory.json": json.dumps(prov, sort_keys=True).encode(),
    }

    def line(name: str, data: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{name},sha256={digest},{len(data)}\n"

    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", "".join(line(n, d) for n, d in files.items()) + f"{info}/RECORD,,\n")
    return wheel


def site_of(python: Path) -> Path:
    return Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())


def cache_run(python: Path, cache: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return run(python, "-m", "kernel_factory", "local-kernels", "--cache", str(cache), *flags,
               env=offline_env(HF_HOME=str(cache.parent / "hf-home")), check=False)


def pip(python: Path, *args: str | Path) -> None:
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *args)


SNAP = "kernels--example--act/snapshots"


@pytest.fixture(scope="module")
def kernels_site() -> str:
    """site-packages of the cached venv holding the kernels version the project tests."""
    python = cached_venv("kernels", KERNELS_REQ)
    return run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()


def staging(own: Path) -> bool:
    """Whether a run is copying a file into its scratch folder right now."""
    try:
        return any(p.name.startswith("b-") for run_dir in own.iterdir() for p in run_dir.iterdir())
    except OSError:
        return False


def test_upgrade_uninstall_and_in_place_writes_never_change_a_commits_snapshot(
    tmp_path: Path, kernels_site: str
) -> None:
    one = kernel_wheel(tmp_path / "w1", sha=SHA1, body="WHO = 'one'\n")
    two = kernel_wheel(tmp_path / "w2", version="1.0.1", sha=SHA2, body="WHO = 'two'\n")
    python = kernel_venv(tmp_path / "venv", kernels_site, one)
    cache = tmp_path / "cache"
    first = cache_run(python, cache, "--allow-org", "example")
    assert first.returncode == 0, first.stderr
    placed = cache / SNAP / SHA1 / "build" / VARIANT
    v1 = files_of(placed)
    assert v1 == files_of(site_of(python) / "act") and not placed.is_symlink()
    assert scan(cache) == {"example/act": {SHA1: ["v1", "v1.0.0"]}}
    # pip install --upgrade to another release (another commit)
    pip(python, "--upgrade", two)
    second = cache_run(python, cache, "--allow-org", "example")
    assert second.returncode == 0, second.stderr
    assert files_of(placed) == v1  # the old commit still holds the old release's bytes
    assert (cache / SNAP / SHA2 / "build" / VARIANT / "__init__.py").read_text() == "WHO = 'two'\n"
    assert scan(cache) == {"example/act": {SHA1: ["v1.0.0"], SHA2: ["v1", "v1.0.1"]}}
    # an in-place write in the venv, then an uninstall: the cache does not move
    with open(site_of(python) / "act" / "__init__.py", "r+b") as f:
        f.write(b"EVIL")
    run(python, "-m", "pip", "uninstall", "-q", "-y", "act")
    assert files_of(placed) == v1
    assert (cache / SNAP / SHA2 / "build" / VARIANT / "__init__.py").read_text() == "WHO = 'two'\n"
    assert scan(cache) == {"example/act": {SHA1: ["v1.0.0"], SHA2: ["v1", "v1.0.1"]}}
    # and a pinned commit still loads its own code, offline, from the cache alone
    load = run(python, "-c", f"from kernels import get_kernel; print(get_kernel('example/act', revision='{SHA1}').WHO)",
               env=offline_env(KERNELS_CACHE=str(cache)), check=False)
    assert load.stdout.strip() == "one", load.stdout + load.stderr


def test_a_planted_link_refuses_in_one_line_and_nothing_is_written_through_it(
    tmp_path: Path, kernels_site: str
) -> None:
    python = kernel_venv(tmp_path / "venv", kernels_site, kernel_wheel(tmp_path / "w"))
    cache, elsewhere = tmp_path / "cache", tmp_path / "users-folder"
    elsewhere.mkdir()
    (elsewhere / "thesis.tex").write_text("mine")
    (cache / "kernels--example--act").mkdir(parents=True)
    (cache / "kernels--example--act" / "snapshots").symlink_to(elsewhere)
    proc = cache_run(python, cache, "--allow-org", "example")
    assert proc.returncode == 4, proc.stdout + proc.stderr  # that kernel left out; the cache unusable as it is
    assert proc.stderr.splitlines() == [
        f"not in the Hub cache: {cache}/kernels--example--act/snapshots -> {elsewhere}: a symbolic link in the Hub "
        "cache where kernel-factory expects a folder, and it never writes or reads through a link; remove the link "
        "(rm, not rm -r) and run again"]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["thesis.tex"]
    assert not (cache / "kernels--example--act" / "refs").exists()
    assert not (cache / "kernels--example--act" / "blobs").exists()


def test_only_the_kernels_own_distribution_of_an_allowed_organisation_gets_in(
    tmp_path: Path, kernels_site: str
) -> None:
    impostor = kernel_wheel(tmp_path / "w1", dist="fast-act-helpers", sha=SHA2, body="WHO = 'impostor'\n")
    python = kernel_venv(tmp_path / "venv", kernels_site, impostor)
    cache = tmp_path / "cache"
    proc = cache_run(python, cache, "--allow-org", "example")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "left out act (example/act) 1.0.0: the distribution 'fast-act-helpers' claims example/act, whose project is "
        "'act': only a distribution of that name may; pip uninstall 'fast-act-helpers' unless you trust it, and "
        "install act's wheel"]
    assert proc.stdout == ""  # not in LOCAL_KERNELS either
    assert not cache.exists()
    # the real one, of an organisation not allowed by default: LOCAL_KERNELS yes, the shared cache no
    run(python, "-m", "pip", "uninstall", "-q", "-y", "fast-act-helpers")
    pip(python, kernel_wheel(tmp_path / "w2"))
    proc = cache_run(python, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.strip() == f"example/act={site_of(python)}/act"
    assert proc.stderr.splitlines() == [
        "not in the Hub cache: act (example/act) 1.0.0: the organisation example is not allowed in the Hub cache "
        "(add --allow-org example if you trust it); only LOCAL_KERNELS serves it"]
    assert not cache.exists()
    env_allowed = run(python, "-m", "kernel_factory", "local-kernels", "--cache", str(cache),
                      env=offline_env(KERNEL_FACTORY_ALLOW_ORGS="example"), check=False)
    assert env_allowed.returncode == 0, env_allowed.stderr
    assert scan(cache) == {"example/act": {SHA1: ["v1", "v1.0.0"]}}


def test_two_environments_sharing_a_cache_keep_each_others_snapshots(tmp_path: Path, kernels_site: str) -> None:
    a = kernel_venv(tmp_path / "a", kernels_site, kernel_wheel(tmp_path / "w1", sha=SHA1, body="WHO = 'one'\n"))
    b = kernel_venv(tmp_path / "b", kernels_site,
                    kernel_wheel(tmp_path / "w2", version="1.0.1", sha=SHA2, body="WHO = 'two'\n"))
    cache = tmp_path / "cache"
    assert cache_run(a, cache, "--allow-org", "example").returncode == 0
    one = files_of(cache / SNAP / SHA1 / "build" / VARIANT)
    assert cache_run(b, cache, "--allow-org", "example").returncode == 0
    assert files_of(cache / SNAP / SHA1 / "build" / VARIANT) == one == files_of(site_of(a) / "act")
    assert files_of(cache / SNAP / SHA2 / "build" / VARIANT) == files_of(site_of(b) / "act")
    assert scan(cache) == {"example/act": {SHA1: ["v1.0.0"], SHA2: ["v1", "v1.0.1"]}}
    # --check in a tells the truth: version=1 now loads b's commit, a's own commit is still a's bytes
    check = cache_run(a, cache, "--allow-org", "example", "--check")
    lines = check.stdout.splitlines()
    variant2 = f"{cache}/{SNAP}/{SHA2}/build/{VARIANT}"
    assert lines[0] == judged(a)
    assert lines[2] == (f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names "
                        f"{SHA1}: {cache}/{SNAP}/{SHA1}/build/{VARIANT} (this wheel's commit and variant, checked and "
                        "placed by kernel-factory local-kernels)"), check.stdout  # a's run moved v1 back
    check_b = cache_run(b, cache, "--allow-org", "example", "--check")
    assert check_b.stdout.splitlines()[2] == (
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names {SHA2}: "
        f"{variant2} (this wheel's commit and variant, checked and placed by kernel-factory local-kernels)")
    assert scan(cache) == {"example/act": {SHA1: ["v1.0.0"], SHA2: ["v1", "v1.0.1"]}}


def test_the_hubs_signature_is_kept_and_check_names_the_kernels_that_carry_one(
    tmp_path: Path, kernels_site: str
) -> None:
    bundle = b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}'
    python = kernel_venv(tmp_path / "venv", kernels_site,
                         kernel_wheel(tmp_path / "w", extra={"metadata.json.sigstore": bundle}))
    cache = tmp_path / "cache"
    proc = cache_run(python, cache, "--allow-org", "example", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (cache / SNAP / SHA1 / "build" / VARIANT / "metadata.json.sigstore").read_bytes() == bundle
    assert ("  signed: carries the Hub's metadata.json.sigstore (kept in the Hub cache by --cache; "
            "`kernels verify-signature` checks it)") in proc.stdout.splitlines()


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    with tmpfs_at(tmp_path / "tmpfs", "2m") as path:
        yield path


def test_a_full_disk_is_exit_4_in_one_line_and_leaves_nothing(
    tmp_path: Path, kernels_site: str, small_tmpfs: Path
) -> None:
    big = {"weights.bin": os.urandom(3 * 1024 * 1024)}  # more than the 2 MB file system holds
    python = kernel_venv(tmp_path / "venv", kernels_site, kernel_wheel(tmp_path / "w", extra=big))
    cache = small_tmpfs / "cache"
    proc = cache_run(python, cache, "--allow-org", "example")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: the Hub cache {cache}: No space left on device (nothing of this kernel was left there); free space "
        "or fix its permissions, or give another folder: --cache DIR or KERNELS_CACHE"], proc.stderr
    assert scan(cache) == {}
    assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) == [".locks", ".locks/kernel-factory"]


def test_a_kill_9_mid_write_leaves_nothing_scan_cache_dir_warns_about(tmp_path: Path, kernels_site: str) -> None:
    big = {f"part{i}.bin": os.urandom(16 * 1024 * 1024) for i in range(6)}
    python = kernel_venv(tmp_path / "venv", kernels_site, kernel_wheel(tmp_path / "w", extra=big))
    cache = tmp_path / "cache"
    own = cache / ".locks" / "kernel-factory"
    proc = subprocess.Popen([str(python), "-m", "kernel_factory", "local-kernels", "--cache", str(cache),
                             "--allow-org", "example"], env=offline_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if staging(own):
            break
        time.sleep(0.001)
    os.kill(proc.pid, signal.SIGKILL)  # the main process alone, as an operator does
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    # no warning, no snapshot, no ref: the staged blobs were private scratch (the repository's empty folders,
    # made before staging began, are all that is seen)
    assert scan(cache) == {"example/act": {}}
    assert sorted(p.name for p in (cache / "kernels--example--act").iterdir()) == ["blobs", "snapshots"]
    assert list((cache / SNAP).iterdir()) == [] and list((cache / "kernels--example--act" / "blobs").iterdir()) == []
    again = cache_run(python, cache, "--allow-org", "example")
    assert again.returncode == 0, again.stderr
    assert list(own.iterdir()) == []  # the killed run's scratch was swept
    assert scan(cache) == {"example/act": {SHA1: ["v1", "v1.0.0"]}}
    assert files_of(cache / SNAP / SHA1 / "build" / VARIANT) == files_of(site_of(python) / "act")


def test_run_from_the_tools_own_venv_it_names_where_it_looked_and_takes_python(
    tmp_path: Path, kernels_site: str
) -> None:
    """kernel-factory installed in its own venv (pipx-style) sees none of the user's kernels: it says which
    interpreter it looked in, and --python (an interpreter or a venv folder) looks in the user's."""
    python = kernel_venv(tmp_path / "venv", kernels_site, kernel_wheel(tmp_path / "w"))
    bare = kf("local-kernels", env=offline_env())
    assert bare.returncode == 0, bare.stderr
    assert bare.stderr.splitlines() == [
        f"no kernel wheels are installed in the environment of {sys.executable} (none has "
        ".dist-info/kernel_factory.json): run `python -m kernel_factory local-kernels` with the python that runs "
        "your code, or pass --python PY"]
    got = kf("local-kernels", "--python", python, env=offline_env())
    assert got.returncode == 0, got.stderr
    assert got.stdout == f"example/act={site_of(python)}/act\n"
    check = kf("local-kernels", "--python", tmp_path / "venv", "--check", env=offline_env())
    assert check.stdout.splitlines()[:2] == [
        judged(python), f"act (example/act) 1.0.0: would load from {site_of(python)}/act"], check
    missing = kf("local-kernels", "--python", tmp_path / "nope" / "python", env=offline_env())
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith(f"--python {tmp_path}/nope/python: no such interpreter; give the path of a "
                                           "python executable")


def helper_wheel(out: Path, *, sha: str = SHA2) -> Path:
    """``fast-activation-helpers`` 1.0.0, whose wheel carries, as data (``.data/purelib/``), a second
    ``activation-1.0.0.dist-info`` naming kernels-community/activation at ``sha``, and the ``act`` package it
    points at: pip installs both beside its own .dist-info, and no code runs."""
    info, data = "fast_activation_helpers-1.0.0.dist-info", "fast_activation_helpers-1.0.0.data/purelib"
    meta = {"name": "act", "id": "_act_0000000", "version": 1, "license": "Apache-2.0", "python-depends": [],
            "backend": {"type": "cpu"}}
    prov = {"repo_id": "kernels-community/activation", "revision": sha, "ref": "v1.0.0", "variant": VARIANT,
            "digest": None, "factory_version": "0.1.0", "package": "act", "name": "act", "kernel_version": "1.0.0"}

    def line(name: str, body: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
        return f"{name},sha256={digest},{len(body)}\n"

    package = {"act/__init__.py": b"WHO = 'helper'\n", "act/metadata.json": json.dumps(meta).encode()}
    fake = {"activation-1.0.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: activation\nVersion: 1.0.0\n",
            "activation-1.0.0.dist-info/kernel_factory.json": json.dumps(prov, sort_keys=True).encode()}
    fake_record = "".join(line(n, d) for n, d in {**package, **fake}.items()) + "activation-1.0.0.dist-info/RECORD,,\n"
    files = {
        **{f"{data}/{n}": d for n, d in package.items()},
        **{f"{data}/{n}": d for n, d in fake.items()},
        f"{data}/activation-1.0.0.dist-info/RECORD": fake_record.encode(),
        "fast_activation_helpers/__init__.py": b"",
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: fast-activation-helpers\nVersion: 1.0.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / "fast_activation_helpers-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, body in files.items():
            z.writestr(name, body)
        z.writestr(f"{info}/RECORD", "".join(line(n, d) for n, d in files.items()) + f"{info}/RECORD,,\n")
    return wheel


def test_a_dist_info_carried_as_data_by_another_wheel_claims_nothing(tmp_path: Path, kernels_site: str) -> None:
    """A plain pip install of fast-activation-helpers (a .dist-info of `activation` in its .data/purelib/) must
    not place kernels-community/activation at its commit, nor move refs/v1 off the real kernel's commit."""
    real = kernel_wheel(tmp_path / "w1", dist="activation", repo_id="kernels-community/activation", sha=SHA1)
    python = kernel_venv(tmp_path / "venv", kernels_site, real)
    cache = tmp_path / "cache"
    first = cache_run(python, cache)
    assert first.returncode == 0, first.stdout + first.stderr
    assert scan(cache) == {"kernels-community/activation": {SHA1: ["v1", "v1.0.0"]}}
    run(python, "-m", "pip", "uninstall", "-q", "-y", "activation")
    pip(python, helper_wheel(tmp_path / "w2"))
    assert (site_of(python) / "activation-1.0.0.dist-info" / "kernel_factory.json").is_file()  # pip put it there
    proc = cache_run(python, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "left out act (kernels-community/activation) 1.0.0: its file act/__init__.py is listed in the RECORD of "
        "'fast-activation-helpers' 1.0.0 too, which installed it: only the distribution that installed its own "
        "files may claim a kernel; pip uninstall 'fast-activation-helpers' unless you trust it"]
    assert proc.stdout == ""  # not in LOCAL_KERNELS either
    assert scan(cache) == {"kernels-community/activation": {SHA1: ["v1", "v1.0.0"]}}
    assert not (cache / "kernels--kernels-community--activation" / "snapshots" / SHA2).exists()
