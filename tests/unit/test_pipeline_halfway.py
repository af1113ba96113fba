"""pipeline.halfway: a running Hub fetch is halfway once its partial downloads hold half the job's known bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernel_factory import config
from kernel_factory.pipeline import SMALL_VARIANT, halfway
from kernel_factory.pipeline.jobs import _SOURCES, use_sources
from kernel_factory.plan import Job, Plan

MB = 1 << 20


class Downloads:
    """A source whose fetches write their partial files in ``folders`` (as huggingface_hub's blobs/)."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = folders

    def downloads(self) -> list[Path]:
        return self.folders


def _job(location: str, repo_id: str = "org/r") -> Job:
    return Job(location=location, repo_id=repo_id, repo_type=None, repo_name="r", source=location, sha="a" * 40,
               ref="v1", version="1.0.0", variant="torch27-cxx11-cu128-x86_64-linux", commit_time=0, readme=None,
               allow_no_digest=False)


def _use(job: Job, source: Any) -> None:
    _SOURCES.pop((job.location, job.repo_id, job.repo_type), None)
    use_sources(Plan(sources={(job.location, job.repo_id, job.repo_type): source}))


def test_halfway_counts_the_partial_downloads_against_the_jobs_size(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    job = _job("org/r")
    _use(job, Downloads([blobs]))
    size = 100 * MB
    check = halfway(config.resolve(config.Flags(), env={}), {job.key: size})
    assert not check(job)  # asking the Hub: no partial file yet
    _sparse(blobs / "e1.incomplete", size // 2 - 1)
    _sparse(blobs / "done-blob", size)  # a finished file is not in flight
    assert not check(job)
    _sparse(blobs / "e2.incomplete", 1)
    assert check(job)  # half of the job's bytes


def test_a_small_variant_never_waits(tmp_path: Path) -> None:
    """Its partial file may stay empty until the download library's last write: it could not show its halfway
    point. The bound is the factory's own, whatever huggingface_hub's write size."""
    job = _job("org/r")
    _use(job, Downloads([tmp_path]))
    assert SMALL_VARIANT == 20 * MB
    opts = config.resolve(config.Flags(), env={})
    assert halfway(opts, {job.key: 20 * MB - 1})(job)
    assert not halfway(opts, {job.key: 20 * MB})(job)


def test_a_source_without_downloads_or_a_job_of_unknown_size_never_waits(tmp_path: Path) -> None:
    local = _job(str(tmp_path / "repo"), "org/local")
    _use(local, Downloads([]))
    hub = _job("org/other", "org/other")
    _use(hub, Downloads([tmp_path]))
    check = halfway(config.resolve(config.Flags(), env={}), {local.key: 100 * MB})
    assert check(local)  # a local folder or git checkout: no link to share
    assert check(hub)  # size unknown (offline, or the listing gave none)


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.truncate(size)
