"""An organisation's kernel repositories on the Hub, for ``[[kernel]] repo = "org/*"`` globs.

The Hub lists a repository type at ``/api/<type>s?author=<org>`` (``/api/models``
for ``list_models``); huggingface_hub has no call for the kernel type, so the
kernel listing goes through its own paginator (Link headers), headers and
error handling. Model-type kernels (``repo-type = "model"``) use ``list_models``.
"""

from __future__ import annotations

import fnmatch

from ..errors import Unreachable, UsageError

GLOB_CHARS = "*?["


def is_glob(repo: str) -> bool:
    return any(c in repo for c in GLOB_CHARS)


def list_org(org: str, repo_type: str | None) -> list[str]:
    """Every repository id of ``org`` of the given type (kernel when None), sorted."""
    # imported here: planning local repositories (to-wheel, make demo) should not pay for huggingface_hub
    from huggingface_hub.utils._headers import build_hf_headers
    from huggingface_hub.utils._pagination import paginate

    from .hub import HubSource  # the Hub's environment (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE), its one-line errors

    hub = HubSource(f"{org}/*", repo_type=repo_type)
    endpoint = hub.endpoint
    if hub.offline:
        raise Unreachable(f"{org}/*: listing an organisation needs the Hub, and HF_HUB_OFFLINE is set; "
                          "list the repositories one by one, or run online")
    with hub.errors(f"listing the {repo_type or 'kernel'} repositories of {org}"):
        if repo_type == "model":
            ids = [m.id for m in hub.api.list_models(author=org)]
        else:
            headers = build_hf_headers(token=hub.token)
            items = paginate(f"{endpoint}/api/kernels", params={"author": org}, headers=headers)
            try:
                ids = [str(item["id"]) for item in items if isinstance(item, dict) and "id" in item]
            except ValueError:  # not JSON: not a Hub (or one without the listing)
                raise Unreachable(f"{endpoint}/api/kernels?author={org} did not answer a JSON list; HF_ENDPOINT "
                                  "must be a Hub that lists an organisation's repositories") from None
    return sorted(i for i in ids if i.split("/", 1)[0] == org)


def expand(pattern: str, exclude: tuple[str, ...], repo_type: str | None) -> list[str]:
    """``org/glob`` -> the matching repository ids of ``org`` that no ``exclude`` glob matches."""
    org, _, name = pattern.partition("/")
    if not org or is_glob(org) or not name or "/" in name:
        raise UsageError(f"repo {pattern!r}: a glob names one organisation and globs the names, e.g. 'org/*'")
    return [
        repo for repo in list_org(org, repo_type)
        if fnmatch.fnmatchcase(repo, pattern) and not any(fnmatch.fnmatchcase(repo, g) for g in exclude)
    ]  # fmt: skip
