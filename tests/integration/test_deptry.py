"""deptry over the shipped code in a fresh environment: the built wheel, its dependencies at their newest
versions (as ``pipx install`` gives), and deptry; nothing of the test venv's own packages. Clean there, whichever
HTTP client (httpx or httpx2) the newest huggingface_hub brings."""

from __future__ import annotations

import sys
from pathlib import Path

from support import ROOT, built_wheel, clean_env, fresh_venv, run

UV = Path(sys.executable).parent / "uv"


def test_deptry_is_clean_with_the_newest_dependencies(tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    run(UV, "pip", "install", "-q", "--python", python, built_wheel(), "deptry", env=clean_env())
    proc = run(python.parent / "deptry", "factory", cwd=ROOT, env=clean_env(NO_COLOR="1"), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No dependency issues found" in proc.stdout + proc.stderr
