"""``kernel-factory serve --hub``: check the arguments and the store, listen, serve (docs/hub.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import report
from ..config import DEFAULT_ORGS, DEFAULT_STORE, Location
from ..errors import UsageError
from ..record import FILES, Record

HOST = "127.0.0.1"


@dataclass(frozen=True)
class HubArgs:
    store: str = DEFAULT_STORE
    host: str = HOST
    port: int = 8000
    allow_orgs: tuple[str, ...] = DEFAULT_ORGS


def store_folder(store: str) -> Path:
    """The local store folder ``store`` names; UsageError where it is not one."""
    loc = Location.parse(store)
    if loc.local is None:
        raise UsageError(f"--store {store}: serve --hub serves a store folder; copy the store to a folder first "
                         f"(e.g. `aws s3 sync {store} DIR`) and give --store DIR")
    if not (loc.local / FILES).is_dir():
        raise UsageError(f"--store {store}: no store there (no {FILES}/ folder); run `kernel-factory build` first, "
                         "or give the store's folder")
    return loc.local


def run_hub(args: HubArgs) -> int:
    from ..store import load_records
    from .server import listen, run
    from .state import HubState

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a TCP port; give one from 1 to 65535 (0: any free port)")
    folder = store_folder(args.store)

    said: set[str] = set()

    def load() -> list[Record]:
        damaged: list[str] = []
        records = load_records(folder, damaged)
        for line in damaged:
            if line not in said:  # the records are read again every few seconds: each line once
                said.add(line)
                report.warn(f"not served: {line}")
        return records

    state = HubState(folder, args.allow_orgs, load)
    kernels = state.catalog()
    try:
        sock = listen(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port} ({exc.strerror}); choose another --port "
                         "(0: any free port) or --host") from None
    host, port = sock.getsockname()[:2]
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    revisions = sum(len(r.revisions) for r in kernels.repos.values())
    report.output(f"serving {folder} as a Hub at {url}  ({len(kernels.repos)} kernels, {revisions} revisions; "
                  f"organisations: {', '.join(args.allow_orgs)}; Ctrl-C stops)")
    report.output(f"  HF_ENDPOINT={url} python -c \"import kernels; kernels.get_kernel('ORG/NAME', version=1)\"")
    try:
        run(state, sock)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0
