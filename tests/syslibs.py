"""System shared libraries the tests use as real ELF files, found at run time (no fixed distribution paths).

Reads the dynamic linker's search path the way ldconfig does (/etc/ld.so.conf and the files it includes,
then the default directories) without starting a process, so unit tests can use it. A library not found
is None: the tests that need it skip and say which one.
"""

from __future__ import annotations

import glob
import platform
from functools import cache
from pathlib import Path

DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")


def _conf_dirs(conf: Path, seen: set[Path]) -> list[str]:
    if conf in seen or not conf.is_file():
        return []
    seen.add(conf)
    dirs: list[str] = []
    for line in conf.read_text(errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("include "):
            for inc in sorted(glob.glob(line.split(None, 1)[1])):
                dirs += _conf_dirs(Path(inc), seen)
        elif line:
            dirs.append(line)
    return dirs


@cache
def search_path() -> tuple[Path, ...]:
    """The directories the dynamic linker searches, in order, that exist here."""
    dirs = _conf_dirs(Path("/etc/ld.so.conf"), set()) + list(DEFAULT_DIRS)
    out: list[Path] = []
    for d in dirs:
        p = Path(d)
        if p.is_dir() and p.resolve() not in [o.resolve() for o in out]:
            out.append(p)
    return tuple(out)


def find(pattern: str, dirs: tuple[Path, ...] | None = None) -> Path | None:
    """The first regular file matching ``pattern`` (a glob such as ``libz.so.1``) on the search path."""
    for d in search_path() if dirs is None else dirs:
        for hit in sorted(d.glob(pattern)):
            if hit.is_file():
                return hit.resolve()
    return None


def cross(arch: str, pattern: str) -> Path | None:
    """A library of another architecture from its cross toolchain's sysroot (/usr/<arch>-linux-gnu/lib)."""
    return find(pattern, tuple(Path(p) for p in sorted(glob.glob(f"/usr/{arch}-linux-*/lib")) if Path(p).is_dir()))


MACHINE = platform.machine()
LIBZ = find("libz.so.1")  # GLIBC symbols <= 2.14, needs libc only
