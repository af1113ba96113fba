"""``[[transformers]]``: plan lists and build mirrors exactly what transformers' own kernel mapping asks for, read
from a real transformers 5.22.2 (with kernels 0.17.2 and torch 2.13) in its own venv, against the test Hub; a
transformers without the mapping, or no transformers, is one line (exit 2)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import Proxy, hf_env, hub, make_kernel_repo, serve_repo
from support import TORCH_REQ, cached_venv, clean_env, kf, run

pytestmark = pytest.mark.integration
TRANSFORMERS = ("transformers==5.22.2", "kernels==0.17.2")


@pytest.fixture(scope="module")
def tf_python() -> Path:
    return cached_venv("transformers522", TORCH_REQ, *TRANSFORMERS)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """The test Hub with kernels-community/megablocks, which transformers maps for CPU inference."""
    root = tmp_path_factory.mktemp("tf-hub")
    make_kernel_repo(root / "src" / "megablocks", module="megablocks", variants=("torch-universal",))
    serve_repo(root / "src" / "megablocks", root / "mirrors", "kernels-community/megablocks")
    with hub(root / "mirrors", root / "olah") as (_, proxy):
        yield proxy


def config(tmp_path: Path, python: Path | str, devices: str = '["cpu"]', modes: str = '["inference"]') -> Path:
    cfg = tmp_path / "factory.toml"
    cfg.write_text(f'[factory]\nstore = "store"\n\n[[transformers]]\npython = "{python}"\ndevices = {devices}\n'
                   f"modes = {modes}\n")
    return cfg


def test_plan_lists_and_build_mirrors_what_transformers_maps(tf_python: Path, served: Proxy, tmp_path: Path) -> None:
    env = clean_env(**hf_env(served.url, tmp_path / "hf"))
    cfg = config(tmp_path, tf_python)
    proc = kf("plan", "--config", cfg, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    planned = json.loads(proc.stdout)
    assert [(j["repo"], j["ref"], j["version"], j["variant"]) for j in planned["build"]] == [
        ("kernels-community/megablocks", "v1.0.1", "1.0.1", "torch-universal")]
    line = (f"transformers 5.22.2 (kernels 0.17.2) at {tf_python} maps 1 kernel repositories for cpu, inference: "
            "kernels-community/megablocks v1")
    assert planned["notes"] == [line]
    proc = kf("plan", "--config", cfg, env=env)
    assert proc.returncode == 0 and proc.stdout.splitlines()[0] == line, proc.stderr

    proc = kf("build", "--config", cfg, env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "store" / "files").glob("*.whl")) == ["megablocks-1.0.1-py3-none-any.whl"]


def test_devices_and_modes_that_map_nothing_are_one_line(tf_python: Path, tmp_path: Path) -> None:
    proc = kf("plan", "--config", config(tmp_path, tf_python, modes='["training"]'), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: transformers 5.22.2 at {tf_python} maps no kernel for devices ['cpu'] and modes ['training']; its "
        "mapping has devices: cpu, cuda, mps, npu, rocm, xpu; fix 'devices' or 'modes' in [[transformers]]"]


def bare_venv(path: Path) -> Path:
    run(sys.executable, "-m", "venv", "--without-pip", path)
    return path


def test_a_transformers_without_the_mapping_is_one_line(tmp_path: Path) -> None:
    venv = bare_venv(tmp_path / "old")
    site = Path(run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"
                    ).stdout.strip())
    (site / "transformers" / "integrations").mkdir(parents=True)
    (site / "transformers" / "__init__.py").write_text('__version__ = "4.45.0"\n')
    (site / "transformers" / "integrations" / "__init__.py").write_text("")
    (site / "transformers" / "integrations" / "hub_kernels.py").write_text("# no get_kernel_mapping_transformers\n")
    proc = kf("plan", "--config", config(tmp_path, venv), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: transformers 4.45.0 at {venv} has no kernel mapping (transformers.integrations.hub_kernels."
        "get_kernel_mapping_transformers; kernels not installed); it needs a transformers with that function and a "
        "kernels it accepts (tested: transformers 5.22.2 with kernels 0.17.2), else list the kernels as [[kernel]] "
        "tables"]


def test_no_transformers_there_is_one_line(tmp_path: Path) -> None:
    venv = bare_venv(tmp_path / "empty")
    proc = kf("plan", "--config", config(tmp_path, venv), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: transformers python {venv}: no transformers there (ModuleNotFoundError: No module named "
        "'transformers'); install it there (tested: transformers 5.22.2 with kernels 0.17.2) or point 'python' at "
        "the environment that has it"]
    proc = kf("plan", "--config", config(tmp_path, tmp_path / "nope" / "python"), cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(f"error: transformers python {tmp_path / 'nope' / 'python'}: cannot run it (")
