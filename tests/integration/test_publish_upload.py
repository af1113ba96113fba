"""Publish to an upload endpoint: a real pypiserver on 127.0.0.1 with password auth, and pip installing from it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_factory.cli import main
from kernel_factory.publish.run import list_root
from servers import PASSWORD, PINNED, USER, WHEELS, free_port, make_root, pypi_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with pypi_server(tmp_path_factory.mktemp("pypi")) as url:
        yield url


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", PASSWORD)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")


def publish(root: Path, to: str, *extra: str) -> int:
    return main(["publish", "--store", str(root), "--to", to, *extra])


def test_upload_then_pip_installs_pinned_and_rerun_skips(
    server: str, creds: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_root(tmp_path, WHEELS)
    assert publish(root.path, server, "--dry-run") == 0
    out = capsys.readouterr().out
    assert out.count("would upload files/") == len(WHEELS)
    assert "would upload 3 files" in out

    assert publish(root.path, server) == 0
    out = capsys.readouterr().out
    assert "uploaded 3 files" in out and "skipped 0 unchanged" in out
    assert ".metadata" not in out and "simple/" not in out  # wheels only: the endpoint makes its own index

    assert publish(root.path, server) == 0
    assert "uploaded 0 files (0.0 MB), skipped 3 unchanged" in capsys.readouterr().out

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "--disable-pip-version-check"]
    index = server.replace("http://", f"http://{USER}:{PASSWORD}@") + "simple/"
    subprocess.run([*pip, "install", "-q", "--no-deps", "--no-cache-dir", "--index-url", index, PINNED],
                   check=True, stdin=subprocess.DEVNULL)
    shown = subprocess.run([*pip, "show", "img2grey"], check=True, capture_output=True, text=True).stdout
    assert "Version: 1.1.2+torch213cpucxx11" in shown


def test_different_bytes_already_there_is_refused(
    server: str, creds: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = make_root(tmp_path / "a", [("clash", "2.0.0")])
    assert publish(first.path, server) == 0
    second = make_root(tmp_path / "b", [("clash", "2.0.0")], payload=b"other bytes")
    capsys.readouterr()
    assert publish(second.path, server) == 3
    out = capsys.readouterr().out
    assert "already holds clash-2.0.0-py3-none-any.whl with other bytes" in out


def test_wrong_password_and_unreachable_exit_4(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_root(tmp_path, WHEELS[:1])
    before = sorted((f.rel, f.sha256()) for f in list_root(root.path))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", "wrong-password")
    assert publish(root.path, server) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused the credentials (HTTP 40" in err and "TWINE_PASSWORD" in err
    assert "wrong-password" not in err

    monkeypatch.setenv("TWINE_PASSWORD", PASSWORD)
    assert publish(root.path, f"http://127.0.0.1:{free_port()}/") == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach http://127.0.0.1:" in err
    assert sorted((f.rel, f.sha256()) for f in list_root(root.path)) == before
