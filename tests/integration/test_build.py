"""`kernel-factory plan` / `build` from a factory.toml: incremental, sharded, into one store."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from pathlib import Path

import pytest
from support import kf

CONFIG = """
[factory]
store = "store"
jobs = 2

[[kernel]]
repo = "{repos}/img2grey"
repo-id = "kernels-community/img2grey"
tags = ">=1.1.0,<2"
versions = [1]

[[kernel]]
repo = "{repos}/relu-nested"
repo-id = "kernels-community/relu-nested"
versions = [1]

[[kernel]]
repo = "{repos}/pyonly"
tags = ">=0.2"
"""


def write_config(tmp_path: Path, repos: Path) -> Path:
    cfg = tmp_path / "factory.toml"
    cfg.write_text(CONFIG.format(repos=repos))
    return cfg


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_plan_json_then_build_then_noop_rerun(example_repos: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, example_repos)
    proc = kf("plan", "--config", cfg, "--json")
    assert proc.returncode == 0, proc.stderr
    planned = json.loads(proc.stdout)
    assert len(planned["build"]) == 8 and planned["in_store"] == [] and planned["refused"] == []
    # v1 and v1.1.2 are the same commit: one version per revision, the tag's
    assert sorted({j["version"] for j in planned["build"]}) == ["0.2.0", "1.0.2", "1.1.0", "1.1.2"]

    proc = kf("build", "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    files = tmp_path / "store" / "files"
    wheels = sorted(p.name for p in files.glob("*.whl"))
    assert len(wheels) == 8
    for w in wheels:  # every wheel has its .metadata and its record
        assert (files / f"{w}.metadata").is_file() and (files / f"{w}.json").is_file()
        record = json.loads((files / f"{w}.json").read_text())
        assert record["filename"] == w
    assert not [p for p in files.iterdir() if p.name.startswith(".tmp")]

    before = snapshot(tmp_path / "store")
    proc = kf("build", "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    assert "plan: 0 to build, 8 already in the store" in proc.stderr
    assert snapshot(tmp_path / "store") == before  # nothing rewritten


def test_two_shards_build_the_same_store_as_one_run(example_repos: Path, tmp_path: Path) -> None:
    one = tmp_path / "one"
    two = tmp_path / "two"
    for d in (one, two):
        d.mkdir()
        write_config(d, example_repos)
    assert kf("build", "--config", one / "factory.toml").returncode == 0
    counts = []
    for k in (1, 2):
        proc = kf("build", "--config", two / "factory.toml", "--shard", f"{k}/2", "--jobs", "1")
        assert proc.returncode == 0, proc.stderr
        counts.append(len([line for line in proc.stderr.splitlines() if "] built " in line]))
    assert sum(counts) == 8 and all(counts), counts  # disjoint, complete, both shards did work

    for d in (one, two):
        assert kf("index", "--config", d / "factory.toml").returncode == 0

    def listing(root: Path) -> dict[str, bytes]:
        store = root / "store"
        return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(store).parts)}

    one_files, two_files = listing(one), listing(two)
    assert any(name.startswith("simple/") for name in one_files)
    assert one_files == two_files  # the same wheels, records and index pages, byte for byte


def test_bad_shard_and_bad_config(example_repos: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, example_repos)
    proc = kf("build", "--config", cfg, "--shard", "3/2")
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and len(proc.stderr.splitlines()) == 1
    cfg.write_text(cfg.read_text().replace("jobs = 2", "jobz = 2"))
    proc = kf("build", "--config", cfg)
    assert proc.returncode == 2 and "did you mean 'jobs'?" in proc.stderr
    assert not (tmp_path / "store").exists()


def test_unknown_repository_org_refused_before_any_work(example_repos: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, example_repos)
    cfg.write_text(cfg.read_text() + '\n[[kernel]]\nrepo = "evil-org/kernel"\nversions = [1]\n')
    proc = kf("build", "--config", cfg, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 2
    assert "organisation 'evil-org' is not allowed" in proc.stderr
    assert not (tmp_path / "store").exists()  # refused before the store was touched


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


_AT_FORK: list[set[str]] = []  # the threads running at each fork of this process, while a test watches
_WATCHING = [False]
os.register_at_fork(before=lambda: _AT_FORK.append({t.name for t in threading.enumerate()})
                    if _WATCHING[0] else None)


def test_no_thread_of_the_build_runs_when_its_worker_pool_forks(
    example_repos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal the progress bar's threads (its poller, tqdm's monitor) start after the pool has forked
    (docs/architecture.md): a fork that lands while one holds a lock would hang a worker."""
    from kernel_factory.cli import main

    cfg = write_config(tmp_path, example_repos)
    monkeypatch.chdir(tmp_path)
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)  # the bar is drawn on a terminal only
    before = {t.name for t in threading.enumerate()}
    _AT_FORK.clear()
    _WATCHING[0] = True
    try:
        code = main(["build", "--config", str(cfg), "--jobs", "2"])
    finally:
        _WATCHING[0] = False
    assert code == 0
    assert "building: 100%" in tty.getvalue()
    assert len(_AT_FORK) == 4  # one pool of 2 converters and 2 fetchers, forked at once
    assert all(threads == before for threads in _AT_FORK), _AT_FORK
