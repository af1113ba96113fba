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


# Closing survivors of `make mutants` (docs/testing.md): each test below fails on one mutation that
# every earlier test let through.
def test_folders_of_any_name_are_covered_and_links_followed(tmp_path: Path) -> None:
    """Linked folders are walked (the kernels digest follows links); folders named below or above
    __pycache__, or below '.', are covered like any other, with a metadata.json of theirs."""
    for folder in ("Data", "0sub", "zz", "-x"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "f.py").write_text(folder)
    (tmp_path / "-x" / "metadata.json").write_text("{}")
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "g.py").write_text("g")
    (tmp_path / "linked").symlink_to("real")
    assert list(digest.compute(tmp_path)) == ["-x/f.py", "-x/metadata.json", "0sub/f.py", "Data/f.py",
                                              "linked/g.py", "real/g.py", "zz/f.py"]


def test_a_dangling_link_is_passed_over_not_the_rest_of_its_folder(tmp_path: Path) -> None:
    names = [f"f{i:02d}.py" for i in range(30)]
    for name in names:
        (tmp_path / name).write_text(name)
    (tmp_path / "m-dangling.py").symlink_to("nowhere")
    assert list(digest.compute(tmp_path)) == names


def test_the_first_missing_or_extra_file_is_named(tmp_path: Path) -> None:
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(name)
    with pytest.raises(DigestMismatch) as info:
        digest.Check({"algorithm": "sha256", "files": {"a.py": "", "b.py": "", "c.py": "", "d.py": ""}},
                     ["a.py", "b.py"], "build/v")
    assert str(info.value) == "build/v: file 'c.py' listed in metadata.json digest is missing"
    with pytest.raises(DigestMismatch) as info:
        digest.Check({"algorithm": "sha256", "files": {}}, ["a.py", "b.py"], "build/v")
    assert str(info.value) == "build/v: file 'a.py' is not listed in metadata.json digest"


@pytest.mark.parametrize(("rel", "out"), [
    ("__pycache__/a.cpython-311.pyc", True), ("pkg/__pycache__/x.py", True), ("pkg/mod.pyc", True),
    ("pkg/__pycache__", True), ("__pycache__x/y.py", False), ("pkg/mod.py", False), ("pkg/pyc", False),
    ("pkg/mod.pyc.txt", False), ("x__pycache__/a.py", False),
])  # fmt: skip
def test_left_out_path_is_left_out_for_a_relative_path(rel: str, out: bool) -> None:
    assert digest.left_out_path(rel) is out
    parts = rel.split("/")  # the same answer as left_out, part by part, for a path whose last part is a file
    assert out is (any(digest.left_out(p, True) for p in parts) or digest.left_out(parts[-1], False))
