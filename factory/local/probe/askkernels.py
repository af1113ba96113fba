"""Ask an interpreter's own kernels library what it would load, without importing kernel-factory into it.

Standard library and that interpreter's ``kernels`` only: ``run.ask_kernels`` runs this file's source there, with
the folders to judge as JSON on stdin, and reads one line, ``KF-KERNELS <json>``. Every answer is kernels' own
(what it asks: docs/local-kernels.md).

Variant resolution of a local folder has no public API in any kernels release, so this calls what kernels' own
cache loader calls, from where each version keeps it (docs/local-kernels.md); the digest check uses public names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MARK = "KF-KERNELS "


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"[:300]


def _folder(path: Path, metadata_cls: Any) -> dict[str, Any]:
    """metadata.json read by kernels, and the files checked against its digest."""
    try:
        meta = metadata_cls.read_from_file(str(path / "metadata.json"))
    except Exception as exc:  # kernels' parser raises its own errors
        return {"metadata": _first_line(exc), "digest": None}
    digest = getattr(meta, "digest", None)
    if digest is None:
        return {"metadata": None, "digest": "none"}
    try:
        digest.validate(type(digest).hash_variant(digest.algorithm, str(path)))
    except Exception as exc:  # DigestValidationError, with one violation per file
        violations = getattr(exc, "violations", None)
        said = "; ".join(str(v) for v in violations) if violations else _first_line(exc)
        return {"metadata": None, "digest": said[:2000]}
    return {"metadata": None, "digest": "ok"}


def _resolver() -> Any:
    try:
        from kernels._internals.variants import get_variants_local, resolve_variant  # 0.19
    except ImportError:
        from kernels.variants import get_variants_local, resolve_variant  # 0.17, 0.18

    def resolve(build: Path) -> dict[str, Any]:
        names = sorted(p.name for p in build.iterdir() if p.is_dir()) if build.is_dir() else []
        variant, trace = resolve_variant(get_variants_local(build), None)
        rejected = {str(d.variant.variant_str): str(d.reason) for d in trace if hasattr(d, "reason")}
        return {"names": names, "chosen": None if variant is None else str(variant.variant_str),
                "rejected": rejected}

    return resolve


def answer(query: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"python": sys.executable, "kernels": None, "builds": {}, "folders": {}}
    try:  # kernels not installed, or broken (a missing extra, a torch that does not import), or without a resolver
        import kernels

        out["kernels"] = str(getattr(kernels, "__version__", "") or "")
        resolve = _resolver()
    except Exception as exc:
        out["error"] = _first_line(exc)
        return out
    folders = {str(p) for p in query.get("folders", [])}
    for build in query.get("builds", []):
        try:
            got = resolve(Path(build))
        except Exception as exc:
            got = {"names": [], "chosen": None, "rejected": {}, "error": _first_line(exc)}
        out["builds"][build] = got
        if got["chosen"]:
            folders.add(str(Path(build) / got["chosen"]))
    for folder in sorted(folders):
        out["folders"][folder] = _folder(Path(folder), kernels.Metadata)
    return out


if __name__ == "__main__":
    sys.stdout.write("\n" + MARK + json.dumps(answer(json.loads(sys.stdin.read() or "{}"))) + "\n")
