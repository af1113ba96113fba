"""Exact bytes and figures of index/pages.py that the layout tests leave open (closing mutation-run survivors):
the landing page's counts, the root pages' JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernel_factory.errors import ConfigError
from kernel_factory.index.pages import _json, environment, fingerprint, landing_page, root_pages
from kernel_factory.record import Record
from test_index_pages import CPU, CU, CU210, ROCM, rec, render


def counts(page: bytes) -> str:
    """The landing page's line of figures (projects, kernels, wheels, build variants)."""
    text = page.decode()
    start = text.index('<p class="muted">') + len('<p class="muted">')
    return text[start:text.index("\nPackage index:", start)]


def test_landing_counts() -> None:
    """3 projects, of which 2 are kernels (helper-lib is an adopted wheel), 9 wheels, 5 variant indexes."""
    records: list[Record] = [
        *(rec("img2grey", "1.1.2", v) for v in (CU, CU210, CPU, ROCM, "torch-cuda", "torch-universal")),
        rec("img2grey", "1.1.0", CPU), rec("My_Kernel", "0.1.0", CU), rec("helper-lib", "2.0", None),
    ]
    assert counts(render(records, None)["index.html"]) == "3 projects (2 kernels),\n9 wheels, 5 build variants."


def test_landing_counts_one_of_each() -> None:
    assert counts(render([rec("img2grey", "1.1.2", CU)], None)["index.html"]) == (
        "1 project (1 kernel),\n1 wheel, 1 build variant."
    )


def test_landing_counts_no_kernel() -> None:
    """Adopted wheels only: no kernel counted, none of the variant indexes."""
    pages = render([rec("helper-lib", "2.0", None), rec("helper-lib", "2.1", None)], None)
    assert counts(pages["index.html"]) == "1 project (0 kernels),\n2 wheels, 0 build variants."


def summary(name: str, kind: str, wheels: int) -> dict[str, object]:
    return {"project": name, "name": name, "kind": kind, "version": "1.0", "summary": "", "wheels": wheels,
            "variants": 0}  # fmt: skip


def test_landing_counts_kernels_among_adopted() -> None:
    """The counts from the summaries as given: kernels by kind, wheels summed, labels counted."""
    summaries = {"c": summary("c", "kernel", 1), "a": summary("a", "adopted", 4), "b": summary("b", "kernel", 3)}
    page = landing_page(environment(None), summaries, ["torch27cu128cxx11", "torch213cpu"], "http://h")
    assert counts(page) == "3 projects (2 kernels),\n8 wheels, 2 build variants."
    assert page.decode().count('<tr data-name="') == 3


@pytest.mark.parametrize("label", [None, "torch213cpu"])
def test_root_json_bytes(label: str | None) -> None:
    """PEP 691 root: keys sorted, no spaces, non-ASCII written as it is (UTF-8, not \\u escapes), one newline."""
    pages = root_pages(environment(None), label, ["a-lib", "k-é"])
    prefix = "simple" if label is None else f"variants/{label}/simple"
    assert pages[f"{prefix}/index.json"] == (
        '{"meta":{"api-version":"1.1"},"projects":[{"name":"a-lib"},{"name":"k-é"}]}\n'.encode()
    )
    assert list(pages) == [f"{prefix}/index.html", f"{prefix}/index.json"]


def test_root_json_empty() -> None:
    assert root_pages(environment(None), None, [])["simple/index.json"] == (
        b'{"meta":{"api-version":"1.1"},"projects":[]}\n'
    )



def test_a_broken_user_template_is_one_line_naming_it(tmp_path: Path) -> None:
    """A syntax error, found when the environment is made: the file and its line."""
    (tmp_path / "root.html").write_text("ok\n{% for x in %}\n")
    with pytest.raises(ConfigError) as e:
        environment(tmp_path)
    assert str(e.value) == (f"templates {tmp_path}/root.html line 2: Expected an expression, got 'end of statement "
                            "block'; fix the template (templates render in jinja2's sandbox)")


def test_an_unsafe_user_template_is_refused_at_render_time(tmp_path: Path) -> None:
    """The sandbox's refusal at render time: the innermost template's file and line."""
    (tmp_path / "root.html").write_text("{% include 'inner.html' %}\n")
    (tmp_path / "inner.html").write_text("a\nb\n{{ cycler.__init__ }}\n")
    env = environment(tmp_path)
    with pytest.raises(ConfigError) as e:
        root_pages(env, None, ["a"])
    assert str(e.value) == (f"templates {tmp_path}/inner.html line 3: access to attribute '__init__' of 'type' "
                            "object is unsafe; fix the template (templates render in jinja2's sandbox)")


def test_fingerprint_follows_every_template_past_other_files(tmp_path: Path) -> None:
    """A file that is no template (``notes.txt``) is passed over: the templates named after it still count."""
    (tmp_path / "notes.txt").write_text("not a template\n")
    (tmp_path / "style.css").write_text("a {}\n")
    before = fingerprint(tmp_path, "http://h")
    (tmp_path / "notes.txt").write_text("changed, and still no template\n")
    assert fingerprint(tmp_path, "http://h") == before
    (tmp_path / "style.css").write_text("b {}\n")
    assert fingerprint(tmp_path, "http://h") != before


@pytest.mark.parametrize("value", ["k-é\u2028\"", None, True, False, 0, 2**40, 1.5, ["é", 1], {"é": None}])
def test_json_scalar_is_json_dumps_without_ascii_escapes(value: object) -> None:
    assert _json(value) == json.dumps(value, ensure_ascii=False)


def test_root_html_bytes() -> None:
    """PEP 503 root: one line per project, the block tags leave no blank line or indent (trim/lstrip blocks)."""
    assert root_pages(environment(None), None, ["a-lib", "k-é"])["simple/index.html"] == (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<meta name="pypi:repository-version" content="1.1">'
        '\n<title>Simple index</title>\n</head>\n<body>\n<a href="./a-lib/">a-lib</a><br>\n<a href="./k-é/">k-é</a>'
        "<br>\n</body>\n</html>\n"
    ).encode()
