"""HubSource against olah serving git repositories on 127.0.0.1, with real huggingface_hub calls."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hub_server import (
    KernelRepo,
    OlahServer,
    Proxy,
    free_port,
    git,
    hf_env,
    hub,
    make_kernel_repo,
    serve_repo,
)
from kernel_factory.errors import EXIT_UNREACHABLE, EXIT_USAGE, Unreachable, UsageError, VersionNotFound
from kernel_factory.sources.hub import HubSource
from kernel_factory.verify.digest import verify
from kernel_factory.verify.lockfile import lock_hash

pytestmark = pytest.mark.integration
BIG = os.urandom(3 << 20)  # a 3 MiB "binary" so a download can be cut mid-way


@dataclass
class Served:
    server: OlahServer
    proxy: Proxy
    relu: KernelRepo
    big: KernelRepo


@pytest.fixture(scope="module")
def test_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("hub")
    relu = make_kernel_repo(root / "src" / "relu")
    big = make_kernel_repo(root / "src" / "big", module="big", variants=("torch28-cxx11-cpu-x86_64-linux",),
                           payload=BIG)
    mirrors = root / "mirrors"
    serve_repo(relu.path, mirrors, "kernels-community/relu")
    serve_repo(relu.path, mirrors, "old-org/relu", repo_type="model")
    serve_repo(big.path, mirrors, "kernels-community/big")
    with hub(mirrors, root / "olah") as (server, proxy):
        yield Served(server, proxy, relu, big)


@pytest.fixture
def env(test_hub: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point huggingface_hub at the test Hub with a fresh cache; returns HF_HOME."""
    for key in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_HUB_CACHE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in hf_env(test_hub.proxy.url, tmp_path / "hf").items():
        monkeypatch.setenv(key, value)
    test_hub.proxy.revive()
    test_hub.proxy.reset()
    return tmp_path / "hf"


def test_refs_resolve_and_history(test_hub: Served, env: Path) -> None:
    src = HubSource("kernels-community/relu")
    c = test_hub.relu.commits
    refs = src.refs()
    assert refs.branches == {"main": c[2], "v1": c[1], "v2": c[2]}
    assert refs.tags == {"v1.0.0": c[0], "v1.0.1": c[1]}  # the annotated tag peeled to its commit
    assert src.repo_type == "kernel"
    assert src.resolve("v1") == c[1]
    assert src.resolve("v1.0.0") == c[0]
    assert src.resolve(c[0][:8]) == c[0]
    assert src.resolve(c[1]) == c[1]
    for bad in ("v9", "deadbeef"):  # (olah answers 500 and then drops the connection for an unknown full sha)
        with pytest.raises(VersionNotFound) as info:
            src.resolve(bad)
        assert "branches and tags: main, v1, v2, v1.0.0, v1.0.1" in str(info.value)
    repo = test_hub.relu.path
    for i, sha in enumerate(c):
        assert src.commit_count(sha) == int(git(repo, "rev-list", "--count", sha)) == i + 1
        assert src.commit_time(sha) == int(git(repo, "show", "-s", "--format=%ct", sha)) == test_hub.relu.times[i]


def test_variants_readme_and_fetch_one_variant(test_hub: Served, env: Path) -> None:
    src = HubSource("kernels-community/relu")
    sha = test_hub.relu.commits[2]
    assert src.variants(sha) == ["torch-universal", "torch27-cxx11-cu128-x86_64-linux",
                                 "torch28-cxx11-cpu-x86_64-linux"]
    readme = src.read_text(sha, "README.md")
    assert readme is not None and readme.startswith("# relu\n") and "revision 2" in readme
    assert src.read_text(sha, "CARD.md") is None
    test_hub.proxy.reset()
    root = src.fetch(sha, "torch27-cxx11-cu128-x86_64-linux")
    vdir = root / "build" / "torch27-cxx11-cu128-x86_64-linux"
    assert sorted(p.name for p in (root / "build").iterdir()) == ["torch27-cxx11-cu128-x86_64-linux"]
    assert not any(p.is_symlink() for p in vdir.rglob("*"))
    import json
    verify(vdir, json.loads((vdir / "metadata.json").read_text())["digest"], "relu")
    # Only that variant came from the Hub; the cache holds nothing of the other variants.
    fetched = [r for r in test_hub.proxy.requests if r.startswith("GET /kernels/")]
    assert fetched and all("/build/torch27-cxx11-cu128-x86_64-linux/" in r for r in fetched)
    snapshot = src.snapshot(sha, "torch27-cxx11-cu128-x86_64-linux")
    assert sorted(p.name for p in (snapshot / "build").iterdir()) == ["torch27-cxx11-cu128-x86_64-linux"]
    # Lock hash of the fetched files equals the one computed from git's own object ids.
    assert lock_hash(vdir) == lock_hash(test_hub.relu.path / "build" / "torch27-cxx11-cu128-x86_64-linux")
    assert src.lfs_paths(sha, "torch27-cxx11-cu128-x86_64-linux") == set()
    src.release()  # the fetched folder (a TemporaryDirectory left to the garbage collector warns)


def test_second_fetch_downloads_nothing(test_hub: Served, env: Path) -> None:
    sha = test_hub.relu.commits[1]
    first_run = HubSource("kernels-community/relu")
    first_run.fetch(sha, "torch-universal")
    first_run.release()
    first = test_hub.proxy.bytes_served
    test_hub.proxy.reset()
    again = HubSource("kernels-community/relu")  # a new run, same cache
    root = again.fetch(sha, "torch-universal")  # the folder lives as long as its source
    assert (root / "build" / "torch-universal" / "__init__.py").is_file()
    assert first > 0
    assert test_hub.proxy.requests == [] and test_hub.proxy.bytes_served == 0
    again.release()


def test_offline_serves_from_cache(test_hub: Served, env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sha = test_hub.relu.commits[2]
    online = HubSource("kernels-community/relu")
    online.refs()
    online.fetch(sha, "torch-universal")
    online.read_text(sha, "README.md")
    online.release()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    test_hub.proxy.reset()
    src = HubSource("kernels-community/relu")
    assert src.resolve("v2") == sha
    assert src.refs().tags["v1.0.0"] == test_hub.relu.commits[0]
    assert "torch-universal" in src.variants(sha)
    assert (src.fetch(sha, "torch-universal") / "build" / "torch-universal" / "metadata.json").is_file()
    src.release()
    assert src.read_text(sha, "README.md") is not None
    with pytest.raises(Unreachable, match="HF_HUB_OFFLINE"):
        src.fetch(sha, "torch28-cxx11-cpu-x86_64-linux")  # never downloaded
    with pytest.raises(Unreachable, match="run once online"):
        HubSource("kernels-community/never-seen").refs()
    assert test_hub.proxy.requests == []


def test_model_type_repository(test_hub: Served, env: Path) -> None:
    src = HubSource("old-org/relu")
    sha = src.resolve("v1")
    assert src.repo_type == "model"
    assert sha == test_hub.relu.commits[1]
    assert src.commit_count(sha) == 2
    assert "torch-universal" in src.variants(sha)
    assert (src.fetch(sha, "torch-universal") / "build" / "torch-universal" / "__init__.py").is_file()
    src.release()
    forced = HubSource("old-org/relu", repo_type="kernel")
    with pytest.raises(UsageError, match=r"tried kernel type\)"):
        forced.refs()


def test_unknown_repository(test_hub: Served, env: Path) -> None:
    with pytest.raises(UsageError) as info:
        HubSource("kernels-community/nope").refs()
    msg = str(info.value)
    assert msg == (f"no kernel repository kernels-community/nope on {test_hub.proxy.url} "
                   "(tried kernel and model types); check the repository id and HF_ENDPOINT")
    assert info.value.exit_code == EXIT_USAGE
    with pytest.raises(UsageError, match="org/name"):
        HubSource("no-slash")


def test_hub_unreachable(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("HF_ENDPOINT", dead)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_123")
    with pytest.raises(Unreachable) as info:
        HubSource("kernels-community/relu").refs()
    msg = str(info.value)
    assert info.value.exit_code == EXIT_UNREACHABLE
    assert "\n" not in msg and dead in msg and "HF_ENDPOINT" in msg and "HF_HUB_OFFLINE=1" in msg
    assert "hf_secret_value_123" not in msg


def test_download_dying_midway_then_rerun_completes(
    test_hub: Served, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    variant = "torch28-cxx11-cpu-x86_64-linux"
    src = HubSource("kernels-community/big")
    sha = src.resolve("main")
    test_hub.proxy.die_after(1 << 20)  # the server goes away 1 MiB into the download
    monkeypatch.setenv("KERNEL_FACTORY_RETRY_S", "5")  # a dropped connection is retried: 5 s of it, not 60
    src = HubSource("kernels-community/big")  # the environment read again
    with pytest.raises(Unreachable) as info:
        src.fetch(sha, variant)
    assert "kernels-community/big" in str(info.value) and "\n" not in str(info.value)
    assert test_hub.proxy.cuts == 1
    blobs = env / "hub" / "models--kernels-community--big"
    assert not blobs.exists()  # kernel type, not model
    test_hub.proxy.revive()
    # huggingface_hub 2.4 retried 5 times in-process (resuming with Range), then dropped the partial file.
    rerun = HubSource("kernels-community/big")
    root = rerun.fetch(sha, variant)
    so = root / "build" / variant / "_big_abc123.abi3.so"
    assert so.read_bytes().endswith(BIG + bytes([2]))
    incomplete = list((env / "hub").rglob("*.incomplete"))
    rerun.release()
    assert incomplete == []
