"""Mirror an organisation: ``repo = "kernels-community/*"`` against the test Hub (olah, with the organisation
listing the Hub answers at /api/kernels?author=ORG). Two repositories, a build; a third appears (and one that
``exclude`` leaves out); the next build builds only the third."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import Proxy, hf_env, hub, make_kernel_repo, serve_repo
from kernel_factory.cli import main
from kernel_factory.errors import EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.integration
ORG = "kernels-community"
CONFIG = f"""[factory]
store = "public"

[[kernel]]
repo = "{ORG}/*"
exclude = ["{ORG}/skip-*"]
versions = [1]
"""


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("org-repos")
    for name in ("relu", "gelu", "silu", "skip-me"):
        make_kernel_repo(out / name, module=name.replace("-", ""), variants=("torch-universal",))
    return out


@pytest.fixture
def served(repos: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proxy, Path]]:
    """A Hub of each test's own (one test adds repositories to it)."""
    root = tmp_path_factory.mktemp("org-hub")
    mirrors = root / "mirrors"
    for name in ("relu", "gelu"):
        serve_repo(repos / name, mirrors, f"{ORG}/{name}")
    serve_repo(repos / "relu", mirrors, "other-org/relu")  # another organisation: never listed
    with hub(mirrors, root / "olah", listing=True) as (_, proxy):
        yield proxy, mirrors


def plan(capsys: pytest.CaptureFixture[str]) -> dict[str, list[dict[str, str]]]:
    capsys.readouterr()
    assert main(["plan", "--json"]) == EXIT_OK
    data: dict[str, list[dict[str, str]]] = json.loads(capsys.readouterr().out)
    return data


def test_org_glob_picks_up_new_repositories(served: tuple[Proxy, Path], repos: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    proxy, mirrors = served
    for key, value in hf_env(proxy.url, tmp_path / "hf").items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "factory.toml").write_text(CONFIG)

    assert sorted(j["repo"] for j in plan(capsys)["build"]) == [f"{ORG}/gelu", f"{ORG}/relu"]
    assert main(["build", "--jobs", "1"]) == EXIT_OK
    assert sorted(p.name for p in (tmp_path / "public" / "files").glob("*.whl")) == [
        "gelu-1.0.1-py3-none-any.whl", "relu-1.0.1-py3-none-any.whl"]

    serve_repo(repos / "silu", mirrors, f"{ORG}/silu")  # appears on the Hub between two runs
    serve_repo(repos / "skip-me", mirrors, f"{ORG}/skip-me")  # and one that exclude leaves out
    again = plan(capsys)
    assert [j["repo"] for j in again["build"]] == [f"{ORG}/silu"]
    assert sorted(j["repo"] for j in again["in_store"]) == [f"{ORG}/gelu", f"{ORG}/relu"]
    capsys.readouterr()
    assert main(["build", "--jobs", "1"]) == EXIT_OK
    assert "plan: 1 to build, 2 already in the store, 0 refused" in capsys.readouterr().err
    assert (tmp_path / "public" / "files" / "silu-1.0.1-py3-none-any.whl").is_file()


def test_glob_config_errors(served: tuple[Proxy, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    proxy, _ = served
    for key, value in hf_env(proxy.url, tmp_path / "hf").items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    for kernel, message in (
        ('repo = "kernels-community/relu"\nexclude = ["x"]', "'exclude' goes with a glob repo"),
        ('repo = "kernels-*/relu"', "names one Hub organisation"),
        ('repo = "kernels-community/nothing-*"', "no kernel repository on the Hub matches"),
    ):
        (tmp_path / "factory.toml").write_text(f"[[kernel]]\n{kernel}\nversions = [1]\n")
        capsys.readouterr()
        assert main(["plan"]) == EXIT_USAGE
        assert message in capsys.readouterr().err
