"""The pages of the index, rendered per project: a project's records -> its pages' bytes.

A project has, in the combined index and in each variant index it appears in, a PEP 503 page and a PEP 691 JSON
page, plus one page for a person (``projects/<name>/``). The roots list the projects of their index; the landing
page lists every project. Each page is a pure function of the records it shows, the templates and the base URL.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from ..errors import ConfigError
from ..record import Record, version_key
from ..store.status import Status
from . import landing as index_landing
from .landing import project_context, project_summary, quoted

if TYPE_CHECKING:
    import jinja2

API_VERSION = "1.1"
STATUS_API_VERSION = "1.4"  # PEP 792: the pages that carry a project status marker
DEFAULT_BASE_URL = "INDEX_URL"  # no base-url: the pages say so, and their script fills in their own address
# The shipped templates: the package kernel_factory.templates, which is index_templates/ in an editable install
# and kernel_factory/templates/ in the wheel; asked of the import system, so both layouts agree.
TEMPLATES = Path(str(import_module("kernel_factory.templates").__file__)).parent


def group_prefix(label: str | None) -> str:
    """The folder of the combined index (label None) or of one variant index."""
    return "simple" if label is None else f"variants/{label}/simple"


class Withdrawals(NamedTuple):
    """What the store says beside the records: each project's status (PEP 792; none: active) and the wheels a
    prune is removing (left out of every page before they are deleted: store/retain.py)."""

    statuses: Mapping[str, Status] = {}
    pending: frozenset[str] = frozenset()


NO_WITHDRAWALS = Withdrawals()


def combined_only(record: Record) -> bool:
    """An adopted wheel whose local label names no build variant: listed in the combined root only."""
    return record.label is None and "+" in record.version


def in_variant(record: Record, label: str, backend: str | None) -> bool:
    """Whether ``record`` belongs in the per-variant index of ``label`` (whose backend is ``backend``)."""
    if combined_only(record):
        return False
    if record.label is None:
        return True  # universal kernels and adopted wheels without a label
    return record.label == label or (record.framework == "torch-noarch" and backend is not None
                                     and record.backend == backend)


def project_groups(records: list[Record], labels: Mapping[str, str | None]) -> dict[str | None, list[Record]]:
    """The indexes a project appears in (None: the combined one), each with the project's records there."""
    groups: dict[str | None, list[Record]] = {None: records}
    members: dict[str, list[Record]] = {label: [] for label in sorted(labels)}
    where: dict[tuple[str | None, bool, bool, str | None], list[str]] = {}  # what in_variant reads -> labels
    for r in records:
        key = (r.label, combined_only(r), r.framework == "torch-noarch", r.backend)
        found = where.get(key)
        if found is None:
            found = where[key] = [label for label in members if in_variant(r, label, labels[label])]
        for label in found:
            members[label].append(r)
    groups.update((label, sub) for label, sub in members.items() if sub)
    return groups


@lru_cache(maxsize=8)
def environment(templates: Path | None) -> jinja2.Environment:
    """The shipped templates; with a user's ``templates`` folder, that folder first, in jinja2's sandbox. One per
    templates folder and process, so each template is compiled once (the render workers fork with them)."""
    import jinja2  # only when pages are rendered: a run with nothing to render does not load it

    folders = [str(d) for d in (templates, TEMPLATES) if d is not None]  # the first that has a template wins
    options: dict[str, Any] = {
        "loader": jinja2.FileSystemLoader(folders), "undefined": jinja2.StrictUndefined, "autoescape": True,
        "keep_trailing_newline": True, "trim_blocks": True, "lstrip_blocks": True,
    }  # fmt: skip
    if templates is None:
        return jinja2.Environment(**options)
    # A templates folder is someone's input, not code: its templates render in jinja2's sandbox (no attributes
    # starting with '_', no unsafe calls), and a template it refuses is one line naming the template (exit 2).
    from jinja2.sandbox import SandboxedEnvironment

    class UserTemplates(SandboxedEnvironment):
        def handle_exception(self, source: str | None = None) -> NoReturn:
            exc = sys.exc_info()[1]
            if isinstance(exc, jinja2.TemplateError):
                name, line = getattr(exc, "name", None), getattr(exc, "lineno", None)
                tb = exc.__traceback__
                while tb is not None:  # at render time: the innermost template frame says where
                    template = tb.tb_frame.f_globals.get("__jinja_template__")
                    if template is not None:
                        name, line = template.name, template.get_corresponding_lineno(tb.tb_lineno)
                    tb = tb.tb_next
                where = f"{templates}/{name}" if name else str(templates)
                raise ConfigError(f"templates {where}{f' line {line}' if line else ''}: "
                                  f"{str(exc.message or exc).rstrip('.')}; fix the template (templates render in "
                                  "jinja2's sandbox)") from None
            super().handle_exception(source)

    env = UserTemplates(**options)
    for path in sorted(templates.glob("*.html")):  # a syntax error is found before any page is written
        env.get_template(path.name)
    return env


def fingerprint(templates: Path | None, base_url: str, withdrawals: Withdrawals = NO_WITHDRAWALS) -> str:
    """Changes when a template, the base URL or the rendering code does, so every page is rendered again. Reads
    the template files as the environment finds them (``templates`` first), without loading jinja2."""
    h = hashlib.sha256(f"{API_VERSION}\0{base_url}\0".encode())
    if withdrawals.statuses or withdrawals.pending:  # a status set or a prune under way: every page again
        statuses = {name: status.to_json() for name, status in sorted(withdrawals.statuses.items())}
        h.update(json.dumps([statuses, sorted(withdrawals.pending)], sort_keys=True).encode() + b"\0")
    for module in (__file__, index_landing.__file__):  # the rendering code itself
        h.update(Path(module).read_bytes())
    found = {p.name: p for d in (TEMPLATES, templates) if d is not None for p in d.iterdir() if p.is_file()}
    for name in sorted(n for n in found if n.endswith((".html", ".css", ".js", ".j2"))):
        h.update(name.encode() + b"\0" + found[name].read_bytes() + b"\0")
    return h.hexdigest()


_STR = json.encoder.encode_basestring  # what json.dumps(..., ensure_ascii=False) writes for a str


def _json(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False)``, quicker for the scalars a record holds."""
    if isinstance(value, str):
        return _STR(value)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return int.__repr__(value)
    return json.dumps(value, ensure_ascii=False)


class _File(NamedTuple):
    """What the pages of a project show of one file, whatever their depth (made once per project)."""

    quoted: str  # the file name as a link writes it
    head: str  # its PEP 691 entry up to the link's value
    tail: str  # its PEP 691 entry after the link's value
    metadata: str | None  # its PEP 503 link's data-core-metadata
    yanked: str | None  # its PEP 503 link's data-yanked


def _file(record: Record) -> _File:
    """One file's parts; its PEP 691 entry is ``json.dumps`` of the dict of it (keys sorted), written piece by piece
    (the link, a quoted file name, needs no escaping in JSON)."""
    core = f'{{"sha256":{_json(record.metadata_sha256)}}}' if record.metadata_sha256 else "false"
    requires = f'"requires-python":{_json(record.requires_python)},' if record.requires_python else ""
    yanked = (record.yanked or True) if isinstance(record.yanked, str) else bool(record.yanked)
    head = (
        f'{{"core-metadata":{core},"dist-info-metadata":{core},"filename":{_json(record.filename)},'
        f'"hashes":{{"sha256":{_json(record.sha256)}}},{requires}"size":{_json(record.size)},'
        f'"upload-time":{_json(record.upload_time)},"url":"'
    )
    return _File(quoted(record.filename), head, f'","yanked":{_json(yanked)}}}',
                 f"sha256={record.metadata_sha256}" if record.metadata_sha256 else None,
                 None if yanked is False else (record.yanked if isinstance(record.yanked, str) else ""))


def _files_href(depth: int) -> str:
    """The relative link to ``files/`` from a page ``depth`` folders deep."""
    return ("../" * depth or "./") + "files/"


def _files(records: list[Record], known: Mapping[str, _File] | None) -> list[_File]:
    return [_file(r) if known is None else known[r.filename] for r in records]


def simple_json(project: str, records: list[Record], depth: int, order: Mapping[str, int] | None = None,
                files: Mapping[str, _File] | None = None, status: Status | None = None) -> bytes:
    """PEP 691 JSON of one project (PEP 700 fields, PEP 792 ``status``); ``order``: each version's rank, ``files``:
    each file's parts, when known. The bytes of ``json.dumps`` of the page (keys sorted, compact, not ASCII-escaped),
    written piece by piece (quicker)."""
    versions = sorted({r.version for r in records}, key=version_key if order is None else order.__getitem__)
    href = _files_href(depth)
    entries = ",".join([f.head + href + f.quoted + f.tail for f in _files(records, files)])
    marked = "" if status is None else '"project-status":' + json.dumps(
        status.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False) + ","
    return (
        f'{{"files":[{entries}],"meta":{{"api-version":{_json(STATUS_API_VERSION if status else API_VERSION)}}},'
        f'"name":{_json(project)},{marked}"versions":[{",".join(map(_STR, versions))}]}}\n'
    ).encode()


class FileLink(NamedTuple):
    """One file of a PEP 503 page, as project.html sees it (``f.href`` and ``f["href"]`` both work)."""

    filename: str
    href: str
    requires_python: str | None
    metadata: str | None
    yanked: str | None


def simple_html(env: jinja2.Environment, project: str, records: list[Record], depth: int,
                files: Mapping[str, _File] | None = None, status: Status | None = None) -> bytes:
    """PEP 503 page of one project (PEP 592 yanks, PEP 658/714 metadata hashes, PEP 792 status); ``files`` and
    ``status``: as for ``simple_json``. The shipped project.html is written by ``_project_html`` (the same bytes,
    a test compares them); a project.html of the user's templates folder is rendered."""
    href = _files_href(depth)
    links = [
        FileLink(r.filename, f"{href}{f.quoted}#sha256={r.sha256}", r.requires_python, f.metadata, f.yanked)
        for r, f in zip(records, _files(records, files), strict=True)
    ]
    if _shipped(env, "project.html"):
        return _project_html(project, links, status).encode()
    return env.get_template("project.html").render(project=project, files=links, status=status,
                                                   api_version=STATUS_API_VERSION if status else API_VERSION).encode()


@lru_cache(maxsize=8)
def _shipped(env: jinja2.Environment, name: str) -> bool:
    """Whether ``env`` finds the shipped template ``name`` (no templates folder of the user's overrides it)."""
    found = env.get_template(name).filename
    return found is not None and Path(found) == TEMPLATES / name


def _project_html(project: str, links: list[FileLink], status: Status | None = None) -> str:
    """What the shipped project.html renders (autoescaped by markupsafe, as jinja2 does), written in Python: most of
    a full build's PEP 503 pages, where the template engine took more time than the page's content."""
    from markupsafe import escape

    def e(text: str) -> str:  # most texts (file names, links, hashes) hold nothing to escape: kept as they are
        return str(escape(text)) if "&" in text or "<" in text or ">" in text or '"' in text or "'" in text else text

    name = e(project)
    marker = ""
    if status is not None:
        marker = f'<meta name="pypi:project-status" content="{e(status.status)}">\n'
        if status.reason:
            marker += f'<meta name="pypi:project-status-reason" content="{e(status.reason)}">\n'
    api = STATUS_API_VERSION if status else API_VERSION
    lines = [f'<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<meta name="pypi:repository-version" '
             f'content="{e(api)}">\n{marker}<title>Links for {name}</title>\n</head>\n<body>\n'
             f"<h1>Links for {name}</h1>\n"]  # fmt: skip
    for f in links:
        attrs = f' data-requires-python="{e(f.requires_python)}"' if f.requires_python else ""
        if f.metadata:
            metadata = e(f.metadata)
            attrs += f' data-core-metadata="{metadata}" data-dist-info-metadata="{metadata}"'
        if f.yanked is not None:
            attrs += f' data-yanked="{e(f.yanked)}"'
        lines.append(f'<a href="{e(f.href)}"{attrs}>{e(f.filename)}</a><br>\n')
    lines.append("</body>\n</html>\n")
    return "".join(lines)


def project_pages(
    env: jinja2.Environment, project: str, records: list[Record], labels: Mapping[str, str | None], base_url: str,
    found: Withdrawals = NO_WITHDRAWALS,
) -> tuple[dict[str, bytes], list[str], dict[str, object]]:  # fmt: skip
    """Every page of one project: (path -> bytes, the variant labels it appears in, its landing summary). The
    wheels a prune is removing are left out; a quarantined project's pages offer no file (they stay, so installers
    see why)."""
    if found.pending:  # a prune never takes a project's last version (store/retain.py)
        records = [r for r in records if r.filename not in found.pending] or records
    status = found.statuses.get(project)
    quarantined = status is not None and status.status == "quarantined"
    pages: dict[str, bytes] = {}
    groups = project_groups(records, labels)
    order = {v: i for i, v in enumerate(sorted({r.version for r in records}, key=version_key))}  # sorted once
    files = {r.filename: _file(r) for r in records}  # once: a file is on two pages or more
    for label, recs in groups.items():
        prefix = group_prefix(label)
        depth = prefix.count("/") + 2  # the folders of <prefix>/<project>/ below the root
        offered = [] if quarantined else recs
        pages[f"{prefix}/{project}/index.html"] = simple_html(env, project, offered, depth, files, status)
        pages[f"{prefix}/{project}/index.json"] = simple_json(project, offered, depth, order, files, status)
    context = project_context(project, records, base_url)
    context.update(status=status, quarantined=quarantined)
    if quarantined:
        context.update(selector=[], labels=[])
    pages[f"projects/{project}/index.html"] = env.get_template("kernel.html").render(**context).encode()
    return pages, [label for label in groups if label is not None], project_summary(project, records)


def project_paths(project: str, labels: Iterable[str]) -> list[str]:
    """The paths of a project's pages, given the variant labels it appears in."""
    paths = [f"projects/{project}/index.html"]
    for label in [None, *labels]:
        prefix = group_prefix(label)
        paths += [f"{prefix}/{project}/index.html", f"{prefix}/{project}/index.json"]
    return paths


def root_pages(env: jinja2.Environment, label: str | None, projects: list[str]) -> dict[str, bytes]:
    """The root of one index (PEP 503 and PEP 691), listing ``projects`` (sorted)."""
    html = env.get_template("root.html").render(projects=projects, api_version=API_VERSION).encode()
    root = {"meta": {"api-version": API_VERSION}, "projects": [{"name": n} for n in projects]}
    data = (json.dumps(root, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    return dict(zip(root_paths(label), (html, data), strict=True))


def root_paths(label: str | None) -> tuple[str, str]:
    """The paths of the root pages (PEP 503, PEP 691) of the combined index (None) or of one variant index."""
    prefix = group_prefix(label)
    return f"{prefix}/index.html", f"{prefix}/index.json"


def landing_page(env: jinja2.Environment, summaries: Mapping[str, Mapping[str, object]], labels: Iterable[str],
                 base_url: str, withdrawals: Withdrawals = NO_WITHDRAWALS) -> bytes:
    """The landing page: every project (with a search box), the variant indexes."""
    projects = [summaries[p] for p in sorted(summaries)]
    wheels = sum(int(s["wheels"]) for s in projects)  # type: ignore[call-overload]
    statuses = {name: status for name, status in withdrawals.statuses.items() if name in summaries}
    return env.get_template("landing.html").render(
        base_url=base_url, projects=projects, labels=sorted(labels), wheels=wheels,
        kernels=sum(1 for s in projects if s["kind"] == "kernel"), statuses=statuses,
    ).encode()  # fmt: skip
