"""``kernel-factory publish``: copy a store and index root to a destination (docs/publish.md), in phases so that a
reader never sees a link to a file that is not there yet; then what the store withdrew is deleted there
(withdrawals.py), and nothing else at the destination ever is."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING

from .. import report, space
from ..config import DEFAULT_RETRY_S, Flags, Location, resolve
from ..errors import EXIT_OK, EXIT_REFUSED, Refused, UsageError
from ..nofollow import LinkRefused, open_nofollow, private
from ..record import MAX_RECORD_BYTES
from .base import Destination, LocalFile

if TYPE_CHECKING:
    from ..config import Options

StoreLock = Callable[[Path, float], AbstractContextManager[None]]  # (store folder, seconds to wait) -> its lock


@dataclass(frozen=True)
class PublishArgs:
    flags: Flags
    to: str | None = None
    repository: str | None = None
    dry_run: bool = False
    json: bool = False  # one JSON document on stdout (docs/json.md); messages go to stderr


def open_destination(to: str | None, options: Options | None = None, repository: str | None = None) -> Destination:
    """``--to`` -> a Destination; without it, an upload endpoint named as twine names it (``--repository``...)."""
    simple_url = None if options is None else options.simple_url
    loc = Location.parse(to) if to is not None else None
    if loc is None or repository or loc.scheme in ("http", "https"):
        from . import upload

        if to is not None and repository:
            raise UsageError("pass either --to or --repository, not both")
        retry_s = DEFAULT_RETRY_S if options is None else options.variables.retry_s
        return upload.UploadDestination(upload.resolve(to, repository, simple_url), retry_s)
    if simple_url:
        raise UsageError(f"--simple-url (or simple-url in the config) applies to http(s):// upload endpoints, "
                         f"not --to {to}; drop it")
    if loc.scheme == "s3":
        from ..s3util import PutOptions
        from .s3 import S3Destination

        return S3Destination(loc.display, PutOptions.from_options(options))
    if loc.local is None:
        raise UsageError(f"--to {to!r}: unknown scheme {loc.scheme}://; use a folder, file://, s3:// or http(s)://")
    from .directory import DirectoryDestination

    return DirectoryDestination(loc.local)


def list_root(root: Path, refused: list[tuple[str, str]] | None = None) -> list[LocalFile]:
    """Every regular file under ``root``, sorted, private and hidden names left out; a link or anything else not a
    regular file or folder is never followed nor published: it adds (its path, why) to ``refused``."""
    found: list[LocalFile] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [name for name in sorted(dirs) if _plain(root, Path(folder, name), stat.S_ISDIR, refused)]
        for name in sorted(names):
            path = Path(folder, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if _plain(root, path, stat.S_ISREG, refused, st):
                found.append(LocalFile(path.relative_to(root).as_posix(), path, st.st_size))
    return found


def _plain(root: Path, path: Path, kind: Callable[[int], bool], refused: list[tuple[str, str]] | None,
           st: os.stat_result | None = None) -> bool:
    """Whether ``path`` is published: a name not private, a regular file or folder (``kind``); a link or anything
    else is not, and adds (its path, why) to ``refused``."""
    if private(path.name):  # temporary files (TMP_PREFIX) and the tool's own state
        return False
    st = os.lstat(path) if st is None else st
    if stat.S_ISLNK(st.st_mode):
        problem = (f"a symbolic link (-> {os.readlink(path)}); publish never follows links out of the store: "
                   "replace it with the file itself, or remove it")
    elif not kind(st.st_mode):
        problem = "not a regular file or folder; remove it"
    else:
        return True
    if refused is not None:
        refused.append((path.relative_to(root).as_posix(), problem))
    return False


def _recorded_sha256(f: LocalFile) -> str | None:
    """The sha256 that the record beside a wheel (or its ``.metadata``) in ``files/`` gives it, if there is one."""
    if not f.rel.startswith("files/"):
        return None
    if f.name.endswith(".whl"):
        record, key = f.path.with_name(f"{f.name}.json"), "sha256"
    elif f.name.endswith(".whl.metadata"):
        record, key = f.path.with_name(f"{f.name.removesuffix('.metadata')}.json"), "metadata_sha256"
    else:
        return None
    try:
        with os.fdopen(open_nofollow(record, "record"), "rb") as fh:
            data = json.loads(fh.read(MAX_RECORD_BYTES + 1))
    except (OSError, ValueError, RecursionError, LinkRefused):
        return None  # no record (or a damaged one, which `index` names): nothing to compare with
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def phases(files: Iterable[LocalFile]) -> list[list[LocalFile]]:
    """Wheels, .metadata, other ``files/``, pages (deepest first, ``projects/`` after the ``simple/`` they link)."""
    def phase(f: LocalFile) -> tuple[int, float]:
        if f.rel.startswith("files/"):
            return (0, 0 if f.name.endswith(".whl") else 1 if f.name.endswith(".whl.metadata") else 2)
        # a project's page for a person links its simple pages: it goes in the phase after them
        return (1, -(f.rel.count("/") - (0.5 if f.rel.startswith("projects/") else 0)))

    return [list(group) for _phase, group in groupby(sorted(files, key=phase), key=phase)]  # stable: in order


@dataclass
class Summary:
    """What a publish did (or, in a dry run, would do); file paths relative to the root."""

    uploaded_files: list[str] = field(default_factory=list)  # new or changed: put (or would be put)
    unchanged_files: list[str] = field(default_factory=list)  # already there with the same bytes
    not_taken: list[str] = field(default_factory=list)  # files this destination does not take (pages, records)
    refused: list[str] = field(default_factory=list)
    uploaded_bytes: int = 0
    removed: list[str] = field(default_factory=list)  # withdrawn from the store: deleted there (withdrawals.py)

    def to_json(self, destination: str, dry_run: bool) -> dict[str, object]:
        """The ``publish --json`` document (see docs/publish.md)."""
        return {
            "destination": destination,
            "dry_run": dry_run,
            "uploaded": sorted(self.uploaded_files),
            "uploaded_bytes": self.uploaded_bytes,
            "unchanged": sorted(self.unchanged_files),
            "skipped": sorted(self.not_taken),
            "refused": sorted(self.refused),
            "removed": self.removed,  # what the store withdrew, deleted there (or, in a dry run, would be)
        }


def _run_all(fn: Callable[[LocalFile], None], items: Sequence[LocalFile], workers: int) -> None:
    """``fn`` over ``items`` in threads; the first exception stops the rest and is raised."""
    if workers <= 1 or len(items) <= 1:
        for item in items:
            fn(item)
        return
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(fn, item) for item in items]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for fut in futures:
            if fut in done and fut.exception() is not None:
                raise fut.exception()  # type: ignore[misc]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def publish(root: Path, dest: Destination, *, dry_run: bool = False,
            out: Callable[[str], None] = report.info) -> Summary:
    summary = Summary()
    refused: list[tuple[str, str]] = []
    listed = list_root(root, refused)
    for rel, why in refused:
        summary.refused.append(rel)
        out(f"refused {rel}: {why}")
    files = [f for f in listed if dest.wants(f)]
    summary.not_taken = [f.rel for f in listed if not dest.wants(f)]
    dest.prepare(files, dry_run=dry_run)
    from . import linked

    with ExitStack() as stack:  # the scratch folder of files copied from the store, removed at the end
        local = {f.rel for f in files}  # the files pages link that are neither published from here nor there
        absent = sorted(rel for rel in linked.linked(root, files) - local if not dest.has(rel)) if files else []
        if absent:
            scratch = None if dry_run else Path(stack.enter_context(space.scratch_dir(None, "kernel-factory-publish-")))
            files.extend(linked.fetch(root, absent, scratch, out))
        lock = threading.Lock()

        def one(f: LocalFile) -> None:
            try:
                state = dest.state(f)
                expected = _recorded_sha256(f) if state != "same" else None
                if expected is not None and f.sha256() != expected:  # never publish bytes other than the record's
                    raise Refused(f"its sha256 {f.sha256()} is not its record's {expected}; rebuild it, or run "
                                  "`kernel-factory index --repair`")
                if state != "same" and not dry_run:
                    dest.put(f)
            except Refused as exc:
                with lock:
                    summary.refused.append(f.rel)
                    out(f"refused {f.rel}: {exc}")
                return
            with lock:
                if state == "same":
                    summary.unchanged_files.append(f.rel)
                    if dry_run:
                        out(f"already there: {f.rel}")
                    return
                summary.uploaded_files.append(f.rel)
                summary.uploaded_bytes += f.size
                verb, done = ("upload", "uploaded") if state == "new" else ("replace", "replaced")
                out(f"{f'would {verb}' if dry_run else done} {f.rel} ({report.megabytes(f.size)})")

        for phase in phases(files):
            _run_all(one, phase, dest.workers)
        from .withdrawals import carry  # then what the store withdrew goes, pages first (docs/withdraw.md)

        there = set(summary.uploaded_files) | set(summary.unchanged_files)
        summary.removed = carry(root, dest, files, there, dry_run=dry_run, out=out)
        return summary


def store_root(flags: Flags, opts: Options | None = None) -> Path:
    """The local folder to publish: ``--store``, else the index root or store of the options (default ``public``)."""
    opts = resolve(flags) if opts is None else opts  # defaults -> factory.toml -> environment -> flags
    store = Location.parse(flags.given.get("store") or opts.index_out or opts.store.display)  # --store as given
    root = store.local
    if root is None:
        raise UsageError(
            f"--store {store}: publish reads a local folder; copy the store down and run `kernel-factory index` first"
        )
    if not root.is_dir():
        raise UsageError(f"store folder {root} does not exist; run `kernel-factory build` and `index`, or fix --store")
    return root


def run_publish(args: PublishArgs, lock: StoreLock | None = None) -> int:
    """The ``publish`` subcommand: 0 when everything is there, 3 when some files were refused."""
    opts = resolve(args.flags)
    root = store_root(args.flags, opts)
    dest = open_destination(args.to, opts, args.repository)
    if dest.same_root(root):
        raise UsageError(f"--to {args.to} is the store folder itself; publish to another folder")
    # -q: no per-file lines, only the summary and errors; --json: stdout holds the document only (report.py)
    report.info(f"publishing {root} to {dest.display}{' (dry run)' if args.dry_run else ''}")
    if Location.parse(dest.display).scheme == "s3":  # the put args every object gets, shown before any upload
        from ..s3util import notices

        for line in notices(dest.display, opts):
            report.raw_error(line)
    try:
        # the store lock (store/lock.py's, handed down by the CLI) for the whole publish, so the pages copied link
        # only files copied before them; none where this user cannot write (no writer)
        writable = lock is not None and os.access(root, os.W_OK)
        with lock(root, opts.variables.lock_wait_s) if writable and lock else nullcontext():
            summary = publish(root, dest, dry_run=args.dry_run)
    finally:
        dest.close()
    sent = f"{len(summary.uploaded_files)} files ({report.megabytes(summary.uploaded_bytes)})"
    same = len(summary.unchanged_files)
    report.result(f"would upload {sent}, {same} already there" if args.dry_run else
                  f"uploaded {sent}, skipped {same} unchanged")
    if summary.removed:
        report.result(f"{'would remove' if args.dry_run else 'removed'} {len(summary.removed)} withdrawn file(s)")
    if args.json:
        report.document(summary.to_json(dest.display, args.dry_run))
    if summary.refused:
        report.error(f"{len(summary.refused)} files refused: {', '.join(summary.refused)}")
        return EXIT_REFUSED
    return EXIT_OK
