"""Withdraw a build, mark a project's status, prune old versions: what real pip and uv do from the served index.

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
from index_synth import add_kernel, index_pages
from kernel_factory.cli import main
from kernel_factory.index.command import index_store
from kernel_factory.index.pages import DEFAULT_BASE_URL
from kernel_factory.publish.run import list_root
from servers import page_links
from support import clean_env, free_port, http_server, kf, wait_http
from test_publish_s3 import bucket_keys
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
    index_store(str(store), store, None, DEFAULT_BASE_URL)
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


def pip_fails(url: str, requirement: str) -> str:
    proc = sh(sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--index-url",
              url, requirement, check=False)  # fmt: skip
    assert proc.returncode != 0, proc.stdout
    return proc.stderr


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


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
    proc = kf("yank", "img2grey==1.1.2", "--store", "s3://bucket/prefix")
    assert proc.returncode == 2 and "changes a local store folder, not s3://bucket/prefix" in proc.stderr
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


# --- prune --------------------------------------------------------------------------------------------------

SERIES = ("1.0.1", "1.0.2", "1.0.3", "1.0.4", "2.0.0", "2.0.1", "2.0.2")


def set_revisions(store: Path) -> None:
    """Give each version its own commit (the synthetic records share one), as a Hub branch would."""
    from kernel_factory.atomic import write_bytes

    for path in sorted((store / "files").glob("*.whl.json")):
        data = json.loads(path.read_bytes())
        data["revision"] = data["kernel_version"].replace(".", "").ljust(40, "a")
        write_bytes(path, (json.dumps(data) + "\n").encode())
    index_store(str(store), store, None, DEFAULT_BASE_URL)


def wheels(store: Path) -> set[str]:
    return {p.name for p in (store / "files").glob("*.whl")}


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


def test_prune_dry_run_then_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    files = {p.name: p.read_bytes() for p in (store / "files").iterdir()}
    assert cli("prune", "--keep-per-major", "2", "--store", store, "--dry-run", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    going = [f"img2grey-{v}+{label}-py3-none-linux_x86_64.whl" for v in ("1.0.1", "1.0.2", "2.0.0")
             for label in ("torch213cpucxx11", "torch27cu128cxx11")]  # fmt: skip
    assert sorted(doc["removed"]) == sorted(going)
    expected_bytes = sum(len(files[n]) + len(files[f"{n}.metadata"]) + len(files[f"{n}.json"]) for n in going)
    assert doc["bytes"] == expected_bytes and doc["dry_run"] is True
    assert doc["kept"]["img2grey 2.0.2"] == ["newest", "keep-per-major 2"]
    assert {p.name: p.read_bytes() for p in (store / "files").iterdir()} == files  # a dry run changes nothing
    assert cli("prune", "--keep-per-major", "2", "--store", store) == 0
    out = capsys.readouterr().out
    assert f"prune: removed 6 wheel(s) of 3 version(s), freed {expected_bytes / 1e6:.1f} MB ({expected_bytes} bytes)" \
        in out
    assert wheels(store) == set(n for n in files if n.endswith(".whl")) - set(going)
    assert not any((store / "files" / f"{n}{ext}").exists() for n in going for ext in ("", ".metadata", ".json"))
    assert_links_resolve(store)
    with http_server(store) as url:
        assert "No matching distribution" in pip_fails(f"{url}/simple", "img2grey==1.0.2+torch213cpucxx11")
        assert uv_pick(f"{url}/{CPU_ROOT}", "img2grey<2") == "img2grey==1.0.4+torch213cpucxx11"


def test_prune_rules_from_the_config_and_a_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    set_revisions(store)
    lock = tmp_path / "kernels.lock"
    lock.write_text(json.dumps([{"dependency": {"repo-id": "kernels-community/img2grey", "version": 1},
                                 "lock": {"commit": "101".ljust(40, "a")}}]))  # fmt: skip
    config = tmp_path / "factory.toml"
    config.write_text(f'[factory]\nstore = "{store}"\n\n[prune]\nkeep-per-major = 1\nkeep-locked = "kernels.lock"\n')
    assert cli("prune", "--config", config, "--json", "-q") == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted({name.split("-")[1].split("+")[0] for name in doc["removed"]}) == ["1.0.2", "1.0.3", "2.0.0",
                                                                                     "2.0.1"]  # fmt: skip
    assert doc["kept"] == {"img2grey 1.0.1": ["locked"], "img2grey 1.0.4": ["keep-per-major 1"],
                           "img2grey 2.0.2": ["newest", "keep-per-major 1"],
                           "my-kernel 0.1.0": ["newest", "keep-per-major 1"]}  # fmt: skip
    config.write_text(f'[factory]\nstore = "{store}"\n\n[prune]\nkeep-per-majr = 1\n')
    proc = kf("prune", "--config", config)
    assert proc.returncode == 2 and "unknown key 'keep-per-majr'; did you mean 'keep-per-major'?" in proc.stderr


def test_prune_named_versions_refuses_locked_and_newest(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    set_revisions(store)
    lock = tmp_path / "kernels.lock"
    lock.write_text(json.dumps([{"repo_id": "kernels-community/img2grey", "sha": "102".ljust(40, "a"),
                                 "variants": {}}]))  # the older lock format  # fmt: skip
    before = snapshot(store)
    proc = kf("prune", "img2grey<1.0.4", "--keep-locked", lock, "--store", store)
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1, proc.stderr
    assert "img2grey 1.0.2 is pinned by a kernels.lock given with --keep-locked" in proc.stderr
    proc = kf("prune", "img2grey>=2.0.1", "--store", store)
    assert proc.returncode == 3 and "img2grey 2.0.2 is the project's newest version" in proc.stderr
    assert snapshot(store) == before
    assert cli("prune", "img2grey==1.0.3+torch27cu128cxx11", "--keep-locked", lock, "--store", store, "--json",
               "-q") == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["removed"] == [
        "img2grey-1.0.3+torch27cu128cxx11-py3-none-linux_x86_64.whl"]
    assert_links_resolve(store)


def snapshot(store: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The store's files (its own hidden ones left out) and its pages."""
    files = {p.name: p.read_bytes() for p in (store / "files").iterdir() if not p.name.startswith(".")}
    return files, index_pages(store)


def start_prune(store: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kernel_factory", "prune", "--keep-per-major", "1", "--store",
                             str(store), "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.parametrize("when", ["journal", "deleting", "second-index"])
def test_kill_9_at_each_step_leaves_a_store_the_next_prune_finishes(tmp_path: Path, when: str) -> None:
    """kill -9 of the prune's main process when the journal appears, when the first record is deleted, and when
    every file is gone (the last index run): every page links only files that are there, and the next prune
    leaves the store and pages an uninterrupted prune leaves."""
    versions = tuple(f"1.0.{i}" for i in range(40))
    original = make_store(tmp_path / "original", versions)
    reference = tmp_path / "reference"
    shutil.copytree(original, reference)
    assert cli("prune", "--keep-per-major", "1", "--store", reference, "-q") == 0
    store = tmp_path / "killed"
    shutil.copytree(original, store)
    first = store / "files" / "img2grey-1.0.0+torch213cpucxx11-py3-none-linux_x86_64.whl.json"
    last = store / "files" / "img2grey-1.0.9+torch27cu128cxx11-py3-none-linux_x86_64.whl"
    journal = store / "files" / ".prune-pending.json"
    def seen() -> bool:
        if when == "journal":
            return journal.exists()
        return not (first if when == "deleting" else last).exists()

    proc = start_prune(store)
    while proc.poll() is None and not seen():
        pass
    proc.kill()  # the main process alone, as kill -9 PID does
    proc.wait(30)
    assert proc.returncode == -9, f"the prune ended ({proc.returncode}) before the kill: make the store larger"
    assert_links_resolve(store)
    assert cli("prune", "--keep-per-major", "1", "--store", store, "-q") == 0
    assert snapshot(store) == snapshot(reference)
    assert not journal.exists()


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


# --- publish ------------------------------------------------------------------------------------------------


def test_publish_carries_prune_and_yank_to_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    dest = tmp_path / "site"
    assert cli("publish", "--store", store, "--to", dest, "-q") == 0
    (dest / "files" / "someone-else-1.0-py3-none-any.whl").write_bytes(b"theirs")  # not kernel-factory's
    changed = dest / "files" / "img2grey-1.0.1+torch27cu128cxx11-py3-none-linux_x86_64.whl.metadata"
    changed.write_bytes(b"edited at the destination")  # no longer the file kernel-factory put there
    assert cli("prune", "--keep-per-major", "2", "--store", store, "-q") == 0
    assert cli("yank", "img2grey==2.0.2", "--store", store, "-q") == 0
    capsys.readouterr()
    assert cli("publish", "--store", store, "--to", dest, "--dry-run", "--json") == 0
    dry = json.loads(capsys.readouterr().out)
    assert len(dry["removed"]) == 18 and (dest / "files/img2grey-1.0.1+torch27cu128cxx11-py3-none-linux_x86_64.whl"
                                          ).exists()  # fmt: skip
    assert cli("publish", "--store", store, "--to", dest, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(doc["removed"]) == sorted(r for r in dry["removed"] if not r.endswith(changed.name))
    left = {p.name for p in (dest / "files").iterdir()}
    assert left == {p.name for p in (store / "files").iterdir() if not p.name.startswith(".")} | {
        "someone-else-1.0-py3-none-any.whl", changed.name}
    assert_links_resolve(dest)
    assert cli("publish", "--store", store, "--to", dest, "--json") == 0  # nothing more to do
    assert json.loads(capsys.readouterr().out)["removed"] == []
    with http_server(dest) as url:
        assert uv_pick(f"{url}/{CPU_ROOT}", "img2grey") == "img2grey==2.0.1+torch213cpucxx11"


def test_publish_carries_prune_to_s3_only_its_own_objects(tmp_path: Path, s3: Any,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, SERIES)
    s3.create_bucket(Bucket="withdraw")
    to = "s3://withdraw/site"
    assert cli("publish", "--store", store, "--to", to, "-q") == 0
    s3.put_object(Bucket="withdraw", Key="site/files/someone-else-1.0-py3-none-any.whl", Body=b"theirs")
    old = "site/files/img2grey-1.0.1+torch27cu128cxx11-py3-none-linux_x86_64.whl.metadata"
    s3.put_object(Bucket="withdraw", Key=old, Body=b"x" * 104)  # same size, not put by kernel-factory (no sha256)
    assert cli("prune", "--keep-per-major", "2", "--store", store, "-q") == 0
    capsys.readouterr()
    assert cli("publish", "--store", store, "--to", to, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["removed"]) == 17 and old.removeprefix("site/") not in doc["removed"]
    keys = bucket_keys(s3, "withdraw", "site")
    local = {f.rel for f in list_root(store)}
    assert keys == local | {"files/someone-else-1.0-py3-none-any.whl", old.removeprefix("site/")}
    assert_bucket_links_resolve(s3, "withdraw", "site")


def test_kill_9_during_publish_deletions_then_the_next_publish_finishes(tmp_path: Path) -> None:
    store = make_store(tmp_path, tuple(f"1.0.{i}" for i in range(40)))
    dest, reference = tmp_path / "site", tmp_path / "reference"
    for to in (dest, reference):
        assert cli("publish", "--store", store, "--to", to, "-q") == 0
    assert cli("prune", "--keep-per-major", "1", "--store", store, "-q") == 0
    assert cli("publish", "--store", store, "--to", reference, "-q") == 0
    last = dest / "files" / "img2grey-1.0.0+torch213cpucxx11-py3-none-linux_x86_64.whl"  # among the last to go
    first = dest / "files" / "img2grey-1.0.0+torch213cpucxx11-py3-none-linux_x86_64.whl.json"
    proc = subprocess.Popen([sys.executable, "-m", "kernel_factory", "publish", "--store", str(store), "--to",
                             str(dest), "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    while proc.poll() is None and first.exists():
        pass
    proc.kill()
    proc.wait(30)
    assert proc.returncode == -9, f"the publish ended ({proc.returncode}) before the kill"
    assert last.exists()  # wheels go last: this one was still there when the kill came
    assert_links_resolve(dest)
    assert cli("publish", "--store", store, "--to", dest, "-q") == 0
    assert index_pages(dest) == index_pages(reference)
    assert sorted(p.name for p in (dest / "files").iterdir()) == sorted(p.name for p in (reference / "files").iterdir())


def assert_bucket_links_resolve(s3: Any, bucket: str, prefix: str) -> None:
    """Every link of every page in the bucket to files/ names an object there."""
    keys = bucket_keys(s3, bucket, prefix)
    for key in (k for k in keys if k.endswith(".html")):
        text = s3.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read().decode()
        missing = [link for link in page_links(key, text) if link.startswith("files/") and link not in keys]
        assert not missing, f"{key} links missing objects {missing}"
