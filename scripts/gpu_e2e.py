#!/usr/bin/env python3
"""Helpers for scripts/gpu_e2e.sh (the GPU end-to-end check of kernel-factory).

    gpu_e2e.py variant                  the build-variant name of the torch in this Python
    gpu_e2e.py ops-id                   the op namespace / module name: _img2grey_cuda_<hash of the sources>
    gpu_e2e.py repo --so SO --variant V --out DIR
                                        lay DIR out as a Hub kernel repository (git; tag v1.0.0, branch v1)
    gpu_e2e.py check [--json FILE]      run the installed kernel's ops on the GPU against torch,
                                        eagerly and under torch.compile; exit 1 on a mismatch
    gpu_e2e.py kernelize [--repo-id ID] [--device cuda]
                                        kernels' kernelize of a model's SiluAndMul with
                                        LayerRepository(ID, version=1), the path transformers takes;
                                        exit 1 unless the kernel's layer replaced the forward and matches
                                        torch (--device cpu runs it on a CPU kernel, for the tests)

Only ``check`` imports torch's CUDA side; ``variant`` imports torch to read its
version. The digest here is written independently of factory/digest.py, so the
factory's verification is checked against a second implementation.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "examples" / "src" / "gpu"
COMMON = ROOT / "examples" / "src" / "common"
NAME = "img2grey-cuda"
PKG = "img2grey_cuda"
VERSION = "1.0.0"
MAJOR = 1
ARCHS = ["8.0", "9.0"]
DATE = "2026-01-05T12:00:00+00:00"
SOURCES = ("csrc/kernels.cu", "csrc/torch_binding.cpp")


def variant_name() -> str:
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    cuda = torch.version.cuda
    if not cuda:
        raise SystemExit("this torch has no CUDA (torch.version.cuda is None); set E2E_VARIANT to build anyway")
    abi = "cxx11" if torch._C._GLIBCXX_USE_CXX11_ABI else "cxx98"
    return f"torch{major}{minor}-{abi}-cu{cuda.replace('.', '')}-{platform.machine()}-linux"


def ops_id() -> str:
    """Unique per source content, as the kernels convention wants (_<pkg>_<hash>)."""
    h = hashlib.sha256(NAME.encode() + b"\0")
    for rel in (*SOURCES, "../common/pyinit.c", "../common/shim/sys/single_threaded.h"):
        h.update(rel.encode() + b"\0" + (SRC / rel).read_bytes() + b"\0")
    return f"_{PKG}_{h.hexdigest()[:7]}"


def digest(variant_dir: Path) -> dict[str, str]:
    """The kernels project's metadata.json digest (sha256, padded base64)."""
    files: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(variant_dir, followlinks=True):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        rel_dir = Path(dirpath).relative_to(variant_dir)
        for filename in filenames:
            rel = (rel_dir / filename).as_posix()
            if rel in ("metadata.json", "metadata.json.sigstore") or filename.endswith(".pyc"):
                continue
            raw = hashlib.sha256((Path(dirpath) / filename).read_bytes()).digest()
            files[rel] = base64.b64encode(raw).decode("ascii")
    return dict(sorted(files.items()))


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="GPU e2e",
        GIT_AUTHOR_EMAIL="gpu-e2e@example.com",
        GIT_COMMITTER_NAME="GPU e2e",
        GIT_COMMITTER_EMAIL="gpu-e2e@example.com",
        GIT_AUTHOR_DATE=DATE,
        GIT_COMMITTER_DATE=DATE,
    )
    cfg = ["-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", "-c", "tag.gpgSign=false"]
    proc = subprocess.run(["git", *cfg, *args], cwd=repo, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def make_repo(so: Path, variant: str, out: Path) -> dict[str, Any]:
    """A flat-layout Hub kernel repository with one variant; returns its metadata.json."""
    if out.exists():
        shutil.rmtree(out)
    vdir = out / "build" / variant
    (vdir / PKG).mkdir(parents=True)
    shutil.copyfile(SRC / "README.md", out / "README.md")
    ns = so.name.split(".")[0]
    shutil.copyfile(SRC / "torch-ext" / "__init__.py", vdir / "__init__.py")
    shutil.copyfile(SRC / "torch-ext" / "layers.py", vdir / "layers.py")
    (vdir / "_ops.py").write_text((COMMON / "_ops.py.in").read_text().replace("@OPS_NAME@", ns))
    shutil.copyfile(COMMON / "compat_init.py", vdir / PKG / "__init__.py")
    shutil.copyfile(so, vdir / so.name)
    (vdir / so.name).chmod(0o755)
    meta: dict[str, Any] = {
        "name": NAME,
        "id": ns,
        "version": MAJOR,
        "license": "Apache-2.0",
        "upstream": "https://github.com/example/img2grey-cuda",
        "source": f"https://github.com/example/img2grey-cuda/tree/v{VERSION}",
        "python-depends": [],
        "kernel-depends": [],
        "backend": {"type": "cuda", "archs": ARCHS},
        "digest": {"algorithm": "sha256", "files": digest(vdir)},
    }
    (vdir / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    if shutil.which("git") is None:  # the factory reads a plain folder too, versioned as given
        return meta
    git(out, "init", "-q")
    git(out, "add", "-A")
    git(out, "commit", "-q", "-m", f"{NAME} {VERSION}")
    git(out, "tag", f"v{VERSION}")
    git(out, "branch", f"v{MAJOR}")
    return meta


# --------------------------------------------------------------------------
# check: the installed kernel against torch on the GPU
# --------------------------------------------------------------------------


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    _sync()
    t0 = time.perf_counter()
    result = fn()
    _sync()
    return result, time.perf_counter() - t0


def _bench(fn: Callable[[], Any], iters: int = 50) -> float:
    """Median milliseconds of fn over CUDA events (wall clock without a GPU)."""
    import torch

    fn()
    times = []
    for _ in range(iters):
        if not torch.cuda.is_available():
            times.append(_timed(fn)[1] * 1000)
            continue
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)))
    return sorted(times)[len(times) // 2]


def run_checks(device: str = "cuda") -> dict[str, Any]:
    """Every check on ``device`` (``cpu`` only to test this code against a stand-in module)."""
    import torch

    t_import = time.perf_counter()
    import img2grey_cuda as k

    res: dict[str, Any] = {"import_s": round(time.perf_counter() - t_import, 3)}
    res["module"] = k.__file__
    res["torch"] = torch.__version__
    dev = torch.device(device)
    gpu = dev.type == "cuda"
    res["gpu"] = torch.cuda.get_device_name(0) if gpu else device
    res["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0))) if gpu else "-"
    gen = torch.Generator(device=dev).manual_seed(0)
    checks: list[dict[str, Any]] = []

    def record(name: str, got: Any, want: Any, tol: float, rel: bool = False) -> None:
        err = (got.float() - want.float()).abs()
        limit = tol * want.float().abs() + 1e-6 if rel else torch.full_like(err, tol)
        ok = got.shape == want.shape and got.dtype == want.dtype and bool((err <= limit).all())
        checks.append(
            {"check": name, "max_abs_err": float(err.max()), "tol": f"{tol:g} {'rel' if rel else 'abs'}", "ok": ok}
        )

    img = torch.rand(1080, 1920, 3, device=dev, generator=gen)
    weights = torch.tensor([0.299, 0.587, 0.114], device=dev)
    grey_ref = (img * weights).sum(-1)
    grey, t_first = _timed(lambda: k.img2grey(img))
    res["first_call_s"] = round(t_first, 4)
    record("img2grey fp32 eager vs torch", grey, grey_ref, 1e-5)

    x32 = torch.randn(4096, 2 * 4096, device=dev, generator=gen)
    d = x32.shape[-1] // 2
    ref32 = torch.nn.functional.silu(x32[..., :d]) * x32[..., d:]
    record("silu_and_mul fp32 eager vs torch", k.silu_and_mul(x32), ref32, 1e-5)
    # tol: one ulp of the type (relative), against fp32 math rounded once; two ulps against torch's own
    # low-precision ops, which round silu's result before the multiply.
    for dtype, tol, label in ((torch.bfloat16, 2.0**-7, "bf16"), (torch.float16, 2.0**-10, "fp16")):
        xl = x32.to(dtype)
        # reference in float32 from the same low-precision input, then one rounding to dtype
        ref = (torch.nn.functional.silu(xl.float()[..., :d]) * xl.float()[..., d:]).to(dtype)
        out = k.silu_and_mul(xl)
        record(f"silu_and_mul {label} eager vs torch (fp32 math, one rounding)", out, ref, tol, rel=True)
        ref_torch = torch.nn.functional.silu(xl[..., :d]) * xl[..., d:]
        record(f"silu_and_mul {label} eager vs torch's own {label} ops", out, ref_torch, 2 * tol, rel=True)
    x3 = torch.randn(2, 3, 5, 2 * 96, device=dev, generator=gen, dtype=torch.bfloat16)
    ref3 = (torch.nn.functional.silu(x3.float()[..., :96]) * x3.float()[..., 96:]).to(torch.bfloat16)
    record("silu_and_mul bf16 4-D [2,3,5,192]", k.silu_and_mul(x3), ref3, 2.0**-7, rel=True)

    def fused(image: Any, x: Any) -> tuple[Any, Any]:
        g = k.img2grey(image * 0.5 + 0.25)
        return g.clamp(0, 1), k.silu_and_mul(x) * 2.0

    t0 = time.perf_counter()
    compiled = torch.compile(fused, fullgraph=True)
    cg, cs = compiled(img, x32.to(torch.bfloat16))
    _sync()
    res["compile_first_call_s"] = round(time.perf_counter() - t0, 2)
    eg, es = fused(img, x32.to(torch.bfloat16))
    record("torch.compile(fullgraph) img2grey vs eager", cg, eg, 1e-5)
    record("torch.compile(fullgraph) silu_and_mul bf16 vs eager", cs, es, 0.0)
    xb = x32.to(torch.bfloat16)
    res["bench_ms"] = {
        "img2grey 1080x1920 fp32": round(_bench(lambda: k.img2grey(img)), 4),
        "torch (img*w).sum(-1)": round(_bench(lambda: (img * weights).sum(-1)), 4),
        "silu_and_mul 4096x8192 bf16": round(_bench(lambda: k.silu_and_mul(xb)), 4),
        "torch silu(a)*b bf16": round(_bench(lambda: torch.nn.functional.silu(xb[..., :d]) * xb[..., d:]), 4),
    }
    res["checks"] = checks
    res["ok"] = all(c["ok"] for c in checks)
    return res


def run_kernelize(repo_id: str, device: str = "cuda") -> dict[str, Any]:
    """kernelize a model whose SiluAndMul forward returns zeros, with the kernel's layer from ``repo_id``."""
    import torch
    from kernels import LayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping
    from torch import nn

    @use_kernel_forward_from_hub("SiluAndMul")
    class SiluAndMul(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.zeros_like(x[..., : x.shape[-1] // 2])  # not the kernel: kernelize must replace it

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.act = SiluAndMul()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.act(x)
            return out

    dev = torch.device(device)
    repo = LayerRepository(repo_id, layer_name="SiluAndMul", version=MAJOR)
    with use_kernel_mapping({"SiluAndMul": {dev.type: repo}}, inherit_mapping=False):
        model = kernelize(MLP().to(dev), mode=Mode.INFERENCE, device=device)
    gpu = dev.type == "cuda"
    dtype, tol = (torch.bfloat16, 2.0**-7) if gpu else (torch.float32, 1e-5)
    x = torch.randn(256, 2 * 1024, device=dev, dtype=dtype, generator=torch.Generator(device=dev).manual_seed(0))
    d = x.shape[-1] // 2
    want = (torch.nn.functional.silu(x.float()[..., :d]) * x.float()[..., d:]).to(dtype)
    got = model(x)
    err = (got.float() - want.float()).abs()
    ok = got.shape == want.shape and bool((err <= tol * want.float().abs() + 1e-6).all())
    name = f"kernelize LayerRepository({repo_id}, layer SiluAndMul, version={MAJOR}) on {device}"
    return {"check": name, "max_abs_err": float(err.max()), "tol": f"{tol:g} rel", "ok": ok,
            "layer": f"{type(model.act).forward.__module__}"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("variant")
    sub.add_parser("ops-id")
    r = sub.add_parser("repo")
    r.add_argument("--so", type=Path, required=True)
    r.add_argument("--variant", required=True)
    r.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("check")
    c.add_argument("--json", type=Path)
    c.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    kz = sub.add_parser("kernelize")
    kz.add_argument("--repo-id", default=f"kernels-community/{NAME}")
    kz.add_argument("--device", default="cuda")
    ns = p.parse_args(argv)
    if ns.cmd == "variant":
        print(variant_name())
    elif ns.cmd == "ops-id":
        print(ops_id())
    elif ns.cmd == "kernelize":
        chk = run_kernelize(ns.repo_id, ns.device)
        print(f"  {'ok  ' if chk['ok'] else 'FAIL'} {chk['check']}: max abs err {chk['max_abs_err']:.3g} "
              f"(tol {chk['tol']})")
        return 0 if chk["ok"] else 1
    elif ns.cmd == "repo":
        meta = make_repo(ns.so, ns.variant, ns.out)
        print(json.dumps({"id": meta["id"], "backend": meta["backend"], "digest": meta["digest"]["files"]}))
    else:
        res = run_checks(ns.device)
        for chk in res["checks"]:
            print(
                f"  {'ok  ' if chk['ok'] else 'FAIL'} {chk['check']}: max abs err {chk['max_abs_err']:.3g} "
                f"(tol {chk['tol']})"
            )
        if ns.json:
            ns.json.write_text(json.dumps(res, indent=2) + "\n")
        return 0 if res["ok"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
