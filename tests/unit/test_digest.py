from pathlib import Path

import pytest
from kernel_factory.errors import BadKernel, DigestMismatch
from kernel_factory.verify import digest


def test_vector(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"hello world")
    assert digest.compute(tmp_path) == {"a.txt": "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="}


def _tree(root: Path) -> None:
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("x = 1\n")
    (root / "pkg" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"junk")
    (root / "pkg" / "metadata.json").write_text("{}")  # not top level: covered
    (root / "stray.pyc").write_bytes(b"junk")
    (root / "metadata.json").write_text("{}")
    (root / "metadata.json.sigstore").write_text("{}")


def test_exclusions(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert list(digest.compute(tmp_path)) == ["pkg/__init__.py", "pkg/metadata.json"]


def test_sha512(tmp_path: Path) -> None:
    _tree(tmp_path)
    d = digest.compute(tmp_path, "sha512")
    assert len(d["pkg/__init__.py"]) == 88


def test_verify_ok_and_mismatches(tmp_path: Path) -> None:
    _tree(tmp_path)
    files = digest.compute(tmp_path)
    digest.verify(tmp_path, {"algorithm": "sha256", "files": files}, "v")
    (tmp_path / "pkg" / "__init__.py").write_text("x = 2\n")
    with pytest.raises(DigestMismatch, match="'pkg/__init__.py' does not match"):
        digest.verify(tmp_path, {"algorithm": "sha256", "files": files}, "v")
    with pytest.raises(DigestMismatch, match="'gone.so' listed in metadata.json digest is missing"):
        digest.verify(tmp_path, {"algorithm": "sha256", "files": {**digest.compute(tmp_path), "gone.so": "AA=="}}, "v")
    (tmp_path / "extra.so").write_bytes(b"x")
    files = digest.compute(tmp_path)
    del files["extra.so"]
    with pytest.raises(DigestMismatch, match="'extra.so' is not listed"):
        digest.verify(tmp_path, {"algorithm": "sha256", "files": files}, "v")


@pytest.mark.parametrize("bad", [{}, {"algorithm": "md5", "files": {}}, {"algorithm": "sha256", "files": []}])
def test_verify_malformed(tmp_path: Path, bad: dict[str, object]) -> None:
    with pytest.raises(BadKernel):
        digest.verify(tmp_path, bad, "v")
