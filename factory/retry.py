"""Retrying a busy service (HTTP 429 and 5xx) with backoff, within a bounded time.

The Hub's file downloads retry through huggingface_hub's own ``http_backoff``
and S3 through botocore's retry modes; this covers the calls whose libraries
do not retry: the Hub's API listings (``HfApi``) and an upload endpoint's POST
(twine sends a streamed body, which urllib3's ``Retry`` cannot send again).
``Retry-After`` is honoured (urllib3 parses it); the whole wait is bounded by
``KERNEL_FACTORY_RETRY_S`` seconds (default 60), after which the caller
reports the service unreachable (exit 4).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from urllib3.util import Retry

from . import report

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
FIRST_WAIT_S = 0.5
MAX_WAIT_S = 30.0


class Backoff:
    """Waits 0.5, 1, 2, ... s (or what Retry-After asks) until ``budget`` seconds have passed."""

    def __init__(self, what: str, budget: float) -> None:
        self.what = what
        self.budget = budget  # seconds: config.Variables.retry_s (KERNEL_FACTORY_RETRY_S)
        self.start = time.monotonic()
        self.wait = FIRST_WAIT_S
        self.tries = 1

    def again(self, headers: Mapping[str, str] | None = None, status: int | None = None) -> bool:
        """Sleep before the next try and return True, or False when the budget would be exceeded."""
        value = (headers or {}).get("Retry-After") or (headers or {}).get("retry-after")  # seconds or an HTTP date
        try:
            asked = float(Retry().parse_retry_after(value)) if value else None
        except Exception:  # urllib3 raises InvalidHeader on a malformed value: back off as usual
            asked = None
        pause = min(asked if asked is not None else self.wait, MAX_WAIT_S)
        if time.monotonic() - self.start + pause > self.budget:
            return False
        code = f"HTTP {status}" if status is not None else "an error"
        report.raw_error(f"{self.what}: {code}; retrying in {pause:.1f} s")
        time.sleep(pause)
        self.wait = min(self.wait * 2, MAX_WAIT_S)
        self.tries += 1
        return True

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start
