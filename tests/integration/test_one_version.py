"""One revision, one version, end to end on the bundled img2grey repository, whose v1 head carries tag v1.1.2:
`versions = [1]` stamps 1.1.2, `tags = "==1.1.2"` then finds it in the store, and the README's
`pip install img2grey==1.1.2` installs it. A store that holds the branch's old 1.0.K wheel is named and mended."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support import clean_env, http_server, kf, run

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
RIGHT = "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
WRONG = "img2grey-1.0.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"


def config(tmp_path: Path, repo: Path, request: str) -> Path:
    cfg = tmp_path / "factory.toml"
    cfg.write_text(f'[factory]\nstore = "store"\njobs = 1\n\n[[kernel]]\nrepo = "{repo}"\n'
                   f'repo-id = "kernels-community/img2grey"\n{request}\nvariants = ["{VARIANT}"]\n')
    return cfg


def wheels(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.whl"))


def pip_installs(root: Path, tmp_path: Path) -> str:
    with http_server(root) as url:
        proc = run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--target",
                   tmp_path / "site", "img2grey==1.1.2", "--index-url", f"{url}/simple", env=clean_env())
    return proc.stdout


def test_branch_head_gets_its_tags_version_and_the_readme_command_installs(example_repos: Path,
                                                                           tmp_path: Path) -> None:
    cfg = config(tmp_path, example_repos / "img2grey", "versions = [1]")
    proc = kf("build", "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    assert wheels(tmp_path / "store" / "files") == [RIGHT]

    cfg = config(tmp_path, example_repos / "img2grey", 'tags = "==1.1.2"')
    proc = kf("build", "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    assert "plan: 0 to build, 1 already in the store, 0 refused" in proc.stderr
    assert kf("index", "--config", cfg).returncode == 0
    assert "Successfully installed img2grey-1.1.2+torch213cpucxx11" in pip_installs(tmp_path / "store", tmp_path)


def test_to_wheel_gives_the_tags_version_however_asked(example_repos: Path, tmp_path: Path) -> None:
    repo = example_repos / "img2grey"
    for n, args in enumerate([("1",), ("1", "--revision", "v1"), ("1.1.2", "--revision", "v1")]):
        out = tmp_path / str(n)
        proc = kf("to-wheel", repo, *args, "--variants", VARIANT, "-o", out)
        assert proc.returncode == 0, proc.stderr
        assert wheels(out) == [RIGHT], args
    proc = kf("to-wheel", repo, "1.0.2", "--revision", "v1", "-o", tmp_path / "x")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: {repo}: revision 'v1' carries tag v1.1.2, so its version is 1.1.2, not 1.0.2 (one revision, one "
        "version); give VERSION 1.1.2 or 1"
    )
    assert not (tmp_path / "x").exists()


def test_a_store_holding_the_branch_version_is_named_and_mended(example_repos: Path, tmp_path: Path) -> None:
    # The branch was built before the maintainer tagged its head: the store holds 1.0.2 for that revision.
    repo = tmp_path / "img2grey"
    run("git", "clone", "-q", "--no-local", example_repos / "img2grey", repo)
    head = run("git", "-C", repo, "rev-parse", "v1.1.2").stdout.strip()
    run("git", "-C", repo, "branch", "-q", "v1", "origin/v1")
    run("git", "-C", repo, "tag", "-d", "v1.1.2")
    cfg = config(tmp_path, repo, "versions = [1]")
    assert kf("build", "--config", cfg).returncode == 0
    files = tmp_path / "store" / "files"
    assert wheels(files) == [WRONG]

    run("git", "-C", repo, "tag", "v1.1.2", head)
    proc = kf("plan", "--config", cfg, "--json")
    assert proc.returncode == 0, proc.stderr
    planned = json.loads(proc.stdout)
    assert [j["version"] for j in planned["build"]] == ["1.1.2"] and planned["in_store"] == []
    assert planned["misversioned"] == [{"wheel": WRONG, "version": "1.0.2", "should_be": "1.1.2"}]
    assert f"warning: {WRONG}: kernels-community/img2grey@{head[:12]} has version 1.1.2" in proc.stderr

    proc = kf("build", "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {WRONG}" in proc.stderr and "plan: 1 to build, 0 already in the store" in proc.stderr
    assert wheels(files) == [WRONG, RIGHT]

    # The fix the warning names: remove the wrong wheel with its .metadata and record, then index.
    for suffix in ("", ".metadata", ".json"):
        (files / f"{WRONG}{suffix}").unlink()
    proc = kf("index", "--config", cfg)
    assert proc.returncode == 0, proc.stderr
    proc = kf("build", "--config", cfg)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    page = (tmp_path / "store" / "simple" / "img2grey" / "index.html").read_text()
    assert "1.1.2%2Btorch213cpucxx11" in page and "1.0.2" not in page
    assert "Successfully installed img2grey-1.1.2+torch213cpucxx11" in pip_installs(tmp_path / "store", tmp_path)
