"""The one reporter (factory/report.py): -q keeps errors, warnings and the result line; --json keeps stdout to the
one document (no network, no processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from index_synth import make_wheel
from kernel_factory import report
from kernel_factory.cli import main


def _wheels(tmp_path: Path, junk: bool = False) -> Path:
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "helper", "2.0.1")
    if junk:
        (wheels / "helper-2.0.1.tar.gz").write_bytes(b"an sdist")
    return wheels


def test_index_quiet_prints_only_the_result_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels, store = _wheels(tmp_path), tmp_path / "store"
    assert main(["index", "-q", "--store", str(store), "--wheels", str(wheels)]) == 0
    got = capsys.readouterr()
    assert got.out.splitlines() == [
        f"index: 1 wheel(s), 6 page(s): 6 written, 0 unchanged, 0 removed -> {store}"
    ]
    assert got.err == ""


def test_index_without_quiet_says_what_it_adopted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels, store = _wheels(tmp_path), tmp_path / "store"
    assert main(["index", "--store", str(store), "--wheels", str(wheels)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"adopted 1 wheel(s) from {wheels}, 0 already in the store",
        f"index: 1 wheel(s), 6 page(s): 6 written, 0 unchanged, 0 removed -> {store}",
    ]


def test_quiet_keeps_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels, store = _wheels(tmp_path, junk=True), tmp_path / "store"
    assert main(["index", "-q", "--store", str(store), "--wheels", str(wheels)]) == 0
    got = capsys.readouterr()
    assert got.err.splitlines() == [
        f"warning: {wheels}: 1 file(s) not indexed (only wheels are): helper-2.0.1.tar.gz; build wheels of them "
        "(`pip wheel --no-deps FILE`) and put those in the folder"
    ]
    assert got.out.splitlines() == [f"index: 1 wheel(s), 6 page(s): 6 written, 0 unchanged, 0 removed -> {store}"]


def test_index_json_keeps_stdout_to_the_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels, store = _wheels(tmp_path), tmp_path / "store"
    assert main(["index", "--json", "--store", str(store), "--wheels", str(wheels)]) == 0
    got = capsys.readouterr()
    doc = json.loads(got.out)  # the whole of stdout is one document
    assert (doc["records"], doc["adopted"]) == (1, ["helper-2.0.1-py3-none-any.whl"])
    assert got.err.splitlines() == [
        f"adopted 1 wheel(s) from {wheels}, 0 already in the store",
        f"index: 1 wheel(s), 6 page(s): 6 written, 0 unchanged, 0 removed -> {store}",
    ]


def test_reporter_streams(capsys: pytest.CaptureFixture[str]) -> None:
    def every_kind() -> None:
        report.result("result")
        report.info("info")
        report.progress("progress")
        report.detail("detail")
        report.warn("careful")
        report.error("broken")
        report.document({"a": 1})

    try:
        report.configure(quiet=True, json=True)
        every_kind()
        got = capsys.readouterr()
        assert json.loads(got.out) == {"a": 1}
        assert got.err.splitlines() == ["result", "warning: careful", "error: broken"]
        report.configure(verbose=1)
        every_kind()
        got = capsys.readouterr()
        assert got.out.splitlines()[:2] == ["result", "info"]
        assert got.err.splitlines() == ["progress", "detail", "warning: careful", "error: broken"]
    finally:
        report.configure()
