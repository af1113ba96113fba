"""Symbolic links and look-alikes in a store, an index root and a ``--wheels`` folder (issue 26 items 3, 4 and 5),
each through the installed CLI in a subprocess: the exact exit code and line, the victim unchanged, nothing written
outside."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import hostile as h
import pytest
from index_synth import add_kernel, make_wheel
from servers import moto_server, s3_env
from support import clean_env, free_port, kf, wait_http

pytestmark = pytest.mark.integration

CPU = "torch213-cxx11-cpu-x86_64-linux"
WHEEL = "img2grey-1.1.2+torch213cpucxx11-py3-none-linux_x86_64.whl"
SECRET = b"aws_secret_access_key = hunter2\n"


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    add_kernel(store, "img2grey", "1.1.2", CPU)
    return store


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(SECRET)
    return victim


def _errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error: ")]


def _outside(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], *inside: str) -> list[str]:
    """Paths that appeared, went or changed (size or time; folders' times aside) outside ``inside``."""
    changed = set(before) ^ set(after) | {p for p in before if p in after and before[p] != after[p]
                                          and after[p][0] != h.FOLDER}
    return sorted(p for p in changed if not p.startswith(inside))


# -- item 4: links where the tool writes ----------------------------------------------------------------------
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    store, victim = _store(tmp_path), _victim(tmp_path)
    (store / ".kernel-factory.lock").symlink_to("../victim.txt")
    proc = kf("index", "--store", store, cwd=tmp_path)
    assert proc.returncode == 4, proc.stderr  # the store is unusable as it is: LinkRefused, exit 4
    assert _errors(proc) == [f"error: {store}/.kernel-factory.lock -> ../victim.txt: a symbolic link where "
                             "kernel-factory expects a lock file, and it never writes or reads through a link; remove "
                             "the link (rm, not rm -r) and run again"]
    assert victim.read_bytes() == SECRET
    assert not (store / "simple").exists()


def test_links_planted_at_temporary_names_are_never_written_through(tmp_path: Path) -> None:
    """The old temporary names were ``.tmp-<pid>-index.html`` (and the lock file names the PID): links planted at
    those names, by a process that knows its own PID, as an attacker reading the lock file would."""
    store, victim = _store(tmp_path), _victim(tmp_path)
    script = ("import os, runpy, sys\n"
              "out, victim = sys.argv[1], sys.argv[2]\n"
              "for rel in ('', 'simple', 'simple/img2grey', 'projects/img2grey'):\n"
              "    os.makedirs(os.path.join(out, rel), exist_ok=True)\n"
              "    os.symlink(victim, os.path.join(out, rel, f'.tmp-{os.getpid()}-index.html'))\n"
              "sys.argv = ['kernel-factory', 'index', '--store', out]\n"
              "runpy.run_module('kernel_factory', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", script, str(store), str(victim)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_bytes() == SECRET
    assert not (store / "index.html").is_symlink() and b"img2grey" in (store / "index.html").read_bytes()
    assert not (store / "simple" / "img2grey" / "index.html").is_symlink()


def test_an_index_folder_that_is_a_link_is_refused_and_nothing_written_or_removed_there(tmp_path: Path) -> None:
    store = _store(tmp_path)
    victims = tmp_path / "victimdir"
    (victims / "img2grey").mkdir(parents=True)
    (victims / "img2grey" / "index.html").write_bytes(SECRET)  # not the tool's: the sweep must leave it
    (victims / "other").mkdir()
    (victims / "other" / "index.html").write_bytes(SECRET)
    assert kf("index", "--store", store, cwd=tmp_path).returncode == 0
    for folder in (store / "projects").iterdir():  # the pages for people, replaced by a link
        for page in folder.iterdir():
            page.unlink()
        folder.rmdir()
    (store / "projects").rmdir()
    (store / "projects").symlink_to(victims)
    add_kernel(store, "img2grey", "1.1.3", CPU)
    before = h.snapshot(tmp_path)
    proc = kf("index", "--store", store, cwd=tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert _errors(proc) == [f"error: {store}/projects -> {victims}: a symbolic link where kernel-factory expects a "
                             "folder, and it never writes or reads through a link; remove the link (rm, not rm -r) "
                             "and run again"]
    assert sorted(p.relative_to(victims).as_posix() for p in victims.rglob("*")) == [
        "img2grey", "img2grey/index.html", "other", "other/index.html"]
    assert all(p.read_bytes() == SECRET for p in victims.rglob("index.html"))
    assert _outside(before, h.snapshot(tmp_path), "store") == []


def test_a_catalog_that_is_a_link_is_refused_and_the_database_kept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    victim = tmp_path / "victim.db"
    with sqlite3.connect(victim) as db:
        db.execute("CREATE TABLE accounts (name TEXT)")
        db.execute("INSERT INTO accounts VALUES ('alice')")
    db.close()
    data = victim.read_bytes()
    (store / "files" / ".catalog.sqlite").symlink_to(victim)
    proc = kf("index", "--store", store, cwd=tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert _errors(proc) == [f"error: {store}/files/.catalog.sqlite -> {victim}: a symbolic link where "
                             "kernel-factory expects a catalog, and it never writes or reads through a link; remove "
                             "the link (rm, not rm -r) and run again"]
    assert victim.read_bytes() == data


def test_publish_never_follows_a_link_out_of_the_store(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert kf("index", "--store", store, cwd=tmp_path).returncode == 0
    (tmp_path / "creds").write_bytes(SECRET)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.txt").write_bytes(SECRET)
    (store / "notes.txt").symlink_to("../creds")
    (store / "simple" / "leak").symlink_to("../../secrets")
    dest = tmp_path / "dest"
    proc = kf("publish", "--store", store, "--to", dest, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    hint = "publish never follows links out of the store: replace it with the file itself, or remove it"
    assert f"refused notes.txt: a symbolic link (-> ../creds); {hint}" in proc.stdout.splitlines()
    assert f"refused simple/leak: a symbolic link (-> ../../secrets); {hint}" in proc.stdout.splitlines()
    assert _errors(proc) == ["error: 2 files refused: notes.txt, simple/leak"]
    published = [p for p in dest.rglob("*") if p.is_file()]
    assert (dest / "files" / WHEEL).is_file() and (dest / "index.html").is_file()
    assert not (dest / "notes.txt").exists() and not (dest / "simple" / "leak").exists()
    assert all(SECRET not in p.read_bytes() for p in published)
    assert not any(p.name.startswith(".") for p in dest.rglob("*"))  # the lock, catalog and state stay private


def test_publish_to_s3_never_uploads_through_a_link(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert kf("index", "--store", store, cwd=tmp_path).returncode == 0
    (tmp_path / "creds").write_bytes(SECRET)
    (store / "notes.txt").symlink_to("../creds")
    with moto_server(tmp_path) as url:
        env = {**clean_env(), **s3_env(url)}
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
        s3.create_bucket(Bucket="site")
        proc = kf("publish", "--store", store, "--to", "s3://site/pub", cwd=tmp_path, env=env)
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="site").get("Contents", []))
        bodies = [s3.get_object(Bucket="site", Key=k)["Body"].read() for k in keys]
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert ("refused notes.txt: a symbolic link (-> ../creds); publish never follows links out of the store: replace "
            "it with the file itself, or remove it") in proc.stdout.splitlines()
    assert f"pub/files/{WHEEL}" in keys and "pub/index.html" in keys and "pub/notes.txt" not in keys
    assert not any("/." in k for k in keys) and all(SECRET not in b for b in bodies)


def test_publish_refuses_a_wheel_whose_bytes_are_not_its_records(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert kf("index", "--store", store, cwd=tmp_path).returncode == 0
    wheel = store / "files" / WHEEL
    recorded = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with open(wheel, "ab") as f:  # changed in place after its record was written
        f.write(b"\0")
    now = hashlib.sha256(wheel.read_bytes()).hexdigest()
    dest = tmp_path / "dest"
    proc = kf("publish", "--store", store, "--to", dest, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert (f"refused files/{WHEEL}: its sha256 {now} is not its record's {recorded}; rebuild it, or run "
            "`kernel-factory index --repair`") in proc.stdout.splitlines()
    assert _errors(proc) == [f"error: 1 files refused: files/{WHEEL}"]
    assert not (dest / "files" / WHEEL).exists() and (dest / "files" / f"{WHEEL}.metadata").is_file()


@contextmanager
def _serve(root: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kernel_factory", "serve", "--out", str(root), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env())
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serve_answers_404_for_private_files_and_links(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert kf("index", "--store", store, cwd=tmp_path).returncode == 0
    (tmp_path / "creds").write_bytes(SECRET)
    (store / "notes.txt").symlink_to("../creds")
    (store / "simple" / "leak").symlink_to(tmp_path)
    (store / "simple" / "img2grey" / "index.json").unlink()
    (store / "simple" / "img2grey" / "index.json").symlink_to(tmp_path / "creds")
    (store / ".kernel-factory.lock").write_text("123\n")
    with _serve(store) as url:
        assert _status(f"{url}/simple/") == 200
        assert _status(f"{url}/files/{WHEEL.replace('+', '%2B')}") == 200
        for path in ("files/.catalog.sqlite", ".index-state.json", ".kernel-factory.lock", "notes.txt",
                     "simple/leak/creds", "simple/img2grey/index.json", "files/"):
            assert _status(f"{url}/{path}") == 404, path
        request = urllib.request.Request(f"{url}/simple/img2grey/",
                                         headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=10) as answer:  # the link is never served, the page is
            assert SECRET not in answer.read()


# -- item 3: a link in a --wheels folder ----------------------------------------------------------------------
def test_a_linked_wheel_in_a_wheels_folder_is_refused_and_nothing_linked_into_the_store(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    (drop / "a" / "b").mkdir(parents=True)
    (drop / "secret").mkdir()
    wheel, _ = make_wheel(tmp_path / "made", "evil", "1.0")
    wheel.rename(drop / "secret" / "creds")  # a valid wheel, where the link's target will resolve from files/ too
    make_wheel(drop / "a" / "b", "fine", "1.0")
    link = drop / "a" / "b" / "evil-1.0-py3-none-any.whl"
    link.symlink_to("../../secret/creds")
    store = tmp_path / "store"
    proc = kf("index", "--store", store, "--wheels", drop / "a" / "b", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert (f"warning: skipped evil-1.0-py3-none-any.whl: {link} -> ../../secret/creds; adoption takes regular "
            "files only (a link could point anywhere once in the store): copy the wheel itself there") in proc.stderr
    assert sorted(p.name for p in (store / "files").iterdir() if not p.name.startswith(".")) == [
        "fine-1.0-py3-none-any.whl", "fine-1.0-py3-none-any.whl.json", "fine-1.0-py3-none-any.whl.metadata"]
    assert not any(p.is_symlink() for p in store.rglob("*"))


# -- item 5: a look-alike adopted before the kernel's first build -----------------------------------------------
def test_a_lookalike_adopted_first_is_left_out_at_every_index(tmp_path: Path) -> None:
    store, wheels = tmp_path / "store", tmp_path / "ad"
    make_wheel(wheels, "img2grey", "99.0")
    assert kf("index", "--store", store, "--wheels", wheels, cwd=tmp_path).returncode == 0  # no kernel yet
    add_kernel(store, "img2grey", "1.1.2", CPU)  # then the kernel's first build
    line = ("error: img2grey-99.0-py3-none-any.whl: an adopted wheel of 'img2grey', a project this store builds from "
            "a kernel, left out of the index (it would sit beside the kernel in every install); remove it from the "
            "store, or pass --allow-kernel-names (allow-kernel-names = true) if you mean to list it")
    for _ in range(2):  # every run says so, not only the one that saw the change
        proc = kf("index", "--store", store, cwd=tmp_path)
        assert proc.returncode == 3, proc.stderr
        assert _errors(proc) == [line]
        for page in [store / "simple" / "img2grey" / "index.html",
                     store / "variants" / "torch213cpucxx11" / "simple" / "img2grey" / "index.html"]:
            text = page.read_text()
            assert "1.1.2" in text and "99.0" not in text, page
    proc = kf("index", "--store", store, "--allow-kernel-names", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "99.0" in (store / "simple" / "img2grey" / "index.html").read_text()
