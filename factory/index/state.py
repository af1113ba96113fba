"""The index root's ``.index-state.json``: what its pages show (the catalog generation and fingerprint they were
rendered for, the variant labels, each project's variant indexes and landing line) and each page's size and mtime
(ns) once written.

Anyone who can write the index root can change it, so it is checked as a record is before any of it becomes a
path or a line of a page: a state that fails is dropped with one warning and every page is rendered again. A page
whose size or mtime is not the state's (deleted, edited, restored) is rendered again on the next run.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..nofollow import write_bytes
from ..store import check
from .pages import project_paths, root_paths

STATE_FILE = ".index-state.json"
STATE_SCHEMA = 4
LANDING = "index.html"
_PROJECT = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")  # a normalised project name: safe as a folder name
_GENERATION = re.compile(r"[0-9A-Za-z:._-]{1,128}")


@dataclass
class State:
    fingerprint: str
    generation: str
    labels: dict[str, str | None]
    projects: dict[str, Any]  # project -> {"labels": [...], "summary": {...}}
    pages: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (size, mtime_ns) once written

    def owners(self) -> dict[str, str | None]:
        """Each page's path -> its project (None for the roots and the landing page)."""
        owner: dict[str, str | None] = {LANDING: None}
        for label in [None, *self.labels]:
            owner.update(dict.fromkeys(root_paths(label)))
        for name, entry in self.projects.items():
            owner.update(dict.fromkeys(project_paths(name, entry["labels"]), name))
        return owner


def _summary(project: str, value: Any) -> None:
    if type(value) is not dict or set(value) != {"project", "name", "kind", "version", "summary", "wheels",
                                                  "variants"}:  # fmt: skip
        raise ValueError(f"the landing line of {project!r} is not one the index writes")
    if value["project"] != project or value["kind"] not in check.KINDS:
        raise ValueError(f"the landing line of {project!r} names another project or kind")
    if not all(check.plain_text(value[k]) for k in ("name", "version")) or not (
        type(value["summary"]) is str and len(value["summary"]) <= check.MAX_SUMMARY
        and check.plain_text(value["summary"][: check.MAX_TEXT])
    ):  # fmt: skip
        raise ValueError(f"the landing line of {project!r} holds a text no record may hold")
    for key in ("wheels", "variants"):
        if type(value[key]) is not int or value[key] < 0:
            raise ValueError(f"the landing line of {project!r} holds a {key} count that is not a whole number")


def parse(raw: Any) -> State | None:
    """The state in a parsed state file; None for another schema (an older tool's); ValueError says what is
    wrong with one of this schema."""
    if type(raw) is not dict or raw.get("schema") != STATE_SCHEMA:
        return None
    fp, generation, labels, projects, pages = (raw.get(k) for k in ("fingerprint", "generation", "labels",
                                                                     "projects", "pages"))  # fmt: skip
    if type(fp) is not str or not re.fullmatch(r"[0-9a-f]{64}", fp):
        raise ValueError("its fingerprint is not a sha256 hex digest")
    if type(generation) is not str or not _GENERATION.fullmatch(generation):
        raise ValueError("its generation is not one a catalog gives")
    if type(labels) is not dict:
        raise ValueError("its labels are not an object")
    for label, backend in labels.items():
        if not check.plain_label(label) or not (backend is None or check.plain_text(backend)):
            raise ValueError(f"label {label[:80]!r} is not a build variant's label")
    if type(projects) is not dict:
        raise ValueError("its projects are not an object")
    for name, entry in projects.items():
        if len(name) > 200 or not _PROJECT.fullmatch(name):
            raise ValueError(f"project {name[:80]!r} is not a normalised project name")
        if type(entry) is not dict or set(entry) != {"labels", "summary"} or type(entry["labels"]) is not list:
            raise ValueError(f"the entry of project {name!r} is not one the index writes")
        if any(type(label) is not str or label not in labels for label in entry["labels"]):
            raise ValueError(f"project {name!r} is in a variant index the state does not name")
        _summary(name, entry["summary"])
    state = State(fp, generation, labels, projects)
    if type(pages) is not dict:
        raise ValueError("its pages are not an object")
    if set(pages) != set(state.owners()):
        raise ValueError("its pages are not the ones its projects and labels have")
    for path, stat in pages.items():
        if type(stat) is not list or len(stat) != 2 or not all(type(v) is int and v >= 0 for v in stat):
            raise ValueError(f"the size and time of page {path!r} are not two whole numbers")
        state.pages[path] = (stat[0], stat[1])
    return state


def read_state(out: Path) -> tuple[State | None, str | None]:
    """(the state of the index root ``out`` or None, a warning line where a state file is unreadable or fails)."""
    path = out / STATE_FILE
    try:
        with open(path, "rb") as f:
            data = f.read(64 << 20)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path}: cannot be read ({exc.strerror}); every page is rendered again"
    try:
        return parse(json.loads(data)), None
    except (ValueError, RecursionError) as exc:
        why = "not valid JSON" if isinstance(exc, json.JSONDecodeError) else str(exc)
        return None, f"{path}: not a valid index state ({why}); dropped, every page is rendered again"


def write_state(out: Path, state: State) -> None:
    doc = {"schema": STATE_SCHEMA, **vars(state)}  # its fields, each a key of the file
    write_bytes(out / STATE_FILE, json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())


def page_stat(path: str | Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_size, st.st_mtime_ns


def changed_pages(out: Path, state: State) -> set[str]:
    """The pages of ``state`` that are missing, or whose size or mtime is not the one written (one stat each)."""
    root = os.fspath(out)
    return {path for path, stat in state.pages.items() if page_stat(os.path.join(root, path)) != stat}
