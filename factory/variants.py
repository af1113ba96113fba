"""Build-variant name -> target: local version label, wheel tags, requirements; and the kernels name grammar.

The grammar of the kernels project's variant names is owned here (kernels 0.19 exports no parser): ``parse_name``
is written from kernels 0.19.1's (docs/architecture.md, "The kernels API the factory uses", says why and how it is
checked against kernels 0.17.2, 0.18.3 and 0.19.1 themselves).

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
Labels: docs/index.md, "Local version labels".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from .errors import UnknownVariant

# Legacy spellings of a version, as kernels 0.19.1 reads them (greedy/lazy as there: cu128 is 12.8, tvm-ffi012
# is 0.12, rocm714 is 7.14). The same patterns read the compact numbers of local labels back.
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
        for kind in VERSIONED:
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


def _sdk_name(name: str, rest: list[str]) -> VariantName:
    if "cpython" in rest:
        rest, platform, os_ = _split_system(rest)
        rest, python = _split_python(rest)
        backend = _backend(rest, False, name) if rest else None
        return VariantName("sdk", None, None, None, backend, None, python, platform, os_, False)
    if len(rest) > 1:
        raise ValueError("an SDK name without compiled parts is sdk or sdk-<backend>")
    return VariantName("sdk", None, None, None, None, rest[0] if rest else None, None, None, None, False)


def _framework(name: str, parts: list[str]) -> tuple[str, Pair, bool | None, bool, int]:
    """(framework, version, cxx11_abi, legacy, parts it takes) of an arch name."""
    cxx = None
    if name.startswith("torch-stable-abi"):
        framework, legacy = "torch-stable-abi", not (len(parts) > 3 and parts[2] == "abi")
        n = 3 if legacy else 4
        text = "-".join(parts[:n]).removeprefix("torch-stable-abi").removeprefix("-")
    elif parts[0] == "tvm" and len(parts) >= 2 and parts[1].startswith("ffi"):
        framework, legacy = "tvm-ffi", not (len(parts) > 2 and parts[1] == "ffi")
        n = 2 if legacy else 3
        text = parts[1][3:] if legacy else parts[2]
    elif parts[0].startswith("torch"):
        framework, legacy = "torch", parts[0] != "torch"
        n = 1 if legacy else 2
        text = parts[0][5:] if legacy else parts[1]
        if len(parts) > n and parts[n] in ("cxx11", "cxx98"):
            cxx = parts[n] == "cxx11"
            n += 1
    else:
        raise ValueError("unknown framework (expected torch, torch-stable-abi, tvm-ffi, mlx or sdk)")
    version = legacy_pair(framework, text) if legacy else _pair(_DOTTED.fullmatch(text))
    if version is None:
        raise ValueError(f"invalid {framework} version in {name!r}")
    return framework, version, cxx, legacy, n


def parse_name(name: str) -> VariantName:
    """Parse a build-variant name; ValueError (one line) when kernels 0.19.1 would not read it as itself."""
    parts = name.split("-")
    if parts[0] == "sdk":
        parsed = _sdk_name(name, parts[1:])
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


# Platforms the kernels project builds for (and the operating systems: _BASE_PLATFORM).
ARCHES = ("x86_64", "aarch64")
# Noarch backends (torch-<backend>, mlx-<backend>, sdk-<backend>); torch-universal has no label.
NOARCH_BACKENDS = ("universal", "cuda", "rocm", "xpu", "cpu", "metal", "neuron", "tpu", "cann", "npu")
AGNOSTIC = "agnostic"  # the backend of an SDK build made for every backend (metadata.json backend type agnostic)

_BASE_PLATFORM = {
    ("linux", "x86_64"): "linux_x86_64",
    ("linux", "aarch64"): "linux_aarch64",
    ("darwin", "aarch64"): "macosx_11_0_arm64",
    ("darwin", "x86_64"): "macosx_11_0_x86_64",
    ("windows", "x86_64"): "win_amd64",
    ("windows", "aarch64"): "win_arm64",
}
# An arch build's Requires-Dist, by framework ({v}: its X.Y version; {next}: the next minor version)
_REQUIRES = {"torch": "torch>={v},<{next}", "torch-stable-abi": "torch>={v}", "tvm-ffi": "apache-tvm-ffi>={v},<{next}"}


@dataclass(frozen=True)
class Target:
    """What one build variant becomes as a wheel.

    ``platform`` is the base platform tag; for Linux the audit replaces it with
    the manylinux policy it certifies, for macOS with the binaries' minimum OS.
    """

    variant: str
    label: str | None  # local version label without '+', None for torch-universal
    python_tag: str  # "cp39" (legacy arch names), "cp312" (cpython-3.12), "py3" for noarch
    abi_tag: str  # "abi3", "abi3t" or "none"
    platform: str  # "linux_x86_64", "win_amd64", "macosx_11_0_arm64", "any"
    os: str | None  # linux, darwin, windows; None for noarch
    arch: str | None  # x86_64, aarch64; None for noarch
    backend: str  # cuda, rocm, xpu, cann, cpu, metal, neuron, tpu, universal, agnostic
    backend_version: str | None  # "12.8" for cu128, None where unversioned
    framework: str  # "torch", "torch-stable-abi", "tvm-ffi", "torch-noarch", "mlx-noarch", "sdk"
    framework_version: str | None  # "2.7", None for noarch and SDKs
    requires: tuple[str, ...]  # Requires-Dist entries from the variant itself
    python: tuple[int, int] | None = None  # the lowest CPython its compiled parts load in: (3, 9), (3, 12)

    @property
    def noarch(self) -> bool:
        return self.os is None

    @property
    def tag(self) -> str:
        return f"{self.python_tag}-{self.abi_tag}-{self.platform}"

    def local_version(self, version: str) -> str:
        return f"{version}+{self.label}" if self.label else version


def _refuse(name: str, why: str) -> UnknownVariant:
    return UnknownVariant(f"unknown build variant {name!r}: {why}; rename the folder or leave it out with "
                          "`variants = [...]`")


# -- local labels of the new grammar ---------------------------------------------------------------------
_FW_WORD = {"torch": "torch", "torch-stable-abi": "torchabi", "tvm-ffi": "tvmffi"}


def _number(kind: str, pair: tuple[int, int]) -> str:
    """A version in a label: the legacy spelling (``213``, ``128``) where it reads back as this version, else
    with ``p`` for the point (``12p10`` for CUDA 12.10, which ``1210`` would not give back)."""
    compact = f"{pair[0]}{pair[1]}"
    return compact if legacy_pair(kind, compact) == pair else f"{pair[0]}p{pair[1]}"


def _backend_label(backend: Backend) -> str:
    if backend.version is None:
        return backend.name
    return LEGACY_WORD[backend.name] + _number(backend.name, backend.version)


def _python_label(v: VariantName) -> str:
    assert v.python is not None
    return "cp" + _number("python", v.python.version) + ("t" if v.python.abi == "abi3t" else "")


def _arch_label(v: VariantName) -> str:
    assert v.framework is not None and v.framework_version is not None and v.backend is not None
    cxx = "" if v.cxx11_abi is None else ("cxx11" if v.cxx11_abi else "cxx98")
    if v.legacy:  # the labels written since the first release, unchanged
        major, minor = v.framework_version
        return f"{_FW_WORD[v.framework]}{major}{minor}{v.backend.text}{cxx}"
    number = _number(v.framework, v.framework_version)
    return f"{_FW_WORD[v.framework]}{number}{_backend_label(v.backend)}{cxx}{_python_label(v)}"


def _version(pair: tuple[int, int] | None) -> str | None:
    return None if pair is None else f"{pair[0]}.{pair[1]}"


def _noarch(name: str, v: VariantName) -> Target:
    backend = v.noarch_backend
    if backend not in NOARCH_BACKENDS or (v.kind == "sdk" and backend == "universal"):
        raise _refuse(name, f"noarch backend {backend!r} is not one of {', '.join(NOARCH_BACKENDS)}")
    if v.framework is None:  # sdk-<backend>
        return Target(name, f"sdk{backend}", "py3", "none", "any", None, None, backend, None, "sdk", None, ())
    word = "" if backend == "universal" else backend  # torch-universal has no label, mlx-universal is mlx
    label = (word or None) if v.framework == "torch" else f"mlx{word}"  # torch-<backend>, mlx-<backend>
    return Target(name, label, "py3", "none", "any", None, None, backend, None, f"{v.framework}-noarch", None,
                  (v.framework,))


@lru_cache(maxsize=4096)
def parse(name: str) -> Target:
    """Map a build-variant folder name to its target; UnknownVariant if not a kernels variant."""
    try:
        v = parse_name(name)
    except ValueError as exc:
        raise _refuse(name, f"not a variant name the kernels project defines ({exc})") from None
    if v.noarch_backend is not None:  # torch-<backend>, mlx-<backend>, sdk-<backend>
        return _noarch(name, v)
    if v.python is None:  # `sdk`: every backend, no compiled parts
        return Target(name, "sdk", "py3", "none", "any", None, None, AGNOSTIC, None, "sdk", None, ())
    platform = _BASE_PLATFORM.get((v.os or "", v.platform or ""))
    if platform is None:
        raise _refuse(name, f"platform {v.platform}-{v.os} is not one of "
                      + ", ".join(f"{a}-{o}" for o, a in _BASE_PLATFORM))
    backend = v.backend
    fw_version: str | None = None
    requires: tuple[str, ...] = ()
    if v.framework is None:  # an SDK build with compiled parts (its backend, if any, and Python)
        label, framework = "sdk" + (_backend_label(backend) if backend else "") + _python_label(v), "sdk"
    else:
        assert v.framework_version is not None
        major, minor = v.framework_version
        label, framework, fw_version = _arch_label(v), v.framework, f"{major}.{minor}"
        requires = (_REQUIRES[framework].format(v=fw_version, next=f"{major}.{minor + 1}"),)
    return Target(name, label, f"cp{v.python.version[0]}{v.python.version[1]}", v.python.abi, platform, v.os,
                  v.platform, backend.name if backend else AGNOSTIC, _version(backend.version if backend else None),
                  framework, fw_version, requires, v.python.version)


_LABEL = re.compile(r"(?P<fw>torchabi|torch|tvmffi)(?P<major>[0-9])(?P<minor>[0-9]+)(?P<backend>[a-z]+?[0-9]*)"
                    r"(?P<abi>cxx11|cxx98)?")
_FW_PREFIX = {"torch": "torch", "torchabi": "torch-stable-abi", "tvmffi": "tvm-ffi"}
# Labels of the new grammar (read back by building the name and parsing it: see _new_names).
_NUM = r"[0-9]+(?:p[0-9]+)?"
_BACKEND = rf"(?:cpu|metal|neuron|tpu|(?:cu|rocm|xpu|cann){_NUM})"
_PY = rf"cp(?P<py>{_NUM})(?P<t>t?)"
_NEW_ARCH = re.compile(rf"(?P<fw>torchabi|torch|tvmffi)(?P<fwv>{_NUM})(?P<be>{_BACKEND})(?P<abi>cxx11|cxx98)?{_PY}")
_SDK_ARCH = re.compile(rf"sdk(?P<be>{_BACKEND})?{_PY}")
_WORD_BACKEND = {word: name for name, word in LEGACY_WORD.items()}


_MAC_ARCHES = {"arm64": ("aarch64",), "x86_64": ("x86_64",), "intel": ("x86_64",), "universal2": ("x86_64", "aarch64")}
_WIN_ARCHES = {"win_amd64": "x86_64", "win_arm64": "aarch64"}


def tag_platforms(tag: str) -> tuple[tuple[str, str], ...]:
    """The (arch, os) pairs a wheel platform tag runs on (``manylinux_2_28_x86_64`` -> x86_64, linux;
    ``macosx_11_0_universal2`` -> both Mac arches); empty for ``any`` and for platforms kernels do not build for.
    The one mapping of platform tags: the wheel's audit, adoption and ``which`` all use it."""
    if tag.startswith(("manylinux", "musllinux", "linux_")):
        return tuple((arch, "linux") for arch in ARCHES if tag.endswith("_" + arch))
    if tag.startswith("macosx_"):
        return tuple((arch, "darwin") for arch in _MAC_ARCHES.get(tag.rsplit("_", 1)[-1], ()))
    if tag in _WIN_ARCHES:
        return ((_WIN_ARCHES[tag], "windows"),)
    return ()


def _decode(kind: str, text: str) -> str | None:
    """A version in a label (``213``, ``12p10``) -> ``X.Y`` as the new grammar writes it; None if none."""
    if "p" in text:
        major, _, minor = text.partition("p")
        return f"{int(major)}.{int(minor)}"
    return _version(legacy_pair(kind, text))


def _backend_text(label_part: str) -> str | None:
    """A backend in a new label (``cu128``, ``cpu``) -> as the new grammar writes it (``cuda-12.8``)."""
    if label_part in UNVERSIONED:
        return label_part
    m = re.fullmatch(r"(cu|rocm|xpu|cann)([0-9p]+)", label_part)
    assert m is not None  # label_part matched _BACKEND
    name = _WORD_BACKEND[m[1]]
    version = _decode(name, m[2])
    return None if version is None else f"{name}-{version}"


def _new_names(label: str, arch: str, os_: str) -> list[str]:
    """The names of the new grammar a compiled label may stand for, on this platform (checked by the caller)."""
    names = []
    for pattern in (_NEW_ARCH, _SDK_ARCH):
        m = pattern.fullmatch(label)
        if m is None:
            continue
        py = _decode("python", m["py"])
        backend = _backend_text(m["be"]) if m["be"] else ""
        if py is None or backend is None:
            continue
        tail = f"cpython-{py}-{'abi3t' if m['t'] else 'abi3'}-{arch}-{os_}"
        if pattern is _SDK_ARCH:
            names.append("-".join(p for p in ("sdk", backend, tail) if p))
            continue
        fw = _FW_PREFIX[m["fw"]]
        version = _decode(fw, m["fwv"])
        if version is not None:
            names.append("-".join(p for p in (f"{fw}-{version}", m["abi"], backend, tail) if p))
    return names


def _noarch_name(label: str) -> str | None:
    """The noarch or SDK name (no compiled parts) whose label is ``label``."""
    if label in NOARCH_BACKENDS:
        return f"torch-{label}"
    for framework in ("mlx", "sdk"):
        rest = label.removeprefix(framework)
        if rest == label:
            continue
        if not rest:
            return "sdk" if framework == "sdk" else "mlx-universal"
        if rest in NOARCH_BACKENDS:
            return f"{framework}-{rest}"
    return None


@lru_cache(maxsize=4096)
def _for_label(label: str, platforms: tuple[str, ...]) -> Target | None:
    candidates: list[str] = []
    if platforms == ("any",):
        name = _noarch_name(label)
        candidates = [name] if name else []
    else:
        m = _LABEL.fullmatch(label)
        for arch, os_ in dict.fromkeys(pair for tag in platforms for pair in tag_platforms(tag)):  # each once
            if m is not None and (m["abi"] is None or m["fw"] == "torch"):
                fw = _FW_PREFIX[m["fw"]] + m["major"] + m["minor"] + (f"-{m['abi']}" if m["abi"] else "")
                candidates.append(f"{fw}-{m['backend']}-{arch}-{os_}")
            candidates.extend(_new_names(label, arch, os_))
    for name in candidates:
        try:
            target = parse(name)
        except UnknownVariant:
            continue
        if target.label == label:
            return target
    return None


def is_label(label: str) -> bool:
    """Whether ``label`` is shaped like a build variant's label (``torch27cu128cxx11``, ``torchabi29cpu``,
    ``tvmffi01cu128``, ``torch213cpucxx11cp39``, a noarch backend such as ``cuda``, ``mlxmetal``, ``sdk``),
    whatever the platform."""
    return (any(p.fullmatch(label) is not None for p in (_LABEL, _NEW_ARCH, _SDK_ARCH))
            or (_noarch_name(label) is not None and label != "universal"))


def for_label(label: str, platforms: Iterable[str]) -> Target | None:
    """The build variant whose local label is ``label``, for a wheel of these platform tags; None if none is.

    The inverse of ``parse(name).label``, checked by parsing the name it gives with the same rules
    (``torch27cu128cxx11`` on ``manylinux_2_28_x86_64`` -> ``torch27-cxx11-cu128-x86_64-linux``).
    """
    return _for_label(label, tuple(sorted(set(platforms))))


#: The characters of a local label (``torch27cu128cxx11``): what a record's label may hold at all.
LABEL_CHARS = re.compile(r"[a-z0-9]{1,64}")


@dataclass(frozen=True)
class LabelParts:
    """A torch label's parts: ``torch213cu130cxx11`` -> torch, 2.13, cu130, cuda, cxx11 (python None);
    ``torch213cu130cxx11cp39`` -> the same with python ``cp39``."""

    framework: str  # the label's prefix: torch, torchabi, tvmffi
    torch: str  # "2.13"
    backend: str  # "cu130"
    backend_name: str  # "cuda"
    abi: str | None
    python: str | None = None  # "cp39", "cp315t": labels of the new grammar


def parse_label(label: str | None) -> LabelParts | None:
    """A local label the factory writes -> its parts; None for noarch, SDK and unknown labels."""
    m = _NEW_ARCH.fullmatch(label or "")
    if m is not None:
        backend = _backend_text(m["be"])
        version = _decode(_FW_PREFIX[m["fw"]], m["fwv"])
        if backend is None or version is None:
            return None
        return LabelParts(m["fw"], version, m["be"], backend.partition("-")[0], m["abi"], f"cp{m['py']}{m['t']}")
    m = _LABEL.fullmatch(label or "")
    if m is None:
        return None
    try:
        name = parse_name(f"torch27-{m['backend']}-x86_64-linux").backend
    except ValueError:
        return None
    assert name is not None
    return LabelParts(m["fw"], f"{m['major']}.{m['minor']}", m["backend"], name.name, m["abi"])
