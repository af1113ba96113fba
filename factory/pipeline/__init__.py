"""plan -> fetch -> verify -> wheel -> audit -> store, variants in parallel processes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from tempfile import gettempdir

from .. import config, report, space, versions
from ..config import KernelSpec, Options
from ..errors import EXIT_BUG, EXIT_OK, BadKernel, Refused, UsageError, output_folder, worst
from ..plan import Job, Plan, check_options, make_plan, parse_shard, plan_lines, store_statuses, warning_lines
from ..record import Record
from ..store import load_records, open_store
from ..store.pool import worker_pool
from . import flow, progress
from .jobs import Built, Fetched, Outcome, convert_task, fetch_task, source_of, use_sources, worker_imports


@dataclass(frozen=True)
class PlanArgs:
    flags: config.Flags
    lock: str | None = None
    shard: str | None = None
    json: bool = False


@dataclass(frozen=True)
class BuildArgs(PlanArgs):
    debug: bool = False


@dataclass(frozen=True)
class ToWheelArgs:
    """``to-wheel``: one kernel version -> wheels in ``out``. ``flags`` carries no config file (none is read)."""

    repo: str
    version: str
    flags: config.Flags
    out: Path = Path(".")
    revision: str | None = None
    variants: tuple[str, ...] = ()
    repo_id: str | None = None
    json: bool = False
    debug: bool = False


def execute(jobs: list[Job], opts: Options, work: Path, scratch: Path,
            deliver: Callable[[Job, Path, bytes, Record], None], room: Path | None = None,
            uploads: int = 0) -> list[Outcome]:
    """Build every job, handing each finished wheel to ``deliver`` (in this process; on ``uploads`` threads if
    given), after checking the plan's known size against ``room`` (default ``work``) and scratch. The progress
    bar's threads start once the workers are forked: no thread of ours runs at a fork."""
    sizes = check_space(jobs, opts, room or work)
    downloads = sorted({d for job in jobs for d in source_of(job, opts).downloads()})
    started, tell, close = progress.progress(len(jobs), progress.Bytes(work, scratch, downloads),
                                             lambda job: sizes.get(job.key, 0), _describe)
    finish = flow.Finisher(deliver, tell, uploads)
    converters, fetchers = flow.lanes(opts.jobs, len(jobs))
    try:
        if fetchers == 0:
            started()
            for job in jobs:  # fetched, then converted, in this process, as the two workers would
                fetched = fetch_task(job, opts, scratch)
                finish(job, fetched if isinstance(fetched, Outcome) else convert_task(job, opts, work, fetched))
            return finish.outcomes
        worker_imports()
        # One pool, forked at once: the flow never runs more fetches or conversions than it has workers for
        # either, so no task waits behind another. Workers drop the store lock, die with this process.
        with worker_pool(converters + fetchers) as pool:

            def fetch(job: Job) -> Future[Fetched | Built | Outcome]:
                future: Future[Fetched | Built | Outcome] = pool.submit(fetch_task, job, opts, scratch)
                started()  # the first task forked every worker (a "fork" pool starts them all at once)
                return future

            def convert(job: Job, fetched: Fetched) -> Future[Built | Outcome]:
                return pool.submit(convert_task, job, opts, work, fetched)

            flow.pipelined(jobs, fetch, convert, finish, converters, fetchers, halfway(opts, sizes))
    finally:
        finish.close()
        close()
    return finish.outcomes


SMALL_VARIANT = 20 << 20  # bytes: a variant under this starts the next fetch at once (``halfway``)


def halfway(opts: Options, sizes: dict[tuple[str, str, str], int]) -> Callable[[Job], bool]:
    """Whether a job's running fetch has half its bytes in its source's ``*.incomplete`` downloads. True for a
    source that downloads nothing (no link to share), or a job under ``SMALL_VARIANT`` or of unknown size (partial
    files grow in steps of megabytes, so a small one may never show its halfway point; it converts quickly anyway).
    False before the first partial file (asking the Hub) and once the files are complete (it ends soon)."""
    def check(job: Job) -> bool:
        folders = source_of(job, opts).downloads()
        size = sizes.get(job.key, 0)
        return not folders or size < SMALL_VARIANT or 2 * progress.incomplete_bytes(folders) >= size

    return check


def _describe(outcome: Outcome) -> tuple[str, int]:
    """An item's progress line and its wheel's bytes (0 for a failed item)."""
    if outcome.record is not None:
        return f"built  {outcome.record.filename}", outcome.record.size
    return f"failed {outcome.error or outcome.job.describe()}", 0


def exit_code(outcomes: list[Outcome], plan: Plan) -> int:
    """The most severe code of any item or of the plan (1 > 4 > 3 > 2); never 0 when an item failed."""
    codes = [o.exit_code if o.record is None else EXIT_OK for o in outcomes] + [e.exit_code for e in plan.refused]
    if any(o.record is None and o.exit_code == EXIT_OK for o in outcomes):
        codes.append(EXIT_BUG)  # a failure without a code is a bug
    return worst(codes)


def check_space(jobs: list[Job], opts: Options, target: Path) -> dict[tuple[str, str, str], int]:
    """Refuse, before anything is fetched, a plan whose known size does not fit in ``target`` (the store) or in
    the scratch folder (exit 4); each job's known size (by its key) for the progress bar."""
    sizes = {job.key: found for job in jobs if (found := source_of(job, opts).sizes(job.sha, job.variant)) is not None}
    scratch = Path(opts.scratch) if opts.scratch else Path(gettempdir())
    space.check_plan(list(sizes.values()), flow.held(*flow.lanes(opts.jobs, len(jobs))), target, scratch)
    return {key: size[0] for key, size in sizes.items()}


def _summarise(outcomes: list[Outcome], plan: Plan, as_json: bool, debug: bool = False,
               extra: dict[str, object] | None = None) -> None:
    """Errors and the summary line on stderr; with ``as_json`` one JSON document on stdout (docs/json.md)."""
    built = [o for o in outcomes if o.record is not None]
    failed = [o for o in outcomes if o.record is None]
    for o in failed:
        if o.trace and debug:
            report.raw_error(o.trace, end="")
        report.error(str(o.error))
    if any(o.trace for o in failed):
        report.error("this is a bug in kernel-factory; please report it with the traceback that --debug shows")
    for err in plan.refused:
        report.error(str(err))
    if as_json:
        report.document({"built": [o.record.filename for o in built if o.record], "in_store": len(plan.done),
                         "failed": [o.error for o in failed], "refused": [str(e) for e in plan.refused],
                         **(extra or {})})
    report.result(f"built {len(built)} wheels, {len(plan.done)} already in the store, "
                  f"{len(failed) + len(plan.refused)} refused or failed", stderr=True)


def specs_from_lock(path: str) -> tuple[KernelSpec, ...]:
    """kernels.lock, or a pyproject.toml's [tool.kernels.dependencies], as kernel specs."""
    from ..verify import lockfile

    if Path(path).name.endswith(".toml"):
        return tuple(KernelSpec(repo=d.repo_id, versions=(str(d.major) if d.major is not None else str(d.specifier),))
                     for d in lockfile.read_dependencies(Path(path)))
    return tuple(KernelSpec(repo=k.repo_id, sha=k.sha, variants=tuple(k.variants),
                            lock_hashes=tuple(sorted(k.hashes.items()))) for k in lockfile.read_lock(Path(path)))


def load_options(args: PlanArgs) -> Options:
    opts = config.resolve(args.flags)
    if args.lock:
        opts = replace(opts, kernels=specs_from_lock(args.lock))
    elif not opts.kernels and config.find_config(args.flags) is None:
        raise UsageError(f"no {config.DEFAULT_CONFIG} in {Path.cwd()}: write one with a [[kernel]] table for each "
                         "kernel to mirror (README, Configuration; `make demo` uses the bundled one), or pass --config "
                         "FILE or --lock kernels.lock")
    return opts


def _warn_damaged(lines: list[str]) -> None:
    for line in lines:
        report.warn(line)


def _put_notices(opts: Options) -> None:
    """With an s3:// store: the put args every object of the build carries (and, for plan, those refused)."""
    if opts.store.scheme == "s3":
        from ..s3util import notices

        for line in notices(opts.store.display, opts):
            report.raw_error(line)


def run_plan(args: PlanArgs) -> int:
    opts = load_options(args)
    store = open_store(opts.store)  # read only: plan puts nothing (and names the put args build would refuse)
    damaged: list[str] = []
    records = load_records(store, damaged, readonly=True)
    _warn_damaged(damaged)
    shard = parse_shard(args.shard) if args.shard else None
    plan = make_plan(opts, records, shard, statuses=store_statuses(store, records))
    _warn_damaged(warning_lines(plan))
    _put_notices(opts)
    if args.json:
        report.document(plan.to_json())
    else:
        for line in plan_lines(plan):
            report.result(line)
    return worst(e.exit_code for e in plan.refused)


def run_build(args: BuildArgs) -> int:
    opts = load_options(args)
    shard = parse_shard(args.shard) if args.shard else None
    check_options(opts)  # before the store is touched
    early = None
    if opts.store.local is not None:
        output_folder(opts.store.local, "--store")
        if not opts.store.local.exists():  # planned before the lock makes the folder: a bad config leaves none
            early = make_plan(opts, [], shard)
    store = open_store(opts.store, opts)
    with store.lock():
        damaged: list[str] = []
        records = load_records(store, damaged, readonly=True)
        _warn_damaged(damaged)  # their jobs count as not built: the build makes their records again
        plan = early if early is not None and not records else \
            make_plan(opts, records, shard, statuses=store_statuses(store, records))
        use_sources(plan)
        for line in plan_lines(plan):
            report.info(line, stderr=True)
        _warn_damaged(warning_lines(plan))
        if not report.quiet():
            _put_notices(opts)
        held = {r.filename: r for r in records}

        claims = threading.Lock()  # an s3:// store's uploads run on several threads

        def deliver(job: Job, wheel: Path, meta: bytes, rec: Record) -> None:
            with claims:
                other = held.get(rec.filename)
                if other is not None and other.job_key != rec.job_key:  # never overwrite another kernel's wheel
                    origin = f"{other.repo_id or other.source}@{other.ref or (other.revision or '')[:12]} " \
                             f"{other.variant}"
                    raise Refused(
                        f"{job.describe()}: makes {rec.filename}, which the store already holds from {origin}; "
                        "give one of them another metadata.json 'name', or leave one out of the config"
                    )
                held[rec.filename] = rec  # claimed before its upload: a second job making this name is refused
            store.put(wheel, meta, rec)

        outcomes = []
        # The work folder is on the store's file system where it has one (its room is the store's room).
        with store.work_dir(opts.scratch) as work:
            if plan.todo:
                with space.scratch_dir(opts.scratch) as scratch:
                    outcomes = execute(plan.todo, opts, Path(work), Path(scratch), deliver,
                                       uploads=flow.UPLOADS if opts.store.scheme == "s3" else 0)
    _summarise(outcomes, plan, args.json, args.debug)
    return exit_code(outcomes, plan)


def run_to_wheel(args: ToWheelArgs) -> int:
    opts = config.resolve(args.flags)
    request = versions.parse_request(args.version)
    spec = KernelSpec(repo=args.repo, versions=(args.version,), repo_id=args.repo_id, variants=args.variants,
                      allow_no_digest=args.flags.given.get("allow_no_digest"))
    if args.revision:
        spec = replace(spec, revision=args.revision, version_override=request.text if request.kind == "tag" else None)
        if request.kind not in ("tag", "major"):
            raise UsageError(f"with --revision, VERSION must be 1.1.2 or a major version like 1, not {args.version!r}")
    opts = replace(opts, kernels=(spec,))
    output_folder(args.out, "-o")
    plan = make_plan(opts, [])
    use_sources(plan)
    for line in plan_lines(plan):
        report.info(line, stderr=True)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    names: dict[str, Job] = {}

    def deliver(job: Job, wheel: Path, meta: bytes, rec: Record) -> None:
        if rec.filename in names:
            raise BadKernel(f"{job.describe()}: makes {rec.filename}, as {names[rec.filename].variant} does")
        names[rec.filename] = job
        os.replace(wheel, out / rec.filename)

    outcomes = []
    if plan.todo:
        with space.scratch_dir(str(out), prefix=".tmp-work-") as work, space.scratch_dir(opts.scratch) as scratch:
            outcomes = execute(plan.todo, opts, Path(work), Path(scratch), deliver, room=out)
    wheels = [str(out / o.record.filename) for o in outcomes if o.record is not None]
    if not args.json:  # with --json the paths are in the document: stdout holds nothing else
        for path in wheels:
            report.output(path)
    _summarise(outcomes, plan, args.json, args.debug, {"wheels": wheels})
    return exit_code(outcomes, plan)
