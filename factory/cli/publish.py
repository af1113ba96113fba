from __future__ import annotations

import argparse

from .options import add_config, add_options, flags_of

NAME = "publish"
HELP = "copy the store and index to a folder, s3:// or an upload endpoint"
DESCRIPTION = (
    "Copy the store's wheels and index pages to a destination: a folder, an S3 bucket, or a PyPI-style\n"
    "upload endpoint. Files go in an order where no page links a missing file; nothing is deleted, and\n"
    "only new or changed files are sent, so a rerun finishes an interrupted publish."
)
EXAMPLE = (
    "kernel-factory publish --store public --to /srv/www/kernels\n"
    "  kernel-factory publish --store public --to s3://bucket/kernels --dry-run"
)


def configure_parser(p: argparse.ArgumentParser) -> None:
    add_config(p)
    p.add_argument(
        "--to", metavar="DEST",
        help="folder, file://, s3://bucket/prefix or https:// upload URL (default: TWINE_REPOSITORY_URL)",
    )
    p.add_argument("-r", "--repository", metavar="NAME", help="upload to this ~/.pypirc section, as twine -r does")
    add_options(p, NAME)
    p.add_argument("--dry-run", action="store_true", help="print what would be uploaded; upload nothing")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout (messages go to stderr)")


def execute(ns: argparse.Namespace) -> int:
    from ..publish.run import PublishArgs, run_publish
    from ..store.lock import folder_lock

    return run_publish(PublishArgs(flags=flags_of(ns, NAME), to=ns.to, repository=ns.repository,
                                   dry_run=ns.dry_run, json=ns.json), folder_lock)
