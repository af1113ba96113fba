"""PEP 792 project status in the plan: an archived or quarantined project takes no new builds (left out, one
warning per project, not a refusal); a deprecated one builds, with a note; what the store holds is unchanged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from kernel_factory import plan as plan_mod
from kernel_factory.config import KernelSpec, Location, Options
from kernel_factory.errors import EXIT_REFUSED
from kernel_factory.plan import make_plan, plan_lines, warning_lines
from kernel_factory.record import Record
from kernel_factory.sources.base import Refs
from kernel_factory.store.status import BadStatusFile, Status, to_bytes

OLD = "b" * 40  # tagged v1.0.0, in the store
NEW = "a" * 40  # v1's head, tagged v1.1.0: a new build
VARIANTS = ["torch29-cxx11-cpu-x86_64-linux", "torch29-cxx11-cu128-x86_64-linux"]
REPO = "kernels-community/img2grey"


class FakeSource:
    repo_id: str | None = REPO
    name = "img2grey"
    display = REPO

    def refs(self) -> Refs:
        return Refs(branches={"main": NEW, "v1": NEW}, tags={"v1.1.0": NEW, "v1.0.0": OLD})

    def resolve(self, revision: str) -> str:
        return {**self.refs().branches, **self.refs().tags}.get(revision, revision)

    def commit_count(self, sha: str) -> int:
        return 1

    def commit_time(self, sha: str) -> int:
        return 0

    def variants(self, sha: str) -> list[str]:
        return VARIANTS

    def read_text(self, sha: str, path: str) -> str | None:
        return None


@pytest.fixture(autouse=True)
def source(monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    src = FakeSource()
    monkeypatch.setattr(plan_mod, "open_source", lambda *a, **k: src)
    return src


def opts(store: Path | None = None) -> Options:
    spec = KernelSpec(repo=REPO, versions=("==1.0.0", "==1.1.0"))
    o = Options(kernels=(spec,), allow_orgs=("kernels-community",))
    return o if store is None else Options(kernels=(spec,), allow_orgs=o.allow_orgs, store=Location.parse(str(store)))


def held(name: str = "img2grey", root: str | None = "img2grey") -> list[Record]:
    """The store's wheels of v1.0.0 (both variants), under the project ``name``; ``root``: their variant root
    (None: wheels of an older kernel-factory, without one)."""
    return [
        Record(filename=f"{name}-1.0.0+{i}-py3-none-any.whl", name=name, version=f"1.0.0+{i}", sha256="0" * 64,
               size=1, metadata_sha256="0" * 64, requires_python=None, upload_time="2025-04-07T10:00:00Z",
               kernel_version="1.0.0", label=str(i), variant=v, repo_id=REPO, revision=OLD, ref="v1.0.0",
               extra={"variant-root": root} if root else {})
        for i, v in enumerate(VARIANTS)
    ]


def test_older_wheels_in_the_store_are_kept_and_named() -> None:
    """Wheels made before the variant root are not built again under the same names; the plan says so."""
    plan = make_plan(opts(), held(root=None), statuses={})
    assert [(j.sha, j.variant) for j in plan.done] == [(OLD, v) for v in VARIANTS]
    assert plan.notes == [
        "note: 2 wheel(s) in the store were made by an older kernel-factory, without the whole build variant "
        "(kernels 0.18+ refuse them); they are kept, as new ones would have the same names and other bytes: to "
        "replace them, see docs/convert.md, 'A store that already holds older wheels'"]
    assert make_plan(opts(), held(), statuses={}).notes == []


@pytest.mark.parametrize("status", ["archived", "quarantined"])
def test_a_closed_project_takes_no_new_build(status: str) -> None:
    plan = make_plan(opts(), held(), statuses={"img2grey": Status(status, "no longer maintained")})
    assert plan.todo == [] and plan.refused == []
    assert [(j.sha, j.variant) for j in plan.done] == [(OLD, v) for v in VARIANTS]  # the store's wheels stay
    assert [(w.project, w.status.status, w.jobs) for w in plan.withheld] == [("img2grey", status, 2)]
    assert warning_lines(plan) == [
        f"img2grey: project status {status} (no longer maintained): 2 new build(s) left out of the plan (PEP 792: "
        "an archived or quarantined project takes no new files); `kernel-factory status img2grey active` builds "
        "it again"
    ]
    assert plan_lines(plan)[-1] == "plan: 0 to build, 2 already in the store, 0 refused, 2 left out by project status"
    assert plan.to_json()["withheld"] == [
        {"project": "img2grey", "status": status, "reason": "no longer maintained", "jobs": 2}
    ]


def test_active_and_other_projects_build() -> None:
    for statuses in ({}, {"img2grey": Status("active", "back")}, {"other": Status("archived")}):
        plan = make_plan(opts(), held(), statuses=statuses)
        assert [(j.sha, j.version) for j in plan.todo] == [(NEW, "1.1.0")] * 2
        assert plan.withheld == [] and warning_lines(plan) == [] and plan.notes == []


def test_deprecated_builds_with_a_note() -> None:
    plan = make_plan(opts(), held(), statuses={"img2grey": Status("deprecated", "use img2grey2")})
    assert len(plan.todo) == 2 and plan.withheld == [] and warning_lines(plan) == []
    assert plan.notes == ["img2grey: project status deprecated (use img2grey2): built as usual"]


def test_the_project_is_the_stores_wheel_name_not_the_repository_name() -> None:
    """metadata.json's 'name' names the project: its status counts, a project named like the repository does not."""
    statuses = {"img2grey": Status("archived")}
    assert len(make_plan(opts(), held("grey_kernels"), statuses=statuses).todo) == 2
    plan = make_plan(opts(), held("grey_kernels"), statuses={"grey-kernels": Status("quarantined")})
    assert plan.todo == [] and [w.project for w in plan.withheld] == ["grey-kernels"]


def test_a_repository_the_store_lacks_is_matched_by_its_name() -> None:
    plan = make_plan(opts(), [], statuses={"img2grey": Status("archived")})
    assert plan.todo == [] and [(w.project, w.jobs) for w in plan.withheld] == [("img2grey", 4)]


def test_the_status_is_read_from_the_store(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "project-status.json").write_bytes(to_bytes({"img2grey": Status("archived")}))
    plan = make_plan(opts(tmp_path), held())
    assert plan.todo == [] and [w.status for w in plan.withheld] == [Status("archived")]
    assert len(make_plan(opts(tmp_path), []).todo) == 4  # no records (to-wheel): no store, no status read


def test_a_damaged_status_file_stops_the_plan(tmp_path: Path) -> None:
    """Which projects take no new files is unknown: nothing is planned (exit 3, as index stops), the fix named."""
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "project-status.json").write_text('{"schema": 1, "projects": {"img2grey": {"status": "x"}}}')
    with pytest.raises(BadStatusFile) as caught:
        make_plan(opts(tmp_path), held())
    assert caught.value.exit_code == EXIT_REFUSED
    assert str(caught.value) == (
        f"{tmp_path}/files/project-status.json: img2grey: status 'x' is not one of active, archived, quarantined, "
        "deprecated; fix the file, or remove it and set each status again with `kernel-factory status PROJECT STATUS`"
    )


def test_a_misversioned_wheel_of_a_closed_project_is_not_said_to_be_rebuilt() -> None:
    """The store holds v1.1.0's revision under 1.0.9 (built before the tag): the plan would build 1.1.0 beside it
    and say so; an archived project builds nothing, so nothing claims it will."""
    wrong = [replace(r, kernel_version="1.0.9", revision=NEW, ref="v1") for r in held()[:1]]
    active = make_plan(opts(), wrong, statuses={})
    assert [r for r, _ in active.misversioned] == wrong and len(warning_lines(active)) == 1
    plan = make_plan(opts(), wrong, statuses={"img2grey": Status("archived")})
    assert plan.todo == [] and plan.misversioned == [] and [w.jobs for w in plan.withheld] == [4]
    assert len(warning_lines(plan)) == 1 and warning_lines(plan)[0].startswith("img2grey: project status archived")
