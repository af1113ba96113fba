"""Real servers on 127.0.0.1 for the publish tests, and a small store and index root to publish.

``moto_server`` runs ``python -m moto.server`` (an S3 endpoint); ``pypi_server``
runs ``pypi-server`` with an htpasswd file (needs passlib); ``devpi_server`` runs
devpi-server with one user and one index. Both pick a free
port, wait until it answers, and stop their process on exit. ``make_root``
writes tiny pure-python wheels through ``LocalStore.put`` plus simple pages
linking them the way the index does (``%2B``, ``#sha256=``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, unquote, urljoin

from kernel_factory.record import Record
from kernel_factory.store.local import LocalStore
from packaging.utils import canonicalize_name, parse_wheel_filename

HOST = "127.0.0.1"
USER, PASSWORD = "uploader", "s3cret-pw"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen on {HOST}:{port} within {timeout} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def moto_server(tmp: Path, *, auth: bool = False) -> Iterator[str]:
    """An S3 endpoint URL served by moto on a free port; with ``auth``, moto checks credentials against its IAM."""
    port = free_port()
    log = open(tmp / "moto.log", "wb")  # noqa: SIM115
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"} if auth else None
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_port(port, proc)
        yield f"http://{HOST}:{port}"
    finally:
        stop(proc)
        log.close()


def s3_env(endpoint: str) -> dict[str, str]:
    """Environment for boto3 against ``endpoint`` (dummy credentials; moto accepts any)."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


def write_htpasswd(path: Path, user: str = USER, password: str = PASSWORD) -> None:
    from passlib.apache import HtpasswdFile

    ht = HtpasswdFile(str(path), new=True)
    ht.set_password(user, password)
    ht.save()


@contextmanager
def pypi_server(tmp: Path) -> Iterator[str]:
    """A pypiserver base URL (upload at ``/``, pages at ``/simple/``) needing USER/PASSWORD for everything."""
    packages = tmp / "pypi-packages"
    packages.mkdir()
    htpasswd = tmp / "htpasswd"
    write_htpasswd(htpasswd)
    port = free_port()
    exe = Path(sys.executable).parent / "pypi-server"
    log = open(tmp / "pypiserver.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([str(exe), "run", "-i", HOST, "-p", str(port), "-a", "update,download,list",
                             "-P", str(htpasswd), str(packages)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc)
        yield f"http://{HOST}:{port}/"
    finally:
        stop(proc)
        log.close()


@contextmanager
def devpi_server(tmp: Path, timeout: float = 180.0) -> Iterator[str]:
    """A devpi-server index URL (``http://127.0.0.1:N/USER/dev/``: upload there, pages at ``+simple/``).

    ``devpi-init`` makes the server folder (no PyPI mirror), then the user USER/PASSWORD and the index are
    made through devpi's JSON API with basic auth, as devpi-client would.
    """
    import requests

    bindir = Path(sys.executable).parent
    serverdir = tmp / "devpi"
    log = open(tmp / "devpi.log", "wb")  # noqa: SIM115
    subprocess.run([str(bindir / "devpi-init"), "--serverdir", str(serverdir), "--root-passwd", "root-pw",
                    "--no-root-pypi"], check=True, stdout=log, stderr=subprocess.STDOUT)
    port = free_port()
    proc = subprocess.Popen([str(bindir / "devpi-server"), "--serverdir", str(serverdir), "--host", HOST,
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc, timeout=timeout)
        base = f"http://{HOST}:{port}"
        json_headers = {"Content-Type": "application/json", "Accept": "application/json"}
        made = requests.put(f"{base}/{USER}", json={"password": PASSWORD}, headers=json_headers, timeout=60)
        assert made.ok, made.text
        index = requests.put(f"{base}/{USER}/dev", json={"type": "stage", "bases": [], "volatile": True},
                             headers=json_headers, auth=(USER, PASSWORD), timeout=60)
        assert index.ok, index.text
        yield f"{base}/{USER}/dev/"
    finally:
        stop(proc)
        log.close()


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def tiny_wheel(folder: Path, name: str, version: str, payload: bytes = b"") -> tuple[Path, bytes]:
    """A pure-python wheel ``<name>-<version>-py3-none-any.whl`` and its METADATA bytes."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: test kernel {name}\n\n".encode()
    members = {
        f"{module}/__init__.py": b"VALUE = 1\n" + (b"# " + payload.hex().encode() + b"\n" if payload else b""),
        f"{dist_info}/METADATA": metadata,
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{n},sha256={_b64(hashlib.sha256(d).digest())},{len(d)}\n" for n, d in members.items())
    record += f"{dist_info}/RECORD,,\n"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in [*members.items(), (f"{dist_info}/RECORD", record.encode())]:
            zf.writestr(zipfile.ZipInfo(member, (2026, 1, 1, 0, 0, 0)), data)
    return path, metadata


def add_wheel(root: Path, name: str, version: str, payload: bytes = b"") -> Record:
    """Build a tiny wheel and ``LocalStore.put`` it into ``root`` with its record."""
    work = root.parent / "work"
    work.mkdir(parents=True, exist_ok=True)
    path, metadata = tiny_wheel(work, name, version, payload)
    data = path.read_bytes()
    label = version.split("+", 1)[1] if "+" in version else None
    record = Record(filename=path.name, name=name, version=version, sha256=hashlib.sha256(data).hexdigest(),
                    size=len(data), metadata_sha256=hashlib.sha256(metadata).hexdigest(), requires_python=None,
                    upload_time="2026-01-01T00:00:00Z", label=label)
    LocalStore(root).put(path, metadata, record)
    return record


def _page(links: list[str]) -> bytes:
    body = "".join(f'<a href="{html.escape(h)}">{html.escape(unquote(h.split("#")[0]).rsplit("/", 1)[-1])}</a>\n'
                   for h in links)
    return f"<!DOCTYPE html>\n<html><body>\n{body}</body></html>\n".encode()


def write_pages(root: Path, records: list[Record]) -> None:
    """simple/ and variants/<label>/simple/ pages, index.json, and the landing page, linking ../files/."""
    by_project: dict[str, list[Record]] = {}
    for r in records:
        by_project.setdefault(canonicalize_name(r.name), []).append(r)
    labels = sorted({r.label for r in records if r.label})
    for base, keep in [("simple", None), *[(f"variants/{lab}/simple", lab) for lab in labels]]:
        up = "../" * (base.count("/") + 2)
        projects = []
        for project, recs in sorted(by_project.items()):
            chosen = [r for r in recs if keep is None or r.label == keep]
            if not chosen:
                continue
            projects.append(project)
            links = [f"{up}files/{quote(r.filename)}#sha256={r.sha256}" for r in chosen]
            (root / base / project).mkdir(parents=True, exist_ok=True)
            (root / base / project / "index.html").write_bytes(_page(links))
            files = [{"filename": r.filename, "url": f"{up}files/{quote(r.filename)}",
                      "hashes": {"sha256": r.sha256}} for r in chosen]
            doc = {"meta": {"api-version": "1.1"}, "name": project, "files": files}
            (root / base / project / "index.json").write_text(json.dumps(doc))
        (root / base / "index.html").write_bytes(_page([f"{p}/" for p in projects]))
    (root / "index.html").write_bytes(_page(["simple/", *[f"variants/{lab}/simple/" for lab in labels]]))


@dataclass
class Root:
    path: Path
    records: list[Record]


# a store for the upload tests: two variants of one kernel and one plain wheel, and the pin of one of them
WHEELS = [("img2grey", "1.1.2+torch213cpucxx11"), ("img2grey", "1.1.2+torch27cu128cxx11"), ("relu", "1.0.0")]
PINNED = "img2grey==1.1.2+torch213cpucxx11"


def make_root(tmp: Path, wheels: list[tuple[str, str]], payload: bytes = b"") -> Root:
    """A store and index root under ``tmp/root`` holding ``wheels`` [(name, version)]."""
    root = tmp / "root"
    records = [add_wheel(root, name, version, payload) for name, version in wheels]
    write_pages(root, records)
    return Root(root, records)


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def page_links(page_key: str, html_text: str) -> list[str]:
    """The keys a page at ``page_key`` links to (fragments dropped, ``%2B`` decoded, folders -> index.html)."""
    parser = _Hrefs()
    parser.feed(html_text)
    out = []
    for href in parser.hrefs:
        target = unquote(urljoin(page_key, href.split("#")[0]))
        out.append(target + "index.html" if target.endswith("/") else target)
    return out


def wheel_names(records: list[Record]) -> list[str]:
    return sorted(r.filename for r in records if parse_wheel_filename(r.filename))


S = TypeVar("S", bound=socketserver.BaseServer)


@contextmanager
def in_thread(server: S) -> Iterator[S]:
    """Serve ``server`` on a daemon thread while the block runs; shut it down and close it after."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
