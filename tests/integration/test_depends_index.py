"""``download`` and ``kernel-depends``, as kernels 0.19.1 resolves them: transitive dependencies, a dependency at a
revision, the allow list, the cap, a cycle.

Pure-Python kernels made here (nested torch-universal builds whose metadata.json names their dependencies),
built and indexed by kernel-factory and served by ``python -m http.server``; the cache is read by kernels 0.19.1
in a fresh venv with torch 2.13 CPU, offline.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import cached_venv, clean_env, fresh_venv, http_server, kf, run
from test_download import b64sha, git_repo, leftovers, sha_of

pytestmark = pytest.mark.integration

# name -> its kernel-depends ("PYONLY" stands for pyonly's v0.2.0 commit)
KERNELS: dict[str, list[dict[str, Any]]] = {
    "pydep": [{"repo-id": "example/pyonly", "version": 0}],
    "chain": [{"repo-id": "example/pydep", "version": 0}],
    "revdep": [{"repo-id": "example/pyonly", "revision": "PYONLY"}],
    "lure": [{"repo-id": "outside/thing", "version": 1}],
    "cyca": [{"repo-id": "example/cycb", "version": 0}],
    "cycb": [{"repo-id": "example/cyca", "version": 0}],
}


def make_kernel(repos: Path, folder: Path, name: str, depends: list[dict[str, Any]]) -> None:
    """example/<name> 0.1.0: torch-universal, nested layout, version 0, with these kernel-depends."""
    code = f'"""example/{name}."""\n\n\ndef ident(x):\n    return x\n'
    variant = folder / "build" / "torch-universal"
    (variant / name).mkdir(parents=True)
    (variant / name / "__init__.py").write_text(code)
    meta = json.loads((repos / "pyonly" / "build" / "torch-universal" / "metadata.json").read_text())
    meta.update(name=name, id=f"_{name}_0000001", source=f"https://github.com/example/{name}/tree/v0.1.0",
                upstream=f"https://github.com/example/{name}", version=0)
    meta["kernel-depends"] = depends
    meta["digest"] = {"algorithm": "sha256", "files": {f"{name}/__init__.py": b64sha(code.encode())}}
    (variant / "metadata.json").write_text(json.dumps(meta, indent=2))
    (folder / "README.md").write_text(f"# {name}\n")
    git_repo(folder, "v0.1.0")


@pytest.fixture(scope="module")
def site(example_repos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("depends")
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    config = ['[factory]\nstore = "site"\njobs = 1\n',
              f'[[kernel]]\nrepo = "{example_repos}/pyonly"\nrepo-id = "example/pyonly"\ntags = ">=0.2"\n']
    for name, depends in KERNELS.items():
        make_kernel(example_repos, tmp / name, name, json.loads(json.dumps(depends).replace("PYONLY", pyonly)))
        config.append(f'[[kernel]]\nrepo = "{tmp / name}"\nrepo-id = "example/{name}"\ntags = ">=0.1"\n')
    (tmp / "factory.toml").write_text("\n".join(config))
    for args in (("build",), ("index",)):
        proc = kf(*args, "--config", tmp / "factory.toml", "-q", env=clean_env())
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp / "site"


@pytest.fixture(scope="module")
def index(site: Path) -> Iterator[str]:
    with http_server(site) as url:
        yield url


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with torch 2.13 CPU and kernels 0.19.1."""
    python = fresh_venv(tmp_path_factory.mktemp("venv") / "venv", torch=True)
    kernels = cached_venv("kernels-0.19.1", "kernels==0.19.1")
    kernels_site = run(kernels, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    (Path(site) / "zzz_kernels.pth").write_text(kernels_site + "\n")
    return python


def lock(project: Path, site: Path, *names: str) -> None:
    project.mkdir()
    (project / "kernels.lock").write_text(json.dumps([
        {"dependency": {"repo-id": f"example/{n}", "version": 0}, "lock": {"commit": sha_of(site.parent, n, "v0.1.0")}}
        for n in names]))


def download(project: Path, index: str, python: Path, cache: Path, *flags: str, **env: str
             ) -> subprocess.CompletedProcess[str]:
    return kf("download", project, "--index-url", index, "--python", python, *flags,
              env=clean_env(KERNELS_CACHE=str(cache), **env))


LOAD = """
import sys
from kernels import get_kernel
print(get_kernel(sys.argv[1], version=0).ident(7))
"""


def load(python: Path, cache: Path, tmp: Path, repo_id: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", KERNELS_CACHE=str(cache),
                    HF_HOME=str(tmp / "hf-home"))
    return run(python, "-c", LOAD, repo_id, cwd=tmp, env=env, check=False)


def test_transitive_dependencies_load_offline_with_kernels_0191(
    example_repos: Path, site: Path, index: str, app: Path, tmp_path: Path
) -> None:
    lock(tmp_path / "project", site, "chain")
    cache = tmp_path / "cache"
    proc = download(tmp_path / "project", index, app, cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == f"3 kernels in {cache}: 3 downloaded, 0 already there"
    for name, sha in (("chain", sha_of(site.parent, "chain", "v0.1.0")), ("pydep", sha_of(site.parent, "pydep",
                      "v0.1.0")), ("pyonly", sha_of(example_repos, "pyonly", "v0.2.0"))):
        assert (cache / f"kernels--example--{name}" / "refs" / "v0").read_text() == sha
    loaded = load(app, cache, tmp_path, "example/chain")
    assert loaded.stdout.strip() == "7", loaded.stderr


def test_a_dependency_at_a_revision_is_placed_at_that_commit(
    example_repos: Path, site: Path, index: str, app: Path, tmp_path: Path
) -> None:
    lock(tmp_path / "project", site, "revdep")
    cache = tmp_path / "cache"
    pyonly = sha_of(example_repos, "pyonly", "v0.2.0")
    proc = download(tmp_path / "project", index, app, cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-2:] == [
        f"example/pyonly  {pyonly[:12]}  torch-universal  pyonly-0.2.0-py3-none-any.whl  (downloaded)",
        f"2 kernels in {cache}: 2 downloaded, 0 already there"]
    assert not (cache / "kernels--example--pyonly" / "refs").exists()  # a commit needs no ref
    loaded = load(app, cache, tmp_path, "example/revdep")
    assert loaded.stdout.strip() == "7", loaded.stderr


def test_more_dependencies_than_the_cap_install_nothing(site: Path, index: str, app: Path, tmp_path: Path) -> None:
    lock(tmp_path / "project", site, "chain")
    cache = tmp_path / "cache"
    proc = download(tmp_path / "project", index, app, cache, "--max-depends", "1")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "error: kernel-depends pull in more than 1 kernels beyond kernels.lock (example/pydep, example/pyonly); "
        "raise --max-depends if you trust them all",
        f"nothing was installed in {cache}"]
    assert not cache.exists() or leftovers(cache) == []


def test_a_dependency_of_an_organisation_not_allowed_is_refused(
    site: Path, index: str, app: Path, tmp_path: Path
) -> None:
    lock(tmp_path / "project", site, "lure")
    cache = tmp_path / "cache"
    proc = download(tmp_path / "project", index, app, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "error: outside/thing (kernel-depends of example/lure): the organisation outside is not allowed into the Hub "
        "cache; add --allow-org outside (or KERNEL_FACTORY_ALLOW_ORGS) if you trust it",
        f"nothing was installed in {cache}"]
    assert not cache.exists() or leftovers(cache) == []


def test_a_given_allow_list_applies_to_the_locked_repositories(
    site: Path, index: str, app: Path, tmp_path: Path
) -> None:
    lock(tmp_path / "project", site, "pydep")
    cache = tmp_path / "cache"
    proc = download(tmp_path / "project", index, app, cache, KERNEL_FACTORY_ALLOW_ORGS="kernels-community")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "error: example/pydep (kernels.lock): the organisation example is not allowed into the Hub cache; add "
        "--allow-org example (or KERNEL_FACTORY_ALLOW_ORGS) if you trust it")
    assert not cache.exists() or leftovers(cache) == []
    again = download(tmp_path / "project", index, app, cache, "--allow-org", "example",
                     KERNEL_FACTORY_ALLOW_ORGS="kernels-community")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == f"2 kernels in {cache}: 2 downloaded, 0 already there"


def test_a_cycle_is_refused_as_kernels_refuses_it(site: Path, index: str, app: Path, tmp_path: Path) -> None:
    lock(tmp_path / "project", site, "cyca")
    cache = tmp_path / "cache"
    proc = download(tmp_path / "project", index, app, cache)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    a = sha_of(site.parent, "cyca", "v0.1.0")
    assert proc.stderr.splitlines() == [
        f"error: kernel-depends form a cycle, example/cyca ({a[:12]}) -> example/cycb (v0) -> example/cyca ({a[:12]}), "
        "which kernels refuses to load (Cyclic kernel dependency detected); fix the kernels' metadata",
        f"nothing was installed in {cache}"]
