"""Risky s3-put-args (issue 26 item 10): refused unless --allow-s3-put-arg names them; the others pass."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kernel_factory.config import Options
from kernel_factory.errors import ConfigError
from kernel_factory.s3util import PutOptions, notices, risk

EVERYONE = "uri=http://acs.amazonaws.com/groups/global/AllUsers"


@pytest.mark.parametrize(("key", "value"), [
    ("ACL", "public-read-write"), ("ACL", "PUBLIC-READ-WRITE"), ("GrantFullControl", EVERYONE),
    ("GrantWriteACP", EVERYONE.replace("AllUsers", "AuthenticatedUsers")), ("WebsiteRedirectLocation", "/x"),
    ("ObjectLockLegalHoldStatus", "ON"), ("ObjectLockMode", "COMPLIANCE"),
    ("ObjectLockRetainUntilDate", "2099-01-01T00:00:00Z"),
])  # fmt: skip
def test_risky_put_args_need_the_flag(key: str, value: str) -> None:
    assert risk(key, value) is not None
    opts = replace(Options(), s3_put_args=((key, value),))
    with pytest.raises(ConfigError, match=f"pass --allow-s3-put-arg {key} to apply it anyway"):
        PutOptions.from_options(opts)
    allowed = PutOptions.from_options(replace(opts, allow_s3_put_args=(key,)))
    assert allowed.args == ((key, value),)


@pytest.mark.parametrize(("key", "value"), [
    ("ACL", "public-read"), ("ACL", "bucket-owner-full-control"), ("ServerSideEncryption", "aws:kms"),
    ("GrantRead", EVERYONE), ("GrantFullControl", "id=0123abcd"), ("ObjectLockLegalHoldStatus", "OFF"),
    ("StorageClass", "STANDARD_IA"),
])  # fmt: skip
def test_other_put_args_pass(key: str, value: str) -> None:
    assert risk(key, value) is None
    assert PutOptions.from_options(replace(Options(), s3_put_args=((key, value),))).args == ((key, value),)


def test_notices_name_every_arg_and_each_refused_one() -> None:
    opts = replace(Options(), s3_put_args=(("ACL", "public-read-write"), ("StorageClass", "GLACIER_IR")))
    assert notices("s3://b/p", opts) == [
        "note: every object put to s3://b/p carries s3-put-args ACL=public-read-write, StorageClass=GLACIER_IR",
        "warning: s3-put-args: ACL='public-read-write' lets anyone overwrite every object (public write); build "
        "and publish refuse it unless --allow-s3-put-arg ACL names it"]
    assert notices("s3://b/p", replace(opts, allow_s3_put_args=("ACL",)))[1:] == []
    assert notices("s3://b/p", Options()) == []
