"""Property-based tests: parsers of hostile input raise only FactoryError subclasses; round trips hold."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from hypo_kit import accepted, must_accept
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kernel_factory import variants, versions
from kernel_factory.errors import BadKernel, FactoryError, UnknownVariant, UnsafePath, UsageError
from kernel_factory.record import Record
from kernel_factory.sources.base import Refs
from kernel_factory.verify import metadata as kernelmeta
from kernel_factory.wheel import distinfo as wheel
from packaging.version import Version

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- build-variant names ---------------------------------------------------------------------------------
FRAMEWORKS = st.one_of(
    st.builds(lambda mi, abi: f"torch2{mi}{abi}", st.integers(0, 19), st.sampled_from(["", "-cxx11", "-cxx98"])),
    st.builds(lambda mi: f"torch-stable-abi2{mi}", st.integers(0, 19)),
    st.builds(lambda mi: f"tvm-ffi0{mi}", st.integers(0, 9)),
)
BACKENDS = st.one_of(
    st.builds(lambda v: f"cu{v}", st.sampled_from([118, 121, 124, 126, 128, 129, 130, 132])),
    st.builds(lambda v: f"rocm{v}", st.sampled_from([61, 63, 64, 70, 71, 72])),
    st.sampled_from(["cpu", "metal", "xpu20252", "neuron", "tpu", "cann81"]),
)
PLATFORMS = st.sampled_from(["x86_64-linux", "aarch64-linux", "aarch64-darwin", "x86_64-windows", "x86_64-darwin"])
NOARCH = st.builds(lambda b: f"torch-{b}", st.sampled_from(list(variants.NOARCH_BACKENDS) + ["bogus", ""]))
NEAR_VALID = st.one_of(
    st.builds(lambda f, b, p: f"{f}-{b}-{p}", FRAMEWORKS, BACKENDS, PLATFORMS),
    NOARCH,
)


def mutate(name: str, data: st.DataObject) -> str:
    """Drop, double or replace one character, or join with junk."""
    how = data.draw(st.sampled_from(["keep", "drop", "double", "replace", "prefix", "suffix"]))
    if how == "keep" or not name:
        return name
    i = data.draw(st.integers(0, len(name) - 1))
    junk = data.draw(st.text(min_size=1, max_size=3))
    return {
        "drop": name[:i] + name[i + 1:],
        "double": name[:i] + name[i] + name[i:],
        "replace": name[:i] + junk + name[i + 1:],
        "prefix": junk + name,
        "suffix": name + junk,
    }[how]


@must_accept(50)
@SETTINGS
@given(st.one_of(st.text(), NEAR_VALID))
def test_variant_parse_any_text(text: str) -> None:
    try:
        target = variants.parse(text)
    except UnknownVariant:
        return
    assert target.variant == text
    accepted("test_variant_parse_any_text")


@SETTINGS
@given(NEAR_VALID, st.data())
def test_variant_parse_near_valid(name: str, data: st.DataObject) -> None:
    name = mutate(name, data)
    try:
        target = variants.parse(name)
    except UnknownVariant as exc:
        assert "\n" not in str(exc) or "\n" in name
        return
    assert target.variant == name
    if target.label is not None:
        assert Version(f"1.0+{target.label}").local == target.label.lower()
    wheel.wheel_filename("k", target.local_version("1.0"), target.tag)  # a valid wheel name


@must_accept(100)
@settings(max_examples=40, deadline=None)
@given(st.lists(NEAR_VALID, min_size=2, max_size=30, unique=True))
def test_label_and_tag_unique_per_variant(names: list[str]) -> None:
    """Two distinct variants never give the same wheel version label and platform tag."""
    seen: dict[tuple[str | None, str], str] = {}
    for name in names:
        try:
            target = variants.parse(name)
        except UnknownVariant:
            continue
        key = (target.label, target.tag)
        assert key not in seen, f"{name} and {seen[key]} both give {key}"
        seen[key] = name
        accepted("test_label_and_tag_unique_per_variant")


# -- versions ---------------------------------------------------------------------------------------------
REF_NAMES = st.one_of(
    st.text(max_size=12),
    st.builds(lambda n: f"v{n}", st.text(alphabet="0123456789.²٣abc+-<>", max_size=8)),
    st.builds(lambda a, b, c: f"v{a}.{b}.{c}", st.integers(0, 20), st.integers(0, 20), st.integers(0, 20)),
    st.builds(lambda n: f"v{n}", st.integers(0, 3)),  # major branches
)
MATCHING = st.sampled_from(["all", ">=0", "0", "1", "2", ">=1,<3", "<10"])  # requests that often find something
ASKED = st.one_of(st.text(max_size=12), REF_NAMES, MATCHING, MATCHING)
SHA = st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)


@SETTINGS
@given(st.one_of(st.text(), st.integers(-5, 10**6)))
def test_parse_request_any_text(value: str | int) -> None:
    try:
        request = versions.parse_request(value)
    except UsageError:
        return
    assert request.kind in ("tag", "major", "specifier", "all")


@must_accept(10)
@SETTINGS
@given(st.dictionaries(REF_NAMES, SHA, max_size=6), st.dictionaries(REF_NAMES, SHA, max_size=6),
       ASKED)
def test_select_any_refs(branches: dict[str, str], tags: dict[str, str], asked: str) -> None:
    refs = Refs(branches=branches, tags=tags)
    try:
        request = versions.parse_request(asked.removeprefix("v"))
        chosen = versions.select(refs, request, "org/k")
    except FactoryError:
        return
    for sel in chosen:
        assert sel.sha in set(branches.values()) | set(tags.values())
        assert sel.version is None or Version(sel.version) is not None
    if chosen:
        accepted("test_select_any_refs")


# -- metadata.json ----------------------------------------------------------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
KEYS = st.sampled_from(["name", "version", "license", "upstream", "python-depends", "python-depends-backends",
                        "kernel-depends", "backend", "digest", "id", "provenance"])


@SETTINGS
@given(JSON)
def test_metadata_any_json_value(value: Any) -> None:
    try:
        meta = kernelmeta.parse(json.dumps(value).encode(), "build/x")
    except BadKernel:
        return
    assert isinstance(value, dict)
    assert meta.name is None or isinstance(meta.name, str)


@SETTINGS
@given(st.dictionaries(KEYS, JSON, max_size=8), st.dictionaries(st.sampled_from(["type", "archs"]), JSON))
def test_metadata_known_keys_wrong_types(value: dict[str, Any], backend: dict[str, Any]) -> None:
    if backend:
        value["backend"] = backend
    try:
        meta = kernelmeta.parse(json.dumps(value).encode(), "build/x")
    except BadKernel:
        return
    assert all(isinstance(a, str) for a in meta.archs)
    assert all(isinstance(d, str) for d in meta.python_depends)
    assert meta.digest is None or meta.digest_hash is not None


@SETTINGS
@given(st.binary(max_size=200))
def test_metadata_any_bytes(raw: bytes) -> None:
    try:
        kernelmeta.parse(raw, "build/x")
    except BadKernel:
        pass


def test_metadata_deep_nesting() -> None:
    for depth in (17, 1000, 100_000):
        for raw in (b'{"a":' + b"[" * depth + b"]" * depth + b"}", b'{"a":' * depth + b"1" + b"}" * depth):
            try:
                kernelmeta.parse(raw, "build/x")
            except BadKernel as exc:
                assert "nests" in str(exc)
            else:
                raise AssertionError(f"depth {depth} accepted")


# -- wheel names and entries ------------------------------------------------------------------------------
@SETTINGS
@given(st.text(max_size=30), st.text(max_size=12), st.one_of(st.none(), st.text(max_size=12)))
def test_wheel_names_any_text(name: str, version: str, label: str | None) -> None:
    try:
        dist = wheel.dist_name(name, "build/x")
        full = wheel.full_version(f"{version}+{label}" if label else version, "build/x")
    except BadKernel:
        return
    filename = wheel.wheel_filename(dist, full, "py3-none-any")
    assert "/" not in filename and "<" not in filename and "\\" not in filename


@must_accept(100)
@SETTINGS
@given(st.text(max_size=20))
def test_entry_names(name: str) -> None:
    from kernel_factory.wheel.convert import _entry_name

    assume(name)
    try:
        kept = _entry_name(name, "pkg/", "build/x")
    except UnsafePath:
        return
    assert kept == name and kept not in (".", "..") and "\\" not in kept and "\n" not in kept
    kept.encode("utf-8")
    accepted("test_entry_names")


# -- store records ----------------------------------------------------------------------------------------
TEXT = st.text(max_size=20)
OPT = st.one_of(st.none(), TEXT)
RECORDS = st.builds(
    Record,
    filename=TEXT, name=TEXT, version=TEXT, sha256=TEXT, size=st.integers(0, 2**40), metadata_sha256=TEXT,
    requires_python=OPT, upload_time=TEXT, summary=TEXT, requires_dist=st.lists(TEXT, max_size=3).map(tuple),
    yanked=st.one_of(st.booleans(), TEXT), kind=st.sampled_from(["kernel", "adopted"]), kernel_version=OPT,
    label=OPT, variant=OPT, repo_id=OPT, source=OPT, revision=OPT, ref=OPT, backend=OPT,
    archs=st.lists(TEXT, max_size=3).map(tuple), digest=OPT,
    extra=st.dictionaries(TEXT, st.one_of(st.integers(), TEXT, st.booleans()), max_size=3),
)


@SETTINGS
@given(RECORDS)
def test_record_round_trip(record: Record) -> None:
    assert Record.from_json(record.to_json()) == record
    assert record.to_json() == (json.dumps(asdict(record), sort_keys=True, separators=(",", ":")) + "\n").encode()
    # records written before (indented) still load
    assert Record.from_json((json.dumps(asdict(record), indent=2, sort_keys=True) + "\n").encode()) == record
