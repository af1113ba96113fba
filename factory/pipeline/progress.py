"""What ``build`` and ``to-wheel`` show while they work: on a terminal a tqdm bar of wheels with the bytes fetched
and written so far, read twice a second by a thread of this process from where the workers write (the job folders
in scratch and work, the Hub cache's ``*.incomplete`` downloads); in a log one line per wheel; with ``-q`` nothing."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .. import report

POLL_S = 0.5


def _entries(folder: str | Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError:  # removed while we looked: a finished item
        return []


def folder_bytes(root: Path) -> int:
    """The bytes of the regular files under ``root``'s ``job-*`` folders (links not followed); 0 if none."""
    total = 0
    try:
        stack = [e.path for e in _entries(root) if e.name.startswith("job-") and e.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    while stack:
        for entry in _entries(stack.pop()):
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


def incomplete_bytes(folders: Iterable[Path]) -> int:
    """The bytes of the downloads in progress (huggingface_hub's ``blobs/*.incomplete``) in ``folders``."""
    total = 0
    for entry in (e for folder in folders for e in _entries(folder) if e.name.endswith(".incomplete")):
        try:
            total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total


class Bytes:
    """The bytes fetched and written: those of finished items, plus what the folders hold for items in flight."""

    def __init__(self, work: Path, scratch: Path | None, downloads: list[Path]) -> None:
        self.work, self.scratch, self.downloads = work, scratch, downloads
        self.fetched_done = 0
        self.written_done = 0

    def finished(self, fetched: int, written: int) -> None:
        self.fetched_done += fetched
        self.written_done += written

    def text(self) -> str:
        fetched = self.fetched_done + incomplete_bytes(self.downloads)
        if self.scratch is not None:
            fetched += folder_bytes(self.scratch)
        written = self.written_done + folder_bytes(self.work)
        return f"fetched {report.size(fetched)}, wheels written {report.size(written)}"


def progress(total: int, count: Bytes, sizes: Callable[[Any], int], describe: Callable[[Any], tuple[str, int]],
             stream: Any = None) -> tuple[Callable[[], None], Callable[[Any], None], Callable[[], None]]:
    """(start, tell, close): ``start()`` once the worker pool has forked (no thread of the bar may run at a fork),
    ``tell(outcome)`` after each item, ``close()`` at the end. ``sizes(job)``: the bytes a job fetches (0 where
    not known); ``describe(outcome)``: (its line, its wheel's bytes, 0 for a failed item)."""
    stream = sys.stderr if stream is None else stream
    if report.quiet():
        return (lambda: None), (lambda outcome: None), (lambda: None)
    done = [0]
    if not stream.isatty():
        def log(outcome: Any) -> None:
            done[0] += 1
            report.progress(f"[{done[0]}/{total}] {describe(outcome)[0]}")

        return (lambda: None), log, (lambda: None)
    shown: list[Any] = []  # the bar and its polling thread, once started
    stopped = threading.Event()

    def poll() -> None:
        while not stopped.wait(POLL_S):
            shown[0].set_postfix_str(count.text())

    def start() -> None:
        if not shown:
            from tqdm import tqdm

            shown.append(tqdm(total=total, unit="wheel", desc="building", file=stream, dynamic_ncols=True))
            shown.append(threading.Thread(target=poll, name="build-progress", daemon=True))
            shown[1].start()

    def tell(outcome: Any) -> None:
        start()
        line, written = describe(outcome)
        count.finished(sizes(outcome.job), written)
        shown[0].write(line, file=stream)
        shown[0].update(1)

    def close() -> None:
        if shown and not stopped.is_set():
            stopped.set()
            shown[1].join()
            shown[0].set_postfix_str(count.text())
            shown[0].close()

    return start, tell, close
