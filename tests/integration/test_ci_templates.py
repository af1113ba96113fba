"""The CI and deployment templates, run as written (tests/integration/ci_runner.py says how):

- .github/workflows/kernels.yml: four shards into an s3:// store on moto, then index and publish the pages;
- examples/ci/gitlab-ci.yml: the same into S3, or the wheels uploaded to pypiserver (the upload endpoint of
  Artifactory and Nexus);
- examples/docker/Dockerfile: its build steps install the kernels from a local index, its entrypoint runs
  code calling get_kernel with HF_HUB_OFFLINE=1 and no Hub to reach.

Also: zizmor finds nothing in any workflow (offline, default settings) and both templates are valid against
check-jsonschema's built-in GitHub and GitLab schemas (they ship inside the package: no network).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import kernel_factory
import pytest
from ci_runner import base_env, deps_folder, load, run_dockerfile, run_github, run_gitlab, runner_venv
from servers import PASSWORD, USER, moto_server, page_links, pypi_server, s3_env
from support import ROOT, clean_env, http_server, kf

WORKFLOW = ROOT / ".github" / "workflows" / "kernels.yml"
GITLAB = ROOT / "examples" / "ci" / "gitlab-ci.yml"
DOCKERFILE = ROOT / "examples" / "docker" / "Dockerfile"
BIN = Path(sys.executable).parent

CONFIG = """
[factory]
allow-orgs = ["kernels-community"]

[[kernel]]
repo = "{repos}/img2grey"
repo-id = "kernels-community/img2grey"
tags = ">=1.1.2"

[[kernel]]
repo = "{repos}/relu-nested"
repo-id = "kernels-community/relu-nested"
versions = [1]
"""
WHEELS = 4  # img2grey 1.1.2 in three variants, relu-nested 1.0.2


# --- lint: zizmor and the schemas -------------------------------------------------------------------------------

def test_zizmor_finds_nothing_in_any_workflow() -> None:
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
    assert WORKFLOW in workflows
    proc = subprocess.run([BIN / "zizmor", "--offline", "--no-progress", "--format", "plain", *workflows],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr


@pytest.mark.parametrize(("schema", "path"), [("vendor.github-workflows", WORKFLOW), ("vendor.gitlab-ci", GITLAB)])
def test_template_is_valid_against_its_schema(schema: str, path: Path) -> None:
    proc = subprocess.run([BIN / "check-jsonschema", "--builtin-schema", schema, path],
                          capture_output=True, text=True, timeout=120, env=clean_env(NO_COLOR="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_templates_pin_what_they_install() -> None:
    """Actions by full commit SHA with the release in a comment; kernel-factory at the version this tree is."""
    for line in WORKFLOW.read_text().splitlines():
        if "uses:" in line:
            ref = line.split("uses:", 1)[1].split("@", 1)[1]
            sha, _, comment = ref.partition(" # v")
            assert len(sha) == 40 and all(c in "0123456789abcdef" for c in sha) and comment, line
    versions = [load(WORKFLOW)["env"]["KERNEL_FACTORY_VERSION"], load(GITLAB)["variables"]["KERNEL_FACTORY_VERSION"]]
    versions += [line.split("=", 1)[1] for line in DOCKERFILE.read_text().splitlines()
                 if line.startswith("ARG KERNEL_FACTORY_VERSION=")]
    assert versions == [kernel_factory.__version__] * 3, "bump KERNEL_FACTORY_VERSION in the templates"


# --- shared fixtures --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def venv_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("ci-runner")
    return runner_venv(tmp / "venv", deps_folder(tmp / "deps"))


@pytest.fixture
def workspaces(example_repos: Path, tmp_path: Path) -> Callable[[str], Path]:
    """A new checkout (a folder holding factory.toml) per job; the index job's public/ passes on as an artifact."""
    counter = itertools.count()
    config = CONFIG.format(repos=example_repos)

    def make(job: str) -> Path:
        path = tmp_path / f"job-{next(counter)}-{job}"
        path.mkdir()
        (path / "factory.toml").write_text(config)
        index_out = tmp_path / "artifact-public"
        if job.startswith("publish") and index_out.is_dir():
            (path / "public").symlink_to(index_out)
        return path

    return make


def keep_artifact(log_dir: Path) -> None:
    """GitLab's `artifacts: paths: [public/]` of the index job (the last job folder with a public/)."""
    public = sorted(log_dir.glob("job-*-index/public"))[-1]
    (log_dir / "artifact-public").symlink_to(public)


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    with moto_server(tmp_path) as url:
        client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                              aws_secret_access_key="testing")
        client.create_bucket(Bucket="kernels")
        yield url, client


def keys(s3: Any, prefix: str = "public") -> set[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="kernels", Prefix=prefix + "/")
    return {obj["Key"].removeprefix(prefix + "/") for page in pages for obj in page.get("Contents", [])}


def assert_published_site(s3: Any) -> None:
    published = keys(s3)
    assert len([k for k in published if k.endswith(".whl")]) == WHEELS
    for key in published:
        if key.endswith(".html"):
            body = s3.get_object(Bucket="kernels", Key=f"public/{key}")["Body"].read().decode()
            local = [link for link in page_links(key, body) if "://" not in link]  # Hub and source links aside
            missing = [link for link in local if link not in published]
            assert not missing, f"{key} links missing objects {missing}"
    assert "variants/torch213cpucxx11/simple/relu-nested/index.html" in published


# --- GitHub Actions ---------------------------------------------------------------------------------------------

def test_github_workflow_shards_into_s3_then_indexes_and_publishes(
    s3: tuple[str, Any], venv_bin: Path, workspaces: Callable[[str], Path]
) -> None:
    url, client = s3
    env = base_env(venv_bin)
    wf = WORKFLOW.read_text().replace("STORE: s3://my-kernel-index/public", "STORE: s3://kernels/public")
    assert "s3://kernels/public" in wf  # what a user does: set STORE
    workflow = workspaces("workflow") / "kernels.yml"
    workflow.write_text(wf)
    secrets = {"AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/kernels", "HF_TOKEN": ""}
    aws = {**s3_env(url), "AWS_REGION": "us-east-1"}

    log = run_github(workflow, workspaces, env, secrets, aws)
    shards = [s.job for s in log.steps if s.name.startswith("build shard")]
    assert shards == [f"build{{'shard': '{k}'}}" for k in range(1, 5)], shards
    publish = log.out("publish")
    assert "files/" not in publish.split("(dry run)")[-1]  # the wheels were there already: only pages went up
    assert_published_site(client)

    again = run_github(workflow, workspaces, env, secrets, aws, only={"publish"})  # nothing new
    assert "uploaded 0 files" in again.out("publish"), again.out("publish")


# --- GitLab CI --------------------------------------------------------------------------------------------------

def gitlab_variables(url: str, *, oidc: bool, **extra: str) -> dict[str, str]:
    """The project's CI/CD variables: an OIDC role (no AWS key at all), or an access key pair."""
    aws = s3_env(url)
    if oidc:  # the template's before_script hands GitLab's ID token to boto3, which asks moto's STS
        del aws["AWS_ACCESS_KEY_ID"], aws["AWS_SECRET_ACCESS_KEY"]
        aws["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/kernels"
    return {"CI_PIPELINE_SOURCE": "schedule", "CI_PROJECT_ID": "7", "STORE": "s3://kernels/public", **aws, **extra}


def test_gitlab_template_shards_into_s3_then_publishes_to_s3_or_a_pypi_repository(
    s3: tuple[str, Any], venv_bin: Path, workspaces: Callable[[str], Path], tmp_path: Path
) -> None:
    url, client = s3
    doc = load(GITLAB)
    assert len(doc["build"]["parallel"]["matrix"][0]["SHARD"]) == int(doc["variables"]["N_SHARDS"])
    env = base_env(venv_bin)

    def workspace(job: str) -> Path:
        if job == "publish-s3":
            keep_artifact(tmp_path)
        return workspaces(job)

    log = run_gitlab(GITLAB, workspace, env, gitlab_variables(url, oidc=True))
    jobs = [s.job for s in log.steps]
    assert jobs == [*(f"build{{'SHARD': '{k}'}}" for k in range(1, 5)), "index", "publish-s3"], jobs
    assert_published_site(client)

    # PUBLISH_TO=pypi: the wheels of the same store go to the upload endpoint (pypiserver here).
    with pypi_server(tmp_path) as endpoint:
        variables = gitlab_variables(url, oidc=False, PUBLISH_TO="pypi", PYPI_UPLOAD_URL=endpoint, TWINE_USERNAME=USER,
                                     TWINE_PASSWORD=PASSWORD)
        log = run_gitlab(GITLAB, workspaces, env, variables, only={"publish-pypi"})
        assert [s.job for s in log.steps] == ["publish-pypi"]
        uploaded = sorted(p.name for p in (tmp_path / "pypi-packages").iterdir())
        assert uploaded == sorted(k.removeprefix("files/") for k in keys(client) if k.endswith(".whl"))
        assert len(uploaded) == WHEELS and PASSWORD not in log.out("publish-pypi")
        again = run_gitlab(GITLAB, workspaces, env, variables, only={"publish-pypi"})  # the endpoint has them all
        assert "uploaded 0 files" in again.out("publish-pypi"), again.out("publish-pypi")


# --- Dockerfile -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kernel_index(example_repos: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A kernel index holding img2grey 1.1.2 (kernels-community/img2grey), served by http.server."""
    tmp = tmp_path_factory.mktemp("kernel-index")
    config = CONFIG.format(repos=example_repos).replace("[factory]\n", '[factory]\nstore = "site"\n')
    (tmp / "factory.toml").write_text(config)
    for args in (("build", "--jobs", "1"), ("index",)):
        proc = kf(*args, "--config", tmp / "factory.toml", env=clean_env())
        assert proc.returncode == 0, proc.stderr
    with http_server(tmp / "site") as url:
        yield url


def test_dockerfile_installs_kernels_at_build_time_and_runs_offline(kernel_index: str, tmp_path: Path) -> None:
    venv_bin = runner_venv(tmp_path / "venv", deps_folder(tmp_path / "deps"))  # the base image: nothing installed
    env = base_env(venv_bin, HF_HOME=str(tmp_path / "hf-home"))
    del env["PIP_NO_INDEX"]  # the image's pip reads the index its PIP_INDEX_URL build arg names
    image = tmp_path / "image"
    image.mkdir()
    build, docker_run = run_dockerfile(DOCKERFILE, image, env, {
        "KERNEL_INDEX_URL": kernel_index, "PIP_INDEX_URL": f"{kernel_index}/simple"})
    installed = build.steps[-1].stdout
    site = subprocess.run([venv_bin / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert f"export LOCAL_KERNELS=kernels-community/img2grey={site}/img2grey\n" in installed, installed
    assert "1 of 1 installed kernels would load" in installed
    assert not (Path(site) / "kernel_factory").exists()  # only needed while building

    # docker run: no Hub (a dead port), an empty Hub cache, HF_HUB_OFFLINE=1 from the Dockerfile's ENV.
    proc = docker_run(HF_ENDPOINT="http://127.0.0.1:9")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == f"img2grey (4, 5) from {site}/img2grey/__init__.py\n"

    # The same code without the entrypoint's LOCAL_KERNELS: offline, nothing to load.
    bare = docker_run("sh", "-c", f"unset LOCAL_KERNELS; exec python {image}/opt/app/app.py")
    assert bare.returncode != 0 and "offline" in bare.stderr.lower(), bare.stderr


def test_docker_readme_names_every_file_the_dockerfile_copies() -> None:
    readme = (DOCKERFILE.parent / "README.md").read_text()
    copied = [w for line in DOCKERFILE.read_text().splitlines() if line.startswith("COPY")
              for w in line.split()[1:-1]]
    assert copied and all(name in readme for name in copied), copied
