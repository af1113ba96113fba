"""An ``http(s)://`` upload endpoint (Artifactory, Nexus, devpi, pypiserver) as a publish destination: wheels only
(the endpoint builds its own index), sent with twine's client for the legacy upload API, its URL, credentials
and certificates found as twine finds them (docs/publish.md)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from .. import report, simple
from ..config import DEFAULT_RETRY_S
from ..errors import Refused, Unreachable, UsageError
from ..retry import MAX_WAIT_S, RETRY_STATUS, Backoff
from ..safe_text import printable, quiet_credentials, redact_url
from .base import Destination, LocalFile, State

_CRED_HINT = "set TWINE_USERNAME and TWINE_PASSWORD (or a keyring entry) for it"
PYPIRC = "~/.pypirc"


@dataclass(frozen=True)
class Endpoint:
    url: str  # the upload URL, without credentials
    user: str | None = None
    password: str | None = None
    ca_cert: str | None = None
    client_cert: str | None = None
    simple_url: str | None = None  # given by the user; None: detect


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``https://user:pass@host/path`` -> (URL without them, user, password)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return clean, unquote(parts.username or "") or None, unquote(parts.password or "") or None


def _http(url: str, what: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"{what} {url!r} is not an http(s):// URL; give the endpoint's upload URL")
    return url


def _pypirc_section(name: str) -> dict[str, Any]:
    from twine import exceptions, utils

    try:
        section = utils.get_repository_from_config(PYPIRC, name)
    except (exceptions.InvalidConfiguration, exceptions.UnableToReadConfigurationFile) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"--repository {name}: {first}; add a [{name}] section with repository = URL "
                         f"to {PYPIRC}, or pass --to URL") from None
    if not section.get("repository"):
        raise UsageError(f"--repository {name}: {PYPIRC} gives no 'repository' URL for it; add one, or pass --to URL")
    return dict(section)


def resolve(to: str | None, repository: str | None, simple_url: str | None,
            env: Mapping[str, str] | None = None) -> Endpoint:
    """The endpoint ``publish`` talks to, from ``--to`` / ``--repository`` and twine's environment and ~/.pypirc."""
    env = os.environ if env is None else env
    section: dict[str, Any] = {}
    if to:
        url = _http(to, "--to")
    elif env.get("TWINE_REPOSITORY_URL") and not repository:
        url = _http(env["TWINE_REPOSITORY_URL"], "TWINE_REPOSITORY_URL")
    elif repository or env.get("TWINE_REPOSITORY"):
        name = repository or env["TWINE_REPOSITORY"]
        section = _pypirc_section(name)
        url = _http(str(section["repository"]), f"{PYPIRC} [{name}] repository")
    else:
        raise UsageError("publish needs a destination: pass --to DEST, or --repository NAME from ~/.pypirc, "
                         "or set TWINE_REPOSITORY_URL")
    url, url_user, url_password = split_credentials(url)
    user = env.get("TWINE_USERNAME") or section.get("username") or url_user
    password = env.get("TWINE_PASSWORD") or section.get("password") or url_password
    if password is None:
        with contextlib.suppress(Exception):  # no keyring backend, or a broken one: go on without
            import keyring

            cred = keyring.get_credential(url, user)
            if cred is not None:
                user, password = user or cred.username, cred.password
    if simple_url:
        _http(simple_url, "--simple-url")
    return Endpoint(
        url=url, user=user, password=password,
        ca_cert=env.get("TWINE_CERT") or section.get("ca_cert") or None,
        client_cert=env.get("TWINE_CLIENT_CERT") or section.get("client_cert") or None,
        simple_url=simple_url,
    )


_ARTIFACTORY = re.compile(r"^(?P<base>.*/api/pypi/[^/]+)(?:/.*)?$")
_NEXUS = re.compile(r"^(?P<base>.*/repository/[^/]+)(?:/.*)?$")


def simple_from_shape(url: str) -> str | None:
    """The simple index of an Artifactory or Nexus upload URL, read from the URL alone; None for other shapes."""
    parts = urlsplit(url)
    for pattern in (_ARTIFACTORY, _NEXUS):
        m = pattern.match(parts.path)
        if m:
            return str(urlunsplit((parts.scheme, parts.netloc, m.group("base") + "/simple/", "", "")))
    return None


def simple_index(endpoint: Endpoint, session: Any) -> str:
    """Where to look for files already on the endpoint (ends with ``/``): ``--simple-url``, the URL's shape, devpi's
    ``+simple/`` (its JSON API answers ``{"type": "indexconfig", ...}``), else ``simple/``."""
    if endpoint.simple_url:
        return endpoint.simple_url.rstrip("/") + "/"
    if shaped := simple_from_shape(endpoint.url):
        return shaped
    import requests

    base = endpoint.url.rstrip("/") + "/"
    try:
        resp = session.get(base, headers={"Accept": "application/json"}, timeout=30)
        body = resp.json() if resp.status_code == 200 and "json" in resp.headers.get("Content-Type", "") else None
    except (requests.RequestException, ValueError):  # unreachable: the upload itself will say so
        body = None
    return base + ("+simple/" if isinstance(body, dict) and body.get("type") == "indexconfig" else "simple/")


def parse_simple_page(body: bytes | str, url: str = "", content_type: str = "text/html",
                      project: str = "") -> dict[str, str]:
    """The files a project page (PEP 503 HTML or PEP 691 JSON) lists, with their sha256 where it gives it."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return {link.filename: link.sha256 or "" for link in simple.parse(raw, content_type, url, project)}


class UploadDestination(Destination):
    """Upload wheels to ``url`` (the legacy upload API); nothing there is deleted."""

    workers = 1  # requests sessions are not thread-safe

    def __init__(self, endpoint: Endpoint, retry_s: float = DEFAULT_RETRY_S) -> None:
        self.retry_s = retry_s  # KERNEL_FACTORY_RETRY_S (config.Variables): the budget of retried uploads
        try:
            from twine.repository import Repository
        except ImportError:
            raise UsageError("publishing to an upload endpoint needs twine; pip install twine") from None
        self.display = redact_url(endpoint.url)  # what messages print: no user or password
        quiet_credentials()  # nor requests' and urllib3's log lines
        self.repo = Repository(endpoint.url, endpoint.user, endpoint.password, disable_progress_bar=True)
        self.repo.set_certificate_authority(endpoint.ca_cert)
        self.repo.set_client_certificate(endpoint.client_cert)
        from requests.adapters import HTTPAdapter
        from urllib3.util import Retry

        retry = Retry(total=6, connect=3, backoff_factor=0.5, backoff_max=MAX_WAIT_S, allowed_methods=["GET", "HEAD"],
                      status_forcelist=sorted(RETRY_STATUS), respect_retry_after_header=True, raise_on_status=False)
        for scheme in ("http://", "https://"):  # GETs of simple pages: 429 and 5xx retried, Retry-After honoured
            self.repo.session.mount(scheme, HTTPAdapter(max_retries=retry))
        logging.getLogger("twine.repository").setLevel(logging.ERROR)  # we say why we retry, once per retry
        self.explicit_simple = endpoint.simple_url is not None
        self.simple_base = simple_index(endpoint, self.repo.session)
        self.pages: dict[str, dict[str, str] | None] = {}

    def wants(self, file: LocalFile) -> bool:
        return file.rel.startswith("files/") and file.name.endswith(".whl")

    def prepare(self, files: Sequence[LocalFile], *, dry_run: bool = False) -> None:
        for f in files:  # fetch each project's page once; checks the endpoint and the credentials
            self._listed(f, refresh=False)
        if self.pages and all(page is None for page in self.pages.values()):  # a new index, or the wrong URL?
            resp = self._get(self.simple_base)
            self._check_auth(resp)
            if resp.status_code != 200:
                hint = "check --simple-url" if self.explicit_simple else "pass --simple-url (devpi: <index>/+simple/)"
                report.warn(f"{redact_url(self.simple_base)} answers HTTP {resp.status_code}, so every file counts "
                            f"as new and is uploaded again; {hint}")

    def _get(self, url: str) -> Any:
        import requests

        try:
            return self.repo.session.get(url, timeout=60)
        except requests.RequestException as exc:
            raise self._unreachable(exc) from None

    def _unreachable(self, exc: BaseException) -> Unreachable:
        return Unreachable(f"cannot reach {self.display} ({type(exc).__name__}); check --to and the network")

    def _check_auth(self, resp: Any) -> None:
        if resp.status_code in (401, 403):
            raise Unreachable(f"{self.display} refused the credentials (HTTP {resp.status_code}); {_CRED_HINT}")

    def _listed(self, file: LocalFile, refresh: bool) -> dict[str, str] | None:
        """The project's files on the endpoint's simple page, or None when it has no such page."""
        try:
            project = canonicalize_name(parse_wheel_filename(file.name)[0])
        except InvalidWheelFilename:
            raise Refused(f"{file.name} is not a valid wheel file name; rebuild it") from None
        if refresh or project not in self.pages:
            resp = self._get(urljoin(self.simple_base, f"{project}/"))
            self._check_auth(resp)
            if resp.status_code >= 500 or resp.status_code == 429:
                raise Unreachable(f"{self.display} answered HTTP {resp.status_code} for {project}'s simple page "
                                  "after retries; retry later")
            page = None
            if resp.status_code == 200:
                try:
                    page = parse_simple_page(resp.content, resp.url, str(resp.headers.get("Content-Type", "text/html")),
                                             project)
                except Exception as exc:  # pypi-simple raises pydantic's, bs4's or its own errors on a bad page
                    raise Unreachable(f"{self.display}: {project}'s simple page is not a simple API page "
                                      f"({type(exc).__name__}); check --simple-url") from None
            self.pages[project] = page
        return self.pages[project]

    def state(self, file: LocalFile, refresh: bool = False) -> State:
        """``refresh``: read the project's page again (after a 409)."""
        listed = self._listed(file, refresh)
        if listed is None or file.name not in listed:
            return "new"
        remote = listed[file.name]
        if remote and remote != file.sha256():
            raise Refused(f"{self.display} already holds {file.name} with other bytes; bump the version or delete it")
        return "same"

    def put(self, file: LocalFile) -> None:
        import requests
        from twine.exceptions import InvalidDistribution
        from twine.package import PackageFile

        try:
            package = PackageFile.from_filename(str(file.path), None)
        except InvalidDistribution as exc:
            raise Refused(f"{file.name}: {exc}") from None
        backoff = Backoff(f"{self.display}: uploading {file.name}", self.retry_s)
        while True:
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # twine prints its own "Uploading ..." line
                    resp = self.repo.upload(package, max_redirects=1)  # one try: Backoff waits between tries
            except requests.RequestException as exc:
                raise self._unreachable(exc) from None
            if resp.status_code not in RETRY_STATUS or not backoff.again(resp.headers, resp.status_code):
                break
        self._check_auth(resp)
        if resp.status_code in (200, 201):
            return
        conflict = resp.status_code == 409 or (resp.status_code == 400 and "exist" in resp.text.lower())
        if conflict:  # ours (or it cannot be compared) unless the page lists other bytes: Refused
            self.state(file, refresh=True)
            return
        lines = resp.text.strip().splitlines()
        reason = printable((resp.reason or "").strip() or (lines[0] if lines else ""), 200)  # the endpoint's text
        if resp.status_code >= 500 or resp.status_code == 429:
            raise Unreachable(f"{self.display} failed on {file.name} (HTTP {resp.status_code} {reason}, "
                              f"{backoff.tries} tries in {backoff.elapsed:.0f} s); retry later")
        raise Refused(f"{self.display} rejected {file.name} (HTTP {resp.status_code} {reason})")

    def has(self, rel: str) -> bool:
        return True  # no page is published here (the endpoint builds its own index): no link to check

    def close(self) -> None:
        self.repo.close()
