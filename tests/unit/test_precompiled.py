"""The shipped templates, compiled ahead of time (index/precompiled.py): current, used only when they fit the
running jinja2 and templates, and rendering the same bytes as the templates compiled at run time."""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import jinja2
import pytest
from kernel_factory import TEMPLATES
from kernel_factory.index import pages, precompiled
from kernel_factory.index.pages import DEFAULT_BASE_URL
from kernel_factory.record import Record
from test_index_pages import CPU, CU, CU210, ROCM, rec


def test_shipped_compiled_templates_are_current() -> None:
    """`make templates` was run after the last change to a template or to the environment's options."""
    manifest = json.loads((precompiled.COMPILED / precompiled.MANIFEST).read_text())
    assert manifest["digest"] == precompiled.digest()
    assert manifest["templates"] == precompiled.template_names() == sorted(pages.TEMPLATE_NAMES)
    for name in manifest["templates"]:
        assert (precompiled.COMPILED / jinja2.ModuleLoader.get_module_filename(name)).is_file()


def test_environment_takes_the_compiled_templates_for_their_jinja2() -> None:
    """The shipped environment loads the compiled templates under the jinja2 that compiled them (`make templates`
    on this tree), and compiles the shipped ones under any other; never both, never neither."""
    shipped = json.loads((precompiled.COMPILED / precompiled.MANIFEST).read_text())["jinja2"]
    expected = jinja2.ModuleLoader if jinja2.__version__ == shipped else jinja2.FileSystemLoader
    loaders = pages.environment(None).loader.loaders  # type: ignore[union-attr]
    assert [type(x) for x in loaders] == [expected]


def test_loader_only_for_the_same_jinja2_and_templates(tmp_path: Path) -> None:
    folder, compiled = tmp_path / "templates", tmp_path / "compiled"
    shutil.copytree(TEMPLATES, folder, ignore=shutil.ignore_patterns("compiled"))
    precompiled.write(folder, compiled)
    assert isinstance(precompiled.loader(jinja2, compiled, folder), jinja2.ModuleLoader)
    other = types.SimpleNamespace(__version__="0.0.1", ModuleLoader=jinja2.ModuleLoader)
    assert precompiled.loader(other, compiled, folder) is None  # compiled by another jinja2
    (folder / "root.html").write_text("edited\n")
    assert precompiled.loader(jinja2, compiled, folder) is None  # compiled from other templates
    (compiled / precompiled.MANIFEST).unlink()
    assert precompiled.loader(jinja2, compiled, folder) is None


def _source_env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined, **precompiled.OPTIONS
    )


def _all_pages(env: jinja2.Environment, records: list[Record]) -> dict[str, bytes]:
    labels = {r.label: r.backend for r in records if r.label and r.os}
    out: dict[str, bytes] = {}
    summaries = {}
    for project in sorted({r.name for r in records}):
        found, _, summaries[project] = pages.project_pages(
            env, project, [r for r in records if r.name == project], labels, DEFAULT_BASE_URL
        )
        out.update(found)
    out.update(pages.root_pages(env, None, sorted(summaries)))
    out["index.html"] = pages.landing_page(env, summaries, labels, DEFAULT_BASE_URL)
    return out


def test_compiled_pages_are_the_same_bytes() -> None:
    records = [
        rec("img2grey", "1.1.2", CU), rec("img2grey", "1.1.2", CU210), rec("img2grey", "1.1.2", CPU),
        rec("img2grey", "1.1.2", ROCM), rec("img2grey", "1.1.0", CPU, yanked="broken"),
        rec("img2grey", "1.1.2", "torch-cuda"), rec("u", "1.0", "torch-universal"), rec("helper-lib", "2.0", None),
    ]  # fmt: skip
    compiled = jinja2.Environment(
        loader=jinja2.ModuleLoader(str(precompiled.COMPILED)), undefined=jinja2.StrictUndefined, **precompiled.OPTIONS
    )
    fast, slow = _all_pages(compiled, records), _all_pages(_source_env(), records)
    assert len(fast) == 36 and b"img2grey" in fast["index.html"]
    assert fast == slow


@pytest.mark.parametrize("name", ["style.css", "copy.js"])
def test_an_overridden_include_reaches_a_compiled_page(tmp_path: Path, name: str) -> None:
    """A user's style.css (or copy.js) is what the compiled kernel.html and landing.html include."""
    (tmp_path / name).write_text("/* house style */\n")
    pages.environment.cache_clear()
    try:
        env = pages.environment(tmp_path)
        found, _, summary = pages.project_pages(env, "img2grey", [rec("img2grey", "1.1.2", CU)], {}, DEFAULT_BASE_URL)
        landing = pages.landing_page(env, {"img2grey": summary}, [], DEFAULT_BASE_URL)
    finally:
        pages.environment.cache_clear()
    assert b"/* house style */" in found["projects/img2grey/index.html"]
    assert b"/* house style */" in landing
