"""``kernel-factory serve``: preview an index folder on 127.0.0.1."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import DEFAULT_STORE

NAME = "serve"
HELP = "preview the index on 127.0.0.1"
DESCRIPTION = (
    "Serve an index folder on 127.0.0.1 for a local look or a test install with pip or uv. It answers\n"
    "PEP 691 JSON to clients that ask for it. For previews only: publish to a real web server or bucket."
)
EXAMPLE = (
    "kernel-factory serve --out public --port 8000\n"
    "  pip install img2grey --index-url http://127.0.0.1:8000/simple"
)


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR", default=DEFAULT_STORE, help=f"index root (default: ./{DEFAULT_STORE})")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")


def execute(ns: argparse.Namespace) -> int:
    from ..index.serve import ServeArgs, run_serve

    return run_serve(ServeArgs(out=Path(ns.out), port=ns.port))
