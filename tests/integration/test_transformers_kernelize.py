"""transformers' own kernelize path, offline, on a kernel from the index.

A kernel named and laid out as transformers 5.22.2's default mapping asks for CPU inference
(``kernels-community/megablocks``, layer ``CPUMegaBlocksMoeMLP``, version 1) sits on the test Hub; a
factory.toml whose one table is ``[[transformers]]`` (that transformers, cpu, inference) builds it, ``index``
publishes it and http.server serves it; ``kernel-factory download`` puts the locked commit into a Hub cache
from that index; then a tiny GptOss model built from its config (no weights) runs
``model.set_use_kernels(True)`` offline with a real transformers 5.22.2, kernels 0.17.2 and torch 2.13: the
kernel's forward runs (it says so) and gives what the model's own forward gives. The control run, with an
empty cache, raises as transformers does when a kernel is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hub_server import git, hf_env, hub, serve_repo
from kernel_factory.verify.digest import compute
from support import TORCH_REQ, cached_venv, clean_env, http_server, kf, run

pytestmark = pytest.mark.integration
MARK = "KERNEL-FACTORY-TEST: CPUMegaBlocksMoeMLP.forward from the index"

LAYERS = f'''import torch


class CPUMegaBlocksMoeMLP(torch.nn.Module):
    """GptOssMLP's forward, computed the same way, saying that it ran."""

    def forward(self, hidden_states: torch.Tensor):
        print("{MARK}", flush=True)
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        flat = hidden_states.reshape(-1, hidden_dim)
        _, router_scores, router_indices = self.router(flat)
        out = self.experts(flat, router_indices, router_scores)
        return out.reshape(batch_size, sequence_length, hidden_dim), router_scores
'''

MODEL = """
import torch
from transformers import GptOssConfig, GptOssForCausalLM
config = GptOssConfig(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                      max_position_embeddings=64, layer_types=["full_attention", "full_attention"])
torch.manual_seed(0)
model = GptOssForCausalLM(config).eval()  # the CPU entry of the mapping is for inference
ids = torch.tensor([[1, 2, 3, 4]])
with torch.no_grad():
    before = model(ids).logits
model.set_use_kernels(True)
with torch.no_grad():
    after = model(ids).logits
print("MAXDIFF", float((after - before).abs().max()))
"""


def megablocks_repo(path: Path) -> str:
    """A git kernel repository with build/torch-universal/ (layers.CPUMegaBlocksMoeMLP) on branch v1; its commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    vdir = path / "build" / "torch-universal"
    vdir.mkdir(parents=True)
    (vdir / "__init__.py").write_text('"""megablocks as transformers maps it."""\nfrom . import layers\n')
    (vdir / "layers.py").write_text(LAYERS)
    meta = {"name": "megablocks", "id": "_megablocks_test", "version": 1, "license": "Apache-2.0",
            "python-depends": [], "backend": {"type": "cpu"},
            "digest": {"algorithm": "sha256", "files": compute(vdir, "sha256")}}
    (vdir / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (path / "README.md").write_text("# megablocks\n\nA test kernel named as transformers maps it.\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "megablocks v1", when=1_700_000_000)
    git(path, "branch", "v1")
    return git(path, "rev-parse", "HEAD")


def test_transformers_kernelizes_offline_with_the_kernel_from_the_index(tmp_path: Path) -> None:
    python = cached_venv("transformers522", TORCH_REQ, "transformers==5.22.2", "kernels==0.17.2")
    sha = megablocks_repo(tmp_path / "repo")
    serve_repo(tmp_path / "repo", tmp_path / "mirrors", "kernels-community/megablocks")
    (tmp_path / "factory.toml").write_text(
        f'[factory]\nstore = "store"\n\n[[transformers]]\npython = "{python}"\ndevices = ["cpu"]\n'
        'modes = ["inference"]\n')
    with hub(tmp_path / "mirrors", tmp_path / "olah") as (_, proxy):
        proc = kf("build", cwd=tmp_path, env=clean_env(**hf_env(proxy.url, tmp_path / "hf")))
    assert proc.returncode == 0, proc.stderr
    assert "maps 1 kernel repositories for cpu, inference: kernels-community/megablocks v1" in proc.stderr
    assert kf("index", cwd=tmp_path).returncode == 0
    project = tmp_path / "project"
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps(
        [{"dependency": {"repo-id": "kernels-community/megablocks", "version": 1}, "lock": {"commit": sha}}]))
    (tmp_path / "model.py").write_text(MODEL)

    offline = clean_env(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "empty"))
    control = run(python, tmp_path / "model.py", env=offline, cwd=tmp_path, check=False)
    assert control.returncode != 0 and MARK not in control.stdout
    assert "Version 1 of 'kernels-community/megablocks' is not available in the local cache" in control.stderr

    mapped = "  kernels-community/megablocks version 1 (MegaBlocksMoeMLP; inference): "
    check = kf("local-kernels", "--check", "--python", python, cwd=tmp_path, env=offline)
    assert check.returncode == 3, check.stderr
    assert check.stdout.splitlines()[-2:] == [
        f"{mapped}not loadable offline (no refs/v1 for kernels-community/megablocks in {tmp_path / 'empty'}): mirror "
        "it (a [[transformers]] table) and run `kernel-factory download` or `local-kernels --cache`",
        "0 of 1 kernels transformers maps for cpu load offline",
    ]

    cache = tmp_path / "cache"
    with http_server(tmp_path / "store") as url:
        proc = kf("download", project, "--index-url", url, "--python", python, cwd=tmp_path,
                  env=clean_env(HF_HUB_CACHE=str(cache)))
    assert proc.returncode == 0, proc.stderr
    filled = {**offline, "HF_HUB_CACHE": str(cache)}
    check = kf("local-kernels", "--check", "--python", python, cwd=tmp_path, env=filled)
    assert check.returncode == 0, check.stdout + check.stderr
    snapshot = cache / "kernels--kernels-community--megablocks" / "snapshots" / sha
    assert check.stdout.splitlines()[-3:] == [
        f"transformers 5.22.2 (kernels 0.17.2) at {python} maps 1 kernels for cpu, this machine's device (Hub cache "
        f"{cache}):",
        f"{mapped}loads offline from refs/v1 names {sha}: {snapshot / 'build' / 'torch-universal'}",
        "1 of 1 kernels transformers maps for cpu load offline",
    ]
    done = run(python, tmp_path / "model.py", env=filled, cwd=tmp_path)
    assert done.stdout.count(MARK) == 2  # each of the two layers' MLP ran the kernel's forward
    assert "MAXDIFF 0.0" in done.stdout
