"""``kernel-factory unyank SPEC``: take a yank back (the wheels are offered again)."""

from __future__ import annotations

import argparse

from . import yank

NAME = "unyank"
HELP = "take a yank back: the wheels SPEC names are offered again"
DESCRIPTION = (
    "Clear the yank of the wheels SPEC names (see `kernel-factory yank`) and render the index again."
)
EXAMPLE = "kernel-factory unyank 'img2grey==1.1.2'"


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help="project and version or specifier, e.g. img2grey==1.1.2")
    yank.common(p)


def execute(ns: argparse.Namespace) -> int:
    return yank.run(ns, yank=False)
