"""Withdraw a build and mark a project's status: what real pip and uv do from the served index.

The store is synthesized (tests/index_synth.py: installable pure-Python wheels with kernel records), served by
``python -m http.server`` (HTML pages) or ``kernel-factory serve`` (PEP 691 JSON) on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from index_synth import add_kernel, index_pages, kernel_record, make_wheel
from kernel_factory.cli import main
from kernel_factory.index.command import index_with_adoption
from kernel_factory.index.pages import DEFAULT_BASE_URL
from kernel_factory.store.s3 import S3Store
from kernel_factory.variants import parse
from servers import page_links
from support import clean_env, free_port, http_server, kf, wait_http
from test_which import fake_python

pytestmark = pytest.mark.integration
UV = str(Path(sys.executable).with_name("uv"))
CPU = "torch213-cxx11-cpu-x86_64-linux"
CU = "torch27-cxx11-cu128-x86_64-linux"
CPU_ROOT = "variants/torch213cpucxx11/simple"
ENV = clean_env(UV_NO_CACHE="1", PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_CONFIG_FILE=os.devnull)


def make_store(folder: Path, versions: tuple[str, ...] = ("1.0.7", "1.1.0", "1.1.2")) -> Path:
    store = folder / "public"
    for version in versions:
        for variant in (CPU, CU):
            add_kernel(store, "img2grey", version, variant, repo_id="kernels-community/img2grey")
    add_kernel(store, "My_Kernel", "0.1.0", CPU)
    index_with_adoption(str(store), store, None, DEFAULT_BASE_URL)
    return store


def sh(*args: str | Path, cwd: Path | None = None, stdin: str | None = None,
       check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=ENV, input=stdin, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    if check:
        assert proc.returncode == 0, f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def pip_pick(url: str, *requirement: str) -> dict[str, object]:
    """What pip would install (its --report), resolving from ``url`` only."""
    out = sh(sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", "--no-deps",
             "--ignore-installed", "--index-url", url, *requirement).stdout  # fmt: skip
    install = json.loads(out)["install"]
    assert len(install) == 1, install
    return install[0]  # type: ignore[no-any-return]


def uv_pick(url: str, requirement: str) -> str:
    """The pin uv resolves ``requirement`` to from ``url`` only."""
    out = sh(UV, "pip", "compile", "-", "--no-config", "--no-header", "--no-annotate", "--index-url", url,
             "--quiet", stdin=requirement).stdout  # fmt: skip
    return out.strip()


def installed(tool: str, url: str, requirement: str, target: Path) -> str:
    """Install ``requirement`` from the CPU variant root of ``url`` into the folder ``target`` with real pip or
    uv; the version installed (its .dist-info's)."""
    index = f"{url}/{CPU_ROOT}" if "==" not in requirement else f"{url}/simple"
    if tool == "pip":
        sh(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target, "--index-url", index,
           requirement)  # fmt: skip
    else:
        sh(UV, "pip", "install", "--quiet", "--no-config", "--no-deps", "--python", sys.executable, "--target", target,
           "--index-url", index, requirement)  # fmt: skip
    (info,) = target.glob("img2grey-*.dist-info")
    return info.name.removeprefix("img2grey-").removesuffix(".dist-info")


def pip_fails(url: str, requirement: str) -> str:
    proc = sh(sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--index-url",
              url, requirement, check=False)  # fmt: skip
    assert proc.returncode != 0, proc.stdout
    return proc.stderr


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def assert_links_resolve(root: Path) -> None:
    """Every link of every page names a file that is there, with its .metadata."""
    for rel, page in index_pages(root).items():
        if not rel.endswith(".html"):
            continue
        for link in page_links(rel, page.decode()):
            if "://" in link or not link.startswith("files/"):
                continue  # the Hub, the other pages
            assert (root / link).is_file(), f"{rel} links {link}, which is gone"
            if link.endswith(".whl"):
                assert (root / f"{link}.metadata").is_file(), link


def snapshot(store: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The store's files (its own hidden ones left out) and its pages."""
    files = {p.name: p.read_bytes() for p in (store / "files").iterdir() if not p.name.startswith(".")}
    return files, index_pages(store)


# --- yank ---------------------------------------------------------------------------------------------------


def test_yank_skipped_unless_pinned_by_pip_and_uv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path)
    assert cli("yank", "img2grey==1.1.2", "--reason", "wrong results on sm_90", "--store", store, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["changed"] == ["img2grey-1.1.2+torch213cpucxx11-py3-none-linux_x86_64.whl",
                              "img2grey-1.1.2+torch27cu128cxx11-py3-none-linux_x86_64.whl"]  # fmt: skip
    assert (doc["unchanged"], doc["reason"]) == ([], "wrong results on sm_90")
    with http_server(store) as url:
        picked = pip_pick(f"{url}/{CPU_ROOT}", "img2grey")
        assert picked["metadata"]["version"] == "1.1.0+torch213cpucxx11"  # type: ignore[index]
        pinned = pip_pick(f"{url}/simple", "img2grey==1.1.2+torch213cpucxx11")
        assert pinned["metadata"]["version"] == "1.1.2+torch213cpucxx11"  # type: ignore[index]
        assert pinned["is_yanked"] is True
        assert uv_pick(f"{url}/{CPU_ROOT}", "img2grey") == "img2grey==1.1.0+torch213cpucxx11"
        assert uv_pick(f"{url}/simple", "img2grey==1.1.2+torch213cpucxx11") == "img2grey==1.1.2+torch213cpucxx11"
        assert installed("pip", url, "img2grey", tmp_path / "pip1") == "1.1.0+torch213cpucxx11"
        assert installed("uv", url, "img2grey", tmp_path / "uv1") == "1.1.0+torch213cpucxx11"
        pin = "img2grey==1.1.2+torch213cpucxx11"
        assert installed("pip", url, pin, tmp_path / "pip2") == "1.1.2+torch213cpucxx11"
        assert installed("uv", url, pin, tmp_path / "uv2") == "1.1.2+torch213cpucxx11"
        assert cli("unyank", "img2grey>1.1.0", "--store", store, "-q") == 0
        assert pip_pick(f"{url}/{CPU_ROOT}", "img2grey")["metadata"]["version"] == "1.1.2+torch213cpucxx11"  # type: ignore[index]
        assert uv_pick(f"{url}/{CPU_ROOT}", "img2grey") == "img2grey==1.1.2+torch213cpucxx11"


def test_yank_one_label(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    assert cli("yank", "img2grey==1.1.2+torch27cu128cxx11", "--store", store, "-q") == 0
    data = json.loads((store / "simple/img2grey/index.json").read_bytes())
    yanked = {f["filename"]: f["yanked"] for f in data["files"] if f["yanked"] is not False}
    assert yanked == {"img2grey-1.1.2+torch27cu128cxx11-py3-none-linux_x86_64.whl": True}


def test_which_skips_a_yanked_wheel(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    assert cli("yank", "img2grey==1.1.2", "--store", store, "-q") == 0
    python = fake_python(tmp_path / "cpu", version="2.13.0")
    with http_server(store) as url:
        proc = kf("which", "--python", python, "--index-url", url, "--kernel", "img2grey", "--json", env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["version"] == "1.1.0+torch213cpucxx11"


@pytest.mark.parametrize(("args", "line"), [
    (("yank", "nope==1.0"), "no project 'nope' in the store"),
    (("yank", "img2grey>=2"), "'img2grey>=2' matches no wheel of img2grey"),
    (("yank", "img2grey"), "names no version"),
    (("unyank", "img2grey[x]==1.1.2"), "extras, markers and URLs name no wheel"),
    (("yank", "img2grey==1.1.2", "--reason", "two\nlines"), "--reason: at most 4096 characters"),
    (("status", "nope", "archived"), "no project 'nope' in the store"),
    (("status", "img2grey", "retired"), "expected one of active, archived, quarantined, deprecated"),
    (("prune",), "prune needs a rule"),
    (("prune", "--keep-per-major", "0"), "expected a number of versions of at least 1"),
])  # fmt: skip
def test_refusals_one_line_exit_2_nothing_changed(tmp_path: Path, args: tuple[str, ...], line: str) -> None:
    store = make_store(tmp_path)
    before = {p.name: p.read_bytes() for p in (store / "files").iterdir() if not p.name.startswith(".")}
    pages = index_pages(store)
    proc = kf(*args, "--store", store)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and line in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in (store / "files").iterdir() if not p.name.startswith(".")} == before
    assert index_pages(store) == pages


def test_remote_or_missing_store_refused(tmp_path: Path) -> None:
    proc = kf("prune", "--keep-per-major", "1", "--store", tmp_path / "none")
    assert proc.returncode == 2 and "no store at" in proc.stderr


# --- project status -----------------------------------------------------------------------------------------


@contextmanager
def osv_stub() -> Iterator[str]:
    """A vulnerability service on 127.0.0.1 that knows of no vulnerability (uv audit asks one; this test is about
    the index's status markers, which uv reads from the index itself)."""
    code = ("import json, sys\nfrom http.server import BaseHTTPRequestHandler, HTTPServer\n"
            "class H(BaseHTTPRequestHandler):\n"
            "    def do_POST(self):\n"
            "        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))\n"
            "        data = json.dumps({'results': [{} for _ in body.get('queries', [])]}).encode()\n"
            "        self.send_response(200); self.send_header('Content-Type', 'application/json')\n"
            "        self.send_header('Content-Length', str(len(data))); self.end_headers(); self.wfile.write(data)\n"
            "    def do_GET(self):\n"
            "        self.send_response(200); self.end_headers()\n"
            "HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n")  # fmt: skip
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", code, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def factory_serve(root: Path) -> Iterator[str]:
    """``kernel-factory serve``: PEP 691 JSON to clients that ask for it (uv does)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kernel_factory", "serve", "--out", str(root), "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/simple/")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def uv_audit(project: Path, url: str, service: str) -> str:
    args = ("--no-config", "--default-index", f"{url}/{CPU_ROOT}")
    sh(UV, "lock", *args, cwd=project)
    return sh(UV, "audit", *args, "--service-url", service, "--preview-features", "audit-command",
              cwd=project).stdout  # fmt: skip


def test_status_reported_by_uv_audit_from_html_and_json(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    assert cli("status", "img2grey", "deprecated", "--reason", "use img2grey2", "--store", store, "-q") == 0
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0.1"\nrequires-python = ">=3.10"\n'
                                            'dependencies = ["img2grey"]\n')  # fmt: skip
    with osv_stub() as service:
        with http_server(store) as url:  # HTML pages
            assert "- img2grey is deprecated: use img2grey2" in uv_audit(project, url, service)
        assert cli("status", "img2grey", "archived", "--store", store, "-q") == 0
        with factory_serve(store) as url:  # PEP 691 JSON
            assert "- img2grey is archived" in uv_audit(project, url, service)
        assert cli("status", "img2grey", "active", "--store", store, "-q") == 0
        with factory_serve(store) as url:
            assert "adverse" not in uv_audit(project, url, service)


def test_quarantined_not_installable_then_released(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path)
    clean = index_pages(store)
    assert cli("status", "img2grey", "quarantined", "--reason", "malware", "--store", store, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["before"], doc["status"], doc["reason"]) == ({"status": "active"}, "quarantined", "malware")
    with http_server(store) as url:
        assert "No matching distribution found for img2grey" in pip_fails(f"{url}/{CPU_ROOT}", "img2grey")
        assert "No matching distribution" in pip_fails(f"{url}/simple", "img2grey==1.1.2+torch213cpucxx11")
        proc = sh(UV, "pip", "compile", "-", "--no-config", "--index-url", f"{url}/{CPU_ROOT}", stdin="img2grey",
                  check=False)  # fmt: skip
        assert proc.returncode == 1 and "img2grey" in proc.stderr
        assert pip_pick(f"{url}/{CPU_ROOT}", "my-kernel")["metadata"]["version"] == "0.1.0+torch213cpucxx11"  # type: ignore[index]
    landing = (store / "index.html").read_text()
    assert 'class="badge status-quarantined" title="malware">quarantined</span>' in landing
    assert cli("status", "img2grey", "--store", store) == 0
    assert capsys.readouterr().out == "img2grey: quarantined (malware)\n"
    assert cli("status", "img2grey", "active", "--store", store, "-q") == 0
    assert index_pages(store) == clean  # back to the pages of before, byte for byte


def test_damaged_status_file_stops_the_index(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    assert cli("status", "img2grey", "quarantined", "--store", store, "-q") == 0
    pages = index_pages(store)
    (store / "files/project-status.json").write_text('{"schema": 1, "projects": {"img2grey": {"status": "x"}}}')
    proc = kf("index", "--store", store)
    assert proc.returncode == 3 and "status 'x' is not one of" in proc.stderr, proc.stderr
    assert index_pages(store) == pages  # the quarantined pages stay as they were


def test_kill_9_during_a_yank_then_the_next_yank_finishes(tmp_path: Path) -> None:
    """kill -9 of a yank as soon as its first record is rewritten: the pages still link only files that are there,
    and the yank run again leaves the store and pages an uninterrupted yank leaves."""
    original = make_store(tmp_path / "original", tuple(f"1.0.{i}" for i in range(40)))
    reference = tmp_path / "reference"
    shutil.copytree(original, reference)
    assert cli("yank", "img2grey<2", "--reason", "withdrawn", "--store", reference, "-q") == 0
    store = tmp_path / "killed"
    shutil.copytree(original, store)
    first = store / "files" / "img2grey-1.0.0+torch213cpucxx11-py3-none-linux_x86_64.whl.json"
    inode = first.stat().st_ino
    proc = subprocess.Popen([sys.executable, "-m", "kernel_factory", "yank", "img2grey<2", "--reason", "withdrawn",
                             "--store", str(store), "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None and first.stat().st_ino == inode:
        pass
    proc.kill()
    proc.wait(30)
    assert proc.returncode == -9, f"the yank ended ({proc.returncode}) before the kill"
    assert_links_resolve(store)
    assert cli("yank", "img2grey<2", "--reason", "withdrawn", "--store", store, "-q") == 0
    assert snapshot(store) == snapshot(reference)


def test_yank_status_prune_on_an_s3_store(tmp_path: Path, s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """An s3:// store (CI shards build into one): the records, the status file and the prune's deletions are made
    in the bucket, and the index run renders them into --out; a prune's wheels are deleted by the next prune (the
    bucket is often the published site, whose pages are published after the prune)."""
    s3.create_bucket(Bucket="kstore")
    url = "s3://kstore/store"
    bucket = S3Store(url)
    target = parse(CPU)
    for version in ("1.1.0", "1.1.2"):
        wheel, meta = make_wheel(tmp_path / "w", "img2grey", target.local_version(version),
                                 f"py3-none-{target.platform}")  # fmt: skip
        bucket.put(wheel, meta, kernel_record(wheel, meta, "img2grey", version, CPU))
    out = tmp_path / "site"
    assert cli("yank", "img2grey==1.1.2", "--reason", "bad build", "--store", url, "--out", out, "-q") == 0
    assert cli("status", "img2grey", "deprecated", "--reason", "use img2grey2", "--store", url, "--out", out,
               "-q") == 0  # fmt: skip
    data = json.loads((out / "simple/img2grey/index.json").read_bytes())
    assert data["project-status"] == {"status": "deprecated", "reason": "use img2grey2"}
    assert {f["filename"]: f["yanked"] for f in data["files"]} == {
        "img2grey-1.1.0+torch213cpucxx11-py3-none-linux_x86_64.whl": False,
        "img2grey-1.1.2+torch213cpucxx11-py3-none-linux_x86_64.whl": "bad build"}
    key = "store/files/img2grey-1.1.2+torch213cpucxx11-py3-none-linux_x86_64.whl.json"
    assert json.loads(s3.get_object(Bucket="kstore", Key=key)["Body"].read())["yanked"] == "bad build"
    status = json.loads(s3.get_object(Bucket="kstore", Key="store/files/project-status.json")["Body"].read())
    assert status == {"projects": {"img2grey": {"reason": "use img2grey2", "status": "deprecated"}}, "schema": 1}
    old = "img2grey-1.1.0+torch213cpucxx11-py3-none-linux_x86_64.whl"
    capsys.readouterr()
    assert cli("prune", "--keep-per-major", "1", "--store", url, "--out", out, "--json", "-q") == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["removed"], doc["pending"]) == ([], [old])
    data = json.loads((out / "simple/img2grey/index.json").read_bytes())
    assert [f["filename"] for f in data["files"]] == ["img2grey-1.1.2+torch213cpucxx11-py3-none-linux_x86_64.whl"]

    def keys() -> set[str]:
        return {o["Key"] for o in s3.list_objects_v2(Bucket="kstore", Prefix="store/files/")["Contents"]}

    assert f"store/files/{old}" in keys()  # the published pages may still link it: deleted by the next prune
    assert cli("prune", "--keep-per-major", "1", "--store", url, "--out", out, "--json", "-q") == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["removed"], doc["pending"]) == ([old], [])
    assert not any("1.1.0" in k or ".prune-pending" in k for k in keys()) and key in keys()
