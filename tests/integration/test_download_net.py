"""``kernel-factory download`` against a hostile index on 127.0.0.1: redirects, URLs two parsers read apart, a
server that sends a byte now and then, credentials of any shape, and wheels whose members a file system cannot
hold as they are named.

The site of test_download.py (real wheels built by ``kernel-factory build``), served by a server in this process
that misbehaves on the paths asked (``Hostile``), beside a second server (``other``) on another port that counts
every request it gets: nothing may reach it. Every run goes through the installed tool; huggingface_hub's
``scan_cache_dir`` is the oracle of the cache after each.
"""

# ruff: noqa: F811  (the fixtures of test_download.py, imported, are parameters here)
from __future__ import annotations

import base64
import hashlib
import http.server
import shutil
import threading
import time
import unicodedata
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from test_download import download, sha_of, site, torch_venv  # noqa: F401  (module fixtures reused)
from test_download_checks import PYONLY, cache_state, lock, new_lock, page, provenance_of, scratch_left, sha256

pytestmark = pytest.mark.integration


class Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the server's folder; ``server.rules`` maps a path asked (query included) to ("redirect", URL) or
    ("trickle", seconds a byte)."""

    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.asked.append(self.path)
        for asked, (how, arg) in self.server.rules.items():
            if self.path != asked:
                continue
            if how == "redirect":
                self.send_response(302)
                self.send_header("Location", str(arg))
                self.end_headers()
                return
            if how == "trickle":  # a whole answer, one byte every ``arg`` seconds
                path = Path(self.translate_path(self.path))
                body = (path / "index.html" if path.is_dir() else path).read_bytes()
                wait = float(str(arg))
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Content-Type", "text/html" if path.is_dir() else "application/octet-stream")
                self.end_headers()
                try:
                    for i in range(len(body)):
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                        time.sleep(wait)
                except OSError:
                    pass
                return
        super().do_GET()


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.rules: dict[str, tuple[str, object]] = {}
        self.asked: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def serving(root: Path) -> Iterator[Server]:
    server = Server(root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def copy(site: Path, tmp_path: Path) -> Path:
    out = tmp_path / "site"
    shutil.copytree(site, out)
    return out


def pyonly_lock(example_repos: Path, tmp_path: Path) -> Path:
    return lock(tmp_path / "p", [new_lock("example/pyonly", sha_of(example_repos, "pyonly", "v0.2.0"), 0)])


# -- redirects and URLs --------------------------------------------------------------------------------------


@pytest.mark.parametrize("what", ["page", "record", "wheel"])
def test_a_redirect_off_the_origin_is_refused_before_anything_is_sent_there(
        example_repos: Path, copy: Path, torch_venv: Path, tmp_path: Path, what: str) -> None:
    """The project page, the record beside the wheel or the wheel answers 302 to another port of this host."""
    cache = tmp_path / "cache"
    with serving(copy) as index, serving(copy) as other:
        path = {"page": "/simple/pyonly/", "record": f"/files/{PYONLY}.json", "wheel": f"/files/{PYONLY}"}[what]
        index.rules[path] = ("redirect", f"{other.url}{path}")
        proc = download(pyonly_lock(example_repos, tmp_path), index.url, torch_venv, cache)
    assert other.asked == []
    assert proc.returncode == 3, proc.stdout + proc.stderr
    source = f"{index.url}{path}" if what != "wheel" else index.url
    assert proc.stderr.splitlines() == [
        f"error: {source} links to {other.url}{path}, which is not on the index's own origin; nothing is read from "
        "there: fix the index", f"nothing was installed in {cache}"]
    assert cache_state(cache) == {} and scratch_left(cache) == []


def test_a_redirect_on_the_origin_is_followed(example_repos: Path, copy: Path, torch_venv: Path,
                                              tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with serving(copy) as index:
        index.rules[f"/files/{PYONLY}"] = ("redirect", f"/files/{PYONLY}?hop=1")
        index.rules["/simple/pyonly/"] = ("redirect", f"{index.url}/simple/pyonly/?hop=1")
        proc = download(pyonly_lock(example_repos, tmp_path), index.url, torch_venv, cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"/files/{PYONLY}?hop=1" in index.asked and "/simple/pyonly/?hop=1" in index.asked
    assert cache_state(cache) == {"example/pyonly": [sha_of(example_repos, "pyonly", "v0.2.0")]}


def test_a_link_the_client_would_send_elsewhere_is_refused_and_named_as_sent(
        example_repos: Path, copy: Path, torch_venv: Path, tmp_path: Path) -> None:
    """``http://OTHER\\@INDEX/...``: urllib.parse reads INDEX, the HTTP client sends to OTHER."""
    cache = tmp_path / "cache"
    shutil.rmtree(copy / "variants")
    with serving(copy) as index, serving(copy) as other:
        host = index.url.removeprefix("http://")
        link = f"{other.url}\\@{host}/files/{PYONLY}"
        page(copy, "pyonly", [f"{link}#sha256={sha256(copy / 'files' / PYONLY)}"])
        proc = download(pyonly_lock(example_repos, tmp_path), index.url, torch_venv, cache)
    assert other.asked == []
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: {index.url} links to {other.url}/%5C@{host}/files/{PYONLY}, which is not on the index's own "
        "origin; nothing is read from there: fix the index", f"nothing was installed in {cache}"]
    assert cache_state(cache) == {}


# -- deadlines -----------------------------------------------------------------------------------------------


def test_a_page_sent_a_byte_every_5_s_ends_at_the_page_deadline(example_repos: Path, copy: Path,
                                                                torch_venv: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with serving(copy) as index:
        index.rules["/simple/pyonly/"] = ("trickle", 5)
        start = time.monotonic()
        proc = download(pyonly_lock(example_repos, tmp_path), index.url, torch_venv, cache)
        took = time.monotonic() - start
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: --index-url: {index.url}/simple/pyonly/ was not read in time (60 s; a page may take 60 s); nothing "
        "was installed: check the index and the network"]
    assert 60 <= took < 120, took
    assert cache_state(cache) == {} and scratch_left(cache) == []


def test_a_wheel_sent_a_byte_every_5_s_ends_below_the_minimum_rate(example_repos: Path, copy: Path,
                                                                  torch_venv: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    size = (copy / "files" / PYONLY).stat().st_size
    with serving(copy) as index:
        index.rules[f"/files/{PYONLY}"] = ("trickle", 5)
        start = time.monotonic()
        proc = download(pyonly_lock(example_repos, tmp_path), index.url, torch_venv, cache)
        took = time.monotonic() - start
    assert proc.returncode == 4, proc.stdout + proc.stderr
    due = 30 + size / 65536
    assert due <= took < due + 60, took  # the probe of the interpreter and the pages come first
    assert proc.stderr.splitlines() == [
        f"error: --index-url: {index.url}/files/{PYONLY} was not read in time ({round(due)} s; a wheel must "
        "come at 64 KiB/s on average after 30 s); nothing was installed: check the index and the network"]
    assert cache_state(cache) == {} and scratch_left(cache) == []


# -- credentials ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("password", ["QZ'single", 'QZ"double"', "QZ with space", "QZ@at:colon", "QZ<>|&;`$"])
def test_a_password_of_any_characters_is_never_printed(example_repos: Path, copy: Path, torch_venv: Path,
                                                       tmp_path: Path, password: str) -> None:
    with serving(copy) as index:
        authed = index.url.replace("http://", f"http://user:{password}@")
        missing = download(lock(tmp_path / "m", [new_lock("example/nosuch", "a" * 40, 1)]), authed, torch_venv,
                           tmp_path / "cache")
    dead = download(lock(tmp_path / "d", [new_lock("example/nosuch", "a" * 40, 1)]), authed, torch_venv,
                    tmp_path / "cache")
    assert missing.returncode == 3 and dead.returncode == 4, missing.stderr + dead.stderr
    for proc in (missing, dead):
        assert "QZ" not in proc.stdout + proc.stderr, proc.stderr
    assert missing.stderr.splitlines()[0] == (
        f"error: example/nosuch (kernels.lock): {index.url} has no project nosuch (no simple/nosuch/ page); publish "
        "it there or fix --index-url")
    assert dead.stderr.splitlines() == [
        f"error: --index-url: cannot reach {index.url}/variants/torch213cpucxx11/simple/nosuch/ (ConnectionError); "
        "check the URL and that the index is served"]
    assert cache_state(tmp_path / "cache") == {}


# -- wheel members as a file system sees them ----------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def with_members(src: Path, dest: Path, members: list[tuple[str, bytes]], *, encrypt: str = "",
                 corrupt: str = "") -> Path:
    """``src`` with ``members`` added, each listed in its RECORD (``encrypt``: that one flagged encrypted;
    ``corrupt``: that one's deflate stream broken)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        record = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == record:
                data += "".join(f"{n},sha256={_b64(d)},{len(d)}\n" for n, d in members).encode()
            zout.writestr(info, data)
        with pytest.warns(UserWarning) if len({n for n, _ in members}) < len(members) else _nothing():
            for name, data in members:
                info = zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zout.writestr(info, data)
    if encrypt:  # zipfile clears the flag as it writes: set it in the local header and the central directory
        with zipfile.ZipFile(dest) as zf:
            info, start = zf.getinfo(encrypt), zf.start_dir
        raw = bytearray(dest.read_bytes())
        raw[info.header_offset + 6] |= 0x1
        while raw[start:start + 4] == b"PK\x01\x02":
            n, m, k = (int.from_bytes(raw[start + i:start + i + 2], "little") for i in (28, 30, 32))
            if raw[start + 46:start + 46 + n] == encrypt.encode():
                raw[start + 8] |= 0x1
            start += 46 + n + m + k
        dest.write_bytes(bytes(raw))
    if corrupt:
        with zipfile.ZipFile(dest) as zf:
            info = zf.getinfo(corrupt)
        raw = bytearray(dest.read_bytes())
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
        raw[start] = 0xFF  # a deflate block of the reserved type 3
        dest.write_bytes(bytes(raw))
    return dest


@contextmanager
def _nothing() -> Iterator[None]:
    yield


NFC, NFD = unicodedata.normalize("NFC", "caf\u00e9.py"), unicodedata.normalize("NFD", "caf\u00e9.py")
LONG = "a" * 300 + ".py"


@pytest.mark.parametrize(("case", "members", "how", "line"), [
    ("duplicate", ["dup.py", "dup.py"], {}, "member '{p}/dup.py' appears twice"),
    ("file-and-folder", ["x", "x/y.py"], {}, "member '{p}/x/y.py' needs a folder where '{p}/x' is a file"),
    ("folder-and-file", ["x/y.py", "x"], {}, "member '{p}/x' is a file where '{p}/x/y.py' needs a folder"),
    ("long", [LONG], {}, "member '{long}...' has a name longer than a file system takes (255 "
                         "bytes a part, 1024 in all)"),
    ("case", ["Ops.py", "ops.py"], {}, "members '{p}/ops.py' and '{p}/Ops.py' are one file on a case-insensitive "
                                       "or Unicode-normalising file system"),
    ("unicode", [NFC, NFD], {}, f"members '{{p}}/{NFD}' and '{{p}}/{NFC}' are one file on a case-insensitive or "
                                "Unicode-normalising file system"),
    ("folder-case", ["Sub/a.py", "sub/b.py"], {},
     "members '{p}/sub/b.py' and '{p}/Sub/a.py' are in one folder on a case-insensitive or Unicode-normalising file "
     "system, in two here"),
    ("encrypted", ["enc.py"], {"encrypt": "enc.py"}, "member '{p}/enc.py' is encrypted"),
])  # fmt: skip
def test_members_a_file_system_cannot_hold_as_named_are_refused(
        example_repos: Path, copy: Path, torch_venv: Path, tmp_path: Path, case: str, members: list[str],
        how: dict[str, str], line: str) -> None:
    package = provenance_of(copy / "files" / PYONLY)["variant-root"]  # where download reads the variant
    full = {k: f"{package}/{v}" for k, v in how.items()}
    wheel = with_members(copy / "files" / PYONLY, tmp_path / PYONLY,
                         [(f"{package}/{m}", f"# {i}\n".encode()) for i, m in enumerate(members)], **full)
    shutil.copy(wheel, copy / "files" / PYONLY)
    shutil.rmtree(copy / "variants")
    page(copy, "pyonly", [f"../../files/{PYONLY}#sha256={sha256(wheel)}"])
    cache = tmp_path / "cache"
    with serving(copy) as index:
        proc = download(pyonly_lock(example_repos, tmp_path), index.url, torch_venv, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: {PYONLY}: {line.format(p=package, long=f'{package}/{LONG}'[:200])}; nothing was installed: "
        "rebuild the wheel",
        f"nothing was installed in {cache}"]
    assert cache_state(cache) == {} and scratch_left(cache) == []


def test_a_corrupt_deflate_stream_is_refused(example_repos: Path, copy: Path, torch_venv: Path,
                                             tmp_path: Path) -> None:
    package = provenance_of(copy / "files" / PYONLY)["variant-root"]  # where download reads the variant
    wheel = with_members(copy / "files" / PYONLY, tmp_path / PYONLY, [(f"{package}/bad.py", b"X = 1\n" * 100)],
                         corrupt=f"{package}/bad.py")
    shutil.copy(wheel, copy / "files" / PYONLY)
    shutil.rmtree(copy / "variants")
    page(copy, "pyonly", [f"../../files/{PYONLY}#sha256={sha256(wheel)}"])
    cache = tmp_path / "cache"
    with serving(copy) as index:
        proc = download(pyonly_lock(example_repos, tmp_path), index.url, torch_venv, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: {PYONLY} is not a readable zip file (Error -3 while decompressing data: invalid block type); "
        "republish the wheel", f"nothing was installed in {cache}"]
    assert cache_state(cache) == {} and scratch_left(cache) == []

