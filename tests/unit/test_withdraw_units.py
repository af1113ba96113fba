"""Withdraw and retain, unit by unit: yank specs, project status (PEP 792) on the pages, prune rules and journal,
and the publish manifest's checks."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pytest
from kernel_factory.errors import Refused, UsageError, VersionNotFound
from kernel_factory.index.pages import Withdrawals
from kernel_factory.publish.base import LocalFile
from kernel_factory.publish.withdrawals import carry, manifest_bytes, manifest_path, parse_manifest
from kernel_factory.record import Record
from kernel_factory.store import retain
from kernel_factory.store.local import LocalStore as LocalFiles
from kernel_factory.store.status import (
    BadStatusFile,
    Status,
    check_reason,
    check_status,
    parse,
    read_statuses,
    write_statuses,
)
from kernel_factory.store.withdraw import mark, parse_spec, select, yanked_value
from test_index_pages import CPU, CU, rec, render

NAME_CU = "img2grey-1.1.2+torch27cu128cxx11-cp39-abi3-linux_x86_64.whl"


RECORDS = [
    rec("img2grey", "1.0.7", CU), rec("img2grey", "1.0.7", CPU),
    rec("img2grey", "1.1.0", CU), rec("img2grey", "1.1.2", CU), rec("img2grey", "1.1.2", CPU),
    rec("My_Kernel", "0.1.0", CU),
]  # fmt: skip


def names(records: list[Record]) -> list[str]:
    return [r.filename for r in records]


# --- yank specs ---------------------------------------------------------------------------------------------


def test_exact_version_matches_every_label() -> None:
    """PEP 440: ``==1.1.2`` ignores a candidate's local label, so every variant of 1.1.2 is named."""
    found = select(RECORDS, parse_spec("img2grey==1.1.2"), "store")
    assert [r.version for r in found] == ["1.1.2+torch213cpucxx11", "1.1.2+torch27cu128cxx11"]


def test_label_pins_one_variant() -> None:
    found = select(RECORDS, parse_spec("img2grey==1.1.2+torch27cu128cxx11"), "store")
    assert names(found) == [NAME_CU]


def test_specifier_and_any_spelling() -> None:
    found = select(RECORDS, parse_spec("IMG2GREY<1.1"), "store")
    assert sorted(r.version for r in found) == ["1.0.7+torch213cpucxx11", "1.0.7+torch27cu128cxx11"]
    assert names(select(RECORDS, parse_spec("my.kernel==0.1.0"), "store")) == [RECORDS[-1].filename]


def test_unknown_project_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no project 'nope' in the store S"):
        select(RECORDS, parse_spec("nope==1.0"), "S")


def test_spec_matching_nothing_names_the_versions() -> None:
    with pytest.raises(VersionNotFound, match=r"'img2grey>=2' matches no wheel of img2grey in S \(its versions: "
                                              r"1\.0\.7, 1\.1\.0, 1\.1\.2\)"):  # fmt: skip
        select(RECORDS, parse_spec("img2grey>=2"), "S")


@pytest.mark.parametrize("text", ["img2grey", "img2grey[x]==1", "img2grey==1; python_version>'3'", "==1", "a b"])
def test_bad_specs_refused(text: str) -> None:
    with pytest.raises(UsageError, match="img2grey==1.1.2"):
        parse_spec(text)


def test_reason_one_line() -> None:
    assert check_reason("bad build") == "bad build"
    assert check_reason(None) == ""
    for text in ("one\ntwo", "a\x07", "tab\there"):
        with pytest.raises(UsageError, match="no control characters"):
            check_reason(text)
    with pytest.raises(UsageError, match="at most 4096"):
        check_reason("x" * 4097)


def test_yanked_value() -> None:
    assert yanked_value("why", True) == "why"
    assert yanked_value("", True) is True
    assert yanked_value("why", False) is False


def test_mark_writes_changed_records_only(tmp_path: Path) -> None:
    """The record file is changed in place of its bytes' meaning only: a key this version does not know stays."""
    (tmp_path / "files").mkdir()
    one, two = RECORDS[3], replace(RECORDS[4], yanked="bad")
    for r in (one, two):
        raw = json.loads(r.to_json())
        raw["future_field"] = {"kept": True}
        (tmp_path / "files" / f"{r.filename}.json").write_text(json.dumps(raw, indent=2))
    before = (tmp_path / "files" / f"{two.filename}.json").read_bytes()
    changed, same = mark(LocalFiles(tmp_path), [one, two], "bad")
    assert (names(changed), names(same)) == ([one.filename], [two.filename])
    assert changed[0].yanked == "bad"
    written = json.loads((tmp_path / "files" / f"{one.filename}.json").read_bytes())
    assert written == {**json.loads(one.to_json()), "yanked": "bad", "future_field": {"kept": True}}
    assert (tmp_path / "files" / f"{two.filename}.json").read_bytes() == before


def test_mark_refuses_a_record_changed_meanwhile(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    one = RECORDS[3]
    (tmp_path / "files" / f"{one.filename}.json").write_bytes(replace(one, sha256="c" * 64).to_json())
    with pytest.raises(Refused, match="changed while it was read"):
        mark(LocalFiles(tmp_path), [one], True)


# --- project status -----------------------------------------------------------------------------------------


def test_status_round_trip(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    write_statuses(LocalFiles(tmp_path), {"img2grey": Status("quarantined", "malware"), "other": Status("active")})
    assert read_statuses(LocalFiles(tmp_path)) == {"img2grey": Status("quarantined", "malware")}
    assert json.loads((tmp_path / "files" / "project-status.json").read_bytes()) == {
        "projects": {"img2grey": {"reason": "malware", "status": "quarantined"}}, "schema": 1}


def test_status_words_checked() -> None:
    assert check_status("archived", None) == Status("archived")
    with pytest.raises(UsageError, match="expected one of active, archived, quarantined, deprecated"):
        check_status("retired", None)


@pytest.mark.parametrize(("data", "why"), [
    (b"{", "not JSON"),
    (b'{"schema": 2, "projects": {}}', "not a status file of schema 1"),
    (b'{"schema": 1, "projects": {"Img2Grey": {"status": "archived"}}}', "not a normalized project name"),
    (b'{"schema": 1, "projects": {"a": {"status": "gone"}}}', "status 'gone' is not one of"),
    (b'{"schema": 1, "projects": {"a": {"status": "archived", "reason": "a\\u0007"}}}', "not one line"),
    (b'{"schema": 1, "projects": {"a": {"status": "archived", "by": "x"}}}', "expected"),
])  # fmt: skip
def test_damaged_status_file_refused(data: bytes, why: str) -> None:
    with pytest.raises(BadStatusFile, match=why):
        parse(data, "S")


def test_status_file_link_refused(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "elsewhere.json").write_text('{"schema": 1, "projects": {}}')
    (tmp_path / "files" / "project-status.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(BadStatusFile, match="a symbolic link"):
        read_statuses(LocalFiles(tmp_path))


def test_quarantined_pages_offer_no_file() -> None:
    pages = render(RECORDS, None, withdrawals=Withdrawals({"img2grey": Status("quarantined", "wrong <results>")}))
    data = json.loads(pages["simple/img2grey/index.json"])
    assert data["files"] == [] and data["versions"] == []
    assert data["project-status"] == {"status": "quarantined", "reason": "wrong <results>"}
    assert data["meta"] == {"api-version": "1.4"}
    html = pages["variants/torch27cu128cxx11/simple/img2grey/index.html"].decode()
    assert '<meta name="pypi:project-status" content="quarantined">\n' in html
    assert '<meta name="pypi:project-status-reason" content="wrong &lt;results&gt;">\n' in html
    assert "<a href" not in html
    assert json.loads(pages["variants/torch27cu128cxx11/simple/img2grey/index.json"])["project-status"] == {
        "status": "quarantined", "reason": "wrong <results>"}
    assert b"files/img2grey" not in pages["projects/img2grey/index.html"]
    assert b'class="badge status-quarantined"' in pages["index.html"]
    other = json.loads(pages["simple/my-kernel/index.json"])  # another project: untouched
    assert "project-status" not in other and other["meta"] == {"api-version": "1.1"}


def test_archived_pages_keep_their_files() -> None:
    before = render(RECORDS, None)
    pages = render(RECORDS, None, withdrawals=Withdrawals({"img2grey": Status("archived")}))
    data = json.loads(pages["simple/img2grey/index.json"])
    assert data["project-status"] == {"status": "archived"}
    assert data["files"] == json.loads(before["simple/img2grey/index.json"])["files"]
    assert b'content="archived"' in pages["simple/img2grey/index.html"]
    assert b"project-status-reason" not in pages["simple/img2grey/index.html"]
    assert pages["simple/my-kernel/index.json"] == before["simple/my-kernel/index.json"]


def test_user_project_template_gets_the_status(tmp_path: Path) -> None:
    """A templates folder's project.html renders the status as the shipped one writes it."""
    from kernel_factory.index.pages import TEMPLATES

    (tmp_path / "project.html").write_bytes((TEMPLATES / "project.html").read_bytes())
    found = Withdrawals({"img2grey": Status("deprecated", "use img2grey2")})
    shipped = render(RECORDS, None, withdrawals=found)["simple/img2grey/index.html"]
    assert render(RECORDS, tmp_path, withdrawals=found)["simple/img2grey/index.html"] == shipped
    assert b'<meta name="pypi:project-status-reason" content="use img2grey2">' in shipped


def test_pending_wheels_left_out_of_every_page() -> None:
    pages = render(RECORDS, None, withdrawals=Withdrawals(pending=frozenset({NAME_CU})))
    assert all(NAME_CU.encode() not in page and b"1.1.2%2Btorch27cu128cxx11" not in page for page in pages.values())
    assert b"img2grey-1.1.2%2Btorch213cpucxx11" in pages["simple/img2grey/index.html"]


# --- prune rules --------------------------------------------------------------------------------------------


def series(*versions: str, times: dict[str, str] | None = None, **kw: object) -> list[Record]:
    times = times or {}
    return [replace(rec("img2grey", v, CU, **kw), upload_time=times.get(v, "2026-01-02T03:04:05Z")) for v in versions]


def removed(records: list[Record], rules: retain.Rules) -> list[str]:
    return sorted({r.kernel_version or "" for r in retain.plan(records, rules).remove}, key=lambda v: v)


def test_keep_per_major() -> None:
    records = series("1.0.1", "1.0.2", "1.0.3", "1.1.0", "2.0.0", "2.0.1")
    assert removed(records, retain.Rules(keep_per_major=2)) == ["1.0.1", "1.0.2"]
    assert removed(records, retain.Rules(keep_per_major=1)) == ["1.0.1", "1.0.2", "1.0.3", "2.0.0"]


def test_never_the_newest() -> None:
    records = series("1.0.1", "1.0.2")
    found = retain.plan(records, retain.Rules(keep_since=dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)))
    assert [r.kernel_version for r in found.remove] == ["1.0.1"]
    assert found.kept == {"img2grey 1.0.2": ["newest"]}


def test_keep_since() -> None:
    times = {"1.0.1": "2025-12-01T00:00:00Z", "1.0.2": "2026-02-01T00:00:00Z", "1.0.3": "2026-03-01T00:00:00Z"}
    records = series("1.0.1", "1.0.2", "1.0.3", times=times)
    since = retain.parse_since("2026-02-01", "--keep-since")
    assert removed(records, retain.Rules(keep_since=since)) == ["1.0.1"]
    now = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    assert retain.parse_since("30d", "x", now) == dt.datetime(2026, 1, 31, tzinfo=dt.timezone.utc)
    with pytest.raises(UsageError, match="expected a date like 2026-01-31 or a number of days like 90d"):
        retain.parse_since("soon", "--keep-since")


def test_locked_versions_kept() -> None:
    records = [*series("1.0.1", repo_id="kernels-community/img2grey", revision="a" * 40),
               *series("1.0.2", "1.0.3", repo_id="kernels-community/img2grey", revision="b" * 40)]
    rules = retain.Rules(keep_per_major=1, locked=frozenset({("kernels-community/img2grey", "a" * 40)}))
    found = retain.plan(records, rules)
    assert [r.kernel_version for r in found.remove] == ["1.0.2"]
    assert found.kept == {"img2grey 1.0.3": ["newest", "keep-per-major 1"], "img2grey 1.0.1": ["locked"]}


def test_bytes_counted_from_the_files(tmp_path: Path) -> None:
    records = series("1.0.1", "1.0.2")
    victim = records[0]
    (tmp_path / victim.filename).write_bytes(b"x" * 1000)
    (tmp_path / f"{victim.filename}.metadata").write_bytes(b"x" * 20)
    (tmp_path / f"{victim.filename}.json").write_bytes(b"x" * 3)
    assert retain.plan(records, retain.Rules(keep_per_major=1), tmp_path).bytes == 1023
    assert retain.plan(records, retain.Rules(keep_per_major=1)).bytes == victim.size


@pytest.mark.parametrize("value", [0, "0", -1, "x", True, 1.5])
def test_keep_count_checked(value: object) -> None:
    with pytest.raises(UsageError, match="expected a number of versions of at least 1"):
        retain.parse_keep(value, "--keep-per-major")


def test_journal_round_trip_and_removal(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    for name in (NAME_CU, f"{NAME_CU}.metadata", f"{NAME_CU}.json"):
        (files / name).write_bytes(b"x")
    retain.write_pending(LocalFiles(tmp_path), [NAME_CU])
    assert retain.read_journal(LocalFiles(tmp_path))[0] == {NAME_CU}
    assert retain.remove(LocalFiles(tmp_path), retain.read_journal(LocalFiles(tmp_path))[0]) == [NAME_CU]
    assert sorted(p.name for p in files.iterdir()) == []
    assert retain.read_journal(LocalFiles(tmp_path))[0] == frozenset()


@pytest.mark.parametrize("data", [b"[", b'{"schema": 1, "wheels": ["../x.whl"]}', b'{"schema": 1, "wheels": "a"}',
                                  b'{"wheels": []}', b'{"schema": 1, "wheels": [], "rendered": 1}'])  # fmt: skip
def test_damaged_journal_refused(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / retain.JOURNAL).write_bytes(data)
    with pytest.raises(Refused, match="damaged"):
        retain.read_journal(LocalFiles(tmp_path))[0]


# --- publish manifest ---------------------------------------------------------------------------------------


def test_manifest_keeps_plain_paths_only() -> None:
    data = json.dumps({"schema": 1, "files": {"files/a.whl": 3, "../x": 1, "/etc/passwd": 1, "a/./b": 1,
                                              "files/.hidden": 1, "simple/a\\b": 1, "ok/page": -1}}).encode()
    assert parse_manifest(data) == {"files/a.whl": 3}
    assert parse_manifest(manifest_bytes({"b": 1, "a": 2}, "d")) == {"a": 2, "b": 1}
    assert parse_manifest(b"{") == {} and parse_manifest(None) == {}


class Recorder:
    """A destination that can delete: records what it is asked to remove, in order."""

    display = "/nowhere/site"

    def __init__(self, refuse: set[str] | None = None) -> None:
        self.asked: list[tuple[str, int]] = []
        self.refuse = refuse or set()

    def remove(self, rel: str, size: int) -> bool:
        self.asked.append((rel, size))
        return rel not in self.refuse


def local(root: Path, rel: str, size: int = 1) -> LocalFile:
    return LocalFile(rel, root / rel, size)


def test_carry_deletes_pages_first_and_keeps_the_list(tmp_path: Path) -> None:
    """Stale pages (deepest first), then records, then .metadata, then wheels; a file the destination will not
    remove (changed since) is left there and off the list, and a dry run deletes nothing."""
    dest = Recorder(refuse={"files/b.whl.json"})
    old = {"files/a.whl": 5, "files/b.whl": 6, "files/b.whl.metadata": 7, "files/b.whl.json": 8,
           "variants/x/simple/b/index.html": 9, "variants/x/simple/index.html": 10, "index.html": 11}
    write_bytes_at = manifest_path(tmp_path, dest.display)
    write_bytes_at.parent.mkdir()
    write_bytes_at.write_bytes(manifest_bytes(old, dest.display))
    files = [local(tmp_path, "files/a.whl", 5), local(tmp_path, "index.html", 12)]
    lines: list[str] = []
    assert carry(tmp_path, dest, files, set(), dry_run=True, out=lines.append) == [
        "variants/x/simple/b/index.html", "variants/x/simple/index.html", "files/b.whl.json",
        "files/b.whl.metadata", "files/b.whl"]
    assert dest.asked == [] and lines[0] == "would remove variants/x/simple/b/index.html (withdrawn from the store)"
    removed = carry(tmp_path, dest, files, {"files/a.whl", "index.html"}, dry_run=False, out=lines.append)
    assert dest.asked == [("variants/x/simple/b/index.html", 9), ("variants/x/simple/index.html", 10),
                          ("files/b.whl.json", 8), ("files/b.whl.metadata", 7), ("files/b.whl", 6)]
    assert removed == ["variants/x/simple/b/index.html", "variants/x/simple/index.html", "files/b.whl.metadata",
                       "files/b.whl"]
    assert parse_manifest(write_bytes_at.read_bytes()) == {"files/a.whl": 5, "index.html": 12}


class Endpoint:
    """A destination that cannot delete (an upload endpoint)."""

    display = "http://127.0.0.1:9/"


def test_carry_to_an_endpoint_names_withdrawn_wheels_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = local(tmp_path, "files/a.whl", 5)
    assert carry(tmp_path, Endpoint(), [wheel], {"files/a.whl"}, dry_run=False, out=print) == []
    assert carry(tmp_path, Endpoint(), [], set(), dry_run=False, out=print) == []
    assert capsys.readouterr().err == ("warning: 1 file(s) this store withdrew are still at http://127.0.0.1:9/, and "
                                       "the upload API cannot delete: remove them on the server (docs/withdraw.md, "
                                       '"Upload endpoints"): a.whl\n')  # fmt: skip
    assert carry(tmp_path, Endpoint(), [], set(), dry_run=False, out=print) == []
    assert capsys.readouterr().err == ""


def test_named_removal_never_newest_nor_locked() -> None:
    records = [*series("1.0.1", repo_id="kernels-community/img2grey", revision="a" * 40),
               *series("1.0.2", "1.0.3", repo_id="kernels-community/img2grey", revision="b" * 40)]
    assert [r.kernel_version for r in retain.plan_named(records, records[1:2], frozenset()).remove] == ["1.0.2"]
    with pytest.raises(Refused, match="img2grey 1.0.3 is the project's newest version"):
        retain.plan_named(records, records[2:], frozenset())
    with pytest.raises(Refused, match=f"img2grey 1.0.1 is pinned by a kernels.lock .* \\(commit {'a' * 40}\\)"):
        retain.plan_named(records, records[:2], frozenset({("kernels-community/img2grey", "a" * 40)}))
