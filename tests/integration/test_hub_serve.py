"""``kernel-factory serve --hub`` with the real clients: HF_ENDPOINT at the served store, a fresh Hub cache each.

kernels 0.17.2 (with transformers 5.22.2) and 0.19.1 (with transformers 5.25.0), huggingface_hub as pip picks
it: get_kernel by version, tag and commit, has_kernel, install_kernel, kernelize with a LayerRepository, `kernels
lock .` then `kernels download .` and offline load_kernel / get_locked_kernel, transformers' from_pretrained with
use_kernels=True (5.22.2: its own mapping; 5.25.0: a mapping registered for the CPU, online then offline from the cache
it filled); an organisation the mirror does not allow and a kernel it lacks get kernels' own refusals; and
huggingface_hub's scan_cache_dir finds each cache clean. kernels 0.19.1 checks each loaded variant against its
metadata.json digest: img2grey is a flat build with a compat subfolder, which its wheel carries (the variant
root)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_clients import ACT, MARK, MEGA, build_store, client, scan, served
from stack_kernels import RMS_MARK
from support import TORCH_REQ, cached_venv

pytestmark = pytest.mark.integration

STACKS = {
    "0.17.2": ("transformers522", TORCH_REQ, "transformers==5.22.2", "kernels==0.17.2"),
    "0.19.1": ("transformers525", TORCH_REQ, "transformers==5.25.0", "kernels==0.19.1"),
}
VERIFIED = ".verified-kernels"  # kernels 0.18+'s receipts of verified loads, which scan_cache_dir warns about


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, example_repos: Path) -> Path:
    return build_store(tmp_path_factory.mktemp("hubstore"), example_repos)


@pytest.fixture(scope="module")
def hub(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(store, tmp_path_factory.mktemp("hublog") / "serve.log") as url:
        yield url


def _python(version: str) -> Path:
    return cached_venv(*STACKS[version])


def _commit(store: Path, repo_id: str, ref: str) -> str:
    for path in sorted((store / "files").glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("repo_id") == repo_id and record.get("ref") == ref:
            return str(record["revision"])
    raise AssertionError(f"no record of {repo_id} {ref}")


def _clean(python: Path, cache: Path, cwd: Path, version: str, repos: list[str]) -> None:
    doc = scan(python, cache, cwd)
    warned = [w for w in doc["warnings"] if isinstance(w, str)]
    if version == "0.17.2":
        assert warned == []
    else:  # kernels' own receipts, not the mirror's doing
        assert len(warned) == 1 and VERIFIED in warned[0]
    assert doc["repos"] == [["kernel", r] for r in sorted(repos)]


LOADS = """
import json, sys, kernels
repo, tag, sha = sys.argv[1:4]
out = {}
for how, kw in (("version", {"version": 1}), ("tag", {"revision": tag}), ("commit", {"revision": sha})):
    module = kernels.get_kernel(repo, **kw)
    out[how] = module.__file__.split("/snapshots/")[1].split("/")[0]
out["has"] = kernels.has_kernel(repo, version=1)
out["installed"] = str(kernels.install_kernel(repo, revision=tag)).split("/snapshots/")[1]
print(json.dumps(out))
"""


@pytest.mark.parametrize(("version", "repo", "tag"), [
    ("0.17.2", "kernels-community/img2grey", "v1.1.0"),
    ("0.17.2", MEGA, "v1.0.0"),
    # kernels 0.19 loads one build of a kernel id per process: the tag is the revision version=1 gets
    ("0.19.1", "kernels-community/img2grey", "v1.1.2"),
    ("0.19.1", MEGA, "v1.0.0"),
])
def test_get_kernel_by_version_tag_and_commit(hub: str, store: Path, tmp_path: Path, version: str, repo: str,
                                              tag: str) -> None:
    python = _python(version)
    sha = _commit(store, repo, tag)
    latest = _commit(store, repo, "v1.1.2") if repo.endswith("img2grey") else sha
    proc = client(python, LOADS, tmp_path / "cache", hub, tmp_path, repo, tag, sha)
    out = json.loads(proc.stdout.splitlines()[-1])
    variant = "torch213-cxx11-cpu-x86_64-linux" if repo.endswith("img2grey") else "torch-universal"
    assert out == {"version": latest, "tag": sha, "commit": sha, "has": True, "installed": f"{sha}/build/{variant}"}
    _clean(python, tmp_path / "cache", tmp_path, version, [repo])


KERNELIZE = """
import torch
from kernels import LayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping

@use_kernel_forward_from_hub("Doubler")
class Doubler(torch.nn.Module):
    def forward(self, x):
        return x + 1

mapping = {"Doubler": {"cpu": LayerRepository(repo_id="@MEGA@", layer_name="Doubler", version=1)}}
with use_kernel_mapping(mapping):
    model = kernelize(torch.nn.Sequential(Doubler()), mode=Mode.INFERENCE, device="cpu")
print("RESULT", model(torch.full((2,), 3.0)).tolist())
""".replace("@MEGA@", MEGA)


@pytest.mark.parametrize("version", STACKS)
def test_kernelize_with_a_layer_repository(hub: str, tmp_path: Path, version: str) -> None:
    python = _python(version)
    proc = client(python, KERNELIZE, tmp_path / "cache", hub, tmp_path)
    assert proc.stdout.splitlines()[-2:] == [MARK, "RESULT [6.0, 6.0]"]
    _clean(python, tmp_path / "cache", tmp_path, version, [MEGA])


LOCKED = """
import sys
from pathlib import Path
import kernels
lock = Path("kernels.lock")
for load in (kernels.load_kernel, kernels.get_locked_kernel):
    module = load("@MEGA@", lockfile=lock)
    print(load.__name__, module.__file__.split("/snapshots/")[1])
""".replace("@MEGA@", MEGA)


@pytest.mark.parametrize("version", STACKS)
def test_lock_download_then_offline_load(hub: str, store: Path, tmp_path: Path, version: str) -> None:
    python = _python(version)
    sha = _commit(store, MEGA, "v1.0.0")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "app"\nversion = "0.1"\n\n[tool.kernels.dependencies]\n"{MEGA}" = 1\n')
    cache = tmp_path / "cache"
    kernels_cli = python.parent / "kernels"
    env_script = "import os, sys, subprocess; sys.exit(subprocess.call([sys.argv[1], *sys.argv[2:]]))"
    client(python, env_script, tmp_path / "lock-cache", hub, project, str(kernels_cli), "lock", ".")
    lock = json.loads((project / "kernels.lock").read_text())
    assert lock == [{"dependency": {"repo-id": MEGA, "version": 1}, "lock": {"commit": sha}}]
    client(python, env_script, cache, hub, project, str(kernels_cli), "download", ".")
    # `kernels download .` writes no refs (0.19.1's `kernels lock .` writes refs/v1 into the cache it is given)
    assert not (cache / "kernels--kernels-community--megablocks" / "refs").exists()
    proc = client(python, LOCKED, cache, None, project)
    assert proc.stdout.splitlines()[-2:] == [f"load_kernel {sha}/build/torch-universal/__init__.py",
                                             f"get_locked_kernel {sha}/build/torch-universal/__init__.py"]
    _clean(python, cache, tmp_path, version, [MEGA])


MODEL = """
import torch
from transformers import AutoModelForCausalLM, GptOssConfig, GptOssForCausalLM
config = GptOssConfig(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                      max_position_embeddings=64, layer_types=["full_attention", "full_attention"])
torch.manual_seed(0)
GptOssForCausalLM(config).save_pretrained("model")
model = AutoModelForCausalLM.from_pretrained("model", use_kernels=True).eval()
with torch.no_grad():
    model(torch.tensor([[1, 2, 3, 4]]))
print("DONE")
"""


def test_transformers_5_22_from_pretrained_with_use_kernels(hub: str, tmp_path: Path) -> None:
    """transformers 5.22.2's own mapping: MegaBlocksMoeMLP on the CPU, one forward per layer. (5.25.0's own mapping
    and its KernelConfig are for GPU device types only: its test below registers a CPU mapping itself.)"""
    python = _python("0.17.2")
    proc = client(python, MODEL, tmp_path / "cache", hub, tmp_path)
    assert proc.stdout.splitlines()[-3:] == [MARK, MARK, "DONE"]
    _clean(python, tmp_path / "cache", tmp_path, "0.17.2", [MEGA])


LLAMA = """
import json, sys
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
path, mark = Path("model"), sys.argv[1]
if not path.exists():  # the online run makes the model: config only, random weights
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
                     ).save_pretrained(path)
ids = torch.tensor([[1, 2, 3, 4]])
with torch.no_grad():  # use_kernels=False: transformers 5.25 kernelizes by default (use_kernels unset)
    plain = AutoModelForCausalLM.from_pretrained(path, use_kernels=False)(ids).logits
from kernels import LayerRepository, Mode
from transformers.integrations.hub_kernels import register_kernel_mapping
act = LayerRepository("@ACT@", layer_name="RMSNorm", version=1)
register_kernel_mapping({"RMSNorm": {"cpu": {Mode.INFERENCE: act}}})
model = AutoModelForCausalLM.from_pretrained(path, use_kernels=True)
print("LOADED", flush=True)
with torch.no_grad():
    logits = model(ids).logits
print(json.dumps({"same": torch.equal(logits, plain), "logits": logits.tolist()}))
""".replace("@ACT@", ACT)


def test_transformers_5_25_from_pretrained_with_use_kernels_online_then_offline(store: Path, tmp_path: Path) -> None:
    """transformers 5.25.0 with kernels 0.19.1: a tiny Llama from config (random weights, save_pretrained), Llama's
    RMSNorm mapped on the CPU to example/act's layer (transformers' register_kernel_mapping: its own mapping and
    KernelConfig are for GPU device types only), ``from_pretrained(path, use_kernels=True)`` fetches the kernel from
    ``serve --hub`` into an empty Hub cache; then, the server stopped and HF_HUB_OFFLINE=1, the same from the cache."""
    python = _python("0.19.1")
    sha = _commit(store, ACT, "v1.0.0")
    cache = tmp_path / "cache"
    with served(store, tmp_path / "serve.log", "--allow-org", "example") as url:
        online = client(python, LLAMA, cache, url, tmp_path, RMS_MARK)
    offline = client(python, LLAMA, cache, None, tmp_path, RMS_MARK)
    runs = []
    results = []
    for proc in (online, offline):
        lines = proc.stdout.splitlines()
        loaded = lines.index("LOADED")
        runs.append(lines[loaded + 1:-1])
        results.append(json.loads(lines[-1]))
    # the kernel's RMSNorm.forward ran once per norm of the forward (2 layers x 2 norms + the final norm), online and
    # offline, and gave the model's own logits
    assert runs == [[RMS_MARK] * 5, [RMS_MARK] * 5]
    assert [r["same"] for r in results] == [True, True]
    assert results[1]["logits"] == results[0]["logits"]
    repo = cache / "kernels--example--act"
    refs = {p.relative_to(repo / "refs").as_posix(): p.read_text() for p in (repo / "refs").rglob("*") if p.is_file()}
    assert refs == {"v1": sha}
    assert sorted(p.relative_to(repo / "snapshots").as_posix() for p in (repo / "snapshots").rglob("*")
                  if p.is_file()) == [f"{sha}/build/torch-universal/{f}"
                                      for f in ("__init__.py", "layers.py", "metadata.json")]
    _clean(python, cache, tmp_path, "0.19.1", [ACT])


REFUSED = """
import sys, kernels
try:
    kernels.get_kernel(sys.argv[1], version=1)
except Exception as exc:
    print(type(exc).__name__, str(exc).splitlines()[0])
"""


@pytest.mark.parametrize("version", STACKS)
def test_an_organisation_not_allowed_and_a_missing_kernel_get_kernels_refusals(hub: str, tmp_path: Path,
                                                                                 version: str) -> None:
    python = _python(version)
    other = client(python, REFUSED, tmp_path / "c1", hub, tmp_path, "elsewhere/relu")
    assert other.stdout.splitlines()[-1] == (
        "ValueError Kernel repository 'elsewhere/relu' could not verify publisher trust status. Set "
        "trust_remote_code=True or add the repository ID to the trust_remote_code allowlist to allow loading kernels "
        "from untrusted sources.")
    missing = client(python, REFUSED, tmp_path / "c2", hub, tmp_path, "kernels-community/nothere")
    assert missing.stdout.splitlines()[-1].startswith("RepositoryNotFoundError 404 Client Error.")


OFFLINE = """
import sys, kernels
try:
    module = kernels.get_kernel(sys.argv[1], revision=sys.argv[2])
    print("loaded", module.__file__.split("/snapshots/")[1])
except Exception as exc:
    print(type(exc).__name__, "from", type(exc.__cause__).__name__)
"""


@pytest.mark.parametrize("version", STACKS)
def test_offline_after_an_online_fill(hub: str, store: Path, tmp_path: Path, version: str) -> None:
    """The documented limit: huggingface_hub 2.4 writes trees/{sha}.json (every variant of img2grey) beside the one
    variant it downloaded; kernels 0.17.2 then refuses the commit offline, 0.19.1 loads it."""
    python = _python(version)
    repo = "kernels-community/img2grey"
    sha = _commit(store, repo, "v1.1.2")
    client(python, OFFLINE, tmp_path / "cache", hub, tmp_path, repo, sha)
    assert (tmp_path / "cache" / "kernels--kernels-community--img2grey" / "trees" / f"{sha}.json").is_file()
    proc = client(python, OFFLINE, tmp_path / "cache", None, tmp_path, repo, sha)
    variant = "torch213-cxx11-cpu-x86_64-linux"
    loaded = f"loaded {sha}/build/{variant}/__init__.py"
    expected = "FileNotFoundError from IncompleteSnapshotError" if version == "0.17.2" else loaded
    assert proc.stdout.splitlines()[-1] == expected
