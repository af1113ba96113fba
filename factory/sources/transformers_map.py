"""``[[transformers]]``: the kernels transformers' own default mapping asks for, as ``[[kernel]]`` entries
(docs/transformers.md). The mapping is read by a small script run in the given interpreter: the inference
environment's, not the one kernel-factory runs in (as ``which --python`` reads torch).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import KernelSpec, TransformersSpec
from ..errors import UsageError, last_line

TIMEOUT_S = 300  # importing transformers and torch takes seconds; a hung interpreter must not hang the plan
MARK = "KERNEL-FACTORY-MAPPING:"
TESTED = "transformers 5.22.2 with kernels 0.17.2"

# Run in the inference interpreter: prints one line, MARK + JSON (the mapping's entries, or what is missing).
PROBE = r"""
import json, sys
def say(out):
    print("KERNEL-FACTORY-MAPPING:" + json.dumps(out), flush=True)
    sys.exit(0)
try:
    import transformers
except Exception as exc:
    say({"error": "no-transformers", "detail": f"{type(exc).__name__}: {exc}"})
out = {"transformers": getattr(transformers, "__version__", "?")}
try:
    from importlib.metadata import version
    out["kernels"] = version("kernels")
except Exception:
    out["kernels"] = None
try:
    from transformers.integrations import hub_kernels
except Exception as exc:
    say({**out, "error": "no-function", "detail": f"{type(exc).__name__}: {exc}".splitlines()[0]})
get = getattr(hub_kernels, "get_kernel_mapping_transformers", None)
if get is None:
    say({**out, "error": "no-function", "detail": ""})
entries = []
for layer, devices in get().items():
    for device, value in devices.items():
        kind = device if isinstance(device, str) else getattr(device, "type", str(device))
        pairs = value.items() if isinstance(value, dict) else [(None, value)]
        for mode, repo in pairs:
            modes = ["fallback"] if mode is None else [m.name.lower() for m in type(mode) if m.value and m in mode]
            entries.append({
                "layer": str(layer), "device": str(kind), "modes": modes, "kind": type(repo).__name__,
                "repo_id": getattr(repo, "_repo_id", None), "version": getattr(repo, "_version", None),
                "revision": getattr(repo, "_revision", None),
            })
say({**out, "entries": entries})
"""


@dataclass(frozen=True)
class Entry:
    """One (layer, device, modes) of the mapping and the repository it names."""

    layer: str
    device: str
    modes: tuple[str, ...]
    repo_id: str | None  # None: a local repository (LocalLayerRepository), nothing to mirror
    version: int | None
    revision: str | None


@dataclass(frozen=True)
class KernelMapping:
    transformers: str
    kernels: str | None
    entries: tuple[Entry, ...]


def parse(stdout: str, python: str) -> KernelMapping:
    """The probe's output -> the mapping; UsageError (one line) when transformers or its function is missing."""
    lines = [line for line in stdout.splitlines() if line.startswith(MARK)]
    if not lines:
        raise UsageError(f"transformers python {python}: it printed no kernel mapping; check that it is a Python "
                         "interpreter (or venv folder) with transformers installed")
    out: dict[str, Any] = json.loads(lines[-1][len(MARK):])
    if out.get("error") == "no-transformers":
        raise UsageError(f"transformers python {python}: no transformers there ({out.get('detail')}); install it "
                         f"there (tested: {TESTED}) or point 'python' at the environment that has it")
    if out.get("error") == "no-function":
        detail = f": {out['detail']}" if out.get("detail") else ""
        raise UsageError(
            f"transformers {out.get('transformers')} at {python} has no kernel mapping "
            f"(transformers.integrations.hub_kernels.get_kernel_mapping_transformers{detail}; kernels "
            f"{out.get('kernels') or 'not installed'}); it needs a transformers with that function and a kernels it "
            f"accepts (tested: {TESTED}), else list the kernels as [[kernel]] tables"
        )
    return KernelMapping(str(out.get("transformers")), out.get("kernels"), tuple(
        Entry(str(e["layer"]), str(e["device"]), tuple(e["modes"]), e.get("repo_id"), e.get("version"),
              e.get("revision")) for e in out.get("entries", [])))


def read_mapping(python: str) -> KernelMapping:
    """Run the probe in ``python`` (an interpreter, or a venv folder: its bin/python) and parse what it prints."""
    exe = str(Path(python) / "bin" / "python") if os.path.isdir(python) else python
    run_env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore"}
    try:
        proc = subprocess.run([exe, "-c", PROBE], capture_output=True, text=True, timeout=TIMEOUT_S, env=run_env,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"transformers python {python}: cannot run it ({exc}); give the interpreter or venv folder "
                         "of the environment that runs transformers") from None
    if proc.returncode != 0:
        raise UsageError(f"transformers python {python}: the kernel mapping could not be read "
                         f"({last_line(proc.stderr, 'no output')}); check "
                         f"that environment's transformers (tested: {TESTED})")
    return parse(proc.stdout, python)


def chosen(entries: Iterable[Entry], devices: tuple[str, ...], modes: tuple[str, ...]) -> list[Entry]:
    """The entries for ``devices`` (empty: all) and ``modes`` (empty: all); a fallback entry is used whatever the
    mode (kernels takes it when no other mode matches), so it goes with every mode chosen."""
    return [e for e in entries
            if (not devices or e.device in devices) and (not modes or {"fallback", *modes} & set(e.modes))]


def specs(spec: TransformersSpec, mapping: KernelMapping) -> tuple[list[KernelSpec], list[str]]:
    """One kernel spec per (repository, version or revision) the chosen entries name, in the mapping's order; and
    a line for each entry with nothing to mirror (a local repository)."""
    out: dict[tuple[str, str | None], KernelSpec] = {}
    skipped = []
    for e in chosen(mapping.entries, spec.devices, spec.modes):
        if not e.repo_id or (e.version is None and not e.revision):
            skipped.append(f"{e.layer} ({e.device}): a local repository, nothing to mirror")
            continue
        pinned = e.version is None  # a revision, not a version
        out.setdefault((e.repo_id, e.revision if pinned else f"v{e.version}"), KernelSpec(
            repo=e.repo_id, versions=() if pinned else (str(e.version),), sha=e.revision if pinned else None,
            variants=spec.variants, exclude_variants=spec.exclude_variants))
    if not out:
        devices = ", ".join(sorted({e.device for e in mapping.entries})) or "none"
        raise UsageError(
            f"transformers {mapping.transformers} at {spec.python} maps no kernel for devices "
            f"{list(spec.devices) or 'any'} and modes {list(spec.modes) or 'any'}; its mapping has devices: "
            f"{devices}; fix 'devices' or 'modes' in [[transformers]]"
        )
    return list(out.values()), skipped


def describe(spec: TransformersSpec, mapping: KernelMapping, made: list[KernelSpec]) -> str:
    """The plan's line for one [[transformers]] table."""
    where = ", ".join(spec.devices) or "every device"
    how = ", ".join(spec.modes) or "every mode"
    names = ", ".join(f"{k.repo} {'v' + k.versions[0] if k.versions else (k.sha or '')[:12]}" for k in made)
    return (f"transformers {mapping.transformers} (kernels {mapping.kernels}) at {spec.python} maps {len(made)} "
            f"kernel repositories for {where}, {how}: {names or 'none'}")
