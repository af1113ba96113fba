"""The kernels of the consumer matrix (test_stack_matrix.py), as Hub-style git repositories, and the script that
runs every loading path on them in one fresh interpreter.

From the examples (scripts/build_fixtures.py): img2grey (flat layout, a compiled CPU op, branch v1 at tag v1.1.2),
relu-nested (nested layout, branch v1), pyonly (noarch torch-universal, tag v0.2.0; a branch v0 is added here).
Made here: ``example/pydep`` (noarch, ``kernel-depends`` on example/pyonly version 0, which it calls through
``kernels.get_kernel_dep``), ``example/act`` (noarch: ``layers.SiluAndMul``, ``layers.RMSNorm``, the function
``silu_and_mul``) and ``kernels-community/megablocks`` (test_transformers_kernelize.py's, which transformers
5.22-5.24 map for CPU inference). Each layer a test maps prints a mark when its forward runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hub_server import git
from kernel_factory.verify.digest import compute
from test_transformers_kernelize import MARK as MEGABLOCKS_MARK
from test_transformers_kernelize import megablocks_repo

CPU = "torch213-cxx11-cpu-x86_64-linux"
RMS_MARK = "KERNEL-FACTORY-TEST: act RMSNorm.forward"
DEP_MARK = "KERNEL-FACTORY-TEST: pydep calls pyonly"

ACT_INIT = '''"""act: SiluAndMul and RMSNorm as layers, silu_and_mul as a function (pure Python, for tests)."""
import torch

from . import layers


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d]) * x[..., d:]
'''

ACT_LAYERS = f'''import torch
from torch import nn


class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return torch.nn.functional.silu(x[..., :d]) * x[..., d:]


class RMSNorm(nn.Module):
    """LlamaRMSNorm's forward, computed the same way, saying that it ran."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        print("{RMS_MARK}", flush=True)
        dtype = hidden_states.dtype
        h = hidden_states.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dtype)
'''

PYDEP_INIT = f'''"""pydep: twice pyonly's silu_and_mul, through the kernel it depends on."""
import torch
from kernels import get_kernel_dep

_pyonly = get_kernel_dep("example/pyonly")


def silu_and_mul_twice(x: torch.Tensor) -> torch.Tensor:
    print("{DEP_MARK}", flush=True)
    return _pyonly.silu_and_mul(x) * 2
'''


def _noarch_repo(path: Path, name: str, files: dict[str, str], *, major: int, tag: str,
                 depends: list[dict[str, object]] | None = None) -> str:
    """A git kernel repository with build/torch-universal/ (``files``), tag ``tag`` and branch v<major>."""
    vdir = path / "build" / "torch-universal"
    vdir.mkdir(parents=True)
    for rel, text in files.items():
        (vdir / rel).write_text(text)
    meta: dict[str, object] = {"name": name, "id": f"_{name}_0000000", "version": major, "license": "Apache-2.0",
                               "python-depends": [], "backend": {"type": "cpu"}}
    if depends:
        meta["kernel-depends"] = depends
    meta["digest"] = {"algorithm": "sha256", "files": compute(vdir, "sha256")}
    (vdir / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (path / "README.md").write_text(f"# {name}\n\nA test kernel.\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", f"{name} {tag}", when=1_700_000_000)
    sha = git(path, "rev-parse", "HEAD")
    git(path, "tag", tag, sha)
    git(path, "branch", f"v{major}", sha)
    return sha


def act_repo(path: Path) -> str:
    """example/act at ``path``: build/torch-universal/ with ``layers.RMSNorm`` (prints RMS_MARK per forward),
    ``layers.SiluAndMul`` and ``silu_and_mul``; branch v1, tag v1.0.0. Its commit."""
    return _noarch_repo(path, "act", {"__init__.py": ACT_INIT, "layers.py": ACT_LAYERS}, major=1, tag="v1.0.0")


# repo id -> (folder name under the repos folder, the major version a lock and get_kernel ask for)
KERNELS = {
    "example/img2grey": ("img2grey", 1),
    "example/relu-nested": ("relu-nested", 1),
    "example/pyonly": ("pyonly", 0),
    "example/pydep": ("pydep", 0),
    "example/act": ("act", 1),
    "kernels-community/megablocks": ("megablocks", 1),
}

CONFIG = """[factory]
store = "site"
jobs = 1

[[kernel]]
repo = "{repos}/img2grey"
repo-id = "example/img2grey"
versions = [1]
variants = ["{cpu}"]

[[kernel]]
repo = "{repos}/relu-nested"
repo-id = "example/relu-nested"
versions = [1]

[[kernel]]
repo = "{repos}/pyonly"
repo-id = "example/pyonly"
versions = [0]

[[kernel]]
repo = "{repos}/pydep"
repo-id = "example/pydep"
versions = [0]

[[kernel]]
repo = "{repos}/act"
repo-id = "example/act"
versions = [1]

[[kernel]]
repo = "{repos}/megablocks"
repo-id = "kernels-community/megablocks"
versions = [1]
"""


def make_repos(example_repos: Path, repos: Path) -> dict[str, str]:
    """The six repositories under ``repos`` (examples copied); returns repo id -> the commit of its v<N> branch."""
    for name in ("img2grey", "relu-nested", "pyonly"):
        shutil.copytree(example_repos / name, repos / name, symlinks=True)
    git(repos / "pyonly", "branch", "v0", "v0.2.0^{commit}")
    _noarch_repo(repos / "pydep", "pydep", {"__init__.py": PYDEP_INIT}, major=0, tag="v0.1.0",
                 depends=[{"repo-id": "example/pyonly", "version": 0}])
    act_repo(repos / "act")
    sha = megablocks_repo(repos / "megablocks")
    git(repos / "megablocks", "tag", "v1.0.0", sha)
    return {repo_id: git(repos / folder, "rev-parse", f"v{major}^{{commit}}")
            for repo_id, (folder, major) in KERNELS.items()}


PYPROJECT = """[project]
name = "app"
version = "0.1.0"

[tool.kernels.dependencies]
""" + "".join(f'"{repo_id}" = {major}\n' for repo_id, (_, major) in KERNELS.items())


# Every loading path in one process: prints "<case>\tok" or "<case>\tFAIL <first line of the error>".
# argv: a JSON object {"shas": {repo id: commit}, "lock": path, "cases": [names], "transformers": version}.
PATHS = r'''
import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

import torch
from torch import nn

ARGS = json.loads(sys.argv[1])
SHAS, LOCK = ARGS["shas"], Path(ARGS["lock"])
RMS_MARK, MEGABLOCKS_MARK, DEP_MARK = ARGS["marks"]
torch.manual_seed(0)
x = torch.randn(3, 8)
want_act = torch.nn.functional.silu(x[:, :4]) * x[:, 4:]
img = torch.rand(4, 5, 3)
want_grey = img[..., 0] * 0.299 + img[..., 1] * 0.587 + img[..., 2] * 0.114
y = torch.randn(64)


def grey(kernel):
    torch.testing.assert_close(kernel.img2grey(img), want_grey)


def relu(kernel):
    torch.testing.assert_close(kernel.relu(y), torch.clamp(y, min=0))


def act(got):
    torch.testing.assert_close(got, want_act)


def model(kind):
    from kernels import use_kernel_forward_from_hub, use_kernel_func_from_hub

    @use_kernel_forward_from_hub("SiluAndMul")
    class SiluAndMul(nn.Module):
        def forward(self, x):
            return torch.zeros_like(x[..., : x.shape[-1] // 2])  # not the kernel: kernelize must replace it

    @use_kernel_func_from_hub("silu_and_mul")
    def silu_and_mul(x):
        return torch.zeros_like(x[..., : x.shape[-1] // 2])

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = SiluAndMul()
            self.fn = silu_and_mul

        def forward(self, x):
            return self.act(x) if kind == "layer" else self.fn(x)

    return Model()


def kernelize_with(name, repo, kind):
    from kernels import Mode, kernelize, use_kernel_mapping

    with use_kernel_mapping({name: {"cpu": repo}}, inherit_mapping=False):
        m = kernelize(model(kind), mode=Mode.INFERENCE, device="cpu")
    act(m(x))


def has_img2grey():
    from kernels import has_kernel

    if has_kernel("example/img2grey", version=1) is not True:
        raise RuntimeError("has_kernel returned False")


def install_pyonly():
    from kernels import install_kernel

    path = Path(install_kernel("example/pyonly", version=0, local_files_only=True))
    meta = json.loads((path / "metadata.json").read_text())
    if meta["name"] != "pyonly" or path.name != "torch-universal" or SHAS["example/pyonly"] not in str(path):
        raise RuntimeError(f"install_kernel returned {path}")


def dependency():
    from kernels import get_kernel

    out = io.StringIO()
    with redirect_stdout(out):
        got = get_kernel("example/pydep", version=0).silu_and_mul_twice(x)
    torch.testing.assert_close(got, want_act * 2)
    if out.getvalue().count(DEP_MARK) != 1:
        raise RuntimeError("pydep's forward did not run")


LLAMA = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=64)


def use_kernels_mapped():
    """transformers' kernel mapping API on CPU: Llama's RMSNorm mapped to example/act's layer (version 1) with the
    register_kernel_mapping transformers exports, then use_kernels. (Its KernelConfig refuses the CPU: "Only
    devices in ['cuda', 'rocm', 'xpu', 'npu', 'neuron', 'tpu', 'mps'] are supported, got: cpu".)"""
    from kernels import LayerRepository, Mode
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.integrations.hub_kernels import register_kernel_mapping

    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(**LLAMA)).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        before = m(ids).logits
    register_kernel_mapping({"RMSNorm": {"cpu": {
        Mode.INFERENCE: LayerRepository("example/act", layer_name="RMSNorm", version=1)}}})
    m.set_use_kernels(True)
    out = io.StringIO()
    with redirect_stdout(out), torch.no_grad():
        after = m(ids).logits
    runs = out.getvalue().count(RMS_MARK)
    if runs != 5:  # 2 layers x 2 norms + the final norm
        raise RuntimeError(f"the kernel's RMSNorm ran {runs} times, not 5")
    torch.testing.assert_close(after, before)


def use_kernels_builtin():
    """transformers' own mapping (5.22-5.24): GptOss's MLP on CPU -> kernels-community/megablocks version 1."""
    from transformers import GptOssConfig, GptOssForCausalLM

    config = GptOssConfig(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=16, num_local_experts=4,
                          num_experts_per_tok=2, max_position_embeddings=64,
                          layer_types=["full_attention", "full_attention"])
    torch.manual_seed(0)
    m = GptOssForCausalLM(config).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        before = m(ids).logits
    m.set_use_kernels(True)
    out = io.StringIO()
    with redirect_stdout(out), torch.no_grad():
        after = m(ids).logits
    runs = out.getvalue().count(MEGABLOCKS_MARK)
    if runs != 2:
        raise RuntimeError(f"the kernel's CPUMegaBlocksMoeMLP ran {runs} times, not 2")
    torch.testing.assert_close(after, before)


def k(name):
    import kernels

    return getattr(kernels, name)


CASES = {
    "get_kernel(version) flat": lambda: grey(k("get_kernel")("example/img2grey", version=1)),
    "get_kernel(version) nested": lambda: relu(k("get_kernel")("example/relu-nested", version=1)),
    "get_kernel(version) noarch": lambda: act(k("get_kernel")("example/pyonly", version=0).silu_and_mul(x)),
    "get_kernel(revision)": lambda: grey(k("get_kernel")("example/img2grey", revision=SHAS["example/img2grey"])),
    "has_kernel(version)": has_img2grey,
    "kernelize LayerRepository": lambda: kernelize_with(
        "SiluAndMul", k("LayerRepository")("example/act", layer_name="SiluAndMul", version=1), "layer"),
    "kernelize FuncRepository": lambda: kernelize_with(
        "silu_and_mul", k("FuncRepository")("example/act", func_name="silu_and_mul", version=1), "func"),
    "kernelize LockedLayerRepository": lambda: kernelize_with(
        "SiluAndMul", k("LockedLayerRepository")("example/act", lockfile=LOCK, layer_name="SiluAndMul"), "layer"),
    "load_kernel(lockfile)": lambda: grey(k("load_kernel")("example/img2grey", lockfile=LOCK)),
    "get_locked_kernel(lockfile)": lambda: relu(k("get_locked_kernel")("example/relu-nested", lockfile=LOCK)),
    "install_kernel(local_files_only)": install_pyonly,
    "kernel dependency": dependency,
    "transformers use_kernels, register_kernel_mapping": use_kernels_mapped,
    "transformers use_kernels, built-in mapping": use_kernels_builtin,
}
for name in ARGS["cases"]:
    try:
        CASES[name]()
        print(f"{name}\tok", flush=True)
    except BaseException as exc:  # noqa: BLE001 - every case reports, whatever it raised
        text = " ".join(line.strip() for line in str(exc).strip().splitlines()[:3])
        print(f"{name}\tFAIL {type(exc).__name__}: {text[:400]}", flush=True)
'''

MARKS = [RMS_MARK, MEGABLOCKS_MARK, DEP_MARK]

ALL_CASES = ["get_kernel(version) flat", "get_kernel(version) nested", "get_kernel(version) noarch",
             "get_kernel(revision)", "has_kernel(version)", "kernelize LayerRepository", "kernelize FuncRepository",
             "kernelize LockedLayerRepository", "load_kernel(lockfile)", "get_locked_kernel(lockfile)",
             "install_kernel(local_files_only)", "kernel dependency",
             "transformers use_kernels, register_kernel_mapping",
             "transformers use_kernels, built-in mapping"]
# What LOCAL_KERNELS alone serves (kernels reads it in get_kernel and has_kernel only, and for their dependencies):
# the other paths read the Hub cache, which --shell alone leaves empty.
LOCAL_KERNELS_CASES = ALL_CASES[:5] + ["kernel dependency"]


def cases_for(provider: str, transformers: str) -> list[str]:
    """The cases a provider is judged on; transformers 5.25 maps nothing to a kernel for the CPU."""
    cases = LOCAL_KERNELS_CASES if provider == "local-kernels --shell" else ALL_CASES
    builtin = tuple(int(p) for p in transformers.split(".")[:2]) < (5, 25)
    return [c for c in cases if builtin or c != "transformers use_kernels, built-in mapping"]
