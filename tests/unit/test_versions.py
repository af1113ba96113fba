import pytest
from kernel_factory.errors import EXIT_USAGE, UsageError, VersionNotFound
from kernel_factory.sources.base import Refs
from kernel_factory.versions import Selected, fill_versions, parse_request, select

REFS = Refs(
    branches={"main": "m" * 40, "v1": "a" * 40, "v2": "b" * 40, "vfoo": "c" * 40},
    tags={"v1.1.0": "d" * 40, "v1.1.2": "e" * 40, "v2.0.0": "f" * 40, "vnot-pep440": "0" * 40, "x1.0": "1" * 40},
)


def test_parse_request_kinds() -> None:
    assert parse_request("1.1.2").kind == "tag"
    assert parse_request("v1.1.2").text == "1.1.2"
    assert parse_request(1).kind == "major"
    assert parse_request("2").text == "2"
    assert parse_request(">=1.1.2,<2").kind == "specifier"
    assert parse_request("all").kind == "all"


@pytest.mark.parametrize("bad", ["one", ">=x", "1..2", ""])
def test_parse_request_bad(bad: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_request(bad)
    assert info.value.exit_code == EXIT_USAGE


def test_select_tag() -> None:
    (s,) = select(REFS, parse_request("1.1.2"), "r")
    assert (s.sha, s.ref, s.version) == ("e" * 40, "v1.1.2", "1.1.2")


def test_select_specifier_selects_every_matching_tag() -> None:
    got = select(REFS, parse_request(">=1.1.0,<2"), "r")
    assert [s.version for s in got] == ["1.1.0", "1.1.2"]


def test_select_major_branch_counts_commits() -> None:
    got = select(REFS, parse_request("1"), "r")
    assert got == [Selected("a" * 40, "v1", None, 1)]
    (filled,) = fill_versions(got, lambda sha: 7)
    assert filled.version == "1.0.7"


def test_select_all() -> None:
    got = select(REFS, parse_request("all"), "r")
    assert {s.ref for s in got} == {"v1.1.0", "v1.1.2", "v2.0.0", "v1", "v2"}


def test_unknown_version_lists_what_exists() -> None:
    with pytest.raises(VersionNotFound) as info:
        select(REFS, parse_request("1.1.3"), "org/repo")
    msg = str(info.value)
    assert "org/repo: no tag v1.1.3" in msg
    assert "v1.1.0, v1.1.2, v2.0.0" in msg and "branches: v1, v2" in msg
    assert info.value.exit_code == EXIT_USAGE
    with pytest.raises(VersionNotFound, match="no branch v3"):
        select(REFS, parse_request("3"), "org/repo")
