"""Command line: ``kernel-factory <subcommand>``; ``main(argv) -> int``.

Each subcommand parses its flags here into a frozen dataclass of typed arguments
(``config.Flags`` for the options' overrides, ``BuildArgs``, ``IndexArgs``, ... beside the code that
takes them) and hands that to the module that does the work; no Namespace goes further. Errors print
one line (``--debug`` adds the traceback) and return the exit code their class carries (factory/errors.py).
The texts users read (``--help``) are DESCRIPTION and each subcommand's
description and example below, not this docstring.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from . import __version__
from .config import DEFAULT_STORE, Flags
from .errors import EXIT_BUG, FactoryError, unusable
from .safe_text import redact_url

Handler = Callable[[argparse.Namespace], int]


def _flags(ns: argparse.Namespace, *, default_config: bool = True) -> Flags:
    """The flags that override the options (config.resolve), from whichever of them this subcommand has."""
    return Flags(
        config=getattr(ns, "config", None),
        default_config=default_config,
        store=getattr(ns, "store", None),
        scratch=getattr(ns, "scratch", None),
        jobs=getattr(ns, "jobs", None),
        manylinux=getattr(ns, "manylinux", None),
        accept_higher_policy=bool(getattr(ns, "accept_higher_policy", None)),
        allow_no_digest=bool(getattr(ns, "allow_no_digest", None)),
        verify_signatures=bool(getattr(ns, "verify_signatures", None)),
        allow_kernel_names=bool(getattr(ns, "allow_kernel_names", None)),
        s3_put_args=tuple(getattr(ns, "s3_put_arg", None) or ()),
        allow_s3_put_args=tuple(getattr(ns, "allow_s3_put_arg", None) or ()),
        cache_control_immutable=getattr(ns, "cache_control_immutable", None),
        cache_control_pages=getattr(ns, "cache_control_pages", None),
        s3_directory_keys=bool(getattr(ns, "s3_directory_keys", False)),
        allow_orgs=tuple(getattr(ns, "allow_org", None) or ()),
    )


@contextmanager
def _start_up() -> Iterator[None]:
    """No garbage collection while a build (or a plan) starts: the imports and the plan make objects that live
    to the end, and collecting them costs about a tenth of the start-up. ``pipeline.execute`` turns it on again
    once the workers forked; the previous state is back when the command ends, and the preload thread
    (variants.preload) has ended."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        from .variants import settle

        settle()  # the command ends with no thread of its own still importing (a plan with nothing to build)
        if was_on:
            gc.enable()


def _to_wheel(ns: argparse.Namespace) -> int:
    with _start_up():
        from .pipeline import ToWheelArgs, run_to_wheel

        return run_to_wheel(ToWheelArgs(
            repo=ns.repo, version=ns.version, flags=_flags(ns, default_config=False), out=Path(ns.out),
            revision=ns.revision, variants=tuple(ns.variants or ()), repo_id=ns.repo_id, json=ns.json,
            quiet=ns.quiet, debug=ns.debug,
        ))


def _plan(ns: argparse.Namespace) -> int:
    with _start_up():
        from .pipeline import PlanArgs, run_plan

        return run_plan(PlanArgs(flags=_flags(ns), lock=ns.lock, shard=ns.shard, json=ns.json))


def _build(ns: argparse.Namespace) -> int:
    with _start_up():
        from .pipeline import BuildArgs, run_build

        return run_build(BuildArgs(flags=_flags(ns), lock=ns.lock, shard=ns.shard, json=ns.json, quiet=ns.quiet,
                                   debug=ns.debug))


def _index(ns: argparse.Namespace) -> int:
    from .index.build import IndexArgs, run_index

    return run_index(IndexArgs(flags=_flags(ns), out=ns.out, wheels=tuple(ns.wheels or ()), templates=ns.templates,
                               repair=ns.repair, rescan=ns.rescan, base_url=ns.base_url, json=ns.json))


def _publish(ns: argparse.Namespace) -> int:
    from .publish.run import PublishArgs, run_publish

    return run_publish(PublishArgs(flags=_flags(ns), to=ns.to, repository=ns.repository, simple_url=ns.simple_url,
                                   dry_run=ns.dry_run, quiet=ns.quiet, json=ns.json))


def _serve(ns: argparse.Namespace) -> int:
    from .index.serve import ServeArgs, run_serve

    return run_serve(ServeArgs(out=Path(ns.out), port=ns.port))


def _local_kernels(ns: argparse.Namespace) -> int:
    from .local.kernels import LocalKernelsArgs, run_local_kernels

    return run_local_kernels(LocalKernelsArgs(shell=ns.shell, check=ns.check, cache=ns.cache))


def _which(ns: argparse.Namespace) -> int:
    from .local.which import WhichArgs, run_which

    return run_which(WhichArgs(python=ns.python, index_url=ns.index_url, kernel=ns.kernel, json=ns.json))


def _download(ns: argparse.Namespace) -> int:
    from .local.download import DownloadArgs, run_download

    return run_download(DownloadArgs(project_dir=ns.project_dir, index_url=ns.index_url, python=ns.python,
                                     quiet=ns.quiet))


def _add_s3_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--s3-put-arg", action="append", metavar="KEY=VALUE",
                   help="S3: pass to every put, e.g. ServerSideEncryption=aws:kms (repeatable; s3-put-args)")
    p.add_argument("--allow-s3-put-arg", action="append", metavar="KEY",
                   help="S3: apply a risky put arg anyway (ACL granting public write, WebsiteRedirectLocation, "
                        "object lock; repeatable; flag only)")
    p.add_argument("--cache-control-immutable", metavar="VALUE",
                   help="S3: Cache-Control of wheels and .metadata (default 'public, max-age=31536000, immutable')")
    p.add_argument("--cache-control-pages", metavar="VALUE",
                   help="S3: Cache-Control of pages, JSON and records (default 'public, max-age=300')")
    p.add_argument("--s3-directory-keys", action="store_true",
                   help="S3: also put each .../index.html at the key .../ (a CDN without index documents)")


DESCRIPTION = """\
Turn Hugging Face Kernel Hub kernels into audited, pip-installable wheels (one per
build variant) and publish them as a static package index that pip and uv install
from: a plain folder, an S3 bucket, or a PyPI-style upload endpoint.

Start with `kernel-factory to-wheel` for one kernel, or write a factory.toml and
run `build`, `index` and `publish`. Exit codes: 0 ok, 1 a bug, 2 usage or
configuration error, 3 some items refused, 4 a source or destination unreachable.
"""

EPILOG = """\
example:
  kernel-factory build --config factory.toml && kernel-factory index
  kernel-factory serve --out public --port 8000
  pip install img2grey==1.1.2+torch213cpucxx11 --index-url http://127.0.0.1:8000/simple

Run `kernel-factory COMMAND --help` for each command's flags.
"""

# One paragraph and an example per subcommand: (help line, description, example).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "to-wheel": (
        "one kernel version -> one wheel per build variant",
        "Build wheels for one version of one kernel, from a Hub repository or a local folder or git\n"
        "repository laid out like one (build/<variant>/...). Each build variant becomes one audited abi3\n"
        "wheel whose local version label names the variant; the wheels go to the output folder.",
        "kernel-factory to-wheel kernels-community/activation 1 -o wheels/\n"
        "  kernel-factory to-wheel ./img2grey 1.1.2 --variants '*-cpu-x86_64-linux'",
    ),
    "plan": (
        "print what build would fetch and build",
        "Read the configuration (factory.toml, or a kernels.lock with --lock) and the store, and print\n"
        "what `build` would build, what the store already holds and what is refused. Fetches no files.",
        "kernel-factory plan --config factory.toml --json",
    ),
    "build": (
        "fetch, verify, wheel, audit and store every planned item",
        "Build every kernel version the configuration names into the store: fetch each build variant,\n"
        "check its digest (and signature, if asked), write the wheel, audit it for the manylinux policy\n"
        "and keep it with its PEP 658 metadata. What the store already holds is skipped, so a rerun is\n"
        "cheap; --shard K/N splits the work across machines.",
        "kernel-factory build --config factory.toml --jobs 4\n"
        "  kernel-factory build --store s3://bucket/kernels --shard 1/2",
    ),
    "index": (
        "render the static index from the store's records",
        "Write the static package index for the store's wheels: PEP 503 HTML and PEP 691 JSON pages under\n"
        "simple/, one index per variant under variants/<label>/simple/, and a landing page. Only pages\n"
        "whose content changed are rewritten.",
        "kernel-factory index --store public --base-url https://kernels.example.com",
    ),
    "publish": (
        "copy the store and index to a folder, s3:// or an upload endpoint",
        "Copy the store's wheels and index pages to a destination: a folder, an S3 bucket, or a PyPI-style\n"
        "upload endpoint. Files go in an order where no page links a missing file; nothing is deleted, and\n"
        "only new or changed files are sent, so a rerun finishes an interrupted publish.",
        "kernel-factory publish --store public --to /srv/www/kernels\n"
        "  kernel-factory publish --store public --to s3://bucket/kernels --dry-run",
    ),
    "serve": (
        "preview the index on 127.0.0.1",
        "Serve an index folder on 127.0.0.1 for a local look or a test install with pip or uv. It answers\n"
        "PEP 691 JSON to clients that ask for it. For previews only: publish to a real web server or bucket.",
        "kernel-factory serve --out public --port 8000\n"
        "  pip install img2grey --index-url http://127.0.0.1:8000/simple",
    ),
    "local-kernels": (
        "print LOCAL_KERNELS for the kernel wheels installed here",
        "Find the kernel wheels installed in this Python environment and print the LOCAL_KERNELS value\n"
        "that makes the kernels package load them instead of downloading from the Hub. --cache also writes\n"
        "them into the Hub cache kernels reads (adding only), for kernelize, the locked paths and load_kernel.\n"
        "--check says which kernels would load with the torch installed here, through which path, and why not.",
        'eval "$(kernel-factory local-kernels --shell --cache)"\n'
        "  kernel-factory local-kernels --check",
    ),
    "which": (
        "this environment's build variant, label and install command",
        "Name the build variant, local version label and variant index root that fit an interpreter's torch\n"
        "(by default the one running kernel-factory; --python takes another interpreter or a venv folder).\n"
        "With --index-url and --kernel it prints the pip and uv commands that install the kernel's newest\n"
        "wheel that fits; when none fits it exits 3 and lists the builds there are, nearest first.",
        "kernel-factory which --python /srv/app/.venv\n"
        "  kernel-factory which --index-url https://kernels.example.com --kernel img2grey",
    ),
    "download": (
        "kernels.lock -> the Hub cache, from your index (kernels download, offline after)",
        "Read PROJECT_DIR/kernels.lock (both formats), take each locked kernel's wheel that fits this\n"
        "interpreter's torch from --index-url, check its sha256 and unpack it into the Hub cache\n"
        "(KERNELS_CACHE, else HF_HUB_CACHE) as kernels download does, with the kernels they depend on, so that\n"
        "load_kernel and get_locked_kernel work offline. Nothing is written unless every kernel is found;\n"
        "a second run downloads nothing. Exit 3: a kernel the index lacks, no build for this torch, a hash\n"
        "mismatch; exit 4: the index unreachable or the cache full or read-only.",
        "kernel-factory download . --index-url https://kernels.example.com\n"
        "  KERNELS_CACHE=/opt/kernels kernel-factory download /src/app --index-url http://127.0.0.1:8000",
    ),
}


def _global_flags() -> argparse.ArgumentParser:
    """--debug, -q and -v, accepted before or after the subcommand (``kernel-factory index --debug``).

    SUPPRESS keeps a subcommand's parser from resetting what was given before the subcommand.
    """
    g = argparse.ArgumentParser(add_help=False)
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="print only errors and results, no plan or progress lines")
    g.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="also print what the libraries underneath log (-vv: debug detail)")
    return g


def _add_config_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="factory.toml or pyproject.toml (default: ./factory.toml)")
    p.add_argument("--lock", metavar="FILE", help="kernels.lock, or a pyproject.toml with [tool.kernels.dependencies]")
    p.add_argument("--store", metavar="DIR", help="store folder or s3://bucket/prefix (overrides the config)")
    p.add_argument("--jobs", type=int, metavar="N", help="parallel processes (default: number of cores)")
    p.add_argument("--manylinux", metavar="X_Y", help="target manylinux policy, e.g. 2_28 (default)")
    p.add_argument(
        "--accept-higher-policy",
        action="store_true",
        default=None,
        help="publish binaries that need a newer glibc under the policy they really meet",
    )
    p.add_argument("--allow-org", action="append", metavar="ORG", help="also allow this organisation")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _add_scratch_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scratch", metavar="DIR",
                   help="temporary space for fetched variants (default: TMPDIR); wheels are written in the store")


def parser() -> argparse.ArgumentParser:
    common = _global_flags()
    p = argparse.ArgumentParser(prog="kernel-factory", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])
    p.add_argument("--version", action="version", version=f"kernel-factory {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str) -> argparse.ArgumentParser:
        help_line, description, example = COMMANDS[name]
        return sub.add_parser(name, help=help_line, description=description, epilog=f"example:\n  {example}",
                              formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])

    tw = command("to-wheel")
    tw.add_argument("repo", metavar="REPO_OR_PATH", help="Hub id (org/name) or a local folder or git repository")
    tw.add_argument("version", metavar="VERSION", help="1.1.2 (tag v1.1.2), 1 (branch v1) or a specifier '>=1.1,<2'")
    tw.add_argument("--revision", metavar="REV", help="build this branch, tag or commit, versioned as VERSION")
    tw.add_argument("-o", "--out", metavar="DIR", default=".", help="output folder (default: .)")
    tw.add_argument("--variants", action="append", metavar="GLOB", help="only variants matching this glob")
    tw.add_argument("--repo-id", metavar="ORG/NAME", help="for a local path: the Hub id it mirrors")
    tw.add_argument("--allow-org", action="append", metavar="ORG", help="also allow this organisation")
    tw.add_argument("--manylinux", metavar="X_Y", default=None, help="target manylinux policy (default 2_28)")
    tw.add_argument(
        "--accept-higher-policy",
        action="store_true",
        default=None,
        help="publish binaries that need a newer glibc under the policy they really meet",
    )
    tw.add_argument(
        "--allow-no-digest", action="store_true", default=None, help="build variants whose metadata.json has no digest"
    )
    tw.add_argument("--jobs", type=int, metavar="N", help="parallel processes (default: number of cores)")
    tw.add_argument("--json", action="store_true", help="machine-readable output")
    _add_scratch_flag(tw)
    tw.set_defaults(handler=_to_wheel)

    pl = command("plan")
    _add_config_flags(pl)
    pl.add_argument("--shard", metavar="K/N", help="only shard K of N (1-based)")
    pl.set_defaults(handler=_plan)

    b = command("build")
    _add_config_flags(b)
    b.add_argument("--shard", metavar="K/N", help="only shard K of N (1-based)")
    b.add_argument(
        "--allow-no-digest", action="store_true", default=None, help="build variants whose metadata.json has no digest"
    )
    b.add_argument(
        "--verify-signatures",
        action="store_true",
        default=None,
        help="require a valid metadata.json.sigstore bundle (sigstore, through the kernels package)",
    )
    _add_scratch_flag(b)
    _add_s3_flags(b)
    b.set_defaults(handler=_build)

    ix = command("index")
    ix.add_argument("--config", metavar="FILE", help="factory.toml or pyproject.toml")
    ix.add_argument("--store", metavar="DIR", help="store folder (default from config, else ./public)")
    ix.add_argument("--out", metavar="DIR", help="index root (default: the store folder)")
    ix.add_argument("--wheels", metavar="DIR", action="append", help="adopt the wheels in this folder too")
    ix.add_argument("--templates", metavar="DIR", help="templates overriding the shipped ones")
    ix.add_argument("--repair", action="store_true", help="rebuild damaged records from their wheels")
    ix.add_argument("--rescan", action="store_true",
                    help="list and check every record, even when files/ looks unchanged (after editing one in place)")
    ix.add_argument(
        "--allow-kernel-names",
        action="store_true",
        default=None,
        help="let --wheels adopt wheels whose project is a kernel the store holds",
    )
    ix.add_argument(
        "--base-url", metavar="URL", help="where the index will be served, for the landing page's pip commands"
    )
    ix.add_argument("--json", action="store_true", help="print one JSON document on stdout (messages go to stderr)")
    ix.set_defaults(handler=_index)

    pu = command("publish")
    pu.add_argument("--config", metavar="FILE", help="factory.toml or pyproject.toml")
    pu.add_argument("--store", metavar="DIR", help="store and index folder (default from config, else ./public)")
    pu.add_argument(
        "--to", metavar="DEST",
        help="folder, file://, s3://bucket/prefix or https:// upload URL (default: TWINE_REPOSITORY_URL)",
    )
    pu.add_argument("-r", "--repository", metavar="NAME", help="upload to this ~/.pypirc section, as twine -r does")
    pu.add_argument(
        "--simple-url", metavar="URL",
        help="the upload endpoint's simple index, where not detected (devpi: <index>/+simple/)",
    )
    pu.add_argument("--dry-run", action="store_true", help="print what would be uploaded; upload nothing")
    _add_s3_flags(pu)
    pu.add_argument("--json", action="store_true", help="print one JSON document on stdout (messages go to stderr)")
    pu.set_defaults(handler=_publish)

    se = command("serve")
    se.add_argument("--out", metavar="DIR", default=DEFAULT_STORE, help=f"index root (default: ./{DEFAULT_STORE})")
    se.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    se.set_defaults(handler=_serve)

    lk = command("local-kernels")
    lk.add_argument("--shell", action="store_true", help="print `export LOCAL_KERNELS=...` for eval")
    lk.add_argument("--check", action="store_true", help="say which installed kernels would load, and why not")
    lk.add_argument("--cache", nargs="?", const="", metavar="DIR",
                    help="also put them in the Hub cache kernels reads (DIR: that folder, exported as KERNELS_CACHE)")
    lk.set_defaults(handler=_local_kernels)

    wh = command("which")
    wh.add_argument("--python", metavar="PY", help="interpreter (or venv folder) to inspect (default: this one)")
    wh.add_argument("--index-url", metavar="URL", help="an index kernel-factory made (its root, not simple/)")
    wh.add_argument("--kernel", metavar="NAME", help="with --index-url: print the commands that install NAME")
    wh.add_argument("--json", action="store_true", help="machine-readable output")
    wh.set_defaults(handler=_which)

    dl = command("download")
    dl.add_argument("project_dir", metavar="PROJECT_DIR", nargs="?", default=".",
                    help="the project folder holding kernels.lock (default: .)")
    dl.add_argument("--index-url", metavar="URL", required=True,
                    help="an index kernel-factory made (its root, not simple/)")
    dl.add_argument("--python", metavar="PY", help="interpreter (or venv) whose torch to fit (default: this one)")
    dl.set_defaults(handler=_download)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    try:
        ns = p.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    ns.debug = getattr(ns, "debug", False)
    ns.quiet = getattr(ns, "quiet", False)
    ns.verbose = getattr(ns, "verbose", 0)
    if ns.verbose:
        import logging  # only with -v: a run without it does not load logging

        level = "debug" if ns.verbose > 1 else "info"
        logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(name)s: %(message)s")
        os.environ.setdefault("HF_HUB_VERBOSITY", level)  # huggingface_hub sets its own level from this
    handler: Handler = ns.handler
    try:
        return handler(ns)
    except FactoryError as exc:
        if ns.debug:
            _traceback()
        message = redact_url(str(exc))  # no URL's user and password, whichever message carries one
        print(f"error: {message}", file=sys.stderr)
        if getattr(ns, "json", False):  # scripts parse stdout: the one document says what went wrong
            print(json.dumps({"error": message, "exit_code": exc.exit_code}))
        return exc.exit_code
    except OSError as exc:  # a full, read-only or forbidden store, scratch or destination: exit 4, one line
        err = unusable(exc)
        if err is None:
            return _bug()
        if ns.debug:
            _traceback()
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception:
        return _bug()


def run(argv: Sequence[str] | None = None) -> int:
    """The console script (and ``python -m kernel_factory``): ``main(argv)``, then a quicker exit.

    Takes what ``main`` takes. What the run made is moved out of the collector's reach before the interpreter
    exits, so its last collection does not walk it (about 15 ms of an index run that adds one wheel). Exit
    handlers still run.
    """
    rc = main(argv)
    gc.freeze()
    return rc


def _traceback() -> None:
    import traceback

    traceback.print_exc()


def _bug() -> int:
    _traceback()
    print("error: this is a bug in kernel-factory; please report it with the traceback above", file=sys.stderr)
    return EXIT_BUG
