"""s3util.make_client: one client per process and AWS_* environment (botocore loads its model once)."""

from __future__ import annotations

import os

import pytest
from kernel_factory import s3util


@pytest.fixture(autouse=True)
def _aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3util._CLIENTS.clear()


def test_the_same_environment_gets_the_same_client() -> None:
    first = s3util.make_client()
    assert s3util.make_client() is first
    assert first.meta.endpoint_url == "http://127.0.0.1:9"


def test_another_endpoint_or_key_gets_a_new_client(monkeypatch: pytest.MonkeyPatch) -> None:
    first = s3util.make_client()
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:10")
    second = s3util.make_client()
    assert second is not first and second.meta.endpoint_url == "http://127.0.0.1:10"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "other")
    assert s3util.make_client() is not second
    assert len(s3util._CLIENTS) == 1  # the old ones are let go


def test_a_forked_child_makes_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    first = s3util.make_client()
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as in a worker forked after the parent made one
    assert s3util.make_client() is not first
