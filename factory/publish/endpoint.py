"""Where an upload endpoint is, how to log in, and where its simple index lives.

The upload URL and credentials are found as twine finds them: ``--to URL`` (or
``TWINE_REPOSITORY_URL``), or a ``~/.pypirc`` section named by ``--repository``
(or ``TWINE_REPOSITORY``), read with twine's own config reader; then
``TWINE_USERNAME`` / ``TWINE_PASSWORD`` over the section's or the URL's, then
keyring; ``TWINE_CERT`` (or the section's ``ca_cert``) as the CA bundle and
``TWINE_CLIENT_CERT`` (or ``client_cert``) as the client certificate.

The simple index, where publish looks for files that are already there, is
``--simple-url`` (or the ``simple-url`` config key) when given; else known URL
shapes: Artifactory ``…/api/pypi/<repo>/simple/``, Nexus
``…/repository/<repo>/simple/``, devpi ``<index>/+simple/`` (found by asking
the server's JSON API); else ``<url>/simple/`` (pypiserver, warehouse).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import UsageError

PYPIRC = "~/.pypirc"


@dataclass(frozen=True)
class Endpoint:
    url: str  # the upload URL, without credentials
    user: str | None = None
    password: str | None = None
    ca_cert: str | None = None
    client_cert: str | None = None
    simple_url: str | None = None  # given by the user; None: detect
    source: str = "--to"  # what named it, for messages


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
        url, source = _http(to, "--to"), "--to"
    elif env.get("TWINE_REPOSITORY_URL") and not repository:
        url, source = _http(env["TWINE_REPOSITORY_URL"], "TWINE_REPOSITORY_URL"), "TWINE_REPOSITORY_URL"
    elif repository or env.get("TWINE_REPOSITORY"):
        name = repository or env["TWINE_REPOSITORY"]
        section = _pypirc_section(name)
        url, source = _http(str(section["repository"]), f"{PYPIRC} [{name}] repository"), f"{PYPIRC} [{name}]"
    else:
        raise UsageError("publish needs a destination: pass --to DEST, or --repository NAME from ~/.pypirc, "
                         "or set TWINE_REPOSITORY_URL")
    url, url_user, url_password = split_credentials(url)
    user = env.get("TWINE_USERNAME") or section.get("username") or url_user
    password = env.get("TWINE_PASSWORD") or section.get("password") or url_password
    if password is None:
        user, password = _keyring(url, user)
    if simple_url:
        _http(simple_url, "--simple-url")
    return Endpoint(
        url=url, user=user, password=password,
        ca_cert=env.get("TWINE_CERT") or section.get("ca_cert") or None,
        client_cert=env.get("TWINE_CLIENT_CERT") or section.get("client_cert") or None,
        simple_url=simple_url, source=source,
    )


def _keyring(url: str, user: str | None) -> tuple[str | None, str | None]:
    try:
        import keyring

        cred = keyring.get_credential(url, user)
        if cred is not None:
            return user or cred.username, cred.password
    except Exception:  # no keyring backend, or a broken one: go on without
        pass
    return user, None


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


def is_devpi_index(session: Any, url: str) -> bool:
    """True when ``url`` is a devpi index: its JSON API answers ``{"type": "indexconfig", ...}``."""
    import requests

    try:
        resp = session.get(url, headers={"Accept": "application/json"}, timeout=30)
    except requests.RequestException:
        return False  # the upload itself will say that the endpoint is unreachable
    if resp.status_code != 200 or "json" not in resp.headers.get("Content-Type", ""):
        return False
    try:
        body = resp.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("type") == "indexconfig"


def simple_index(endpoint: Endpoint, session: Any) -> str:
    """Where to look for files already on the endpoint (ends with ``/``)."""
    if endpoint.simple_url:
        return endpoint.simple_url.rstrip("/") + "/"
    shaped = simple_from_shape(endpoint.url)
    if shaped:
        return shaped
    base = endpoint.url.rstrip("/") + "/"
    if is_devpi_index(session, base):
        return base + "+simple/"
    return base + "simple/"
