from __future__ import annotations

import argparse

from .options import add_config, add_options, flags_of

NAME = "plan"
HELP = "print what build would fetch and build"
DESCRIPTION = (
    "Read the configuration (factory.toml, or a kernels.lock with --lock) and the store, and print\n"
    "what `build` would build, what the store already holds and what is refused. Fetches no files."
)
EXAMPLE = "kernel-factory plan --config factory.toml --json"


def add_plan_flags(p: argparse.ArgumentParser, command: str) -> None:
    """The flags plan and build share: the config, a lock file, the options, a shard, --json."""
    add_config(p)
    p.add_argument("--lock", metavar="FILE", help="kernels.lock, or a pyproject.toml with [tool.kernels.dependencies]")
    add_options(p, command)
    p.add_argument("--shard", metavar="K/N", help="only shard K of N (1-based)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def configure_parser(p: argparse.ArgumentParser) -> None:
    add_plan_flags(p, NAME)


def execute(ns: argparse.Namespace) -> int:
    from ..pipeline import PlanArgs, run_plan

    return run_plan(PlanArgs(flags=flags_of(ns, NAME), lock=ns.lock, shard=ns.shard, json=ns.json))
