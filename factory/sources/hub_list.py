"""An organisation's kernel repositories on the Hub, for ``[[kernel]] repo = "org/*"`` globs: listed through
``HubSource.pages`` (next pages only on HF_ENDPOINT: huggingface_hub's paginator would send the token to any host a
Link header names); a listed id is always a Hub id, never a local path."""

from __future__ import annotations

import fnmatch

from ..config import Variables
from ..errors import Unreachable, UsageError

GLOB_CHARS = "*?["


def is_glob(repo: str) -> bool:
    return any(c in repo for c in GLOB_CHARS)


def expand(pattern: str, exclude: tuple[str, ...], repo_type: str | None,
           env: Variables | None = None) -> tuple[list[str], list[str]]:
    """``org/glob`` -> the matching repository ids of ``org`` (of the given type, kernel when None), sorted, that
    no ``exclude`` glob matches; and a line for each listed id left out as not ``org/name`` with a plain name
    (huggingface_hub's own validator, ASCII only)."""
    org, _, name = pattern.partition("/")
    if not org or is_glob(org) or not name or "/" in name:
        raise UsageError(f"repo {pattern!r}: a glob names one organisation and globs the names, e.g. 'org/*'")
    # imported here: planning local repositories (to-wheel, make demo) should not pay for huggingface_hub
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils._validators import validate_repo_id

    from .hub import HubSource  # the Hub's environment, its pagination (next pages on HF_ENDPOINT only), its errors

    hub = HubSource(f"{org}/*", repo_type=repo_type, env=env)
    if hub.offline:
        raise Unreachable(f"{org}/*: listing an organisation needs the Hub, and HF_HUB_OFFLINE is set; "
                          "list the repositories one by one, or run online")
    what = f"listing the {repo_type or 'kernel'} repositories of {org}"
    url = f"{hub.endpoint}/api/{'models' if repo_type == 'model' else 'kernels'}"
    ids: set[str] = set()
    problems: list[str] = []
    for page, _ in hub.pages(what, "the repository listing", url, {"author": org}):
        for item in page:
            repo = item.get("id") if isinstance(item, dict) else None
            if not isinstance(repo, str) or repo.partition("/")[0] != org:
                continue  # another organisation's: not asked for
            try:
                validate_repo_id(repo)
                usable = repo.isascii() and repo.count("/") == 1
            except HFValidationError:
                usable = False
            if usable:
                ids.add(repo)
            else:
                problems.append(f"{org}/*: the Hub listed {repo[:100]!r}, which is not a Hub repository id "
                                "(org/name; letters, digits, '-', '_', '.'); left out: check HF_ENDPOINT points at a "
                                "Hub you trust")
    return [
        repo for repo in sorted(ids)
        if fnmatch.fnmatchcase(repo, pattern) and not any(fnmatch.fnmatchcase(repo, g) for g in exclude)
    ], problems  # fmt: skip
