"""download's kernel dependencies (local/download/depends.py): kernel-depends -> the kernels to place, as kernels 0.19
resolves them; the allow list; the cap; cycles. No index, no process."""

from __future__ import annotations

import pytest
from kernel_factory.errors import Refused
from kernel_factory.local.download.depends import MAX_DEPENDS, Policy, Want, find_cycle, wants_of
from kernel_factory.verify.lockfile import LockedKernel

SHA1, SHA2 = "1" * 40, "2" * 40
WHY = "kernel-depends of a/top"


def test_a_revision_is_a_commit_or_a_major_branch() -> None:
    depends = [{"repo-id": "b/pinned", "revision": SHA1}, {"repo-id": "c/branch", "revision": "v3"}]
    assert wants_of("top.whl", "a/top", depends, {}) == [
        Want("b/pinned", SHA1, (), None, WHY), Want("c/branch", None, ("v3",), 3, WHY)]


def test_a_locked_dependency_pinned_elsewhere_is_placed_at_both_commits() -> None:
    locked = {"b/dep": LockedKernel("b/dep", SHA2, ref="v1")}
    assert wants_of("top.whl", "a/top", [{"repo-id": "b/dep", "revision": SHA1}], locked) == [
        Want("b/dep", SHA2, ("v1",), None, WHY), Want("b/dep", SHA1, (), None, WHY)]
    assert wants_of("top.whl", "a/top", [{"repo-id": "b/dep", "revision": SHA2}], locked) == [
        Want("b/dep", SHA2, ("v1",), None, WHY)]


@pytest.mark.parametrize("dep", [
    {"repo-id": "b/dep", "revision": "main"},
    {"repo-id": "b/dep", "revision": "v1.2.3"},
    {"repo-id": "b/dep"},
    {"repo-id": "b/dep", "version": True},
    {"repo-id": "b/dep", "version": -1},
    {"repo-id": "b/dep", "version": 1, "revision": SHA1},
])  # fmt: skip
def test_what_an_index_cannot_resolve_is_refused(dep: dict[str, object]) -> None:
    with pytest.raises(Refused) as info:
        wants_of("top.whl", "a/top", [dep], {})
    assert str(info.value).startswith("top.whl: its kernel-depends names b/dep at ")
    assert str(info.value).endswith("; an index resolves only a version number, a v<N> branch or a 40-hex commit: "
                                    "rebuild it")


def test_without_a_given_list_the_locks_organisations_and_the_default_are_allowed() -> None:
    policy = Policy.make(None, ["kernels-community"], ["example/img2grey"])
    assert policy.allow_orgs == {"kernels-community", "example"}
    assert policy.refusal(Want("example/pyonly", SHA1)) is None
    assert policy.refusal(Want("evil/x", None, ("v1",), 1, WHY)) == (
        "evil/x (kernel-depends of a/top): the organisation evil is not allowed into the Hub cache; add --allow-org "
        "evil (or KERNEL_FACTORY_ALLOW_ORGS) if you trust it")


def test_a_given_list_applies_to_the_locked_repositories_too() -> None:
    policy = Policy.make(["other"], ["kernels-community"], ["example/img2grey"])
    assert policy.allow_orgs == {"kernels-community", "other"}
    assert policy.refusal(Want("example/img2grey", SHA1)) is not None


def test_the_cap_counts_kernels_beyond_the_lock() -> None:
    policy = Policy.make(None, [], [], max_depends=2)
    assert MAX_DEPENDS == 32 and Policy.make(None, [], []).max_depends == MAX_DEPENDS
    assert policy.too_many({("a/x", "v1"), ("a/y", "v1")}) is None
    assert policy.too_many({("a/x", "v1"), ("a/y", "v1"), ("a/z", SHA1)}) == (
        "kernel-depends pull in more than 2 kernels beyond kernels.lock (a/x, a/y, a/z); raise --max-depends if you "
        "trust them all")


def test_cycles_are_found_and_a_diamond_is_none() -> None:
    a, b, c, d = ("o/a", SHA1), ("o/b", "v1"), ("o/c", "v1"), ("o/d", "v2")
    assert find_cycle({a: [b, c], b: [d], c: [d], d: []}) is None
    assert find_cycle({a: [b], b: [c], c: [a]}) == [a, b, c, a]
    assert find_cycle({a: [a]}) == [a, a]
    long = {("o/x", f"v{i}"): [("o/x", f"v{i + 1}")] for i in range(5000)}  # deep: no recursion
    assert find_cycle(long) is None
    long[("o/x", "v5000")] = [("o/x", "v0")]
    found = find_cycle(long)
    assert found is not None and len(found) == 5002
