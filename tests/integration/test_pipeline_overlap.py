"""build from the Hub (olah on 127.0.0.1): fetch workers run ahead of the conversion workers; an s3:// store
(moto) gets every wheel while the build goes on; a Hub dying mid-download leaves nothing in scratch."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import syslibs
from hub_server import Proxy, hf_env, hub, make_kernel_repo, serve_repo
from kernel_factory.errors import EXIT_OK, EXIT_UNREACHABLE
from servers import s3_env
from support import kf

pytestmark = pytest.mark.integration
VARIANTS = tuple(f"torch21{i}-cxx11-cpu-x86_64-linux" for i in range(4))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    if syslibs.LIBZ is None:
        pytest.skip("no libz.so.1 on the dynamic linker's path: the variants need a real ELF file")
    root = tmp_path_factory.mktemp("hub")
    src = root / "src"
    make_kernel_repo(src, module="overlap", variants=VARIANTS, elf=syslibs.LIBZ.read_bytes(),
                     payload=random.Random(38).randbytes(2 << 20))
    serve_repo(src, root / "mirrors", "bench/overlap")
    with hub(root / "mirrors", root / "olah") as (_, proxy):
        yield proxy


BIG = 30 << 20  # a variant's payload: three of huggingface_hub's 10 MiB writes, so its halfway point shows


@pytest.fixture(scope="module")
def served_big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """Two variants of 30 MiB each (zeros: quick to store and to convert; the link moves every byte)."""
    if syslibs.LIBZ is None:
        pytest.skip("no libz.so.1 on the dynamic linker's path: the variants need a real ELF file")
    root = tmp_path_factory.mktemp("hub-big")
    make_kernel_repo(root / "src", module="overlap", variants=VARIANTS[:2], elf=syslibs.LIBZ.read_bytes(),
                     payload=bytes(BIG))
    serve_repo(root / "src", root / "mirrors", "bench/big")
    with hub(root / "mirrors", root / "olah") as (_, proxy):
        yield proxy


def setup(tmp_path: Path, proxy: Proxy, store: str, extra: dict[str, str] | None = None,
          repo: str = "bench/overlap") -> dict[str, str]:
    (tmp_path / "factory.toml").write_text(
        f'[factory]\nstore = "{store}"\njobs = 2\nscratch = "{tmp_path / "scratch"}"\nallow-orgs = ["bench"]\n\n'
        f'[[kernel]]\nrepo = "{repo}"\nversions = ["1.0.0"]\n'
    )
    return {**os.environ, **hf_env(proxy.url, tmp_path / "hf"), **(extra or {})}


def test_fetches_run_ahead_of_conversions_and_leave_scratch_empty(served: Proxy, tmp_path: Path) -> None:
    served.reset()
    stages = tmp_path / "stages.jsonl"
    env = setup(tmp_path, served, str(tmp_path / "store"), {"KERNEL_FACTORY_STAGES": str(stages)})
    proc = kf("build", cwd=tmp_path, env=env)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert len(list((tmp_path / "store" / "files").glob("*.whl"))) == 4
    rows = sorted((json.loads(line) for line in stages.read_text().splitlines()), key=lambda r: r["fetch_start"])
    assert sorted(r["variant"] for r in rows) == sorted(VARIANTS)
    for r in rows:  # each variant is converted after its fetch is over
        assert r["fetch_start"] <= r["fetch_end"] <= r["convert_start"] <= r["convert_end"]
    # two fetch workers start at once, and the third fetch starts as soon as the first is over: before the
    # first wheel is written (a worker that fetched, then converted, would start it only after a wheel)
    first_wheel = min(r["convert_end"] for r in rows)
    assert rows[2]["fetch_start"] < first_wheel
    assert list((tmp_path / "scratch").iterdir()) == []


def test_on_a_paced_link_the_second_fetch_starts_once_the_first_is_halfway(served_big: Proxy, tmp_path: Path) -> None:
    """Two same-size variants started together end together, and their conversions then run while the link
    idles: the second fetch waits until the Hub cache's partial download holds half the first's bytes."""
    served_big.reset()
    rate = 30e6  # bytes a second: a variant takes about a second alone on the link
    served_big.pace(rate)
    stages = tmp_path / "stages.jsonl"
    env = setup(tmp_path, served_big, str(tmp_path / "store"), {"KERNEL_FACTORY_STAGES": str(stages)}, "bench/big")
    try:
        proc = kf("build", cwd=tmp_path, env=env)
    finally:
        served_big.reset()
    assert proc.returncode == EXIT_OK, proc.stderr
    assert len(list((tmp_path / "store" / "files").glob("*.whl"))) == 2
    rows = sorted((json.loads(line) for line in stages.read_text().splitlines()), key=lambda r: r["fetch_start"])
    # the first fetch cannot hold half its bytes sooner than this over the paced link (started together: ms)
    assert rows[1]["fetch_start"] - rows[0]["fetch_start"] >= BIG / 2 / rate
    assert rows[1]["fetch_start"] < rows[0]["fetch_end"]  # yet before the first's end: the link stays busy
    assert list((tmp_path / "scratch").iterdir()) == []


def test_an_s3_store_gets_every_wheel_metadata_and_record_during_the_build(
    served: Proxy, tmp_path: Path, s3: Any, endpoint: str
) -> None:
    served.reset()
    s3.create_bucket(Bucket="overlap")
    env = setup(tmp_path, served, "s3://overlap/store", s3_env(endpoint))
    proc = kf("build", cwd=tmp_path, env=env)
    assert proc.returncode == EXIT_OK, proc.stderr
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="overlap", Prefix="store/files/")["Contents"]}
    wheels = sorted(k for k in keys if k.endswith(".whl"))
    assert len(wheels) == 4
    for key in wheels:
        record = json.loads(s3.get_object(Bucket="overlap", Key=f"{key}.json")["Body"].read())
        assert f"{key}.metadata" in keys
        head = s3.head_object(Bucket="overlap", Key=key)
        assert head["Metadata"]["sha256"] == record["sha256"]
        assert head["ContentLength"] == record["size"]
    assert list((tmp_path / "scratch").iterdir()) == []


def test_a_hub_dying_mid_download_fails_the_build_and_leaves_nothing_half_made(served: Proxy, tmp_path: Path) -> None:
    served.reset()
    env = setup(tmp_path, served, str(tmp_path / "store"))
    assert kf("plan", cwd=tmp_path, env=env).returncode == EXIT_OK  # the listings are served whole
    served.die_after(1 << 20)  # every connection is cut once 1 MB more have gone through: mid-download
    try:  # a dropped connection is retried within the budget: 5 s of it, not the default 60
        proc = kf("build", cwd=tmp_path, env={**env, "KERNEL_FACTORY_RETRY_S": "5"})
    finally:
        served.revive()
    assert proc.returncode == EXIT_UNREACHABLE, proc.stderr
    assert list((tmp_path / "scratch").iterdir()) == []
    files = tmp_path / "store" / "files"
    names = sorted(p.name for p in files.iterdir()) if files.is_dir() else []
    wheels = [n for n in names if n.endswith(".whl")]
    assert len(wheels) < 4  # the cut downloads made no wheel; each wheel there came with its record
    assert names == sorted(n + ext for n in wheels for ext in ("", ".json", ".metadata"))
