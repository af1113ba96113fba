"""rules.Judge: --check's decisions from the target kernels' answer (askkernels.py's JSON), no process."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_factory.local.probe.environment import Environment, variant_name
from kernel_factory.local.probe.rules import Judge


@pytest.mark.parametrize(("version", "refs", "digest"), [
    ("0.17.2", ("model", "kernel"), False),
    ("0.18.3", ("kernel",), True),
    ("0.19.1", ("kernel",), True),
    ("0.20.0.dev1", ("kernel",), True),
    ("not-a-version", ("kernel",), True),
])  # fmt: skip
def test_each_kernels_version_has_its_rules(version: str, refs: tuple[str, ...], digest: bool) -> None:
    j = Judge.from_json({"kernels": version, "python": "/app/bin/python"})
    assert (j.ref_folders, j.digest_at_load) == (refs, digest)


def test_the_rules_line_names_the_kernels_version() -> None:
    assert Judge.from_json({"kernels": "0.19.1"}, "/app/bin/python").rules_line() == (
        "judged for kernels 0.19.1 at /app/bin/python: refs/v<N> read from kernels--org--name only; every load "
        "checks the files against metadata.json's digest")
    assert Judge.from_json({"kernels": "0.17.2"}, "/app/bin/python").rules_line() == (
        "judged for kernels 0.17.2 at /app/bin/python: refs/v<N> read from kernels--org--name and "
        "models--org--name (models-- wins); no digest check at load")


def test_an_answer_of_wrong_types_is_read_as_missing(tmp_path: Path) -> None:
    j = Judge.from_json({"kernels": "0.19.1", "builds": {"/b": "x", "/c": {"names": ["a"], "rejected": 3}},
                         "folders": {"/f": 1}})
    assert "/b" not in j.builds and dict(j.builds["/c"].rejected) == {}
    assert j.folder_refusal(Path("/f")) is None and j.fit(Path("/c")) == (None, "none of its build variants (a) "
                                                                                "fits this torch")


def test_unreadable_metadata_is_refused_by_every_version() -> None:
    for version in ("0.17.2", "0.19.1"):
        j = Judge.from_json({"kernels": version, "folders": {"/f": {"metadata": "ValueError: bad name",
                                                                     "digest": None}}})
        assert j.folder_refusal(Path("/f")) == f"kernels {version} cannot read its metadata.json (ValueError: bad name)"


@pytest.mark.parametrize(("env", "name"), [
    (Environment("linux", "x86_64", "2.13.0", cuda="13.0", cxx11_abi=True), "torch213-cxx11-cu130-x86_64-linux"),
    (Environment("linux", "x86_64", "2.9.1", hip="7.1.25424-abc", cxx11_abi=True), "torch29-cxx11-rocm71-x86_64-linux"),
    (Environment("linux", "x86_64", "2.10.0", xpu="20250101", cxx11_abi=True), "torch210-cxx11-xpu20251-x86_64-linux"),
    (Environment("linux", "aarch64", "2.13.0", cxx11_abi=False), "torch213-cxx98-cpu-aarch64-linux"),
    (Environment("darwin", "aarch64", "2.13.0", mps=True, cxx11_abi=True), "torch213-metal-aarch64-darwin"),
])  # fmt: skip
def test_the_variant_is_spelled_as_kernel_builder_spells_it(env: Environment, name: str) -> None:
    assert variant_name(env) == name
