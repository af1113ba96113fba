from __future__ import annotations

import argparse
from pathlib import Path

from .options import add_options, flags_of

NAME = "to-wheel"
HELP = "one kernel version -> one wheel per build variant"
DESCRIPTION = (
    "Build wheels for one version of one kernel, from a Hub repository or a local folder or git\n"
    "repository laid out like one (build/<variant>/...). Each build variant becomes one audited abi3\n"
    "wheel whose local version label names the variant; the wheels go to the output folder."
)
EXAMPLE = (
    "kernel-factory to-wheel kernels-community/activation 1 -o wheels/\n"
    "  kernel-factory to-wheel ./img2grey 1.1.2 --variants '*-cpu-x86_64-linux'"
)


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("repo", metavar="REPO_OR_PATH", help="Hub id (org/name) or a local folder or git repository")
    p.add_argument("version", metavar="VERSION", help="1.1.2 (tag v1.1.2), 1 (branch v1) or a specifier '>=1.1,<2'")
    p.add_argument("--revision", metavar="REV", help="build this branch, tag or commit, versioned as VERSION")
    p.add_argument("-o", "--out", metavar="DIR", default=".", help="output folder (default: .)")
    p.add_argument("--variants", action="append", metavar="GLOB", help="only variants matching this glob")
    p.add_argument("--repo-id", metavar="ORG/NAME", help="for a local path: the Hub id it mirrors")
    add_options(p, NAME)
    p.add_argument("--json", action="store_true", help="machine-readable output")


def execute(ns: argparse.Namespace) -> int:
    from ..pipeline import ToWheelArgs, run_to_wheel

    return run_to_wheel(ToWheelArgs(
        repo=ns.repo, version=ns.version, flags=flags_of(ns, NAME, default_config=False), out=Path(ns.out),
        revision=ns.revision, variants=tuple(ns.variants or ()), repo_id=ns.repo_id, json=ns.json,
        debug=ns.debug,
    ))
