"""The one reader of a simple repository's project pages (PEP 503 HTML or PEP 691 JSON), with pypi-simple:
``which``, ``download`` and the upload destination's "is it there already?" all read pages here. What a page
says is remote text: ``wheels`` refuses (exit 3, one line) a link whose file name is not a valid wheel file name.
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

from . import fetch as fetch_
from .errors import Refused, Unreachable, UsageError
from .record import PEP691_JSON
from .safe_text import printable

#: The most bytes read from one page (a project page, the root's project list, a record): a bigger one is refused.
MAX_PAGE = 32 * 1024 * 1024
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
    size: int | None = None  # what the page says (PEP 700), where it says it

    @property
    def label(self) -> str | None:
        return self.version.local

    @property
    def platform(self) -> str:
        plats = sorted({t.platform for t in self.tags})
        return "any" if plats == ["any"] else " ".join(plats)


def parse(body: bytes, content_type: str, url: str, project: str) -> list[Link]:
    """The files on one project page (``url``), PEP 691 JSON or PEP 503 HTML by ``content_type`` (ValueError for
    neither). An HTML link's file name is the last segment of its URL (what pip downloads)."""
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
    """The wheels among ``links`` (sdists left out); Refused for a link whose name is not a valid wheel file name,
    or a file name that holds characters no file name on an index should (a line break, an escape)."""
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
        out.append(Wheel(name, link.url, version, tags, link.yanked, link.sha256, link.size))
    return out


def local_path(url: str) -> Path | None:
    if url.startswith("file://"):
        return Path(unquote(urlsplit(url).path))
    return None if "://" in url else Path(url)


def fetch(url: str, session: Any) -> tuple[bytes, str] | None:
    """(body, content type) at ``url``: http(s) through factory/fetch.py, a folder or ``file://`` URL from disk (a
    page folder's index.json, or the file itself); None for "no such page"; Unreachable (exit 4) when the index
    cannot be read."""
    local = local_path(url)
    if local is not None:
        page = local / "index.json" if url.endswith("/") or local.is_dir() else local
        try:
            with open(page, "rb") as f:
                body = f.read(MAX_PAGE + 1)
        except (FileNotFoundError, IsADirectoryError):
            return None
        except OSError as exc:
            raise Unreachable(f"--index-url: cannot read {page} ({exc.strerror}); check the path") from None
        _cap(len(body), str(page))
        return body, PEP691_JSON if page.name == "index.json" else "application/octet-stream"
    received = bytearray()

    def take(chunk: bytes) -> None:
        received.extend(chunk)
        _cap(len(received), url)

    status, content_type = fetch_.read_page(url, url, session, headers={"Accept": ACCEPT, "User-Agent": USER_AGENT},
                                            what="--index-url", take=take)
    if status in (404, 410):
        return None
    if status != 200:
        raise Unreachable(f"--index-url: {url} answered HTTP {status}; check the URL and credentials")
    return bytes(received), content_type


def _cap(size: int, where: str) -> None:
    if size > MAX_PAGE:
        raise Refused(f"{where} is bigger than {MAX_PAGE // (1024 * 1024)} MiB, more than any index page should be; "
                      "check the index")


def index_root(url: str) -> str:
    """``--index-url`` as the index root (no trailing slash); UsageError for a URL that names a simple/ root (the
    index root, the folder holding simple/ and variants/, is wanted)."""
    root = url.rstrip("/")
    if "://" in root and "\\" in urlsplit(root).netloc:
        raise UsageError(f"--index-url {url} has a backslash before its host, which URL parsers read apart (the HTTP "
                         "client ends the host there); quote it as %5C, or give the index's own URL")
    path = urlsplit(root).path if "://" in root else root
    if path == "simple" or path.endswith("/simple") or path.endswith("/+simple"):
        raise UsageError(f"--index-url {url} names a simple/ root; give the index root, the folder holding simple/ "
                         f"and variants/: --index-url {root.rsplit('/', 1)[0]}")
    return root


def check_link(link: str, root: str, client: Any = None) -> str:
    """The URL the HTTP client will send for ``link`` (a URL a page of the index at ``root`` gave); Refused unless
    it is on the index's own origin: an http(s) index links only to its own scheme, host and port (as the client
    reads them, factory/fetch.py); a file:// URL only from a local index."""
    if "://" in root and not root.startswith("file://"):
        return fetch_.check(link, root, client if client is not None else session())
    if not (link.startswith("file://") or "://" not in link):
        raise Refused(f"{root} links to {printable(link, 200)}, which is not on the index's own origin; nothing "
                      "is read from there: fix the index")
    return link


def did_you_mean(project: str, url: str, session: Any) -> str:
    """``; did you mean NAME?`` from the project list of the index root's ``simple/`` page (difflib), or "" where
    it lists none close or cannot be read."""
    import difflib

    from pypi_simple import IndexPage

    try:
        got = fetch(f"{url}/simple/", session)
    except (Refused, Unreachable):
        return ""
    if got is None:
        return ""
    media = got[1].split(";", 1)[0].strip().lower()
    try:
        if media == PEP691_JSON or media == "application/json":
            page = IndexPage.from_json_data(json.loads(got[0]))
        else:
            page = IndexPage.from_html(got[0])
    except Exception:  # a malformed page: no suggestions, the caller's message stands
        return ""
    close = difflib.get_close_matches(project, list(page.projects), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(printable(c, 100) for c in close)}?" if close else ""


def project_page(url: str, project: str, session: Any) -> list[Link] | None:
    """The files on the project page at ``url`` (``.../simple/<project>/``); None when there is none."""
    got = fetch(url, session)
    if got is None:
        return None
    if "://" not in url:  # a folder: its links become file:// URLs
        url = Path(url).absolute().as_uri() + ("/" if url.endswith("/") else "")
    try:
        return parse(got[0], got[1], url, project)
    except Exception as exc:  # pypi-simple raises pydantic's, bs4's or its own errors on a malformed page
        raise Unreachable(f"--index-url: {url} is not a simple API project page ({type(exc).__name__}); check the URL"
                          ) from None


def session() -> Any:
    """A requests session for reading an index (the environment's proxies and certificates apply)."""
    import requests

    return requests.Session()
