"""``kernel-factory which``: this environment's build variant, label and variant root, and the install command.

The interpreter is inspected by factory/local/probe.py (a script run with it, so
kernel-factory can live in a pipx venv and inspect another). With
``--index-url URL --kernel NAME`` the kernel's page in the variant root
(``URL/variants/<label>/simple/<name>/``, PEP 691 JSON or HTML) gives the
newest wheel that fits this platform; a universal or backend-noarch wheel in
the combined root fits too. No fit: exit 3 and the builds there are, nearest
first.
"""

from __future__ import annotations

import json
import re
import shlex
import urllib.error
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..errors import EXIT_OK, EXIT_REFUSED, Unreachable, UsageError
from ..record import PEP691_JSON
from .probe import Environment, probe, resolve_python

ACCEPT = f"{PEP691_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
_BACKENDS = r"(cu\d+|rocm\d+|xpu\d+|cann\d+|cpu|metal|neuron|tpu)"
_LABEL = re.compile(r"(torch|torchabi|tvmffi)(\d)(\d+)" + _BACKENDS + r"(cxx11|cxx98)?")
_MAC_ARCH = {"aarch64": ("_arm64", "_universal2"), "x86_64": ("_x86_64", "_universal2", "_intel")}
_WIN = {"x86_64": "win_amd64", "aarch64": "win_arm64"}


@dataclass(frozen=True)
class Wheel:
    filename: str
    url: str
    version: Version
    tags: frozenset[Tag]
    yanked: bool

    @property
    def label(self) -> str | None:
        return self.version.local

    @property
    def platform(self) -> str:
        plats = sorted({t.platform for t in self.tags})
        return "any" if plats == ["any"] else " ".join(plats)


@dataclass(frozen=True)
class LabelParts:
    framework: str
    torch: str  # "2.13"
    backend: str  # "cu130"
    backend_name: str  # "cuda"
    abi: str | None


def parse_label(label: str | None) -> LabelParts | None:
    """A local label the factory writes (torch213cu130cxx11) -> its parts; None for noarch and unknown labels."""
    m = _LABEL.fullmatch(label or "")
    if m is None:
        return None
    from kernels.backends import parse_backend

    try:
        name = parse_backend(m.group(4)).name
    except ValueError:
        return None
    return LabelParts(m.group(1), f"{m.group(2)}.{m.group(3)}", m.group(4), name, m.group(5))


def backend_tag(env: Environment) -> str:
    parts = parse_label(env.label)
    return parts.backend if parts else env.backend


def fits_platform(wheel: Wheel, env: Environment) -> bool:
    for tag in wheel.tags:
        p = tag.platform
        if p == "any":
            return True
        if env.os == "linux" and p.startswith(("manylinux", "musllinux", "linux_")) and p.endswith("_" + env.arch):
            return True
        if env.os == "darwin" and p.startswith("macosx_") and p.endswith(_MAC_ARCH.get(env.arch, ())):
            return True
        if env.os == "windows" and p == _WIN.get(env.arch):
            return True
    return False


# -- reading an index ------------------------------------------------------------------------------------------


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append((str(a["href"]), "data-yanked" in a))


def _fetch(url: str) -> tuple[bytes, str] | None:
    """(body, content type) of ``url``; None for 404; Unreachable when the index cannot be read."""
    if url.startswith("file://") or "://" not in url:
        folder = Path(unquote(urlsplit(url).path) if url.startswith("file://") else url)
        page = folder / "index.json"
        return (page.read_bytes(), PEP691_JSON) if page.is_file() else None
    req = urllib.request.Request(url, headers={"Accept": ACCEPT, "User-Agent": "kernel-factory-which"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read(), str(resp.headers.get("Content-Type", ""))
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 410):
            return None
        raise Unreachable(f"--index-url: {url} answered HTTP {exc.code}; check the URL and credentials") from None
    except (OSError, ValueError) as exc:
        raise Unreachable(f"--index-url: cannot read {url} ({exc}); check the URL and that the index is served"
                          ) from None


def read_project(url: str) -> list[Wheel] | None:
    """The wheels on one project page (PEP 691 JSON or PEP 503 HTML); None if the page does not exist."""
    got = _fetch(url)
    if got is None:
        return None
    body, ctype = got
    links: list[tuple[str, str, bool]] = []  # (filename, absolute url, yanked)
    if "json" in ctype:
        try:
            data = json.loads(body)
            for f in data.get("files", []):
                links.append((str(f["filename"]), urljoin(url, str(f["url"])), bool(f.get("yanked"))))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise Unreachable(f"--index-url: {url} is not a PEP 691 project page") from None
    else:
        parser = _Links()
        parser.feed(body.decode("utf-8", errors="replace"))
        for href, yanked in parser.links:
            absolute = urljoin(url, href)
            links.append((unquote(urlsplit(absolute).path.rsplit("/", 1)[-1]), absolute, yanked))
    wheels = []
    for filename, link, yanked in links:
        if not filename.endswith(".whl"):
            continue
        try:
            _, version, _, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        wheels.append(Wheel(filename, link.split("#", 1)[0], version, tags, yanked))
    return wheels


# -- choosing -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    wheel: Wheel
    root: str  # the index root URL the commands use


def choose(url: str, project: str, env: Environment) -> tuple[Choice | None, list[Wheel]]:
    """The newest fitting wheel (variant root first, then universal/noarch in the combined root), and every wheel."""
    variant_root = f"{url}/variants/{env.label}/simple"
    own = read_project(f"{variant_root}/{project}/") or []
    fitting = [w for w in own if not w.yanked and fits_platform(w, env)]
    if fitting:
        return Choice(max(fitting, key=lambda w: (w.version, w.filename)), variant_root), own
    combined = read_project(f"{url}/simple/{project}/")
    if combined is None:
        raise UsageError(f"--kernel {project}: no such project at {url}/simple/; check the name and --index-url")
    generic = [w for w in combined if not w.yanked and w.label in (None, env.backend) and fits_platform(w, env)]
    if generic:
        return Choice(max(generic, key=lambda w: (w.version, w.filename)), f"{url}/simple"), combined
    return None, combined


def nearest(wheels: list[Wheel], env: Environment) -> list[dict[str, Any]]:
    """The builds there are (label x platform, with their versions), nearest to ``env`` first."""
    mine = backend_tag(env)
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
        url = args.index_url.rstrip("/")
        project = str(canonicalize_name(args.kernel))
        choice, wheels = choose(url, project, env)
        doc.update({"index_url": url, "kernel": project})
        if choice is not None:
            pip, uv = commands(project, choice, python)
            doc.update({"fits": True, "version": str(choice.wheel.version), "wheel": choice.wheel.filename,
                        "index": choice.root, "pip": pip, "uv": uv})
            lines += [f"wheel    {choice.wheel.filename}", f"pip      {pip}", f"uv       {uv}"]
        else:
            builds = nearest(wheels, env)
            doc.update({"fits": False, "builds": builds})
            code = EXIT_REFUSED
            lines.append(f"no build of {project} at {url} fits {env.label} on {env.arch}-{env.os}; "
                         f"builds there are, nearest first:")
            lines += [f"  {b['label'] or '(universal)'}  {b['platform']}  {', '.join(b['versions'])}  ({b['what']})"
                      for b in builds] or ["  (none)"]
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print("\n".join(lines))
    return code
