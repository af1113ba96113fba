"""The shipped templates found by an editable install too: ``pip install -e .`` (uv's, into a fresh venv, from a
copy of the tree) and `kernel-factory index` on a small store. The editable layout (index_templates/ beside
factory/) finds the shipped templates as the installed wheel does. (A user's templates folder in jinja2's sandbox:
test_trust_remote.py.)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import hostile as h
from support import ROOT, clean_env, fresh_venv, run

UV = Path(sys.executable).parent / "uv"


def test_an_editable_install_runs_index(tmp_path: Path) -> None:
    src = tmp_path / "src"  # a copy: the install writes its egg-info beside pyproject.toml, not into the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    for folder in ("factory", "index_templates"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    python = fresh_venv(tmp_path / "venv")
    run(UV, "pip", "install", "-q", "--python", python, "-e", src, env=clean_env())
    where = run(python, "-c", "import kernel_factory; print(kernel_factory.__file__)").stdout.strip()
    assert Path(where) == src / "factory" / "__init__.py"  # the tree itself, not a copy in site-packages
    wheels = h.small_wheels(tmp_path / "wheels", 3)
    proc = run(python.parent / "kernel-factory", "index", "--wheels", wheels, "--out", tmp_path / "site",
               cwd=tmp_path, env=clean_env(), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    site = tmp_path / "site"
    assert b'<a href="./proj0001/">proj0001</a>' in (site / "simple" / "index.html").read_bytes()
    assert b"proj0002" in (site / "index.html").read_bytes()  # the landing page, from the shipped templates
