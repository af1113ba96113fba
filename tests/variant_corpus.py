"""Build-variant names of every form kernels 0.17.2, 0.18.3 and 0.19.1 read, and near misses they refuse.

Shared by tests/unit/test_variant_names.py (the factory's grammar) and tests/integration/test_variant_grammar.py
(the same names through each kernels version's own parser). ``describe`` prints a parsed name as one plain
dict, whichever kernels version parsed it; ``ORACLE`` is a script that does the same inside a venv.
"""

from __future__ import annotations

import itertools

LEGACY_FRAMEWORKS = ["torch27", "torch210", "torch213", "torch213-cxx11", "torch26-cxx98", "torch-stable-abi211",
                     "torch-stable-abi29", "tvm-ffi01", "tvm-ffi012"]
LEGACY_BACKENDS = ["cpu", "metal", "neuron", "tpu", "cu118", "cu128", "cu130", "rocm63", "rocm72", "rocm714",
                   "xpu20251", "cann81"]
NEW_FRAMEWORKS = ["torch-2.13", "torch-2.13-cxx11", "torch-2.9-cxx98", "torch-10.0", "torch-stable-abi-2.11",
                  "tvm-ffi-0.1", "tvm-ffi-0.12"]
NEW_BACKENDS = ["cpu", "metal", "neuron", "tpu", "cuda-12.8", "cuda-13.0", "cuda-12.10", "rocm-7.2", "rocm-7.14",
                "rocm-7.15", "xpu-2025.1", "cann-8.1"]
PYTHONS = ["cpython-3.9-abi3", "cpython-3.12-abi3", "cpython-3.15-abi3t"]
SYSTEMS = ["x86_64-linux", "aarch64-linux", "aarch64-darwin", "x86_64-windows"]

LEGACY = [f"{f}-{b}-{s}" for f, b, s in itertools.product(LEGACY_FRAMEWORKS, LEGACY_BACKENDS, SYSTEMS)]
NEW = [f"{f}-{b}-{p}-{s}" for f, b, p, s in itertools.product(NEW_FRAMEWORKS, NEW_BACKENDS, PYTHONS, SYSTEMS)]
NOARCH = ["torch-universal", "torch-cuda", "torch-rocm", "torch-xpu", "torch-cpu", "torch-metal", "torch-npu",
          "mlx-metal", "mlx-cpu", "mlx-universal"]
SDK = ["sdk", "sdk-cuda", "sdk-metal", "sdk-cpython-3.12-abi3-x86_64-linux",
       "sdk-cuda-12.8-cpython-3.12-abi3-x86_64-linux", "sdk-cpu-cpython-3.9-abi3-aarch64-darwin",
       "sdk-rocm-7.2-cpython-3.15-abi3t-x86_64-linux"]
# Refused by kernels 0.19.1 (or not read back as themselves), each for one reason.
REFUSED = [
    "", "foo", "torch", "mlx", "torch27-cxx11-cu128-x86_64-linux-extra", "torch27-cxx11-cuda-x86_64-linux",
    "torch-2.13-cpu-x86_64-linux",  # new framework, no Python part
    "torch-2.13-cu128-cpython-3.9-abi3-x86_64-linux",  # legacy backend spelling in a new name
    "torch213-cuda-12.8-x86_64-linux",  # new backend spelling in a legacy name
    "torch-2.13-cpu-cpython-3.9-abi3t-x86_64-linux",  # abi3t before 3.15
    "torch-2.13-cpu-cpython-3.9-abi4-x86_64-linux", "torch-2.13-cpu-cpython-3-abi3-x86_64-linux",
    "torch-2.013-cpu-cpython-3.9-abi3-x86_64-linux",  # does not read back as itself
    "torch-2.13-cuda-12-cpython-3.9-abi3-x86_64-linux", "torch-2.13-cpu-pypy-3.9-abi3-x86_64-linux",
    "sdk-cuda-metal", "sdk-cuda-12.8", "sdk-cpython-3.12-abi3", "mlx-2.0-cpu-cpython-3.9-abi3-x86_64-linux",
    "torch-stable-abi-2.11-cpu-x86_64-linux", "tvm-ffi-0.1-cu128-x86_64-linux", "tvm-ffi", "torch2-cpu-x86_64-linux",
    "torch-2.13-cxx11-cxx11-cpu-cpython-3.9-abi3-x86_64-linux",
]
ALL = LEGACY + NEW + NOARCH + SDK + REFUSED


def describe(v: object) -> dict[str, object]:
    """A parsed variant of any kernels version (0.17's ``arch``, 0.19's ``backend``/``python``/``system``) as
    plain fields."""
    kind = type(v).__name__
    fw = getattr(v, "framework", None)
    arch = getattr(v, "arch", None)
    backend = getattr(v, "backend", None) if arch is None else getattr(arch, "backend", arch)
    system = getattr(v, "system", None)
    python = getattr(v, "python", None)
    version = getattr(backend, "version", None)
    return {
        "kind": kind,
        "text": getattr(v, "variant_str", None),
        "framework": None if fw is None else type(fw).__name__,
        "framework_version": None if getattr(fw, "version", None) is None else str(fw.version),  # type: ignore[union-attr]
        "cxx11_abi": getattr(fw, "cxx11_abi", None),
        "backend": getattr(backend, "backend_name", None) or getattr(backend, "name", None),
        "backend_version": None if version is None else str(version),
        "python": None if python is None else f"{python.version}-{python.abi}",
        "platform": getattr(system, "platform", None) or getattr(arch, "platform", None),
        "os": getattr(system, "os", None) or getattr(arch, "os", None),
    }


ORACLE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from variant_corpus import ALL, describe
try:
    from kernels._internals.variants import parse_variant
except ImportError:
    from kernels.variants import parse_variant
out = {}
for name in ALL:
    try:
        v = parse_variant(name)
    except Exception:
        out[name] = None
        continue
    out[name] = describe(v) if v.variant_str == name else None
print(json.dumps(out))
"""
