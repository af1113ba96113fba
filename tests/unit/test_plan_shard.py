"""--shard K/N: parsing, and a stable, disjoint, covering partition of the plan."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernel_factory.errors import EXIT_USAGE, UsageError
from kernel_factory.plan import parse_shard, shard_of

ACTIVATION = ("kernels-community/activation", "0123456789abcdef0123456789abcdef01234567",
              "torch27-cxx11-cu128-x86_64-linux")
RELU = ("kernels-community/relu", "fedcba9876543210fedcba9876543210fedcba98", "torch-universal")
keys = st.tuples(st.text(max_size=30), st.text(max_size=40), st.text(max_size=40))


@pytest.mark.parametrize(
    ("text", "expected"), [("1/1", (1, 1)), ("2/4", (2, 4)), (" 4/4 ", (4, 4)), ("10/16", (10, 16))]
)
def test_parse_shard(text: str, expected: tuple[int, int]) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [("0/4", "between 1 and 4"), ("5/4", "between 1 and 4"), ("1/0", "at least 1"), ("-1/2", "between 1 and 2"),
     ("a/b", "whole numbers"), ("1", "not K/N"), ("1/2/3", "not K/N"), ("", "not K/N"), ("1.5/2", "whole numbers")],
)
def test_parse_shard_refuses_with_one_clear_line(text: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_shard(text)
    message = str(info.value)
    assert words in message and "--shard 2/4" in message and "\n" not in message
    assert info.value.exit_code == EXIT_USAGE


def test_known_keys_land_in_fixed_shards() -> None:
    # sha256-based: the same in every process, run and machine (unlike hash(), which is salted per process)
    assert [shard_of(ACTIVATION, n) for n in (1, 2, 3, 4, 7, 16)] == [1, 1, 1, 1, 1, 13]
    assert [shard_of(RELU, n) for n in (1, 2, 3, 4, 7, 16)] == [1, 1, 1, 1, 3, 13]
    assert shard_of(RELU, 7) == 3


@given(st.lists(keys, max_size=60, unique=True), st.integers(min_value=1, max_value=12))
def test_shards_are_disjoint_and_cover_the_plan(plan: list[tuple[str, str, str]], n: int) -> None:
    shards = [[key for key in plan if shard_of(key, n) == k] for k in range(1, n + 1)]
    assert sorted(key for shard in shards for key in shard) == sorted(plan)  # union is the whole, no repeats
    for key in plan:
        assert sum(shard_of(key, n) == k for k in range(1, n + 1)) == 1


def test_shards_are_roughly_even() -> None:
    plan = [("org/kernel", f"{i:040x}", "torch213-cxx11-cu130-x86_64-linux") for i in range(4000)]
    sizes = [sum(shard_of(key, 4) == k for key in plan) for k in range(1, 5)]
    assert sum(sizes) == 4000 and min(sizes) > 850
