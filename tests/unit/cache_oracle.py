"""The Hub cache as huggingface_hub's own ``scan_cache_dir`` sees it, the writer's private scratch folder, and a
package folder's files as a RECORD lists them: the independent oracles of the cache for the unit tests of local/
(hubcache, download)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from huggingface_hub import scan_cache_dir


def scan(root: Path) -> dict[str, dict[str, list[str]]]:
    """{repo id: {commit: sorted refs}}, as scan_cache_dir reads the cache at ``root``; no warnings allowed."""
    info = scan_cache_dir(root)
    assert info.warnings == [], info.warnings
    return {r.repo_id: {rev.commit_hash: sorted(rev.refs) for rev in r.revisions} for r in info.repos}


def no_scratch_left(root: Path) -> None:
    """Nothing left in the cache writer's private folder (``.locks/kernel-factory``)."""
    own = root / ".locks" / "kernel-factory"
    assert not own.exists() or list(own.iterdir()) == []


def hashes(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` (posix path -> sha256 hex), bytecode left out, as a wheel's RECORD lists them."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
