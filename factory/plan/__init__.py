"""Config -> plan: which (kernel, revision, variant) jobs exist and which the store lacks. ``--shard K/N``:
docs/publish.md, "Building in shards"; the PEP 792 statuses that leave new builds out: docs/withdraw.md."""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from packaging.utils import canonicalize_name

from .. import report, versions
from .. import variants as variants_mod
from ..config import KernelSpec, Options, Variables
from ..errors import FactoryError, NotAllowed, Refused, UsageError
from ..record import VARIANT_ROOT, Record
from ..sources import open_source
from ..sources.base import Source
from ..sources.hub_list import expand, is_glob
from ..sources.local import looks_local
from ..store import Store, open_store
from ..store.status import Status, read_statuses

README_NAMES = ("README.md", "CARD.md")
CLOSED = ("archived", "quarantined")  # PEP 792: the index takes no new files for these


@dataclass(frozen=True)
class Withheld:
    """The jobs of one project that its status leaves out of the plan."""

    project: str
    status: Status
    jobs: int


def store_statuses(store: Store, records: list[Record]) -> dict[str, Status]:
    """The statuses ``store`` keeps, read when the plan was given its records (``build`` and ``plan``; ``to-wheel``
    plans against no store and reads none). A status is only set on a project the store holds, so a store with
    no records has none that matter."""
    return read_statuses(store) if records else {}


def project_status(source_key: str, repo_name: str, projects: Mapping[str, set[str]],
                   statuses: Mapping[str, Status]) -> tuple[str, Status] | None:
    """The project and status that hold back a new build of ``source_key`` (a repository whose wheels the store
    holds under their own names, else named after the repository), or None when it builds."""
    names = sorted(projects.get(source_key) or {str(canonicalize_name(repo_name))})
    found = [(n, statuses[n]) for n in names if n in statuses]
    closed = [(n, s) for n, s in found if s.status in CLOSED]
    return next(iter(closed or found), None)


_HELP = "give --shard as K/N with 1 <= K <= N, e.g. --shard 2/4"


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)``; UsageError naming the problem otherwise."""
    parts = text.strip().split("/")
    if len(parts) != 2:
        raise UsageError(f"--shard {text!r} is not K/N; {_HELP}")
    try:
        k, n = int(parts[0]), int(parts[1])
    except ValueError:
        raise UsageError(f"--shard {text!r} is not two whole numbers; {_HELP}") from None
    if n < 1:
        raise UsageError(f"--shard {text!r}: N must be at least 1; {_HELP}")
    if not 1 <= k <= n:
        raise UsageError(f"--shard {text!r}: K must be between 1 and {n}; {_HELP}")
    return k, n


def shard_of(key: tuple[str, str, str], n: int) -> int:
    """The 1-based shard that ``(repo, revision, variant)`` falls in among ``n``."""
    return int.from_bytes(hashlib.sha256("\0".join(key).encode()).digest()[:8], "big") % n + 1


@dataclass(frozen=True)
class Job:
    """One build variant of one revision of one kernel."""

    location: str  # what open_source takes: a Hub id or a local path
    repo_id: str | None
    repo_type: str | None
    repo_name: str
    source: str  # display form
    sha: str
    ref: str | None
    version: str | None  # None: a locked revision whose major comes from metadata.json
    variant: str
    commit_time: int
    readme: str | None
    allow_no_digest: bool
    lock_hash: str | None = None  # kernels.lock's git_lfs_concat hash of this variant

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.repo_id or self.source, self.sha, self.variant)

    @property
    def where(self) -> str:
        return f"{self.repo_id or self.source}@{self.ref or self.sha[:12]}"

    def describe(self) -> str:
        return f"{self.where} {self.variant}"


@dataclass
class Plan:
    todo: list[Job] = field(default_factory=list)
    done: list[Job] = field(default_factory=list)  # already in the store
    refused: list[FactoryError] = field(default_factory=list)  # unknown variants and the like
    # Wheels the store holds for a planned job under another version than the one-version rule gives it (built
    # before the rule held): (the record, the version it should have). Their jobs are built again.
    misversioned: list[tuple[Record, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what [[transformers]] tables mapped, for the plan's lines
    # Projects whose PEP 792 status (archived, quarantined) leaves their new builds out: the operator's choice.
    withheld: list[Withheld] = field(default_factory=list)
    # The source each job came from, by (location, repo_id, repo_type): the build asks the same objects (and
    # their cached answers) instead of opening the repositories again.
    sources: dict[tuple[str, str | None, str | None], Source] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        def job(j: Job) -> dict[str, object]:
            return {"repo": j.repo_id or j.source, "revision": j.sha, "ref": j.ref, "version": j.version,
                    "variant": j.variant}

        return {
            "build": [job(j) for j in self.todo],
            "in_store": [job(j) for j in self.done],
            "refused": [str(e) for e in self.refused],
            "notes": list(self.notes),
            "withheld": [{"project": w.project, **w.status.to_json(), "jobs": w.jobs} for w in self.withheld],
            "misversioned": [{"wheel": r.filename, "version": r.kernel_version, "should_be": v}
                             for r, v in self.misversioned],
        }


def check_allowed(location: str, repo_id: str | None, opts: Options, *, hub: bool = False) -> None:
    if not hub and looks_local(location):
        return  # local paths are the user's own
    org = (repo_id or location).split("/")[0]
    if org not in opts.allow_orgs:
        raise NotAllowed(f"{repo_id or location}: organisation {org!r} is not allowed (allowed: "
                         f"{', '.join(opts.allow_orgs)}); add it to allow-orgs in factory.toml or pass "
                         f"--allow-org {org}")


def check_options(opts: Options) -> None:
    """Refuse a plan that cannot start (nothing to build, an organisation not allowed) before any work."""
    if not opts.kernels and not opts.transformers:
        raise UsageError("nothing to build: add [[kernel]] (or [[transformers]]) tables to factory.toml, or pass "
                         "--config or --lock")
    for spec in opts.kernels:
        check_allowed(spec.repo, spec.repo_id, opts)


def _wanted(variant: str, spec: KernelSpec) -> bool:
    if spec.variants and not any(fnmatch.fnmatchcase(variant, g) for g in spec.variants):
        return False
    return not any(fnmatch.fnmatchcase(variant, g) for g in spec.exclude_variants)


def _selections(src: Source, spec: KernelSpec, known: dict[tuple[str, str], str]) -> list[versions.Selected]:
    where = spec.repo_id or src.display
    if spec.sha is not None:  # pinned by a lock file: a release tag or a major branch at that commit names it
        sha = src.resolve(spec.sha)
        refs = src.refs()
        heads = [(n, b) for n, b in versions.major_branches(refs).items() if refs.branches[b] == sha]
        # neither a tag nor a major branch there: the major version comes from metadata.json when it is built
        major, branch = max(heads, default=(None, None))
        chosen = [versions.Selected(sha, branch, None, major)]
    elif spec.revision is not None:
        sha = src.resolve(spec.revision)
        refs = src.refs()
        if spec.version_override:
            tagged = versions.tag_at(refs, sha)
            if tagged is not None and tagged[0] != spec.version_override:
                raise UsageError(f"{where}: revision {spec.revision!r} carries tag {tagged[1]}, so its version is "
                                 f"{tagged[0]}, not {spec.version_override} (one revision, one version); give VERSION "
                                 f"{tagged[0]} or 1")
            return [versions.Selected(sha, tagged[1] if tagged else None, spec.version_override)]
        request = versions.parse_request(spec.versions[0]) if spec.versions else None
        if request is None or request.kind != "major":
            raise UsageError(f"{where}: with a revision, VERSION must be a major version (1) or a version (1.1.2)")
        chosen = [versions.Selected(sha, None, None, int(request.text))]
    elif not (refs := src.refs()).branches and not refs.tags:  # a plain folder: one revision, stamped
        sha = src.resolve("HEAD")
        requests = [versions.parse_request(t) for t in spec.versions]
        if len(requests) != 1 or requests[0].kind not in ("tag", "major"):
            raise UsageError(f"{where}: a folder without git tags needs one version like 1.1.2 or 1")
        if requests[0].kind == "tag":
            return [versions.Selected(sha, None, requests[0].text)]
        chosen = [versions.Selected(sha, None, None, int(requests[0].text))]
    else:
        chosen = []
        for text in spec.versions:
            chosen += versions.select(refs, versions.parse_request(text), where)
    # One version per revision: a revision that carries a release tag gets the tag's version however it was
    # asked for (a branch head, --revision, a lock), decided before counting commits, so that a tagged revision
    # costs no history look-up.
    by_sha: dict[str, versions.Selected] = {}
    for sel in chosen:
        if (tagged := versions.tag_at(refs, sel.sha)) is not None:
            sel = versions.Selected(sel.sha, tagged[1], tagged[0])
        by_sha.setdefault(sel.sha, sel)
    key = spec.repo_id or src.repo_id or src.display
    chosen = [versions.Selected(s.sha, s.ref, known.get((key, s.sha)), s.major) if s.version is None else s
              for s in by_sha.values()]
    return versions.fill_versions(chosen, src.commit_count)


def plan_kernel(spec: KernelSpec, opts: Options, known: dict[tuple[str, str], str], *,
                listed: bool = False) -> tuple[Source, list[Job], list[FactoryError]]:
    """Every wanted job of one kernel; README and commit time are filled later, only for jobs to build.
    A ``listed`` repository (from an organisation listing) is a Hub id, never a local path."""
    check_allowed(spec.repo, spec.repo_id, opts, hub=listed)
    src = open_source(spec.repo, repo_id=spec.repo_id, repo_type=spec.repo_type, hub=listed, env=opts.variables)
    jobs: list[Job] = []
    refused: list[FactoryError] = []
    unmatched = set(spec.variants) if spec.sha is None and not listed else set()
    seen: set[str] = set()
    for sel in _selections(src, spec, known):
        names = src.variants(sel.sha)
        seen.update(names)
        unmatched -= {g for g in unmatched if any(fnmatch.fnmatchcase(n, g) for n in names)}
        where = f"{spec.repo_id or src.display}@{sel.ref or sel.sha[:12]}"
        if not names:
            refused.append(Refused(f"{where}: no build/ variants; is this a kernel repository?"))
            continue
        if spec.lock_hashes and spec.variants:
            for missing in sorted(set(spec.variants) - set(names)):
                refused.append(Refused(f"{where}: locked variant {missing!r} is not in the repository"))
        for name in names:
            if not _wanted(name, spec):
                continue
            try:
                variants_mod.parse(name)
            except Refused as exc:
                refused.append(Refused(f"{where}: {exc}; skipped"))
                continue
            jobs.append(Job(
                location=spec.repo, repo_id=spec.repo_id or src.repo_id, repo_type=spec.repo_type,
                repo_name=src.name, source=src.display, sha=sel.sha, ref=sel.ref, version=sel.version, variant=name,
                commit_time=0, readme=None, lock_hash=dict(spec.lock_hashes).get(name),
                allow_no_digest=opts.allow_no_digest if spec.allow_no_digest is None else spec.allow_no_digest,
            ))
    if unmatched and seen:
        error = unmatched_variants(spec.repo_id or src.display, sorted(unmatched), sorted(seen))
        if len(unmatched) == len(set(spec.variants)):
            raise error  # nothing of this kernel would be built: a typo, or the wrong kernel
        report.warn(str(error))  # the other patterns match: what they match is built
    return src, jobs, refused


def unmatched_variants(where: str, patterns: list[str], names: list[str], shown: int = 8) -> UsageError:
    """Variant globs that match nothing: a typo builds nothing, so say so (exit 2) with the variants there are,
    nearest the first pattern first."""
    nearest = difflib.get_close_matches(patterns[0], names, n=len(names), cutoff=0.0)
    nearest += [n for n in names if n not in nearest]
    listed = ", ".join(nearest[:shown]) + (f", ... ({len(names)} in all)" if len(names) > shown else "")
    which = ", ".join(repr(p) for p in patterns)
    return UsageError(
        f"{where}: variant pattern{'s' if len(patterns) > 1 else ''} {which} match{'' if len(patterns) > 1 else 'es'}"
        f" no build variant; fix variants (or --variants); the variants there are, nearest first: {listed}"
    )


def _complete(src: Source, jobs: list[Job]) -> list[Job]:
    """Fill in each revision's README and commit time (one look-up per revision)."""
    per_sha: dict[str, tuple[str | None, int]] = {}
    for job in jobs:
        if job.sha not in per_sha:
            readme = next((t for n in README_NAMES if (t := src.read_text(job.sha, n)) is not None), None)
            per_sha[job.sha] = (readme, src.commit_time(job.sha))
    return [replace(job, readme=per_sha[job.sha][0], commit_time=per_sha[job.sha][1]) for job in jobs]


def expand_specs(specs: Iterable[KernelSpec], refused: list[FactoryError],
                 env: Variables | None = None) -> list[tuple[KernelSpec, bool]]:
    """Each spec, with ``repo = "org/*"`` globs replaced by the organisation's matching repositories (listed
    on the Hub at every plan, so new repositories are picked up); (spec, came from a glob). Listed ids that are
    not plain ``org/name`` ids go to ``refused``."""
    out: list[tuple[KernelSpec, bool]] = []
    for spec in specs:
        if not is_glob(spec.repo):
            out.append((spec, False))
            continue
        repos, problems = expand(spec.repo, spec.exclude, spec.repo_type, env)
        refused += [Refused(line) for line in problems]
        if not repos:
            raise UsageError(f"repo {spec.repo!r}: no {spec.repo_type or 'kernel'} repository on the Hub matches "
                             "(after exclude); check the organisation, the glob and HF_ENDPOINT")
        out += [(replace(spec, repo=repo, exclude=()), True) for repo in repos]
    return out


def _mapped(opts: Options, notes: list[str]) -> list[tuple[KernelSpec, bool]]:
    """The kernel specs of the [[transformers]] tables (transformers' own mapping, read from its interpreter);
    each is a Hub id, refused and skipped like a listed repository where it cannot be built (allow-orgs)."""
    from ..sources import transformers_map

    out: list[tuple[KernelSpec, bool]] = []
    for tspec in opts.transformers:
        mapping = transformers_map.read_mapping(tspec.python)
        made, skipped = transformers_map.specs(tspec, mapping)
        notes.append(transformers_map.describe(tspec, mapping, made))
        notes += [f"transformers: {line}" for line in skipped]
        out += [(k, True) for k in made if (k, True) not in out]
    return out


def make_plan(opts: Options, records: Iterable[Record], shard: tuple[int, int] | None = None, *,
              statuses: Mapping[str, Status] | None = None) -> Plan:
    """The plan of ``opts`` against a store holding ``records``; ``statuses`` are its projects' PEP 792 statuses
    (by default read from ``opts.store`` when records are given: see store_statuses)."""
    records = list(records)
    if statuses is None:
        statuses = store_statuses(open_store(opts.store), records) if records else {}
    withheld: dict[str, Withheld] = {}
    deprecated: set[str] = set()
    known = {(r.job_key[0], r.job_key[1]): r.kernel_version for r in records
             if r.job_key is not None and r.kernel_version is not None}
    by_key: dict[tuple[str, str, str], list[Record]] = {}
    projects: dict[str, set[str]] = {}  # source key -> the project names its wheels have (metadata.json's ``name``)
    for r in records:
        if r.job_key is not None:
            by_key.setdefault(r.job_key, []).append(r)
            projects.setdefault(r.job_key[0], set()).add(str(canonicalize_name(r.name)))
    plan = Plan()
    check_options(opts)
    planned: set[tuple[str, str, str]] = set()
    older = 0  # held jobs whose wheels were made before the variant root (docs/convert.md)

    for spec, listed in expand_specs(opts.kernels, plan.refused, opts.variables) + _mapped(opts, plan.notes):
        try:
            src, jobs, refused = plan_kernel(spec, opts, known, listed=listed)
        except UsageError as exc:  # a listed repository without the requested versions: skip it, say so
            if not listed:
                raise
            plan.refused.append(Refused(f"{spec.repo}: {exc}; skipped"))
            continue
        plan.refused += refused
        jobs = [job for job in jobs if job.key not in planned]  # named by two tables (a [[transformers]] mapping)
        planned.update(job.key for job in jobs)
        for job in jobs:
            plan.sources.setdefault((job.location, job.repo_id, job.repo_type), src)
        if shard is not None:  # partition the full plan, before dropping what the store holds
            jobs = [job for job in jobs if shard_of(job.key, shard[1]) == shard[0]]
        held = {job.key for job in jobs if _held(job, by_key, plan.misversioned)}
        plan.done += [job for job in jobs if job.key in held]
        older += sum(1 for key in held if not any(VARIANT_ROOT in r.extra for r in by_key.get(key, [])))
        new = [job for job in jobs if job.key not in held]
        if new and (found := project_status(new[0].key[0], new[0].repo_name, projects, statuses)) is not None:
            name, status = found
            if status.status in CLOSED:  # PEP 792: no new files; the store's wheels stay as they are
                before = withheld.get(name)
                withheld[name] = Withheld(name, status, len(new) + (before.jobs if before else 0))
                # no right-version wheel is built beside a misversioned one: named again once the project is active
                left_out = {job.key for job in new}
                plan.misversioned = [(r, v) for r, v in plan.misversioned if r.job_key not in left_out]
                new = []
            elif status.status == "deprecated" and name not in deprecated:
                deprecated.add(name)
                plan.notes.append(f"{name}: project status deprecated{_reason(status)}: built as usual")
        plan.todo += _complete(src, new)
    plan.withheld = list(withheld.values())
    if older:
        plan.notes.append(f"note: {older} wheel(s) in the store were made by an older kernel-factory, without the "
                          "whole build variant (kernels 0.18+ refuse them); they are kept, as new ones would have "
                          "the same names and other bytes: to replace them, see docs/convert.md, 'A store that already "
                          "holds older wheels'")
    return plan


def _held(job: Job, by_key: dict[tuple[str, str, str], list[Record]],
          misversioned: list[tuple[Record, str]]) -> bool:
    """Whether the store holds ``job``'s wheel under the job's version; a wheel of the job under another version
    is added to ``misversioned`` and does not count (the right one is built beside it)."""
    held = by_key.get(job.key, [])
    if job.version is None:  # a lock's untagged commit: the version comes from metadata.json when built
        return bool(held)
    misversioned += [(r, job.version) for r in held if r.kernel_version != job.version]
    return any(r.kernel_version == job.version for r in held)


def _reason(status: Status) -> str:
    return f" ({status.reason})" if status.reason else ""


def warning_lines(plan: Plan) -> list[str]:
    """The plan's warnings: one per project whose status leaves its new builds out, one per wheel the store holds
    under the wrong version, each naming the fix."""
    return [
        f"{w.project}: project status {w.status.status}{_reason(w.status)}: {w.jobs} new build(s) left out of the plan "
        f"(PEP 792: an archived or quarantined project takes no new files); `kernel-factory status {w.project} "
        "active` builds it again"
        for w in plan.withheld
    ] + [
        f"{r.filename}: {r.repo_id or r.source}@{(r.revision or '')[:12]} has version {v} (one revision, one "
        f"version: its release tag wins), not {r.kernel_version}; the {v} wheel is built beside it. Remove "
        f"files/{r.filename} with its .metadata and .json from the store, then run `kernel-factory index` "
        "(README: One revision, one version)"
        for r, v in plan.misversioned
    ]


def plan_lines(plan: Plan) -> list[str]:
    """What ``plan`` prints (and ``build`` on stderr before it starts): one line per job and refusal, a total."""
    lines = list(plan.notes)
    lines += [f"  build  {job.describe()}  -> {job.version or '(version from metadata.json)'}" for job in plan.todo]
    lines += [f"  refuse {err}" for err in plan.refused]
    withheld = sum(w.jobs for w in plan.withheld)
    lines.append(f"plan: {len(plan.todo)} to build, {len(plan.done)} already in the store, "
                 f"{len(plan.refused)} refused" + (f", {withheld} left out by project status" if withheld else ""))
    return lines
