"""What users get: the built wheel installed into a FRESH venv (not editable), driven through its console script.

The main job runs end to end on the bundled example kernels: to-wheel, build, index, serve with a real
``pip install`` from it, and publish to a folder. It runs twice:

- ``TestNewest``: the wheel with its dependencies at their newest versions, as ``pipx install`` gives;
- ``TestLowest``: every Requires-Dist at its declared lower bound (``uv pip install --resolution lowest-direct``
  naming each requirement), which proves the bounds in pyproject.toml. ``make test-min`` runs it alone.

Each class's venv and store are made once per run, whichever xdist worker needs them first.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path
from typing import ClassVar

import boto3
import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from servers import PASSWORD, USER, moto_server, pypi_server, s3_env
from support import built_wheel, clean_env, free_port, fresh_venv, run, shared_once, wait_http

UV = str(Path(sys.executable).with_name("uv"))
X86 = "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"

CONFIG = """
[factory]
store = "store"
jobs = 2

[[kernel]]
repo = "{repos}/img2grey"
repo-id = "kernels-community/img2grey"
tags = ">=1.1.0,<2"

[[kernel]]
repo = "{repos}/pyonly"
tags = ">=0.2"
"""


def requirements(wheel: Path) -> list[Requirement]:
    """The wheel's Requires-Dist entries that apply here (no extras, markers true)."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        headers = HeaderParser().parsestr(zf.read(meta).decode())
    reqs = [Requirement(r) for r in headers.get_all("Requires-Dist") or []]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def lower_bound(req: Requirement) -> Version:
    bounds = [Version(s.version) for s in req.specifier if s.operator == ">="]
    assert len(bounds) == 1, f"{req}: every dependency needs exactly one >= lower bound"
    return bounds[0]


# Each venv and store is made once per test run and shared by the xdist workers (support.shared_once), so the
# two classes' tests may run on any worker without installing or building again.
@pytest.fixture
def venv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the built wheel and its dependencies, resolved the test class's way; its bin folder."""
    resolution: str = request.cls.resolution

    def make(folder: Path) -> None:
        python = fresh_venv(folder / "venv")
        wheel = built_wheel()
        named = [str(r) for r in requirements(wheel)] if resolution == "lowest-direct" else []
        run(UV, "pip", "install", "-q", "--python", python, "--resolution", resolution, wheel, *named,
            env=clean_env())

    return shared_once(tmp_path_factory, f"venv-{resolution}", make) / "venv" / "bin"


@pytest.fixture
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = shared_once(tmp_path_factory, f"home-{request.cls.resolution}", lambda folder: None)
    return clean_env(HOME=str(home), HF_HOME=str(home / "hf"), HF_HUB_OFFLINE="1")


@pytest.fixture
def store(request: pytest.FixtureRequest, venv: Path, env: dict[str, str], example_repos: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`build` then `index` from a factory.toml, through the installed console script."""
    def make(work: Path) -> None:
        (work / "factory.toml").write_text(CONFIG.format(repos=example_repos))
        run(venv / "kernel-factory", "build", "--config", work / "factory.toml", cwd=work, env=env)
        run(venv / "kernel-factory", "index", "--config", work / "factory.toml", cwd=work, env=env)

    return shared_once(tmp_path_factory, f"store-{request.cls.resolution}", make) / "store"


class InstalledFlow:
    """The end-to-end steps; subclasses pick how the wheel's dependencies resolve."""

    resolution: ClassVar[str]

    def test_installed_versions(self, venv: Path) -> None:
        """The console script runs from the fresh venv; at lowest-direct, each dependency sits at its bound."""
        out = run(venv / "python", "-c", "import kernel_factory, sys; print(kernel_factory.__file__)").stdout
        assert out.startswith(str(venv.parent)), out  # the installed package, not this checkout
        assert run(venv / "kernel-factory", "--version").stdout.startswith("kernel-factory ")
        if self.resolution != "lowest-direct":
            return
        reqs = requirements(built_wheel())
        names = [r.name for r in reqs]
        have = run(venv / "python", "-c", f"import importlib.metadata as m; print(*(m.version(n) for n in {names!r}))")
        installed = dict(zip(names, have.stdout.split(), strict=True))
        wrong = {r.name: (str(lower_bound(r)), installed[r.name]) for r in reqs
                 if Version(installed[r.name]) != lower_bound(r)}
        assert wrong == {}, f"declared lower bound vs installed (raise the bound in pyproject.toml): {wrong}"

    def test_to_wheel(self, venv: Path, env: dict[str, str], example_repos: Path, tmp_path: Path) -> None:
        proc = run(venv / "kernel-factory", "to-wheel", example_repos / "img2grey", "1.1.2",
                   "--variants", "*-cpu-x86_64-linux", "-o", tmp_path, env=env)
        assert sorted(p.name for p in tmp_path.iterdir()) == [X86], proc.stderr

    def test_serve_then_pip_install(self, venv: Path, env: dict[str, str], store: Path, tmp_path: Path) -> None:
        files = sorted(p.name for p in (store / "files").glob("*.whl"))
        assert X86 in files and any(f.startswith("pyonly-") for f in files), files
        port = free_port()
        with open(tmp_path / "serve.log", "w") as log:
            server = subprocess.Popen([str(venv / "kernel-factory"), "serve", "--out", str(store),
                                       "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_http(f"http://127.0.0.1:{port}/simple/")
            client = fresh_venv(tmp_path / "client")
            run(client, "-m", "pip", "install", "-q", "--no-deps", "--no-cache-dir",
                "--index-url", f"http://127.0.0.1:{port}/simple", "img2grey==1.1.2+torch213cpucxx11",
                env=clean_env())
            got = run(client, "-c", "import importlib.metadata as m; print(m.version('img2grey'))").stdout.strip()
            assert got == "1.1.2+torch213cpucxx11"
        finally:
            server.terminate()
            server.wait(10)

    def test_publish_to_folder(self, venv: Path, env: dict[str, str], store: Path, tmp_path: Path) -> None:
        dest = tmp_path / "www"
        run(venv / "kernel-factory", "publish", "--store", store, "--to", dest, env=env)
        visible = sorted(str(p.relative_to(store)) for p in store.rglob("*")
                         if p.is_file() and not any(part.startswith(".") for part in p.relative_to(store).parts))
        published = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
        assert published == visible and "simple/index.html" in published
        assert all((dest / rel).read_bytes() == (store / rel).read_bytes() for rel in published)

    def test_publish_to_s3_and_an_upload_endpoint(self, venv: Path, env: dict[str, str], store: Path,
                                                  tmp_path: Path) -> None:
        """The other destinations, so their libraries (boto3, botocore, twine, requests, keyring) run too."""
        wheels = sorted(p.name for p in (store / "files").glob("*.whl"))
        with moto_server(tmp_path) as endpoint:
            s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
            s3.create_bucket(Bucket="kernels")
            run(venv / "kernel-factory", "publish", "-q", "--store", store, "--to", "s3://kernels/idx",
                env={**env, **s3_env(endpoint)})
            keys = {o["Key"] for o in s3.list_objects_v2(Bucket="kernels", Prefix="idx/")["Contents"]}
        assert {f"idx/files/{w}" for w in wheels} | {"idx/simple/index.html", "idx/index.html"} <= keys
        with pypi_server(tmp_path) as url:
            run(venv / "kernel-factory", "publish", "--store", store, "--to", url,
                env={**env, "TWINE_USERNAME": USER, "TWINE_PASSWORD": PASSWORD,
                     "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"})
        assert sorted(p.name for p in (tmp_path / "pypi-packages").iterdir()) == wheels


class TestNewest(InstalledFlow):
    resolution = "highest"


class TestLowest(InstalledFlow):
    resolution = "lowest-direct"
