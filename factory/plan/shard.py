"""``--shard K/N``: split the full plan into N disjoint parts by a stable hash.

A job belongs to shard K (1-based) when the sha256 of
``"repo\\0revision\\0variant"`` modulo N is K-1. The hash depends only on the
job, so every process, machine and run agrees, and the shards together cover
the whole plan exactly once.
"""

from __future__ import annotations

import hashlib

from ..errors import UsageError

_HELP = "give --shard as K/N with 1 <= K <= N, e.g. --shard 2/4"


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)``; UsageError naming the problem otherwise."""
    parts = text.strip().split("/")
    if len(parts) != 2:
        raise UsageError(f"--shard {text!r} is not K/N; {_HELP}")
    try:
        k, n = int(parts[0]), int(parts[1])
    except ValueError:
        raise UsageError(f"--shard {text!r} is not two whole numbers; {_HELP}") from None
    if n < 1:
        raise UsageError(f"--shard {text!r}: N must be at least 1; {_HELP}")
    if not 1 <= k <= n:
        raise UsageError(f"--shard {text!r}: K must be between 1 and {n}; {_HELP}")
    return k, n


def shard_of(key: tuple[str, str, str], n: int) -> int:
    """The 1-based shard that ``(repo, revision, variant)`` falls in among ``n``."""
    digest = hashlib.sha256("\0".join(key).encode()).digest()
    return int.from_bytes(digest[:8], "big") % n + 1
