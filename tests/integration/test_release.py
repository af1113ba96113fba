"""The release path: `python -m build` makes an sdist and a wheel that pass check-wheel-contents and twine.

The wheel built from the sdist (what `python -m build` does) must hold the same files, byte for byte, as one
built straight from the tree: the sdist leaves nothing out. Metadata users and registries read is checked too.
"""

from __future__ import annotations

import shutil
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

import pytest
from support import ROOT, run, shared_once

BIN = Path(sys.executable).parent


_NOT_SOURCE = {"build", "dist", ".venv", ".git", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis",
               ".import_linter_cache", ".e2e", "public"}
_CACHES = {".cache", "__pycache__"}  # anywhere: tests/.cache holds the test venvs (GBs, written while this runs)


def _build(out: Path, *flags: str, root: Path = ROOT) -> None:
    # --no-isolation: setuptools (>=77, as [build-system] asks) is already in the test venv; no download
    run(sys.executable, "-m", "build", "-q", "--no-isolation", *flags, "--outdir", out, root)


@pytest.fixture
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Built once per run (support.shared_once): two builds at once in the tree would trip over each other."""
    def make(out: Path) -> None:
        _build(out / "from-sdist")  # sdist, then the wheel built from that sdist
        # A wheel built in the tree packs setuptools' build/lib, which keeps modules since moved or deleted
        # (`make install` removes it too); the wheel built from the sdist is immune. So the tree wheel is built
        # from a copy of the checkout without build/ (the checkout itself is left as it is).
        tree = out / "tree"
        shutil.copytree(ROOT, tree, symlinks=True, ignore=lambda folder, names: [
            n for n in names if n in _CACHES or Path(folder) == ROOT and (n in _NOT_SOURCE or n.endswith(".egg-info"))])
        _build(out / "from-tree", "--wheel", root=tree)

    out = shared_once(tmp_path_factory, "release", make)
    (sdist,) = (out / "from-sdist").glob("*.tar.gz")
    (wheel,) = (out / "from-sdist").glob("*.whl")
    (tree_wheel,) = (out / "from-tree").glob("*.whl")
    return {"sdist": sdist, "wheel": wheel, "tree_wheel": tree_wheel}


def _contents(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _metadata(wheel: Path) -> Message:
    contents = _contents(wheel)
    meta = next(n for n in contents if n.endswith(".dist-info/METADATA"))
    return HeaderParser().parsestr(contents[meta].decode())


def test_wheel_from_sdist_equals_wheel_from_tree(artifacts: dict[str, Path]) -> None:
    assert artifacts["wheel"].name == artifacts["tree_wheel"].name
    from_sdist, from_tree = _contents(artifacts["wheel"]), _contents(artifacts["tree_wheel"])
    assert sorted(from_sdist) == sorted(from_tree)
    assert [n for n in from_sdist if from_sdist[n] != from_tree[n]] == []


def test_one_import_package_with_templates_and_license(artifacts: dict[str, Path]) -> None:
    names = _contents(artifacts["wheel"])
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"kernel_factory"}
    shipped = {n.removeprefix("kernel_factory/templates/") for n in names if n.startswith("kernel_factory/templates/")}
    tree = ROOT / "index_templates"
    assert shipped == {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file() and p.suffix != ".pyc"}
    (license_name,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    license_text = names[license_name]
    assert license_text == (ROOT / "LICENSE").read_bytes() and b"Apache License" in license_text
    with tarfile.open(artifacts["sdist"]) as tf:
        members = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    assert {"LICENSE", "README.md", "pyproject.toml", "factory/cli/__init__.py", "index_templates/copy.js"} <= members


def test_check_wheel_contents_and_twine_pass(artifacts: dict[str, Path]) -> None:
    run(BIN / "check-wheel-contents", artifacts["wheel"], artifacts["tree_wheel"])
    run(BIN / "twine", "check", "--strict", *artifacts.values())


def test_metadata_for_users_and_registries(artifacts: dict[str, Path]) -> None:
    meta = _metadata(artifacts["wheel"])
    assert meta["Name"] == "kernel-factory" and meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "kernel-factory" in (meta.get_payload() or "")  # the README is the long description
    classifiers = meta.get_all("Classifier") or []
    assert "Programming Language :: Python :: 3.10" in classifiers and "Typing :: Typed" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers)  # the license is the SPDX expression
    assert "kernels" in (meta["Keywords"] or "").split(",")
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Source"} <= set(urls)
    assert all(u.startswith("https://") for u in urls.values())
    requires = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]  # what the tool itself needs
    assert not any(r.startswith("wheel") for r in requires)  # declared only what the code imports
