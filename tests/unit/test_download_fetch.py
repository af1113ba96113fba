"""download's transfer of one wheel and its choice of wheel (local/download/command.py's ``_fetch_wheel`` and
``_find``): the sha256 and size the index page gives, the limit, the HTTP answers, the record's hint, the provenance's
repository, commit and variant. The index is a folder (file:// links) or that folder served to a real requests
session through an adapter (no socket); the wheels are real zip files."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import requests
from download_kit import CPU, HTTP, LABEL, SHA1, SHA2, Index, env, files_of, http_session, kernel_wheel
from kernel_factory.errors import Refused, Unreachable
from kernel_factory.local.download import command as download
from kernel_factory.local.download.command import Got, _fetch_wheel, _find
from kernel_factory.local.download.depends import Want
from kernel_factory.local.which import Choice, candidates

DOCS = Path(__file__).resolve().parents[2] / "docs" / "download.md"


@pytest.fixture
def index(tmp_path: Path) -> Index:
    return Index(tmp_path / "index")


def choice_of(index: Index, url: str, project: str = "relu", session: object = None) -> Choice:
    found, _ = candidates(url, project, env(), session, yanked=True)
    return found[0]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- the transfer ------------------------------------------------------------------------------------------------


def test_a_local_wheel_is_copied_and_checked(index: Index, tmp_path: Path) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu")
    index.add(wheel)
    into = tmp_path / "into"
    into.mkdir()
    got = _fetch_wheel(choice_of(index, str(index.root)), str(index.root), None, into)
    assert got == into / wheel.name and got.read_bytes() == wheel.read_bytes()
    assert [p.name for p in into.iterdir()] == [wheel.name]


def test_a_page_without_sha256_is_refused_before_reading(index: Index, tmp_path: Path) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu")
    index.add(wheel, sha256=None)
    (index.root / "files" / wheel.name).unlink()  # never read
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(Refused) as info:
        _fetch_wheel(choice_of(index, str(index.root)), str(index.root), None, into)
    assert str(info.value) == (f"{index.root}/simple gives no sha256 for {wheel.name}; publish the index with "
                               "hashes")
    assert list(into.iterdir()) == []


@pytest.mark.parametrize("want", ["0" * 64, "f" * 64])  # below and above the wheel's own digest
def test_other_bytes_than_the_page_says_are_refused_and_removed(index: Index, tmp_path: Path, want: str) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu", variant=CPU)
    index.add(wheel, sha256=want)
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(Refused) as info:
        _fetch_wheel(choice_of(index, str(index.root)), str(index.root), None, into)
    assert str(info.value) == (
        f"{wheel.name}: sha256 {sha(wheel.read_bytes())[:16]}... is not the {want[:16]}... that "
        f"{index.root}/variants/{LABEL}/simple gives; nothing was installed: republish the wheel or check the mirror")
    assert list(into.iterdir()) == []


@pytest.mark.parametrize("less", [1, 0])
def test_the_size_the_page_gives_is_the_limit(index: Index, tmp_path: Path, less: int) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu")
    size = wheel.stat().st_size - less
    index.add(wheel, size=size)
    into = tmp_path / "into"
    into.mkdir()
    choice = choice_of(index, str(index.root))
    assert choice.wheel.size == size
    if not less:
        assert _fetch_wheel(choice, str(index.root), None, into).stat().st_size == size
        return
    with pytest.raises(Refused) as info:
        _fetch_wheel(choice, str(index.root), None, into)
    assert str(info.value) == (f"{wheel.name}: more than the {size} bytes the index page gives; nothing was "
                               "installed: republish the wheel or check the mirror")


def test_a_negative_size_on_the_page_sets_no_limit(index: Index, tmp_path: Path) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu")
    index.add(wheel, size=-1)
    into = tmp_path / "into"
    into.mkdir()
    choice = choice_of(index, str(index.root))
    assert choice.wheel.size == -1
    assert _fetch_wheel(choice, str(index.root), None, into).read_bytes() == wheel.read_bytes()


def test_a_size_of_zero_on_the_page_refuses_any_byte(index: Index, tmp_path: Path) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu")
    index.add(wheel, size=0)
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(Refused, match=f"^{re.escape(wheel.name)}: more than the 0 bytes the index page gives;"):
        _fetch_wheel(choice_of(index, str(index.root)), str(index.root), None, into)


@pytest.mark.parametrize("page_size", [None, "bigger"])
def test_max_wheel_is_the_limit_without_a_smaller_size(index: Index, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, page_size: object) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu")
    n = wheel.stat().st_size
    index.add(wheel, size=None if page_size is None else n + 1)
    into = tmp_path / "into"
    into.mkdir()
    choice = choice_of(index, str(index.root))
    monkeypatch.setattr(download, "MAX_WHEEL", n)
    assert _fetch_wheel(choice, str(index.root), None, into).stat().st_size == n
    (into / wheel.name).unlink()
    monkeypatch.setattr(download, "MAX_WHEEL", n - 1)
    with pytest.raises(Refused) as info:
        _fetch_wheel(choice, str(index.root), None, into)
    assert str(info.value) == (f"{wheel.name}: more than the {n - 1} bytes a wheel may have; nothing was installed: "
                               "republish the wheel or check the mirror")


def test_max_wheel_is_the_documented_4_gib() -> None:
    assert download.MAX_WHEEL == 4 * 1024 * 1024 * 1024 == 4294967296
    assert "`MAX_WHEEL` = 4 GiB" in " ".join(DOCS.read_text().split())


def test_a_missing_local_wheel_is_unreachable(index: Index, tmp_path: Path) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu")
    index.add(wheel)
    (index.root / "files" / wheel.name).unlink()
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(Unreachable) as info:
        _fetch_wheel(choice_of(index, str(index.root)), str(index.root), None, into)
    assert str(info.value) == f"--index-url: {index.root / 'files' / wheel.name} is missing; check the index"


def test_a_file_link_from_an_http_index_is_refused(tmp_path: Path) -> None:
    index = Index(tmp_path / "index")  # links are file:// URLs, the index is served over http
    wheel = kernel_wheel(tmp_path / "w", "relu")
    index.add(wheel)
    session, adapter = http_session(index.root)
    choice = choice_of(index, HTTP, session=session)
    with pytest.raises(Refused, match="which is not on the index's own origin; nothing is read from there"):
        _fetch_wheel(choice, HTTP, session, tmp_path)


# -- over http -------------------------------------------------------------------------------------------------


def http_index(tmp_path: Path) -> tuple[Index, Path]:
    index = Index(tmp_path / "index", HTTP)
    wheel = kernel_wheel(tmp_path / "w", "relu")
    index.add(wheel)
    into = tmp_path / "into"
    into.mkdir()
    return index, wheel


def test_an_http_wheel_is_streamed_and_checked(tmp_path: Path) -> None:
    index, wheel = http_index(tmp_path)
    session, adapter = http_session(index.root)
    choice = choice_of(index, HTTP, session=session)
    got = _fetch_wheel(choice, HTTP, session, tmp_path / "into")
    assert got.read_bytes() == wheel.read_bytes()
    url, how = adapter.gets[-1]
    assert url == f"{HTTP}/files/{wheel.name}"
    assert how["stream"] is True and how["timeout"] == 60  # a 4 GiB wheel is never held in memory


@pytest.mark.parametrize("code", [201, 404, 500])
def test_an_http_answer_other_than_200_is_unreachable(tmp_path: Path, code: int) -> None:
    index, wheel = http_index(tmp_path)
    session, _ = http_session(index.root, status={".whl": code})
    choice = choice_of(index, HTTP, session=session)
    with pytest.raises(Unreachable) as info:
        _fetch_wheel(choice, HTTP, session, tmp_path / "into")
    assert str(info.value) == f"--index-url: {HTTP}/files/{wheel.name} answered HTTP {code}; check the index"


def test_a_redirect_off_the_origin_is_refused(tmp_path: Path) -> None:
    index, wheel = http_index(tmp_path)
    elsewhere = f"http://idx.test:8080/files/{wheel.name}"
    session, adapter = http_session(index.root, redirect=elsewhere)
    choice = choice_of(index, HTTP, session=session)
    with pytest.raises(Refused) as info:
        _fetch_wheel(choice, HTTP, session, tmp_path / "into")
    assert str(info.value) == (f"{HTTP} links to {elsewhere}, which is not on the index's own origin; nothing is read "
                               "from there: fix the index")
    assert [u for u, _ in adapter.gets][-1] == f"{HTTP}/files/{wheel.name}"  # nothing was sent to the other port


def test_a_dropped_connection_is_unreachable(tmp_path: Path) -> None:
    index, wheel = http_index(tmp_path)
    session, _ = http_session(index.root, fail=requests.ConnectionError("reset"))
    choice = choice_of(index, HTTP, session=session)
    with pytest.raises(Unreachable) as info:
        _fetch_wheel(choice, HTTP, session, tmp_path / "into")
    assert str(info.value) == (f"--index-url: cannot download {HTTP}/files/{wheel.name} (ConnectionError); check the "
                               "network")


def test_an_http_wheel_past_its_size_is_refused(tmp_path: Path) -> None:
    index = Index(tmp_path / "index", HTTP)
    wheel = kernel_wheel(tmp_path / "w", "relu")
    index.add(wheel, size=wheel.stat().st_size - 1)
    session, _ = http_session(index.root)
    with pytest.raises(Refused, match=f"more than the {wheel.stat().st_size - 1} bytes the index page gives"):
        _fetch_wheel(choice_of(index, HTTP, session=session), HTTP, session, tmp_path)


# -- which wheel -------------------------------------------------------------------------------------------------


def find(index: Index, want: Want, tmp_path: Path, url: str | None = None, session: object = None
         ) -> tuple[Got | None, list[str]]:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    return _find(want, url or str(index.root), env(), tmp_path / "cache", session, lambda: scratch)


def test_the_locked_commits_wheel_is_found_unpacked_and_checked(index: Index, tmp_path: Path) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu", variant=CPU, depends=[{"repo-id": "org/dep", "version": 1}, "junk",
                                                                       5])
    index.add(wheel)
    want = Want("org/relu", SHA1, ("v1",))
    got, why = find(index, want, tmp_path)
    assert why == [] and got is not None
    assert got == Got(want, wheel.name, sha(wheel.read_bytes()), SHA1, CPU, [{"repo-id": "org/dep", "version": 1}],
                      got.folder, files_of(), "relu")
    assert got.folder is not None and got.folder.parent.parent == tmp_path / "scratch"
    assert sorted(p.name for p in got.folder.iterdir()) == ["__init__.py", "metadata.json"]
    assert list(got.folder.parent.iterdir()) == [got.folder]  # the wheel itself is gone


def test_a_kernel_the_index_lacks_is_one_line_with_a_hint(index: Index, tmp_path: Path) -> None:
    index.add(kernel_wheel(tmp_path / "w", "relu"))
    got, why = find(index, Want("org/relux", SHA1, why="kernel-depends of org/top"), tmp_path)
    assert got is None
    assert why == [f"org/relux (kernel-depends of org/top): {index.root} has no project relux (no simple/relux/ "
                   "page); did you mean relu?; publish it there or fix --index-url"]


def test_no_fitting_build_lists_the_builds_there_are(index: Index, tmp_path: Path) -> None:
    index.add(kernel_wheel(tmp_path / "w", "relu", variant="torch212-cxx11-cpu-x86_64-linux"))
    got, why = find(index, Want("org/relu", SHA1), tmp_path)
    assert got is None and why == [
        f"org/relu at {SHA1[:12]} (kernels.lock): no build on {index.root} fits {LABEL} on x86_64-linux; builds "
        "there are, nearest first:",
        "  torch212cpucxx11  manylinux_2_28_x86_64  1.0.0  (torch 2.12, cpu, cxx11)"]
    got, why = find(index, Want("org/relu", None, ("v2",), 2), tmp_path)
    assert got is None and why[0] == (f"org/relu version 2 (kernels.lock): no build on {index.root} fits {LABEL} on "
                                      "x86_64-linux; builds there are, nearest first:")


def test_an_unlocked_dependency_takes_the_newest_of_its_major(index: Index, tmp_path: Path) -> None:
    for version, revision in (("1.0.0", SHA1), ("1.1.0", SHA2), ("2.0.0", "4" * 40)):
        index.add(kernel_wheel(tmp_path / version, "relu", version, revision=revision))
    got, why = find(index, Want("org/relu", None, ("v1",), 1), tmp_path)
    assert why == [] and got is not None and (got.wheel, got.sha) == ("relu-1.1.0-py3-none-any.whl", SHA2)


def test_an_unlocked_dependency_in_the_cache_at_its_ref_is_not_downloaded(index: Index, tmp_path: Path) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu", revision=SHA2)
    index.add(wheel)
    want = Want("org/relu", None, ("v1",), 1)
    got, _ = find(index, want, tmp_path)
    assert got is not None and got.folder is not None
    download._place_all([got], tmp_path / "cache")
    (index.root / "files" / wheel.name).unlink()  # a second download would fail
    again, why = find(index, want, tmp_path)
    assert why == [] and again == Got(want, wheel.name, sha(wheel.read_bytes()), SHA2, "torch-universal", [])


def test_the_record_tells_which_wheels_to_leave_unread(index: Index, tmp_path: Path) -> None:
    newer = kernel_wheel(tmp_path / "a", "relu", "1.1.0", revision=SHA2)
    older = kernel_wheel(tmp_path / "b", "relu", "1.0.0", revision=SHA1)
    index.add(newer, record={"revision": SHA2})
    index.add(older, record={"revision": SHA1})
    (index.root / "files" / newer.name).unlink()  # never read: its record names another commit
    got, why = find(index, Want("org/relu", SHA1), tmp_path)
    assert why == [] and got is not None and got.wheel == older.name


@pytest.mark.parametrize("record", ["not json", "[1]", '{"revision": 5}', '{"other": 1}'])
def test_a_record_that_names_no_revision_is_no_hint(index: Index, tmp_path: Path, record: str) -> None:
    wheel = kernel_wheel(tmp_path / "w", "relu", revision=SHA1)
    index.add(wheel, record=record)
    got, why = find(index, Want("org/relu", SHA1), tmp_path)
    assert why == [] and got is not None and got.wheel == wheel.name


@pytest.mark.parametrize("code", [404, 500])
def test_a_record_that_cannot_be_read_is_no_hint(tmp_path: Path, code: int) -> None:
    index = Index(tmp_path / "index", HTTP)
    wheel = kernel_wheel(tmp_path / "w", "relu", revision=SHA1)
    index.add(wheel, record={"revision": SHA2})
    session, adapter = http_session(index.root, status={".json": code})
    got, why = find(index, Want("org/relu", SHA1), tmp_path, HTTP, session)
    assert why == [] and got is not None and got.wheel == wheel.name
    assert [u for u, _ in adapter.gets if u.endswith(".whl.json")] == [f"{HTTP}/files/{wheel.name}.json"]


def test_wheels_of_other_commits_are_passed_for_an_older_one_of_the_lock(index: Index, tmp_path: Path) -> None:
    """No records: each wheel's provenance decides; the scratch folder keeps only the chosen one's files."""
    index.add(kernel_wheel(tmp_path / "a", "relu", "1.1.0", revision=SHA2))
    older = kernel_wheel(tmp_path / "b", "relu", "1.0.0", revision=SHA1)
    index.add(older)
    got, why = find(index, Want("org/relu", SHA1), tmp_path)
    assert why == [] and got is not None and got.wheel == older.name
    assert got.folder is not None and list((tmp_path / "scratch").iterdir()) == [got.folder.parent]


def test_a_locked_commit_the_index_lacks_names_the_commits_it_has(index: Index, tmp_path: Path) -> None:
    index.add(kernel_wheel(tmp_path / "a", "relu", "1.1.0", revision=SHA2), record={"revision": SHA2})
    index.add(kernel_wheel(tmp_path / "b", "relu", "1.0.0", revision=SHA2))
    index.add(kernel_wheel(tmp_path / "c", "relu", "0.9.0", revision="4" * 40))
    got, why = find(index, Want("org/relu", SHA1), tmp_path)
    assert got is None and why == [
        f"org/relu at {SHA1[:12]} (kernels.lock): {index.root} has no build of that commit; the builds there that fit "
        f"{LABEL} on x86_64-linux are of other commits:",
        f"  {SHA2[:12]}  1.1.0", f"  {'4' * 12}  0.9.0",
        "  publish a build of the locked commit, or re-lock with `kernels lock`"]
    assert list((tmp_path / "scratch").iterdir()) == []


@pytest.mark.parametrize(("prov", "message"), [
    ({"repo_id": "evil/relu\x1b[0m"}, "relu-1.0.0-py3-none-any.whl comes from evil/relu\\x1b[0m, not org/relu; "
                                      "fix the index"),
    ({"repo_id": "zzz/relu"}, "relu-1.0.0-py3-none-any.whl comes from zzz/relu, not org/relu; fix the index"),
    ({"revision": "main"}, "relu-1.0.0-py3-none-any.whl: its kernel_factory.json names no commit; rebuild it from a "
                           "revision"),
    ({"revision": 7}, "relu-1.0.0-py3-none-any.whl: its kernel_factory.json names no commit; rebuild it from a "
                      "revision"),
    ({"variant": 5}, "relu-1.0.0-py3-none-any.whl: its kernel_factory.json names variant '5', whose label is not "
                     "the wheel's; rebuild it"),
    ({"variant": "../x"}, "relu-1.0.0-py3-none-any.whl: its kernel_factory.json names variant '../x', whose label "
                          "is not the wheel's; rebuild it"),
    ({"variant": CPU}, f"relu-1.0.0-py3-none-any.whl: its kernel_factory.json names variant '{CPU}', whose label "
                       "is not the wheel's; rebuild it"),
])  # fmt: skip
def test_a_provenance_that_does_not_fit_is_refused(index: Index, tmp_path: Path, prov: dict[str, object],
                                                   message: str) -> None:
    index.add(kernel_wheel(tmp_path / "w", "relu", prov=prov))
    with pytest.raises(Refused) as info:
        find(index, Want("org/relu", None, ("v1",), 1), tmp_path)
    assert str(info.value) == message


def test_the_locks_hashes_are_checked(index: Index, tmp_path: Path) -> None:
    index.add(kernel_wheel(tmp_path / "w", "relu"))
    want = Want("org/relu", SHA1, hashes=(("torch-universal", "sha256-" + "0" * 64),))
    with pytest.raises(Refused, match="its files do not match the kernels.lock hash of org/relu torch-universal"):
        find(index, want, tmp_path)
