"""Command line: ``kernel-factory <subcommand>``; ``main(argv) -> int``. One module per subcommand
(docs/architecture.md, "cli"); no Namespace goes past ``execute``. Errors print one line (``--debug`` adds the
traceback) and return the exit code their class carries (factory/errors.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from types import ModuleType

from .. import __version__, report
from ..errors import EXIT_BUG, EXIT_UNREACHABLE, FactoryError, unusable
from ..safe_text import redact_url
from . import build, download, index, local_kernels, plan, prune, publish, serve, status, to_wheel, unyank, which, yank

EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, as a shell reports a process that SIGTERM ended

SUBCOMMANDS: tuple[ModuleType, ...] = (to_wheel, plan, build, index, publish, serve, local_kernels, which, download,
                                       yank, unyank, status, prune)

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


def parser() -> argparse.ArgumentParser:
    # --debug, -q and -v, before or after the subcommand (SUPPRESS: a subcommand's parser keeps what was given before)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="print only errors and results, no plan or progress lines")
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="also print what the libraries underneath log (-vv: debug detail)")
    p = argparse.ArgumentParser(prog="kernel-factory", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])
    p.add_argument("--version", action="version", version=f"kernel-factory {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.DESCRIPTION,
                                 epilog=f"example:\n  {module.EXAMPLE}",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])
        module.configure_parser(command)
        command.set_defaults(handler=module.execute)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    try:
        ns = p.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    ns.debug = getattr(ns, "debug", False)
    ns.verbose = getattr(ns, "verbose", 0)
    report.configure(quiet=getattr(ns, "quiet", False), json=getattr(ns, "json", False), verbose=ns.verbose)
    if ns.verbose:  # the libraries' log records on stderr (-vv: their debug records), huggingface_hub's by its API
        import logging

        from huggingface_hub.utils import logging as hf_logging

        level = logging.DEBUG if ns.verbose > 1 else logging.INFO
        logging.basicConfig(level=level, stream=sys.stderr, format="%(name)s: %(message)s")
        hf_logging.set_verbosity(level)  # what HF_HUB_VERBOSITY did, without writing the environment
    terminate = threading.current_thread() is threading.main_thread()  # signal handlers live in the main thread
    previous = signal.signal(signal.SIGTERM, _terminated) if terminate else None
    try:
        return _execute(ns)
    finally:
        if terminate:
            signal.signal(signal.SIGTERM, previous)
        report.configure()  # the defaults again: main() may run more than once in one process (tests)


def _execute(ns: argparse.Namespace) -> int:
    try:
        return int(ns.handler(ns))
    except FactoryError as exc:
        if ns.debug:
            _traceback()
        message = redact_url(str(exc))  # no URL's user and password, whichever message carries one
        report.error(message)
        if getattr(ns, "json", False):  # scripts parse stdout: the one document says what went wrong
            report.document({"error": message, "exit_code": exc.exit_code})
        return exc.exit_code
    except OSError as exc:  # a full, read-only or forbidden store, scratch or destination: exit 4, one line
        err = unusable(exc)
        if err is None:
            return _bug()
        if ns.debug:
            _traceback()
        report.error(str(err))
        return err.exit_code
    except Terminated:
        report.raw_error("terminated")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        report.raw_error("interrupted")
        return 130
    except BrokenProcessPool:
        if ns.debug:
            _traceback()
        report.error("a worker process was killed, by the OOM killer or a signal; run again (with fewer --jobs if "
                     "memory is short)")
        return EXIT_UNREACHABLE
    except Exception:
        return _bug()


class Terminated(KeyboardInterrupt):
    """SIGTERM (docker stop, a cancelled CI job, timeout): handled as Ctrl-C is, so that every cleanup runs."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated


def _traceback() -> None:
    import traceback

    report.raw_error(traceback.format_exc(), end="")  # through the sink: no URL's user and password


def _bug() -> int:
    _traceback()
    report.error("this is a bug in kernel-factory; please report it with the traceback above")
    return EXIT_BUG
