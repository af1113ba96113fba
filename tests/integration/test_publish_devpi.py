"""Publish to a real devpi-server (one per module) and to pypiserver: the second publish uploads nothing.

devpi serves its simple index at ``<index>/+simple/``, not ``<index>/simple/``; publish finds it through
devpi's JSON API, takes ``--simple-url`` or the ``simple-url`` config key, and reads the endpoint and the
credentials from ``TWINE_REPOSITORY_URL`` and ``~/.pypirc`` as twine does.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_factory.cli import main
from servers import PASSWORD, PINNED, USER, WHEELS, devpi_server, make_root, pypi_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def devpi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with devpi_server(tmp_path_factory.mktemp("devpi")) as url:
        yield url


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No TWINE_* from the caller, no keyring, an empty HOME (so ~/.pypirc is the test's own)."""
    for var in ("TWINE_USERNAME", "TWINE_PASSWORD", "TWINE_REPOSITORY", "TWINE_REPOSITORY_URL", "TWINE_CERT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def publish(root: Path, *args: str) -> int:
    return main(["publish", "--store", str(root), *args])


def counts(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("uploaded ") and " files (" in line)


def test_devpi_second_publish_uploads_nothing_and_pip_installs(
    devpi: str, clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", PASSWORD)
    root = make_root(tmp_path, WHEELS)
    assert publish(root.path, "--to", devpi) == 0
    assert counts(capsys.readouterr().out).startswith("uploaded 3 files")
    assert publish(root.path, "--to", devpi) == 0
    captured = capsys.readouterr()
    assert counts(captured.out) == "uploaded 0 files (0.0 MB), skipped 3 unchanged"
    assert "warning" not in captured.err

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", "--no-deps", "--no-cache-dir", "--index-url", devpi + "+simple/", PINNED],
                   check=True, stdin=subprocess.DEVNULL)
    shown = subprocess.run([*pip, "show", "img2grey"], check=True, capture_output=True, text=True).stdout
    assert "Version: 1.1.2+torch213cpucxx11" in shown


def test_devpi_from_pypirc_and_twine_repository_url(
    devpi: str, clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-r NAME`` reads the URL and the credentials from ~/.pypirc; TWINE_REPOSITORY_URL names the endpoint."""
    (clean / ".pypirc").write_text(f"[distutils]\nindex-servers =\n    mydevpi\n\n[mydevpi]\nrepository = {devpi}\n"
                                   f"username = {USER}\npassword = {PASSWORD}\n")
    root = make_root(tmp_path, [("pypircwheel", "1.0.0"), ("pypircwheel", "1.0.1")])
    assert publish(root.path, "-r", "mydevpi") == 0
    assert counts(capsys.readouterr().out).startswith("uploaded 2 files")
    monkeypatch.setenv("TWINE_REPOSITORY", "mydevpi")  # as twine reads it: no --to, no -r
    assert publish(root.path) == 0
    assert counts(capsys.readouterr().out) == "uploaded 0 files (0.0 MB), skipped 2 unchanged"
    monkeypatch.delenv("TWINE_REPOSITORY")
    monkeypatch.setenv("TWINE_REPOSITORY_URL", devpi)
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", PASSWORD)
    assert publish(root.path) == 0
    assert counts(capsys.readouterr().out) == "uploaded 0 files (0.0 MB), skipped 2 unchanged"
    assert publish(root.path, "-r", "nosuch") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--repository nosuch: Missing 'nosuch' section from ~/.pypirc" in err


def test_devpi_wrong_simple_url_is_named(
    devpi: str, clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An explicit --simple-url wins over detection; one that does not answer is named in a warning."""
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", PASSWORD)
    root = make_root(tmp_path, [("simpleurl", "1.0.0")])
    assert publish(root.path, "--to", devpi, "--simple-url", devpi + "+simple/") == 0
    assert counts(capsys.readouterr().out).startswith("uploaded 1 files")
    assert publish(root.path, "--to", devpi, "--simple-url", devpi + "+simple") == 0  # without the slash too
    assert counts(capsys.readouterr().out) == "uploaded 0 files (0.0 MB), skipped 1 unchanged"
    assert publish(root.path, "--to", devpi, "--simple-url", devpi + "simple/") == 0  # devpi takes the same bytes
    captured = capsys.readouterr()
    assert counts(captured.out).startswith("uploaded 1 files")
    assert captured.err == (f"warning: {devpi}simple/ answers HTTP 415, so every file counts as new and is uploaded "
                            "again; check --simple-url\n")


def test_pypiserver_with_simple_url_config_key(
    clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", PASSWORD)
    root = make_root(tmp_path / "store", WHEELS)
    with pypi_server(tmp_path) as server:
        config = tmp_path / "factory.toml"
        config.write_text(f'[factory]\nsimple-url = "{server}simple/"\n')
        assert publish(root.path, "--config", str(config), "--to", server) == 0
        assert counts(capsys.readouterr().out).startswith("uploaded 3 files")
        assert publish(root.path, "--config", str(config), "--to", server) == 0
        assert counts(capsys.readouterr().out) == "uploaded 0 files (0.0 MB), skipped 3 unchanged"
        config.write_text('[factory]\nsimple-url = "simple/"\n')
        assert publish(root.path, "--config", str(config), "--to", server) == 2
        assert "simple-url: expected the endpoint's simple index URL (http(s)://...)" in capsys.readouterr().err
