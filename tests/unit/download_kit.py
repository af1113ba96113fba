"""Kernel wheels and a kernel index in a folder, for download's unit tests (no network, no processes).

``kernel_wheel`` writes a wheel as kernel-factory builds it (the package with its metadata.json, the provenance
file, a RECORD of sha256 digests). ``Index`` lays out what ``kernel-factory index`` serves: PEP 691 pages in
``simple/<project>/`` (every wheel) and ``variants/<label>/simple/<project>/`` (that label's wheels), the
wheels in ``files/`` and, where asked, the record beside a wheel (``files/<wheel>.json``, its revision).
``FolderAdapter`` serves such a folder to a real requests session at ``http://idx.test`` without a socket.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import requests
from kernel_factory.local.probe.environment import Environment
from kernel_factory.local.probe.run import environment
from kernel_factory.variants import parse

SHA1, SHA2, SHA3 = "1" * 40, "2" * 40, "3" * 40
CPU = "torch213-cxx11-cpu-x86_64-linux"
LABEL = "torch213cpucxx11"
HTTP = "http://idx.test"


def env() -> Environment:
    torch = {"version": "2.13.0", "cuda": None, "hip": None, "xpu": None, "tpu": False, "neuron": False,
             "mps": False, "cxx11_abi": True, "privateuse1": None, "cann": None}
    return environment({"python": "/py", "python_version": "3.11", "machine": "x86_64", "system": "linux",
                        "torch": torch})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def kernel_wheel(folder: Path, name: str, version: str = "1.0.0", variant: str = "torch-universal", *,
                 repo_id: str | None = None, revision: str = SHA1, depends: list[Any] | None = None,
                 code: bytes = b"X = 1\n", prov: dict[str, Any] | None = None) -> Path:
    """``<name>-<version>[+label]-py3-none-<platform>.whl`` in ``folder``, of ``org/<name>`` at ``revision``."""
    target = parse(variant)
    package = name.replace("-", "_")
    tag = "py3-none-any" if target.platform == "any" else "py3-none-manylinux_2_28_x86_64"
    filename = f"{package}-{target.local_version(version)}-{tag}.whl"
    info = f"{package}-{version}.dist-info"
    provenance = {"repo_id": repo_id or f"org/{name}", "revision": revision, "variant": variant, "package": package,
                  "kernel-depends": depends or []}
    provenance.update(prov or {})
    members = {f"{package}/__init__.py": code, f"{package}/metadata.json": json.dumps({"name": name}).encode(),
               f"{info}/kernel_factory.json": json.dumps(provenance).encode()}
    record = "".join(f"{n},sha256={_b64(d)},{len(d)}\n" for n, d in members.items()) + f"{info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in members.items():
            zf.writestr(n, d)
        zf.writestr(f"{info}/RECORD", record)
    return path


def files_of(code: bytes = b"X = 1\n", name: str = "relu") -> dict[str, str]:
    """The files (path -> sha256 hex) a wheel of ``kernel_wheel`` unpacks to."""
    return {"__init__.py": hashlib.sha256(code).hexdigest(),
            "metadata.json": hashlib.sha256(json.dumps({"name": name}).encode()).hexdigest()}


class Index:
    """An index root folder; ``add`` wheels, then ``url`` (a folder, ``file://`` or ``http`` through
    FolderAdapter) is the --index-url."""

    def __init__(self, root: Path, base: str | None = None) -> None:
        self.root = root
        self.base = base or root.as_uri()  # what the pages' links start with
        self.entries: dict[str, list[dict[str, Any]]] = {}  # project -> file entries
        self.labels: dict[str, str | None] = {}  # wheel file name -> label

    def add(self, wheel: Path, *, record: object = None, sha256: str | None = "", size: int | None | bool = True,
            yanked: bool = False) -> str:
        """Put ``wheel`` in files/ and on its pages (``sha256``: "" for the right one, None for none; ``size``:
        True for the right one, None for none); ``record`` (not None) is the JSON of the record beside it."""
        data = wheel.read_bytes()
        files = self.root / "files"
        files.mkdir(parents=True, exist_ok=True)
        (files / wheel.name).write_bytes(data)
        if record is not None:
            (files / f"{wheel.name}.json").write_text(record if isinstance(record, str) else json.dumps(record))
        project = wheel.name.split("-", 1)[0].replace("_", "-")
        entry: dict[str, Any] = {"filename": wheel.name, "url": f"{self.base}/files/{wheel.name.replace('+', '%2B')}",
                                 "hashes": {}}
        if sha256 is not None:
            entry["hashes"]["sha256"] = sha256 or hashlib.sha256(data).hexdigest()
        if size is not None:
            entry["size"] = len(data) if size is True else size
        if yanked:
            entry["yanked"] = True
        self.entries.setdefault(project, []).append(entry)
        self.labels[wheel.name] = wheel.name.split("-")[1].partition("+")[2] or None
        self.write()
        return wheel.name

    def write(self) -> None:
        def page(path: Path, project: str, entries: list[dict[str, Any]]) -> None:
            path.mkdir(parents=True, exist_ok=True)
            (path / "index.json").write_text(json.dumps({"meta": {"api-version": "1.1"}, "name": project,
                                                         "files": entries}))

        projects = sorted(self.entries)
        (self.root / "simple").mkdir(parents=True, exist_ok=True)
        (self.root / "simple" / "index.json").write_text(json.dumps(
            {"meta": {"api-version": "1.1"}, "projects": [{"name": p} for p in projects]}))
        for project in projects:
            page(self.root / "simple" / project, project, self.entries[project])
            for label in {self.labels[e["filename"]] for e in self.entries[project]} - {None}:
                page(self.root / "variants" / str(label) / "simple" / project, project,
                     [e for e in self.entries[project] if self.labels[e["filename"]] == label])


class FolderAdapter(requests.adapters.BaseAdapter):
    """Answers a requests session from a folder laid out as an index: ``<HTTP>/<path>`` is ``<root>/<path>``
    (a folder's index.json); 404 where there is none. ``status`` answers the paths ending in a key with its code;
    ``redirect`` sends every wheel to that URL (a 302); ``fail`` raises that exception for every wheel. ``gets``
    lists the URLs asked for."""

    def __init__(self, root: Path, *, status: dict[str, int] | None = None, redirect: str | None = None,
                 fail: Exception | None = None) -> None:
        super().__init__()
        self.root, self.status, self.redirect, self.fail = root, status or {}, redirect, fail
        self.gets: list[tuple[str, dict[str, Any]]] = []  # (URL, send's keyword arguments)

    def send(self, request: requests.PreparedRequest, stream: bool = False,
             timeout: float | tuple[float | None, float | None] | None = None, verify: bool | str = True,
             cert: str | tuple[str, str] | None = None, proxies: dict[str, str] | None = None) -> requests.Response:
        url = str(request.url)
        self.gets.append((url, {"stream": stream, "timeout": timeout}))
        rel = unquote(urlsplit(url).path).lstrip("/")
        resp = requests.Response()
        resp.request, resp.url, resp.status_code = request, url, 200
        wheel = rel.endswith(".whl")
        if wheel and self.fail is not None:
            raise self.fail
        if wheel and self.redirect is not None and url != self.redirect:
            resp.status_code, resp.headers["Location"] = 302, self.redirect
            resp.raw = io.BytesIO(b"")
            return resp
        path = self.root / rel
        if path.is_dir():
            path = path / "index.json"
        if not path.is_file():
            resp.status_code, resp.raw = 404, io.BytesIO(b"")
            return resp
        for suffix, code in self.status.items():
            if rel.endswith(suffix):
                resp.status_code = code
        resp.headers["Content-Type"] = ("application/vnd.pypi.simple.v1+json" if path.name == "index.json"
                                        else "application/octet-stream")
        resp.raw = io.BytesIO(path.read_bytes())
        return resp

    def close(self) -> None:
        pass


def http_session(root: Path, **how: Any) -> tuple[requests.Session, FolderAdapter]:
    session = requests.Session()
    adapter = FolderAdapter(root, **how)
    session.mount(HTTP, adapter)
    return session, adapter
