"""which, the subcommand (run_which) and what it prints: this environment, the install commands for the newest
build that fits, or the builds there are, nearest first (nearest's rows, build_lines). The probe is replaced by
facts (a unit test starts no process); the index is a store folder read through file:// URLs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from index_synth import add_kernel
from kernel_factory.errors import EXIT_OK, EXIT_REFUSED, UsageError
from kernel_factory.index.command import index_with_adoption
from kernel_factory.local import which
from kernel_factory.local.probe.run import environment
from kernel_factory.local.which import WhichArgs, build_lines, nearest
from kernel_factory.simple import Wheel
from packaging.utils import parse_wheel_filename


def facts(machine: str = "x86_64", system: str = "linux", **torch: Any) -> dict[str, Any]:
    t = {"version": "2.13.0", "cuda": None, "hip": None, "xpu": None, "tpu": False, "neuron": False, "mps": False,
         "cxx11_abi": True, "privateuse1": None, "cann": None, **torch}
    return {"python": "/py", "python_version": "3.11", "machine": machine, "system": system, "torch": t}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("which") / "public"
    for version, variant in (("1.0.0", "torch213-cxx11-cu130-x86_64-linux"),
                             ("1.1.0", "torch213-cxx11-cu130-x86_64-linux"),
                             ("1.2.0", "torch212-cxx11-cu130-x86_64-linux"),
                             ("1.2.0", "torch213-cxx11-cu126-x86_64-linux")):
        add_kernel(store, "relu", version, variant)
    index_with_adoption(str(store), store, None, "http://127.0.0.1")
    return store


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], f: dict[str, Any],
        **args: Any) -> tuple[int, str]:
    monkeypatch.setattr(which, "resolve_python", lambda python: python)
    monkeypatch.setattr(which, "probe", lambda python: environment(f))
    code = which.run_which(WhichArgs(**args))
    return code, capsys.readouterr().out


@pytest.mark.parametrize(("f", "torch_line"), [
    (facts(cuda="13.0", version="2.13.0+cu130"), "torch    2.13.0+cu130 (cuda 13.0, C++11 ABI, x86_64-linux)"),
    (facts(version="2.12.0", cxx11_abi=False), "torch    2.12.0 (cpu, pre-C++11 ABI, x86_64-linux)"),
    (facts("arm64", "darwin", mps=True, cxx11_abi=None), "torch    2.13.0 (metal, aarch64-darwin)"),
])
def test_which_prints_this_environment(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                       f: dict[str, Any], torch_line: str) -> None:
    code, out = run(monkeypatch, capsys, f)
    env = environment(f)
    assert code == EXIT_OK
    assert out.splitlines() == ["python   /py (3.11)", torch_line, f"variant  {env.variant}", f"label    {env.label}",
                                f"root     {env.root}"]


def test_which_names_the_newest_fitting_build_and_its_commands(store: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = facts(cuda="13.0", version="2.13.0+cu130")
    url = store.as_uri()
    root = f"{url}/variants/torch213cu130cxx11/simple"
    code, out = run(monkeypatch, capsys, f, python="/env/bin/python", index_url=url + "/", kernel="ReLU")
    assert code == EXIT_OK
    wheel = "relu-1.1.0+torch213cu130cxx11-py3-none-linux_x86_64.whl"
    assert out.splitlines()[5:] == [
        f"wheel    {wheel}",
        f"pip      /env/bin/python -m pip install relu==1.1.0+torch213cu130cxx11 --index-url {root}",
        f"uv       uv pip install --python /env/bin/python relu==1.1.0+torch213cu130cxx11 --index-url {root}",
    ]
    code, out = run(monkeypatch, capsys, f, index_url=url, kernel="relu", json=True)
    doc = json.loads(out)
    assert code == EXIT_OK
    assert {k: v for k, v in doc.items() if k != "environment"} == {
        "index_url": url, "kernel": "relu", "fits": True, "version": "1.1.0+torch213cu130cxx11", "wheel": wheel,
        "index": root, "pip": f"pip install relu==1.1.0+torch213cu130cxx11 --index-url {root}",
        "uv": f"uv pip install relu==1.1.0+torch213cu130cxx11 --index-url {root}"}
    assert doc["environment"] == environment(f).to_json()


def test_which_without_a_fit_lists_the_builds_nearest_first(store: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    f = facts(version="2.13.0")  # cpu: no build of relu fits
    url = store.as_uri()
    code, out = run(monkeypatch, capsys, f, index_url=url, kernel="relu")
    assert code == EXIT_REFUSED
    assert out.splitlines()[5:] == [
        f"no build of relu at {url} fits torch213cpucxx11 on x86_64-linux; builds there are, nearest first:",
        "  torch213cu126cxx11  linux_x86_64  1.2.0  (torch 2.13, cu126, cxx11)",
        "  torch213cu130cxx11  linux_x86_64  1.1.0, 1.0.0  (torch 2.13, cu130, cxx11)",
        "  torch212cu130cxx11  linux_x86_64  1.2.0  (torch 2.12, cu130, cxx11)",
    ]
    code, out = run(monkeypatch, capsys, f, index_url=url, kernel="relu", json=True)
    doc = json.loads(out)
    assert code == EXIT_REFUSED and doc["fits"] is False
    assert [b["label"] for b in doc["builds"]] == ["torch213cu126cxx11", "torch213cu130cxx11", "torch212cu130cxx11"]


@pytest.mark.parametrize("args", [{"index_url": "file:///x"}, {"kernel": "relu"}])
def test_which_needs_the_index_and_the_kernel_together(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str],
                                                       args: dict[str, str]) -> None:
    with pytest.raises(UsageError, match="--index-url and --kernel go together: give both, or neither"):
        run(monkeypatch, capsys, facts(), **args)


def wheel(filename: str) -> Wheel:
    _, version, _, tags = parse_wheel_filename(filename)
    return Wheel(filename, filename, version, tags, False)


def test_nearest_rows_and_their_lines() -> None:
    env = environment(facts(cuda="13.0", version="2.13.0+cu130"))
    ws = [wheel(n) for n in (
        "k-1.0+torch213cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-1.10+torch213cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-1.9+torch213cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-1.0+torch213cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",  # the same version twice: once
        "k-2.0+torch210cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-2.0+torch212cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-2.0+torch112cu130cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-2.0+torch213rocm72cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-2.0+torch212cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-2.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-2.0+torch213cu126cxx11-cp39-abi3-manylinux_2_28_aarch64.whl",
        "k-2.0+torch213cu126cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-2.0+torch213metal-cp39-abi3-macosx_11_0_arm64.whl",
        "k-2.0+torch212cu126cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-2.0+torch212rocm72cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-2.0+torch29cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
        "k-3.0+cuda-py3-none-any.whl",
        "k-3.0-py3-none-any.whl",
        "k-3.0+cpu-py3-none-macosx_11_0_arm64.whl",
    )]
    rows = nearest(ws, env)
    assert [(r["label"], r["platform"]) for r in rows] == [
        ("torch213cu130cxx11", "manylinux_2_28_x86_64"),
        ("torch212cu130cxx11", "manylinux_2_28_x86_64"),
        ("torch210cu130cxx11", "manylinux_2_28_x86_64"),
        ("torch112cu130cxx11", "manylinux_2_28_x86_64"),
        ("torch213cu126cxx11", "manylinux_2_28_x86_64"),
        ("torch213cu126cxx11", "manylinux_2_28_aarch64"),
        ("torch213cpucxx11", "manylinux_2_28_x86_64"),  # another backend, this torch: by label
        ("torch213rocm72cxx11", "manylinux_2_28_x86_64"),
        ("torch213metal", "macosx_11_0_arm64"),  # another platform after
        ("torch212cu126cxx11", "manylinux_2_28_x86_64"),  # another CUDA, another torch: before other backends'
        ("torch212cpucxx11", "manylinux_2_28_x86_64"),
        ("torch212rocm72cxx11", "manylinux_2_28_x86_64"),
        ("torch29cpucxx11", "manylinux_2_28_x86_64"),  # farther from torch 2.13
        (None, "any"),
        ("cuda", "any"),
        ("cpu", "macosx_11_0_arm64"),  # another platform after
    ]
    assert rows[0] == {"label": "torch213cu130cxx11", "platform": "manylinux_2_28_x86_64",
                       "what": "torch 2.13, cu130, cxx11", "versions": ["1.10", "1.9", "1.0"],
                       "root": "variants/torch213cu130cxx11/simple/"}
    assert [(r["what"], r["root"]) for r in rows[-5:]] == [
        ("torch 2.12, rocm72, cxx11", "variants/torch212rocm72cxx11/simple/"),
        ("torch 2.9, cpu, cxx11", "variants/torch29cpucxx11/simple/"),
        ("universal", "simple/"), ("noarch cuda", "simple/"), ("noarch cpu", "simple/")]
    assert build_lines(rows[-3:]) == ["  (universal)  any  3.0  (universal)",
                                      "  cuda  any  3.0  (noarch cuda)",
                                      "  cpu  macosx_11_0_arm64  3.0  (noarch cpu)"]
    assert build_lines([]) == ["  (none)"]
    assert build_lines([{"label": "x\x1b[2J", "platform": "any", "versions": ["1"], "what": "w"}]) == [
        "  x\\x1b[2J  any  1  (w)"]


def test_universal_builds_of_the_combined_root_newest_first(tmp_path: Path) -> None:
    store = tmp_path / "public"
    for version in ("1.0.0", "1.2.0", "1.1.0"):
        add_kernel(store, "relu", version, "torch-universal")
    index_with_adoption(str(store), store, None, "http://127.0.0.1")
    found, every = which.candidates(store.as_uri(), "relu", environment(facts(cuda="13.0", version="2.13.0+cu130")))
    assert [(str(c.wheel.version), c.root) for c in found] == [
        (v, f"{store.as_uri()}/simple") for v in ("1.2.0", "1.1.0", "1.0.0")]
    assert len(every) == 3


def test_a_missing_project_is_named_with_what_to_check(store: Path) -> None:
    with pytest.raises(which.NoProject) as missing:
        which.candidates(store.as_uri(), "zzzz-no-such", environment(facts()))
    assert str(missing.value) == (f"--kernel zzzz-no-such: no such project at {store.as_uri()}/simple/; check the "
                                  "name and --index-url")
    assert missing.value.hint == ""
