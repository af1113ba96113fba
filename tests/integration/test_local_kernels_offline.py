"""local-kernels end to end: kernel wheels pip-installed into a clean venv load offline with get_kernel.

Each test makes a fresh venv (no system site-packages) that reaches torch 2.13 CPU and the kernels
library through .pth files pointing at cached venvs (tests/.cache/venvs), with kernel-factory's own
wheel (dist/, what ``make install`` built) and the kernel wheels pip-installed into it from files, no
index. The Hub endpoint is a dead port on 127.0.0.1 and HF_HUB_OFFLINE=1, so any attempt to reach it
fails. ``--check`` prints, under each kernel that would load, one indented line per kernels loading
path; the assertions here on kernel lines skip those (tests/integration/test_kernels_loaders.py checks
them).
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from support import built_wheel, cached_venv, clean_env, fresh_venv, hand_wheel, kf, run

KERNELS_REQ = f"kernels=={importlib.metadata.version('kernels')}"


def judged(python: Path) -> str:
    """--check's first line for an interpreter with the kernels version the project tests (KERNELS_REQ)."""
    version = importlib.metadata.version("kernels")
    if tuple(int(p) for p in version.split(".")[:2]) >= (0, 18):
        rules = ("refs/v<N> read from kernels--org--name only; every load checks the files against metadata.json's "
                 "digest")
    else:
        rules = "refs/v<N> read from kernels--org--name and models--org--name (models-- wins); no digest check at load"
    return f"judged for kernels {version} at {python}: {rules}"


@pytest.fixture(scope="session")
def kernel_wheels(example_repos: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Wheels of img2grey 1.1.2, relu-nested 0.1.0 and pyonly 0.2.0 built by ``kernel-factory to-wheel``."""
    out = tmp_path_factory.mktemp("wheels")
    for repo, version in (("img2grey", "1.1.2"), ("relu-nested", "0.1.0"), ("pyonly", "0.2.0")):
        proc = kf(
            "to-wheel",
            example_repos / repo,
            version,
            "-o",
            out,
            "--repo-id",
            f"example/{repo}",
            "--variants",
            "torch213-cxx11-cpu-x86_64-linux",
            "--variants",
            "torch-universal",
        )
        assert proc.returncode == 0, proc.stderr
    wheels = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert sorted(wheels) == ["img2grey", "pyonly", "relu_nested"], wheels
    return wheels


@pytest.fixture(scope="session")
def kernels_site() -> str:
    """site-packages of a cached venv holding the kernels library (and huggingface_hub, packaging)."""
    python = cached_venv("kernels", KERNELS_REQ)
    return run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()


def kernel_venv(path: Path, kernels_site: str, *wheels: Path) -> Path:
    """A clean venv with torch, kernels, kernel-factory and ``wheels`` installed (no deps, no index)."""
    python = fresh_venv(path, torch=True)
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "zzz_kernels.pth").write_text(f"{kernels_site}\n")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", built_wheel(), env=clean_env())
    assert "include-system-site-packages = false" in (path / "pyvenv.cfg").read_text()
    if wheels:
        run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *wheels, env=clean_env())
    return python


def offline_env(**extra: str) -> dict[str, str]:
    return clean_env(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", **extra)


def local_kernels(python: Path, *flags: str, home: Path) -> subprocess.CompletedProcess[str]:
    return run(python, "-m", "kernel_factory", "local-kernels", *flags, env=offline_env(HF_HOME=str(home)), check=False)


LOAD = """
import torch
from kernels import get_kernel

torch.manual_seed(0)
img = get_kernel("example/img2grey", version=1)
x = torch.rand(4, 5, 3)
ref = x[..., 0] * 0.299 + x[..., 1] * 0.587 + x[..., 2] * 0.114
torch.testing.assert_close(img.img2grey(x), ref)
print("img2grey", img.__file__)
"""

LOAD_MORE = """
relu = get_kernel("example/relu-nested", version=1)
y = torch.randn(64)
torch.testing.assert_close(relu.relu(y), torch.clamp(y, min=0))
py = get_kernel("example/pyonly", version=0)
z = torch.randn(3, 8)
torch.testing.assert_close(py.silu_and_mul(z), torch.nn.functional.silu(z[:, :4]) * z[:, 4:])
print("relu", relu.__file__)
print("pyonly", py.__file__)
"""


def test_get_kernel_loads_an_installed_wheel_offline(
    tmp_path: Path, kernels_site: str, kernel_wheels: dict[str, Path]
) -> None:
    python = kernel_venv(tmp_path / "venv", kernels_site, kernel_wheels["img2grey"])
    home = tmp_path / "hf-home"  # an empty Hub cache: nothing to fall back on
    shell = local_kernels(python, "--shell", home=home)
    assert shell.returncode == 0, shell.stderr
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    assert shell.stdout == f"export LOCAL_KERNELS=example/img2grey={site}/img2grey\n"
    # What a user does: eval the line, then run unchanged code.
    script = tmp_path / "load.py"
    script.write_text(LOAD)
    proc = run(
        "bash",
        "-c",
        f'eval "$("{python}" -m kernel_factory local-kernels --shell)" && "{python}" "{script}"',
        env=offline_env(HF_HOME=str(home)),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == f"img2grey {site}/img2grey/__init__.py"
    # Without LOCAL_KERNELS the same code fails offline: the wheel is what made it work.
    bare = run(python, script, env=offline_env(HF_HOME=str(home)), check=False)
    assert bare.returncode != 0 and "offline" in bare.stderr.lower()


def test_several_kernels_at_once_and_check(tmp_path: Path, kernels_site: str, kernel_wheels: dict[str, Path]) -> None:
    python = kernel_venv(tmp_path / "venv", kernels_site, *kernel_wheels.values())
    home = tmp_path / "hf-home"
    plain = local_kernels(python, home=home)
    assert plain.returncode == 0, plain.stderr
    value = plain.stdout.strip()
    assert [e.split("=")[0] for e in value.split(":")] == ["example/img2grey", "example/pyonly", "example/relu-nested"]
    check = local_kernels(python, "--check", home=home)
    assert check.returncode == 0, check.stdout + check.stderr
    # no loading path reaches them until LOCAL_KERNELS is set (or --cache): the summary says so
    assert check.stdout.splitlines()[-1] == unreached(3, 3)
    script = tmp_path / "load.py"
    script.write_text(LOAD + LOAD_MORE)
    proc = run(python, script, env=offline_env(HF_HOME=str(home), LOCAL_KERNELS=value), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()] == ["img2grey", "relu", "pyonly"]


def unreached(loading: int, total: int) -> str:
    """--check's summary where the kernels that would load are reached by no loading path yet (issue 36)."""
    return (f"{loading} of {total} installed kernels would load with LOCAL_KERNELS set "
            f'(eval "$(kernel-factory local-kernels --shell)"); {loading} of them through no loading path as this '
            "environment is now")


def test_check_names_a_torch_mismatch(tmp_path: Path, kernels_site: str, kernel_wheels: dict[str, Path]) -> None:
    old = hand_wheel(
        tmp_path, variant="torch27-cxx11-cu128-x86_64-linux", label="torch27cu128cxx11", torch_req="torch<2.8,>=2.7"
    )
    python = kernel_venv(tmp_path / "venv", kernels_site, kernel_wheels["img2grey"], old)
    check = local_kernels(python, "--check", home=tmp_path / "hf-home")
    assert check.returncode == 3, check.stdout + check.stderr
    lines = [line for line in check.stdout.splitlines() if not line.startswith("  ")]
    assert lines[0] == judged(python)
    assert lines[1].startswith("img2grey (example/img2grey) 1.1.2+torch213cpucxx11: would load from ")
    assert lines[2] == (
        "oldgrey (example/oldgrey) 1.0.0+torch27cu128cxx11: built for torch 2.7 but torch 2.13.0+cpu is installed: "
        "pip install --force-reinstall 'oldgrey==1.0.0' from the variants/torch213cpucxx11/simple index; "
        "a CUDA build but torch 2.13.0+cpu has no CUDA: pip install --force-reinstall 'oldgrey==1.0.0' "
        "from the variants/torch213cpucxx11/simple index, or install a CUDA build of torch"
    )
    assert lines[3] == unreached(1, 2)


def named_wheel(out: Path, dist: str, meta_name: str) -> Path:
    """A universal (pure-Python) kernel wheel laid out as to-wheel lays them out; metadata.json names ``meta_name``."""
    pkg, version = dist.replace("-", "_"), "1.0.0"
    info = f"{pkg}-{version}.dist-info"
    meta = {"name": meta_name, "id": f"_{pkg}_0000000", "version": 1, "license": "Apache-2.0",
            "python-depends": [], "backend": {"type": "cpu"}}
    prov = {"repo_id": f"example/{dist}", "revision": "0" * 40, "ref": "v1.0.0", "variant": "torch-universal",
            "digest": None, "factory_version": "0.1.0", "package": pkg, "name": meta_name, "kernel_version": version}
    files = {
        f"{pkg}/__init__.py": b"def hello():\n    return 'hello'\n",
        f"{pkg}/metadata.json": json.dumps(meta).encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nRequires-Dist: torch\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/kernel_factory.json": json.dumps(prov, sort_keys=True).encode(),
    }
    wheel = out / f"{pkg}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"]))
    return wheel


AGREE = """
import sys
from kernels import get_kernel

for repo in sys.argv[1:]:
    try:
        get_kernel(repo, version=1)
        print(repo, "loads")
    except Exception as exc:
        print(repo, "refused:", str(exc).splitlines()[0])
"""


def test_check_agrees_with_get_kernel_on_kernel_names(tmp_path: Path, kernels_site: str) -> None:
    """A metadata.json name that kernels forbids: --check says so, and get_kernel refuses it; a good one loads."""
    good = named_wheel(tmp_path, "scale-add", "scale-add")
    bad = named_wheel(tmp_path, "scale-bad", "scale_bad")
    python = kernel_venv(tmp_path / "venv", kernels_site, good, bad)
    home = tmp_path / "hf-home"
    check = local_kernels(python, "--check", home=home)
    assert check.returncode == 3, check.stdout + check.stderr
    lines = [line for line in check.stdout.splitlines() if not line.startswith("  ")]
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    assert lines[0] == judged(python)
    assert lines[1] == f"scale-add (example/scale-add) 1.0.0: would load from {site}/scale_add"
    assert lines[2].startswith(
        f"scale_bad (example/scale-bad) 1.0.0: {site}/scale_bad/metadata.json: kernels.get_kernel would refuse it: "
        "Cannot parse metadata: Invalid kernel name `scale_bad`. Name must: - Start with a lowercase letter (a-z)"
    ), lines[2]
    assert lines[3] == unreached(1, 2)
    script = tmp_path / "agree.py"
    script.write_text(AGREE)
    value = f"example/scale-add={site}/scale_add:example/scale-bad={site}/scale_bad"
    proc = run(python, script, "example/scale-add", "example/scale-bad",
               env=offline_env(HF_HOME=str(home), LOCAL_KERNELS=value))
    assert proc.stdout.splitlines() == [
        "example/scale-add loads",
        f'example/scale-bad refused: Cannot parse metadata from `"{site}/scale_bad/metadata.json"`: '
        "Invalid kernel name `scale_bad`. Name must:",
    ]
