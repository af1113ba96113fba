"""Which pages the index has, and what each shows: records -> page plans -> bytes.

A page plan names its path and the records it shows; rendering a plan is a pure
function of those records, the templates and the base URL for pip commands.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import jinja2
from packaging.utils import canonicalize_name

from .. import TEMPLATES
from ..record import Record
from ..versions import sort_key
from . import landing as index_landing
from . import selector as index_selector
from .landing import landing_context

API_VERSION = "1.1"
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
TEMPLATE_NAMES = ("landing.html", "project.html", "root.html", "style.css", "copy.js", "selector.js")


@dataclass(frozen=True)
class Page:
    """One file of the index: ``kind`` is project-html, project-json, root-html, root-json or landing."""

    path: str
    kind: str
    depth: int  # how many folders below the root the page's folder is
    project: str | None
    records: tuple[Record, ...]  # project pages: that project's files; landing: every record
    projects: tuple[str, ...] = ()  # root pages: the project names


def project_name(record: Record) -> str:
    return canonicalize_name(record.name)


def variant_labels(records: Iterable[Record]) -> list[str]:
    """Every local label that names a build variant (universal and adopted wheels have none)."""
    return sorted({r.label for r in records if r.label})


def combined_only(record: Record) -> bool:
    """An adopted wheel whose local label names no build variant: listed in the combined root only."""
    return record.label is None and "+" in record.version


def in_variant(record: Record, label: str, backend: str | None) -> bool:
    """Whether ``record`` belongs in the per-variant index of ``label`` (whose backend is ``backend``)."""
    if combined_only(record):
        return False
    if record.label is None:
        return True  # universal kernels and adopted wheels without a label
    if record.label == label:
        return True
    return record.framework == "torch-noarch" and backend is not None and record.backend == backend


def plan(records: Iterable[Record]) -> list[Page]:
    """Every page of the index, project pages first, then the roots, then the landing page."""
    names: dict[str, str] = {}  # display name -> normalised name, computed once per name
    keyed = []
    for r in records:
        name = names.get(r.name)
        if name is None:
            name = names[r.name] = canonicalize_name(r.name)
        keyed.append((name, r.filename, r))
    keyed.sort(key=lambda item: (item[0], item[1]))
    ordered = [r for _, _, r in keyed]
    by_project: dict[str, list[Record]] = defaultdict(list)
    backends: dict[str, str | None] = {}
    shared: list[tuple[str, Record]] = []  # in every variant index: universal and adopted wheels
    noarch: dict[str | None, list[tuple[str, Record]]] = defaultdict(list)
    by_label: dict[str, list[tuple[str, Record]]] = defaultdict(list)
    for name, _, r in keyed:
        by_project[name].append(r)
        if combined_only(r):
            continue
        if r.label is None:
            shared.append((name, r))
            continue
        by_label[r.label].append((name, r))
        if r.framework == "torch-noarch":
            noarch[r.backend].append((name, r))
            backends.setdefault(r.label, r.backend)
        else:
            backends[r.label] = r.backend
    groups: list[tuple[str, int, dict[str, list[Record]]]] = [("simple", 1, dict(by_project))]
    for label in sorted(backends):
        members = {id(r): (name, r) for name, r in shared + by_label[label] + noarch.get(backends[label], [])}
        sub: dict[str, list[Record]] = defaultdict(list)
        for name, r in sorted(members.values(), key=lambda item: (item[0], item[1].filename)):
            sub[name].append(r)
        groups.append((f"variants/{label}/simple", 3, dict(sub)))
    pages: list[Page] = []
    for prefix, depth, projects in groups:
        for name, recs in projects.items():
            for kind, ext in (("project-html", "html"), ("project-json", "json")):
                pages.append(Page(f"{prefix}/{name}/index.{ext}", kind, depth + 1, name, tuple(recs)))
    for prefix, depth, projects in groups:
        names_sorted = tuple(sorted(projects))
        pages.append(Page(f"{prefix}/index.html", "root-html", depth, None, (), names_sorted))
        pages.append(Page(f"{prefix}/index.json", "root-json", depth, None, (), names_sorted))
    pages.append(Page("index.html", "landing", 0, None, tuple(ordered)))
    return pages


def environment(templates: Path | None) -> jinja2.Environment:
    """Templates from ``templates`` first (any name may be overridden), then the shipped ones."""
    shipped = TEMPLATES
    loaders: list[jinja2.BaseLoader] = []
    if templates is not None:
        loaders.append(jinja2.FileSystemLoader(str(templates)))
    loaders.append(jinja2.FileSystemLoader(str(shipped)))
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def fingerprint(env: jinja2.Environment, base_url: str) -> str:
    """Changes when a template or the base URL does, so cached pages are rendered again."""
    h = hashlib.sha256(f"{API_VERSION}\0{base_url}\0".encode())
    for module in (__file__, index_landing.__file__, index_selector.__file__):  # the rendering code itself
        h.update(Path(module).read_bytes())
    for name in sorted(set(TEMPLATE_NAMES) | set(env.list_templates())):
        if not name.endswith((".html", ".css", ".js", ".j2")):
            continue
        assert env.loader is not None
        source, _, _ = env.loader.get_source(env, name)
        h.update(f"{name}\0{source}\0".encode())
    return h.hexdigest()


def file_href(record: Record, depth: int) -> str:
    """Relative link from a page ``depth`` folders deep to the wheel, ``+`` written ``%2B``."""
    return ("../" * depth or "./") + "files/" + quote(record.filename) + "#sha256=" + record.sha256


def _yanked(record: Record) -> bool | str:
    if isinstance(record.yanked, str):
        return record.yanked or True
    return bool(record.yanked)


def _file_json(record: Record, depth: int) -> dict[str, object]:
    core: dict[str, str] | bool = {"sha256": record.metadata_sha256} if record.metadata_sha256 else False
    entry: dict[str, object] = {
        "filename": record.filename,
        "url": ("../" * depth or "./") + "files/" + quote(record.filename),
        "hashes": {"sha256": record.sha256},
        "core-metadata": core,
        "dist-info-metadata": core,
        "yanked": _yanked(record),
        "size": record.size,
        "upload-time": record.upload_time,
    }
    if record.requires_python:
        entry["requires-python"] = record.requires_python
    return entry


def _dumps(data: object) -> bytes:
    return (json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def render_page(env: jinja2.Environment, page: Page, base_url: str) -> bytes:
    """The bytes of one page."""
    meta = {"api-version": API_VERSION}
    if page.kind == "project-json":
        versions = sorted({r.version for r in page.records}, key=sort_key)
        files = [_file_json(r, page.depth) for r in page.records]
        return _dumps({"meta": meta, "name": page.project, "files": files, "versions": versions})
    if page.kind == "root-json":
        return _dumps({"meta": meta, "projects": [{"name": n} for n in page.projects]})
    if page.kind == "project-html":
        files = [
            {
                "filename": r.filename,
                "href": file_href(r, page.depth),
                "requires_python": r.requires_python,
                "metadata": f"sha256={r.metadata_sha256}" if r.metadata_sha256 else None,
                "yanked": None if _yanked(r) is False else (r.yanked if isinstance(r.yanked, str) else ""),
            }
            for r in page.records
        ]
        html = env.get_template("project.html").render(project=page.project, files=files, api_version=API_VERSION)
    elif page.kind == "root-html":
        html = env.get_template("root.html").render(projects=page.projects, api_version=API_VERSION)
    elif page.kind == "landing":
        html = env.get_template("landing.html").render(**landing_context(page.records, base_url))
    else:  # pragma: no cover - plan() makes no other kind
        raise ValueError(page.kind)
    return html.encode()


def render(records: list[Record], templates: Path | None, base_url: str = DEFAULT_BASE_URL) -> dict[str, bytes]:
    """Every page of the index: relative path -> bytes (a pure function of the records)."""
    env = environment(templates)
    return {p.path: render_page(env, p, base_url.rstrip("/")) for p in plan(records)}
