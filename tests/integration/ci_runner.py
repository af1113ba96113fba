"""Run the steps of the CI and deployment templates (GitHub workflow, GitLab CI, Dockerfile) on this machine.

Each template is read as written and its shell steps run in a fresh virtual environment, the way a runner
would run them; only what needs the outside world is stood in for: ``actions/checkout`` is the job's
working folder holding factory.toml, ``setup-python`` and the job image are the fresh venv (first on PATH),
``configure-aws-credentials`` and CI/CD variables are the credentials of a moto server, and pip finds
kernel-factory in ``dist/`` (the wheel ``make install`` built) with no index. The venv sees kernel-factory's
dependencies (torch and the kernels library included) through a .pth file naming a folder of links to this
test venv's site-packages, kernel-factory itself left out, so the templates' own
``pip install "kernel-factory==VERSION"`` is what installs it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from support import built_wheel, clean_env, fresh_venv, run

EXPR = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")


def deps_folder(out: Path) -> Path:
    """Links to every entry of this venv's site-packages except kernel-factory's own."""
    site = Path(sysconfig.get_paths()["purelib"])
    out.mkdir(parents=True)
    for entry in site.iterdir():
        if entry.name.startswith(("kernel_factory", "__editable__")) or entry.suffix == ".pth":
            continue
        (out / entry.name).symlink_to(entry)
    return out


def runner_venv(path: Path, deps: Path) -> Path:
    """A fresh venv (recent pip, nothing else installed) that sees ``deps``; returns its bin folder."""
    python = fresh_venv(path)
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    (Path(site) / "zz_ci_deps.pth").write_text(f"{deps}\n")
    return python.parent


def base_env(venv_bin: Path, **extra: str) -> dict[str, str]:
    """A runner's environment: the venv first on PATH, pip finding kernel-factory in dist/ only."""
    env = clean_env(
        PATH=f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
        VIRTUAL_ENV=str(venv_bin.parent),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(built_wheel().parent),
    )
    env.update(extra)
    return env


@dataclass
class Step:
    job: str
    name: str
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Log:
    steps: list[Step] = field(default_factory=list)

    def add(self, job: str, name: str, proc: subprocess.CompletedProcess[str]) -> None:
        step = Step(job, name, proc.returncode, proc.stdout, proc.stderr)
        self.steps.append(step)
        assert proc.returncode == 0, f"{job}: {name} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"

    def out(self, job: str) -> str:
        return "".join(s.stdout for s in self.steps if s.job == job)


#: (PATH, line) of the pip installs already done: the jobs share one venv, so a repeat is a no-op (of ~3 s).
_INSTALLED: set[tuple[str, str]] = set()


def sh(script: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``script`` in bash as runners run it, minus pip install lines this venv has already run."""
    lines = script.splitlines()
    done = {line for line in lines if line.startswith("python -m pip install ") and (env["PATH"], line) in _INSTALLED}
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           "\n".join(line for line in lines if line not in done) or "true"],
                          cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=600)
    if proc.returncode == 0:
        _INSTALLED.update((env["PATH"], line) for line in lines if line.startswith("python -m pip install "))
    return proc


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


# --- GitHub Actions ---------------------------------------------------------------------------------------------

def _expand(text: str, ctx: Mapping[str, Mapping[str, str]]) -> str:
    def one(m: re.Match[str]) -> str:
        scope, _, name = m.group(1).partition(".")
        assert scope in ctx and name in ctx[scope], f"the test runner cannot evaluate ${{{{ {m.group(1)} }}}}"
        return ctx[scope][name]

    return EXPR.sub(one, text)


def _job_order(jobs: Mapping[str, Any]) -> list[str]:
    order: list[str] = []
    while len(order) < len(jobs):
        for name, job in jobs.items():
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            if name not in order and all(n in order for n in needs):
                order.append(name)
    return order


def run_github(workflow: Path, workspace: Callable[[str], Path], env: Mapping[str, str],
               secrets: Mapping[str, str], aws: Mapping[str, str], only: set[str] | None = None) -> Log:
    """Every job of ``workflow`` (or those in ``only``) in ``needs`` order, every matrix entry, every step.

    ``workspace(job)`` gives a new folder holding the checkout; ``aws`` is what configure-aws-credentials
    exports; ``env`` is the runner's environment.
    """
    wf = load(workflow)
    log = Log()
    wf_env = {k: str(v) for k, v in (wf.get("env") or {}).items()}
    for name in _job_order(wf["jobs"]):
        if only is not None and name not in only:
            continue
        job = wf["jobs"][name]
        matrix = (job.get("strategy") or {}).get("matrix") or {}
        keys = list(matrix)
        assert len(keys) <= 1, "the test runner expands one matrix axis"
        entries = [{keys[0]: str(v)} for v in matrix[keys[0]]] if keys else [{}]
        for entry in entries:
            ctx: dict[str, dict[str, str]] = {"matrix": entry, "secrets": dict(secrets), "env": dict(wf_env)}
            job_env = {**env, **wf_env, **{k: _expand(str(v), ctx) for k, v in (job.get("env") or {}).items()}}
            cwd = workspace(name)
            label = f"{name}{entry or ''}"
            for step in job["steps"]:
                uses = step.get("uses", "")
                if uses.startswith("aws-actions/configure-aws-credentials@"):
                    job_env.update(aws)
                elif uses and not uses.startswith(("actions/checkout@", "actions/setup-python@")):
                    raise AssertionError(f"the test runner does not stand in for {uses}")
                if "run" not in step:
                    continue
                ctx["env"] = {k: v for k, v in job_env.items() if k in wf_env or k in (job.get("env") or {})}
                step_env = {k: _expand(str(v), ctx) for k, v in (step.get("env") or {}).items()}
                script = _expand(step["run"], ctx)
                log.add(label, _expand(step.get("name", script), ctx), sh(script, cwd, {**job_env, **step_env}))
    return log


# --- GitLab CI --------------------------------------------------------------------------------------------------

def _resolve(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    job = dict(doc[name])
    parents = job.pop("extends", [])
    merged: dict[str, Any] = {}
    for parent in [parents] if isinstance(parents, str) else parents:
        merged.update(_resolve(doc, parent))
    merged.update(job)
    return merged


def _rule_holds(rule: Mapping[str, Any], variables: Mapping[str, str]) -> bool:
    m = re.fullmatch(r'\$(\w+) == "([^"]*)"', rule["if"])
    assert m, f"the test runner evaluates only `$VAR == \"value\"` rules, not {rule['if']!r}"
    return variables.get(m.group(1), "") == m.group(2)


def _runs(rules: list[Mapping[str, Any]] | None, variables: Mapping[str, str]) -> bool:
    return rules is None or any(_rule_holds(r, variables) for r in rules)


def run_gitlab(template: Path, workspace: Callable[[str], Path], env: Mapping[str, str],
               ci_variables: Mapping[str, str], only: set[str] | None = None) -> Log:
    """Every job of the GitLab CI ``template`` whose rules hold (of those in ``only``), stage by stage, each
    matrix entry.

    ``ci_variables`` are the project's CI/CD variables and the predefined ones; they override the template's
    ``variables`` as GitLab's do. Artifacts pass from job to job through ``workspace`` (the test's choice).
    """
    doc = load(template)
    variables = {**{k: str(v) for k, v in (doc.get("variables") or {}).items()}, **ci_variables}
    assert _runs(doc.get("workflow", {}).get("rules"), variables), "the workflow rules start no pipeline"
    log = Log()
    jobs = [k for k, v in doc.items() if isinstance(v, dict) and "script" in v and not k.startswith(".")]
    for stage in doc["stages"]:
        for name in jobs:
            job = _resolve(doc, name)
            if job.get("stage", "test") != stage or not _runs(job.get("rules"), variables) or (
                    only is not None and name not in only):
                continue
            matrix = (job.get("parallel") or {}).get("matrix") or [{}]
            entries = [{}] if matrix == [{}] else [
                {k: str(v)} for axis in matrix for k, values in axis.items() for v in values]
            for i, entry in enumerate(entries, 1):
                tokens = {k: "not-a-real-token" for k in job.get("id_tokens") or {}}
                job_env = {**env, **variables, **{k: str(v) for k, v in (job.get("variables") or {}).items()},
                           **entry, **tokens, "CI_JOB_ID": str(i)}
                script = "\n".join([*job.get("before_script", []), *job["script"]])
                label = f"{name}{entry or ''}"
                log.add(label, "script", sh(script, workspace(name), job_env))
    return log


# --- Dockerfile -------------------------------------------------------------------------------------------------

def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def _sub(text: str, values: Mapping[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values.get(m.group(1) or m.group(2), ""), text)


def run_dockerfile(dockerfile: Path, image_root: Path, env: Mapping[str, str],
                   build_args: Mapping[str, str]) -> tuple[Log, Callable[..., subprocess.CompletedProcess[str]]]:
    """``docker build`` without a daemon: ARG, ENV, COPY and RUN in order, absolute paths moved under
    ``image_root``; the base image is ``env`` (its PATH's python). Returns the log and a ``docker run``."""
    def at(path: str) -> str:
        return str(image_root / path.lstrip("/")) if path.startswith("/") else path

    def rooted(text: str) -> str:
        return re.sub(r"(?<![\w.])/(opt|app|etc)/", lambda m: f"{image_root}/{m.group(1)}/", text)

    log = Log()
    args: dict[str, str] = {}
    image_env: dict[str, str] = {}
    entrypoint: list[str] = []
    cmd: list[str] = []
    for op, rest in _instructions(dockerfile):
        if op == "ARG":
            name, eq, default = rest.partition("=")
            if name in build_args:
                args[name] = build_args[name]
            elif eq:
                args[name] = default
        elif op == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                image_env[key] = rooted(_sub(value, {**env, **args, **image_env}))
        elif op == "COPY":
            *sources, dest = shlex.split(rest)
            target = Path(at(dest))
            folder = target if dest.endswith("/") else target.parent
            folder.mkdir(parents=True, exist_ok=True)
            for src in sources:
                shutil.copy2(dockerfile.parent / src, folder / src if dest.endswith("/") else target)
        elif op == "RUN":
            log.add("build", rest, sh(rooted(rest), image_root, {**env, **args, **image_env}))
        elif op in ("ENTRYPOINT", "CMD"):
            words = [rooted(w) for w in yaml.safe_load(rest)]  # exec form: a JSON list
            entrypoint, cmd = (words, cmd) if op == "ENTRYPOINT" else (entrypoint, words)
        else:
            assert op == "FROM", f"the test runner does not know {op}"

    def docker_run(*argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*entrypoint, *(argv or cmd)], cwd=image_root, env={**env, **image_env, **extra},
                              capture_output=True, text=True, timeout=300)

    return log, docker_run

