"""An ``http(s)://`` upload endpoint (Artifactory, Nexus, devpi, pypiserver) as a publish destination.

Wheels only (the endpoint builds its own index), sent with twine's client for
the legacy upload API. The URL, credentials and certificates are found as twine
finds them, and the simple index as endpoint.py says. A wheel already listed on
the endpoint's simple page with the same sha256 is skipped; one listed with
other bytes is refused (versions are immutable there).
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from .. import report, simple
from ..config import DEFAULT_RETRY_S
from ..errors import Refused, Unreachable, UsageError
from ..retry import MAX_WAIT_S, RETRY_STATUS, Backoff
from ..safe_text import printable, quiet_credentials, redact_url
from .base import LocalFile, State
from .endpoint import Endpoint, simple_index

_CRED_HINT = "set TWINE_USERNAME and TWINE_PASSWORD (or a keyring entry) for it"


def parse_simple_page(body: bytes | str, url: str = "", content_type: str = "text/html",
                      project: str = "") -> dict[str, str]:
    """The files a project page (PEP 503 HTML or PEP 691 JSON) lists, with their sha256 where it gives it."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return {link.filename: link.sha256 or "" for link in simple.parse(raw, content_type, url, project)}


def _retry_gets(session: Any) -> None:
    """GETs of simple pages: urllib3's Retry on 429 and 5xx, with backoff and Retry-After honoured."""
    from requests.adapters import HTTPAdapter
    from urllib3.util import Retry

    retry = Retry(total=6, connect=3, backoff_factor=0.5, backoff_max=MAX_WAIT_S, allowed_methods=["GET", "HEAD"],
                  status_forcelist=sorted(RETRY_STATUS), respect_retry_after_header=True, raise_on_status=False)
    for scheme in ("http://", "https://"):
        session.mount(scheme, HTTPAdapter(max_retries=retry))


class UploadDestination:
    """Upload wheels to ``url`` (the legacy upload API); nothing there is deleted."""

    workers = 1  # requests sessions are not thread-safe

    def __init__(self, endpoint: Endpoint, retry_s: float = DEFAULT_RETRY_S) -> None:
        self.retry_s = retry_s  # KERNEL_FACTORY_RETRY_S (config.Variables): the budget of retried uploads
        try:
            from twine.repository import Repository
        except ImportError:
            raise UsageError("publishing to an upload endpoint needs twine; pip install twine") from None
        self.url = endpoint.url
        self.display = redact_url(self.url)  # what messages print: no user or password
        quiet_credentials()  # nor requests' and urllib3's log lines
        self.repo = Repository(self.url, endpoint.user, endpoint.password, disable_progress_bar=True)
        self.repo.set_certificate_authority(endpoint.ca_cert)
        self.repo.set_client_certificate(endpoint.client_cert)
        _retry_gets(self.repo.session)
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

    def _project(self, file: LocalFile) -> str:
        try:
            return canonicalize_name(parse_wheel_filename(file.name)[0])
        except InvalidWheelFilename:
            raise Refused(f"{file.name} is not a valid wheel file name; rebuild it") from None

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
        project = self._project(file)
        if refresh or project not in self.pages:
            resp = self._get(urljoin(self.simple_base, f"{project}/"))
            self._check_auth(resp)
            if resp.status_code >= 500 or resp.status_code == 429:
                raise Unreachable(f"{self.display} answered HTTP {resp.status_code} for {project}'s simple page "
                                  "after retries; retry later")
            self.pages[project] = self._parse(resp, project) if resp.status_code == 200 else None
        return self.pages[project]

    def _parse(self, resp: Any, project: str) -> dict[str, str]:
        try:
            return parse_simple_page(resp.content, resp.url, str(resp.headers.get("Content-Type", "text/html")),
                                     project)
        except Exception as exc:  # pypi-simple raises pydantic's, bs4's or its own errors on a malformed page
            raise Unreachable(f"{self.display}: {project}'s simple page is not a simple API page "
                              f"({type(exc).__name__}); check --simple-url") from None

    def state(self, file: LocalFile) -> State:
        listed = self._listed(file, refresh=False)
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
        if conflict and self.state_after_conflict(file):
            return
        lines = resp.text.strip().splitlines()
        reason = printable((resp.reason or "").strip() or (lines[0] if lines else ""), 200)  # the endpoint's text
        if resp.status_code >= 500 or resp.status_code == 429:
            raise Unreachable(f"{self.display} failed on {file.name} (HTTP {resp.status_code} {reason}, "
                              f"{backoff.tries} tries in {backoff.elapsed:.0f} s); retry later")
        raise Refused(f"{self.display} rejected {file.name} (HTTP {resp.status_code} {reason})")

    def state_after_conflict(self, file: LocalFile) -> bool:
        """After a 409: True if the file there is ours (or cannot be compared); Refused if it differs."""
        listed = self._listed(file, refresh=True)
        remote = (listed or {}).get(file.name, "")
        if remote and remote != file.sha256():
            raise Refused(f"{self.display} already holds {file.name} with other bytes; bump the version or delete it")
        return True

    def has(self, rel: str) -> bool:
        return True  # no page is published here (the endpoint builds its own index): no link to check

    def same_root(self, root: Path) -> bool:
        return False

    def close(self) -> None:
        self.repo.close()
