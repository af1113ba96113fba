"""The one reader of a simple repository's project pages (PEP 503 HTML or PEP 691 JSON), with pypi-simple.

``which``, ``download`` and the upload destination's "is it there already?" all read pages here.
What a page says is remote text: ``wheels`` refuses (exit 3, one line) a link whose file name
is not a valid wheel file name, and ``shown`` escapes control characters before anything
remote is printed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from .errors import Refused, Unreachable
from .record import PEP691_JSON
from .safe_text import printable

ACCEPT = f"{PEP691_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
USER_AGENT = "kernel-factory"
# The characters a wheel file name can hold (PEP 427 escapes everything else to "_").
_WHEEL_CHARS = re.compile(r"[A-Za-z0-9._+!-]+\.whl")


@dataclass(frozen=True)
class Link:
    """One file a project page lists."""

    filename: str
    url: str  # absolute, without the #fragment
    sha256: str | None  # lowercase hex, where the page gives it
    yanked: bool
    size: int | None = None


@dataclass(frozen=True)
class Wheel:
    """A wheel a project page lists, its file name parsed with packaging."""

    filename: str
    url: str
    version: Version
    tags: frozenset[Tag]
    yanked: bool
    sha256: str | None = None

    @property
    def label(self) -> str | None:
        return self.version.local

    @property
    def platform(self) -> str:
        plats = sorted({t.platform for t in self.tags})
        return "any" if plats == ["any"] else " ".join(plats)


def parse(body: bytes, content_type: str, url: str, project: str) -> list[Link]:
    """The files on one project page (``url``), PEP 691 JSON or PEP 503 HTML by ``content_type``.

    ValueError when the page is neither. An HTML link's file name is the last segment of its URL (what pip
    downloads), a JSON file's its ``filename``.
    """
    from pypi_simple import ProjectPage

    media = content_type.split(";", 1)[0].strip().lower()
    if media == PEP691_JSON or media == "application/json":
        page = ProjectPage.from_json_data(json.loads(body), url)
        names = [pkg.filename for pkg in page.packages]
    elif media in ("", "text/html", "application/vnd.pypi.simple.v1+html"):
        charset = dict(p.strip().split("=", 1) for p in content_type.split(";")[1:] if "=" in p).get("charset")
        page = ProjectPage.from_html(project, body, url, charset)
        names = [unquote(urlsplit(pkg.url).path.rsplit("/", 1)[-1]) for pkg in page.packages]
    else:
        raise ValueError(f"content type {content_type!r} is not a simple API page")
    return [
        Link(name, pkg.url, (pkg.digests.get("sha256") or "").lower() or None, pkg.is_yanked, pkg.size)
        for name, pkg in zip(names, page.packages, strict=True)
    ]


def wheels(links: list[Link], where: str) -> list[Wheel]:
    """The wheels among ``links``; Refused for a link whose name is not a valid wheel file name.

    Files that are not wheels (sdists) are left out, unless their name holds characters no file name on an
    index should (a line break, an escape), which are refused too.
    """
    out = []
    for link in links:
        name = link.filename
        if not name.isprintable() or not name.strip() == name:
            raise Refused(f"{where} lists a file named '{printable(name)}', which is not a valid file name; "
                          "fix the index")
        if not name.lower().endswith(".whl"):
            continue
        try:
            if not _WHEEL_CHARS.fullmatch(name):
                raise InvalidWheelFilename(name)
            _, version, _, tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            raise Refused(f"{where} lists '{printable(name)}', which is not a valid wheel file name; fix the index"
                          ) from None
        out.append(Wheel(name, link.url, version, tags, link.yanked, link.sha256))
    return out


def local_path(url: str) -> Path | None:
    if url.startswith("file://"):
        return Path(unquote(urlsplit(url).path))
    return None if "://" in url else Path(url)


def fetch(url: str, session: Any, what: str = "--index-url") -> tuple[bytes, str] | None:
    """(body, content type) at ``url``: an http(s) URL through the requests ``session``, a folder or
    ``file://`` URL from disk (a page folder's index.json, or the file itself); None for "no such page" (404,
    410, no file); Unreachable (exit 4) when the index cannot be read."""
    import requests

    local = local_path(url)
    if local is not None:
        page = local / "index.json" if url.endswith("/") or local.is_dir() else local
        try:
            return page.read_bytes(), PEP691_JSON if page.name == "index.json" else "application/octet-stream"
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Unreachable(f"{what}: cannot read {page} ({exc.strerror}); check the path") from None
    try:
        resp = session.get(url, headers={"Accept": ACCEPT, "User-Agent": USER_AGENT}, timeout=60)
    except requests.RequestException as exc:
        raise Unreachable(f"{what}: cannot reach {url} ({type(exc).__name__}); check the URL and that the index "
                          "is served") from None
    if resp.status_code in (404, 410):
        return None
    if resp.status_code != 200:
        raise Unreachable(f"{what}: {url} answered HTTP {resp.status_code}; check the URL and credentials")
    return resp.content, str(resp.headers.get("Content-Type", ""))


def project_page(url: str, project: str, session: Any, what: str = "--index-url") -> list[Link] | None:
    """The files on the project page at ``url`` (``.../simple/<project>/``); None when there is none."""
    got = fetch(url, session, what)
    if got is None:
        return None
    if "://" not in url:  # a folder: its links become file:// URLs
        url = Path(url).absolute().as_uri() + ("/" if url.endswith("/") else "")
    try:
        return parse(got[0], got[1], url, project)
    except Exception as exc:  # pypi-simple raises pydantic's, bs4's or its own errors on a malformed page
        raise Unreachable(f"{what}: {url} is not a simple API project page ({type(exc).__name__}); check the URL"
                          ) from None


def session() -> Any:
    """A requests session for reading an index (the environment's proxies and certificates apply)."""
    import requests

    return requests.Session()
