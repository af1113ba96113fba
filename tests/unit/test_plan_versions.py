"""The one-version rule in every path of the plan: a revision that carries a release tag gets the tag's version
however it was asked for (a v<N> branch head, --revision, a lock's commit, a shard), and a store that holds the
other version of it is named, not counted as done."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kernel_factory import plan as plan_mod
from kernel_factory.config import KernelSpec, Options
from kernel_factory.errors import EXIT_USAGE, UsageError
from kernel_factory.plan import make_plan, warning_lines
from kernel_factory.record import Record
from kernel_factory.sources.base import Refs

HEAD = "a" * 40  # v1's head, tagged v1.1.2
OLD = "b" * 40  # tagged v1.1.0
UNTAGGED = "c" * 40  # v2's head, no tag
VARIANT = "torch213-cxx11-cpu-x86_64-linux"
REPO = "kernels-community/img2grey"


class FakeSource:
    repo_id: str | None = REPO
    name = "img2grey"
    display = REPO

    def __init__(self) -> None:
        self.counted: list[str] = []

    def refs(self) -> Refs:
        return Refs(branches={"main": HEAD, "v1": HEAD, "v2": UNTAGGED}, tags={"v1.1.2": HEAD, "v1.1.0": OLD})

    def resolve(self, revision: str) -> str:
        refs = self.refs()
        return {**refs.branches, **refs.tags}.get(revision, revision)

    def commit_count(self, sha: str) -> int:
        self.counted.append(sha)
        return {HEAD: 2, OLD: 1, UNTAGGED: 3}[sha]

    def commit_time(self, sha: str) -> int:
        return 0

    def variants(self, sha: str) -> list[str]:
        return [VARIANT]

    def read_text(self, sha: str, path: str) -> str | None:
        return None


@pytest.fixture
def source(monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    src = FakeSource()
    monkeypatch.setattr(plan_mod, "open_source", lambda *a, **k: src)
    return src


def opts(**spec: object) -> Options:
    return Options(kernels=(KernelSpec(repo=REPO, **spec),), allow_orgs=("kernels-community",))  # type: ignore[arg-type]


def versions_of(o: Options, records: list[Record] | None = None) -> list[tuple[str | None, str | None]]:
    return [(j.version, j.ref) for j in make_plan(o, records or []).todo]


def test_branch_head_with_a_tag_gets_the_tags_version(source: FakeSource) -> None:
    assert versions_of(opts(versions=("1",))) == [("1.1.2", "v1.1.2")]
    assert source.counted == []  # a tagged revision costs no history look-up


def test_untagged_branch_head_counts_commits(source: FakeSource) -> None:
    assert versions_of(opts(versions=("2",))) == [("2.0.3", "v2")]


def test_revision_with_major_gets_the_tags_version(source: FakeSource) -> None:
    assert versions_of(opts(versions=("1",), revision="v1")) == [("1.1.2", "v1.1.2")]
    assert versions_of(opts(versions=("1",), revision=OLD)) == [("1.1.0", "v1.1.0")]
    assert versions_of(opts(versions=("2",), revision=UNTAGGED)) == [("2.0.3", None)]


def test_revision_with_another_version_than_its_tag_is_refused(source: FakeSource) -> None:
    with pytest.raises(UsageError) as info:
        make_plan(opts(versions=("1.0.2",), revision="v1", version_override="1.0.2"), [])
    assert info.value.exit_code == EXIT_USAGE
    assert str(info.value) == (
        f"{REPO}: revision 'v1' carries tag v1.1.2, so its version is 1.1.2, not 1.0.2 (one revision, one "
        "version); give VERSION 1.1.2 or 1"
    )
    assert versions_of(opts(versions=("1.1.2",), revision="v1", version_override="1.1.2")) == [("1.1.2", "v1.1.2")]


def test_locked_commit_gets_the_tags_version(source: FakeSource) -> None:
    assert versions_of(opts(sha=HEAD)) == [("1.1.2", "v1.1.2")]
    assert versions_of(opts(sha=UNTAGGED)) == [("2.0.3", "v2")]


def test_branch_and_tag_asked_together_give_one_job(source: FakeSource) -> None:
    assert sorted(versions_of(opts(versions=("1", ">=1.1.0")))) == [("1.1.0", "v1.1.0"), ("1.1.2", "v1.1.2")]


def test_every_shard_agrees_on_the_version(source: FakeSource) -> None:
    o = opts(versions=("1",))
    jobs = [j for k in (1, 2) for j in make_plan(o, [], (k, 2)).todo]
    assert [(j.version, j.sha) for j in jobs] == [("1.1.2", HEAD)]


def record(version: str) -> Record:
    label = "torch213cpucxx11"
    return Record(
        filename=f"img2grey-{version}+{label}-cp39-abi3-manylinux_2_28_x86_64.whl", name="img2grey",
        version=f"{version}+{label}", sha256="0" * 64, size=1, metadata_sha256="0" * 64, requires_python=None,
        upload_time="2025-04-07T10:00:00Z", kernel_version=version, label=label, variant=VARIANT, repo_id=REPO,
        revision=HEAD, ref="v1",
    )


def test_a_wheel_of_the_other_version_is_named_and_not_counted_as_held(source: FakeSource) -> None:
    wrong = record("1.0.2")
    for o in (opts(versions=("1",)), opts(versions=("==1.1.2",))):  # versions = [1]; tags = "==1.1.2"
        plan = make_plan(o, [wrong])
        assert [(j.version, j.sha) for j in plan.todo] == [("1.1.2", HEAD)] and plan.done == []
        assert plan.misversioned == [(wrong, "1.1.2")]
        (line,) = warning_lines(plan)
        assert line.startswith(f"{wrong.filename}: {REPO}@{HEAD[:12]} has version 1.1.2 ")
        assert f"Remove files/{wrong.filename} with its .metadata and .json" in line
        assert plan.to_json()["notes"] == []
        assert plan.to_json()["misversioned"] == [{"wheel": wrong.filename, "version": "1.0.2", "should_be": "1.1.2"}]


def test_the_right_wheel_beside_a_wrong_one_is_held(source: FakeSource) -> None:
    plan = make_plan(opts(versions=("1",)), [record("1.0.2"), record("1.1.2")])
    assert plan.todo == [] and [j.version for j in plan.done] == ["1.1.2"]
    assert [r.kernel_version for r, _ in plan.misversioned] == ["1.0.2"]  # named at every run until removed


def test_untagged_revision_keeps_the_stores_version(source: FakeSource) -> None:
    held = replace(record("2.0.3"), revision=UNTAGGED, filename="x.whl")
    plan = make_plan(opts(versions=("2",)), [held])
    assert plan.todo == [] and plan.misversioned == [] and source.counted == []


def test_a_revision_named_by_two_tables_is_planned_once(source: FakeSource) -> None:
    o = Options(kernels=(KernelSpec(repo=REPO, versions=("1",)), KernelSpec(repo=REPO, versions=("==1.1.2",))),
                allow_orgs=("kernels-community",))
    assert [(j.version, j.sha) for j in make_plan(o, []).todo] == [("1.1.2", HEAD)]
