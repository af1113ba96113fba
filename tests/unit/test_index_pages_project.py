"""The shipped PEP 503 project page, written in Python (index/pages.py ``_project_html``): the same bytes as the
project.html template renders, and a user's project.html is still the one used."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_factory.index.pages import (
    API_VERSION,
    FileLink,
    _file,
    _project_html,
    _shipped,
    environment,
    project_groups,
    simple_html,
)
from kernel_factory.record import Record
from kernel_factory.variants import parse

YANKS: tuple[bool | str, ...] = ("", True, False, 'broken <"build">')
LABELS = ("torch27-cxx11-cu128-x86_64-linux", "torch210-cxx11-rocm70-x86_64-linux", "torch210-metal-aarch64-darwin")


def template_render(project: str, links: list[FileLink]) -> bytes:
    template = environment(None).get_template("project.html")
    return template.render(project=project, files=links, api_version=API_VERSION).encode()


def synthetic(projects: int = 30, versions: int = 4) -> dict[str, list[Record]]:
    """Records shaped like tests/index_synth.py's corpus: projects x versions x variants, some yanked, some with
    requires_python and no .metadata, one universal wheel per version."""
    found: dict[str, list[Record]] = {}
    for p in range(projects):
        name = f"kernel-{p:04d}"
        records = []
        for v in range(versions):
            for i, variant in enumerate((*LABELS, None)):
                t = parse(variant) if variant else None
                version = t.local_version(f"1.{v}.0") if t else f"1.{v}.0"
                tag = t.tag if t else "py3-none-any"
                records.append(Record(
                    filename=f"kernel_{p:04d}-{version}-{tag}.whl", name=name, version=version,
                    sha256=f"{p:02x}{v:02x}{i:02x}".ljust(64, "0"), size=1000 + i, upload_time="2026-01-02T03:04:05Z",
                    metadata_sha256="" if (p + i) % 5 == 0 else "b" * 64,
                    requires_python=">=3.9,<4" if (p + v) % 3 == 0 else None,
                    yanked=YANKS[(p + v + i) % 4] if (p + v) % 2 else False,
                    label=t.label if t else None, variant=variant, backend=t.backend if t else None,
                ))  # fmt: skip
        found[name] = sorted(records, key=lambda r: r.filename)
    return found


def test_every_page_of_the_synthetic_corpus_is_the_templates_bytes() -> None:
    env = environment(None)
    labels = {label: parse(label).backend for label in LABELS}
    pages = 0
    for project, records in synthetic().items():
        for label, group in project_groups(records, labels).items():
            depth = 2 if label is None else 4  # simple/<project>/, variants/<label>/simple/<project>/
            written = simple_html(env, project, group, depth)
            prefix = "../" * depth + "files/"
            links = [FileLink(r.filename, f"{prefix}{_file(r).quoted}#sha256={r.sha256}", r.requires_python,
                              _file(r).metadata, _file(r).yanked) for r in group]  # fmt: skip
            assert written == template_render(project, links)
            pages += 1
    assert pages == 30 * 4  # every project in the combined root and in each of the three variant roots


text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    project=text,
    links=st.lists(st.builds(FileLink, text, text, st.none() | text, st.none() | text, st.none() | text), max_size=4),
)
def test_any_text_is_escaped_as_the_template_escapes_it(project: str, links: list[FileLink]) -> None:
    assert _project_html(project, links).encode() == template_render(project, links)


def test_a_users_project_html_is_rendered_not_the_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "project.html").write_text("custom {{ project }}: {% for f in files %}{{ f.filename }} {% endfor %}.")
    env = environment(tmp_path)
    records = synthetic(1, 1)["kernel-0000"][:2]
    assert not _shipped(env, "project.html")
    assert _shipped(environment(None), "project.html")
    names = " ".join(r.filename for r in records)
    assert simple_html(env, "kernel-0000", records, 2) == f"custom kernel-0000: {names} .".encode()


def test_a_users_folder_without_project_html_gets_the_shipped_page(tmp_path: Path) -> None:
    (tmp_path / "root.html").write_text("a root\n")
    records = synthetic(1, 1)["kernel-0000"]
    assert _shipped(environment(tmp_path), "project.html")
    assert simple_html(environment(tmp_path), "kernel-0000", records, 2) == simple_html(
        environment(None), "kernel-0000", records, 2
    )
