"""``local-kernels --check --python APP`` judges with APP's torch and APP's kernels, not kernel-factory's.

kernel-factory runs from its own venv without torch (as a pipx or uv tool install); APP is a fresh venv with
torch 2.13 CPU, a real kernels (0.17.2 or 0.19.1) and the img2grey wheel ``to-wheel`` built. The oracle is
kernels itself in APP, offline: what ``--check`` says each path does, the kernels there does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import built_wheel, cached_venv, clean_env, fresh_venv, hand_wheel, kf, run

pytestmark = pytest.mark.integration
CPU = "torch213-cxx11-cpu-x86_64-linux"


def purelib(python: Path | str) -> Path:
    return Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())


@pytest.fixture(scope="module")
def img2grey(example_repos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    proc = kf("to-wheel", example_repos / "img2grey", "1.1.2", "-o", out, "--repo-id", "example/img2grey",
              "--variants", CPU)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def kf_without_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kernel-factory in a venv where torch does not import: its dependencies are links to the test venv's,
    but for torch and kernel-factory itself (installed from the wheel ``make install`` built)."""
    venv = tmp_path_factory.mktemp("kf") / "venv"
    python = fresh_venv(venv)
    deps = venv.parent / "deps"
    deps.mkdir()
    for entry in purelib(sys.executable).iterdir():
        if not entry.name.lower().startswith(("torch", "functorch", "kernel_factory", "_distutils", "distutils")):
            (deps / entry.name).symlink_to(entry)
    (purelib(python) / "zzz_deps.pth").write_text(f"{deps}\n")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", built_wheel(), env=clean_env())
    assert run(python, "-c", "import torch", check=False).returncode != 0
    return python


def app(path: Path, kernels: str, *wheels: Path) -> Path:
    """A fresh venv with torch 2.13 CPU, ``kernels`` and ``wheels`` (no kernel-factory)."""
    python = fresh_venv(path, torch=True)
    kernels_python = cached_venv(f"kernels-{kernels}", f"kernels=={kernels}")
    (purelib(python) / "zzz_kernels.pth").write_text(f"{purelib(kernels_python)}\n")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *wheels, env=clean_env())
    return python


def offline_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Offline, with a home of its own (kernels 0.19 keeps digest receipts there: a load must not reuse one)."""
    home = tmp / f"home-{len(os.listdir(tmp))}"
    home.mkdir()
    return clean_env(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", HOME=str(home),
                     XDG_CACHE_HOME=str(home / ".cache"), HF_HOME=str(home / "hf"), **extra)


def check(kf_python: Path, python: Path, cache: Path, tmp: Path, *, place: bool = False
          ) -> subprocess.CompletedProcess[str]:
    """``local-kernels --check`` (with ``place``: ``--cache``, placing the wheel first) on the Hub cache ``cache``."""
    env = offline_env(tmp, KERNELS_CACHE=str(cache))
    env.pop("LOCAL_KERNELS", None)
    return run(kf_python, "-m", "kernel_factory", "local-kernels", "--check", "--python", python,
               *(["--cache", str(cache), "--allow-org", "example"] if place else []), env=env, check=False)


LOAD = """
import sys
from kernels import get_kernel
kw = {sys.argv[1]: int(sys.argv[2]) if sys.argv[1] == "version" else sys.argv[2]}
try:
    print(get_kernel("example/img2grey", **kw).__file__)
except Exception as exc:
    print(f"refused: {type(exc).__name__}: {str(exc).splitlines()[0]}")
"""


def load(python: Path, cache: Path, tmp: Path, how: str, what: str) -> str:
    proc = run(python, "-c", LOAD, how, what, env=offline_env(tmp, KERNELS_CACHE=str(cache)), cwd=tmp)
    return proc.stdout.strip().splitlines()[-1]


def test_kernels_0172_judged_with_the_apps_torch(kf_without_torch: Path, img2grey: Path, tmp_path: Path) -> None:
    python = app(tmp_path / "app", "0.17.2", img2grey)
    cache = tmp_path / "cache"
    proc = check(kf_without_torch, python, cache, tmp_path, place=True)
    out = proc.stdout.splitlines()
    assert out[0] == (f"judged for kernels 0.17.2 at {python}: refs/v<N> read from kernels--org--name and "
                      "models--org--name (models-- wins); no digest check at load"), proc.stdout + proc.stderr
    sha = (cache / "kernels--example--img2grey" / "refs" / "v1").read_text()
    build = cache / "kernels--example--img2grey" / "snapshots" / sha / "build" / CPU
    assert out[2:5] == [
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names {sha}: {build} "
        "(this wheel's commit and variant, checked and placed by kernel-factory local-kernels)",
        f"  get_kernel, has_kernel (revision=<sha>): yes, {build} (this wheel's commit and variant, checked and "
        "placed by kernel-factory local-kernels)",
        f"  LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on {sha}): yes, "
        f"{build} (this wheel's commit and variant, checked and placed by kernel-factory local-kernels)",
    ]
    assert out[-1] == "1 of 1 installed kernels would load" and proc.returncode == 0, proc.stdout + proc.stderr
    assert load(python, cache, tmp_path, "version", "1") == f"{build}/__init__.py"  # the oracle agrees


def test_kernels_0191_rules_refs_and_digest(kf_without_torch: Path, img2grey: Path, tmp_path: Path) -> None:
    python = app(tmp_path / "app", "0.19.1", img2grey)
    cache = tmp_path / "cache"
    proc = check(kf_without_torch, python, cache, tmp_path, place=True)
    out = proc.stdout.splitlines()
    assert out[0] == (f"judged for kernels 0.19.1 at {python}: refs/v<N> read from kernels--org--name only; every "
                      "load checks the files against metadata.json's digest"), proc.stdout + proc.stderr
    repo = cache / "kernels--example--img2grey"
    sha = (repo / "refs" / "v1").read_text()
    build = repo / "snapshots" / sha / "build" / CPU
    assert out[-1] == "1 of 1 installed kernels would load" and proc.returncode == 0, proc.stdout + proc.stderr
    assert load(python, cache, tmp_path, "version", "1") == f"{build}/__init__.py"

    # refs/v1 only in the legacy models-- folder: kernels 0.19.1 does not read it, and --check says so
    legacy = cache / "models--example--img2grey" / "refs"
    legacy.mkdir(parents=True)
    (legacy / "v1").write_text(sha)
    (repo / "refs" / "v1").unlink()
    out = check(kf_without_torch, python, cache, tmp_path).stdout.splitlines()
    version_line = next(line for line in out if "(version=1)" in line)
    assert version_line.startswith("  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): no, "
                                   f"no refs/v1 for example/img2grey in {cache}")
    assert load(python, cache, tmp_path, "version", "1").startswith("refused: ValueError: Version 1 of "
                                                                    "'example/img2grey' is not available")

    # a file changed after placing (in a cache no load verified before: kernels 0.19 keeps receipts of verified
    # commits in <cache>/.verified-kernels and does not hash them again): kernels 0.19.1 refuses the commit at
    # load, and --check says why
    cache = tmp_path / "cache2"
    assert check(kf_without_torch, python, cache, tmp_path, place=True).returncode == 0
    build = cache / "kernels--example--img2grey" / "snapshots" / sha / "build" / CPU
    init = (build / "__init__.py").resolve()
    os.chmod(init, 0o644)
    with open(init, "a") as f:
        f.write("# changed\n")
    out = check(kf_without_torch, python, cache, tmp_path).stdout.splitlines()
    revision_line = next(line for line in out if "(revision=<sha>)" in line)
    assert revision_line.startswith(f"  get_kernel, has_kernel (revision=<sha>): no, {build}: kernels 0.19.1 "
                                    "refuses it at load: the files do not match the digest in its metadata.json ("), \
        revision_line
    assert "__init__.py" in revision_line
    assert load(python, cache, tmp_path, "revision", sha).startswith(
        "refused: RuntimeError: Kernel 'img2grey' variant 'torch213-cxx11-cpu-x86_64-linux': the files do not match "
        "the digest in the metadata")


def test_a_tvm_ffi_kernel_judged_with_the_apps_apache_tvm_ffi(kf_without_torch: Path, tmp_path: Path) -> None:
    """The version of apache-tvm-ffi is APP's (it was never asked for: every tvm-ffi kernel read as one whose
    apache-tvm-ffi is not installed)."""
    wheel = hand_wheel(tmp_path, variant="tvm-ffi01-cpu-x86_64-linux", label="tvmffi01cpu",
                       torch_req="apache-tvm-ffi<0.2,>=0.1", backend={"type": "cpu"})  # fmt: skip
    python = app(tmp_path / "app", "0.19.1", wheel)
    tvm = cached_venv("apache-tvm-ffi-0.1", "apache-tvm-ffi==0.1.*")
    (purelib(python) / "zzz_tvm.pth").write_text(f"{purelib(tvm)}\n")
    proc = check(kf_without_torch, python, tmp_path / "cache", tmp_path)
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("  ")]
    assert lines[1:] == [
        f"oldgrey (example/oldgrey) 1.0.0+tvmffi01cpu: would load from {purelib(python) / 'oldgrey'}",
        '1 of 1 installed kernels would load with LOCAL_KERNELS set (eval "$(kernel-factory local-kernels --shell)"); '
        "1 of them through no loading path as this environment is now",
    ], proc.stdout + proc.stderr
    assert proc.returncode == 0
