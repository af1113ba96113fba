"""``kernel-factory download [PROJECT_DIR] --index-url URL``: kernels.lock -> the Hub cache, from your index, as
docs/download.md tells. Nothing is written into the cache until every kernel has been found, downloaded and checked.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ... import fetch, report, simple
from ...config import DEFAULT_ORGS
from ...errors import EXIT_OK, Refused, Unreachable, UsageError, unusable, unusable_from_text, worst
from ...nofollow import CHUNK, Hashing, LinkRefused, file_digest
from ...record import COMMIT_SHA, PROVENANCE
from ...safe_text import printable
from ...variants import parse
from ...verify.digest import left_out
from ...verify.lockfile import LockedKernel, read_lock
from .. import cache
from ..probe.environment import Environment
from ..probe.run import probe, resolve_python
from ..which import Choice, NoProject, build_lines, candidates, nearest
from . import wheelcheck
from .depends import MAX_DEPENDS, Policy, Want, find_cycle, lock_want, wants_of

#: Beside the snapshot's cache.MARKER: what each variant's files were when this command placed them.
FILES = ".kernel-factory-download.json"
MAX_WHEEL = 4 * 1024**3  #: bytes of one wheel downloaded (less where the page gives the wheel's size)
_RECORD_LIMIT = 64 << 20  #: bytes of FILES read

@dataclass(frozen=True)
class DownloadArgs:
    """``download``: the project folder (holding kernels.lock), the index, the interpreter to fit (None: this one)."""

    project_dir: str = "."
    index_url: str = ""
    python: str | None = None
    allow_orgs: tuple[str, ...] | None = None  # --allow-org and KERNEL_FACTORY_ALLOW_ORGS; None: neither given
    max_depends: int = MAX_DEPENDS


@dataclass
class Got:
    """A kernel found on the index: downloaded and unpacked into ``folder``, or already in the cache."""

    want: Want
    wheel: str
    wheel_sha256: str | None
    sha: str
    variant: str
    depends: list[dict[str, Any]]
    folder: Path | None = None  # None: already in the cache
    files: dict[str, str] = field(default_factory=dict)
    package: str = ""  # the wheel's package folder (its provenance's "package")


# -- the cache's own record of what this command placed --------------------------------------------------------


def _file_hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by its sha256, as the lock's hash covers it (a dangling link is an error, a link
    to a folder is not followed: what a snapshot holds is judged as it is, not as a link makes it look)."""
    out = {}
    for dirpath, dirnames, names in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not left_out(d, True)]
        for name in names:
            if not left_out(name, False):
                path = Path(dirpath) / name
                out[path.relative_to(folder).as_posix()] = file_digest(path)
    return out


def _placed(root: Path, repo_id: str, sha: str) -> dict[str, Any]:
    """This command's record beside snapshot ``sha``, read by descriptors, and only where this user wrote it and no
    one else can write it (cache.read_own): a record others could forge vouches for nothing."""
    raw = cache.read_own(root, repo_id, sha, FILES, _RECORD_LIMIT)
    try:
        data = json.loads(raw) if raw is not None else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _cached(root: Path, want: Want, sha: str, choice: Choice) -> Got | None:
    """The kernel as an earlier run of this user placed it, if its wheel is this one and the variant's bytes are
    still the ones recorded: every link names its blob and every blob's bytes hash to its name."""
    snapshot = cache.repo_folder(root, want.repo_id) / "snapshots" / sha
    for variant, entry in _placed(root, want.repo_id, sha).items():
        if not isinstance(entry, dict) or entry.get("wheel") != choice.wheel.filename or \
                entry.get("sha256") != choice.wheel.sha256 or not cache.valid_ref(variant):
            continue
        files = entry.get("files")
        if not isinstance(files, dict) or not cache.variant_holds(root, want.repo_id, sha, variant, files):
            continue
        # the lock's hashes hold for what is there, as for a new download (a lock may gain hashes meanwhile)
        wheelcheck.check_lock_hash(dict(want.hashes), want.repo_id, variant, str(entry.get("package")),
                                   snapshot / "build" / variant, files, choice.wheel.filename)
        return Got(want, choice.wheel.filename, choice.wheel.sha256, sha, variant, list(entry.get("depends") or []))
    return None


def _remember(root: Path, got: Got) -> None:
    if not cache.is_ours(cache.repo_folder(root, got.want.repo_id) / "snapshots" / got.sha):
        return  # the Hub's own snapshot of this commit: nothing of ours to record there
    data = _placed(root, got.want.repo_id, got.sha)
    data[got.variant] = {"wheel": got.wheel, "sha256": got.wheel_sha256, "files": got.files, "depends": got.depends,
                         "package": got.package}
    try:
        cache.write_own(root, got.want.repo_id, got.sha, FILES,
                           (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
    except OSError as exc:  # the record only saves a download next time: a cache this user cannot write (another
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):  # user's, read-only) that holds the
            raise  # checked bytes already is fine without it


# -- the index ------------------------------------------------------------------------------------------------


def _record_revision(url: str, session: Any) -> str | None:
    """The revision the record beside a wheel names (kernel-factory's index serves them), or None."""
    try:
        got = simple.fetch(url + ".json", session)
        data = json.loads(got[0]) if got is not None else None
    except (Unreachable, ValueError):
        return None
    revision = data.get("revision") if isinstance(data, dict) else None
    return revision if isinstance(revision, str) else None


def _fetch_wheel(choice: Choice, url: str, session: Any, into: Path) -> Path:
    """The wheel, downloaded into ``into`` and checked against the sha256 (and size) the index page gives; over
    http its redirects followed by hand, each checked, and its rate held (factory/fetch.py)."""
    w = choice.wheel
    if not w.sha256:
        raise Refused(f"{choice.root} gives no sha256 for {w.filename}; publish the index with hashes")
    link = simple.check_link(w.url, url, session)
    limit = min(MAX_WHEEL, w.size) if w.size is not None and w.size >= 0 else MAX_WHEEL
    dest = into / w.filename
    local = simple.local_path(w.url) if w.url.startswith("file://") else None
    too_big = Refused(f"{w.filename}: more than the {limit} bytes "
                      f"{'the index page gives' if limit == w.size else 'a wheel may have'}; nothing was "
                      "installed: republish the wheel or check the mirror")
    try:
        with open(dest, "wb") as out:
            digest = Hashing(out=out, limit=limit, too_big=lambda: too_big)
            if local is not None:
                with open(local, "rb") as f:
                    shutil.copyfileobj(f, digest, CHUNK)
            else:
                status = fetch.read_wheel(link, url, session, size=limit if limit == w.size else None,
                                          headers={"User-Agent": simple.USER_AGENT}, what="--index-url",
                                          take=digest.write, chunk=CHUNK)
                if status != 200:
                    raise Unreachable(f"--index-url: {link} answered HTTP {status}; check the index")
    except FileNotFoundError:
        raise Unreachable(f"--index-url: {local} is missing; check the index") from None
    if digest.hexdigest() != w.sha256:
        dest.unlink()
        raise Refused(f"{w.filename}: sha256 {digest.hexdigest()[:16]}... is not the {w.sha256[:16]}... that "
                      f"{choice.root} gives; nothing was installed: republish the wheel or check the mirror")
    return dest


def _find(want: Want, url: str, env: Environment, root: Path, session: Any, scratch: Callable[[], Path]
          ) -> tuple[Got | None, list[str]]:
    """The kernel, found on the index (downloaded, unpacked, checked) or in the cache; else (None, why lines)."""
    project = str(canonicalize_name(want.repo_id.split("/", 1)[1]))
    try:
        found, every = candidates(url, project, env, session, yanked=True)
    except NoProject as exc:
        return None, [f"{want.repo_id} ({want.why}): {url} has no project {project} (no simple/{project}/ page)"
                      f"{exc.hint}; publish it there or fix --index-url"]
    if want.major is not None:
        found = [c for c in found if c.wheel.version.major == want.major]
    repo = cache.repo_folder(root, want.repo_id)
    others: dict[str, str] = {}  # the commits of the fitting wheels that are not the locked one -> their version
    for choice in found:
        sha = want.sha or cache.read_ref(repo, f"v{want.major}")
        cached = _cached(root, want, sha, choice) if sha else None
        if cached is not None:
            return cached, []
        if want.sha is not None:
            hint = _record_revision(simple.check_link(choice.wheel.url, url, session), session)
            if hint is not None and hint != want.sha:
                others.setdefault(hint, str(choice.wheel.version))
                continue
        into = Path(tempfile.mkdtemp(dir=scratch()))
        wheel = _fetch_wheel(choice, url, session, into)
        prov, folder, files = wheelcheck.unpack(wheel, into)
        wheel.unlink()
        if prov.get("repo_id") != want.repo_id:
            raise Refused(f"{choice.wheel.filename} comes from {printable(str(prov.get('repo_id')), 200)}, not "
                          f"{want.repo_id}; fix the index")
        revision, variant = prov.get("revision"), prov.get("variant")
        if not isinstance(revision, str) or not COMMIT_SHA.fullmatch(revision):
            raise Refused(f"{choice.wheel.filename}: its {PROVENANCE} names no commit; rebuild it from a revision")
        if want.sha is not None and revision != want.sha:
            others.setdefault(revision, str(choice.wheel.version))
            shutil.rmtree(into)
            continue
        if not isinstance(variant, str) or not cache.valid_ref(variant) or \
                parse(variant).label != choice.wheel.label:
            raise Refused(f"{choice.wheel.filename}: its {PROVENANCE} names variant '{printable(str(variant), 200)}'"
                          ", whose label is not the wheel's; rebuild it")
        wheelcheck.check_lock_hash(dict(want.hashes), want.repo_id, variant, str(prov["package"]), folder, files,
                                   choice.wheel.filename)
        depends = [d for d in prov.get("kernel-depends") or [] if isinstance(d, dict)]
        return Got(want, choice.wheel.filename, choice.wheel.sha256, revision, variant, depends, folder, files,
                   str(prov["package"])), []
    if want.sha is not None and others:
        return None, [f"{want.repo_id} at {want.sha[:12]} ({want.why}): {url} has no build of that commit; the builds "
                      f"there that fit {env.label} on {env.arch}-{env.os} are of other commits:",
                      *(f"  {sha[:12]}  {version}" for sha, version in others.items()),
                      "  publish a build of the locked commit, or re-lock with `kernels lock`"]
    at = f" at {want.sha[:12]}" if want.sha else f" version {want.major}"
    return None, [f"{want.repo_id}{at} ({want.why}): no build on {url} fits {env.label} on {env.arch}-{env.os}; "
                  "builds there are, nearest first:", *build_lines(nearest(every, env))]


# -- the subcommand ------------------------------------------------------------------------------------------------


def run_download(args: DownloadArgs) -> int:
    if not args.index_url:
        raise UsageError("download needs --index-url URL (the index kernel-factory publishes)")
    url = simple.index_root(args.index_url)
    lock_path = Path(args.project_dir) / "kernels.lock"
    if not lock_path.is_file():
        raise UsageError(f"{lock_path}: no such file; run `kernels lock {args.project_dir}` first, or give the "
                         "project's folder")
    locked = {lk.repo_id: lk for lk in read_lock(lock_path)}
    if args.max_depends < 0:
        raise UsageError(f"--max-depends {args.max_depends}: give 0 or more")
    policy = Policy.make(args.allow_orgs, DEFAULT_ORGS, locked, args.max_depends)
    env = probe(resolve_python(args.python))
    root = cache.cache_root(os.environ)
    try:
        root.mkdir(parents=True, exist_ok=True)
        with ExitStack() as stack:
            return _download(locked, url, env, root, simple.session(), _scratch(stack, root), policy)
    except (cache.CacheUnusable, OSError) as exc:  # the writer's own line names no run: this one says nothing
        if isinstance(exc, cache.CacheUnusable):  # was installed
            err: Exception | None = unusable(exc.error, root) or exc
        elif isinstance(exc, shutil.Error):  # a copy's list of failures carries its errno in its text only
            err = unusable_from_text(str(exc), root)
        else:
            err = unusable(exc, root)
        if err is None:
            raise
        raise Unreachable(f"{str(err).partition('; ')[0]}; nothing was installed: make room there, or point "
                          "KERNELS_CACHE at another folder") from None  # (the part before '; ': "<path>: <errno text>")


def _scratch(stack: ExitStack, root: Path) -> Callable[[], Path]:
    """The folder wheels are downloaded and unpacked into, made on first use (a lock the cache satisfies
    already writes nothing): private scratch inside the cache (its file system), else, where the cache cannot
    be written (another user's, a read-only mount), a temporary folder elsewhere."""
    @functools.cache
    def get() -> Path:
        try:
            return stack.enter_context(cache.scratch(root))
        except Unreachable:
            return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kernel-factory-")))
    return get


def _download(locked: dict[str, LockedKernel], url: str, env: Environment, root: Path, session: Any,
              scratch: Callable[[], Path], policy: Policy) -> int:
    """Every locked kernel and, transitively, every kernel their kernel-depends need (depends.py), each at one
    commit, found and checked before anything is placed; a repository the policy refuses is never fetched."""
    queue = [lock_want(lk) for lk in locked.values()]
    from_lock = {w.key for w in queue}
    done: dict[tuple[str, str], Got] = {}
    edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
    pulled: set[tuple[str, str]] = set()  # kernels kernel-depends pull in beyond the lock
    problems: list[tuple[int, list[str]]] = []
    failed: set[tuple[str, str]] = set()
    while queue:
        want = queue.pop(0)
        if want.key in done or want.key in failed:
            continue
        refused = policy.refusal(want)  # never fetched
        try:
            got, why = (None, [refused]) if refused else _find(want, url, env, root, session, scratch)
            if got is not None:
                deps = wants_of(got.wheel, want.repo_id, got.depends, locked)
                edges[want.key] = [d.key for d in deps]
                pulled.update(d.key for d in deps if d.key not in from_lock)
                too_many = policy.too_many(pulled)
                if too_many:
                    problems.append((Refused.exit_code, [too_many]))
                    break
                queue += deps
        except Refused as exc:
            got, why = None, [str(exc)]
        if got is None:
            failed.add(want.key)
            problems.append((Refused.exit_code, why))
            continue
        done[want.key] = got
    cycle = None if problems else find_cycle(edges)
    if cycle:
        problems.append((Refused.exit_code, [
            "kernel-depends form a cycle, " + " -> ".join(f"{r} ({s[:12]})" for r, s in cycle) + ", which kernels "
            "refuses to load (Cyclic kernel dependency detected); fix the kernels' metadata"]))
    if problems:
        for _, lines in problems:
            report.error(printable(lines[0]))
            for line in lines[1:]:
                report.raw_error(printable(line))
        report.raw_error(f"nothing was installed in {root}")
        return worst(code for code, _ in problems)
    return _place_all(list(done.values()), root)


def _place_all(gots: list[Got], root: Path) -> int:
    """Every checked kernel into the cache: the snapshots first, then the refs (none move before every snapshot
    is there). On an OSError (a full disk) or a refusal (a file name the writer refuses, a link planted in the
    cache), what this run put in the cache is taken back (``Writer.take_back``: by identity, through no link,
    nothing another writer placed meanwhile), so that nothing of the run is visible; the error goes on."""
    writer = cache.Writer(root, "download")
    fetched, code = 0, EXIT_OK
    lines: list[str] = []
    try:
        placed: list[Got] = []
        for got in gots:
            what = f"{got.wheel}  (already there)"
            if got.folder is not None:
                try:
                    target = writer.place(cache.Placement(got.want.repo_id, got.sha, got.variant, got.folder,
                                                          got.files))
                except cache.CacheConflict as exc:  # the Hub's own snapshot of this commit lacks the variant
                    report.error(printable(str(exc)))
                    code = exc.exit_code
                    continue
                if not cache.is_ours(target.parent.parent):  # the Hub's own download of this commit and variant
                    try:  # an old-format lock's hash holds for it, as for a wheel (the Hub's copy is no exception)
                        wheelcheck.check_lock_hash(dict(got.want.hashes), got.want.repo_id, got.variant, got.package,
                                                   target, _file_hashes(target), f"the Hub's copy at {target}")
                    except Refused as exc:
                        report.error(printable(f"{exc}; left as it is: remove that snapshot and run again"))
                        code = exc.exit_code
                        continue
                    what = "(the Hub's copy, already there)"
                elif _file_hashes(target) != got.files:
                    report.error(f"{target} holds other files than {got.wheel} (an earlier wheel of this commit); "
                                 "left as it is: remove that folder and run again")
                    code = Refused.exit_code
                    continue
                else:
                    _remember(root, got)
                    fetched += 1
                    what = f"{got.wheel}  (downloaded)"
            placed.append(got)
            lines.append(f"{got.want.repo_id}  {got.sha[:12]}  {got.variant}  {what}")
        for got in placed:
            refs = [r for r in got.want.refs if cache.valid_ref(r)]
            if refs and got.folder is not None:  # place again, now with the refs: the snapshot is there already
                writer.place(cache.Placement(got.want.repo_id, got.sha, got.variant, got.folder, got.files,
                                             tuple(refs)))
            elif refs:  # already there: the refs still follow the lock
                writer.set_refs(got.want.repo_id, got.sha, refs)
    except (OSError, cache.CacheUnusable, Refused, LinkRefused):
        writer.take_back()
        raise
    for line in lines:
        report.info(printable(line))
    for note in writer.notes:
        report.raw_error(printable(f"note: {note}"))
    report.info(f"{len(gots)} kernel{'s' if len(gots) != 1 else ''} in {root}: {fetched} downloaded, "
                f"{len(gots) - fetched} already there")
    return code
