"""A target interpreter's kernels answer (askkernels.py's JSON) made by hand for unit tests: no process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kernel_factory.local.probe.rules import Judge

REJECTED = "OS (darwin) does not match system OS (linux)"


def judge(root: Path, kernels: str = "0.17.2", digest: str = "ok") -> Judge:
    """What a kernels on a Linux CPU machine answers about every build folder under ``root``: torch-universal
    loads, anything else is rejected with a darwin reason."""
    builds, folders = {}, {}
    for build in root.glob("*/snapshots/*/build"):
        names = sorted(p.name for p in build.iterdir())
        chosen = "torch-universal" if "torch-universal" in names else None
        builds[str(build)] = {"names": names, "chosen": chosen, "rejected": {n: REJECTED for n in names if n != chosen}}
        if chosen:
            folders[str(build / chosen)] = {"metadata": None, "digest": digest}
    return Judge.from_json({"python": "/venv/bin/python", "kernels": kernels, "builds": builds, "folders": folders})


def asker(root: Path, kernels: str = "0.17.2") -> Callable[[list[str]], Judge]:
    return lambda repo_ids: judge(root, kernels)
