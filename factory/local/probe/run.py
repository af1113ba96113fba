"""Probe an interpreter's torch build without importing kernel-factory into it.

``PROBE`` is the source of ``facts.py`` (standard library and torch only), which ``which`` runs with
the interpreter it inspects: it prints one line, ``KF-PROBE <json>``, with the facts kernels' own
backend selection reads. ``environment`` turns those facts into the one ``Environment`` of local/
(environment.py), whose build variant name is spelled with kernels' classes, the way kernel-builder
spells it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ...errors import UsageError
from .environment import Environment, from_facts
from .rules import Judge

__all__ = ["MARK", "PROBE", "Environment", "Judge", "ask_kernels", "environment", "probe", "resolve_python",
           "run_probe", "sys_path"]

MARK = "KF-PROBE "
PROBE = (Path(__file__).parent / "facts.py").read_text(encoding="utf-8")
KERNELS_MARK = "KF-KERNELS "
ASK_KERNELS = (Path(__file__).parent / "askkernels.py").read_text(encoding="utf-8")


def run_probe(python: str) -> dict[str, Any]:
    """Run PROBE with ``python`` (in an empty folder, so nothing there shadows torch); its facts."""
    try:
        with tempfile.TemporaryDirectory(prefix="kernel-factory-probe-") as tmp:
            proc = subprocess.run([python, "-c", PROBE], cwd=tmp, capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    except FileNotFoundError:
        raise UsageError(f"--python {python}: no such interpreter; give the path of a python executable") from None
    except PermissionError:
        raise UsageError(f"--python {python}: not executable; give the path of a python executable") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"--python {python}: the probe did not finish within 300 s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            facts: dict[str, Any] = json.loads(line[len(MARK):])
            return facts
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
    raise UsageError(f"--python {python}: the probe failed ({tail}); is it a Python 3 interpreter?")


def ask_kernels(python: str, builds: list[str], folders: list[str]) -> Judge:
    """Ask ``python``'s own kernels library (askkernels.py, run there offline, in an empty folder) which variant
    it loads from each ``build/`` folder and whether each variant folder's files pass its checks."""
    query = json.dumps({"builds": sorted(set(builds)), "folders": sorted(set(folders))})
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1"}
    try:
        with tempfile.TemporaryDirectory(prefix="kernel-factory-probe-") as tmp:
            proc = subprocess.run([python, "-c", ASK_KERNELS], cwd=tmp, input=query, capture_output=True, text=True,
                                  timeout=300, env=env)
    except (FileNotFoundError, PermissionError):
        raise UsageError(f"--python {python}: no such interpreter; give the path of a python executable") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"--python {python}: its kernels library did not answer within 300 s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(KERNELS_MARK):
            data = json.loads(line[len(KERNELS_MARK):])
            if isinstance(data, dict):
                return Judge.from_json(data, python)
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
    raise UsageError(f"--python {python}: asking its kernels library failed ({tail}); is it a Python 3 interpreter?")


def sys_path(python: str) -> list[str]:
    """``sys.path`` of the interpreter ``python`` (run in an empty folder), where its packages are installed."""
    code = "import json, sys; print('" + MARK + "' + json.dumps(sys.path))"
    try:
        with tempfile.TemporaryDirectory(prefix="kernel-factory-probe-") as tmp:
            proc = subprocess.run([python, "-c", code], cwd=tmp, capture_output=True, text=True, timeout=60)
    except (FileNotFoundError, PermissionError):
        raise UsageError(f"--python {python}: no such interpreter; give the path of a python executable") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"--python {python}: did not answer within 60 s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            found = json.loads(line[len(MARK):])
            if isinstance(found, list) and all(isinstance(p, str) for p in found):
                return [p for p in found if p]
    raise UsageError(f"--python {python}: it did not say where its packages are; is it a Python 3 interpreter?")


def environment(facts: dict[str, Any]) -> Environment:
    """Probe facts -> the Environment, checked: torch imports there and kernels builds for its platform
    (UsageError, UnknownVariant or Refused otherwise)."""
    env = from_facts(facts)
    if env.torch is None:
        python = env.python or "python"
        why = env.torch_error or "not installed"
        raise UsageError(f"{python} cannot import torch ({why}); install torch there first, or pass --python")
    env.variant  # noqa: B018  (derives the variant: raises for a platform kernels does not build for)
    return env


def probe(python: str | None) -> Environment:
    import sys

    return environment(run_probe(python or sys.executable))


def resolve_python(python: str | None) -> str | None:
    """``--python`` as given (a relative path made absolute: the probe runs in another folder), or a folder's
    (a venv's) bin/python; a bare name is looked up on PATH."""
    if python and Path(python).is_dir():
        for candidate in (Path(python) / "bin" / "python", Path(python) / "Scripts" / "python.exe"):
            if candidate.exists():
                return str(candidate.absolute())
        raise UsageError(f"--python {python}: a folder without bin/python; give an interpreter or a venv folder")
    if python and os.sep in python and not os.path.isabs(python):
        return os.path.abspath(python)
    return python
