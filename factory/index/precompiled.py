"""The shipped page templates, compiled to Python ahead of time (``make templates``).

Compiling the templates costs a run that adds one wheel about as much as its work (~25 ms), so the wheel ships
them compiled, in ``templates/compiled/`` (jinja2's ``compile_templates``, loaded with its ``ModuleLoader``; pip
writes their bytecode at install time like any module). Nothing is compiled or cached at run time, and nothing
is written outside the output.

``manifest.json`` there names the jinja2 version that compiled them and a digest of what they were compiled from
(the shipped templates and the environment's options). They are used only when both still hold for the running
process; otherwise the shipped templates are compiled as before. A user's ``templates`` folder comes first
either way, and an ``{% include %}`` is resolved at render time, so overriding ``style.css`` reaches a compiled
``kernel.html`` too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import TEMPLATES

if TYPE_CHECKING:
    import jinja2

COMPILED = TEMPLATES / "compiled"
MANIFEST = "manifest.json"
# The environment every page is rendered with (pages.environment); part of the digest.
OPTIONS: dict[str, Any] = {
    "autoescape": True,
    "keep_trailing_newline": True,
    "trim_blocks": True,
    "lstrip_blocks": True,
}


def template_names(folder: Path = TEMPLATES) -> list[str]:
    """The shipped templates: every file of ``folder`` (not the compiled ones)."""
    return sorted(e.name for e in os.scandir(folder) if e.is_file() and not e.name.startswith((".", "_")))


def digest(folder: Path = TEMPLATES) -> str:
    """What the compiled templates depend on besides jinja2's version: each template and the options."""
    h = hashlib.sha256(json.dumps(OPTIONS, sort_keys=True).encode())
    for name in template_names(folder):
        h.update(b"\0" + name.encode() + b"\0" + (folder / name).read_bytes())
    return h.hexdigest()


def loader(jinja: Any, compiled: Path = COMPILED, folder: Path = TEMPLATES) -> jinja2.BaseLoader | None:
    """A loader of the compiled templates, or None when they were compiled by another jinja2 or from other
    templates (``jinja``: the jinja2 module, imported by the caller)."""
    try:
        manifest = json.loads((compiled / MANIFEST).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("jinja2") != jinja.__version__:
        return None
    if manifest.get("digest") != digest(folder):
        return None
    result: jinja2.BaseLoader = jinja.ModuleLoader(str(compiled))
    return result


def write(folder: Path, target: Path) -> list[str]:
    """Compile the templates of ``folder`` into ``target`` (emptied of older ones) with its manifest; the names."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), undefined=jinja2.StrictUndefined, **OPTIONS)
    names = template_names(folder)
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("tmpl_*.py"):
        old.unlink()
    env.compile_templates(str(target), zip=None, filter_func=names.__contains__, ignore_errors=False)
    (target / "__init__.py").write_text('"""The shipped templates, compiled (kernel_factory.index.precompiled)."""\n')
    manifest = {"jinja2": jinja2.__version__, "digest": digest(folder), "templates": names}
    (target / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return names


def main() -> None:
    """``python -m kernel_factory.index.precompiled SRC DEST`` (``make templates``)."""
    import sys

    src, dest = (Path(a) for a in sys.argv[1:3])
    print(f"compiled {', '.join(write(src, dest))} into {dest}")


if __name__ == "__main__":
    main()
