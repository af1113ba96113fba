"""What a running Hub knows: the catalog of the store (read again when it may have changed) and the wheels it
checked (each once per file: a wheel replaced in the store is checked again; one that failed is logged once)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

from ..errors import Refused
from ..record import FILES, Record
from .catalog import HubCatalog, build_catalog
from .wheels import CheckedWheel, check_wheel, stat_key

LOG = logging.getLogger("kernel_factory.hub")
RELOAD_S = 10.0  #: the store's records are read again at most this often, when a request comes


class HubState:
    def __init__(self, store: Path, allow_orgs: Collection[str], load: Callable[[], list[Record]],
                 reload_s: float = RELOAD_S) -> None:
        self.files = store / FILES
        self.allow_orgs = tuple(allow_orgs)
        self._load = load
        self._reload_s = reload_s
        self._catalog: HubCatalog | None = None
        self._loaded_at = 0.0
        self._lock = threading.Lock()
        self._checked: dict[str, tuple[tuple[int, int, int, int], CheckedWheel | None]] = {}
        self._wheel_locks: dict[str, threading.Lock] = {}

    def catalog(self) -> HubCatalog:
        with self._lock:
            now = time.monotonic()
            if self._catalog is None or now - self._loaded_at >= self._reload_s:
                self._catalog = build_catalog(self._load(), self.allow_orgs)
                self._loaded_at = now
            return self._catalog

    def checked(self, record: Record) -> CheckedWheel | None:
        """The wheel of ``record`` checked, or None where it failed a check (logged once per file)."""
        path = self.files / record.filename
        with self._lock:
            lock = self._wheel_locks.setdefault(record.filename, threading.Lock())
        with lock:  # two requests for one wheel: one check
            try:
                key = stat_key(path.lstat())
            except OSError:
                key = (0, 0, -1, 0)
            known = self._checked.get(record.filename)
            if known is not None and known[0] == key:
                return known[1]
            try:
                result: CheckedWheel | None = check_wheel(path, record.sha256, record.size)
            except Refused as exc:
                LOG.error("not served: %s", exc)
                result = None
            self._checked[record.filename] = (key, result)
            return result
