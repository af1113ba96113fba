"""kernels 0.19's build grammar end to end: the factory's own parser against kernels 0.17.2, 0.18.3 and 0.19.1's,
``to-wheel`` of new-style names and of a backend-agnostic build, and kernel-factory installed by pip beside the
transformers that needs kernels 0.19.1 (and beside kernels 0.17.2 + transformers 5.22.2)."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sysconfig
import zipfile
from pathlib import Path

import hostile as h
import pytest
from kernel_factory.variants import VariantName, parse_name
from packaging.version import Version
from support import ROOT, built_wheel, cached_venv, clean_env, fresh_venv, kf, run
from variant_corpus import ALL, LEGACY, NEW, NOARCH, ORACLE, SDK

FRAMEWORK_CLASS = {"torch": "Torch", "torch-stable-abi": "TorchStableAbi", "tvm-ffi": "TvmFfi"}


def _dotted(pair: tuple[int, int]) -> str:
    return f"{pair[0]}.{pair[1]}"


def ours(name: str) -> dict[str, object] | None:
    """Our reading of ``name`` in the fields variant_corpus.describe gives for kernels 0.19.1's."""
    try:
        v: VariantName = parse_name(name)
    except ValueError:
        return None
    fw = {"torch": "TorchNoarch", "mlx": "MlxNoarch"} if v.kind == "noarch" else FRAMEWORK_CLASS
    b = v.backend
    return {
        "kind": {"arch": "ArchVariant", "noarch": "NoarchVariant", "sdk": "SdkVariant"}[v.kind],
        "text": v.text,
        "framework": fw.get(v.framework or ""),
        "framework_version": None if v.framework_version is None else _dotted(v.framework_version),
        "cxx11_abi": v.cxx11_abi,
        "backend": b.name if b else v.noarch_backend,
        "backend_version": None if b is None or b.version is None else _dotted(b.version),
        "python": None if v.python is None else f"{_dotted(v.python.version)}-{v.python.abi}",
        "platform": v.platform,
        "os": v.os,
    }


def kernels_reading(version: str) -> dict[str, dict[str, object] | None]:
    python = cached_venv(f"kernels-{version}", f"kernels=={version}")
    return json.loads(run(python, "-c", ORACLE, ROOT / "tests").stdout)  # type: ignore[no-any-return]


def test_kernels_0_19_1_reads_every_name_as_we_do() -> None:
    theirs = kernels_reading("0.19.1")
    differ = {name: (theirs[name], ours(name)) for name in ALL if theirs[name] != ours(name)}
    assert differ == {}
    assert sum(v is not None for v in theirs.values()) == len(LEGACY + NEW + NOARCH + SDK)


@pytest.mark.parametrize("version", ["0.17.2", "0.18.3"])
def test_older_kernels_read_legacy_names_as_we_do(version: str) -> None:
    """The legacy names read the same (ROCm 7.14 aside: before 0.19, ``rocm714`` was ROCm 71.4; its label is the
    same either way). The new names are not arch variants to them: so their wheels need kernels 0.19."""
    theirs = kernels_reading(version)
    legacy = LEGACY + [n for n in NOARCH if n.startswith("torch-")]
    differ = {}
    for name in legacy:
        mine = ours(name)
        assert mine is not None and theirs[name] is not None, name
        mine = {**mine, "python": None, "framework": mine["framework"]}
        got = {**theirs[name], "python": None}  # type: ignore[dict-item]
        if got != mine:
            differ[name] = (got["backend_version"], mine["backend_version"])
    assert differ == {n: ("71.4", "7.14") for n in legacy if "rocm714" in n}
    assert [n for n in NEW + SDK + ["mlx-metal"] if theirs[n] and theirs[n]["kind"] == "ArchVariant"] == []  # type: ignore[index]


# -- to-wheel of new builds --------------------------------------------------------------------------------
NEW_CPU = "torch-2.13-cxx11-cpu-cpython-3.9-abi3-x86_64-linux"
SDK_AGNOSTIC = "sdk"
AGNOSTIC = {"backend": {"type": "agnostic"}, "kernels-minver": "0.19.1", "build-layout": "files",
            "source": "https://example.com/newkern", "kernel-depends": [{"repo-id": "example/relu", "version": 1}],
            "provenance": {"kernel-builder": {"version": "0.16.2"}}}


def new_repo(root: Path) -> Path:
    repo = root / "newkern"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("A kernel built by kernel-builder for kernels 0.19.\n")
    h.variant(repo, NEW_CPU, "newkern", meta={"kernels-minver": "0.19.1", "source": "https://example.com/newkern"})
    h.variant(repo, SDK_AGNOSTIC, "newkern", meta=AGNOSTIC)
    h.commit(repo, ("v0.1.0",))
    return repo


@pytest.fixture(scope="module")
def newkern(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return new_repo(tmp_path_factory.mktemp("grammar"))


WHEELS = ["newkern-0.1.0+sdk-py3-none-any.whl",
          "newkern-0.1.0+torch213cpucxx11cp39-cp39-abi3-manylinux_2_28_x86_64.whl"]


def test_to_wheel_new_name_and_agnostic_build(newkern: Path, tmp_path: Path) -> None:
    """With the kernels `make install` gives a new venv (the newest: backend type agnostic needs 0.19.1)."""
    have = importlib.metadata.version("kernels")
    assert Version(have) >= Version("0.19.1"), f"this venv has kernels {have}: .venv/bin/pip install -U kernels"
    proc = kf("to-wheel", newkern, "0.1.0", "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == WHEELS
    with zipfile.ZipFile(tmp_path / WHEELS[0]) as zf:
        meta = zf.read("newkern-0.1.0+sdk.dist-info/METADATA").decode()
        prov = json.loads(zf.read("newkern-0.1.0+sdk.dist-info/kernel_factory.json"))
        kept = next(n for n in zf.namelist() if n.endswith("/metadata.json"))
        raw = json.loads(zf.read(kept))
    assert "Requires-Dist" not in meta  # an SDK needs no framework
    assert prov["variant"] == "sdk"
    assert {k: raw[k] for k in AGNOSTIC} == AGNOSTIC  # the new fields travel as they are
    with zipfile.ZipFile(tmp_path / WHEELS[1]) as zf:
        meta = zf.read("newkern-0.1.0+torch213cpucxx11cp39.dist-info/METADATA").decode()
    assert "Requires-Dist: torch>=2.13,<2.14\n" in meta
    # the index gives each label its variant root; the torch wheel's root is its label's, the SDK's its own
    site = tmp_path / "site"
    proc = kf("index", "--wheels", tmp_path, "--out", site)
    assert proc.returncode == 0, proc.stderr
    roots = sorted(p.parent.parent.name for p in site.glob("variants/*/simple/newkern"))
    assert roots == ["sdk", "torch213cpucxx11cp39"]
    page = (site / "variants/torch213cpucxx11cp39/simple/newkern/index.html").read_text()
    assert "newkern-0.1.0%2Btorch213cpucxx11cp39-cp39-abi3-manylinux_2_28_x86_64.whl" in page
    assert "%2Bsdk-" not in page


# -- pip installs kernel-factory beside today's stacks -----------------------------------------------------
@pytest.mark.parametrize(("pins", "kernels"), [
    (("transformers==5.25.0",), "0.19.1"),
    (("kernels==0.17.2", "transformers==5.22.2"), "0.17.2"),
])
def test_installs_beside_the_stack_and_wheels(pins: tuple[str, ...], kernels: str, newkern: Path,
                                             tmp_path: Path) -> None:
    """``pip install kernel-factory transformers==5.25.0`` resolves (transformers 5.25 requires kernels >= 0.19.1),
    and the factory it installs wheels the new builds with the kernels it got; beside kernels 0.17.2, whose
    Metadata does not know backend type agnostic, that build is refused with what to upgrade."""
    python = fresh_venv(tmp_path / "venv", torch=True)
    run(python, "-m", "pip", "install", "-q", built_wheel(), *pins, env=clean_env())
    got = run(python, "-c", "import importlib.metadata as m; print(m.version('kernels'), m.version('transformers'))")
    assert got.stdout.split() == [kernels, pins[-1].split("==")[1]]
    out = tmp_path / "out"
    proc = run(tmp_path / "venv" / "bin" / "kernel-factory", "to-wheel", newkern, "0.1.0", "-o", out,
               env=clean_env(HOME=str(tmp_path)), check=False)
    if kernels == "0.19.1":
        assert proc.returncode == 0, proc.stderr
        assert sorted(p.name for p in out.iterdir()) == WHEELS
        return
    assert proc.returncode == 3, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == WHEELS[1:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert line.endswith("; it needs kernels >= 0.19.1 and kernels 0.17.2 is installed beside kernel-factory: "
                         "pip install -U kernels"), line


# -- the abi3 audit follows the name's Python part ---------------------------------------------------------
ABI3_311 = """
#define Py_LIMITED_API 0x030B0000
#include <Python.h>
PyObject *name_of(PyTypeObject *t) { return PyType_GetName(t); }
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_k", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__k(void) { return PyModule_Create(&mod); }
"""


def abi3_variant(root: Path, name: str) -> Path:
    """build/<name>/ holding one extension that needs the Python 3.11 stable ABI (PyType_GetName)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (apt-get install gcc)")
    folder = root / "build" / name
    folder.mkdir(parents=True)
    (folder / "_k.c").write_text(ABI3_311)
    include = sysconfig.get_paths()["include"]
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-I{include}", "-o", str(folder / "_k.abi3.so"),
                    str(folder / "_k.c")], check=True, capture_output=True)
    (folder / "_k.c").unlink()
    return h.variant(root, name, "abi3k", {"_k.abi3.so": (folder / "_k.abi3.so").read_bytes()})


def test_abi3_audit_reads_the_python_part(tmp_path: Path) -> None:
    """A cpython-3.11 build may use the 3.11 stable ABI; the same library in a cpython-3.9 build is refused."""
    repo = tmp_path / "abi3k"
    fits = "torch-2.13-cxx11-cpu-cpython-3.11-abi3-x86_64-linux"
    old = "torch-2.13-cxx11-cpu-cpython-3.9-abi3-x86_64-linux"
    abi3_variant(repo, fits)
    abi3_variant(repo, old)
    (repo / "README.md").write_text("abi3 kernel.\n")
    h.commit(repo)
    out = tmp_path / "out"
    proc = kf("to-wheel", repo, "0.1.0", "-o", out)
    assert proc.returncode == 3, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "abi3k-0.1.0+torch213cpucxx11cp311-cp311-abi3-manylinux_2_28_x86_64.whl"]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert line.endswith(f"build/{old}/_k.abi3.so uses the Python 3.11 stable ABI, above the wheel's cp39; "
                         "build it with Py_LIMITED_API=0x03090000"), line
