"""``kernel-factory index``: the static index from the store's records."""

from __future__ import annotations

import argparse

from .options import add_config, add_options, flags_of

NAME = "index"
HELP = "render the static index from the store's records"
DESCRIPTION = (
    "Write the static package index for the store's wheels: PEP 503 HTML and PEP 691 JSON pages under\n"
    "simple/, one index per variant under variants/<label>/simple/, and a landing page. Only pages\n"
    "whose content changed are rewritten."
)
EXAMPLE = "kernel-factory index --store public --base-url https://kernels.example.com"


def configure_parser(p: argparse.ArgumentParser) -> None:
    add_config(p)
    add_options(p, NAME)
    p.add_argument("--wheels", metavar="DIR", action="append", help="adopt the wheels in this folder too")
    p.add_argument("--repair", action="store_true", help="rebuild damaged records from their wheels")
    p.add_argument("--rescan", action="store_true",
                   help="list and check every record, even when files/ looks unchanged (after editing one in place)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout (messages go to stderr)")


def execute(ns: argparse.Namespace) -> int:
    from ..index.command import IndexArgs, run_index

    if ns.index_out is not None:
        check_out(ns.index_out)
    return run_index(IndexArgs(flags=flags_of(ns, NAME), wheels=tuple(ns.wheels or ()), repair=ns.repair,
                               rescan=ns.rescan, json=ns.json))


def check_out(value: str) -> None:
    """Refuse, before any work, an ``--out`` folder where a file stands or whose parent folder does not exist (a
    typo would otherwise make a whole tree): exit 4, one line, nothing created, as ``build --store``."""
    from ..config import Location
    from ..errors import output_folder

    path = Location.parse(value).local
    if path is not None:
        output_folder(path, "--out")
