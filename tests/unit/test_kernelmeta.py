"""metadata.json reading: types, nesting, size, the digest hash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernel_factory.errors import BadKernel
from kernel_factory.verify import metadata as kernelmeta


def test_fields_and_digest_hash() -> None:
    raw = json.dumps({
        "name": "relu", "version": 1, "license": "MIT", "python-depends": ["einops"],
        "python-depends-backends": {"cuda": ["nvidia-cutlass-dsl"]},
        "backend": {"type": "cuda", "archs": ["8.0", "9.0"]},
        "digest": {"algorithm": "sha256", "files": {"a.py": "AAAA"}},
    }).encode()
    meta = kernelmeta.parse(raw, "build/x")
    assert meta.name == "relu" and meta.archs == ("8.0", "9.0") and meta.python_depends == ("einops",)
    assert meta.python_depends_backends == {"cuda": ("nvidia-cutlass-dsl",)}
    assert meta.digest_hash is not None and meta.digest_hash.startswith("sha256:")
    # key order does not change the canonical hash
    again = kernelmeta.parse(json.dumps({"digest": {"files": {"a.py": "AAAA"}, "algorithm": "sha256"}}).encode(), "x")
    assert again.digest_hash == meta.digest_hash


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"name": 3}, "'name' must be a string"),
        ({"version": "1"}, "'version' must be an integer"),
        ({"python-depends": "einops"}, "'python-depends' must be a list of strings"),
        ({"backend": {"archs": [1]}}, "'backend.archs' must be a list of strings"),
        ({"digest": {"algorithm": "sha256"}}, "'digest' must have 'algorithm' and 'files'"),
        ([1, 2], "must hold a JSON object"),
    ],
)
def test_wrong_types(doc: object, needle: str) -> None:
    with pytest.raises(BadKernel, match=needle):
        kernelmeta.parse(json.dumps(doc).encode(), "build/v")


def test_not_json_and_nan() -> None:
    with pytest.raises(BadKernel, match="not valid UTF-8 JSON"):
        kernelmeta.parse(b"{not json", "build/v")
    with pytest.raises(BadKernel, match="not valid UTF-8 JSON"):
        kernelmeta.parse(b'{"version": NaN}', "build/v")


def test_deep_nesting_10mb_is_badkernel() -> None:
    raw = b"[" * (5 << 20) + b"]" * (5 << 20)
    with pytest.raises(BadKernel, match="nests"):
        kernelmeta.parse(b'{"x": ' + raw + b"}", "build/v")
    moderate = b'{"x": ' + b"[" * 40 + b"]" * 40 + b"}"  # parses, but is absurd for metadata.json
    with pytest.raises(BadKernel, match="nests more than"):
        kernelmeta.parse(moderate, "build/v")


def test_too_large(tmp_path: Path) -> None:
    with pytest.raises(BadKernel, match="limit"):
        kernelmeta.parse(b" " * (kernelmeta.MAX_BYTES + 1), "build/v")


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert kernelmeta.load(tmp_path, "build/v").digest is None
