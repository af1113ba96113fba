"""Real pip and uv against the rendered index, served by ``python -m http.server`` on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from index_synth import add_kernel
from kernel_factory.index.command import index_with_adoption

pytestmark = pytest.mark.integration

LABELS = {
    "torch213cpucxx11": "torch213-cxx11-cpu-x86_64-linux",
    "torch27cu128cxx11": "torch27-cxx11-cu128-x86_64-linux",
    "torch210cu128cxx11": "torch210-cxx11-cu128-x86_64-linux",
}
ENV = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "UV_NO_CACHE": "1",
       "UV_NO_CONFIG": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"}  # fmt: skip
UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within 20 s")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("index") / "public"
    for version in ("1.1.0", "1.1.2"):
        for variant in LABELS.values():
            add_kernel(store, "img2grey", version, variant)
    add_kernel(store, "My_Kernel", "0.1.0", LABELS["torch213cpucxx11"])
    index_with_adoption(str(store), store, None, "http://127.0.0.1:8000")
    return store


@pytest.fixture(scope="module")
def server(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log = tmp_path_factory.mktemp("log") / "http.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory", str(root)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url + "/simple/", proc)
        yield url, log
    finally:
        proc.terminate()
        proc.wait(10)


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stdout}\n{result.stderr}"
    return result


def installed_version(python: Path) -> str:
    return run(str(python), "-c", "import img2grey; print(img2grey.__version__)").stdout.strip()


def report(url: str, *args: str) -> dict[str, object]:
    out = run(sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", "--no-deps",
              "--ignore-installed", "--no-cache-dir", "--index-url", url, *args).stdout  # fmt: skip
    return json.loads(out)  # type: ignore[no-any-return]


def test_pip_pinned_and_unpinned(server: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = server
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    python = venv / "bin" / "python"
    pip = (str(python), "-m", "pip", "install", "--no-cache-dir", "--no-deps")
    run(*pip, "--index-url", f"{url}/simple", "img2grey==1.1.2+torch213cpucxx11")
    assert installed_version(python) == "1.1.2+torch213cpucxx11"
    run(*pip, "--force-reinstall", "--index-url", f"{url}/variants/torch213cpucxx11/simple", "img2grey")
    assert installed_version(python) == "1.1.2+torch213cpucxx11"


def test_uv_pinned_and_unpinned(server: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = server
    venv = tmp_path / "uvenv"
    run(UV, "venv", "--python", sys.executable, str(venv))
    python = venv / "bin" / "python"
    uv = (UV, "pip", "install", "--python", str(python), "--no-cache", "--no-deps")
    run(*uv, "--index-url", f"{url}/simple", "img2grey==1.1.2+torch27cu128cxx11")
    assert installed_version(python) == "1.1.2+torch27cu128cxx11"
    run(*uv, "--reinstall", "--default-index", f"{url}/variants/torch213cpucxx11/simple", "img2grey")
    assert installed_version(python) == "1.1.2+torch213cpucxx11"


def test_resolves_from_metadata_alone(server: tuple[str, Path]) -> None:
    url, log = server
    before = log.read_text()
    data = report(f"{url}/simple", "img2grey==1.1.2+torch210cu128cxx11")
    install = data["install"]
    assert isinstance(install, list) and install[0]["metadata"]["version"] == "1.1.2+torch210cu128cxx11"
    requests = log.read_text()[len(before) :]
    assert ".whl.metadata HTTP" in requests
    assert ".whl HTTP" not in requests, requests


def test_unpinned_from_variant_index(server: tuple[str, Path]) -> None:
    url, _ = server
    data = report(f"{url}/variants/torch213cpucxx11/simple", "img2grey")
    assert data["install"][0]["metadata"]["version"] == "1.1.2+torch213cpucxx11"  # type: ignore[index]


def test_project_name_is_normalised(server: tuple[str, Path]) -> None:
    url, _ = server
    for spelling in ("My_Kernel", "my-kernel", "MY.KERNEL"):
        data = report(f"{url}/simple", spelling)
        meta = data["install"][0]["metadata"]  # type: ignore[index]
        assert (meta["name"], meta["version"]) == ("My_Kernel", "0.1.0+torch213cpucxx11")


def test_factory_serve_answers_json_to_uv(root: Path, tmp_path: Path) -> None:
    """``kernel-factory serve`` negotiates PEP 691 JSON; uv resolves through it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_factory", "serve", "--out", str(root), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url + "/simple/", proc)
        req = urllib.request.Request(
            url + "/simple/img2grey/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
        )
        with urllib.request.urlopen(req) as resp:
            assert resp.headers["Content-Type"] == "application/vnd.pypi.simple.v1+json"
            assert json.loads(resp.read())["name"] == "img2grey"
        with urllib.request.urlopen(url + "/simple/img2grey/") as resp:
            assert resp.headers["Content-Type"].startswith("text/html")
        venv = tmp_path / "uvenv"
        run(UV, "venv", "--python", sys.executable, str(venv))
        run(UV, "pip", "install", "--python", str(venv / "bin/python"), "--no-cache", "--no-deps",
            "--index-url", f"{url}/simple", "img2grey==1.1.0+torch27cu128cxx11")  # fmt: skip
        assert installed_version(venv / "bin/python") == "1.1.0+torch27cu128cxx11"
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0].decode()
    assert f"serving {root} at {url}/" in out
