"""``index --wheels DIR``: the wheels of a folder that are new to the store, found without reading every name
the store holds.

After each run the catalog keeps, per folder (meta ``wheels:<real path>``), the folder's stat taken before it
was listed, the stat of ``files/`` the run left (store/catalog.py ``settled``), and the names of the folder's
wheels the store then held. While ``files/`` still has that stat, those wheels are still in the store (every
writer renames into ``files/`` under the store lock), so:

- a folder whose stat is unchanged has nothing new: it is not even listed;
- a changed folder is listed and diffed against those names, and only the names that are new to it are looked
  up in the catalog, one query each.

Otherwise (first run, ``files/`` changed, a wheel refused last time) the store's whole listing decides, as it
did before the catalog kept anything. A folder whose wheels were refused, or that holds sdists (which are not
indexed), keeps no snapshot, so the refusals and the sdists' names are printed again on every run until the
files are fixed or removed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..store.adopt import AdoptResult, adopt_wheels, not_wheels
from ..store.catalog import FILES_STATE, Catalog, folder_state

LOOKUPS = 2000  # more new names than this: read every name of the catalog once instead of one query each


def _meta_key(folder: Path) -> str:
    return f"wheels:{os.path.realpath(folder)}"


def _snapshot(catalog: Catalog, key: str) -> tuple[str, list[str]] | None:
    """(the folder's stat, the names the store held) from the last run, if ``files/`` is unchanged since;
    ``key``: the folder's (``_meta_key``)."""
    saved = catalog.meta(key)
    files_state = catalog.meta(FILES_STATE)
    if not saved or not files_state:
        return None
    state, _, files_then = saved.partition("|")
    if files_then != files_state:
        return None
    names = catalog.meta(key + ":present")
    return state, names.split("\n") if names else []


@dataclass
class FolderRun:
    """One ``--wheels`` folder in one run: what adoption did, and what ``remember`` keeps."""

    result: AdoptResult
    key: str  # the folder's key in the catalog's meta (_meta_key)
    state: str | None  # the folder's stat before it was read
    unchanged: bool = False  # the folder and files/ as the last run left them: nothing was read


def adopt_folder(
    root: Path, folder: Path, catalog: Catalog, listing: dict[str, str] | None, known: dict[str, Any],
    kernels: Iterable[str], allow_kernel_names: bool,
) -> FolderRun:  # fmt: skip
    """Adopt the wheels of ``folder`` the store lacks.

    ``listing``: wheel -> key of every record in ``files/``, or None when the catalog is known to match
    ``files/`` (then the catalog answers). Wheels of a project that is a kernel of the store or of ``kernels``
    are refused unless ``allow_kernel_names``.
    """
    key = _meta_key(folder)
    state = folder_state(folder)
    snap = _snapshot(catalog, key) if listing is None else None
    if snap is not None and state is not None and snap[0] == state:
        return FolderRun(AdoptResult(present=snap[1]), key, state, unchanged=True)
    others: list[str] = []  # the sdists and eggs, named in the output (store/adopt.py not_wheels)
    if snap is not None:  # a few names are new: only they are looked at
        entries = os.listdir(folder)
        before = set(snap[1])
        new = [n for n in entries if n not in before]
        others = not_wheels(new)
        fresh = [n for n in new if n.endswith(".whl") and not n.startswith(".")]
        held = _holds(catalog, listing, len(fresh))
        kept = snap[1] if len(entries) - len(new) == len(before) else [n for n in entries if n in before]
        present = kept + [n for n in fresh if held(n)]
        fresh = [n for n in fresh if os.path.isfile(os.path.join(folder, n))]
    else:  # the entries' types come with the listing: no stat per wheel
        with os.scandir(folder) as it:
            names = [e.name for e in it if not e.name.startswith(".") and e.is_file()]
        fresh = [n for n in names if n.endswith(".whl")]
        others = not_wheels(names)
        held = _holds(catalog, listing, len(fresh))
        present = [n for n in fresh if held(n)]
    have = set(present)
    todo = sorted(n for n in fresh if n not in have)
    refuse: set[str] = set()
    if todo and not allow_kernel_names:
        from packaging.utils import canonicalize_name

        parts = {n.split("-", 1)[0] for n in todo}  # one per project, not per wheel
        refuse = set(kernels) | catalog.kernel_projects({canonicalize_name(p) for p in parts})
    where = os.fspath(folder)
    result = adopt_wheels(root, [os.path.join(where, n) for n in todo], refuse, known) if todo else AdoptResult()
    result.present = present
    result.not_wheels = others
    return FolderRun(result, key, state)


def _holds(catalog: Catalog, listing: dict[str, str] | None, lookups: int) -> Callable[[str], bool]:
    """Whether the store has a record of a wheel name: from ``listing``, else from the catalog."""
    if listing is not None:
        return listing.__contains__
    if lookups > LOOKUPS:
        return catalog.keys().__contains__
    return catalog.has


def remember(catalog: Catalog, run: FolderRun) -> None:
    """Keep the folder's snapshot after the run (see the module docstring); call after ``settled``."""
    files_state = catalog.meta(FILES_STATE)
    key = run.key
    if run.result.refused or run.result.not_wheels or not files_state or not run.state:  # said again next run
        catalog.set_meta(key, "")
        return
    catalog.set_meta(key, f"{run.state}|{files_state}")
    if not run.unchanged:  # an unchanged folder adopted nothing: its names are the ones kept
        catalog.put_meta(key + ":present", "\n".join([*run.result.present, *run.result.adopted]))
