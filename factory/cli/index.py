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
    from ..config import Location
    from ..errors import output_folder
    from ..index.command import IndexArgs, run_index

    out = Location.parse(ns.index_out).local if ns.index_out is not None else None
    if out is not None:  # before any work, as build --store: a file there or no parent folder is exit 4
        output_folder(out, "--out")
    return run_index(IndexArgs(flags=flags_of(ns, NAME), wheels=tuple(ns.wheels or ()), repair=ns.repair,
                               rescan=ns.rescan, json=ns.json))
