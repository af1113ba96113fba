"""What the target interpreter's kernels library does, decided from its own answers (askkernels.py's JSON), by the
rules of its version (docs/local-kernels.md: kernels 0.17 reads the legacy ``models--`` refs too and checks no
digest at load). No kernels import here: kernel-factory's own process may have no kernels (and no torch) at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

#: The first kernels release that reads refs only from kernels--org--name and checks digests at load.
NEW_RULES = Version("0.18")


@dataclass(frozen=True)
class Build:
    """One ``build/`` folder as the target's kernels sees it."""

    names: tuple[str, ...] = ()
    chosen: str | None = None
    rejected: Mapping[str, str] = field(default_factory=dict)  # variant -> kernels' reason
    error: str | None = None


@dataclass(frozen=True)
class Folder:
    """One variant folder: ``metadata`` (None: kernels reads it, else its error), ``digest`` ("ok", "none": the
    metadata records none, else the violations kernels reports)."""

    metadata: str | None = None
    digest: str | None = "ok"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Judge:
    """The target interpreter's kernels (``kernels``: its version, None when it does not import there)."""

    python: str
    kernels: str | None
    builds: Mapping[str, Build] = field(default_factory=dict)
    folders: Mapping[str, Folder] = field(default_factory=dict)
    error: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], python: str = "") -> Judge:
        """askkernels.py's answer -> a Judge (unknown fields ignored, wrong types read as missing)."""
        builds: dict[str, Build] = {}
        for path, b in (data.get("builds") or {}).items():
            if not isinstance(b, dict):
                continue
            rejected: dict[Any, Any] = b["rejected"] if isinstance(b.get("rejected"), dict) else {}
            builds[str(path)] = Build(tuple(str(n) for n in b.get("names") or ()), _text(b.get("chosen")),
                                      {str(k): str(v) for k, v in rejected.items()}, _text(b.get("error")))
        folders = {str(path): Folder(_text(f.get("metadata")), _text(f.get("digest")))
                   for path, f in (data.get("folders") or {}).items() if isinstance(f, dict)}
        kernels = data.get("kernels")
        return cls(str(data.get("python") or python), str(kernels) if kernels else None, builds, folders,
                   _text(data.get("error")))

    @property
    def digest_at_load(self) -> bool:
        """kernels 0.18 and later (and a version that cannot be read, or none: the rules of today's kernels)."""
        try:
            return not self.kernels or Version(self.kernels) >= NEW_RULES
        except InvalidVersion:
            return True

    @property
    def ref_folders(self) -> tuple[str, ...]:
        """The repository folder types whose ``refs/`` ``version=N`` reads, the winning one first."""
        return ("kernel",) if self.digest_at_load else ("model", "kernel")

    @property
    def title(self) -> str:
        """``kernels 0.19.1`` (or why there is none)."""
        if self.kernels is None:
            return f"no kernels library ({self.error or 'not installed'})"
        return f"kernels {self.kernels}"

    def rules_line(self) -> str:
        """The line --check prints first: which kernels it judged for, and that version's rules."""
        if self.kernels is None:
            return (f"judged for {self.python}: it has {self.title}, so nothing loads there: pip install kernels")
        refs = ("refs/v<N> read from kernels--org--name only" if self.digest_at_load else
                "refs/v<N> read from kernels--org--name and models--org--name (models-- wins)")
        digest = ("every load checks the files against metadata.json's digest" if self.digest_at_load else
                  "no digest check at load")
        return f"judged for kernels {self.kernels} at {self.python}: {refs}; {digest}"

    def folder_refusal(self, path: Path) -> str | None:
        """Why this kernels refuses to load the variant folder ``path``, or None (also when it was not asked)."""
        f = self.folders.get(str(path))
        if f is None:
            return None
        if f.metadata is not None:
            return f"{self.title} cannot read its metadata.json ({f.metadata})"
        if self.digest_at_load and f.digest not in (None, "ok", "none"):
            return (f"{self.title} refuses it at load: the files do not match the digest in its metadata.json "
                    f"({f.digest})")
        return None

    def fit(self, build: Path) -> tuple[str | None, str]:
        """(the variant folder this kernels would load from ``build``, None and why not)."""
        b = self.builds.get(str(build), Build())
        if self.kernels is None:
            return None, f"{self.title} there to choose a variant"
        if b.error:
            return None, f"{self.title} could not read {build} ({b.error})"
        if b.chosen is None:
            if not b.names:
                return None, "holds no build variant folder"
            why = "; ".join(f"{name}: {b.rejected[name]}" for name in b.names if name in b.rejected)
            return None, (f"none of its build variants ({', '.join(b.names)}) fits this torch"
                          + (f" ({self.title}: {why})" if why else ""))
        refusal = self.folder_refusal(build / b.chosen)
        if refusal:
            return None, f"{build / b.chosen}: {refusal}"
        return b.chosen, ""
