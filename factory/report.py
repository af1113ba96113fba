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

Every line and every string of the document goes through ``redact_url`` here, at the sink: the user and
password of a URL (``--index-url https://user:token@host``) never reach the output, whichever message or
field carries them.
"""

from __future__ import annotations

import json as _json
import sys
from typing import Any

from .safe_text import redact_url

_quiet = False
_json_mode = False
_verbose = 0


def size(n: float) -> str:
    """A byte count for a person, in decimal units: ``999 B``, ``1.0 kB``, ``123.5 MB``, ``5.0 TB`` (every size a
    command prints goes through here or ``megabytes``)."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def megabytes(n: float) -> str:
    """A byte count in MB, one decimal (the summaries of publish and prune, which add sizes up in one unit)."""
    return f"{n / 1e6:.1f} MB"


def configure(*, quiet: bool = False, json: bool = False, verbose: int = 0) -> None:
    global _quiet, _json_mode, _verbose
    _quiet, _json_mode, _verbose = bool(quiet), bool(json), int(verbose or 0)


def quiet() -> bool:
    """-q was given: callers skip work whose only use is lines that would not be shown (a progress bar)."""
    return _quiet


def _human(stderr: bool) -> Any:
    return sys.stderr if stderr or _json_mode else sys.stdout


def _redacted(doc: object) -> object:
    if isinstance(doc, str):
        return redact_url(doc)
    if isinstance(doc, dict):
        return {_redacted(k): _redacted(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [_redacted(v) for v in doc]
    return doc


def _print(text: str, file: Any, end: str = "\n") -> None:
    print(redact_url(text), file=file, end=end, flush=True)


def result(line: str, *, stderr: bool = False) -> None:
    _print(line, _human(stderr))


def info(line: str, *, stderr: bool = False) -> None:
    if not _quiet:
        _print(line, _human(stderr))


def progress(line: str) -> None:
    if not _quiet:
        _print(line, sys.stderr)


def detail(line: str) -> None:
    if _verbose:
        _print(line, sys.stderr)


def warn(text: str) -> None:
    _print(f"warning: {text}", sys.stderr)


def error(text: str) -> None:
    _print(f"error: {text}", sys.stderr)


def raw_error(text: str, end: str = "\n") -> None:
    _print(text, sys.stderr, end)


def document(doc: object) -> None:
    print(_json.dumps(_redacted(doc), indent=2), flush=True)


def output(line: str) -> None:
    _print(line, sys.stdout)
