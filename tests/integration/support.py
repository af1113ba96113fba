"""Helpers for integration tests: run the CLI, cached and fresh venvs, free ports, http.server."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "tests" / ".cache"


def built_wheel() -> Path:
    """The kernel-factory wheel that ``make install`` built into dist/ (the one the test venv has installed)."""
    wheels = sorted((ROOT / "dist").glob("kernel_factory-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {ROOT / 'dist'} (run `make install`): {wheels}"
    return wheels[0]
TORCH_REQ = "torch==2.13.0"


def run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
        check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def kf(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
       check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the kernel-factory CLI in a subprocess (as a user would)."""
    return run(sys.executable, "-m", "kernel_factory", *args, cwd=cwd, env=env, check=check)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextmanager
def http_server(root: Path) -> Iterator[str]:
    """``python -m http.server`` on 127.0.0.1 serving ``root``; yields the base URL."""
    port = free_port()
    log = open(root.parent / f"http-{port}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port),
                             "--directory", str(root)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@contextmanager
def tmpfs_at(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``2m``) mounted at the new folder ``path`` for a full-disk test, unmounted after; the
    test is skipped where mounting is not allowed (CI runs as root)."""
    import pytest

    path.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode}); run as root")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def shared_once(tmp_path_factory: Any, name: str, make: Callable[[Path], None]) -> Path:
    """A folder that ``make`` fills once per test run, whichever pytest-xdist worker asks first; the others wait
    for it and reuse it. For expensive setup several workers' tests read (an installed venv, a built store)."""
    base: Path = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's basetemp sits in the run's own folder
        base = base.parent
    folder = base / "shared" / name
    with _file_lock(base / "shared" / f"{name}.lock"):
        if not (folder / ".complete").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            make(folder)
            (folder / ".complete").touch()
    return folder


def cached_venv(name: str, *requirements: str) -> Path:
    """A venv with recent pip and ``requirements``, made once and reused (tests/.cache/venvs); returns its python.

    Tests must not change it: install what a test adds into a fresh venv (``fresh_venv``) instead, or use
    ``--target`` folders.
    """
    key = hashlib.sha256("\n".join((sys.version, name, *requirements)).encode()).hexdigest()[:12]
    venv = CACHE / "venvs" / f"{name}-{key}"
    python = venv / "bin" / "python"
    with _file_lock(CACHE / "venvs" / f"{name}.lock"):
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)
            run(sys.executable, "-m", "venv", venv)
            run(python, "-m", "pip", "install", "-q", "--upgrade", "pip")
            if requirements:
                run(python, "-m", "pip", "install", "-q", *requirements)
            (venv / ".complete").touch()
    return python


def fresh_venv(path: Path, *, torch: bool = False) -> Path:
    """A new venv at ``path`` with recent pip; with ``torch``, torch 2.13 CPU is reachable through a .pth file
    pointing at a cached torch venv's site-packages (installing torch again would take 25 s per venv)."""
    run(sys.executable, "-m", "venv", "--without-pip", path)
    python = path / "bin" / "python"
    base = cached_venv("pip", "pip>=26")
    pip_site = run(base, "-c", "import pip, os; print(os.path.dirname(os.path.dirname(pip.__file__)))").stdout.strip()
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    shutil.rmtree(Path(site) / "pip", ignore_errors=True)
    shutil.copytree(Path(pip_site) / "pip", Path(site) / "pip")
    if torch:
        torch_python = cached_venv("torch213", TORCH_REQ, "setuptools>=77")
        torch_site = run(torch_python, "-c", "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))"
                         ).stdout.strip()
        (Path(site) / "zz_torch213.pth").write_text(torch_site + "\n")
    return python


def clean_env(**extra: str) -> dict[str, str]:
    """The environment minus anything that would let a test reach the network or a user's config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "HF_", "AWS_", "TWINE_"))}
    env.update({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "HF_HUB_DISABLE_TELEMETRY": "1"})
    env.update(extra)
    return env


def hand_wheel(out: Path, *, variant: str, label: str, torch_req: str,
               backend: dict[str, Any] | None = None) -> Path:  # fmt: skip
    """A pure-Python kernel wheel laid out as kernel-factory lays them out, for ``variant`` (a CUDA build unless
    ``backend`` says), requiring ``torch_req`` (the framework it was built for)."""
    dist, version, pkg = "oldgrey", f"1.0.0+{label}", "oldgrey"
    info = f"{dist}-{version}.dist-info"
    meta = {
        "name": dist,
        "id": "_oldgrey_0000000",
        "version": 1,
        "license": "Apache-2.0",
        "python-depends": [],
        "backend": backend or {"type": "cuda", "archs": ["8.0"]},
    }
    prov = {
        "repo_id": "example/oldgrey",
        "revision": "0" * 40,
        "ref": "v1.0.0",
        "variant": variant,
        "digest": None,
        "factory_version": "0.1.0",
        "package": pkg,
        "name": dist,
        "kernel_version": "1.0.0",
    }
    files = {
        f"{pkg}/__init__.py": b"def hello():\n    return 'hello'\n",
        f"{pkg}/metadata.json": json.dumps(meta).encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode()
        + f"Requires-Dist: {torch_req}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/kernel_factory.json": json.dumps(prov, sort_keys=True).encode(),
    }
    record = (
        "".join(
            f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
            for name, data in files.items()
        )
        + f"{info}/RECORD,,\n"
    )
    wheel = out / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", record)
    return wheel
