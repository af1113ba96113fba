"""For the serve --hub tests: a store built from the example kernels and a megablocks kernel, the Hub served over it,
and a client script run in a venv with a real kernels (and transformers), HF_ENDPOINT at the Hub."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hub_server import git
from kernel_factory.verify.digest import compute
from stack_kernels import act_repo
from support import clean_env, free_port, kf, run, wait_http

MARK = "KERNEL-FACTORY-HUB: a forward from the Hub mirror"
MEGA = "kernels-community/megablocks"
ACT = "example/act"  # stack_kernels.act_repo: layers.RMSNorm, which a kernel mapping gives Llama's RMSNorm

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


class Doubler(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("{MARK}", flush=True)
        return x * 2
'''


def megablocks_repo(path: Path) -> str:
    """kernels-community/megablocks as transformers 5.22.2 maps it on the CPU: build/torch-universal/ on branch v1,
    tagged v1.0.0; its commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    vdir = path / "build" / "torch-universal"
    vdir.mkdir(parents=True)
    (vdir / "__init__.py").write_text('"""megablocks as transformers maps it."""\nfrom . import layers\n')
    (vdir / "layers.py").write_text(LAYERS)
    meta = {"name": "megablocks", "id": "_megablocks_hub", "version": 1, "license": "Apache-2.0",
            "python-depends": [], "backend": {"type": "cpu"},
            "digest": {"algorithm": "sha256", "files": compute(vdir, "sha256")}}
    (vdir / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (path / "README.md").write_text("# megablocks\n\nA test kernel named as transformers maps it.\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "megablocks v1", when=1_700_000_000)
    git(path, "branch", "v1")
    git(path, "tag", "v1.0.0")
    return git(path, "rev-parse", "HEAD")


def build_store(root: Path, repos: Path | None) -> Path:
    """``root/store``: megablocks, example/act and (``repos``: the example kernel repositories) img2grey and
    relu-nested, built. example/act's organisation is served only with ``--allow-org example``."""
    megablocks_repo(root / "megablocks")
    act_repo(root / "act")
    examples = "" if repos is None else f"""
[[kernel]]
repo = "{repos / 'img2grey'}"
repo-id = "kernels-community/img2grey"
versions = [1]
tags = ">=1.1.0,<2"

[[kernel]]
repo = "{repos / 'relu-nested'}"
repo-id = "kernels-community/relu-nested"
versions = [1]
"""
    (root / "factory.toml").write_text(f"""[factory]
store = "store"
allow-orgs = ["kernels-community"]
manylinux = "2_28"
{examples}
[[kernel]]
repo = "{root / 'megablocks'}"
repo-id = "{MEGA}"
tags = ">=1"

[[kernel]]
repo = "{root / 'act'}"
repo-id = "{ACT}"
versions = [1]
""")
    proc = kf("build", "--config", root / "factory.toml", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "store"


@contextmanager
def served(store: Path, log: Path, *flags: str) -> Iterator[str]:
    """``kernel-factory serve --hub`` over ``store``; yields its URL."""
    port = free_port()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kernel_factory", "serve", "--hub", "--store", str(store),
                                 "--port", str(port), *flags], stdout=out, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_http(f"{url}/api/organizations/kernels-community/overview")
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


def client(python: Path, script: str, cache: Path, endpoint: str | None, cwd: Path, *args: str,
           check: bool = True) -> subprocess.CompletedProcess[str]:
    """``script`` run by ``python`` with a Hub cache of its own: online at ``endpoint``, or offline (None)."""
    env = clean_env(HF_HUB_CACHE=str(cache), PYTHONWARNINGS="ignore")
    env.pop("KERNELS_CACHE", None)
    # kernels 0.17.2 sends an empty user agent with HF_HUB_DISABLE_TELEMETRY=1, which huggingface_hub 2.4 turns into
    # a header ending in "; " that its HTTP client refuses: no online request at all (docs/hub.md, client limits)
    env.pop("HF_HUB_DISABLE_TELEMETRY", None)
    if endpoint is None:
        env["HF_HUB_OFFLINE"] = "1"
    else:
        env["HF_ENDPOINT"] = endpoint
    path = cwd / "client.py"
    path.write_text(script)
    return run(python, path, *args, cwd=cwd, env=env, check=check)


SCAN = """
import json, sys
from huggingface_hub import scan_cache_dir
info = scan_cache_dir(sys.argv[1])
print(json.dumps({"warnings": [str(w) for w in info.warnings],
                  "repos": sorted((r.repo_type, r.repo_id) for r in info.repos)}))
"""


def scan(python: Path, cache: Path, cwd: Path) -> dict[str, list[object]]:
    """huggingface_hub's scan_cache_dir of ``cache``: its warnings and the repositories in it."""
    path = cwd / "scan.py"
    path.write_text(SCAN)
    doc = json.loads(run(python, path, cache, env=clean_env()).stdout.splitlines()[-1])
    assert isinstance(doc, dict)
    return doc
