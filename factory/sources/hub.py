"""A kernel repository on the Hugging Face Hub (or a Hub mirror), through huggingface_hub. Downloads go through the
huggingface_hub cache, so a second fetch of the same revision downloads nothing."""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urljoin, urlsplit

from huggingface_hub import HfApi, constants, get_cached_repo_tree, hf_raise_for_status, snapshot_download
from huggingface_hub.errors import (
    CachedRepoTreeNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import GitRefInfo, GitRefs
from huggingface_hub.utils._datetime import parse_datetime
from huggingface_hub.utils._headers import build_hf_headers
from huggingface_hub.utils._http import http_backoff
from huggingface_hub.utils.tqdm import disable_progress_bars
from packaging.version import InvalidVersion, Version

from .. import report
from ..config import Variables, repo_folder_name, variables
from ..errors import Unreachable, UsageError, VersionNotFound, unusable
from ..nofollow import TMP_PREFIX, atomic_open
from ..record import COMMIT_SHA
from ..retry import Backoff
from ..safe_text import has_control, printable, quiet_credentials, redact_url
from .base import Refs

T = TypeVar("T")

try:  # huggingface_hub 2.x talks through httpx2, 1.x through httpx
    from httpx2 import TransportError
except ImportError:  # pragma: no cover
    from httpx import TransportError  # type: ignore[assignment]
REPO_TYPES = ("kernel", "model")
BUSY = frozenset({429, 502, 503, 504})  # retried; olah answers 500 for an unknown revision, so 500 is not


# A connection the server had accepted, then dropped (reset mid-transfer): retried within the same budget as
# Busy. A refused connection (ConnectError) is not: nothing is listening.
DROPPED = frozenset({"ReadError", "RemoteProtocolError", "WriteError"})


class Dropped(Unreachable):
    """The Hub dropped a connection mid-transfer: retried with backoff, then exit 4."""


class Busy(Unreachable):
    """The Hub answered 429 or 5xx: retried with backoff, then exit 4."""

    def __init__(self, message: str, status: int | None, headers: Mapping[str, str] | None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def _status(exc: BaseException) -> int | None:
    code = getattr(getattr(exc, "response", None), "status_code", None)
    return code if isinstance(code, int) else None


def ref_problem(name: str, sha: str) -> str | None:
    """Why a ref name and target from a Hub answer cannot be used (it becomes a file path in the cache), or None."""
    if not name or len(name) > 255 or name.startswith("/") or "\\" in name or has_control(name):
        return "an empty, absolute or overlong name, or one with a backslash or a control character"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "a name with an empty, '.' or '..' part"
    if not COMMIT_SHA.fullmatch(sha):
        return "a target that is not a 40-character commit sha"
    return None


def origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(scheme)


class HubSource:
    """One Hub repository of type kernel (or model, for older kernels)."""

    def __init__(self, repo_id: str, *, repo_type: str | None = None, env: Variables | None = None) -> None:
        """``env``: the Hub's endpoint, token, offline switch and cache, and the retry budget, as config.resolve
        read them (Options.variables); None: config.variables() of this process."""
        env = variables() if env is None else env
        org, _, name = repo_id.partition("/")
        if not org or not name or "/" in name:
            raise UsageError(f"{repo_id!r} is not a Hub repository id; write it as org/name")
        if repo_type is not None and repo_type not in REPO_TYPES:
            raise UsageError(f"repository type {repo_type!r} is not one of {', '.join(REPO_TYPES)}")
        self.repo_id: str | None = repo_id
        self._id = repo_id
        self.name = name
        self.display = repo_id
        self.endpoint = (env.hf_endpoint or constants.ENDPOINT).rstrip("/")
        self.shown = redact_url(self.endpoint)  # what messages print: no credentials
        quiet_credentials()  # nor huggingface_hub's own warnings (retries print the URL)
        _keep_token_home(self.endpoint)
        self.token = env.hf_token
        self.offline = env.hf_offline
        self.cache_dir = env.hf_cache or constants.HF_HUB_CACHE
        self.retry_s = env.retry_s
        if not sys.stderr.isatty():  # huggingface_hub's per-download bars suit a terminal, not a CI log (its own
            disable_progress_bars()  # switch, which an explicit HF_HUB_DISABLE_PROGRESS_BARS=0 still overrides)
        self.api = HfApi(endpoint=self.endpoint, token=self.token)
        self._types = (repo_type,) if repo_type else REPO_TYPES
        self._type: str | None = None
        self._refs: Refs | None = None
        self._commits: dict[str, tuple[int, int]] = {}
        self._sizes: dict[str, dict[str, int]] = {}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    @contextmanager
    def errors(self, what: str) -> Iterator[None]:
        """Turn huggingface_hub and network errors into one-line factory errors."""
        where = f"{self._id} on {self.shown}"
        try:
            yield
        except (OfflineModeIsEnabled, LocalEntryNotFoundError, CachedRepoTreeNotFoundError) as exc:
            cause = exc.__cause__  # snapshot_download falls back to the cache when the Hub answers 429 or 5xx
            if isinstance(cause, HfHubHTTPError) and _status(cause) in BUSY:
                raise self._busy(what, cause) from None
            raise Unreachable(
                f"{where}: {what} is not in the huggingface_hub cache ({self.cache_dir}) and the Hub is "
                "not reachable or HF_HUB_OFFLINE is set; run once online to fill the cache"
            ) from None
        except RevisionNotFoundError:
            raise VersionNotFound(f"{where}: {what}: no such revision; check the branch, tag or commit") from None
        except HfHubHTTPError as exc:
            code = _status(exc)
            if code in (401, 403):
                raise Unreachable(
                    f"{where}: {what} refused with HTTP {code}; set HF_TOKEN to a token that can read the repository"
                ) from None
            if code in BUSY:
                raise self._busy(what, exc) from None
            if code is not None and code < 500:
                raise VersionNotFound(f"{where}: {what} failed with HTTP {code}") from None
            raise Unreachable(f"{where}: {what} failed with HTTP {code}; the Hub is unavailable, retry later") from None
        except OSError as exc:
            full = unusable(exc, self.cache_dir)  # the cache (or scratch) full, read-only or forbidden
            if full is not None:
                raise full from None
            raise self._network(what, exc) from None
        except TransportError as exc:  # connection refused or reset, broken downloads
            if type(exc).__name__ in DROPPED:  # the server dropped a connection it had taken: try again
                raise Dropped(str(self._network(what, exc))) from None
            raise self._network(what, exc) from None

    def _busy(self, what: str, exc: HfHubHTTPError) -> Busy:
        code = _status(exc)
        return Busy(f"{self._id} on {self.shown}: {what} failed with HTTP {code}; the Hub is busy or unavailable, "
                    "retry later", code, getattr(getattr(exc, "response", None), "headers", None))

    def _network(self, what: str, exc: BaseException) -> Unreachable:
        where = f"{self._id} on {self.shown}"
        detail = redact_url(str(exc).splitlines()[0])[:200] if str(exc) else ""
        return Unreachable(
            f"{where}: {what} failed ({type(exc).__name__}{': ' + detail if detail else ''}); "
            "check HF_ENDPOINT and the network, or set HF_HUB_OFFLINE=1 to use a filled cache"
        )

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn`` with one-line errors; HTTP 429/502/503/504 retried (Retry-After honoured) within a bounded time."""
        backoff = Backoff(f"{self._id}: {what}", self.retry_s)
        while True:
            try:
                with self.errors(what):
                    return fn()
            except Dropped as dropped:  # a reset mid-transfer, as pip retries it (a download resumes)
                if not backoff.again():
                    raise Unreachable(str(dropped)) from None
            except Busy as busy:
                if not backoff.again(busy.headers, busy.status):
                    raise Busy(f"{busy} (gave up after {backoff.tries} tries in {backoff.elapsed:.0f} s)",
                               busy.status, busy.headers) from None

    def _storage(self, repo_type: str) -> Path:
        return Path(self.cache_dir) / repo_folder_name(self._id, repo_type)

    @property
    def repo_type(self) -> str:
        if self._type is None:
            self.refs()
        assert self._type is not None
        return self._type

    def refs(self) -> Refs:
        if self._refs is not None:
            return self._refs
        if self.offline:
            return self._cached_refs()
        def list_refs(repo_type: str) -> GitRefs:
            try:
                return self.api.list_repo_refs(self._id, repo_type=repo_type)
            except GatedRepoError:
                raise Unreachable(f"{self._id} on {self.shown} is gated; accept its terms on the Hub "
                                  "and set HF_TOKEN to a token of that account") from None
            except RepositoryNotFoundError:  # the Hub answers 401 RepoNotFound to anonymous callers
                raise VersionNotFound(repo_type) from None

        for repo_type in self._types:
            try:
                raw = self._call("listing refs", functools.partial(list_refs, repo_type))
            except VersionNotFound:
                continue  # not a repository of this type (or a plain 404, as olah answers)
            self._type = repo_type
            self._refs = Refs(branches=self._usable(raw.branches), tags=self._usable(raw.tags))
            self._remember_refs(self._refs)
            return self._refs
        tried = " and ".join(self._types) + (" types" if len(self._types) > 1 else " type")
        raise UsageError(f"no kernel repository {self._id} on {self.shown} (tried {tried}); check the repository id "
                         "and HF_ENDPOINT")

    def _usable(self, refs: list[GitRefInfo]) -> dict[str, str]:
        """Ref name -> sha of the refs whose name and target are safe to use; one warning line per other ref."""
        usable: dict[str, str] = {}
        for ref in refs:
            name, sha = str(ref.name), str(ref.target_commit)
            problem = ref_problem(name, sha)
            if problem is None:
                usable[name] = sha
            else:
                report.warn(f"{self._id} on {self.shown}: ignored the ref {name[:100]!r}: {problem}; "
                            "check HF_ENDPOINT points at a Hub you trust")
        return usable

    def _remember_refs(self, refs: Refs) -> None:
        """Write branch and tag -> sha into the cache's refs/ folder, as huggingface_hub does, for offline runs."""
        folder = self._storage(self.repo_type) / "refs"
        inside = folder.resolve()
        for name, sha in {**refs.branches, **refs.tags}.items():
            path = folder / name
            if ref_problem(name, sha) is not None or not path.resolve().is_relative_to(inside):
                continue  # never a path outside the cache's refs/ folder
            try:
                if path.is_file() and path.read_text() == sha:
                    continue
                with atomic_open(path, fsync=False) as f:  # a random temporary name, then a rename
                    f.write(sha.encode())
            except OSError:
                return  # a read-only cache only loses offline refs

    def _cached_refs(self) -> Refs:
        for repo_type in self._types:
            folder = self._storage(repo_type) / "refs"
            if not folder.is_dir():
                continue
            refs = Refs()
            for path in sorted(folder.rglob("*")):
                if not path.is_file() or path.name.startswith(TMP_PREFIX):
                    continue
                name = path.relative_to(folder).as_posix()
                (refs.tags if _looks_like_tag(name) else refs.branches)[name] = path.read_text().strip()
            self._type, self._refs = repo_type, refs
            return refs
        raise Unreachable(
            f"{self._id}: HF_HUB_OFFLINE is set and the repository is not in the huggingface_hub cache "
            f"({self.cache_dir}); run once online to fill the cache"
        )

    def resolve(self, revision: str) -> str:
        refs = self.refs()
        named = refs.branches.get(revision, refs.tags.get(revision))  # a branch before a tag of the same name
        if named is not None:
            return named
        if revision.lower() in {*refs.branches.values(), *refs.tags.values()}:
            return revision.lower()
        if self.offline:
            snapshots = self._storage(self.repo_type) / "snapshots"
            found = sorted(p.name for p in snapshots.glob(f"{revision}*")) if snapshots.is_dir() else []
            if len(found) == 1:
                return found[0]
            raise VersionNotFound(self._no_revision(revision, refs) + " in the offline cache")
        def info_of() -> Any:
            try:
                return self.api.repo_info(self._id, repo_type=self.repo_type, revision=revision)
            except HfHubHTTPError as exc:
                # The refs listing worked with these credentials, so a 401/403 here (olah) means no such revision.
                code = _status(exc)
                if code in (401, 403, 404):
                    raise VersionNotFound(revision) from None
                if code == 500:
                    # olah answers 500 for an unknown sha: if the Hub still lists refs, the revision is unknown.
                    self.api.list_repo_refs(self._id, repo_type=self.repo_type)
                    raise VersionNotFound(revision) from None
                raise

        try:
            sha: str | None = self._call(f"revision {revision!r}", info_of).sha
            if not sha or (COMMIT_SHA.fullmatch(revision.lower()) and sha != revision.lower()):
                raise VersionNotFound(revision)
        except VersionNotFound:
            raise VersionNotFound(self._no_revision(revision, refs)) from None
        return sha

    def _no_revision(self, revision: str, refs: Refs) -> str:
        have = ", ".join(sorted(refs.branches) + sorted(refs.tags)) or "none"
        return f"{self._id}: no revision {revision!r} (branches and tags: {have})"

    def _history(self, sha: str) -> tuple[int, int]:
        """(number of commits reachable from sha, commit time of sha) from the commits endpoint."""
        if sha in self._commits:
            return self._commits[sha]
        if self.offline:
            raise Unreachable(
                f"{self._id}: the commit history of {sha[:12]} is not available with HF_HUB_OFFLINE set; "
                "run once online (the store then keeps the version)"
            )
        url = f"{self.endpoint}/api/{self.repo_type}s/{self._id}/commits/{sha}"
        count = 0
        first_date: str | None = None
        total: int | None = None
        for page, response in self.pages(f"commit history of {sha[:12]}", "the commits endpoint", url):
            if first_date is None and page and isinstance(page[0], dict):
                first_date = str(page[0].get("date") or "")
                header = response.headers.get("x-total-count")
                total = int(header) if header and header.isascii() and header.isdigit() else None
            count += len(page)
            if total is not None:
                break
        if not first_date:
            raise Unreachable(f"{self._id}: commits endpoint of {self.shown} gave no date for {sha[:12]}")
        try:
            when = int(parse_datetime(first_date).timestamp())
        except ValueError:
            raise Unreachable(f"{self._id}: commits endpoint gave an unreadable date {first_date!r}") from None
        self._commits[sha] = (total if total is not None else count, when)
        return self._commits[sha]

    def pages(self, what: str, listing: str, url: str,
              params: dict[str, str] | None = None) -> Iterator[tuple[list[Any], Any]]:
        """Each page (its JSON list, and the response) of a paginated Hub answer, the token sent with every request.
        Every listing goes through here: ``rel="next"`` is followed only on HF_ENDPOINT's own scheme, host and port
        (never huggingface_hub's own paginator, which follows it to any host). Errors and retries by ``_call``."""
        headers = build_hf_headers(token=self.token)

        def get(url: str, params: dict[str, str] | None) -> tuple[list[Any], Any]:
            # a dropped connection is tried again (as huggingface_hub's own paginator did); 429/5xx by ``_call``
            response = http_backoff("GET", url, headers=headers, params=params, retry_on_status_codes=(), max_retries=3)
            hf_raise_for_status(response)
            try:
                page = response.json()
            except ValueError:  # not JSON: not a Hub (or one without this listing)
                page = None
            if not isinstance(page, list):
                raise Unreachable(f"{self._id}: {listing} of {self.shown} did not answer a JSON list; HF_ENDPOINT "
                                  "must be a Hub (or a Hub mirror) that answers the Hub's API")
            return page, response

        next_url: str | None = url
        while next_url is not None:
            page, response = self._call(what, functools.partial(get, next_url, params))
            yield page, response
            params = None  # a next link carries its own query
            next_url = self._next_page(listing, next_url, response.links.get("next", {}).get("url"))

    def _next_page(self, listing: str, current: str, link: str | None) -> str | None:
        if not link:
            return None
        url = urljoin(current, link)
        if origin(url) != origin(self.endpoint):
            raise Unreachable(
                f"{self._id}: {listing} of {self.shown} points its next page at another host "
                f"({printable(redact_url(url), 200)}); not following it, so HF_TOKEN is not sent there: "
                "check HF_ENDPOINT"
            )
        return url

    def tree(self, sha: str, path: str, *, recursive: bool) -> list[dict[str, Any]]:
        """The entries (``type``, ``path``, ``size``, ``lfs``) under ``path`` at ``sha``, every page."""
        url = f"{self.endpoint}/api/{self.repo_type}s/{self._id}/tree/{quote(sha, safe='')}/{quote(path, safe='')}"
        params = {"recursive": "true" if recursive else "false", "expand": "false"}
        entries: list[dict[str, Any]] = []
        for page, _ in self.pages(f"listing {path}/ at {sha[:12]}", "the file listing", url, params):
            entries += [e for e in page if isinstance(e, dict) and isinstance(e.get("path"), str)]
        return entries

    def commit_count(self, sha: str) -> int:
        return self._history(sha)[0]

    def commit_time(self, sha: str) -> int:
        return self._history(sha)[1]

    def variants(self, sha: str) -> list[str]:
        if self.offline:
            tree = self._call("file listing", lambda: get_cached_repo_tree(
                self._id, repo_type=self.repo_type, revision=sha, cache_dir=self.cache_dir))
            return sorted({f.path.split("/")[1] for f in tree if f.path.startswith("build/") and f.path.count("/") > 1})
        try:
            entries = self.tree(sha, "build", recursive=False)
        except VersionNotFound:
            return []  # no build/ folder
        return sorted(e["path"].rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory")

    def _type_for(self, sha: str) -> str:
        """The repository type, from the cache when it already holds this commit (no request)."""
        if self._type is None:
            for repo_type in self._types:
                if (self._storage(repo_type) / "snapshots" / sha).is_dir():
                    return repo_type
        return self.repo_type

    def _snapshot(self, sha: str, patterns: list[str], what: str) -> Path:
        return Path(self._call(what, lambda: snapshot_download(
            self._id, revision=sha, repo_type=self._type_for(sha), allow_patterns=patterns, cache_dir=self.cache_dir,
            local_files_only=self.offline, token=self.token, endpoint=self.endpoint,
        )))

    def read_text(self, sha: str, path: str) -> str | None:
        file = self._snapshot(sha, [path], f"{path} at {sha[:12]}") / path
        return file.read_text(encoding="utf-8", errors="replace") if file.is_file() else None

    def snapshot(self, sha: str, variant: str) -> Path:
        """The huggingface_hub snapshot folder holding build/<variant>/ (files are symlinks into blobs/)."""
        folder = self._snapshot(sha, [f"build/{variant}/**"], f"build/{variant} at {sha[:12]}")
        if not (folder / "build" / variant).is_dir():
            raise VersionNotFound(f"{self._id}: no build/{variant} at {sha[:12]}")
        return folder

    def fetch(self, sha: str, variant: str, into: Path | None = None) -> Path:
        """A private folder with build/<variant>/ as plain files (hard links to the cache's blobs where possible)."""
        source = self.snapshot(sha, variant) / "build" / variant
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kernel-factory-hub-", dir=into)
        dest = Path(self._tmp.name) / sha / variant
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(source, dest / "build" / variant, copy_function=_link_or_copy)
        return dest

    def sizes(self, sha: str, variant: str) -> tuple[int, int] | None:
        """From one recursive listing of build/ per revision (the Hub gives each file's size)."""
        if self.offline:
            return None
        if sha not in self._sizes:
            try:
                entries = self.tree(sha, "build", recursive=True)
            except VersionNotFound:
                return None
            self._sizes[sha] = {e["path"]: _size(e) for e in entries if e.get("type") == "file"}
        prefix = f"build/{variant}/"
        total = sum(size for path, size in self._sizes[sha].items() if path.startswith(prefix))
        return total, total  # the download into the cache, hard-linked (or copied) into scratch

    def downloads(self) -> list[Path]:
        """huggingface_hub downloads into ``blobs/<etag>.<hex>.incomplete`` of the repository's cache folder."""
        return [self._storage(t) / "blobs" for t in self._types]

    def release(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def lfs_paths(self, sha: str, variant: str) -> set[str]:
        """Paths (relative to build/<variant>/) that the Hub stores with LFS, for lock-hash checks."""
        prefix = f"build/{variant}/"
        entries = self.tree(sha, f"build/{variant}", recursive=True)
        return {e["path"].removeprefix(prefix) for e in entries if e.get("type") == "file" and e.get("lfs")}


@functools.lru_cache(maxsize=1)  # guarded for the last endpoint asked: the client factory is one per process
def _keep_token_home(endpoint: str) -> None:
    """huggingface_hub's shared client refuses a request that carries an Authorization header (HF_TOKEN, or the
    user and password of HF_ENDPOINT) to any origin but HF_ENDPOINT's. ``HubSource.pages`` follows only the
    endpoint's next pages itself; this also covers the listings inside huggingface_hub (snapshot_download's file
    tree), whose paginator follows a Link header anywhere. Redirects are not affected: httpx drops the header when
    a redirect leaves the origin, before this check."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils._http import default_client_factory

    own = origin(endpoint)
    shown = redact_url(endpoint)

    def check(request: Any) -> None:
        url = str(request.url)
        if "authorization" in request.headers and origin(url) != own:
            raise Unreachable(f"a Hub answer on {shown} sent a request with HF_TOKEN to another host "
                              f"({printable(redact_url(url), 200)}); stopped it, so HF_TOKEN is not sent there: "
                              "check HF_ENDPOINT")

    def factory() -> Any:
        client = default_client_factory()
        client.event_hooks = {**client.event_hooks, "request": [*client.event_hooks["request"], check]}
        return client

    set_client_factory(factory)


def _size(entry: dict[str, Any]) -> int:
    size = entry.get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else 0


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(os.path.realpath(src), dst)
    except OSError:
        shutil.copy2(src, dst)


def _looks_like_tag(name: str) -> bool:
    """Offline, the cache does not say which refs were tags: vX.Y.Z names count as tags."""
    if not name.startswith("v") or name.count(".") < 1:
        return False
    try:
        Version(name[1:])
    except InvalidVersion:
        return False
    return True

