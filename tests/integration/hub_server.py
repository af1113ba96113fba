"""A test Hub: kernel repositories served by olah on 127.0.0.1, behind a counting, cuttable proxy.

``make_kernel_repo`` builds a small git kernel repository (branches, tags, variants with a
correct metadata.json digest); ``serve_repo`` puts a ``git clone --mirror`` copy where olah
serves it; ``OlahServer`` runs olah offline with its upstream on a dead loopback port;
``Proxy`` sits in front of it, counts response bytes and can cut connections mid-body.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kernel_factory.verify.digest import compute

HOST = "127.0.0.1"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
DEFAULT_VARIANTS = ("torch27-cxx11-cu128-x86_64-linux", "torch28-cxx11-cpu-x86_64-linux", "torch-universal")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def git(repo: Path, *args: str, when: int | None = None) -> str:
    env = {**os.environ, **GIT_ENV}
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"{when} +0000"
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _backend_type(variant: str) -> str:
    """kernels' backend type for a variant name (a noarch ``torch-universal`` is cpu)."""
    for part in variant.split("-")[1:]:
        for prefix, kind in (("cu", "cuda"), ("rocm", "rocm"), ("xpu", "xpu"), ("metal", "metal")):
            if part.startswith(prefix) and (part == prefix or part[len(prefix):].isdigit()):
                return kind
    return "cpu"


def write_variant(build: Path, variant: str, module: str, *, version: int = 1, payload: bytes = b"",
                  elf: bytes | None = None) -> None:
    """One build/<variant>/ folder in the flat layout with a correct sha256 digest; a binary variant's .so is
    ``elf`` (a real ELF file's bytes) followed by ``payload``, or else a stand-in that only starts like one."""
    vdir = build / variant
    vdir.mkdir(parents=True, exist_ok=True)
    (vdir / "__init__.py").write_text(f'"""{module} {variant}"""\nfrom ._ops import ops\n')
    (vdir / "_ops.py").write_text("ops = None\n")
    if not variant.startswith("torch-"):
        head = elf if elf is not None else b"\x7fELF fake " + variant.encode()
        (vdir / f"_{module}_abc123.abi3.so").write_bytes(head + payload)
    meta = {
        "name": module, "id": f"_{module}_abc123", "version": version, "license": "Apache-2.0", "python-depends": [],
        "backend": {"type": _backend_type(variant)},
        "digest": {"algorithm": "sha256", "files": compute(vdir, "sha256")},
    }
    (vdir / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


@dataclass
class KernelRepo:
    path: Path
    commits: list[str] = field(default_factory=list)
    times: list[int] = field(default_factory=list)


def make_kernel_repo(path: Path, *, module: str = "relu", variants: tuple[str, ...] = DEFAULT_VARIANTS,
                     payload: bytes = b"", readme: str | None = None, elf: bytes | None = None) -> KernelRepo:
    """A git kernel repository: 3 commits on main; branch v1 at the 2nd, tag v1.0.0 at the 1st, branch v2 at HEAD."""
    path.mkdir(parents=True)
    repo = KernelRepo(path)
    git(path, "init", "-q", "-b", "main")
    readme = readme if readme is not None else f"# {module}\n\nA {module} kernel for tests. It is small.\n"
    for i in range(3):
        (path / "README.md").write_text(readme + f"\nrevision {i}\n")
        for variant in variants:
            write_variant(path / "build", variant, module, version=1 + i // 2, payload=payload + bytes([i]), elf=elf)
        git(path, "add", "-A")
        when = 1_700_000_000 + i * 86_400
        git(path, "commit", "-q", "-m", f"build {i}", when=when)
        repo.commits.append(git(path, "rev-parse", "HEAD"))
        repo.times.append(when)
    git(path, "tag", "-a", "v1.0.0", "-m", "v1.0.0", repo.commits[0], when=repo.times[0])
    git(path, "tag", "v1.0.1", repo.commits[1])
    git(path, "branch", "v1", repo.commits[1])
    git(path, "branch", "v2", repo.commits[2])
    return repo


def serve_repo(source: Path, mirrors: Path, repo_id: str, repo_type: str = "kernel") -> Path:
    """Put a ``git clone --mirror`` copy of ``source`` where olah serves ``repo_id``; returns it."""
    dest = mirrors / f"{repo_type}s" / repo_id
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", "--mirror", str(source), str(dest)], check=True, capture_output=True,
                   env={**os.environ, **GIT_ENV})
    return dest


class OlahServer:
    """olah serving ``mirrors`` offline on 127.0.0.1; start() waits until it answers."""

    def __init__(self, mirrors: Path, workdir: Path, command: Sequence[str] | None = None) -> None:
        self.mirrors = mirrors
        self.workdir = workdir
        self.command = command  # how to start olah (its arguments follow); default: the olah-cli beside Python
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        dead = free_port()  # nothing listens here: upstream is unreachable
        config = self.workdir / "olah.toml"
        config.write_text(
            "[basic]\n"
            f'host = "{HOST}"\nport = {self.port}\n'
            f'repos-path = "{self.workdir / "repos"}"\n'
            f"mirrors-path = [{json.dumps(str(self.mirrors))}]\n"
            'hf-scheme = "http"\n'
            f'hf-netloc = "{HOST}:{dead}"\nhf-lfs-netloc = "{HOST}:{dead}"\n'
            'mirror-scheme = "http"\n'
            f'mirror-netloc = "{HOST}:{self.port}"\nmirror-lfs-netloc = "{HOST}:{self.port}"\n'
            "[accessibility]\noffline = true\n"
        )
        exe = self.command or [str(Path(sys.executable).with_name("olah-cli"))]
        with open(self.workdir / "olah.log", "wb") as log:
            self.proc = subprocess.Popen([*exe, "-c", str(config)], cwd=self.workdir, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"olah exited: {(self.workdir / 'olah.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/api/kernels/none/none/refs", timeout=1).close()
                return
            except urllib.error.HTTPError:
                return  # it answers
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"olah did not answer on {self.url} within {timeout} s")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


class Link:
    """A link of ``rate`` bytes a second, shared by every connection (0: not paced). The tests' Proxy and the
    bench's CDN front (scripts/hub_cdn.py) send through one."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._free_at = 0.0
        self._lock = threading.Lock()

    def carry(self, nbytes: int) -> None:
        """Wait until ``nbytes`` more have crossed the link after what was queued before (a burst after an idle
        moment is not faster)."""
        if self.rate <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(self._free_at, now)
            self._free_at = start + nbytes / self.rate
            done = self._free_at
        delay = done - time.monotonic()
        if delay > 0:
            time.sleep(delay)


class Proxy:
    """A TCP proxy on 127.0.0.1 that counts response bytes and can play a server dying mid-download.

    ``die_after(n)``: after ``n`` more response bytes every connection is cut and new ones are closed
    at once, until ``revive()``. ``busy(n, status, retry_after)``: the next ``n`` new connections are answered
    ``status`` with ``Retry-After`` (and closed) instead of being forwarded, as a rate-limited Hub does.
    ``pace(rate)``: every response byte crosses one link of ``rate`` bytes a second, shared by all connections.
    """

    def __init__(self, upstream_port: int, mirrors: Path | None = None, trusted: tuple[str, ...] = ()) -> None:
        self.upstream_port = upstream_port
        self.mirrors = mirrors  # answers /api/kernels?author=ORG (and /api/models) from here: olah does not
        self.trusted = trusted  # organisations whose overview says trustedKernelPublisher (kernels 0.19 asks)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://{HOST}:{self.port}"
        self.bytes_served = 0
        self.requests: list[str] = []
        self.budget: int | None = None  # response bytes left before the proxy dies
        self.dead = False
        self.cuts = 0
        self.busy_left = 0
        self.busy_answers = 0
        self._busy_status = b""
        self._retry_after = 0
        self._link = Link(0)  # every response byte crosses it; not paced until ``pace``
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.bytes_served = 0
            self.requests.clear()
            self._link = Link(0)

    def pace(self, rate: float) -> None:
        with self._lock:
            self._link = Link(rate)

    def die_after(self, nbytes: int) -> None:
        with self._lock:
            self.budget = nbytes

    def busy(self, n: int, status: int = 429, retry_after: int = 1) -> None:
        reasons = {429: "Too Many Requests", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}
        with self._lock:
            self.busy_left, self._busy_status = n, f"{status} {reasons[status]}".encode()
            self._retry_after = retry_after

    def _answer_busy(self, client: socket.socket) -> bool:
        """Answer a busy status to one request on ``client`` if the proxy is busy; True if it did."""
        with self._lock:
            if self.busy_left <= 0:
                return False
            self.busy_left -= 1
            self.busy_answers += 1
            status, retry_after = self._busy_status, self._retry_after
        try:
            client.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = client.recv(65536)
                if not chunk:
                    break
                data += chunk
            body = b"busy"
            client.sendall(b"HTTP/1.1 " + status + b"\r\nRetry-After: " + str(retry_after).encode()
                           + b"\r\nContent-Type: text/plain\r\nContent-Length: " + str(len(body)).encode()
                           + b"\r\nConnection: close\r\n\r\n" + body)
        except OSError:
            pass
        finally:
            client.close()
        return True

    def revive(self) -> None:
        with self._lock:
            self.budget = None
            self.dead = False

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if self.dead:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket, data: bytes) -> bool:
        """Send a response chunk within the budget; False once the proxy has died."""
        self._link.carry(len(data))
        with self._lock:
            if self.dead:
                return False
            if self.budget is not None and len(data) >= self.budget:
                data, self.dead = data[: self.budget], True
                self.cuts += 1
            elif self.budget is not None:
                self.budget -= len(data)
            self.bytes_served += len(data)
        client.sendall(data)
        return not self.dead

    def _listing(self, client: socket.socket, request: bytes) -> bool:
        """Answer ``GET /api/kernels?author=ORG`` (or models) the way the Hub does: a JSON list of repositories."""
        line = request.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) >= 2 and parts[1].startswith("/api/organizations/") and parts[1].endswith("/overview"):
            org = parts[1].split("/")[3]
            if org not in self.trusted:
                return False
            body = json.dumps({"name": org, "fullname": org, "avatarUrl": "", "trustedKernelPublisher": True}).encode()
            with self._lock:
                self.requests.append(line)
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            return True
        if self.mirrors is None or len(parts) < 2 or not parts[1].startswith(("/api/kernels?", "/api/models?")):
            return False
        url = urllib.parse.urlsplit(parts[1])
        kind = url.path.removeprefix("/api/")
        author = urllib.parse.parse_qs(url.query).get("author", [""])[0]
        folder = self.mirrors / kind / author
        repos = sorted(p.name for p in folder.iterdir() if p.is_dir()) if author and folder.is_dir() else []
        body = json.dumps([{"_id": f"{author}/{name}", "id": f"{author}/{name}", "author": author, "private": False}
                           for name in repos]).encode()
        with self._lock:
            self.requests.append(line)
        client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        return True

    def _pipe(self, client: socket.socket) -> None:
        if self._answer_busy(client):
            return
        try:
            upstream = socket.create_connection((HOST, self.upstream_port))
        except OSError:
            client.close()
            return
        try:
            while not self.dead:
                ready, _, _ = select.select([client, upstream], [], [], 0.5)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client:
                        if self._listing(client, data):
                            continue  # answered here; the connection stays open for the next request
                        with self._lock:
                            self.requests += [line.decode("latin-1") for line in data.split(b"\r\n")
                                              if line.startswith((b"GET ", b"HEAD ", b"POST "))]
                        upstream.sendall(data)
                    elif not self._forward(client, data):
                        return
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    def close(self) -> None:
        self._closed = True
        self.sock.close()


@contextmanager
def hub(mirrors: Path, workdir: Path, *, listing: bool = False,
        trusted: tuple[str, ...] = ()) -> Iterator[tuple[OlahServer, Proxy]]:
    """olah on ``mirrors`` and a proxy in front of it; use ``proxy.url`` as HF_ENDPOINT. With ``listing`` the
    proxy also answers the organisation listings (``/api/kernels?author=ORG``) that olah does not serve; the
    organisations in ``trusted`` get an overview with ``trustedKernelPublisher: true`` (olah has none)."""
    server = OlahServer(mirrors, workdir)
    server.start()
    proxy = Proxy(server.port, mirrors if listing else None, trusted)
    try:
        yield server, proxy
    finally:
        proxy.close()
        server.stop()


def hf_env(endpoint: str, home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for huggingface_hub pointed at a test Hub with its cache under ``home``."""
    env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_HUB_DISABLE_XET": "1", "HF_HUB_ETAG_TIMEOUT": "5", "HF_HUB_DOWNLOAD_TIMEOUT": "5"}
    env.update(extra or {})
    return env
