"""PEP 792 project status through the installed CLI on the bundled img2grey repository: an archived project
takes no new builds (`plan` and `build` leave them out, say why, exit 0; the store is unchanged); set active
again, the next build builds them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support import kf

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
OLD = "img2grey-1.1.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
NEW = "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
WARNING = ("warning: img2grey: project status archived (no longer maintained): 1 new build(s) left out of the plan "
           "(PEP 792: an archived or quarantined project takes no new files); `kernel-factory status img2grey "
           "active` builds it again")


def config(tmp_path: Path, repo: Path, request: str) -> Path:
    cfg = tmp_path / "factory.toml"
    cfg.write_text(f'[factory]\nstore = "store"\njobs = 1\n\n[[kernel]]\nrepo = "{repo}"\n'
                   f'repo-id = "kernels-community/img2grey"\n{request}\nvariants = ["{VARIANT}"]\n')
    return cfg


def wheels(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "files").glob("*.whl"))


def test_archived_project_builds_nothing_new_until_active(example_repos: Path, tmp_path: Path) -> None:
    repo, store = example_repos / "img2grey", tmp_path / "store"
    assert kf("build", "--config", config(tmp_path, repo, 'tags = "==1.1.0"')).returncode == 0
    assert wheels(store) == [OLD]
    proc = kf("status", "img2grey", "archived", "--reason", "no longer maintained", "--store", store, "-q")
    assert proc.returncode == 0, proc.stderr

    cfg = config(tmp_path, repo, 'tags = ">=1.1.0"')  # 1.1.0 (held) and 1.1.2 (new)
    proc = kf("plan", "--config", cfg, "--json")
    assert proc.returncode == 0, proc.stderr
    assert WARNING in proc.stderr.splitlines()
    doc = json.loads(proc.stdout)
    assert (doc["build"], [j["version"] for j in doc["in_store"]], doc["refused"]) == ([], ["1.1.0"], [])
    assert doc["withheld"] == [
        {"project": "img2grey", "status": "archived", "reason": "no longer maintained", "jobs": 1}
    ]

    proc = kf("build", "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert WARNING in lines and lines.count(WARNING) == 1
    assert "plan: 0 to build, 1 already in the store, 0 refused, 1 left out by project status" in lines
    assert wheels(store) == [OLD]

    assert kf("status", "img2grey", "active", "--store", store, "-q").returncode == 0
    proc = kf("build", "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    assert "plan: 1 to build, 1 already in the store, 0 refused" in proc.stderr.splitlines()
    assert "left out" not in proc.stderr
    assert wheels(store) == [OLD, NEW]


def test_quarantined_on_an_s3_store_builds_nothing_new(example_repos: Path, tmp_path: Path, s3: Any) -> None:
    """CI shards build into an s3:// store: the status kept in the bucket holds their new builds back too."""
    s3.create_bucket(Bucket="kstore")
    url, repo = "s3://kstore/store", example_repos / "img2grey"
    cfg = config(tmp_path, repo, 'tags = "==1.1.0"')
    assert kf("build", "--config", cfg, "--store", url, "-q").returncode == 0
    proc = kf("status", "img2grey", "quarantined", "--store", url, "--out", tmp_path / "site", "-q")
    assert proc.returncode == 0, proc.stderr

    proc = kf("build", "--config", config(tmp_path, repo, 'tags = ">=1.1.0"'), "--store", url)
    assert proc.returncode == 0, proc.stderr
    assert WARNING.replace("archived (no longer maintained)", "quarantined") in proc.stderr.splitlines()
    listed = s3.list_objects_v2(Bucket="kstore", Prefix="store/files/")["Contents"]
    assert sorted(o["Key"] for o in listed if o["Key"].endswith(".whl")) == [f"store/files/{OLD}"]
