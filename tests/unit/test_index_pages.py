"""Rendering the static index from records: PEP 503/691/658/700 details, variants, escaping, determinism."""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from index_synth import index_pages
from kernel_factory.index.command import build_index
from kernel_factory.index.landing import quoted
from kernel_factory.index.pages import (
    DEFAULT_BASE_URL,
    NO_WITHDRAWALS,
    Withdrawals,
    environment,
    project_pages,
    simple_json,
)
from kernel_factory.record import Record, version_key
from kernel_factory.store.catalog import Catalog, CatalogDamaged
from kernel_factory.variants import parse

SHA = "a" * 64


def render(
    records: list[Record], templates: Path | None, base_url: str = DEFAULT_BASE_URL,
    withdrawals: Withdrawals = NO_WITHDRAWALS,
) -> dict[str, bytes]:  # fmt: skip
    """Every page of the index of ``records`` as they are (a catalog takes them unchecked), built into a fresh
    index root by the real entry point; ``withdrawals``: what the store says beside the records."""
    catalog = Catalog()
    catalog.apply([(r.filename, r, None) for r in records], ())
    with tempfile.TemporaryDirectory() as tmp:
        build_index(Path(tmp), catalog, templates, base_url.rstrip("/"), withdrawals=withdrawals)
        return index_pages(Path(tmp))

META = "b" * 64


def rec(name: str, version: str, variant: str | None, **kw: object) -> Record:
    """A kernel record for ``variant`` (None: an adopted wheel)."""
    if variant is None:
        fields: dict[str, object] = dict(kind="adopted")
        full, tag = version, "py3-none-any"
    else:
        t = parse(variant)
        full, tag = t.local_version(version), t.tag
        fields = dict(
            kind="kernel", kernel_version=version, label=t.label, variant=variant, backend=t.backend,
            backend_version=t.backend_version, framework=t.framework, framework_version=t.framework_version,
            os=t.os, arch=t.arch, repo_id=f"kernels-community/{name}",
        )  # fmt: skip
    fields = {"requires_python": ">=3.9", **fields, **kw}
    dist = name.replace("-", "_").lower()
    return Record(
        filename=f"{dist}-{full}-{tag}.whl", name=name, version=full, sha256=SHA, size=123,
        metadata_sha256=META, upload_time="2026-01-02T03:04:05Z", **fields,  # type: ignore[arg-type]
    )  # fmt: skip


CU = "torch27-cxx11-cu128-x86_64-linux"
CU210 = "torch210-cxx11-cu128-x86_64-linux"
CPU = "torch213-cxx11-cpu-x86_64-linux"
ROCM = "torch210-cxx11-rocm70-x86_64-linux"


@pytest.fixture
def records() -> list[Record]:
    return [
        rec("img2grey", "1.1.2", CU),
        rec("img2grey", "1.1.2", CU210),
        rec("img2grey", "1.1.2", CPU),
        rec("img2grey", "1.1.2", ROCM),
        rec("img2grey", "1.1.0", CPU),
        rec("img2grey", "1.1.2", "torch-cuda"),
        rec("img2grey", "1.1.2", "torch-universal"),
        rec("My_Kernel", "0.1.0", CU),
        rec("helper-lib", "2.0", None),
    ]


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs))


def links(page: bytes) -> list[dict[str, str | None]]:
    p = Links()
    p.feed(page.decode())
    return p.links


def test_layout(records: list[Record]) -> None:
    pages = render(records, None)
    expected = (
        "index.html",
        "simple/index.html",
        "simple/index.json",
        "simple/img2grey/index.html",
        "simple/my-kernel/index.json",
        "variants/torch27cu128cxx11/simple/img2grey/index.json",
        "variants/torch213cpucxx11/simple/index.html",
        "variants/cuda/simple/img2grey/index.html",
    )
    for path in expected:
        assert path in pages, path
    assert "simple/My_Kernel/index.html" not in pages


def test_project_page_pep503_details(records: list[Record]) -> None:
    pages = render(records, None)
    page = pages["simple/img2grey/index.html"]
    assert b'<meta name="pypi:repository-version" content="1.1">' in page
    found = {a["href"]: a for a in links(page)}
    href = f"../../files/img2grey-1.1.2%2Btorch27cu128cxx11-cp39-abi3-linux_x86_64.whl#sha256={SHA}"
    assert href in found
    a = found[href]
    assert a["data-requires-python"] == ">=3.9"
    assert a["data-core-metadata"] == f"sha256={META}"
    assert a["data-dist-info-metadata"] == f"sha256={META}"
    assert "data-yanked" not in a
    assert b"&gt;=3.9" in page  # html-escaped in the attribute
    assert all("+" not in str(h) for h in found)


def test_variant_page_hrefs_are_four_levels_up(records: list[Record]) -> None:
    page = render(records, None)["variants/torch27cu128cxx11/simple/img2grey/index.html"]
    hrefs = [a["href"] or "" for a in links(page)]
    assert hrefs and all(h.startswith("../../../../files/") for h in hrefs)


def test_json_pages(records: list[Record]) -> None:
    pages = render(records, None)
    root = json.loads(pages["simple/index.json"])
    assert root["meta"]["api-version"] == "1.1"
    assert [p["name"] for p in root["projects"]] == ["helper-lib", "img2grey", "my-kernel"]
    proj = json.loads(pages["simple/img2grey/index.json"])
    assert proj["name"] == "img2grey"
    assert proj["versions"][0] == "1.1.0+torch213cpucxx11" and proj["versions"][-1] == "1.1.2+torch27cu128cxx11"
    f = next(x for x in proj["files"] if "torch27" in x["filename"])
    assert f["url"] == "../../files/img2grey-1.1.2%2Btorch27cu128cxx11-cp39-abi3-linux_x86_64.whl"
    assert f["hashes"] == {"sha256": SHA}
    assert f["core-metadata"] == {"sha256": META} == f["dist-info-metadata"]
    assert f["requires-python"] == ">=3.9"
    assert f["yanked"] is False
    assert f["size"] == 123
    assert f["upload-time"] == "2026-01-02T03:04:05Z"


def test_yanked() -> None:
    pages = render([rec("k", "1.0", CU, yanked="broken <build>"), rec("k", "1.1", CU, yanked=True)], None)
    attrs = [a.get("data-yanked") for a in links(pages["simple/k/index.html"])]
    assert attrs == ["broken <build>", ""]
    files = json.loads(pages["simple/k/index.json"])["files"]
    assert [f["yanked"] for f in files] == ["broken <build>", True]


def test_variant_filtering(records: list[Record]) -> None:
    pages = render(records, None)

    def names(path: str) -> set[str]:
        return {f["filename"] for f in json.loads(pages[path])["files"]}

    cu = names("variants/torch27cu128cxx11/simple/img2grey/index.json")
    assert cu == {
        "img2grey-1.1.2+torch27cu128cxx11-cp39-abi3-linux_x86_64.whl",
        "img2grey-1.1.2+cuda-py3-none-any.whl",  # noarch wheel of its backend
        "img2grey-1.1.2-py3-none-any.whl",  # universal
    }
    cpu = names("variants/torch213cpucxx11/simple/img2grey/index.json")
    assert "img2grey-1.1.2+cuda-py3-none-any.whl" not in cpu
    assert "img2grey-1.1.0+torch213cpucxx11-cp39-abi3-linux_x86_64.whl" in cpu
    rocm_root = json.loads(pages["variants/torch210rocm70cxx11/simple/index.json"])
    assert [p["name"] for p in rocm_root["projects"]] == ["helper-lib", "img2grey"]  # my-kernel has no rocm build



def test_variant_pages_list_exactly_their_wheels(records: list[Record]) -> None:
    """Every per-variant project page, stated literally (not through in_variant, the code under test): a
    variant's own wheels, the noarch wheels of its backend, unlabelled wheels; an adopted wheel with a local
    label that names no variant (helper-lib 2.0+local1) is in the combined root only."""
    pages = render([*records, rec("helper-lib", "2.0+local1", None)], None)
    found = {path: {f["filename"] for f in json.loads(data)["files"]} for path, data in pages.items()
             if path.startswith("variants/") and path.count("/") == 4 and path.endswith(".json")}
    universal, cuda, helper = "img2grey-1.1.2-py3-none-any.whl", "img2grey-1.1.2+cuda-py3-none-any.whl", {
        "helper_lib-2.0-py3-none-any.whl"}
    assert found == {
        "variants/torch27cu128cxx11/simple/img2grey/index.json": {
            "img2grey-1.1.2+torch27cu128cxx11-cp39-abi3-linux_x86_64.whl", cuda, universal},
        "variants/torch27cu128cxx11/simple/my-kernel/index.json": {
            "my_kernel-0.1.0+torch27cu128cxx11-cp39-abi3-linux_x86_64.whl"},
        "variants/torch27cu128cxx11/simple/helper-lib/index.json": helper,
        "variants/torch210cu128cxx11/simple/img2grey/index.json": {
            "img2grey-1.1.2+torch210cu128cxx11-cp39-abi3-linux_x86_64.whl", cuda, universal},
        "variants/torch210cu128cxx11/simple/helper-lib/index.json": helper,
        "variants/torch213cpucxx11/simple/img2grey/index.json": {
            "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-linux_x86_64.whl",
            "img2grey-1.1.0+torch213cpucxx11-cp39-abi3-linux_x86_64.whl", universal},
        "variants/torch213cpucxx11/simple/helper-lib/index.json": helper,
        "variants/torch210rocm70cxx11/simple/img2grey/index.json": {
            "img2grey-1.1.2+torch210rocm70cxx11-cp39-abi3-linux_x86_64.whl", universal},
        "variants/torch210rocm70cxx11/simple/helper-lib/index.json": helper,
        "variants/cuda/simple/img2grey/index.json": {cuda, universal},  # the noarch backend's own root
        "variants/cuda/simple/helper-lib/index.json": helper,
    }
    combined = {f["filename"] for f in json.loads(pages["simple/helper-lib/index.json"])["files"]}
    assert combined == {"helper_lib-2.0-py3-none-any.whl", "helper_lib-2.0+local1-py3-none-any.whl"}


def test_escaping_everywhere() -> None:
    evil = '<script>alert("x")</script>'
    r = rec("evil", "1.0", CU, summary=evil, license=evil, upstream="javascript:alert(1)")
    pages = render([r], None)
    for path, data in pages.items():
        assert b"<script>alert" not in data, path
    for human in (pages["index.html"].decode(), pages["projects/evil/index.html"].decode()):
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in human
        assert 'href="javascript:' not in human
    # a requires_python the record check refuses (so no catalog gives it) is escaped all the same
    unchecked = replace(r, requires_python='>=3.9"x')
    page = project_pages(environment(None), "evil", [unchecked], {}, DEFAULT_BASE_URL)[0]["simple/evil/index.html"]
    assert 'data-requires-python="&gt;=3.9&#34;x"' in page.decode()


def test_landing_page(records: list[Record]) -> None:
    pages = render(records, None, base_url="https://kernels.example.com/")
    landing = pages["index.html"].decode()
    assert [a["href"] for a in links(pages["index.html"]) if str(a["href"]).startswith("./projects/")] == [
        "./projects/helper-lib/", "./projects/img2grey/", "./projects/my-kernel/"
    ]
    assert 'id="search"' in landing
    assert "sorts below" in landing  # the note on unpinned installs
    assert "<script src" not in landing and "<link" not in landing


def test_project_page(records: list[Record]) -> None:
    pages = render(records, None, base_url="https://kernels.example.com/")
    page = pages["projects/img2grey/index.html"].decode()
    assert "pip install img2grey==1.1.2+torch27cu128cxx11 --index-url https://kernels.example.com/simple" in page
    assert "pip install img2grey --index-url https://kernels.example.com/variants/torch27cu128cxx11/simple" in page
    assert "sorts below" in page  # the note on unpinned installs
    assert '<table class="matrix">' in page
    for column in ("cuda 12.8", "rocm 7.0", "cpu", "universal"):
        assert f"<th>{column}</th>" in page
    for row in ("torch 2.13", "torch 2.10", "torch 2.7", "any torch (noarch)"):
        assert f"<th>{row}</th>" in page
    assert 'href="../../files/img2grey-1.1.2%2Btorch27cu128cxx11-cp39-abi3-linux_x86_64.whl"' in page
    assert "pip install helper-lib==2.0 --index-url" in pages["projects/helper-lib/index.html"].decode()
    assert 'href="https://huggingface.co/kernels-community/img2grey"' in page
    assert "http://" not in page.split("<script>")[0].replace("http://127.0.0.1", "")  # nothing from other hosts
    assert "<script src" not in page and "<link" not in page


def test_deterministic(records: list[Record]) -> None:
    assert render(records, None) == render(list(reversed(records)), None)


def test_templates_override(tmp_path: Path, records: list[Record]) -> None:
    (tmp_path / "root.html").write_text("custom {{ projects|join(',') }}\n")
    pages = render(records, tmp_path)
    assert pages["simple/index.html"] == b"custom helper-lib,img2grey,my-kernel\n"
    assert pages["simple/img2grey/index.html"] == render(records, None)["simple/img2grey/index.html"]


@pytest.mark.parametrize("name", ["style.css", "copy.js"])
def test_an_overridden_include_reaches_the_shipped_pages(tmp_path: Path, name: str) -> None:
    """A user's style.css (or copy.js) is what the shipped kernel.html and landing.html include."""
    (tmp_path / name).write_text("/* house style */\n")
    pages = render([rec("img2grey", "1.1.2", "torch27-cxx11-cu128-x86_64-linux")], tmp_path)
    assert b"/* house style */" in pages["projects/img2grey/index.html"]
    assert b"/* house style */" in pages["index.html"]


def test_empty_store() -> None:
    pages = render([], None)
    assert set(pages) == {"index.html", "simple/index.html", "simple/index.json"}  # no project pages
    assert json.loads(pages["simple/index.json"])["projects"] == []


def test_universal_only_has_no_variant_indexes() -> None:
    pages = render([rec("u", "1.0", "torch-universal"), replace(rec("a", "1.0", None), name="A")], None)
    assert not any(p.startswith("variants/") for p in pages)


TEXTS = st.text(alphabet=st.sampled_from(list('ab.+-_"\\<>é\x01\u2028 ')), max_size=8)


def json_page(project: str, records: list[Record], depth: int) -> bytes:
    """A project's PEP 691 page as json.dumps writes it, from the dict of each file spelled out."""
    files = []
    for r in records:
        core = {"sha256": r.metadata_sha256} if r.metadata_sha256 else False
        yanked = (r.yanked or True) if isinstance(r.yanked, str) else bool(r.yanked)
        entry = {"filename": r.filename, "url": "../" * depth + "files/" + quoted(r.filename),
                 "hashes": {"sha256": r.sha256}, "core-metadata": core, "dist-info-metadata": core,
                 "yanked": yanked, "size": r.size, "upload-time": r.upload_time}  # fmt: skip
        if r.requires_python:
            entry["requires-python"] = r.requires_python
        files.append(entry)
    versions = sorted({r.version for r in records}, key=version_key)
    data = {"meta": {"api-version": "1.1"}, "name": project, "files": files, "versions": versions}
    return (json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(TEXTS, TEXTS, st.sampled_from([False, True, "", "bad <x>", 'q"é']),
                          st.sampled_from([None, "", ">=3.9", '<4,"é']), st.sampled_from(["", META]),
                          st.integers(0, 2**40)), min_size=1, max_size=4),
       st.sampled_from([2, 4]))  # fmt: skip
def test_json_page_bytes_as_json_dumps_writes_them(
    files: list[tuple[str, str, bool | str, str | None, str, int]], depth: int
) -> None:
    records = [
        replace(rec("k", "1.0", None), filename=f"k-{name}.whl", version=f"1.{i}+{version}", yanked=yanked,
                requires_python=python, metadata_sha256=meta, size=size)
        for i, (name, version, yanked, python, meta, size) in enumerate(files)
    ]  # fmt: skip
    assert simple_json("k-é", records, depth) == json_page("k-é", records, depth)


def test_catalog_gives_each_project_its_records() -> None:
    records = [rec("b-lib", "1.0", None), rec("a-lib", "2.0", None), rec("b-lib", "1.1", None), rec("c", "1", CU)]
    catalog = Catalog()
    catalog.apply([(r.filename, r, None) for r in records], ())
    got = [(name, [r.filename for r in recs]) for name, recs in catalog.projects()]
    assert got == [("a-lib", [records[1].filename]), ("b-lib", [records[0].filename, records[2].filename]),
                   ("c", [records[3].filename])]  # fmt: skip
    assert [r for _, recs in catalog.projects(["b-lib"]) for r in recs] == [records[0], records[2]]
    catalog.db.execute("UPDATE records SET project='../x' WHERE project='c'")  # a row that names another project
    with pytest.raises(CatalogDamaged, match=r"the row of 'c-1\+torch27cu128cxx11-.*its project '../x' is not "):
        list(catalog.projects())
