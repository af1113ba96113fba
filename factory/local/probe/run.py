"""Run facts.py and askkernels.py with another interpreter (``python -c``, so kernel-factory is never imported
there), and read the one marked line each prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ...errors import UsageError
from .environment import Environment, from_facts
from .rules import Judge

MARK = "KF-PROBE "
PROBE = (Path(__file__).parent / "facts.py").read_text(encoding="utf-8")
KERNELS_MARK = "KF-KERNELS "
ASK_KERNELS = (Path(__file__).parent / "askkernels.py").read_text(encoding="utf-8")


def _run(python: str, code: str, mark: str, timeout: int, late: str, **kw: Any) -> tuple[Any, str]:
    """Run ``code`` with ``python`` in an empty folder (so nothing there shadows torch): the JSON of the last line
    of its output that starts with ``mark`` (None: there is none) and the last line of its stderr."""
    try:
        with tempfile.TemporaryDirectory(prefix="kernel-factory-probe-") as tmp:
            proc = subprocess.run([python, "-c", code], cwd=tmp, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError:
        raise UsageError(f"--python {python}: no such interpreter; give the path of a python executable") from None
    except PermissionError:
        raise UsageError(f"--python {python}: not executable; give the path of a python executable") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"--python {python}: {late} within {timeout} s") from None
    line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith(mark)), None)
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
    return (None if line is None else json.loads(line[len(mark):])), tail


def run_probe(python: str) -> dict[str, Any]:
    facts, tail = _run(python, PROBE, MARK, 300, "the probe did not finish",
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if not isinstance(facts, dict):
        raise UsageError(f"--python {python}: the probe failed ({tail}); is it a Python 3 interpreter?")
    return facts


def ask_kernels(python: str, builds: list[str], folders: list[str]) -> Judge:
    """Ask ``python``'s own kernels library (askkernels.py, run there offline) which variant it loads from each
    ``build/`` folder and whether each variant folder's files pass its checks."""
    query = json.dumps({"builds": sorted(set(builds)), "folders": sorted(set(folders))})
    data, tail = _run(python, ASK_KERNELS, KERNELS_MARK, 300, "its kernels library did not answer", input=query,
                      env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1"})
    if not isinstance(data, dict):
        raise UsageError(f"--python {python}: asking its kernels library failed ({tail}); is it a Python 3 "
                         "interpreter?")
    return Judge.from_json(data, python)


def sys_path(python: str) -> list[str]:
    found, _ = _run(python, f"import json, sys; print({MARK!r} + json.dumps(sys.path))", MARK, 60, "did not answer")
    if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
        raise UsageError(f"--python {python}: it did not say where its packages are; is it a Python 3 interpreter?")
    return [p for p in found if p]


def environment(facts: dict[str, Any]) -> Environment:
    """Probe facts -> the Environment, checked: torch imports there and kernels builds for its platform
    (UsageError, UnknownVariant or Refused otherwise)."""
    env = from_facts(facts)
    if env.torch is None:
        raise UsageError(f"{env.python or 'python'} cannot import torch ({env.torch_error or 'not installed'}); "
                         "install torch there first, or pass --python")
    env.variant  # noqa: B018  (derives the variant: raises for a platform kernels does not build for)
    return env


def probe(python: str | None) -> Environment:
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
