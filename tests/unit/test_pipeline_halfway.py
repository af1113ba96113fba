"""pipeline.halfway: a running Hub fetch is halfway once its partial downloads hold half the job's known bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernel_factory import config
from kernel_factory.pipeline import halfway
from kernel_factory.pipeline.jobs import _SOURCES, use_sources
from kernel_factory.plan import Job, Plan


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
    check = halfway(config.resolve(config.Flags(), env={}), {job.key: 1000})
    assert not check(job)  # asking the Hub: no partial file yet
    (blobs / "e1.incomplete").write_bytes(b"x" * 499)
    (blobs / "done-blob").write_bytes(b"x" * 5000)  # a finished file is not in flight
    assert not check(job)
    (blobs / "e2.incomplete").write_bytes(b"x")
    assert check(job)  # 500 of 1,000 bytes


def test_a_source_without_downloads_or_a_job_of_unknown_size_never_waits(tmp_path: Path) -> None:
    local = _job(str(tmp_path / "repo"))
    _use(local, Downloads([]))
    hub = _job("org/other", "org/other")
    _use(hub, Downloads([tmp_path]))
    check = halfway(config.resolve(config.Flags(), env={}), {local.key: 1000, hub.key: 0})
    assert local.key != hub.key
    assert check(local)  # a local folder or git checkout: no link to share
    assert check(hub)  # size unknown (offline, or the listing gave none)
    assert halfway(config.resolve(config.Flags(), env={}), {})(hub)
