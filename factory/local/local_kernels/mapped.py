"""``local-kernels --check``: the kernels transformers' default mapping asks for on this machine's device, and
whether each loads offline.

transformers kernelizes through ``get_kernel_mapping_transformers()`` (sources/transformers_map.py reads it from
the target interpreter, in its own process). ``kernelize`` loads each mapped ``LayerRepository`` or
``FuncRepository`` from the Hub cache only (LOCAL_KERNELS is not read there): ``version=N`` resolves through
``refs/v<N>`` to a commit, and ``snapshots/<commit>/build`` must hold a variant the target's kernels loads. One line per
mapped (repository, version or revision) for the device torch reports, and whether it loads offline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...errors import UsageError
from ...sources.transformers_map import Entry, KernelMapping, read_mapping
from .. import cache
from ..probe.environment import Environment
from ..probe.rules import Judge
from .checks import installed_version
from .loaders import resolve, snapshot_fit

# kernels' backend name (Environment.backend) -> the device key transformers' mapping uses.
DEVICES = {"cuda": "cuda", "rocm": "rocm", "xpu": "xpu", "metal": "mps", "cpu": "cpu", "cann": "npu"}
FIX = "mirror it (a [[transformers]] table) and run `kernel-factory download` or `local-kernels --cache`"


@dataclass(frozen=True)
class Mapped:
    """One repository at one version (or revision) the mapping names for the device, with its layers and modes."""

    repo_id: str
    version: int | None
    revision: str | None
    layers: tuple[str, ...]
    modes: tuple[str, ...]

    @property
    def title(self) -> str:
        at = f"version {self.version}" if self.version is not None else f"revision {self.revision}"
        return f"{self.repo_id} {at} ({', '.join(self.layers)}; {', '.join(self.modes)})"


def group(entries: tuple[Entry, ...], device: str) -> tuple[list[Mapped], list[str]]:
    """The device's entries, one per (repository, version or revision) in the mapping's order; and the layers
    mapped to a local repository (nothing in the Hub cache to check)."""
    found: dict[tuple[str, int | None, str | None], tuple[list[str], list[str]]] = {}
    local: list[str] = []
    for e in entries:
        if e.device != device:
            continue
        if not e.repo_id or (e.version is None and not e.revision):
            local.append(e.layer)
            continue
        layers, modes = found.setdefault((e.repo_id, e.version, e.revision), ([], []))
        layers.extend(x for x in [e.layer] if x not in layers)
        modes.extend(m for m in e.modes if m not in modes)
    return [Mapped(r, v, s, tuple(ls), tuple(ms)) for (r, v, s), (ls, ms) in found.items()], local


def loads_offline(root: Path, m: Mapped, judge: Judge) -> tuple[bool, str]:
    """Whether the target's kernels (``judge``) finds ``m`` in the Hub cache at ``root`` with a variant that fits
    there, and why (not)."""
    if m.version is not None:
        ref: str | None = f"v{m.version}"
    else:
        ref = None if m.revision and cache.SHA.fullmatch(m.revision) else m.revision
    folder = cache.repo_folder(root, m.repo_id)
    if ref is None:
        sha, how = m.revision, ""
    else:
        found = resolve(root, m.repo_id, ref, judge)
        if found is None:
            return False, f"no refs/{ref} for {m.repo_id} in {root}"
        folder, sha = found
        how = f"refs/{ref} names {sha}: "
    assert sha is not None
    chosen, why = snapshot_fit(folder / "snapshots" / sha, judge)
    return chosen is not None, how + why


def lines(mapping: KernelMapping, env: Environment, root: Path, python: str,
          ask: Callable[[list[str]], Judge]) -> tuple[list[str], bool]:
    """The lines for the mapped kernels of ``env``'s device, and whether every one loads offline."""
    if env.torch is None:
        return [f"transformers {mapping.transformers} at {python}: its mapped kernels are not checked, as torch does "
                f"not import there ({env.torch_error or 'not installed'})"], True
    device = DEVICES.get(env.backend, env.backend)
    mapped, local = group(mapping.entries, device)
    if not mapped and not local:
        return [f"transformers {mapping.transformers} at {python} maps no kernel for {device}, this machine's "
                "device"], True
    out = [f"transformers {mapping.transformers} (kernels {mapping.kernels}) at {python} maps {len(mapped)} kernels "
           f"for {device}, this machine's device (Hub cache {root}):"]
    ok = 0
    judge = ask([m.repo_id for m in mapped]) if mapped else None
    for m in mapped:
        assert judge is not None
        loads, why = loads_offline(root, m, judge)
        ok += loads
        out.append(f"  {m.title}: loads offline from {why}" if loads else
                   f"  {m.title}: not loadable offline ({why}): {FIX}")
    out += [f"  {layer}: a local repository, loaded from its path" for layer in local]
    out.append(f"{ok} of {len(mapped)} kernels transformers maps for {device} load offline")
    return out, ok == len(mapped)


def check(python: str, path: list[str] | None, environment: Callable[[], Environment],
          root: Path, ask: Callable[[list[str]], Judge]) -> tuple[list[str], bool]:
    """``--check``'s lines for transformers' mapping in ``python`` (whose packages are on ``path``; None: this
    interpreter's): nothing without transformers there; a mapping that cannot be read is one line, not a failure."""
    if installed_version("transformers", path) is None:
        return [], True
    try:
        mapping = read_mapping(python)
    except UsageError as exc:
        return [f"transformers' mapped kernels are not checked: {exc}"], True
    return lines(mapping, environment(), root, python, ask)
