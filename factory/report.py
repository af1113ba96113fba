"""Every line the commands print, in one place (as pypa/build's ``_ctx``); ``print`` appears only here.

The command line calls ``configure(quiet=, json=, verbose=)`` once, right after parsing; the code underneath
says what kind of line it has and this module decides where it goes:

- ``result``: the answer (a summary line, a path): always shown, on stdout (stderr with ``stderr=True``).
- ``info``: what is being done (plan lines, per-file lines, repairs): as ``result``, but not with ``-q``.
- ``progress``: one line per item done, on stderr, flushed; not with ``-q``.
- ``detail``: on stderr, only with ``-v``.
- ``warn`` / ``error``: ``warning: ...`` / ``error: ...`` on stderr, always (``-q`` keeps them).
- ``raw_error``: a line on stderr as given, always (tracebacks, notices that carry their own prefix).
- ``document``: the one JSON document of ``--json``, on stdout.
- ``output``: a line on stdout as given, always (``which``'s table, ``serve``'s address).

With ``--json`` stdout holds the document only: ``result`` and ``info`` lines meant for stdout go to stderr.
"""

from __future__ import annotations

import json as _json
import sys
from typing import Any

_quiet = False
_json_mode = False
_verbose = 0


def configure(*, quiet: bool = False, json: bool = False, verbose: int = 0) -> None:
    global _quiet, _json_mode, _verbose
    _quiet, _json_mode, _verbose = bool(quiet), bool(json), int(verbose or 0)


def quiet() -> bool:
    """-q was given: callers skip work whose only use is lines that would not be shown (a progress bar)."""
    return _quiet


def _human(stderr: bool) -> Any:
    return sys.stderr if stderr or _json_mode else sys.stdout


def result(line: str, *, stderr: bool = False) -> None:
    print(line, file=_human(stderr), flush=True)


def info(line: str, *, stderr: bool = False) -> None:
    if not _quiet:
        print(line, file=_human(stderr), flush=True)


def progress(line: str) -> None:
    if not _quiet:
        print(line, file=sys.stderr, flush=True)


def detail(line: str) -> None:
    if _verbose:
        print(line, file=sys.stderr, flush=True)


def warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


def error(text: str) -> None:
    print(f"error: {text}", file=sys.stderr, flush=True)


def raw_error(text: str, end: str = "\n") -> None:
    print(text, file=sys.stderr, end=end, flush=True)


def document(doc: object) -> None:
    print(_json.dumps(doc, indent=2), flush=True)


def output(line: str) -> None:
    print(line, flush=True)
