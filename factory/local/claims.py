"""Who may claim a kernel: an installed distribution is taken as the kernel its provenance names only if its
name is that kernel's project name and its provenance passes the checks a store record passes; and the bytes
``local-kernels --cache`` places are the ones its RECORD lists.

Anything installed in an environment can already run code in it (a ``.pth`` file), so these rules do not
guard an environment against its own packages: they keep one package from posing as another kernel (a
dependency named ``fast-activation-helpers`` claiming ``kernels-community/activation``), in LOCAL_KERNELS and
in the Hub cache that other environments share. The organisations whose kernels may enter the Hub cache are
an allow list (``--allow-org``, the build's ``allow-orgs``); see SECURITY.md.
"""

from __future__ import annotations

import base64
import binascii
import importlib.metadata as im
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..record import PROVENANCE
from ..store import check

SIGSTORE = "metadata.json.sigstore"
_PLACEHOLDER_SHA = "0" * 64  # the record fields an installed wheel does not carry: its hash, size, upload time
_PLACEHOLDER_TIME = "1980-01-01T00:00:00Z"


def claim_problem(dist_name: str, version: str, prov: dict[str, Any]) -> str | None:
    """Why this distribution may not claim the kernel its provenance names (None: it may)."""
    repo_id = prov.get("repo_id")
    label: str | None = None
    try:
        label = Version(version).local
    except InvalidVersion:
        pass
    filename = f"{canonicalize_name(dist_name).replace('-', '_')}-{version}-py3-none-any.whl"
    raw = {
        "filename": filename,
        "name": dist_name, "version": version, "sha256": _PLACEHOLDER_SHA, "size": 0,
        "upload_time": _PLACEHOLDER_TIME, "label": label,
        **{key: prov.get(key) for key in ("repo_id", "revision", "ref", "variant", "kernel_version")},
    }
    raw = {k: v for k, v in raw.items() if v is not None}
    try:  # the variant by its shape: whether kernels knows it is check_kernel's to say (checks.py)
        check.check({**raw, "requires_python": None}, filename, known_variants=False)
    except ValueError as exc:
        return f"its {PROVENANCE} fails the checks a record passes ({exc}): reinstall the wheel from your index"
    if isinstance(repo_id, str) and canonicalize_name(dist_name) != canonicalize_name(repo_id.split("/")[-1]):
        project = canonicalize_name(repo_id.split("/")[-1])
        return (f"the distribution {dist_name!r} claims {repo_id}, whose project is {project!r}: only a distribution "
                f"of that name may; pip uninstall '{dist_name}' unless you trust it, and install {project}'s wheel")
    return None


def record_files(dist: im.Distribution, package: str) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """(path below ``package`` -> sha256 hex, as RECORD lists them) and why RECORD cannot vouch for them."""
    out: list[tuple[str, str]] = []
    for f in dist.files or ():
        if len(f.parts) < 2 or f.parts[0] != package:
            continue
        rel = "/".join(f.parts[1:])
        if "__pycache__" in f.parts or rel.endswith(".pyc"):
            continue  # bytecode pip compiled at install: not a file of the variant
        if f.hash is None or f.hash.mode != "sha256":
            return (), f"its RECORD gives no sha256 for {package}/{rel}: reinstall the wheel with pip"
        try:
            digest = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
        except (binascii.Error, ValueError):
            digest = b""
        if len(digest) != 32:
            return (), f"its RECORD's sha256 for {package}/{rel} is damaged: reinstall the wheel with pip"
        out.append((rel, digest.hex()))
    if not out:
        return (), f"its RECORD lists no file of {package}/: reinstall the wheel with pip"
    return tuple(sorted(out)), None
