"""A kernel repository on disk: a git repository (refs, history) or a plain folder (one revision)."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from ..errors import Unreachable, UsageError, VersionNotFound, last_line, unusable, unusable_from_text
from ..space import measure
from .base import Refs

WORKTREE = "worktree"  # the revision name of a plain folder


def looks_local(location: str) -> bool:
    return location.startswith(("/", ".", "~", "file:")) or os.path.exists(location)


class LocalSource:
    def __init__(self, path: Path, *, repo_id: str | None = None, source_date_epoch: str | None = None) -> None:
        path = Path(str(path).removeprefix("file://")).expanduser().resolve()
        if not path.is_dir():
            raise UsageError(f"{path}: not a folder; give a kernel repository folder or a Hub id like org/name")
        self.path = path
        self.repo_id = repo_id
        self.source_date_epoch = source_date_epoch  # config.Variables's SOURCE_DATE_EPOCH, for a plain folder
        self.name = path.name.removesuffix(".git")
        self.display = str(path)
        self.is_git = self._git_dir() is not None
        if not self.is_git and not (path / "build").is_dir():
            raise UsageError(f"{path}: not a kernel repository (no build/ folder and not a git repository)")
        self._fetched: dict[tuple[str, str], Path] = {}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._clean: dict[str, frozenset[str]] = {}  # sha -> variants whose work tree is that revision, unchanged
        self._trees: dict[str, dict[str, int]] = {}  # sha -> variant -> bytes of its files (one ls-tree of build/)

    def _git_dir(self) -> str | None:
        # One command: the git folder, whether it is bare, and the work tree's top (which a bare repository
        # has not: git prints the first two answers, then fails on the third).
        proc = self._run("rev-parse", "--absolute-git-dir", "--is-bare-repository", "--show-toplevel")
        lines = _text(proc.stdout).splitlines()
        if len(lines) < 2 or not lines[0]:
            return None  # not a git repository (or no git)
        # A bare repository, or a work tree rooted here (not a parent's repository).
        rooted = proc.returncode == 0 and len(lines) > 2 and Path(lines[2]).resolve() == self.path
        return lines[0] if lines[1] == "true" or rooted else None

    def _run(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        """``git -C <repository> args``; its output as bytes (a path git prints need not be UTF-8)."""
        return subprocess.run(["git", "-C", str(self.path), *args], capture_output=True)

    def _git(self, *args: str) -> bytes:
        proc = self._run(*args)
        if proc.returncode != 0:  # the revisions were resolved already: this is the repository failing
            text = proc.stderr.decode(errors="replace")
            raise unusable_from_text(text, self.path) or Unreachable(
                f"{self.display}: git {' '.join(args)} failed: {last_line(text, f'exit code {proc.returncode}')}"
            )
        return proc.stdout

    def refs(self) -> Refs:
        if not self.is_git:
            return Refs()
        refs = Refs()
        out = _text(self._git(
            "for-each-ref", "--format=%(refname)%00%(objectname)%00%(*objectname)", "refs/heads", "refs/tags"
        ))
        for line in out.splitlines():
            ref, obj, peeled = line.split("\0")
            if ref.startswith("refs/heads/"):
                refs.branches[ref.removeprefix("refs/heads/")] = obj
            else:
                refs.tags[ref.removeprefix("refs/tags/")] = peeled or obj
        return refs

    def resolve(self, revision: str) -> str:
        if not self.is_git:
            if revision in (WORKTREE, "HEAD"):
                return WORKTREE
            raise VersionNotFound(f"{self.display}: a plain folder has no revision {revision!r}; use a git repository")
        proc = self._run("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
        sha = _text(proc.stdout).strip()
        if proc.returncode != 0 or not sha:
            raise VersionNotFound(f"{self.display}: no revision {revision!r}")
        return sha

    def commit_count(self, sha: str) -> int:
        if not self.is_git:
            return 0
        return int(self._git("rev-list", "--count", sha))

    def commit_time(self, sha: str) -> int:
        if not self.is_git:  # SOURCE_DATE_EPOCH makes wheels from a plain folder reproducible
            return int(self.source_date_epoch or (self.path / "build").stat().st_mtime)
        return int(self._git("show", "-s", "--format=%ct", sha))

    def variants(self, sha: str) -> list[str]:
        if not self.is_git:
            return sorted(p.name for p in (self.path / "build").iterdir() if p.is_dir() and not p.is_symlink())
        return sorted(self._build_tree(sha))

    def _build_tree(self, sha: str) -> dict[str, int]:
        """Each folder under build/ at ``sha`` -> the bytes of the files in it, from one ``git ls-tree`` of the
        whole build/ tree per revision (the plan lists the variants, the size check sums them)."""
        if sha not in self._trees:
            out = self._git("ls-tree", "-r", "-t", "-l", "-z", sha, "--", "build")
            tree: dict[str, int] = {}
            for entry in out.split(b"\0"):
                meta_text, _, path = entry.partition(b"\t")
                meta = meta_text.split()
                variant = _variant_of(path)
                if len(meta) != 4 or variant is None:
                    continue  # build/ itself (a file there has no variant either)
                name = _text(variant)
                if path.count(b"/") == 1:
                    if meta[1] == b"tree":
                        tree.setdefault(name, 0)
                elif meta[1] == b"blob" and meta[3].isdigit():
                    tree[name] = tree.get(name, 0) + int(meta[3])
            self._trees[sha] = tree
        return self._trees[sha]

    def read_text(self, sha: str, path: str) -> str | None:
        if not self.is_git:
            p = self.path / path
            return p.read_text(encoding="utf-8", errors="replace") if p.is_file() else None
        proc = self._run("show", f"{sha}:{path}")
        return proc.stdout.decode("utf-8", errors="replace") if proc.returncode == 0 else None

    def sizes(self, sha: str, variant: str) -> tuple[int, int] | None:
        if not self.is_git:
            return measure(self.path / "build" / variant), 0  # fetched in place
        try:
            total = self._build_tree(sha).get(variant)
        except Unreachable:
            return None
        return None if total is None else (total, 0 if self._checked_out(sha, variant) else total)  # 0: read in place

    def fetch(self, sha: str, variant: str, into: Path | None = None) -> Path:
        if not self.is_git or self._checked_out(sha, variant):
            return self.path  # read in place: no copy of a variant that can be gigabytes
        key = (sha, variant)
        if key in self._fetched:
            return self._fetched[key]
        # "Not found" only when it is looked for and absent; any other failure keeps its own cause.
        if self._run("cat-file", "-e", f"{sha}:build/{variant}").returncode != 0:
            raise VersionNotFound(f"{self.display}: no build/{variant} at {sha[:12]}")
        try:
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="kernel-factory-", dir=into)
            dest = Path(self._tmp.name) / sha / variant
            dest.mkdir(parents=True)
        except OSError as exc:
            raise unusable(exc, into or tempfile.gettempdir()) or exc from None
        # git archive keeps symlinks as symlinks; the wheel writer refuses those that escape.
        with tempfile.TemporaryFile(dir=into) as git_err:
            archive = subprocess.Popen(
                ["git", "-C", str(self.path), "archive", "--format=tar", sha, "--", f"build/{variant}"],
                stdout=subprocess.PIPE,
                stderr=git_err,
            )
            assert archive.stdout is not None
            tar = subprocess.run(
                ["tar", "-x", "-C", str(dest), "--no-same-owner", "--no-same-permissions"],
                stdin=archive.stdout,
                capture_output=True,
            )
            archive.stdout.close()
            git_code = archive.wait()
            git_err.seek(0)
            git_text = git_err.read().decode("utf-8", errors="replace")
        if tar.returncode != 0 or git_code != 0:
            shutil.rmtree(dest, ignore_errors=True)
            tar_text = tar.stderr.decode("utf-8", errors="replace")
            full = unusable_from_text(tar_text, dest)
            if tar.returncode == -signal.SIGXFSZ:  # over the file size limit (ulimit -f)
                full = unusable(OSError(errno.EFBIG, os.strerror(errno.EFBIG)), dest)
            if full is not None:
                raise full
            if tar.returncode != 0:
                raise Unreachable(f"{self.display}: extracting build/{variant} into {dest} failed: "
                                  f"{last_line(tar_text, f'tar exit code {tar.returncode}')}")
            raise Unreachable(f"{self.display}: git archive of build/{variant} at {sha[:12]} failed: "
                              f"{last_line(git_text, f'git exit code {git_code}')}")
        self._fetched[key] = dest
        return dest

    def _checked_out(self, sha: str, variant: str) -> bool:
        """True when the work tree holds build/<variant> exactly as at ``sha``: HEAD is ``sha``, and git sees
        nothing modified, untracked or ignored there, and no file flagged assume-unchanged or skip-worktree.

        Asked for every variant at once (three git commands for the whole build/ folder), once per revision and
        run: the plan's size check asks first, in the main process, so the workers inherit the answer and run no
        git command while they convert."""
        if sha not in self._clean:
            self._clean[sha] = self._clean_variants(sha)
        return variant in self._clean[sha]

    def _clean_variants(self, sha: str) -> frozenset[str]:
        head = self._run("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        if head.returncode != 0 or _text(head.stdout).strip() != sha:
            return frozenset()
        # --no-optional-locks: parallel runs must not fight over index.lock
        status = self._run("--no-optional-locks", "status", "--porcelain", "-z", "--ignored", "--untracked-files=all",
                           "--", "build")
        flags = self._run("ls-files", "-v", "-z", "--", "build")
        if status.returncode != 0 or flags.returncode != 0:
            return frozenset()
        dirty: set[bytes] = set()
        tokens = iter(status.stdout.split(b"\0"))
        for token in tokens:  # "XY path"; a rename or copy is followed by its source path
            if not token:
                continue
            if len(token) < 4 or token[2:3] != b" ":
                return frozenset()  # not what porcelain v1 writes: trust no variant
            paths = [token[3:]]
            if b"R" in token[:2] or b"C" in token[:2]:
                paths.append(next(tokens, b""))
            for changed in paths:
                variant = _variant_of(changed)
                if variant is None:
                    return frozenset()  # build/ itself, or a path outside it
                dirty.add(variant)
        tracked: set[bytes] = set()
        for entry in flags.stdout.split(b"\0"):
            if entry:
                variant = _variant_of(entry[2:])
                if variant is None:
                    return frozenset()
                (tracked if entry.startswith(b"H ") else dirty).add(variant)
        return frozenset(_text(v) for v in tracked - dirty if v)

    def lfs_paths(self, sha: str, variant: str) -> set[str]:
        return set()  # a git repository's files are hashed as they are checked out

    def downloads(self) -> list[Path]:
        return []  # git archive unpacks into the scratch folder, which progress reads itself

    def release(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        self._fetched.clear()


def _text(out: bytes) -> str:
    """git's output as text; bytes that are not UTF-8 (a path's) kept as surrogates, never an error."""
    return out.decode("utf-8", errors="surrogateescape")


def _variant_of(path: bytes) -> bytes | None:
    """The folder under build/ that a path of git's is in (b"build/V/f" and b"build/V" -> b"V"); None for build/
    itself or a path outside it."""
    parts = path.split(b"/")
    return parts[1] if len(parts) >= 2 and parts[0] == b"build" and parts[1] else None
