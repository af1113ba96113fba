"""Upload endpoints: the URL, credentials and certificates as twine finds them; the simple index from URL shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_factory.errors import UsageError
from kernel_factory.publish.upload import Endpoint, resolve, simple_from_shape


@pytest.mark.parametrize(("url", "simple"), [
    ("https://h.example/artifactory/api/pypi/pypi-local", "https://h.example/artifactory/api/pypi/pypi-local/simple/"),
    ("https://h.example/artifactory/api/pypi/pypi-local/", "https://h.example/artifactory/api/pypi/pypi-local/simple/"),
    ("https://h.example/repository/kernels-hosted/", "https://h.example/repository/kernels-hosted/simple/"),
    ("https://h.example:8081/nexus/repository/k", "https://h.example:8081/nexus/repository/k/simple/"),
    ("http://127.0.0.1:3141/user/dev/", None),  # devpi: asked of the server, not read from the URL
    ("http://127.0.0.1:8080/", None),
])
def test_simple_index_from_url_shapes(url: str, simple: str | None) -> None:
    assert simple_from_shape(url) == simple


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    (tmp_path / ".pypirc").write_text(
        "[distutils]\nindex-servers =\n    corp\n\n[corp]\nrepository = https://corp.example/repository/k/\n"
        "username = alice\npassword = from-pypirc\nca_cert = /etc/corp-ca.pem\n"
    )
    return tmp_path


def test_to_with_twine_environment(home: Path) -> None:
    env = {"TWINE_USERNAME": "bob", "TWINE_PASSWORD": "pw", "TWINE_CERT": "/ca.pem", "TWINE_CLIENT_CERT": "/me.pem"}
    assert resolve("https://u:p@h.example/up/", None, None, env) == Endpoint(
        url="https://h.example/up/", user="bob", password="pw", ca_cert="/ca.pem", client_cert="/me.pem")
    assert resolve("https://u:p@h.example/up/", None, "https://h.example/simple", {}) == Endpoint(
        url="https://h.example/up/", user="u", password="p", simple_url="https://h.example/simple")


def test_twine_repository_url_and_pypirc(home: Path) -> None:
    from_env = resolve(None, None, None, {"TWINE_REPOSITORY_URL": "https://h.example/up/", "TWINE_PASSWORD": "x"})
    assert (from_env.url, from_env.password) == ("https://h.example/up/", "x")
    section = resolve(None, "corp", None, {})
    assert section == Endpoint(url="https://corp.example/repository/k/", user="alice", password="from-pypirc",
                               ca_cert="/etc/corp-ca.pem")
    named = resolve(None, None, None, {"TWINE_REPOSITORY": "corp", "TWINE_PASSWORD": "env", "TWINE_CERT": "/c"})
    assert (named.user, named.password, named.ca_cert) == ("alice", "env", "/c")  # environment over the file


def test_bad_endpoints_are_usage_errors(home: Path) -> None:
    with pytest.raises(UsageError, match="^publish needs a destination: pass --to DEST"):
        resolve(None, None, None, {})
    with pytest.raises(UsageError, match="^--repository nosuch: Missing 'nosuch' section from ~/.pypirc"):
        resolve(None, "nosuch", None, {})
    with pytest.raises(UsageError, match="^--simple-url 'ftp://x/' is not an http"):
        resolve("https://h.example/", None, "ftp://x/", {})
    with pytest.raises(UsageError, match="^TWINE_REPOSITORY_URL 'h.example' is not an http"):
        resolve(None, None, None, {"TWINE_REPOSITORY_URL": "h.example"})


def test_upload_destination_uses_the_certificates(home: Path) -> None:
    """TWINE_CERT and TWINE_CLIENT_CERT reach the session twine uploads with (no request: the URL shape says it all)."""
    from kernel_factory.publish.upload import UploadDestination

    env = {"TWINE_CERT": "/etc/ca.pem", "TWINE_CLIENT_CERT": "/etc/me.pem", "TWINE_PASSWORD": "pw"}
    dest = UploadDestination(resolve("https://h.example/artifactory/api/pypi/k", None, None, env))
    try:
        assert (dest.repo.session.verify, dest.repo.session.cert) == ("/etc/ca.pem", "/etc/me.pem")
        assert dest.simple_base == "https://h.example/artifactory/api/pypi/k/simple/"
    finally:
        dest.close()
