"""metadata.json reading: types, nesting, size, the digest hash."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from importlib import resources
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


NEW_FIELDS = {
    "name": "relu", "id": "_relu_abc", "version": 1, "license": "Apache-2.0", "python-depends": [],
    "backend": {"type": "agnostic"}, "build-layout": "zip", "kernels-minver": "0.19.1",
    "source": "https://github.com/example/relu",
    "provenance": {"kernel-builder": {"version": "0.16.2", "git": {"commit": "a" * 40, "dirty": False}}},
    "kernel-depends": [{"repo-id": "kernels-community/relu", "version": 1},
                       {"repo-id": "kernels-community/gelu", "revision": "b" * 40}],
}


def test_new_fields_are_read_and_kept() -> None:
    raw = json.dumps(NEW_FIELDS).encode()
    meta = kernelmeta.parse(raw, "build/sdk")
    assert (meta.backend_type, meta.kernels_minver, meta.source) == (
        "agnostic", "0.19.1", "https://github.com/example/relu")
    assert meta.kernel_depends == tuple(NEW_FIELDS["kernel-depends"])  # type: ignore[arg-type]
    assert meta.raw == raw  # what the wheel carries, byte for byte


@pytest.mark.parametrize("minver", ["0.19", "latest", "0.19.1rc1", "1.2.3.4.5", ""])
def test_kernels_minver_must_be_a_version(minver: str) -> None:
    ok = minver in ("0.19",)
    doc = {**NEW_FIELDS, "kernels-minver": minver}
    if ok:
        assert kernelmeta.parse(json.dumps(doc).encode(), "build/v").kernels_minver == minver
        return
    with pytest.raises(BadKernel, match="'kernels-minver' .* is not a version such as \"0.19.0\""):
        kernelmeta.parse(json.dumps(doc).encode(), "build/v")


@pytest.mark.parametrize(("installed", "doc", "hint"), [
    ((0, 17, 2), {"backend": {"type": "agnostic"}}, "; it needs kernels >= 0.19.1 and kernels 0.17.2 is installed "
     "beside kernel-factory: pip install -U kernels"),
    ((0, 18, 3), {"backend": {"type": "cpu"}, "kernels-minver": "0.19.0"}, "; it needs kernels >= 0.19.0 and "
     "kernels 0.18.3 is installed beside kernel-factory: pip install -U kernels"),
    ((0, 19, 1), {"backend": {"type": "agnostic"}, "kernels-minver": "0.19.1"}, ""),
    ((0, 17, 2), {"backend": {"type": "cpu"}}, ""),
])
def test_older_kernels_is_named(monkeypatch: pytest.MonkeyPatch, installed: tuple[int, ...],
                                doc: dict[str, object], hint: str) -> None:
    monkeypatch.setattr(kernelmeta, "_installed_kernels", lambda: installed)
    assert kernelmeta.newer_kernels_hint(json.dumps(doc).encode()) == hint


# kernels' python-depends table as the factory ships it
def test_the_copy_is_the_one_named() -> None:
    data = resources.files("kernel_factory.verify").joinpath("python_depends.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == kernelmeta.PYDEPENDS_SHA256


def test_the_installed_kernels_has_the_same_table() -> None:
    """kernels 0.17.2, 0.18.3 and 0.19.1 ship these bytes (the first two at kernels/, 0.19 under _internals/)."""
    version = importlib.metadata.version("kernels")
    if version not in ("0.17.2", "0.18.3", "0.19.1"):
        pytest.fail(f"kernels {version}: compare its python_depends.json with the copy and update verify/metadata.py")
    base = resources.files("kernels")
    places = (base.joinpath("python_depends.json"), base.joinpath("_internals").joinpath("python_depends.json"))
    found = [p for p in places if p.is_file()]
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in found] == [kernelmeta.PYDEPENDS_SHA256]


def test_names_to_packages() -> None:
    assert kernelmeta.python_packages(["tvm-ffi", "einops"], "cpu") == ["apache-tvm-ffi", "einops"]
    assert kernelmeta.python_packages(["nvidia-cutlass-dsl"], "cuda") == ["nvidia-cutlass-dsl"]
    assert kernelmeta.python_packages(["onednn"], "xpu") == ["onednn-devel"]
    assert kernelmeta.python_packages(["onednn"], "cuda") == ["onednn"]  # another backend's name: kept as it is
    assert kernelmeta.python_packages(["scipy>=1.10"], "agnostic") == ["scipy>=1.10"]
