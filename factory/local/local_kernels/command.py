"""``kernel-factory local-kernels``: LOCAL_KERNELS for the kernel wheels installed here (docs/local-kernels.md).

kernels loads a LOCAL_KERNELS PATH that holds ``metadata.json`` as the build variant, whatever ``version=`` or
``revision=`` was asked for; a kernel-factory wheel installs exactly such a folder, its variant root
(wheel/layout.py), so PATH is the installed variant root (for an older wheel without one, its package folder).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from ... import report as reporter  # report() below is this module's own
from ...config import DEFAULT_ORGS
from ...errors import EXIT_OK, EXIT_REFUSED, Refused, worst
from ...nofollow import LinkRefused
from ...record import PROVENANCE
from .. import cache
from ..probe.environment import Environment
from ..probe.rules import Judge
from ..probe.run import ask_kernels, resolve_python, sys_path
from . import loaders
from .checks import check_kernel, detect_environment, installed_version
from .installed import SIGSTORE, InstalledKernel, find_kernels, refs_of, why_not_cacheable


def usable(kernels: list[InstalledKernel]) -> tuple[list[InstalledKernel], list[tuple[InstalledKernel, str]]]:
    """Split into the kernels LOCAL_KERNELS can name and those left out (with the reason)."""
    keep: dict[str, InstalledKernel] = {}
    left: list[tuple[InstalledKernel, str]] = []
    for k in kernels:
        if k.problems:
            left.append((k, "; ".join(k.problems)))
        elif k.key in keep:
            first = keep[k.key]
            left.append((k, f"{first.dist} {first.version} also provides {k.key}: pip uninstall one of "
                            f"'{first.dist}' and '{k.dist}'"))
        else:
            keep[k.key] = k
    return list(keep.values()), left


def local_kernels_value(kernels: list[InstalledKernel]) -> str:
    return ":".join(f"{k.key}={k.folder}" for k in kernels)


def shell_line(value: str) -> str:
    if not value:
        return "unset LOCAL_KERNELS"  # an empty LOCAL_KERNELS makes kernels raise
    return f"export LOCAL_KERNELS={shlex.quote(value)}"


def report(kernels: list[InstalledKernel], *, shell: bool, check: bool, env: Environment | None = None,
           has_kernels_lib: bool = True, path: list[str] | None = None,
           loading_paths: Callable[[InstalledKernel, str], list[loaders.LoadPath]] | None = None,
           every_path: bool = False, python: str | None = None, judge: Judge | None = None
           ) -> tuple[list[str], list[str], int]:
    """(stdout lines, stderr lines, exit code) of the command; ``check`` needs ``env``. ``loading_paths``
    (kernel, LOCAL_KERNELS value in effect) -> what each kernels loading path does for a loadable kernel;
    with ``every_path`` a path that would not load makes the exit code 3 too. ``judge``: the target interpreter's
    kernels library, as it answered (its version and rules; the loading paths hold its refusals)."""
    keep, left = usable(kernels)
    value = local_kernels_value(keep)
    out: list[str] = [shell_line(value)] if shell else [value] if value and not check else []
    err: list[str] = []
    if not kernels:
        err.append(f"no kernel wheels are installed in the environment of {python or sys.executable} (none has "
                   f".dist-info/{PROVENANCE}): run `python -m kernel_factory local-kernels` with the python that "
                   "runs your code, or pass --python PY")
    if not check:
        err += [f"left out {k.title}: {why}" for k, why in left]
        return out, err, EXIT_REFUSED if left else EXIT_OK
    if env is None and kernels:
        raise ValueError("report(check=True) needs the environment")
    lines: list[str] = [judge.rules_line()] if judge is not None and kernels else []
    if judge is not None:
        has_kernels_lib = judge.kernels is not None
    if not has_kernels_lib:
        lines.append("the kernels library is not installed, so get_kernel cannot run: pip install kernels")
    provided = {k.key for k in keep}
    shadowed = {id(k): why for k, why in left if not k.problems}
    loading = unreached = 0
    paths_fail = False
    for k in kernels:
        reasons = [shadowed[id(k)]] if id(k) in shadowed else []
        reasons += check_kernel(k, env, provided, path) if env else []
        if reasons:
            lines.append(f"{k.title}: " + "; ".join(reasons))
        else:
            loading += 1
            lines.append(f"{k.title}: would load from {k.folder}")
            found = loading_paths(k, value) if loading_paths else []
            for lp in found:
                lines.append(lp.line())
                paths_fail |= every_path and not lp.ok
            unreached += bool(found) and not any(lp.ok for lp in found)
        if k.signed:
            lines.append(f"  signed: carries the Hub's {SIGSTORE} (kept in the Hub cache by --cache; "
                         "`kernels verify-signature` checks it)")
    if kernels:
        count = loading if has_kernels_lib else 0
        if unreached and count:
            lines.append(f"{count} of {len(kernels)} installed kernels would load with LOCAL_KERNELS set "
                         f"(eval \"$(kernel-factory local-kernels --shell)\"); {unreached} of them through no "
                         "loading path as this environment is now")
        else:
            lines.append(f"{count} of {len(kernels)} installed kernels would load")
    (err if shell else out).extend(lines)
    return out, err, EXIT_OK if has_kernels_lib and loading == len(kernels) and not paths_fail else EXIT_REFUSED


def install(root: Path, kernels: list[InstalledKernel],
            allow_orgs: Collection[str]) -> tuple[list[str], list[str], int]:
    """Place every cacheable kernel of an allowed organisation in ``root``, checked against its RECORD; (one line
    per kernel placed, notes and refusals, the worst exit code of the kernels left out: 3, or 4 where a link was
    planted in the cache). A full or unusable cache raises Unreachable (the kernels placed before it stay: each
    kernel is placed whole or not at all); a link planted below one repository's folder leaves that kernel out
    (LinkRefused, one note) and the others are placed."""
    done: list[str] = []
    notes: list[str] = []
    codes = [EXIT_OK]
    writer = cache.Writer(root, "local-kernels", notes)
    for k in kernels:
        org = str(k.repo_id).split("/")[0]
        why = why_not_cacheable(k) or (k.files_problem if org in allow_orgs else f"the organisation {org} is not "
                                       f"allowed in the Hub cache (add --allow-org {org} if you trust it)")
        if why:
            notes.append(f"not in the Hub cache: {k.title}: {why}; only LOCAL_KERNELS serves it")
            codes.append(EXIT_REFUSED)
            continue
        assert k.repo_id and k.revision and k.variant
        try:
            where = writer.place(cache.Placement(k.repo_id, k.revision, k.variant, k.folder, dict(k.files),
                                                 tuple(refs_of(k))))
        except (Refused, LinkRefused) as exc:
            notes.append(f"not in the Hub cache: {exc}")
            codes.append(exc.exit_code)
            continue
        done.append(f"{k.key}: {where} ({len(k.files)} files checked against {k.dist}'s RECORD)")
    return done, notes, worst(codes)


@dataclass(frozen=True)
class LocalKernelsArgs:
    """``local-kernels``: ``shell``: an export line; ``check``: what would load, and why not; ``cache``: also
    write the installed kernels into the Hub cache ("": the one kernels reads now; a folder: that one, which
    ``--shell`` then exports as KERNELS_CACHE)."""

    shell: bool = False
    check: bool = False
    cache: str | None = None
    allow_orgs: tuple[str, ...] = DEFAULT_ORGS  # organisations whose kernels --cache may place
    python: str | None = None  # inspect this interpreter's environment instead of this one's


def run_local_kernels(args: LocalKernelsArgs) -> int:
    python = resolve_python(args.python) if args.python else None
    path = sys_path(python) if python else None
    kernels = find_kernels(path)
    env = detect_environment(python, path) if args.check and kernels else None  # may import torch: only if needed
    has_lib = installed_version("kernels", path) is not None
    root = Path(args.cache).absolute() if args.cache else cache.cache_root(os.environ)
    # --cache: the lines of the kernels placed, the notes, and the worst exit code of the kernels it left out
    placed, notes, left_out = install(root, usable(kernels)[0], args.allow_orgs) if args.cache is not None else (
        [], [], EXIT_OK)
    environ = dict(os.environ, KERNELS_CACHE=str(root)) if args.cache else dict(os.environ)

    def ask(repo_ids: list[str]) -> Judge:
        """The target interpreter's kernels, asked about these repositories' snapshots in the cache (after
        --cache placed its own) and about the installed package folders."""
        return ask_kernels(python or sys.executable, loaders.builds_to_ask(root, repo_ids),
                           [str(k.folder) for k in kernels])

    judge = ask([k.repo_id for k in kernels if k.repo_id]) if args.check and kernels else None

    def loading_paths(k: InstalledKernel, value: str) -> list[loaders.LoadPath]:
        assert judge is not None
        return loaders.paths(k, root, dict(environ, LOCAL_KERNELS=value) if args.shell else environ, judge)

    out, err, code = report(kernels, shell=args.shell, check=args.check, env=env, has_kernels_lib=has_lib, path=path,
                            loading_paths=loading_paths if args.check else None, every_path=args.cache is not None,
                            python=python, judge=judge)
    if args.check:  # the kernels transformers' own mapping asks for on this device, from the Hub cache
        said, all_load = loaders.check_mapping(python or sys.executable, path,
                                               lambda: env or detect_environment(python, path), root, ask)
        (err if args.shell else out).extend(said)
        code = EXIT_REFUSED if not all_load and code == EXIT_OK else code
    if args.shell and args.cache:
        out.append(f"export KERNELS_CACHE={shlex.quote(str(root))}")
    for line in out:
        reporter.output(line)
    for line in [*(f"in the Hub cache: {line}" for line in placed), *notes, *err]:
        reporter.raw_error(line)
    return worst([code, left_out])
