from __future__ import annotations

import argparse

from . import yank

NAME = "unyank"
HELP = "take a yank back: the wheels SPEC names are offered again"
DESCRIPTION = (
    "Clear the yank of the wheels SPEC names (see `kernel-factory yank`) in their records, and render the\n"
    "index again: pip and uv offer them to unpinned installs once more. SPEC is read as yank reads it\n"
    "(img2grey==1.1.2, img2grey==1.0.7+torch29cu128cxx11, 'img2grey<1.1'); `publish` carries the change."
)
EXAMPLE = "kernel-factory unyank 'img2grey==1.1.2'"


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help="project and version or specifier, e.g. img2grey==1.1.2")
    yank.common(p)


def execute(ns: argparse.Namespace) -> int:
    return yank.run(ns, yank=False)
