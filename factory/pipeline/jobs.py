"""One job's work in the worker processes: ``fetch_task`` (a fetch worker: it waits on the source) and
``convert_task`` (a conversion worker), each writing only in its job's own ``job-*`` folder; the tasks turn any
failure into the job's Outcome."""

from __future__ import annotations

import os
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from tempfile import mkdtemp

from .. import versions
from ..config import Options
from ..errors import EXIT_BUG, EXIT_OK, BadKernel, FactoryError, unusable
from ..plan import Job, Plan
from ..record import Record
from ..sources import open_source
from ..sources.base import Source
from ..variants import parse as parse_variant
from ..wheel import stages

_SOURCES: dict[tuple[str, str | None, str | None], Source] = {}


@dataclass(frozen=True)
class Fetched:
    """A variant's files, fetched: ``root`` holds build/<variant>/; ``folder`` is the job's scratch folder that
    holds it (removed once converted), None when the source is read in place."""

    root: Path
    folder: Path | None
    version: str
    lfs: frozenset[str]  # the paths stored with LFS, for the lock hash check
    seconds: float  # time spent fetching
    start: float  # wall clock (time.time()) when the fetch began, for the stage timeline

    def remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


@dataclass(frozen=True)
class Outcome:
    job: Job
    record: Record | None = None
    error: str | None = None  # one line: the cause
    exit_code: int = EXIT_OK
    trace: str | None = None  # the traceback of an unexpected exception (a bug), shown under --debug


def use_sources(plan: Plan) -> None:
    """Build from the sources the plan opened (their answers are cached: no repository is opened twice)."""
    _SOURCES.update(plan.sources)


def source_of(job: Job, opts: Options) -> Source:
    key = (job.location, job.repo_id, job.repo_type)
    if key not in _SOURCES:
        _SOURCES[key] = open_source(job.location, repo_id=job.repo_id, repo_type=job.repo_type, env=opts.variables)
    return _SOURCES[key]


def _version_from_metadata(job: Job, variant_dir: Path, src: Source) -> str:
    from ..verify import metadata as kernelmeta

    major = kernelmeta.load(variant_dir, f"build/{job.variant}").version  # BadKernel on hostile JSON
    if not isinstance(major, int) or isinstance(major, bool):
        raise BadKernel(f"{job.describe()}: no tag at this revision and metadata.json has no integer 'version'")
    return versions.branch_version(major, src.commit_count(job.sha))


def worker_imports() -> None:
    """What each worker would import for its first wheel (the converter, auditwheel, pyelftools: about 0.15 s of
    CPU), imported once in this process before the workers fork, so that they share it."""
    import auditwheel.architecture  # noqa: F401
    import auditwheel.elfutils  # noqa: F401
    import auditwheel.libc  # noqa: F401
    import auditwheel.policy  # noqa: F401
    import elftools.elf.elffile  # noqa: F401

    from ..wheel import convert  # noqa: F401


def failure(job: Job, exc: Exception, where: Path | None = None) -> Outcome:
    """An exception -> the job's Outcome: one line naming the cause, the exit code; a bug keeps its traceback.

    ``where``: the folder the job was writing in, named when the OSError names no file (a write to an open file)."""
    if isinstance(exc, OSError) and (err := unusable(exc, where)) is not None:
        exc = err
    if isinstance(exc, FactoryError):
        return Outcome(job, error=f"{job.where}: {exc}", exit_code=exc.exit_code)
    detail = str(exc).splitlines()[0] if str(exc) else ""
    return Outcome(job, error=f"{job.describe()}: {type(exc).__name__}{': ' + detail if detail else ''}",
                   exit_code=EXIT_BUG, trace="".join(traceback.format_exception(exc)))


Built = tuple[Path, bytes, Record]


def fetch_task(job: Job, opts: Options, scratch: Path) -> Fetched | Outcome:
    """A fetch worker's task: one variant fetched into a job folder made in ``scratch``, with what its conversion
    needs from the source (everything here waits on the source, little on the CPU), or the job's failure."""
    try:
        src = source_of(job, opts)
        start, clock = time.time(), time.perf_counter()
        folder = Path(mkdtemp(prefix="job-", dir=scratch))
        try:
            root = src.fetch(job.sha, job.variant, into=folder)
            if Path(os.path.abspath(root)).is_relative_to(os.path.abspath(folder)):
                # Made in ``folder``: moved out of the source's temporary folder, which ``release`` removes (a
                # tree elsewhere, a checked-out repository read in place, stays where it is).
                os.rename(root, folder / "tree")
                root = folder / "tree"
            seconds = time.perf_counter() - clock
            lfs = frozenset(src.lfs_paths(job.sha, job.variant)) if job.lock_hash is not None else frozenset()
            version = job.version or _version_from_metadata(job, root / "build" / job.variant, src)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            src.release()  # the tree moved out of the source's own folder: release removes nothing it needs
        return Fetched(root, folder, version, lfs, seconds, start)
    except Exception as exc:
        return failure(job, exc, scratch)


def convert_task(job: Job, opts: Options, work: Path, fetched: Fetched) -> Built | Outcome:
    """A conversion worker's task: the wheel in a job folder of ``work`` (its own: two jobs that make the same file
    name must not replace each other's wheel), or the job's failure; the fetched folder is removed either way."""
    out_dir = work
    try:
        from ..wheel.convert import WheelInput, convert

        out_dir = Path(mkdtemp(prefix="job-", dir=work))
        stages.reset()
        start = time.time()
        variant_dir = fetched.root / "build" / job.variant
        if job.lock_hash is not None:
            from ..verify.lockfile import verify_lock_hash

            verify_lock_hash(variant_dir, job.lock_hash, lfs_paths=fetched.lfs, where=f"build/{job.variant}")
        if opts.verify_signatures:
            from ..verify.signature import verify_signature

            verify_signature(variant_dir, f"build/{job.variant}")
        result = convert(WheelInput(
            variant_dir=variant_dir, target=parse_variant(job.variant), kernel_version=fetched.version,
            repo_name=job.repo_name, repo_id=job.repo_id, source=job.source, revision=job.sha, ref=job.ref,
            commit_time=job.commit_time, readme=job.readme, manylinux=opts.manylinux,
            accept_higher_policy=opts.accept_higher_policy, allow_no_digest=job.allow_no_digest,
        ), out_dir)
        # The timeline: when this variant was fetched and converted, on the wall clock every process shares.
        stages.dump(opts.variables.stages_file, variant=job.variant, fetch=fetched.seconds, fetch_start=fetched.start,
                    fetch_end=fetched.start + fetched.seconds, convert_start=start, convert_end=time.time())
        return result
    except Exception as exc:
        return failure(job, exc, out_dir)
    finally:
        fetched.remove()
