"""A user's templates folder (``--templates``, ``templates`` in the config), rendered in jinja2's sandbox.

A templates folder is configuration, and whoever can write it is not always whoever runs the index (a
shared checkout, a CI job's inputs): in ``SandboxedEnvironment`` a template reads the values it is given and
calls the filters jinja2 ships, but it cannot reach Python's internals (``cycler.__init__.__globals__``...).
Any error in such a folder, a refused attribute included, is the user's: one line naming the template and
the line, exit 2. The shipped templates, without a user's folder, use the plain environment
(pages.environment).
"""

from __future__ import annotations

import traceback
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from ..errors import UsageError


def _where(name: str | None, exc: jinja2.TemplateError) -> str:
    """The template and line the error is in: a syntax error says so, a render error from its traceback."""
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return f"{exc.name or name}, line {exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.endswith(".py")]
    if frames:  # jinja2 puts the template's own file and line in the traceback
        return f"{Path(frames[-1].filename).name}, line {frames[-1].lineno}"
    return str(name)


class UserTemplate(jinja2.Template):
    """A template of a user's environment: an error while rendering it is one line (UsageError)."""

    environment: UserEnvironment

    def render(self, *args: Any, **kwargs: Any) -> str:
        try:
            return super().render(*args, **kwargs)
        except jinja2.TemplateError as exc:
            raise self.environment.error(self.name, exc) from None


class UserEnvironment(SandboxedEnvironment):
    """The templates of ``folder`` first (any name may be overridden), then ``shipped``, sandboxed."""

    template_class = UserTemplate

    def __init__(self, folder: Path, shipped: jinja2.BaseLoader, **options: Any) -> None:
        self.folder = folder
        loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(folder)), shipped])
        super().__init__(loader=loader, **options)

    def error(self, name: str | None, exc: jinja2.TemplateError) -> UsageError:
        message = " ".join(str(exc.message or type(exc).__name__).split()).rstrip(".")  # one line
        return UsageError(
            f"templates {self.folder}: {_where(name, exc)}: {message}; fix that template, "
            "or remove it from the folder to use the shipped one"
        )

    def get_template(
        self, name: str | jinja2.Template, parent: str | None = None,
        globals: MutableMapping[str, Any] | None = None,
    ) -> jinja2.Template:  # fmt: skip
        try:
            return super().get_template(name, parent, globals)
        except jinja2.TemplateNotFound as exc:  # an include or extends of a name that is nowhere
            exc.message = f"no template {exc.name!r} here or among the shipped ones"
            raise self.error(parent or str(name), exc) from None
        except jinja2.TemplateError as exc:  # a syntax error
            raise self.error(str(name), exc) from None
