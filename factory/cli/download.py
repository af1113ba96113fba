from __future__ import annotations

import argparse

NAME = "download"
HELP = "kernels.lock -> the Hub cache, from your index (kernels download, offline after)"
DESCRIPTION = (
    "Read PROJECT_DIR/kernels.lock (both formats), take each locked kernel's wheel that fits this\n"
    "interpreter's torch from --index-url, check its sha256 and unpack it into the Hub cache\n"
    "(KERNELS_CACHE, else HF_HUB_CACHE) as kernels download does, with the kernels they depend on, so that\n"
    "load_kernel and get_locked_kernel work offline. Nothing is written unless every kernel is found;\n"
    "a second run downloads nothing. Every wheel is checked against the index page's sha256 and size, its\n"
    "RECORD, the lock's commit and repository (and an old lock's hashes); links must stay on the index's\n"
    "origin. The kernels' kernel-depends come too (transitively, as kernels 0.19 resolves them), at most\n"
    "--max-depends of them; every repository must be of an allowed organisation (--allow-org).\n"
    "Exit 3: a kernel or commit the index lacks, no build for this torch, a check failed, an organisation\n"
    "not allowed, too many or cyclic kernel-depends;\n"
    "exit 4: the index unreachable or the cache full or read-only (nothing of the run is left)."
)
EXAMPLE = (
    "kernel-factory download . --index-url https://kernels.example.com\n"
    "  KERNELS_CACHE=/opt/kernels kernel-factory download /src/app --index-url http://127.0.0.1:8000"
)


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("project_dir", metavar="PROJECT_DIR", nargs="?", default=".",
                   help="the project folder holding kernels.lock (default: .)")
    p.add_argument("--index-url", metavar="URL", required=True,
                   help="an index kernel-factory made (its root, not simple/)")
    p.add_argument("--python", metavar="PY", help="interpreter (or venv) whose torch to fit (default: this one)")
    p.add_argument("--allow-org", action="append", default=[], metavar="ORG", dest="allow_org",
                   help="let kernels of this organisation into the Hub cache (repeatable; also "
                        "KERNEL_FACTORY_ALLOW_ORGS); without either: kernels-community and the lock's own")
    p.add_argument("--max-depends", type=int, default=None, metavar="N",
                   help="at most N kernels pulled in by kernel-depends beyond kernels.lock (default 32)")


def execute(ns: argparse.Namespace) -> int:
    from ..config import given_orgs
    from ..local.download.command import DownloadArgs, run_download
    from ..local.download.depends import MAX_DEPENDS

    given = given_orgs(flags=ns.allow_org)
    return run_download(DownloadArgs(project_dir=ns.project_dir, index_url=ns.index_url, python=ns.python,
                                     allow_orgs=tuple(given) if given else None,
                                     max_depends=MAX_DEPENDS if ns.max_depends is None else ns.max_depends))
