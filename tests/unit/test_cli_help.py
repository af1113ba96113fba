"""The CLI help is written for users: a description and an example per subcommand; global flags anywhere."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from kernel_factory import cli

SUBCOMMANDS = ["to-wheel", "plan", "build", "index", "publish", "serve", "local-kernels", "which", "download", "yank",
               "unyank", "status", "prune"]


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_every_subcommand_is_listed_and_tested() -> None:
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == sorted(SUBCOMMANDS)


def test_top_level_help_is_for_users(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    assert "main(argv)" not in text and "``" not in text  # not the module's developer docstring
    assert "Hugging Face Kernel Hub" in text and "pip" in text
    assert "\nexample:\n  kernel-factory " in text
    for name in SUBCOMMANDS:
        assert f"\n    {name} " in text or f"\n    {name}\n" in text, name


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_subcommand_help_has_description_and_example(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, name)
    blocks = text.split("\n\n")
    assert blocks[0].startswith(f"usage: kernel-factory {name}")
    description = blocks[1]
    assert not description.startswith(("options:", "positional arguments:")), f"{name} has no description"
    assert len(description.split()) >= 25 and description.rstrip().endswith("."), description
    example = text.split("\nexample:\n", 1)
    assert len(example) == 2, f"{name} --help has no example"
    first = example[1].splitlines()[0].strip()
    assert "kernel-factory " + name in first, first


@pytest.mark.parametrize(
    "argv",
    [
        ["--debug", "-q", "index", "--store", "s"],
        ["index", "--debug", "-q", "--store", "s"],
        ["index", "--store", "s", "--quiet", "--debug"],
        ["-v", "--debug", "publish", "--to", "d", "-q"],
    ],
)
def test_global_flags_before_or_after_the_subcommand(argv: list[str]) -> None:
    ns = cli.parser().parse_args(argv)
    assert ns.debug is True and ns.quiet is True


def test_global_flags_default_and_verbose_count() -> None:
    ns = cli.parser().parse_args(["serve"])
    assert not hasattr(ns, "debug") and not hasattr(ns, "quiet")  # main() fills the defaults
    assert cli.parser().parse_args(["serve", "-vv"]).verbose == 2
    assert cli.parser().parse_args(["-v", "serve"]).verbose == 1


def test_unknown_flag_is_still_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["index", "--no-such-flag"]) == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_console_script_takes_argv_as_main_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run`` (the console script's function) is called with an argument list by some launchers."""
    monkeypatch.chdir(tmp_path)  # no factory.toml here
    assert cli.main(["index", "--out", str(tmp_path)]) == 0  # an empty folder: an empty index
    assert "index: 0 wheel(s)" in capsys.readouterr().out
    assert (tmp_path / "simple" / "index.html").is_file()
