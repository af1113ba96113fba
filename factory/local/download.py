"""``kernel-factory download [PROJECT_DIR] --index-url URL``: kernels.lock -> the Hub cache, from your index.

The drop-in for ``kernels download .``. For each locked kernel (both kernels.lock formats, read by
verify/lockfile.py) it takes the wheel that fits this interpreter (the candidates ``which`` finds:
the variant root for this label, then universal and backend-noarch wheels), whose provenance
names the locked commit. The record beside a wheel (``files/<wheel>.json``), where the index
serves one, tells which wheels to skip without downloading them; the provenance inside the wheel
decides. The wheel's sha256 is checked against the index page, its package folder becomes
``<cache>/kernels--org--name/snapshots/<commit>/build/<variant>/`` (local/hubcache.py), and a
ref ``v<N>`` (or the locked branch) is written where the lock names one. Kernels named in a
wheel's ``kernel-depends`` are downloaded too: at their locked commit, else the newest wheel of
the version they ask for.

Nothing is written into the cache until every kernel has been found, downloaded and checked.
A kernel already in the cache from an earlier run, whose files still match what that run
recorded, is not downloaded again (the index's pages are still read).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from .. import report, simple
from ..atomic import TMP_PREFIX, file_digest, write_bytes
from ..errors import EXIT_OK, Refused, Unreachable, UsageError, unusable, worst
from ..record import PROVENANCE
from ..safe_text import printable
from ..variants import parse
from ..verify.lockfile import LockedKernel, read_lock
from . import hubcache
from .probe import Environment, probe, resolve_python
from .which import Choice, NoProject, build_lines, candidates, nearest

#: Beside the snapshot's hubcache marker: what each variant's files were when this command placed them.
FILES = ".kernel-factory-download.json"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class DownloadArgs:
    """``download``: the project folder (holding kernels.lock), the index, the interpreter to fit (None: this one)."""

    project_dir: str = "."
    index_url: str = ""
    python: str | None = None


@dataclass(frozen=True)
class Want:
    """One kernel to put in the cache: at a locked commit, or (an unlocked dependency) the newest of a major."""

    repo_id: str
    sha: str | None
    refs: tuple[str, ...] = ()
    major: int | None = None
    why: str = "kernels.lock"


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


# -- the cache's own record of what this command placed --------------------------------------------------------


def _file_hashes(folder: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, names in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in names:
            if name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            out[path.relative_to(folder).as_posix()] = file_digest(path)
    return out


def _placed(root: Path, repo_id: str, sha: str) -> dict[str, Any]:
    path = hubcache.repo_folder(root, repo_id) / "snapshots" / sha / FILES
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _cached(root: Path, want: Want, sha: str, choice: Choice) -> Got | None:
    """The kernel as an earlier run placed it, if its wheel is this one and its files are unchanged."""
    snapshot = hubcache.repo_folder(root, want.repo_id) / "snapshots" / sha
    for variant, entry in _placed(root, want.repo_id, sha).items():
        if not isinstance(entry, dict) or entry.get("wheel") != choice.wheel.filename:
            continue
        if entry.get("sha256") != choice.wheel.sha256 or not hubcache.is_ours(snapshot):
            continue
        folder = snapshot / "build" / variant
        if folder.is_dir() and not folder.is_symlink() and _file_hashes(folder) == entry.get("files"):
            return Got(want, choice.wheel.filename, choice.wheel.sha256, sha, variant, list(entry.get("depends") or []))
    return None


def _remember(root: Path, got: Got) -> None:
    snapshot = hubcache.repo_folder(root, got.want.repo_id) / "snapshots" / got.sha
    if not hubcache.is_ours(snapshot):
        return  # the Hub's own snapshot of this commit: nothing of ours to record there
    data = _placed(root, got.want.repo_id, got.sha)
    data[got.variant] = {"wheel": got.wheel, "sha256": got.wheel_sha256, "files": got.files, "depends": got.depends}
    write_bytes(snapshot / FILES, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())


# -- the index ------------------------------------------------------------------------------------------------


def _record_revision(url: str, session: Any) -> str | None:
    """The revision the record beside a wheel names (kernel-factory's index serves them), or None."""
    try:
        got = simple.fetch(url + ".json", session, "--index-url")
    except Unreachable:
        return None
    if got is None:
        return None
    try:
        data = json.loads(got[0])
    except ValueError:
        return None
    revision = data.get("revision") if isinstance(data, dict) else None
    return revision if isinstance(revision, str) else None


def _fetch_wheel(choice: Choice, session: Any, into: Path) -> Path:
    """The wheel, downloaded into ``into`` and checked against the sha256 the index page gives."""
    import requests

    w = choice.wheel
    if not w.sha256:
        raise Refused(f"{choice.root} gives no sha256 for {w.filename}; publish the index with hashes")
    dest = into / w.filename
    digest = hashlib.sha256()
    local = simple.local_path(w.url) if w.url.startswith("file://") else None
    try:
        with open(dest, "wb") as out:
            if local is not None:
                with open(local, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            else:
                try:
                    with session.get(w.url, stream=True, timeout=60,
                                     headers={"User-Agent": simple.USER_AGENT}) as resp:
                        if resp.status_code != 200:
                            raise Unreachable(f"--index-url: {w.url} answered HTTP {resp.status_code}; "
                                              "check the index")
                        for chunk in resp.iter_content(_CHUNK):
                            digest.update(chunk)
                            out.write(chunk)
                except requests.RequestException as exc:
                    raise Unreachable(f"--index-url: cannot download {w.url} ({type(exc).__name__}); "
                                      "check the network") from None
    except FileNotFoundError:
        raise Unreachable(f"--index-url: {local} is missing; check the index") from None
    if digest.hexdigest() != w.sha256:
        dest.unlink()
        raise Refused(f"{w.filename}: sha256 {digest.hexdigest()[:16]}... is not the {w.sha256[:16]}... that "
                      f"{choice.root} gives; nothing was installed: republish the wheel or check the mirror")
    return dest


def _unpack(wheel: Path, into: Path) -> tuple[dict[str, Any], Path]:
    """(provenance, the package folder unpacked into ``into``) of a kernel wheel."""
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(f".dist-info/{PROVENANCE}")]
        if len(names) != 1:
            raise Refused(f"{wheel.name} carries no {PROVENANCE}; it was not built by kernel-factory")
        try:
            prov = json.loads(zf.read(names[0]))
        except ValueError:
            raise Refused(f"{wheel.name}: its {PROVENANCE} is not valid JSON; rebuild it") from None
        package = prov.get("package") if isinstance(prov, dict) else None
        if not isinstance(package, str) or not package.isidentifier():
            raise Refused(f"{wheel.name}: its {PROVENANCE} names no package; rebuild it with kernel-factory")
        folder = into / "build"
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(package + "/"):
                continue
            rel = info.filename[len(package) + 1:]
            parts = rel.split("/")
            if "\\" in rel or any(p in ("", ".", "..") for p in parts):
                raise Refused(f"{wheel.name}: member '{printable(info.filename)}' is not a plain relative path")
            target = folder.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
            if (info.external_attr >> 16) & 0o111:
                target.chmod(0o755)
    return prov, folder


def _find(want: Want, url: str, env: Environment, root: Path, session: Any, scratch: Path
          ) -> tuple[Got | None, list[str]]:
    """The kernel, found on the index (downloaded, unpacked) or in the cache; else (None, why lines)."""
    project = str(canonicalize_name(want.repo_id.split("/", 1)[1]))
    try:
        found, every = candidates(url, project, env, session, yanked=True)
    except NoProject:
        return None, [f"{want.repo_id} ({want.why}): {url} has no project {project} (no simple/{project}/ page); "
                      "publish it there or fix --index-url"]
    if want.major is not None:
        found = [c for c in found if c.wheel.version.major == want.major]
    repo = hubcache.repo_folder(root, want.repo_id)
    for choice in found:
        sha = want.sha or hubcache.read_ref(repo, f"v{want.major}")
        cached = _cached(root, want, sha, choice) if sha else None
        if cached is not None:
            return cached, []
        if want.sha is not None:
            hint = _record_revision(choice.wheel.url, session)
            if hint is not None and hint != want.sha:
                continue
        into = Path(tempfile.mkdtemp(dir=scratch))
        wheel = _fetch_wheel(choice, session, into)
        prov, folder = _unpack(wheel, into)
        wheel.unlink()
        if prov.get("repo_id") != want.repo_id:
            raise Refused(f"{choice.wheel.filename} comes from {printable(str(prov.get('repo_id')))}, not "
                          f"{want.repo_id}; fix the index")
        revision, variant = prov.get("revision"), prov.get("variant")
        if not isinstance(revision, str) or not hubcache.SHA.fullmatch(revision):
            raise Refused(f"{choice.wheel.filename}: its {PROVENANCE} names no commit; rebuild it from a revision")
        if want.sha is not None and revision != want.sha:
            shutil.rmtree(into)
            continue
        if not isinstance(variant, str) or parse(variant).label != choice.wheel.label:
            raise Refused(f"{choice.wheel.filename}: its {PROVENANCE} names variant '{printable(str(variant))}', "
                          "whose label is not the wheel's; rebuild it")
        depends = [d for d in prov.get("kernel-depends") or [] if isinstance(d, dict)]
        files = _file_hashes(folder)
        return Got(want, choice.wheel.filename, choice.wheel.sha256, revision, variant, depends, folder, files), []
    at = f" at {want.sha[:12]}" if want.sha else f" version {want.major}"
    return None, [f"{want.repo_id}{at} ({want.why}): no build on {url} fits {env.label} on {env.arch}-{env.os}; "
                  "builds there are, nearest first:", *build_lines(nearest(every, env))]


def _depends(got: Got, locked: dict[str, LockedKernel]) -> list[Want]:
    out = []
    for dep in got.depends:
        repo_id, version = dep.get("repo-id"), dep.get("version")
        if not isinstance(repo_id, str) or repo_id.count("/") != 1:
            continue
        why = f"kernel-depends of {got.want.repo_id}"
        major = version if isinstance(version, int) and not isinstance(version, bool) else None
        if repo_id in locked:
            lk = locked[repo_id]
            out.append(Want(repo_id, lk.sha, (lk.ref,) if lk.ref else (), None, why))
        elif major is not None:
            out.append(Want(repo_id, None, (f"v{major}",), major, why))
    return out


# -- the subcommand ------------------------------------------------------------------------------------------------


def run_download(args: DownloadArgs) -> int:
    if not args.index_url:
        raise UsageError("download needs --index-url URL (the index kernel-factory publishes)")
    lock_path = Path(args.project_dir) / "kernels.lock"
    if not lock_path.is_file():
        raise UsageError(f"{lock_path}: no such file; run `kernels lock {args.project_dir}` first, or give the "
                         "project's folder")
    locked = {lk.repo_id: lk for lk in read_lock(lock_path)}
    env = probe(resolve_python(args.python))
    root = hubcache.cache_root(os.environ)
    url = args.index_url.rstrip("/")
    session = simple.session()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}download-", dir=root) as tmp:
            return _download(locked, url, env, root, session, Path(tmp))
    except OSError as exc:
        err = unusable(exc, root)
        if err is None:
            raise
        what = str(err).partition("; ")[0]  # "<path>: No space left on device"
        raise Unreachable(f"{what}; nothing was installed: make room there, or point KERNELS_CACHE at another "
                          "folder") from None


def _download(locked: dict[str, LockedKernel], url: str, env: Environment, root: Path, session: Any,
              scratch: Path) -> int:
    queue = [Want(lk.repo_id, lk.sha, (lk.ref,) if lk.ref else ()) for lk in locked.values()]
    done: dict[str, Got] = {}
    problems: list[tuple[int, list[str]]] = []
    failed: set[str] = set()
    while queue:
        want = queue.pop(0)
        if want.repo_id in done or want.repo_id in failed:
            continue
        try:
            got, why = _find(want, url, env, root, session, scratch)
        except Refused as exc:
            got, why = None, [str(exc)]
        if got is None:
            failed.add(want.repo_id)
            problems.append((Refused.exit_code, why))
            continue
        done[want.repo_id] = got
        queue += _depends(got, locked)
    if problems:
        for _, lines in problems:
            report.error(lines[0])
            for line in lines[1:]:
                report.raw_error(line)
        report.raw_error(f"nothing was installed in {root}")
        return worst(code for code, _ in problems)
    notes: list[str] = []
    fetched, code = 0, EXIT_OK
    for got in done.values():
        state = "already there"
        if got.folder is not None:
            try:
                target = hubcache.place(root, got.want.repo_id, got.sha, got.variant, got.folder,
                                        refs=[r for r in got.want.refs if hubcache.valid_ref(r)], files=got.files,
                                        origin="download",
                                        notes=notes)
            except hubcache.CacheConflict as exc:  # the Hub's own snapshot of this commit lacks the variant
                report.error(str(exc))
                code = exc.exit_code
                continue
            if not hubcache.is_ours(target.parent.parent):  # the Hub's own download of this commit and variant
                report.info(f"{got.want.repo_id}  {got.sha[:12]}  {got.variant}  (the Hub's copy, already there)")
                continue
            if _file_hashes(target) != got.files:
                report.error(f"{target} holds other files than {got.wheel} (an earlier wheel of this commit); "
                             "left as it is: remove that folder and run again")
                code = Refused.exit_code
                continue
            _remember(root, got)
            fetched += 1
            state = "downloaded"
        report.info(f"{got.want.repo_id}  {got.sha[:12]}  {got.variant}  {got.wheel}  ({state})")
    for note in notes:
        report.raw_error(f"note: {note}")
    report.info(f"{len(done)} kernel{'s' if len(done) != 1 else ''} in {root}: {fetched} downloaded, "
                f"{len(done) - fetched} already there")
    return code
