from __future__ import annotations

import argparse

NAME = "local-kernels"
HELP = "print LOCAL_KERNELS for the kernel wheels installed here"
DESCRIPTION = (
    "Find the kernel wheels installed in this Python environment and print the LOCAL_KERNELS value\n"
    "that makes the kernels package load them instead of downloading from the Hub. --cache also writes\n"
    "them into the Hub cache kernels reads (adding only), for kernelize, the locked paths and load_kernel.\n"
    "--check says which kernels would load with the torch installed here, through which path, and why not,\n"
    "and which kernels transformers' own mapping asks for on this device are not loadable offline."
)
EXAMPLE = (
    'eval "$(kernel-factory local-kernels --shell --cache)"\n'
    "  kernel-factory local-kernels --check"
)


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shell", action="store_true", help="print `export LOCAL_KERNELS=...` for eval")
    p.add_argument("--check", action="store_true", help="say which installed kernels would load, and why not")
    p.add_argument("--cache", nargs="?", const="", metavar="DIR",
                   help="also put them in the Hub cache kernels reads (DIR: that folder, exported as KERNELS_CACHE)")
    p.add_argument("--python", metavar="PY",
                   help="look in the environment of this interpreter (or venv folder) instead of this one's")
    p.add_argument("--allow-org", action="append", default=[], metavar="ORG", dest="allow_org",
                   help="also let kernels of this organisation into the Hub cache (repeatable; default: "
                        "kernels-community, and KERNEL_FACTORY_ALLOW_ORGS)")


def execute(ns: argparse.Namespace) -> int:
    from ..config import allowed_orgs
    from ..local.local_kernels.command import LocalKernelsArgs, run_local_kernels

    return run_local_kernels(LocalKernelsArgs(shell=ns.shell, check=ns.check, cache=ns.cache,
                                              allow_orgs=allowed_orgs(ns.allow_org), python=ns.python))
