"""`--json`: stdout is exactly one JSON document for every command that takes it; messages go to stderr.

Each command runs as a user's script would run it (a subprocess, worker processes and all), and its
stdout goes straight to json.loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hostile as h
import pytest
from servers import PASSWORD, USER, pypi_server
from support import clean_env

VARIANTS = ("torch-universal", "torch-cpu")


def kf_json(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, Any, str]:
    """Run the CLI with --json: (exit code, the parsed stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "kernel_factory", *map(str, args), "--json"], capture_output=True,
                          text=True, env=env, timeout=300)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"stdout is not one JSON document:\n{proc.stdout}\n--- stderr:\n{proc.stderr}") from None
    return proc.returncode, doc, proc.stderr


@dataclass
class Setup:
    repo: Path
    wheels: Path

    def own_store(self, folder: Path) -> tuple[Path, Path]:
        """(config, store) of a store of the calling test's own: no test sees what another one built."""
        store = folder / "store"
        config = folder / "factory.toml"
        config.write_text(f'[factory]\nstore = "{store}"\n\n[[kernel]]\nrepo = "{self.repo}"\ntags = ">=0"\n')
        return config, store


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    root = tmp_path_factory.mktemp("json")
    return Setup(h.big(root, "jsonkernel", VARIANTS, 4096, seed=5), h.small_wheels(root / "adopt", 3))


def test_to_wheel_json_holds_the_wheel_paths(setup: Setup, tmp_path: Path) -> None:
    rc, doc, err = kf_json("to-wheel", setup.repo, "0.1.0", "-o", tmp_path / "out", "--jobs", "2")
    assert rc == 0, err
    assert sorted(doc["built"]) == ["jsonkernel-0.1.0+cpu-py3-none-any.whl", "jsonkernel-0.1.0-py3-none-any.whl"]
    assert sorted(doc["wheels"]) == sorted(str(tmp_path / "out" / name) for name in doc["built"])
    assert all(Path(p).is_file() for p in doc["wheels"])
    assert doc["failed"] == [] and doc["refused"] == []
    assert "built 2 wheels" in err


def test_plan_build_index_publish_json(setup: Setup, tmp_path: Path) -> None:
    config, store = setup.own_store(tmp_path)
    rc, doc, _ = kf_json("plan", "--config", config)
    assert rc == 0 and sorted(j["variant"] for j in doc["build"]) == sorted(VARIANTS) and doc["in_store"] == []

    rc, doc, err = kf_json("build", "--config", config, "--jobs", "2")
    assert rc == 0, err
    assert len(doc["built"]) == 2 and doc["in_store"] == 0 and doc["failed"] == []
    rc, doc, _ = kf_json("build", "--config", config)
    assert rc == 0 and doc["built"] == [] and doc["in_store"] == 2

    rc, doc, err = kf_json("index", "--store", store, "--wheels", setup.wheels)
    assert rc == 0, err
    adopted = sorted(p.name for p in setup.wheels.glob("*.whl"))
    assert doc["adopted"] == adopted and doc["already_in_store"] == doc["skipped"] == doc["damaged"] == []
    assert doc["records"] == 5 and doc["written"] == doc["pages"] > 0 and doc["unchanged"] == doc["removed"] == 0
    assert doc["store"] == str(store) and doc["out"] == str(store)
    assert "adopted 3 wheel(s)" in err and "index: 5 wheel(s)" in err  # the human lines, on stderr
    rc, again, _ = kf_json("index", "--store", store, "--wheels", setup.wheels)
    assert rc == 0 and again["adopted"] == [] and again["already_in_store"] == adopted
    assert again["written"] == 0 and again["unchanged"] == again["pages"] == doc["pages"]

    dest = tmp_path / "site"
    rc, dry, err = kf_json("publish", "--store", store, "--to", dest, "--dry-run")
    assert rc == 0 and dry["dry_run"] is True and not any(p.is_file() for p in dest.rglob("*")), err
    assert "files/jsonkernel-0.1.0-py3-none-any.whl" in dry["uploaded"] and "index.html" in dry["uploaded"]
    assert dry["unchanged"] == dry["skipped"] == dry["refused"] == dry["removed"] == []
    rc, done, _ = kf_json("publish", "--store", store, "--to", dest)
    assert rc == 0 and done["dry_run"] is False and done["uploaded"] == dry["uploaded"]
    assert done["uploaded_bytes"] == sum((store / rel).stat().st_size for rel in done["uploaded"])
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == done["uploaded"]
    rc, same, _ = kf_json("publish", "--store", store, "--to", dest, "--dry-run")
    assert rc == 0 and same["uploaded"] == [] and same["unchanged"] == done["uploaded"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with pypi_server(tmp_path) as url:
        yield url


def test_publish_json_to_an_upload_endpoint_lists_what_it_does_not_take(setup: Setup, server: str,
                                                                        tmp_path: Path) -> None:
    config, root = setup.own_store(tmp_path)
    assert kf_json("build", "--config", config)[0] == 0
    assert kf_json("index", "--store", root, "--wheels", setup.wheels)[0] == 0
    keyring = "keyring.backends.null.Keyring"
    env = clean_env(TWINE_USERNAME=USER, TWINE_PASSWORD=PASSWORD, PYTHON_KEYRING_BACKEND=keyring)
    rc, doc, err = kf_json("publish", "--store", root, "--to", server, env=env)
    wheels = sorted(f"files/{p.name}" for p in (root / "files").glob("*.whl"))
    assert rc == 0, err
    assert wheels == sorted(["files/jsonkernel-0.1.0-py3-none-any.whl", "files/jsonkernel-0.1.0+cpu-py3-none-any.whl",
                             *(f"files/{p.name}" for p in setup.wheels.glob("*.whl"))])
    assert doc["uploaded"] == wheels and doc["unchanged"] == []
    assert "index.html" in doc["skipped"] and not any(s.endswith(".whl") for s in doc["skipped"])
    rc, again, _ = kf_json("publish", "--store", root, "--to", server, env=env)
    assert rc == 0 and again["uploaded"] == [] and again["unchanged"] == wheels


def test_an_error_is_a_json_document_too(setup: Setup, tmp_path: Path) -> None:
    bad = tmp_path / "factory.toml"
    bad.write_text("[factory]\nstroe = 'x'\n")
    for command in ("plan", "build"):
        rc, doc, err = kf_json(command, "--config", bad, env={**os.environ})
        assert rc == 2 and doc["exit_code"] == 2 and "unknown key 'stroe'" in doc["error"], err
        assert [line for line in err.splitlines() if line.startswith("error: ")] == [f"error: {doc['error']}"]


def test_which_json_is_one_document() -> None:
    rc, doc, err = kf_json("which")  # this interpreter (the test venv, with torch)
    assert rc == 0, err
    assert doc["environment"]["python"] == sys.executable and doc["environment"]["label"]
