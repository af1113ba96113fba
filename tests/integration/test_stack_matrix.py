"""The consumer matrix (issue 46): every kernels loading path, offline, against the kernels + transformers stacks
users have, on kernels kernel-factory built, indexed, served and pip-installed.

Once per run (shared by the xdist workers): the six kernels of stack_kernels.py are built by ``kernel-factory
build`` and indexed by ``kernel-factory index``; the same git repositories sit on the test Hub (olah behind the
tests' proxy, which says the two organisations are trusted publishers), where the real ``kernels lock`` of kernels
0.17.2 and of kernels 0.19.1 each write a project's kernels.lock.

Per stack (kernels + transformers in a cached venv, no torch: torch 2.13 CPU comes from the cached torch venv
through a .pth file), one app venv: the stack, kernel-factory's wheel (dist/, no deps) and the kernel wheels,
pip-installed from ``kernel-factory serve``. Per provider, a Hub cache of its own (HF_HOME), filled by
``kernel-factory download`` from either lock, or by ``local-kernels --cache``, or left empty with LOCAL_KERNELS
from ``local-kernels --shell``; huggingface_hub's ``scan_cache_dir`` reads the cache after each write. Then one
fresh interpreter, HF_HUB_OFFLINE=1, a dead Hub endpoint and kernels' digest check as it is (nothing turns it off),
runs every loading path (stack_kernels.PATHS) and says which worked. Each case asserts its one right answer: the
kernel's output (grey, relu, silu-and-mul), a forward that prints a mark (counted), the installed variant's path.

Each test writes its row to tests/.cache/stack-matrix/ and ``python scripts/stack_table.py`` prints the table
"stack -> cases that work" (docs/testing.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_server import hf_env, hub, serve_repo
from stack_kernels import CONFIG, CPU, KERNELS, MARKS, PATHS, PYPROJECT, cases_for, make_repos
from support import (
    CACHE,
    TORCH_REQ,
    built_wheel,
    cached_venv,
    clean_env,
    free_port,
    fresh_venv,
    kf,
    run,
    shared_once,
    wait_http,
)
from test_kernels_loaders import scan

pytestmark = pytest.mark.integration

# name -> (kernels, transformers); kernels 0.18.3 + transformers 5.24.0 is the third stack (CI time allowing).
STACKS = {
    "kernels 0.17.2 + transformers 5.22.2": ("0.17.2", "5.22.2"),
    "kernels 0.19.1 + transformers 5.25.0": ("0.19.1", "5.25.0"),
    "kernels 0.18.3 + transformers 5.24.0": ("0.18.3", "5.24.0"),
}
# KF_TEST_STACKS=0.17.2,0.19.1 (kernels versions) runs those stacks only, to keep CI within its time (docs/testing.md)
_ONLY = [v for v in os.environ.get("KF_TEST_STACKS", "").split(",") if v]
ALL_STACKS = STACKS
STACKS = {name: kt for name, kt in STACKS.items() if not _ONLY or kt[0] in _ONLY}
LOCKERS = ("0.17.2", "0.19.1")  # the kernels versions whose `kernels lock` writes the locks download reads
PROVIDERS = ("download, lock by kernels 0.17.2", "download, lock by kernels 0.19.1", "local-kernels --cache",
             "local-kernels --shell")
RESULTS = CACHE / "stack-matrix"


def purelib(python: Path) -> str:
    return run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()


def stack_site(kernels: str, transformers: str) -> str:
    """site-packages of a cached venv with exactly this kernels and transformers (and what they require)."""
    return purelib(cached_venv(f"stack-{kernels}-{transformers}", f"kernels=={kernels}",
                               f"transformers=={transformers}"))


def stack_venv(path: Path, kernels: str, transformers: str) -> Path:
    """A fresh venv that sees torch 2.13 CPU and the stack (.pth files), with kernel-factory's wheel (no deps)."""
    python = fresh_venv(path, torch=True)
    (Path(purelib(python)) / "zzz_stack.pth").write_text(stack_site(kernels, transformers) + "\n")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", built_wheel(), env=clean_env())
    return python


def offline_env(home: Path, **extra: str) -> dict[str, str]:
    return clean_env(HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(home), **extra)


def make_site(folder: Path, example_repos: Path, lockers: dict[str, Path]) -> None:
    """Repositories, built and indexed wheels (folder/site), and one kernels.lock per locker (folder/locks)."""
    shas = make_repos(example_repos, folder / "repos")
    (folder / "shas.json").write_text(json.dumps(shas, indent=2))
    (folder / "factory.toml").write_text(CONFIG.format(repos=folder / "repos", cpu=CPU))
    for step in ("build", "index"):
        proc = kf(step, "--config", folder / "factory.toml", "-q", cwd=folder, env=clean_env())
        assert proc.returncode == 0, proc.stdout + proc.stderr
    for repo_id, (name, _) in KERNELS.items():
        serve_repo(folder / "repos" / name, folder / "mirrors", repo_id)
    with hub(folder / "mirrors", folder / "olah", trusted=("example", "kernels-community")) as (_, proxy):
        for version, python in lockers.items():
            project = folder / "locks" / version
            project.mkdir(parents=True)
            (project / "pyproject.toml").write_text(PYPROJECT)
            script = Path(python).parent / "kernels"  # the stack venv's console script, run by the app's python
            # telemetry on (it goes to the proxy): with HF_HUB_DISABLE_TELEMETRY=1, kernels 0.17.2 sends the
            # user agent "kernels/0.17.2; hf_hub/2.4.0; python/3.11.7; " and httpx refuses its trailing space
            env = clean_env(**hf_env(proxy.url, folder / "hf" / version, {"HF_HUB_DISABLE_TELEMETRY": "0"}))
            proc = run(python, script, "lock", project, env=env, check=False)
            assert proc.returncode == 0, f"kernels {version} lock: {proc.stdout}{proc.stderr}{proxy.requests}"


@pytest.fixture(scope="session")
def stack_site_folder(example_repos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    def make(folder: Path) -> None:
        lockers = {}
        for version in LOCKERS:
            transformers = next(t for k, t in ALL_STACKS.values() if k == version)
            python = stack_venv(folder / f"locker-{version}", version, transformers)
            # the console script of the stack venv, beside the locker's python
            shutil.copy(Path(stack_site(version, transformers)).parents[2] / "bin" / "kernels",
                        python.parent / "kernels")
            lockers[version] = python
        make_site(folder, example_repos, lockers)

    return shared_once(tmp_path_factory, "stack-site", make)


@pytest.fixture(scope="session")
def index(stack_site_folder: Path) -> Iterator[str]:
    """``kernel-factory serve`` on the built site, one per worker."""
    port = free_port()
    log = open(stack_site_folder.parent / f"serve-{port}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "kernel_factory", "serve", "--out", str(stack_site_folder / "site"),
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/simple/")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def app_venv(tmp_path_factory: pytest.TempPathFactory, stack: str, index: str) -> Path:
    """The stack's app venv with the kernels pip-installed from the served index (made once per run)."""
    kernels, transformers = STACKS[stack]

    def make(folder: Path) -> None:
        python = stack_venv(folder / "venv", kernels, transformers)
        names = [repo_id.split("/")[1] for repo_id in KERNELS]
        run(python, "-m", "pip", "install", "-q", "--index-url", f"{index}/simple", *names, env=clean_env())

    return shared_once(tmp_path_factory, f"stack-app-{kernels}-{transformers}", make) / "venv" / "bin" / "python"


def lock_files(site_folder: Path) -> dict[str, bytes]:
    return {v: (site_folder / "locks" / v / "kernels.lock").read_bytes() for v in LOCKERS}


def test_both_kernels_versions_write_the_same_lock(stack_site_folder: Path) -> None:
    """kernels 0.17.2's and 0.19.1's `kernels lock` name the v<N> heads of the test Hub, byte for byte alike."""
    shas = json.loads((stack_site_folder / "shas.json").read_text())
    locks = lock_files(stack_site_folder)
    assert locks["0.17.2"] == locks["0.19.1"]
    got = {e["dependency"]["repo-id"]: (e["dependency"]["version"], e["lock"]["commit"])
           for e in json.loads(locks["0.19.1"])}
    assert got == {repo_id: (major, shas[repo_id]) for repo_id, (_, major) in KERNELS.items()}


def provide(provider: str, python: Path, home: Path, site_folder: Path, index: str, tmp: Path) -> str:
    """Fill ``home`` for ``provider``; the shell step to run before the loading script."""
    if provider.startswith("download"):
        project = tmp / "project"
        project.mkdir()
        version = provider.rsplit(" ", 1)[1]
        shutil.copy(site_folder / "locks" / version / "kernels.lock", project / "kernels.lock")
        proc = kf("download", project, "--index-url", index, "--python", python, env=clean_env(HF_HOME=str(home)))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.splitlines()[-1] == f"6 kernels in {home / 'hub'}: 6 downloaded, 0 already there"
        return "unset LOCAL_KERNELS"
    if provider == "local-kernels --cache":
        proc = run(python, "-m", "kernel_factory", "local-kernels", "--cache", "--allow-org", "example",
                   env=offline_env(home), check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return "unset LOCAL_KERNELS"
    return f'eval "$("{python}" -m kernel_factory local-kernels --shell)"'


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stack", list(STACKS))
def test_every_loading_path_offline(stack: str, provider: str, stack_site_folder: Path, index: str,
                                   tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    kernels, transformers = STACKS[stack]
    python = app_venv(tmp_path_factory, stack, index)
    shas = json.loads((stack_site_folder / "shas.json").read_text())
    home = tmp_path / "hf-home"
    cases = cases_for(provider, transformers)
    got: dict[str, str] = {}
    try:
        step = provide(provider, python, home, stack_site_folder, index, tmp_path)
        if (home / "hub").exists():
            scan(home / "hub")  # huggingface_hub reads what kernel-factory wrote: no warnings
        script = tmp_path / "paths.py"
        script.write_text(PATHS)
        locker = provider.rsplit(" ", 1)[1] if provider.startswith("download") else LOCKERS[-1]
        lock = stack_site_folder / "locks" / locker / "kernels.lock"  # the lock the provider's cache was made from
        args = json.dumps({"shas": shas, "lock": str(lock), "cases": cases, "marks": MARKS})
        proc = run("bash", "-c", f'{step} && "{python}" "{script}" \'{args}\'', env=offline_env(home), check=False,
                   cwd=tmp_path)
        got = dict(line.split("\t", 1) for line in proc.stdout.splitlines() if "\t" in line)
        assert list(got) == cases, proc.stdout + proc.stderr
    finally:
        record(stack, provider, cases, got)
    assert got == dict.fromkeys(cases, "ok")


def record(stack: str, provider: str, cases: list[str], got: dict[str, str]) -> None:
    """This test's row of the table (scripts/stack_table.py): a case that never ran counts as failed."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    row = {"stack": stack, "provider": provider,
           "cases": {c: got.get(c, "FAIL (not reached: the provider's step failed)") for c in cases}}
    name = f"{stack}--{provider}".replace(" ", "_").replace("/", "_").replace(",", "")
    tmp = RESULTS / f".{name}.{os.getpid()}"
    tmp.write_text(json.dumps(row, indent=2))
    tmp.replace(RESULTS / f"{name}.json")


@pytest.mark.parametrize("stack", list(STACKS))
def test_pip_installs_kernel_factory_beside_the_stack(stack: str, tmp_path: Path) -> None:
    """Our wheel, torch and the stack's pins resolve together in one fresh venv (pip's resolver, a dry run, with
    the package sources the cached venvs are made from)."""
    kernels, transformers = STACKS[stack]
    python = fresh_venv(tmp_path / "venv")
    report = tmp_path / "report.json"
    case = "pip install kernel-factory beside it"
    got = "FAIL (not reached)"
    try:
        proc = run(python, "-m", "pip", "install", "--dry-run", "--quiet", "--report", report, built_wheel(),
                   TORCH_REQ, f"kernels=={kernels}", f"transformers=={transformers}", check=False)
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        got = "ok" if proc.returncode == 0 else f"FAIL {last}"
        assert proc.returncode == 0, proc.stdout + proc.stderr
        picked = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
                  for i in json.loads(report.read_text())["install"]}
        assert (picked["kernels"], picked["transformers"], "kernel-factory" in picked) == (kernels, transformers, True)
    finally:
        record(stack, "pip", [case], {case: got})
