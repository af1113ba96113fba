from __future__ import annotations

import argparse

NAME = "which"
HELP = "this environment's build variant, label and install command"
DESCRIPTION = (
    "Name the build variant, local version label and variant index root that fit an interpreter's torch\n"
    "(by default the one running kernel-factory; --python takes another interpreter or a venv folder).\n"
    "With --index-url and --kernel it prints the pip and uv commands that install the kernel's newest\n"
    "wheel that fits; when none fits it exits 3 and lists the builds there are, nearest first."
)
EXAMPLE = (
    "kernel-factory which --python /srv/app/.venv\n"
    "  kernel-factory which --index-url https://kernels.example.com --kernel img2grey"
)


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--python", metavar="PY", help="interpreter (or venv folder) to inspect (default: this one)")
    p.add_argument("--index-url", metavar="URL", help="an index kernel-factory made (its root, not simple/)")
    p.add_argument("--kernel", metavar="NAME", help="with --index-url: print the commands that install NAME")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def execute(ns: argparse.Namespace) -> int:
    from ..local.which import WhichArgs, run_which

    return run_which(WhichArgs(python=ns.python, index_url=ns.index_url, kernel=ns.kernel, json=ns.json))
