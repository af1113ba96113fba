"""Checks on what a Hub answers: ref names that become cache paths, next-page links, URLs printed in messages."""

from __future__ import annotations

from urllib.parse import urlsplit

from ..safe_text import has_control, redact_url

__all__ = ["origin", "redact_url", "ref_problem"]


def ref_problem(name: str, sha: str) -> str | None:
    """Why a ref name and target from a Hub answer cannot be used (it becomes a file path in the cache), or None."""
    if not name or len(name) > 255 or name.startswith("/") or "\\" in name or has_control(name):
        return "an empty, absolute or overlong name, or one with a backslash or a control character"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "a name with an empty, '.' or '..' part"
    if not (len(sha) == 40 and all(c in "0123456789abcdef" for c in sha)):
        return "a target that is not a 40-character commit sha"
    return None


def origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(scheme)
