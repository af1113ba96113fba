"""The facts about this interpreter's torch build that kernels' backend selection reads.

Standard library and torch only: run.py runs this file's source with another interpreter, and
``local_kernels/checks.py`` calls ``collect()`` in this one. ``kernels.backends._backend`` checks the backends in
the order they are listed here.
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Callable
from typing import Any


def collect() -> dict[str, Any]:
    """The facts, as a JSON-able dict (``torch`` is None, with ``torch_error``, when torch does not import)."""
    out: dict[str, Any] = {"python": sys.executable, "python_version": "{}.{}".format(*sys.version_info[:2]),
                           "torch": None}
    torch: Any = None
    try:
        import torch
    except Exception as exc:  # a broken install raises anything
        out["torch_error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
    # the machine after torch's import, as the old probe read it (a test's fake torch sets it)
    out.update(machine=platform.machine(), system=platform.system().lower())
    if torch is None:
        return out

    def attempt(fn: Callable[[], Any], default: Any = None) -> Any:
        try:
            return fn()
        except Exception:
            return default

    v: Any = getattr(torch, "version", None)
    b: Any = getattr(torch, "backends", None)
    C: Any = getattr(torch, "_C", None)
    t = {"version": str(getattr(torch, "__version__", "")),
         "cuda": getattr(v, "cuda", None), "hip": getattr(v, "hip", None), "xpu": getattr(v, "xpu", None),
         "tpu": hasattr(b, "tpu"), "neuron": hasattr(torch, "neuron"),
         "mps": bool(attempt(lambda: b.mps.is_available(), False)),
         "cxx11_abi": attempt(lambda: bool(C._GLIBCXX_USE_CXX11_ABI)),
         "privateuse1": attempt(lambda: C._get_privateuse1_backend_name()), "cann": None}
    if t["privateuse1"] == "npu":
        def cann() -> str:
            from torch_npu.utils.collect_env import get_cann_version

            c = get_cann_version()
            return f"{c[0]}.{c[2]}"
        t["cann"] = attempt(cann)
    out["torch"] = t
    return out


if __name__ == "__main__":
    sys.stdout.write("\nKF-PROBE " + json.dumps(collect()) + "\n")
