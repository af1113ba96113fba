"""Text from elsewhere made safe to print: remote names without control characters, URLs without credentials.

``printable`` is for anything a server, an index or a shared store wrote (file names, platforms, ref
names): a terminal must show it as text, never obey it (ESC sequences, a newline that forges a line).
``redact_url`` is for every URL a message prints: the user and password of a URL never reach the output.
``quiet_credentials`` does the same for the log records of the libraries that print URLs themselves.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

# A scheme, "//", then everything up to the end of the authority as urlsplit reads it (the first /, ?, # or line
# break), or up to where another URL begins: userinfo may hold any character (``user:p@ss@host``, a quote, a space,
# a backslash), and only the last '@' of that span ends it. A span that runs on past a URL's end (``http://h:1 see
# a@b``) loses too much, never too little.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://(?:(?![A-Za-z][A-Za-z0-9+.-]*://)[^/?#\r\n])*")


def printable(text: str, limit: int | None = None) -> str:
    """``text`` with every character a terminal would not print as itself (control characters such as ESC,
    newlines, tabs, DEL, C1 codes, bidi and other format characters) written as a visible escape (``\\x1b``);
    cut to ``limit`` characters (then ending in ``...``) when given."""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "..."
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def has_control(text: str) -> bool:
    """Whether ``text`` holds an ASCII control character (0-31: a newline, a tab, ESC) or DEL: never part of a
    file name, a path or a ref that kernel-factory writes or takes."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _strip_userinfo(match: re.Match[str]) -> str:
    scheme, _, authority = match.group(0).partition("://")
    return f"{scheme}://{authority.rpartition('@')[2]}"


def redact_url(text: str) -> str:
    """``text`` with the user and password of every URL in it left out (``http://user:p@ss@host/x`` ->
    ``http://host/x``), whatever the userinfo holds: a URL's authority is taken as ``urllib.parse.urlsplit`` reads
    it or longer. (The HTTP client ends an authority at a backslash too: factory/fetch.py prints the URLs it
    refuses as the client would send them, with the backslash quoted.)"""
    return _URL.sub(_strip_userinfo, text) if "://" in text else text


@cache  # once: a second call would wrap the record factory again
def quiet_credentials() -> None:
    """Take credentials out of URLs in every log record from now on (huggingface_hub's retry warnings, urllib3's
    and botocore's connection messages print the URL they were given). Called where those libraries are set up;
    logging is imported only then, so a run that does not need them does not load it."""
    import logging

    make = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not format: the library's own problem, left as it is
            return record
        if "://" in message:
            record.msg, record.args = redact_url(message), None
        return record

    logging.setLogRecordFactory(factory)
