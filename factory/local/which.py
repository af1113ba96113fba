"""``kernel-factory which``: this environment's build variant, label and variant root, and the install command
(docs/which.md). The interpreter is probed in its own process (probe/run.py).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from .. import report, simple
from ..errors import EXIT_OK, EXIT_REFUSED, UsageError
from ..safe_text import printable
from ..simple import Wheel
from ..variants import parse_label, tag_platforms
from .probe.environment import Environment
from .probe.run import probe, resolve_python


def fits_platform(wheel: Wheel, env: Environment) -> bool:
    return any(t.platform == "any" or (env.arch, env.os) in tag_platforms(t.platform) for t in wheel.tags)


def read_project(url: str, session: Any) -> list[Wheel] | None:
    """The wheels on one project page (PEP 691 JSON or PEP 503 HTML); None if the page does not exist.
    Refused (exit 3) when the page lists a name that is not a valid wheel file name."""
    links = simple.project_page(url, url.rstrip("/").rsplit("/", 1)[-1], session)
    return None if links is None else simple.wheels(links, url)


# -- choosing -------------------------------------------------------------------------------------------------


class NoProject(UsageError):
    """The index has no page for the project; ``hint`` is a "did you mean" from the index's project list."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class Choice:
    wheel: Wheel
    root: str  # the index root URL the commands use


def candidates(url: str, project: str, env: Environment, session: Any = None, *, yanked: bool = False
               ) -> tuple[list[Choice], list[Wheel]]:
    """Every fitting wheel, best first (the variant root's, newest first, then universal/noarch ones of the
    combined root; yanked ones only with ``yanked``, as pip takes them for an exact pin), and every wheel of the
    project; UsageError when the index has no such project."""
    session = session or simple.session()
    variant_root = f"{url}/variants/{env.label}/simple"
    own = read_project(f"{variant_root}/{project}/", session) or []
    newest = sorted((w for w in own if (yanked or not w.yanked) and fits_platform(w, env)),
                    key=lambda w: (w.version, w.filename), reverse=True)
    combined = read_project(f"{url}/simple/{project}/", session)
    if combined is None:
        hint = simple.did_you_mean(project, url, session)
        raise NoProject(f"--kernel {printable(project)}: no such project at {url}/simple/"
                        f"{hint or '; check the name and --index-url'}", hint)
    generic = sorted((w for w in combined if (yanked or not w.yanked) and w.label in (None, env.backend) and
                      fits_platform(w, env)), key=lambda w: (w.version, w.filename), reverse=True)
    seen = {w.filename for w in newest}
    found = [Choice(w, variant_root) for w in newest]
    found += [Choice(w, f"{url}/simple") for w in generic if w.filename not in seen]
    return found, combined


def nearest(wheels: list[Wheel], env: Environment) -> list[dict[str, Any]]:
    """The builds there are (label x platform, with their versions), nearest to ``env`` first."""
    mine = parts.backend if (parts := parse_label(env.label)) else env.backend
    builds: dict[tuple[str, str], list[Wheel]] = {}
    for w in wheels:
        builds.setdefault((w.label or "", w.platform), []).append(w)

    def key(item: tuple[tuple[str, str], list[Wheel]]) -> tuple[Any, ...]:
        (label, plat), ws = item
        parts = parse_label(label)
        plat_fits = fits_platform(ws[0], env)
        if parts is None:  # universal or noarch: after the torch builds
            return (5, 0, not plat_fits, label, plat)
        same_backend, same_torch = parts.backend == mine, parts.torch == env.torch_minor
        rank = 0 if same_backend and same_torch else 1 if same_backend else 2 if same_torch else 3
        if rank == 3 and parts.backend_name != env.backend:
            rank = 4
        distance = abs(float(Version(parts.torch).minor - Version(env.torch_minor).minor)) + 100 * abs(
            Version(parts.torch).major - Version(env.torch_minor).major)
        return (rank, parts.backend_name != env.backend, distance, not plat_fits, label, plat)

    out = []
    for (label, plat), ws in sorted(builds.items(), key=key):
        parts = parse_label(label)
        why = "universal" if not label else f"noarch {label}" if parts is None else (
            f"torch {parts.torch}, {parts.backend}{', ' + parts.abi if parts.abi else ''}")
        versions = sorted({w.version.public for w in ws}, key=Version, reverse=True)
        out.append({"label": label or None, "platform": plat, "what": why, "versions": versions,
                    "root": f"variants/{label}/simple/" if parts else "simple/"})
    return out


def build_lines(builds: list[dict[str, Any]]) -> list[str]:
    """``nearest``'s builds as indented lines (remote text escaped)."""
    return [printable(f"  {b['label'] or '(universal)'}  {b['platform']}  {', '.join(b['versions'])}  "
                         f"({b['what']})") for b in builds] or ["  (none)"]


def commands(project: str, choice: Choice, python: str | None) -> tuple[str, str]:
    pin = f"{project}=={choice.wheel.version}"
    pip = [python, "-m", "pip"] if python else ["pip"]
    uv = ["uv", "pip", "install", *(["--python", python] if python else [])]
    return (shlex.join([*pip, "install", pin, "--index-url", choice.root]),
            shlex.join([*uv, pin, "--index-url", choice.root]))


# -- the subcommand ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WhichArgs:
    """``which``: the interpreter to inspect (None: this one); with ``index_url`` and ``kernel``, the commands."""

    python: str | None = None
    index_url: str | None = None
    kernel: str | None = None
    json: bool = False


def run_which(args: WhichArgs) -> int:
    if bool(args.index_url) != bool(args.kernel):
        raise UsageError("--index-url and --kernel go together: give both, or neither")
    python = resolve_python(args.python)
    env = probe(python)
    doc: dict[str, Any] = {"environment": env.to_json()}
    lines = [
        f"python   {env.python} ({env.python_version})",
        f"torch    {env.torch} ({env.backend}{' ' + env.backend_version if env.backend_version else ''}"
        f"{', C++11 ABI' if env.cxx11_abi else ', pre-C++11 ABI' if env.cxx11_abi is False else ''}, "
        f"{env.arch}-{env.os})",
        f"variant  {env.variant}",
        f"label    {env.label}",
        f"root     {env.root}",
    ]
    code = EXIT_OK
    if args.kernel and args.index_url:
        url = simple.index_root(args.index_url)
        project = str(canonicalize_name(args.kernel))
        found, wheels = candidates(url, project, env)
        choice = found[0] if found else None
        doc.update({"index_url": url, "kernel": project})
        if choice is not None:
            pip, uv = commands(project, choice, python)
            doc.update({"fits": True, "version": str(choice.wheel.version), "wheel": choice.wheel.filename,
                        "index": choice.root, "pip": pip, "uv": uv})
            lines += [f"wheel    {printable(choice.wheel.filename)}", f"pip      {pip}", f"uv       {uv}"]
        else:
            builds = nearest(wheels, env)
            doc.update({"fits": False, "builds": builds})
            code = EXIT_REFUSED
            lines.append(f"no build of {printable(project)} at {url} fits {env.label} on {env.arch}-{env.os}; "
                         f"builds there are, nearest first:")
            lines += build_lines(builds)
    if args.json:
        report.document(doc)
    else:
        report.output("\n".join(lines))
    return code
