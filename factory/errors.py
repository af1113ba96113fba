"""One exception hierarchy; each class carries the exit code the CLI returns.

Exit codes (documented in the README):
  0  every planned item done
  1  a bug (an exception that is not a FactoryError)
  2  usage or configuration error (unknown version, organisation not allowed)
  3  some items refused (bad input, failed audit, digest mismatch); the rest done
  4  a source or destination unreachable or unusable (full, read-only or forbidden file systems too; a link,
     FIFO or device planted where kernel-factory reads or writes: nofollow.LinkRefused)

Several items: the most severe code wins, in the order 1 > 4 > 3 > 2 (``worst``).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path

EXIT_OK = 0
EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_UNREACHABLE = 4


class FactoryError(Exception):
    """Base class: the message is one line naming the problem and the fix."""

    exit_code = EXIT_BUG


class UsageError(FactoryError):
    """Bad command line or configuration."""

    exit_code = EXIT_USAGE


class ConfigError(UsageError):
    """A malformed or unknown configuration key or value."""


class VersionNotFound(UsageError):
    """The asked-for version, tag, branch or revision does not exist."""


class NotAllowed(UsageError):
    """The repository's organisation is not in allow-orgs."""


class Refused(FactoryError):
    """One item (a variant, a wheel) was refused; other items go on."""

    exit_code = EXIT_REFUSED


class UnknownVariant(Refused):
    """A build variant name the kernels project does not define."""


class BadKernel(Refused):
    """The variant folder or its metadata.json is not a usable kernel."""


class DigestMismatch(Refused):
    """Fetched files do not match metadata.json's digest."""


class AuditFailed(Refused):
    """The binaries do not meet the target policy, or are not abi3."""


class UnsafePath(Refused):
    """A symlink, absolute or '..' path, or a name that cannot be a wheel entry."""


class Unreachable(FactoryError):
    """A source or destination cannot be reached or used."""

    exit_code = EXIT_UNREACHABLE


# Most severe first: a bug, then an unusable source or destination, then refused items, then usage.
SEVERITY = (EXIT_BUG, EXIT_UNREACHABLE, EXIT_REFUSED, EXIT_USAGE)


def worst(codes: Iterable[int]) -> int:
    """The most severe of ``codes`` (1 > 4 > 3 > 2); 0 only when every code is 0 (or there are none)."""
    found = set(codes)
    return next((code for code in SEVERITY if code in found), EXIT_BUG if found - {EXIT_OK} else EXIT_OK)


# File system faults that make a store, scratch folder or destination unusable (exit 4), not a bug, and their fix.
_FIX = {
    errno.ENOSPC: "free space there or point --store / --scratch at another file system",
    errno.EDQUOT: "raise the quota or point --store / --scratch at another file system",
    errno.EFBIG: "raise the file size limit (ulimit -f) or point --store / --scratch elsewhere",
    errno.EROFS: "mount it read-write or point --store / --scratch / --to elsewhere",
    errno.EACCES: "fix its permissions or point --store / --scratch / --to elsewhere",
    errno.EPERM: "fix its permissions or point --store / --scratch / --to elsewhere",
    errno.EIO: "check the disk (dmesg) or point --store / --scratch / --to elsewhere",
}
UNUSABLE_ERRNOS = frozenset(_FIX)


def unusable(exc: OSError, path: str | os.PathLike[str] | None = None) -> Unreachable | None:
    """The one place OSErrors are classified: a full, read-only, forbidden or failing file system -> Unreachable
    with one line naming the path and the errno text; a file where a folder is wanted (``--out afile``) too;
    None for any other error (a bug, or "not found")."""
    if exc.errno in (errno.EEXIST, errno.ENOTDIR) and exc.filename is not None and exc.filename2 is None:
        return not_a_folder(os.fsdecode(exc.filename))
    if exc.errno not in UNUSABLE_ERRNOS:
        return None
    where = exc.filename if exc.filename is not None else path
    text = exc.strerror or os.strerror(exc.errno or 0)
    return Unreachable(f"{os.fsdecode(where) if where is not None else 'a file'}: {text}; {_FIX[exc.errno]}")


def not_a_folder(path: str) -> Unreachable | None:
    """Unreachable naming the file that stands where ``path`` or a folder above it should be; None if none does."""
    given = Path(os.path.abspath(path))
    for here in (given, *given.parents):
        if os.path.lexists(here) and not os.path.isdir(here):
            return Unreachable(f"{here} is a file, not a folder; give a folder (--store, --out, -o) or remove the file")
    return None


def output_folder(path: Path, flag: str) -> None:
    """Refuse, before any work, a folder kernel-factory would make (--store, --out, -o) where a file stands, or
    whose parent folder does not exist (a typo would otherwise make a whole tree, even at /): exit 4, one line."""
    if not path.is_dir() and (err := not_a_folder(str(path))) is not None:
        raise err
    parent = path.absolute().parent
    if not path.exists() and not parent.is_dir():
        raise Unreachable(f"{flag} {path}: its parent folder {parent} does not exist; create it first "
                          f"(mkdir -p {parent}) or give another folder")


def unusable_from_text(text: str, path: str | os.PathLike[str]) -> Unreachable | None:
    """The same classification for a tool's stderr (tar, git, patchelf): its errno text names the fault."""
    code = next((number for number in sorted(UNUSABLE_ERRNOS) if os.strerror(number) in text), None)
    return None if code is None else unusable(OSError(code, os.strerror(code)), path)


def last_line(text: str | bytes, fallback: str) -> str:
    """The last non-empty line of a tool's output (its error), or ``fallback``."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else fallback
