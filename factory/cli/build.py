from __future__ import annotations

import argparse

from .options import flags_of
from .plan import add_plan_flags

NAME = "build"
HELP = "fetch, verify, wheel, audit and store every planned item"
DESCRIPTION = (
    "Build every kernel version the configuration names into the store: fetch each build variant,\n"
    "check its digest (and signature, if asked), write the wheel, audit it for the manylinux policy\n"
    "and keep it with its PEP 658 metadata. What the store already holds is skipped, so a rerun is\n"
    "cheap; --shard K/N splits the work across machines."
)
EXAMPLE = (
    "kernel-factory build --config factory.toml --jobs 4\n"
    "  kernel-factory build --store s3://bucket/kernels --shard 1/2"
)


def configure_parser(p: argparse.ArgumentParser) -> None:
    add_plan_flags(p, NAME)


def execute(ns: argparse.Namespace) -> int:
    from ..pipeline import BuildArgs, run_build

    return run_build(BuildArgs(flags=flags_of(ns, NAME), lock=ns.lock, shard=ns.shard, json=ns.json,
                               debug=ns.debug))
