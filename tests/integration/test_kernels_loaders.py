"""Every way the real kernels library loads a kernel, offline, on a pip-installed wheel: ``local-kernels --cache``.

A pure-Python torch-universal kernel ``example/act`` with ``layers`` (``SiluAndMul``) and a function
(``silu_and_mul``) is built as a git repository (tag v1.0.0, branch v1), turned into a wheel by
``kernel-factory to-wheel`` and pip-installed into a fresh venv that reaches torch 2.13 CPU and the kernels
version this project tests (a cached venv's site-packages, through .pth files). Every load runs with
HF_HUB_OFFLINE=1 and HF_ENDPOINT on a dead loopback port; only the earlier Hub download (olah on
127.0.0.1, tests/integration/hub_server.py) is online. Each loading path is run twice: after
``eval "$(kernel-factory local-kernels --shell)"`` alone (LOCAL_KERNELS: the control, where only get_kernel
and has_kernel work) and after ``eval "$(kernel-factory local-kernels --shell --cache)"``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import zipfile
from pathlib import Path

import pytest
from hub_server import git, hf_env, hub, make_kernel_repo, serve_repo
from huggingface_hub import scan_cache_dir
from kernel_factory.verify.digest import compute
from support import ROOT, cached_venv, clean_env, hand_wheel, kf, run
from test_local_kernels_offline import KERNELS_REQ, judged, kernel_venv, offline_env

REPO_ID = "example/act"


@pytest.fixture(scope="module")
def kernels_site() -> str:
    """site-packages of the cached venv holding the kernels version the project tests."""
    python = cached_venv("kernels", KERNELS_REQ)
    return run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()

INIT = '''"""act: SiluAndMul as a layer and as a function (pure Python, for tests)."""
import torch

from . import layers


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d]) * x[..., d:]
'''

LAYERS = '''import torch
from torch import nn


class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return torch.nn.functional.silu(x[..., :d]) * x[..., d:]
'''


def act_repo(path: Path) -> str:
    """The kernel as a Hub-style git repository; returns the commit of tag v1.0.0 (= branch v1)."""
    vdir = path / "build" / "torch-universal"
    vdir.mkdir(parents=True)
    (path / "README.md").write_text("# act\n\nSiluAndMul, as a layer and a function, for tests.\n")
    (vdir / "__init__.py").write_text(INIT)
    (vdir / "layers.py").write_text(LAYERS)
    meta = {"name": "act", "id": "_act_0000000", "version": 1, "license": "Apache-2.0", "python-depends": [],
            "backend": {"type": "cpu"}}
    meta["digest"] = {"algorithm": "sha256", "files": compute(vdir, "sha256")}
    (vdir / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "act 1.0.0", when=1_700_000_000)
    sha = git(path, "rev-parse", "HEAD")
    git(path, "tag", "v1.0.0", sha)
    git(path, "branch", "v1", sha)
    return sha


@pytest.fixture(scope="module")
def act(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(the act wheel, its commit)."""
    base = tmp_path_factory.mktemp("act")
    sha = act_repo(base / "repo")
    proc = kf("to-wheel", base / "repo", "1.0.0", "-o", base / "wheels", "--repo-id", REPO_ID)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (base / "wheels").glob("act-*.whl")
    return wheel, sha


def model_wheel(out: Path, lock: str) -> Path:
    """``mymodel``: a package whose metadata holds kernels.lock, as `kernels lock` + pip install leave it."""
    info = "mymodel-1.0.dist-info"
    files = {
        "mymodel/__init__.py": (b"from pathlib import Path\nfrom kernels import load_kernel\n\n"
                                b"def act():\n    return load_kernel('example/act', lockfile=None)\n"),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: mymodel\nVersion: 1.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/kernels.lock": lock.encode(),
    }
    wheel = out / "mymodel-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"]))
    return wheel


# One process runs every loading path and prints "<path> ok" or "<path> FAIL <first line of the error>".
PATHS = r'''
import sys
from pathlib import Path

import torch
from torch import nn

from kernels import (FuncRepository, LayerRepository, LockedFuncRepository, LockedLayerRepository, Mode,
                     get_kernel, get_locked_kernel, has_kernel, kernelize, load_kernel, use_kernel_forward_from_hub,
                     use_kernel_func_from_hub, use_kernel_mapping)

SHA, LOCK = sys.argv[1], Path(sys.argv[2])
x = torch.randn(3, 8)
want = torch.nn.functional.silu(x[:, :4]) * x[:, 4:]


@use_kernel_forward_from_hub("SiluAndMul")
class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x[..., : x.shape[-1] // 2])  # not the kernel: kernelize must replace it


@use_kernel_func_from_hub("silu_and_mul")
def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x[..., : x.shape[-1] // 2])


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = SiluAndMul()
        self.fn = silu_and_mul

    def forward(self, x):
        return self.act(x), self.fn(x)


def layer(repo):
    with use_kernel_mapping({"SiluAndMul": {"cpu": repo}}, inherit_mapping=False):
        m = kernelize(Model(), mode=Mode.INFERENCE, device="cpu")
    return m(x)[0]


def func(repo):
    with use_kernel_mapping({"silu_and_mul": {"cpu": repo}}, inherit_mapping=False):
        m = kernelize(Model(), mode=Mode.INFERENCE, device="cpu")
    return m(x)[1]


def has(**kw):
    if not has_kernel("example/act", **kw):
        raise RuntimeError("has_kernel returned False")
    return want


def model_lock():
    import mymodel
    return mymodel.act().silu_and_mul(x)


checks = {
    "get_kernel(version=1)": lambda: get_kernel("example/act", version=1).silu_and_mul(x),
    "get_kernel(revision=sha)": lambda: get_kernel("example/act", revision=SHA).silu_and_mul(x),
    "get_kernel(revision=v1)": lambda: get_kernel("example/act", revision="v1").layers.SiluAndMul()(x),
    "has_kernel(version=1)": lambda: has(version=1),
    "has_kernel(revision=sha)": lambda: has(revision=SHA),
    "LayerRepository(version=1)": lambda: layer(LayerRepository("example/act", layer_name="SiluAndMul", version=1)),
    "FuncRepository(version=1)": lambda: func(FuncRepository("example/act", func_name="silu_and_mul", version=1)),
    "LockedLayerRepository": lambda: layer(LockedLayerRepository("example/act", lockfile=LOCK,
                                                                 layer_name="SiluAndMul")),
    "LockedFuncRepository": lambda: func(LockedFuncRepository("example/act", lockfile=LOCK,
                                                              func_name="silu_and_mul")),
    "get_locked_kernel(lockfile=)": lambda: get_locked_kernel("example/act", lockfile=LOCK).silu_and_mul(x),
    "load_kernel(lockfile=)": lambda: load_kernel("example/act", lockfile=LOCK).silu_and_mul(x),
    "load_kernel(lockfile=None)": model_lock,
}
for name, call in checks.items():
    try:
        got = call()
        torch.testing.assert_close(got, want)
        print(name, "ok")
    except Exception as exc:
        print(name, "FAIL", (str(exc).strip().splitlines() or [type(exc).__name__])[0])
'''

ALL = ["get_kernel(version=1)", "get_kernel(revision=sha)", "get_kernel(revision=v1)", "has_kernel(version=1)",
       "has_kernel(revision=sha)", "LayerRepository(version=1)", "FuncRepository(version=1)", "LockedLayerRepository",
       "LockedFuncRepository", "get_locked_kernel(lockfile=)", "load_kernel(lockfile=)",
       "load_kernel(lockfile=None)"]
# kernels 0.19 resolves LayerRepository and FuncRepository(version=) through get_kernel, which reads LOCAL_KERNELS
LAYERS_READ_LOCAL_KERNELS = tuple(int(p) for p in importlib.metadata.version("kernels").split(".")[:2]) >= (0, 19)
ONLY_LOCAL_KERNELS = ALL[:7] if LAYERS_READ_LOCAL_KERNELS else ALL[:5]  # what LOCAL_KERNELS alone serves
# kernels 0.17.2 looks for the caller's kernels.lock in the distribution of the first frame outside
# kernels/locking.py, which is kernels/load.py itself: the lock in the calling package is never found, online or not.
NO_CALLER_LOCK = ("FAIL Could not find a `kernels.lock` file in the caller's package metadata. Please lock kernels "
                  "with `kernels lock <project>` and then reinstall the project.")
WITH_CACHE = {**dict.fromkeys(ALL, "ok"), "load_kernel(lockfile=None)": NO_CALLER_LOCK}


def lock_json(sha: str) -> str:
    """kernels.lock as kernels 0.17 writes it."""
    return json.dumps([{"dependency": {"repo-id": REPO_ID, "version": 1}, "lock": {"commit": sha}}])


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` -> its symlink target or content hash (folders: "dir")."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def files_of(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` (read through links) -> its sha256; bytecode left out."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def scan(cache: Path) -> dict[str, dict[str, list[str]]]:
    """huggingface_hub's own reading of the cache (the oracle): no warnings; {repo id: {commit: its refs}}."""
    info = scan_cache_dir(cache)
    receipts = f"Repo path is not a valid HuggingFace cache directory: {cache / '.verified-kernels'}"
    # kernels 0.18+ keeps receipts of its verified loads in the cache folder: its own doing, not ours
    assert [w for w in info.warnings if str(w) != receipts] == [], info.warnings
    return {r.repo_id: {rev.commit_hash: sorted(rev.refs) for rev in r.revisions} for r in info.repos}


def setup(tmp_path: Path, kernels_site: str, act: tuple[Path, str]) -> tuple[Path, Path, str, Path]:
    wheel, sha = act
    lock = tmp_path / "kernels.lock"
    lock.write_text(lock_json(sha))
    python = kernel_venv(tmp_path / "venv", kernels_site, wheel, model_wheel(tmp_path, lock.read_text()))
    script = tmp_path / "paths.py"
    script.write_text(PATHS)
    return python, script, sha, lock


def results(python: Path, script: Path, sha: str, lock: Path, step: str, home: Path,
            **extra: str) -> dict[str, str]:
    proc = run("bash", "-c", f'{step} && "{python}" "{script}" {sha} "{lock}"',
               env=offline_env(HF_HOME=str(home), **extra), check=False, cwd=script.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert list(got) == ALL, proc.stdout + proc.stderr
    return got


def lk(python: Path, *flags: str) -> str:
    org = ["--allow-org", "example"] if "--cache" in flags else []  # example: not an organisation allowed by default
    return f'eval "$("{python}" -m kernel_factory local-kernels {" ".join([*flags, *org])})"'


def test_every_loading_path_works_offline_after_local_kernels_cache(
    tmp_path: Path, kernels_site: str, act: tuple[Path, str]
) -> None:
    python, script, sha, lock = setup(tmp_path, kernels_site, act)
    home = tmp_path / "hf-home"
    # The control: LOCAL_KERNELS alone serves get_kernel and has_kernel, and nothing else.
    before = results(python, script, sha, lock, lk(python, "--shell"), home)
    assert {k for k, v in before.items() if v == "ok"} == set(ONLY_LOCAL_KERNELS), before
    assert before["load_kernel(lockfile=None)"] == NO_CALLER_LOCK
    assert LAYERS_READ_LOCAL_KERNELS or before["LayerRepository(version=1)"] == (
        "FAIL Version 1 of 'example/act' is not available in the local cache and Hugging Face Hub is in offline mode. "
        "Download the kernel while online first, or pass an explicit `revision=<commit>`.")
    assert before["load_kernel(lockfile=)"] == (
        f"FAIL Cannot find a local snapshot for example/act (revision: {sha}). "
        "When Hugging Face Hub is in offline mode the kernel must already be present in the local cache.")
    # The step: every path loads the installed wheel.
    after = results(python, script, sha, lock, lk(python, "--shell", "--cache"), home)
    assert after == WITH_CACHE
    snap = home / "hub" / "kernels--example--act" / "snapshots" / sha
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    assert not (snap / "build" / "torch-universal").is_symlink()  # a checked copy, not a link into the venv
    assert files_of(snap / "build" / "torch-universal") == files_of(Path(site) / "act")
    assert (home / "hub" / "kernels--example--act" / "refs" / "v1").read_text() == sha
    assert scan(home / "hub") == {REPO_ID: {sha: ["v1", "v1.0.0"]}}
    # The cache alone, without LOCAL_KERNELS, serves them all too.
    alone = results(python, script, sha, lock, "unset LOCAL_KERNELS", home)
    assert alone == WITH_CACHE
    # scripts/gpu_e2e.py kernelize, the check `make gpu-e2e` runs on the GPU, on this CPU kernel.
    e2e = run(python, ROOT / "scripts" / "gpu_e2e.py", "kernelize", "--device", "cpu", "--repo-id", REPO_ID,
              env=offline_env(HF_HOME=str(home)), check=False)
    assert e2e.returncode == 0, e2e.stdout + e2e.stderr
    assert e2e.stdout.startswith(
        "  ok   kernelize LayerRepository(example/act, layer SiluAndMul, version=1) on cpu: max abs err "), e2e.stdout


def test_check_tells_each_path(tmp_path: Path, kernels_site: str, act: tuple[Path, str]) -> None:
    python, _, sha, _ = setup(tmp_path, kernels_site, act)
    home = tmp_path / "hf-home"
    env = offline_env(HF_HOME=str(home))
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    cache = home / "hub"
    check = run(python, "-m", "kernel_factory", "local-kernels", "--check", env=env, check=False)
    assert check.returncode == 0, check.stdout + check.stderr  # without --cache, get_kernel's verdict decides
    assert check.stdout.splitlines() == [
        judged(python),
        f"act (example/act) 1.0.0: would load from {site}/act",
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): no, no refs/v1 for example/act in "
        f"{cache}: run `kernel-factory local-kernels --cache`",
        f"  get_kernel, has_kernel (revision=<sha>): no, {cache}/kernels--example--act/snapshots/{sha} does not "
        "exist: run `kernel-factory local-kernels --cache`",
        f"  LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on {sha}): no, "
        f"{cache}/kernels--example--act/snapshots/{sha} does not exist: run `kernel-factory local-kernels --cache`",
        '1 of 1 installed kernels would load with LOCAL_KERNELS set (eval "$(kernel-factory local-kernels --shell)"); '
        "1 of them through no loading path as this environment is now",
    ]
    done = run(python, "-m", "kernel_factory", "local-kernels", "--cache", "--check", "--allow-org", "example",
               env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    variant = (f"{cache}/kernels--example--act/snapshots/{sha}/build/torch-universal (this wheel's commit and "
               "variant, checked and placed by kernel-factory local-kernels)")
    assert done.stdout.splitlines() == [
        judged(python),
        f"act (example/act) 1.0.0: would load from {site}/act",
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names {sha}: {variant}",
        f"  get_kernel, has_kernel (revision=<sha>): yes, {variant}",
        f"  LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on {sha}): yes, "
        f"{variant}",
        "1 of 1 installed kernels would load",
    ]


def hub_download(cache: Path, repo_id: str, sha: str, files: dict[str, bytes], refs: dict[str, str]) -> None:
    """What huggingface_hub leaves after downloading ``files`` of ``repo_id`` at ``sha``: blobs, symlinks, refs."""
    repo = cache / ("kernels--" + repo_id.replace("/", "--"))
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / sha / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    for ref, commit in refs.items():
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)


HUB_LOAD = r'''
from kernels import get_kernel
hub = get_kernel("example/hubrelu", version=1)
print("hubrelu", hub.__file__)
act = get_kernel("example/act", version=1)
print("act", act.__file__)
'''


def test_existing_hub_cache_is_left_as_it_was_and_still_loads(
    tmp_path: Path, kernels_site: str, act: tuple[Path, str]
) -> None:
    """A kernel downloaded from the (olah) Hub earlier, and example/act at another commit: --cache only adds."""
    python, _, sha, _ = setup(tmp_path, kernels_site, act)
    home = tmp_path / "hf-home"
    cache = home / "hub"
    relu = make_kernel_repo(tmp_path / "hubrelu", module="hubrelu", variants=("torch-universal",))
    serve_repo(relu.path, tmp_path / "mirrors", "example/hubrelu")
    with hub(tmp_path / "mirrors", tmp_path / "olah") as (_, proxy):
        got = run(python, "-c", "from huggingface_hub import snapshot_download as s; "
                  "print(s('example/hubrelu', repo_type='kernel', revision='v1'))",
                  env=clean_env(**hf_env(proxy.url, home)))
    hub_sha = relu.commits[1]  # branch v1
    assert got.stdout.strip() == f"{cache}/kernels--example--hubrelu/snapshots/{hub_sha}"
    other = "2" * 40
    hub_download(cache, REPO_ID, other, {"build/torch-universal/metadata.json": b"{}"}, {"main": other})
    before = tree(cache)
    proc = run(python, "-m", "kernel_factory", "local-kernels", "--cache", "--allow-org", "example",
               env=offline_env(HF_HOME=str(home)), check=False)
    assert proc.returncode == 0, proc.stderr
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    snap = cache / "kernels--example--act" / "snapshots" / sha
    installed = files_of(Path(site) / "act")
    assert proc.stderr.splitlines() == [
        f"in the Hub cache: example/act: {snap}/build/torch-universal ({len(installed)} files checked against act's "
        "RECORD)"]
    after = tree(cache)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing that was there changed
    new = {k for k in after if k not in before and not k.startswith(".locks")}
    variant = f"kernels--example--act/snapshots/{sha}/build/torch-universal"
    assert new == {
        f"kernels--example--act/snapshots/{sha}", f"kernels--example--act/snapshots/{sha}/build", variant,
        f"kernels--example--act/snapshots/{sha}/.kernel-factory.json",
        "kernels--example--act/refs/v1", "kernels--example--act/refs/v1.0.0",
        *(f"{variant}/{rel}" for rel in installed), *(f"{variant}/{rel.rpartition('/')[0]}" for rel in installed
                                                       if "/" in rel),
    } | ({f"kernels--example--act/blobs/{digest}" for digest in installed.values()} - set(before))
    assert scan(cache) == {"example/hubrelu": {hub_sha: ["v1"]}, REPO_ID: {other: ["main"], sha: ["v1", "v1.0.0"]}}
    script = tmp_path / "hub_load.py"
    script.write_text(HUB_LOAD)
    loaded = run(python, script, env=offline_env(HF_HOME=str(home)), check=False)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert loaded.stdout.splitlines() == [
        f"hubrelu {cache}/kernels--example--hubrelu/snapshots/{hub_sha}/build/torch-universal/__init__.py",
        f"act {snap}/build/torch-universal/__init__.py",
    ]
    assert files_of(snap / "build" / "torch-universal") == installed  # the installed wheel's bytes are what loads


def test_a_hub_ref_is_never_moved(tmp_path: Path, kernels_site: str, act: tuple[Path, str]) -> None:
    """refs/v1 from an earlier Hub download names another commit: left as it is, and --check says so."""
    python, _, sha, _ = setup(tmp_path, kernels_site, act)
    home = tmp_path / "hf-home"
    cache = home / "hub"
    other = "3" * 40
    meta = {"name": "act", "id": "_act_0", "version": 1, "license": "Apache-2.0", "python-depends": [],
            "backend": {"type": "cpu"}}
    hub_download(cache, REPO_ID, other, {
        "build/torch-universal/__init__.py": b"def silu_and_mul(x):\n    return 'hub'\n",
        "build/torch-universal/metadata.json": json.dumps(meta).encode()}, {"v1": other})
    before = tree(cache)
    proc = run(python, "-m", "kernel_factory", "local-kernels", "--cache", "--check", "--allow-org", "example",
               env=offline_env(HF_HOME=str(home)), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (f"example/act: refs/v1 in {cache} names {other}, which kernel-factory did not write; left as it is: "
            f"use revision='{sha}' or a lock file") in proc.stderr.splitlines()
    assert proc.stdout.splitlines()[:3:2] == [judged(python), (
        f"  get_kernel, has_kernel, LayerRepository, FuncRepository (version=1): yes, refs/v1 names {other}: "
        f"{cache}/kernels--example--act/snapshots/{other}/build/torch-universal (a download from the Hub)")]
    after = tree(cache)
    assert {k: v for k, v in after.items() if k in before} == before


def test_a_wheel_for_another_torch_is_refused_with_the_reason(
    tmp_path: Path, kernels_site: str, act: tuple[Path, str]
) -> None:
    old = hand_wheel(
        tmp_path, variant="torch27-cxx11-cu128-x86_64-linux", label="torch27cu128cxx11", torch_req="torch<2.8,>=2.7"
    )
    python = kernel_venv(tmp_path / "venv", kernels_site, act[0], old)
    home = tmp_path / "hf-home"
    env = offline_env(HF_HOME=str(home))
    proc = run(python, "-m", "kernel_factory", "local-kernels", "--cache", "--check", "--allow-org", "example",
               env=env, check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert ("oldgrey (example/oldgrey) 1.0.0+torch27cu128cxx11: built for torch 2.7 but torch 2.13.0+cpu is installed"
            in proc.stdout)
    # Never imported: the kernel's module is not loaded by --check, and get_kernel refuses the variant.
    script = tmp_path / "old.py"
    script.write_text("import sys\nfrom kernels import get_kernel\n"
                      "try:\n    get_kernel('example/oldgrey', version=1)\nexcept Exception as e:\n"
                      "    print('refused', str(e).splitlines()[0])\nprint(any('oldgrey' in m for m in sys.modules))\n")
    got = run(python, script, env=env, check=False)
    assert got.stdout.splitlines()[-1] == "False", got.stdout + got.stderr
    assert got.stdout.splitlines()[0].startswith("refused Cannot find a build variant for this system in "
                                                 "example/oldgrey"), got.stdout + got.stderr

