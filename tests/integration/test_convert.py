"""convert() on kernels compiled here, checked by real tools: zipfile -t, wheel unpack, pip and uv installs,
auditwheel repair for a library that must be grafted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from kernel_factory import variants
from kernel_factory.errors import AuditFailed
from kernel_factory.verify import digest
from kernel_factory.wheel.convert import WheelInput, convert

pytestmark = pytest.mark.integration

X86 = "torch213-cxx11-cpu-x86_64-linux"
ARM = "torch213-cxx11-cpu-aarch64-linux"
BIN = Path(sys.executable).parent

ABI3_EXT = """
#define Py_LIMITED_API 0x03090000
#include <Python.h>
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_k", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__k(void) { return PyModule_Create(&mod); }
"""
FULL_API_EXT = """
#include <Python.h>
const char *name_of(PyObject *o) { return PyUnicode_AsUTF8(o); }
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_k", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__k(void) { return PyModule_Create(&mod); }
"""
NEW_GLIBC_CXX = """
#include <memory>
extern "C" void *PyInit__k(void) { static std::shared_ptr<int> p = std::make_shared<int>(1); return p.get(); }
"""


def _compile(src: str, out: Path, *, cc: str = "gcc", args: tuple[str, ...] = ()) -> Path:
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed (apt-get install {'g++' if cc.endswith('++') else cc})")
    suffix = ".cpp" if cc.endswith("++") else ".c"
    c_file = out.with_suffix(suffix)
    c_file.write_text(src)
    include = sysconfig.get_paths()["include"]
    subprocess.run([cc, "-shared", "-fPIC", "-O1", f"-I{include}", "-o", str(out), str(c_file), *args],
                   check=True, capture_output=True)
    c_file.unlink()
    return out


def _variant(root: Path, variant: str, so: Path) -> Path:
    vdir = root / "build" / variant
    (vdir / "img2grey").mkdir(parents=True)
    (vdir / "__init__.py").write_text("from . import _k\n")
    (vdir / "img2grey" / "__init__.py").write_text("from .. import *\n")
    shutil.move(so, vdir / "_k.abi3.so")
    meta = {"name": "img2grey", "id": "_img2grey_abc123", "version": 1, "license": "Apache-2.0",
            "python-depends": [], "backend": {"type": "cpu", "archs": []},
            "digest": {"algorithm": "sha256", "files": digest.compute(vdir)}}
    (vdir / "metadata.json").write_text(json.dumps(meta))
    return vdir


def _input(vdir: Path, **changes: object) -> WheelInput:
    values: dict[str, object] = dict(
        variant_dir=vdir, target=variants.parse(vdir.name), kernel_version="1.1.2", repo_name="img2grey",
        repo_id="example/img2grey", source="example/img2grey", revision="a" * 40, ref="v1.1.2",
        commit_time=1_767_225_600, readme="# img2grey\n\nGreyscale images.\n",
    )
    values.update(changes)
    return WheelInput(**values)  # type: ignore[arg-type]


def _run(*cmd: str | Path, cwd: Path | None = None) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_wheel_installs_with_pip_and_uv(tmp_path: Path) -> None:
    vdir = _variant(tmp_path / "repo", X86, _compile(ABI3_EXT, tmp_path / "_k.so"))
    whl, _, record = convert(_input(vdir), tmp_path / "out")
    assert whl.name == "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    _run(sys.executable, "-m", "zipfile", "-t", whl)
    _run(sys.executable, "-m", "wheel", "unpack", "-d", tmp_path / "unpacked", whl)
    assert (tmp_path / "unpacked" / "img2grey-1.1.2+torch213cpucxx11" / "img2grey" / "metadata.json").exists()

    _run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", tmp_path / "pip", whl)
    assert (tmp_path / "pip" / "img2grey" / "_k.abi3.so").exists()

    uv = shutil.which("uv", path=str(BIN)) or shutil.which("uv")
    assert uv is not None, "uv is a test dependency"
    venv = tmp_path / "venv"
    _run(uv, "venv", "--offline", "--python", sys.executable, venv)
    _run(uv, "pip", "install", "--offline", "--no-index", "--no-deps", "--python", venv / "bin" / "python", whl)
    out = _run(venv / "bin" / "python", "-c", "import img2grey, img2grey._k; print(img2grey._k.__name__)",
               cwd=tmp_path)
    assert out.strip() == "img2grey._k"
    assert record.platform_tag == "manylinux_2_28_x86_64"


def test_too_new_glibc_refused_or_tagged(tmp_path: Path) -> None:
    so = _compile(NEW_GLIBC_CXX, tmp_path / "_k.so", cc="g++")
    vdir = _variant(tmp_path / "repo", X86, so)
    with pytest.raises(AuditFailed, match=r"_k.abi3.so needs __libc_single_threaded@GLIBC_2.32 \(manylinux_2_34\)"):
        convert(_input(vdir), tmp_path / "out")
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []
    whl, _, record = convert(_input(vdir, accept_higher_policy=True), tmp_path / "out")
    assert whl.name.endswith("-cp39-abi3-manylinux_2_34_x86_64.whl") and record.platform_tag == "manylinux_2_34_x86_64"


def test_not_abi3_refused(tmp_path: Path) -> None:
    vdir = _variant(tmp_path / "repo", X86, _compile(FULL_API_EXT, tmp_path / "_k.so"))
    with pytest.raises(AuditFailed, match="_k.abi3.so uses PyUnicode_AsUTF8, which is not in the stable ABI"):
        convert(_input(vdir), tmp_path / "out")


def test_aarch64_wheel(tmp_path: Path) -> None:
    so = _compile("void *PyInit__k(void) { return 0; }\n", tmp_path / "_k.so", cc="aarch64-linux-gnu-gcc")
    vdir = _variant(tmp_path / "repo", ARM, so)
    whl, _, _ = convert(_input(vdir), tmp_path / "out")
    assert whl.name.endswith("-cp39-abi3-manylinux_2_28_aarch64.whl")
    _run(sys.executable, "-m", "zipfile", "-t", whl)


def test_external_library_is_grafted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    libdir = tmp_path / "lib"
    libdir.mkdir()
    _compile("int extra_value(void) { return 42; }\n", libdir / "libextra.so", args=("-Wl,-soname,libextra.so",))
    ext = ABI3_EXT.replace("PyMODINIT_FUNC", "int extra_value(void);\nint call_extra(void) { return extra_value(); }\n"
                           "PyMODINIT_FUNC")
    so = _compile(ext, tmp_path / "_k.so", args=(f"-L{libdir}", "-lextra"))
    vdir = _variant(tmp_path / "repo", X86, so)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(libdir))
    whl, metadata, record = convert(_input(vdir), tmp_path / "out")
    assert whl.name == "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [whl.name]  # no staging folder left
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        assert any(n.startswith("img2grey.libs/libextra") for n in names), names
        assert z.read("img2grey-1.1.2+torch213cpucxx11.dist-info/METADATA") == metadata
    assert record.size == whl.stat().st_size


def test_real_fixture_kernel_runs_in_torch(example_repos: Path, tmp_path: Path) -> None:
    """The fixture builder's img2grey CPU kernel: wheel it, install it with pip, call the op from torch."""
    repo = example_repos / "img2grey"
    vdir = repo / "build" / X86
    readme = (repo / "README.md").read_text()
    whl, _, record = convert(_input(vdir, source=str(repo), readme=readme), tmp_path / "out")
    assert record.platform_tag == "manylinux_2_28_x86_64" and record.import_name == "img2grey"
    _run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", tmp_path / "site", whl)
    code = "import torch, img2grey; print(float(img2grey.img2grey(torch.ones(2, 2, 3)).sum()))"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "4.0"
