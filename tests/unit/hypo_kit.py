"""Properties that prove they tested something: each counts the generated inputs the code accepted.

A property of the form "if the input is accepted, then ..." passes when the code refuses every input.
``@must_accept(n)`` around a ``@given`` test fails it unless at least ``n`` generated inputs reached the
``accepted(...)`` call, the point past the refusal where the property's claim is checked.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

ACCEPTED: Counter[str] = Counter()


def accepted(key: str) -> None:
    """One generated input of the property ``key`` was accepted by the code under test."""
    ACCEPTED[key] += 1


def must_accept(minimum: int, key: str | None = None) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def decorate(prop: Callable[..., None]) -> Callable[..., None]:
        name = key or prop.__name__

        @functools.wraps(prop)
        def test(*args: Any, **kwargs: Any) -> None:
            ACCEPTED.pop(name, None)
            prop(*args, **kwargs)
            got = ACCEPTED[name]
            assert got >= minimum, (f"{name}: only {got} generated inputs were accepted (at least {minimum} "
                                    "needed): a property that holds because everything was refused proves nothing")

        return test

    return decorate
