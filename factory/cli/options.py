"""The options' flags, made from config.OPTIONS: each subcommand gets the flags of the options it takes."""

from __future__ import annotations

import argparse
from typing import Any

from ..config import OPTIONS, Flags


def add_options(p: argparse.ArgumentParser, command: str) -> None:
    """The flags of every option that ``command`` takes; a boolean one also as ``--no-...``."""
    for option in OPTIONS:
        if option.flag is None or command not in option.commands:
            continue
        where = [f"config: {option.key}"] if option.config_key else []
        where += [f"env: {option.env}"] if option.env else []
        help_text = option.help + (f" ({'; '.join(where)})" if where else "")
        how: dict[str, Any] = ({"action": argparse.BooleanOptionalAction, "default": None} if option.boolean
                               else {"action": "append" if option.repeat else "store", "metavar": option.metavar})
        p.add_argument(option.flag, dest=option.name, help=help_text, **how)


def add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="factory.toml or pyproject.toml (default: ./factory.toml)")


def flags_of(ns: argparse.Namespace, command: str, *, default_config: bool = True) -> Flags:
    """The options' overrides given on the command line, by option name."""
    given = {o.name: getattr(ns, o.name) for o in OPTIONS
             if o.flag is not None and command in o.commands and getattr(ns, o.name, None) is not None}
    return Flags(config=getattr(ns, "config", None), default_config=default_config, given=given)
