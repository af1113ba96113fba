"""The variant travels byte for byte, with kernels 0.19.1's own digest check as the oracle (it runs at every load).

Wheels of the example kernels (img2grey flat with its compat folder, relu-nested nested, pyonly nested and
pure-Python) and of a kernel in kernel-builder's zip layout made here, all by ``kernel-factory to-wheel``. For each:
(a) the wheel's variant root, unpacked, loads with ``kernels.get_local_kernel``; (b) the snapshot ``download`` and
``local-kernels --cache`` write loads with ``get_kernel(revision=<sha>)`` from the Hub cache; (c) LOCAL_KERNELS from
``local-kernels --shell`` loads with ``get_kernel(version=N)``. Offline (HF_HUB_OFFLINE=1, a dead Hub endpoint), in a
fresh venv with torch 2.13 CPU and kernels 0.19.1. The pip- and uv-installed wheels import as plain packages (not
the zip layout, which only kernels loads), and check-wheel-contents passes them (the zip layout with W010 ignored).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from support import built_wheel, cached_venv, clean_env, fresh_venv, kf, run

pytestmark = pytest.mark.integration
KERNELS_019 = "kernels==0.19.1"
CPU = "torch213-cxx11-cpu-x86_64-linux"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z",
           "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z"}
ZIP_ID = "_zipact_0a1b2c3"
# repo id -> (distribution file name part, what a call of the kernel prints)
KERNELS = {
    "example/img2grey": "img2grey",
    "example/relu-nested": "relu_nested",
    "example/pyonly": "pyonly",
    "example/zipact": "zipact",
}
CALL = """
import torch
def call(repo, k):
    if repo == "example/img2grey":
        x = torch.rand(4, 5, 3)
        torch.testing.assert_close(k.img2grey(x), x[..., 0] * 0.299 + x[..., 1] * 0.587 + x[..., 2] * 0.114)
    elif repo == "example/relu-nested":
        y = torch.randn(64)
        torch.testing.assert_close(k.relu(y), torch.clamp(y, min=0))
    elif repo == "example/pyonly":
        z = torch.randn(3, 8)
        torch.testing.assert_close(k.silu_and_mul(z), torch.nn.functional.silu(z[:, :4]) * z[:, 4:])
    else:
        assert k.double(torch.ones(2)).tolist() == [2.0, 2.0] and k.HOW == "zip"
    print(repo, "ok")
"""


def b64sha(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def make_zip_repo(folder: Path) -> str:
    """A kernel repository whose universal build is in the zip layout (the package in build/<variant>/<id>.zip,
    ``build-layout: "zip"``), tagged v1.0.0; returns the commit."""
    vdir = folder / "build" / "torch-universal"
    vdir.mkdir(parents=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in (("__init__.py", "from ._ops import double\nHOW = 'zip'\n"),
                           ("_ops.py", "def double(x):\n    return x * 2\n")):
            zf.writestr(zipfile.ZipInfo(name, (2026, 1, 2, 0, 0, 0)), text)
    archive = buf.getvalue()
    (vdir / f"{ZIP_ID}.zip").write_bytes(archive)
    meta = {"name": "zipact", "id": ZIP_ID, "version": 1, "license": "Apache-2.0", "python-depends": [],
            "backend": {"type": "cpu", "archs": []}, "build-layout": "zip", "kernels-minver": "0.19.0",
            "digest": {"algorithm": "sha256", "files": {f"{ZIP_ID}.zip": b64sha(archive)}}}
    (vdir / "metadata.json").write_text(json.dumps(meta, indent=2))
    (folder / "README.md").write_text("# zipact\n\nDoubles a tensor, from a zip.\n")
    env = clean_env(**GIT_ENV)
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "zip build"),
                 ("tag", "v1.0.0")):
        run("git", "-C", folder, *args, env=env)
    return run("git", "-C", folder, "rev-parse", "HEAD").stdout.strip()


@pytest.fixture(scope="module")
def built(example_repos: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Path], dict[str, str]]:
    """(repo id -> its wheel, repo id -> the commit it was built from), all by ``kernel-factory to-wheel``."""
    tmp = tmp_path_factory.mktemp("variant-root")
    zip_sha = make_zip_repo(tmp / "zipact")
    out = tmp / "wheels"
    out.mkdir()
    sources = {"example/img2grey": (example_repos / "img2grey", "1.1.2"),
               "example/relu-nested": (example_repos / "relu-nested", "0.1.0"),
               "example/pyonly": (example_repos / "pyonly", "0.2.0"),
               "example/zipact": (tmp / "zipact", "1.0.0")}
    wheels: dict[str, Path] = {}
    shas: dict[str, str] = {}
    for repo_id, (path, version) in sources.items():
        dest = out / repo_id.split("/")[1]
        proc = kf("to-wheel", path, version, "-o", dest, "--repo-id", repo_id, "--variants", CPU,
                  "--variants", "torch-universal", env=clean_env())
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (wheel,) = dest.glob("*.whl")
        wheels[repo_id] = wheel
        shas[repo_id] = run("git", "-C", path, "rev-parse", f"v{version}^{{commit}}").stdout.strip()
    assert shas["example/zipact"] == zip_sha
    return wheels, shas


@pytest.fixture
def python(tmp_path: Path) -> Path:
    """A fresh venv with torch 2.13 CPU, kernels 0.19.1 (its own venv, through a .pth) and kernel-factory."""
    py = fresh_venv(tmp_path / "venv019", torch=True)
    kernels_py = cached_venv("kernels", KERNELS_019)
    kernels_site = run(kernels_py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    site = Path(run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "zzz_kernels.pth").write_text(kernels_site + "\n")
    run(py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", built_wheel(), env=clean_env())
    assert run(py, "-c", "import kernels; print(kernels.__version__)").stdout.strip() == "0.19.1"
    return py


def offline(python: Path, script: str, tmp: Path, **env: str) -> str:
    proc = run(python, "-c", CALL + script, cwd=tmp, check=False,
               env=clean_env(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp / "hf-home"),
                             **env))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def unpack_root(wheel: Path, into: Path) -> Path:
    """The wheel's variant root, as its provenance names it, unpacked into ``into``."""
    with zipfile.ZipFile(wheel) as zf:
        prov = json.loads(zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/kernel_factory.json"))))
        root = str(prov["variant-root"])
        for name in zf.namelist():
            if name.startswith(root + "/"):
                target = into / root / name[len(root) + 1:]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
    return into / root


def test_a_the_unpacked_variant_root_passes_kernels_digest_check(
        built: tuple[dict[str, Path], dict[str, str]], python: Path, tmp_path: Path) -> None:
    wheels, _ = built
    roots = {repo: unpack_root(wheel, tmp_path / repo.split("/")[1]) for repo, wheel in wheels.items()}
    assert sorted(p.name for p in roots.values()) == [
        "_pyonly_kernel", "_relu_nested_kernel", "_zipact_kernel", "img2grey"]
    script = "from pathlib import Path\nfrom kernels import get_local_kernel\n" + "".join(
        f"call({repo!r}, get_local_kernel(Path({str(root)!r})))\n" for repo, root in roots.items())
    assert offline(python, script, tmp_path).splitlines() == [f"{repo} ok" for repo in KERNELS]
    # The control: the digest check is on. A file the digest lists, taken away, is refused.
    (roots["example/img2grey"] / "img2grey" / "__init__.py").unlink()
    proc = run(python, "-c", "from pathlib import Path\nfrom kernels import get_local_kernel\n"
               f"get_local_kernel(Path({str(roots['example/img2grey'])!r}))", check=False,
               env=clean_env(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "h")))
    assert proc.returncode != 0 and "Missing file: img2grey/__init__.py" in proc.stderr, proc.stderr


def test_b_c_what_local_kernels_and_download_provide_passes_kernels_digest_check(
        built: tuple[dict[str, Path], dict[str, str]], python: Path, tmp_path: Path) -> None:
    wheels, shas = built
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *wheels.values(), env=clean_env())
    # (b) local-kernels --cache: the installed variant roots into the Hub cache
    cache = tmp_path / "cache"
    env = clean_env(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf-home"))
    placed = run(python, "-m", "kernel_factory", "local-kernels", "--cache", str(cache), "--allow-org", "example",
                 env=env, check=False)
    assert placed.returncode == 0, placed.stdout + placed.stderr
    for repo, sha in shas.items():
        variant = CPU if repo in ("example/img2grey", "example/relu-nested") else "torch-universal"
        snap = cache / f"kernels--{repo.replace('/', '--')}" / "snapshots" / sha / "build" / variant
        assert (snap / "metadata.json").is_file(), sorted(p.name for p in snap.parent.iterdir())
    script = "from kernels import get_kernel\n" + "".join(
        f"call({repo!r}, get_kernel({repo!r}, revision={sha!r}))\n" for repo, sha in shas.items())
    assert offline(python, script, tmp_path, KERNELS_CACHE=str(cache)).splitlines() == [f"{r} ok" for r in KERNELS]
    # (c) LOCAL_KERNELS from --shell: the installed variant roots themselves, with an empty Hub cache
    shell = run(python, "-m", "kernel_factory", "local-kernels", "--shell", env=env, check=False)
    assert shell.returncode == 0, shell.stderr
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    value = shell.stdout.strip().removeprefix("export LOCAL_KERNELS=").strip("'")
    assert value == ":".join(f"{repo}={site}/{root}" for repo, root in (
        ("example/img2grey", "img2grey"), ("example/pyonly", "_pyonly_kernel"),
        ("example/relu-nested", "_relu_nested_kernel"), ("example/zipact", "_zipact_kernel")))
    versions = {"example/img2grey": 1, "example/relu-nested": 0, "example/pyonly": 0, "example/zipact": 1}
    script = "from kernels import get_kernel\n" + "".join(
        f"call({repo!r}, get_kernel({repo!r}, version={versions[repo]}))\n" for repo in KERNELS)
    assert offline(python, script, tmp_path, LOCAL_KERNELS=value,
                   KERNELS_CACHE=str(tmp_path / "empty")).splitlines() == [f"{r} ok" for r in KERNELS]
    # (b) download: the same wheels through an index folder and a kernels.lock, into another cache
    site_dir, flat = tmp_path / "site", tmp_path / "all-wheels"
    flat.mkdir()
    for wheel in wheels.values():
        shutil.copy(wheel, flat)
    idx = kf("index", "--store", site_dir, "--wheels", flat, env=clean_env(), cwd=tmp_path)
    assert idx.returncode == 0, idx.stdout + idx.stderr
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": repo, "version": versions[repo]}, "lock": {"commit": shas[repo]}}
        for repo in KERNELS], indent=2))
    cache2 = tmp_path / "cache2"
    got = kf("download", project, "--index-url", site_dir.as_uri(), "--python", python,
             env=clean_env(KERNELS_CACHE=str(cache2)))
    assert got.returncode == 0, got.stdout + got.stderr
    script = "from kernels import get_kernel\n" + "".join(
        f"call({repo!r}, get_kernel({repo!r}, revision={sha!r}))\n" for repo, sha in shas.items())
    assert offline(python, script, tmp_path, KERNELS_CACHE=str(cache2)).splitlines() == [f"{r} ok" for r in KERNELS]


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_installed_wheels_import_as_packages(built: tuple[dict[str, Path], dict[str, str]], tmp_path: Path,
                                             installer: str) -> None:
    """The flat and nested wheels import with a plain ``import`` (the nested one through its .pth path entry); the
    zip layout is the kernels library's to load, and a plain import does not find it."""
    wheels, _ = built
    py = fresh_venv(tmp_path / "venv", torch=True)
    if installer == "pip":
        run(py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *wheels.values(), env=clean_env())
    else:
        uv = Path(sys.executable).parent / "uv"
        run(uv, "pip", "install", "-q", "--no-deps", "--offline", "--python", py, *wheels.values(), env=clean_env())
    proc = run(py, "-c", CALL + "import importlib.util, img2grey, relu_nested, pyonly\n"
               "call('example/img2grey', img2grey); call('example/relu-nested', relu_nested)\n"
               "call('example/pyonly', pyonly)\n"
               "print(importlib.util.find_spec('zipact'))\n", env=clean_env(), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["example/img2grey ok", "example/relu-nested ok", "example/pyonly ok", "None"]


def test_check_wheel_contents_passes_every_layout(built: tuple[dict[str, Path], dict[str, str]]) -> None:
    """Every wheel passes; the zip layout's root holds an archive, not modules, which W010 names (and only that)."""
    wheels, _ = built
    tool = Path(sys.executable).parent / "check-wheel-contents"
    files = [w for repo, w in wheels.items() if repo != "example/zipact"]
    proc = run(tool, *files, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    zipped = run(tool, wheels["example/zipact"], check=False)
    assert zipped.stdout.splitlines() == [
        f"{wheels['example/zipact']}: W010: Toplevel library directory contains no Python modules:",
        "  _zipact_kernel/"]
    assert run(tool, "--ignore", "W010", wheels["example/zipact"]).returncode == 0
