from __future__ import annotations

import argparse
from pathlib import Path

from ..config import DEFAULT_STORE

NAME = "serve"
HELP = "preview the index on 127.0.0.1, or serve the store as a Hub for kernels (--hub)"
DESCRIPTION = (
    "Serve an index folder on 127.0.0.1 for a local look or a test install with pip or uv. It answers\n"
    "PEP 691 JSON to clients that ask for it. For previews only: publish to a real web server or bucket.\n"
    "\n"
    "--hub serves the store read-only as a Hugging Face Hub for kernels: point HF_ENDPOINT at it and\n"
    "kernels (get_kernel, `kernels lock`/`kernels download`) and transformers (use_kernels=True) load the\n"
    "variants the store holds, each wheel checked before any byte of it is served (docs/hub.md)."
)
EXAMPLE = (
    "kernel-factory serve --out public --port 8000\n"
    "  pip install img2grey --index-url http://127.0.0.1:8000/simple\n"
    "kernel-factory serve --hub --store public --port 8080\n"
    "  HF_ENDPOINT=http://127.0.0.1:8080 python -c \"import kernels; kernels.get_kernel('kernels-community/"
    "img2grey', version=1)\""
)


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR", default=None, help=f"index root (default: ./{DEFAULT_STORE})")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--hub", action="store_true", help="serve the store as a read-only Hub for kernels (HF_ENDPOINT)")
    p.add_argument("--store", metavar="DIR", default=None, help=f"with --hub: the store folder (default: "
                   f"./{DEFAULT_STORE})")
    p.add_argument("--host", default=None, help="with --hub: the address to listen on (default 127.0.0.1)")
    p.add_argument("--allow-org", action="append", default=[], metavar="ORG", dest="allow_org",
                   help="with --hub: also serve kernels of this organisation as a trusted publisher (repeatable; "
                        "default: kernels-community, and KERNEL_FACTORY_ALLOW_ORGS)")


def execute(ns: argparse.Namespace) -> int:
    from ..config import allowed_orgs
    from ..errors import UsageError
    from ..index.serve import HOST, ServeArgs, run_serve

    if not ns.hub:
        for flag, value in (("--store", ns.store), ("--host", ns.host), ("--allow-org", ns.allow_org)):
            if value:
                raise UsageError(f"{flag} is for `serve --hub`; `serve` alone previews an index folder (--out)")
    elif ns.out is not None:
        raise UsageError("--out is for the index preview; `serve --hub` serves a store: give --store DIR")
    orgs = allowed_orgs(ns.allow_org) if ns.hub else ()
    if not 0 <= ns.port <= 65535:
        raise UsageError(f"--port {ns.port}: not a TCP port; give one from 1 to 65535 (0: any free port)")
    if not ns.hub:
        return run_serve(ServeArgs(Path(ns.out or DEFAULT_STORE), ns.port))
    from ..hub.server import HubArgs, run_hub

    return run_hub(HubArgs(store=ns.store or DEFAULT_STORE, host=ns.host or HOST, port=ns.port, allow_orgs=orgs))
