"""The build-variant name grammar of the kernels project, owned here (kernels has no public parser).

kernels 0.17 and 0.18 parse names with ``kernels.variants.parse_variant``; kernels 0.19 moved that module
under ``kernels._internals`` (private) and exports no parser. So the grammar lives here, written from kernels
0.19.1's parser (``kernels/_internals/variants.py`` and ``backends.py``), which reads every name 0.17 and 0.18
read and the new forms too. tests/unit/test_variant_names.py holds every form; the integration test
tests/integration/test_variant_grammar.py checks the same names against kernels 0.17.2, 0.18.3 and 0.19.1
themselves. docs/architecture.md says why.

Forms (``X.Y`` versions are two numbers; legacy names write them without the point):

- legacy arch: ``torch213[-cxx11|-cxx98]-cu128-x86_64-linux``, ``torch-stable-abi211-...``, ``tvm-ffi01-...``
  (backends ``cuXY``, ``rocmXY``, ``xpuXY``, ``cannXY``, ``cpu``, ``metal``, ``neuron``, ``tpu``; Python is
  implicitly ``cpython-3.9-abi3``);
- new arch: ``torch-2.13[-cxx11]-cuda-12.8-cpython-3.9-abi3-x86_64-linux``, ``torch-stable-abi-2.11-...``,
  ``tvm-ffi-0.1-...`` (backends ``cuda-X.Y``, ``rocm-X.Y``, ``xpu-X.Y``, ``cann-X.Y``, ``cpu``, ``metal``,
  ``neuron``, ``tpu``; Python ``cpython-X.Y-abi3`` or ``-abi3t``, abi3t from 3.15);
- noarch: ``torch-<backend>``, ``mlx-<backend>``;
- SDK: ``sdk``, ``sdk-<backend>``, ``sdk-cpython-X.Y-<abi>-<platform>-<os>``,
  ``sdk-<backend>[-X.Y]-cpython-X.Y-<abi>-<platform>-<os>``.

A name is accepted only if it reads back as itself (``torch-2.013-...`` does not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Legacy spellings of a version, as kernels 0.19.1 reads them (greedy/lazy as there: cu128 is 12.8, tvm-ffi012
# is 0.12, rocm714 is 7.14). The same patterns read the compact numbers of local labels back (variants.py).
LEGACY = {
    "torch": re.compile(r"(\d)(\d+)"),
    "torch-stable-abi": re.compile(r"(\d)(\d+)"),
    "tvm-ffi": re.compile(r"(\d+?)(\d+)"),
    "cuda": re.compile(r"(\d+)(\d+)"),
    "rocm": re.compile(r"(7(?=14$)|\d+)(\d+)"),
    "xpu": re.compile(r"(\d+)(\d+)"),
    "cann": re.compile(r"(\d+)(\d+)"),
    "python": re.compile(r"(\d)(\d+)"),
}
_DOTTED = re.compile(r"(\d+)\.(\d+)")
UNVERSIONED = ("cpu", "metal", "neuron", "tpu")
VERSIONED = ("cuda", "rocm", "xpu", "cann")
LEGACY_WORD = {"cuda": "cu", "rocm": "rocm", "xpu": "xpu", "cann": "cann"}  # cu128, rocm72, xpu20251, cann81
PYTHON_ABIS = ("abi3", "abi3t")
ABI3T_MIN = (3, 15)

Pair = tuple[int, int]


def _pair(m: re.Match[str] | None) -> Pair | None:
    return (int(m[1]), int(m[2])) if m else None


def legacy_pair(kind: str, text: str) -> Pair | None:
    """``text`` (digits only) read as kernels' legacy spelling of a ``kind`` version; None if it is not one."""
    return _pair(LEGACY[kind].fullmatch(text))


@dataclass(frozen=True)
class Backend:
    name: str  # cuda, rocm, xpu, cann, cpu, metal, neuron, tpu
    version: Pair | None  # (12, 8); None for the unversioned ones
    legacy: bool

    @property
    def text(self) -> str:
        if self.version is None:
            return self.name
        major, minor = self.version
        return f"{LEGACY_WORD[self.name]}{major}{minor}" if self.legacy else f"{self.name}-{major}.{minor}"


@dataclass(frozen=True)
class Python:
    version: Pair  # the lowest CPython the compiled parts load in
    abi: str  # abi3 or abi3t

    def text(self) -> str:
        return f"cpython-{self.version[0]}.{self.version[1]}-{self.abi}"


LEGACY_PYTHON = Python((3, 9), "abi3")


@dataclass(frozen=True)
class VariantName:
    """One parsed name. ``kind``: arch (framework, backend, system), noarch (framework, noarch backend),
    sdk (no framework; a backend, a noarch backend or neither; Python and system together or neither)."""

    kind: str  # arch, noarch, sdk
    framework: str | None  # arch: torch, torch-stable-abi, tvm-ffi; noarch: torch, mlx; sdk: None
    framework_version: Pair | None
    cxx11_abi: bool | None  # torch only: -cxx11 True, -cxx98 False, untagged None
    backend: Backend | None
    noarch_backend: str | None  # torch-cuda, mlx-metal, sdk-cuda: the backend's name
    python: Python | None  # arch always (legacy: cpython-3.9-abi3); sdk with compiled parts
    platform: str | None  # x86_64, aarch64
    os: str | None  # linux, darwin, windows
    legacy: bool  # the old spelling: no Python part, no points in versions

    @property
    def text(self) -> str:
        """The name as kernels writes it."""
        if self.kind == "noarch":
            return f"{self.framework}-{self.noarch_backend}"
        parts: list[str] = []
        if self.kind == "sdk":
            parts.append("sdk")
            if self.noarch_backend is not None:
                parts.append(self.noarch_backend)
        else:
            assert self.framework is not None and self.framework_version is not None
            major, minor = self.framework_version
            parts.append(f"{self.framework}{major}{minor}" if self.legacy else f"{self.framework}-{major}.{minor}")
            if self.cxx11_abi is not None:
                parts.append("cxx11" if self.cxx11_abi else "cxx98")
        if self.backend is not None:
            parts.append(self.backend.text)
        if self.python is not None and not self.legacy:
            parts.append(self.python.text())
        if self.platform is not None:
            parts.append(f"{self.platform}-{self.os}")
        return "-".join(parts)


def _backend(parts: list[str], legacy: bool, name: str) -> Backend:
    if legacy:
        if len(parts) != 1:
            raise ValueError(f"expected one backend part in a legacy name, got {'-'.join(parts) or 'none'!r}")
        word = parts[0]
        if word in UNVERSIONED:
            return Backend(word, None, True)
        for kind in ("cuda", "rocm", "xpu", "cann"):
            prefix = LEGACY_WORD[kind]
            if word.startswith(prefix):
                version = legacy_pair(kind, word[len(prefix):])
                if version is None:
                    raise ValueError(f"invalid {kind} backend {word!r}")
                return Backend(kind, version, True)
        raise ValueError(f"unknown backend {word!r}")
    word = parts[0] if parts else ""
    if word in UNVERSIONED:
        if len(parts) != 1:
            raise ValueError(f"invalid {word} backend {'-'.join(parts)!r}")
        return Backend(word, None, False)
    if word in VERSIONED:
        version = _pair(_DOTTED.fullmatch(parts[1])) if len(parts) == 2 else None
        if version is None:
            raise ValueError(f"invalid {word} backend {'-'.join(parts)!r} (expected {word}-X.Y)")
        return Backend(word, version, False)
    raise ValueError(f"unknown backend {'-'.join(parts) or 'none'!r} in {name!r}")


def _python(parts: list[str]) -> Python:
    if len(parts) != 3 or parts[0] != "cpython":
        raise ValueError(f"invalid Python part {'-'.join(parts)!r} (expected cpython-X.Y-abi3)")
    version = _pair(_DOTTED.fullmatch(parts[1]))
    if version is None:
        raise ValueError(f"invalid Python version {parts[1]!r} (expected X.Y)")
    if parts[2] not in PYTHON_ABIS:
        raise ValueError(f"invalid Python ABI {parts[2]!r} (expected abi3 or abi3t)")
    if parts[2] == "abi3t" and version < ABI3T_MIN:
        raise ValueError(f"abi3t needs Python 3.15 or later, not {version[0]}.{version[1]}")
    return Python(version, parts[2])


def _split_system(parts: list[str]) -> tuple[list[str], str, str]:
    if len(parts) < 2:
        raise ValueError("missing platform and OS")
    return parts[:-2], parts[-2], parts[-1]


def _split_python(parts: list[str]) -> tuple[list[str], Python | None]:
    if "cpython" not in parts:
        return parts, None
    i = parts.index("cpython")
    return parts[:i], _python(parts[i:])


def _sdk(name: str, rest: list[str]) -> VariantName:
    if "cpython" in rest:
        rest, platform, os_ = _split_system(rest)
        rest, python = _split_python(rest)
        backend = _backend(rest, False, name) if rest else None
        return VariantName("sdk", None, None, None, backend, None, python, platform, os_, False)
    if len(rest) > 1:
        raise ValueError("an SDK name without compiled parts is sdk or sdk-<backend>")
    noarch = rest[0] if rest else None
    return VariantName("sdk", None, None, None, None, noarch, None, None, None, False)


def _framework(name: str, parts: list[str]) -> tuple[str, Pair, bool | None, bool, int]:
    """(framework, version, cxx11_abi, legacy, parts it takes) of an arch name."""
    if name.startswith("torch-stable-abi"):
        legacy = not (len(parts) > 3 and parts[2] == "abi")
        n = 3 if legacy else 4
        text = "-".join(parts[:n]).removeprefix("torch-stable-abi")
        version = legacy_pair("torch-stable-abi", text) if legacy else _pair(_DOTTED.fullmatch(text[1:]))
        framework, cxx = "torch-stable-abi", None
    elif parts[0] == "tvm" and len(parts) >= 2 and parts[1].startswith("ffi"):
        legacy = not (len(parts) > 2 and parts[1] == "ffi")
        n = 2 if legacy else 3
        text = parts[1][3:] if legacy else parts[2]
        version = legacy_pair("tvm-ffi", text) if legacy else _pair(_DOTTED.fullmatch(text))
        framework, cxx = "tvm-ffi", None
    elif parts[0].startswith("torch"):
        legacy = parts[0] != "torch"
        first = 0 if legacy else 1
        n = first + 1
        text = parts[0][5:] if legacy else parts[1]
        version = legacy_pair("torch", text) if legacy else _pair(_DOTTED.fullmatch(text))
        cxx = None
        if len(parts) > n and parts[n] in ("cxx11", "cxx98"):
            cxx = parts[n] == "cxx11"
            n += 1
        framework = "torch"
    else:
        raise ValueError("unknown framework (expected torch, torch-stable-abi, tvm-ffi, mlx or sdk)")
    if version is None:
        raise ValueError(f"invalid {framework} version in {name!r}")
    return framework, version, cxx, legacy, n


def parse_name(name: str) -> VariantName:
    """Parse a build-variant name; ValueError (one line) when kernels 0.19.1 would not read it as itself."""
    parts = name.split("-")
    if parts[0] == "sdk":
        parsed = _sdk(name, parts[1:])
    elif parts[0] in ("torch", "mlx") and not name.startswith("torch-stable-abi") and (
            len(parts) < 2 or not parts[1][:1].isdigit()):
        parsed = VariantName("noarch", parts[0], None, None, None, "-".join(parts[1:]), None, None, None, False)
    else:
        framework, version, cxx, legacy, n = _framework(name, parts)
        rest, platform, os_ = _split_system(parts[n:])
        if legacy:
            python: Python | None = LEGACY_PYTHON
        else:
            rest, python = _split_python(rest)
            if python is None:
                raise ValueError("missing the Python part (cpython-X.Y-abi3)")
        if not rest:
            raise ValueError("missing the backend")
        parsed = VariantName("arch", framework, version, cxx, _backend(rest, legacy, name), None, python, platform,
                             os_, legacy)
    if parsed.text != name:
        raise ValueError(f"it reads back as {parsed.text!r}")
    return parsed
