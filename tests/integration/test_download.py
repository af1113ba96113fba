"""``kernel-factory download``: a project's kernels.lock -> the Hub cache, from an index on 127.0.0.1.

Real wheels built by ``kernel-factory build`` from the example repositories (and two made here: one that
depends on another kernel, one built for torch 2.12 only), indexed by ``kernel-factory index`` and served by
``python -m http.server``, whose log counts the requests. The cache is then read by the real kernels library
in a fresh venv with torch 2.13 CPU, with HF_HUB_OFFLINE=1 and a dead Hub endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import cached_venv, clean_env, fresh_venv, http_server, kf, run, tmpfs_at

pytestmark = pytest.mark.integration
KERNELS_REQ = f"kernels=={importlib.metadata.version('kernels')}"
CPU = "torch213-cxx11-cpu-x86_64-linux"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z",
           "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z"}

CONFIG = """
[factory]
store = "site"
jobs = 1

[[kernel]]
repo = "{repos}/img2grey"
repo-id = "example/img2grey"
tags = ">=1.1.0,<2"

[[kernel]]
repo = "{repos}/pyonly"
repo-id = "example/pyonly"
tags = ">=0.2"

[[kernel]]
repo = "{here}/pydep"
repo-id = "example/pydep"
tags = ">=0.1"

[[kernel]]
repo = "{here}/oldgrey"
repo-id = "example/oldgrey"
tags = ">=1.0"
"""

PYDEP = '''"""A pure-Python kernel that depends on example/pyonly."""

import torch


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2
'''


def git_repo(folder: Path, tag: str) -> str:
    env = clean_env(**GIT_ENV)
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", tag), ("tag", tag)):
        run("git", "-C", folder, *args, env=env)
    return run("git", "-C", folder, "rev-parse", "HEAD").stdout.strip()


def b64sha(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def make_pydep(repos: Path, folder: Path) -> None:
    """example/pydep 0.1.0: torch-universal, nested layout, kernel-depends on example/pyonly version 0."""
    variant = folder / "build" / "torch-universal"
    (variant / "pydep").mkdir(parents=True)
    (variant / "pydep" / "__init__.py").write_text(PYDEP)
    meta = json.loads((repos / "pyonly" / "build" / "torch-universal" / "metadata.json").read_text())
    meta.update(name="pydep", id="_pydep_0000001", source="https://github.com/example/pydep/tree/v0.1.0",
                upstream="https://github.com/example/pydep")
    meta["kernel-depends"] = [{"repo-id": "example/pyonly", "version": 0}]
    meta["digest"] = {"algorithm": "sha256", "files": {"pydep/__init__.py": b64sha(PYDEP.encode())}}
    (variant / "metadata.json").write_text(json.dumps(meta, indent=2))
    (folder / "README.md").write_text("# pydep\n")
    git_repo(folder, "v0.1.0")


def make_oldgrey(repos: Path, folder: Path) -> None:
    """example/oldgrey 1.0.0: img2grey's CPU build, but for torch 2.12 only."""
    variant = folder / "build" / "torch212-cxx11-cpu-x86_64-linux"
    shutil.copytree(repos / "img2grey" / "build" / CPU, variant)
    meta = json.loads((variant / "metadata.json").read_text())
    meta["name"] = "oldgrey"
    (variant / "metadata.json").write_text(json.dumps(meta, indent=2))
    (folder / "README.md").write_text("# oldgrey\n")
    git_repo(folder, "v1.0.0")


@pytest.fixture(scope="module")
def site(example_repos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("download")
    make_pydep(example_repos, tmp / "pydep")
    make_oldgrey(example_repos, tmp / "oldgrey")
    (tmp / "factory.toml").write_text(CONFIG.format(repos=example_repos, here=tmp))
    for args in (("build",), ("index",)):
        proc = kf(*args, "--config", tmp / "factory.toml", "-q", env=clean_env())
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp / "site"


@pytest.fixture(scope="module")
def index(site: Path) -> Iterator[str]:
    with http_server(site) as url:
        yield url


@pytest.fixture(scope="module")
def torch_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with torch 2.13 CPU and the kernels library (no kernel-factory, no kernels downloaded)."""
    python = fresh_venv(tmp_path_factory.mktemp("venv") / "venv", torch=True)
    kernels_python = cached_venv("kernels", KERNELS_REQ)
    kernels_site = run(kernels_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    (Path(site) / "zzz_kernels.pth").write_text(kernels_site.strip() + "\n")
    return python


def sha_of(repos: Path, repo: str, tag: str) -> str:
    return run("git", "-C", repos / repo, "rev-parse", f"{tag}^{{commit}}").stdout.strip()


def wheel_gets(index: str, site: Path) -> list[str]:
    """The wheel files the index served so far (http.server's log)."""
    port = index.rsplit(":", 1)[1]
    log = (site.parent / f"http-{port}.log").read_text()
    return [line.split('"GET ', 1)[1].split()[0] for line in log.splitlines()
            if '"GET ' in line and line.split('"GET ', 1)[1].split()[0].endswith(".whl")]


def leftovers(cache: Path) -> list[str]:
    """What a run left in the cache folder, but for an empty ``.locks/`` (huggingface_hub makes it too) holding
    at most an empty ``kernel-factory/`` (the temporary folders of a run lie in it, and must be gone)."""
    locks = cache / ".locks"
    ours = locks / "kernel-factory"  # the writer's scratch folders live in it (local/cache/stage.py)
    in_locks = [p for p in locks.iterdir() if p != ours or any(ours.iterdir())] if locks.is_dir() else []
    return sorted(p.name for p in cache.iterdir() if p != locks or in_locks)


def download(project: Path, index: str, python: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return kf("download", project, "--index-url", index, "--python", python, env=clean_env(KERNELS_CACHE=str(cache)))


def offline(python: Path, script: str, cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = clean_env(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", KERNELS_CACHE=str(cache),
                    HF_HOME=str(cwd / "hf-home"))
    return run(python, "-c", script, cwd=cwd, env=env, check=False)


LOAD = """
from pathlib import Path
import torch
from kernels import get_locked_kernel, load_kernel

lock = Path("project/kernels.lock")
img = load_kernel("example/img2grey", lockfile=lock)
x = torch.rand(4, 5, 3)
torch.testing.assert_close(img.img2grey(x), x[..., 0] * 0.299 + x[..., 1] * 0.587 + x[..., 2] * 0.114)
dep = get_locked_kernel("example/pydep", lockfile=lock)
torch.testing.assert_close(dep.double(torch.ones(3)), torch.full((3,), 2.0))
print(img.__file__)
print(dep.__file__)
"""


def test_new_lock_downloads_once_and_kernels_loads_offline(
    example_repos: Path, site: Path, index: str, torch_venv: Path, tmp_path: Path
) -> None:
    old = sha_of(example_repos, "img2grey", "v1.1.0")  # not the newest: the lock decides, not the index
    pydep = sha_of(site.parent, "pydep", "v0.1.0")
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([  # as kernels 0.17 writes it (kernels lock)
        {"dependency": {"repo-id": "example/img2grey", "version": 1}, "lock": {"commit": old}},
        {"dependency": {"repo-id": "example/pydep", "version": 0}, "lock": {"commit": pydep}},
        {"dependency": {"repo-id": "example/pyonly", "version": 0}, "lock": {"commit": pyonly}},
    ], indent=2))
    cache = tmp_path / "cache"
    before = len(wheel_gets(index, site))

    # Control: without the download, the same code fails offline.
    bare = offline(torch_venv, LOAD, cache, tmp_path)
    assert bare.returncode != 0 and "Cannot find a local snapshot for example/img2grey" in bare.stderr, bare.stderr

    first = download(project, index, torch_venv, cache)
    assert first.returncode == 0, first.stdout + first.stderr
    img_wheel = "img2grey-1.1.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    assert first.stdout.splitlines() == [
        f"example/img2grey  {old[:12]}  {CPU}  {img_wheel}  (downloaded)",
        f"example/pydep  {pydep[:12]}  torch-universal  pydep-0.1.0-py3-none-any.whl  (downloaded)",
        f"example/pyonly  {pyonly[:12]}  torch-universal  pyonly-0.2.0-py3-none-any.whl  (downloaded)",
        f"3 kernels in {cache}: 3 downloaded, 0 already there",
    ]
    assert sorted(wheel_gets(index, site)[before:]) == [
        f"/files/{img_wheel.replace('+', '%2B')}", "/files/pydep-0.1.0-py3-none-any.whl",
        "/files/pyonly-0.2.0-py3-none-any.whl"]  # the records told which wheels to leave: only these three
    img_dir = cache / "kernels--example--img2grey" / "snapshots" / old / "build" / CPU
    assert sorted(p.name for p in img_dir.iterdir()) == [  # the Hub's folder, its compat folder img2grey/ included
        "__init__.py", "_img2grey_7ad1a3f.abi3.so", "_ops.py", "img2grey", "metadata.json"]
    assert (cache / "kernels--example--img2grey" / "refs" / "v1").read_text() == old

    # Twice: nothing downloaded.
    middle = len(wheel_gets(index, site))
    second = download(project, index, torch_venv, cache)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[-1] == f"3 kernels in {cache}: 0 downloaded, 3 already there"
    assert wheel_gets(index, site)[middle:] == []

    proc = offline(torch_venv, LOAD, cache, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        f"{img_dir}/__init__.py",
        f"{cache}/kernels--example--pydep/snapshots/{pydep}/build/torch-universal/pydep/__init__.py",  # nested
    ]


def test_old_lock_format_and_an_unlocked_dependency(
    example_repos: Path, site: Path, index: str, torch_venv: Path, tmp_path: Path
) -> None:
    """kernels <= 0.12's lock (repo_id, sha, variants); pyonly, which pydep depends on, is not in it."""
    new = sha_of(example_repos, "img2grey", "v1.1.2")
    pydep = sha_of(site.parent, "pydep", "v0.1.0")
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    project = tmp_path / "project"
    project.mkdir()
    from test_download_checks import git_lock_hash

    (project / "kernels.lock").write_text(json.dumps([  # the hashes are checked: the Hub's own, from git
        {"repo_id": "example/img2grey", "sha": new},  # no variants, no hashes: nothing to check
        {"repo_id": "example/pydep", "sha": pydep, "variants": {"torch-universal": {  # a nested build
            "hash": git_lock_hash(site.parent / "pydep", pydep, "torch-universal"), "hash_type": "git_lfs_concat"}}},
    ]))
    cache = tmp_path / "cache"
    proc = download(project, index, torch_venv, cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-2:] == [
        f"example/pyonly  {pyonly[:12]}  torch-universal  pyonly-0.2.0-py3-none-any.whl  (downloaded)",
        f"3 kernels in {cache}: 3 downloaded, 0 already there"]
    assert (cache / "kernels--example--pyonly" / "refs" / "v0").read_text() == pyonly
    assert not (cache / "kernels--example--img2grey" / "refs").exists()  # the old format names no ref
    # kernels 0.17 no longer reads this format; the locked commit loads by revision.
    script = f"from kernels import get_kernel\nprint(get_kernel('example/img2grey', revision='{new}').__file__)"
    loaded = offline(torch_venv, script, cache, tmp_path)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == f"{cache}/kernels--example--img2grey/snapshots/{new}/build/{CPU}/__init__.py"
    again = download(project, index, torch_venv, cache)
    assert again.stdout.splitlines()[-1] == f"3 kernels in {cache}: 0 downloaded, 3 already there", again.stderr


def test_a_build_for_another_torch_is_refused_with_what_exists(
    site: Path, index: str, torch_venv: Path, tmp_path: Path
) -> None:
    sha = sha_of(site.parent, "oldgrey", "v1.0.0")
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": "example/oldgrey", "version": 1}, "lock": {"commit": sha}}]))
    cache = tmp_path / "cache"
    before = len(wheel_gets(index, site))
    proc = download(project, index, torch_venv, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: example/oldgrey at {sha[:12]} (kernels.lock): no build on {index} fits torch213cpucxx11 on "
        "x86_64-linux; builds there are, nearest first:",
        "  torch212cpucxx11  manylinux_2_28_x86_64  1.0.0  (torch 2.12, cpu, cxx11)",
        f"nothing was installed in {cache}",
    ]
    assert proc.stdout == ""
    assert leftovers(cache) == []
    assert wheel_gets(index, site)[before:] == []  # never downloaded, never imported


def test_a_kernel_the_index_lacks(index: str, torch_venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": "example/nosuch", "version": 1}, "lock": {"commit": "a" * 40}}]))
    proc = download(project, index, torch_venv, tmp_path / "cache")
    assert proc.returncode == 3
    assert proc.stderr.splitlines()[0] == (
        f"error: example/nosuch (kernels.lock): {index} has no project nosuch (no simple/nosuch/ page); "
        "publish it there or fix --index-url")


def test_a_hash_mismatch_installs_nothing(
    example_repos: Path, site: Path, torch_venv: Path, tmp_path: Path
) -> None:
    """A copy of the site whose pyonly wheel was replaced after the index was made."""
    copy = tmp_path / "site"
    shutil.copytree(site, copy, symlinks=False)
    wheel = copy / "files" / "pyonly-0.2.0-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": "example/img2grey", "version": 1},
         "lock": {"commit": sha_of(example_repos, "img2grey", "v1.1.2")}},
        {"dependency": {"repo-id": "example/pyonly", "version": 0},
         "lock": {"commit": sha_of(example_repos, "pyonly", "v0.2.0")}}]))
    cache = tmp_path / "cache"
    with http_server(copy) as url:
        proc = download(project, url, torch_venv, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("error: pyonly-0.2.0-py3-none-any.whl: sha256 ") and first.endswith(
        "gives; nothing was installed: republish the wheel or check the mirror"), first
    assert leftovers(cache) == []  # img2grey, which was fine, is not there either


def test_unreachable_index_exits_4(torch_venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": "example/img2grey", "version": 1}, "lock": {"commit": "a" * 40}}]))
    proc = download(project, "http://127.0.0.1:9", torch_venv, tmp_path / "cache")
    assert proc.returncode == 4
    assert proc.stderr.strip().startswith(
        "error: --index-url: cannot reach http://127.0.0.1:9/variants/torch213cpucxx11/simple/img2grey/ ("), proc.stderr


def test_a_full_cache_exits_4_and_a_rerun_completes(
    example_repos: Path, index: str, torch_venv: Path, tmp_path: Path
) -> None:
    """The cache on a full tmpfs (needs root, as tests/integration/test_disk_faults.py; skipped otherwise)."""
    with tmpfs_at(tmp_path / "tmpfs", "2m") as mnt:
        cache = mnt / "cache"
        cache.mkdir()
        filler = mnt / "filler"
        with open(filler, "wb", buffering=0) as f, pytest.raises(OSError, match="No space left"):
            while True:
                f.write(b"\0" * (1 << 16))
        project = tmp_path / "project"
        project.mkdir()
        (project / "kernels.lock").write_text(json.dumps([
            {"dependency": {"repo-id": "example/img2grey", "version": 1},
             "lock": {"commit": sha_of(example_repos, "img2grey", "v1.1.2")}}]))
        proc = download(project, index, torch_venv, cache)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert proc.stderr.splitlines()[-1].endswith(
            ": No space left on device; nothing was installed: make room there, or point KERNELS_CACHE at another "
            "folder"), proc.stderr
        assert leftovers(cache) == []  # no temporary folder left behind
        filler.unlink()
        again = download(project, index, torch_venv, cache)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines()[-1] == f"1 kernel in {cache}: 1 downloaded, 0 already there"


@pytest.mark.parametrize("form", ["folder", "file-url"])
def test_the_index_may_be_a_folder(form: str, example_repos: Path, site: Path, torch_venv: Path,
                                   tmp_path: Path) -> None:
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": "example/pyonly", "version": 0}, "lock": {"commit": pyonly}}]))
    cache = tmp_path / "cache"
    proc = download(project, str(site) if form == "folder" else site.as_uri(), torch_venv, cache)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"1 kernel in {cache}: 1 downloaded, 0 already there"
    assert (cache / "kernels--example--pyonly" / "snapshots" / pyonly / "build" / "torch-universal" / "pyonly" /
            "__init__.py").is_file()
