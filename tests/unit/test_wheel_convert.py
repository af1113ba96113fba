"""convert(): wheel content, layouts, reproducibility and refusals, on synthetic variant folders."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import zipfile
from pathlib import Path

import pytest
from kernel_factory.errors import BadKernel, DigestMismatch, UnsafePath
from kernel_factory.wheel import distinfo as wheel
from kernel_factory.wheel.convert import convert
from packaging.metadata import Metadata
from wheel_kit import LIBZ, make_variant, wheel_input

DIST = "img2grey-1.1.2+torch27cpucxx11.dist-info"


def _read(whl: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(whl) as z:
        assert z.testzip() is None
        return {n: z.read(n) for n in z.namelist()}


def test_flat_layout_wheel_content(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo")
    whl, metadata, record = convert(wheel_input(vdir), tmp_path / "out")
    assert whl.name == "img2grey-1.1.2+torch27cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"
    assert whl.parent == tmp_path / "out" and os.listdir(tmp_path / "out") == [whl.name]
    files = _read(whl)
    names = list(files)
    assert names[:4] == sorted(names[:4]) and names[-1] == f"{DIST}/RECORD"
    assert files["img2grey/img2grey/__init__.py"] == (vdir / "img2grey/__init__.py").read_bytes()  # compat kept
    assert json.loads(files["img2grey/metadata.json"])["name"] == "img2grey"
    assert files[f"{DIST}/METADATA"] == metadata
    meta = Metadata.from_email(metadata, validate=True)
    assert str(meta.version) == "1.1.2+torch27cpucxx11"
    assert meta.summary == "Convert RGB images to greyscale."
    assert meta.license_expression == "Apache-2.0"
    assert [str(r) for r in meta.requires_dist or []] == ["torch<2.8,>=2.7"]
    assert meta.project_urls == {"Source": "https://github.com/example/img2grey",
                                 "Hub": "https://huggingface.co/example/img2grey"}
    assert files[f"{DIST}/WHEEL"].decode().splitlines() == [
        "Wheel-Version: 1.0", f"Generator: {wheel.GENERATOR}", "Root-Is-Purelib: false",
        "Tag: cp39-abi3-manylinux_2_28_x86_64",
    ]
    rows = list(csv.reader(io.StringIO(files[f"{DIST}/RECORD"].decode())))
    assert len(rows) == len(files)
    for name, digest, size in rows[:-1]:
        assert digest == wheel.record_hash(hashlib.sha256(files[name]).digest()) and int(size) == len(files[name])
    prov = json.loads(files[f"{DIST}/kernel_factory.json"])
    assert prov["package"] == "img2grey" and prov["variant"] == "torch27-cxx11-cpu-x86_64-linux"
    assert prov["variant-root"] == "img2grey" and prov["layout"] == "flat"
    assert record.extra == {"variant-root": "img2grey"}
    assert prov["digest"]["hash"] == record.digest and "source" not in prov
    assert record.sha256 == hashlib.sha256(whl.read_bytes()).hexdigest() and record.size == whl.stat().st_size
    assert record.metadata_sha256 == hashlib.sha256(metadata).hexdigest()
    assert record.upload_time == "2026-01-01T00:00:00Z" and record.platform_tag == "manylinux_2_28_x86_64"
    assert record.import_name == "img2grey" and record.license == "Apache-2.0"


def test_nested_layout_and_noarch(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo", "torch-universal", layout="nested", package="relu", name="relu", elf=None)
    whl, _, record = convert(wheel_input(vdir, repo_name="relu", repo_id=None, source="/src/relu"), tmp_path / "o")
    assert whl.name == "relu-1.1.2-py3-none-any.whl"
    files = _read(whl)
    assert sorted(n for n in files if not n.startswith("relu-")) == [
        "_relu_kernel.pth", "_relu_kernel/metadata.json", "_relu_kernel/relu/__init__.py", "_relu_kernel/relu/_ops.py"]
    assert files["_relu_kernel.pth"] == b"_relu_kernel\n"  # puts the root on sys.path: `import relu` works
    prov = json.loads(files["relu-1.1.2.dist-info/kernel_factory.json"])
    assert (prov["variant-root"], prov["layout"], prov["package"]) == ("_relu_kernel", "nested", "relu")
    assert b"Root-Is-Purelib: true" in files["relu-1.1.2.dist-info/WHEEL"]
    assert json.loads(files["relu-1.1.2.dist-info/kernel_factory.json"])["source"] == "/src/relu"
    assert b"/src/relu" not in files["relu-1.1.2.dist-info/METADATA"]
    assert record.platform_tag == "any" and record.label is None


def test_same_input_same_bytes(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo")
    a, _, ra = convert(wheel_input(vdir), tmp_path / "a")
    b, _, rb = convert(wheel_input(vdir), tmp_path / "b")
    assert a.read_bytes() == b.read_bytes() and ra == rb


def test_distribution_name_normalised(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo", package="layer_norm", name="layer-norm")
    whl, metadata, _ = convert(wheel_input(vdir), tmp_path / "o")
    assert whl.name.startswith("layer_norm-1.1.2+")
    assert b"Name: layer-norm\n" in metadata


@pytest.mark.parametrize("name", ["scale_add", "Img2Grey_X", "Layer.Norm"])
def test_name_that_kernels_refuses(tmp_path: Path, name: str) -> None:
    """kernels.get_kernel refuses these names; so does the build, with kernels' own message on one line."""
    vdir = make_variant(tmp_path / "repo", package="layer_norm", name=name)
    with pytest.raises(BadKernel) as err:
        convert(wheel_input(vdir), tmp_path / "o")
    msg = str(err.value)
    assert msg.startswith("build/torch27-cxx11-cpu-x86_64-linux: kernels.get_kernel would refuse this metadata.json: "
                          f"Cannot parse metadata: Invalid kernel name `{name}`. Name must: - Start with a lowercase")
    assert "\n" not in msg and not (tmp_path / "o").exists()


def test_python_depends_mapped(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo", meta={"python-depends": ["tvm-ffi"],
                                                 "python-depends-backends": {"cpu": ["numpy>=1"]}})
    _, metadata, record = convert(wheel_input(vdir), tmp_path / "o")
    assert record.requires_dist == ("torch>=2.7,<2.8", "apache-tvm-ffi", "numpy>=1")


def test_license_not_spdx_goes_to_license(tmp_path: Path) -> None:
    assert wheel.license_fields("BSD-3-Clause") == ("License-Expression", "BSD-3-Clause")
    assert wheel.license_fields("Some custom\nlicense") == ("License", "Some custom license")


def test_summary() -> None:
    readme = "---\nlicense: mit\n---\n![badge](x)\n# Title\n\nFast kernels, e.g. for v1.2! More text.\n"
    assert wheel.summary_of(readme, "x") == "Fast kernels, e.g. for v1.2!"
    assert wheel.summary_of(None, "relu") == "relu compute kernel"
    assert wheel.summary_of("# Only a title\n", "relu") == "relu compute kernel"


def test_no_init_is_badkernel(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo")
    for p in (vdir / "__init__.py", vdir / "img2grey" / "__init__.py"):
        p.unlink()
    (vdir / "metadata.json").unlink()
    with pytest.raises(BadKernel, match=r"build/torch27-cxx11-cpu-x86_64-linux: no __init__.py"):
        convert(wheel_input(vdir, allow_no_digest=True), tmp_path / "o")


def test_missing_digest(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo", with_digest=False)
    with pytest.raises(BadKernel, match="--allow-no-digest"):
        convert(wheel_input(vdir), tmp_path / "o")
    whl, _, record = convert(wheel_input(vdir, allow_no_digest=True), tmp_path / "o")
    assert record.digest is None and whl.exists()


def test_tampered_file_names_it(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo")
    (vdir / "_ops.py").write_text("import os  # tampered\n")
    with pytest.raises(DigestMismatch, match="'_ops.py'"):
        convert(wheel_input(vdir), tmp_path / "o")
    assert not (tmp_path / "o").exists() or os.listdir(tmp_path / "o") == []


def test_broken_metadata_json(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo")
    (vdir / "metadata.json").write_text('{"name": ["x"]}')
    with pytest.raises(BadKernel, match="'name' must be a string"):
        convert(wheel_input(vdir), tmp_path / "o")


def test_escaping_symlink_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("no")
    vdir = make_variant(tmp_path / "repo")
    (vdir / "leak.txt").symlink_to(secret)
    with pytest.raises(UnsafePath, match="leak.txt is a symlink that leaves the variant folder"):
        convert(wheel_input(vdir), tmp_path / "o")


def test_inner_symlink_stored_as_content(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo", files={"data/table.bin": b"\x01" * 100})
    (vdir / "table_link.bin").symlink_to("data/table.bin")
    meta = json.loads((vdir / "metadata.json").read_text())
    meta.pop("digest")
    (vdir / "metadata.json").write_text(json.dumps(meta))
    whl, _, _ = convert(wheel_input(vdir, allow_no_digest=True), tmp_path / "o")
    assert _read(whl)["img2grey/table_link.bin"] == b"\x01" * 100


def test_symlink_loop_and_bad_names(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo", with_digest=False)
    (vdir / "loop").symlink_to(".")
    with pytest.raises(UnsafePath, match="symlink loop"):
        convert(wheel_input(vdir, allow_no_digest=True), tmp_path / "o")
    (vdir / "loop").unlink()
    (vdir / "bad\nname.py").write_text("")
    with pytest.raises(UnsafePath, match="cannot be a wheel entry"):
        convert(wheel_input(vdir, allow_no_digest=True), tmp_path / "o")
    (vdir / "bad\nname.py").unlink()
    os.close(os.open(os.path.join(os.fsencode(vdir), b"caf\xe9.py"), os.O_CREAT | os.O_WRONLY))
    with pytest.raises(UnsafePath, match="not a UTF-8 file name"):
        convert(wheel_input(vdir, allow_no_digest=True), tmp_path / "o")


def test_pycache_left_out(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo", files={"__pycache__/x.cpython-311.pyc": b"junk", "y.pyc": b"junk"})
    whl, _, _ = convert(wheel_input(vdir), tmp_path / "o")
    assert not any("pyc" in n for n in _read(whl))


def test_executable_bit(tmp_path: Path) -> None:
    vdir = make_variant(tmp_path / "repo", elf=LIBZ)
    with zipfile.ZipFile(convert(wheel_input(vdir), tmp_path / "o")[0]) as z:
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
    assert modes["img2grey/_img2grey_abc123.abi3.so"] == 0o100755 and modes["img2grey/_ops.py"] == 0o100644


def _big(seed: int) -> bytes:
    """3.5 MB that spans the codecs: machine code (libz), entropy-limited bytes and noise."""
    import random

    rnd = random.Random(seed)
    code = (LIBZ.read_bytes() * 20)[: 1 << 20]
    low = rnd.randbytes(1 << 20).translate(bytes(b % 32 for b in range(256)))
    return code + low + rnd.randbytes(1 << 20) + code[: 1 << 19]


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
def test_large_file_read_once_checked_and_reproducible(tmp_path: Path, algorithm: str) -> None:
    """A file past the small-file limit is hashed while it is compressed; the digest still decides."""
    big = _big(1)
    vdir = make_variant(tmp_path / "repo", files={"data/blob.bin": big})
    meta = json.loads((vdir / "metadata.json").read_text())
    from kernel_factory.verify import digest

    meta["digest"] = {"algorithm": algorithm, "files": digest.compute(vdir, algorithm)}
    (vdir / "metadata.json").write_text(json.dumps(meta))
    a, _, ra = convert(wheel_input(vdir), tmp_path / "a")
    b, _, rb = convert(wheel_input(vdir), tmp_path / "b")
    assert a.read_bytes() == b.read_bytes() and ra == rb
    content = _read(a)
    assert content["img2grey/data/blob.bin"] == big
    rows = {r[0]: r[1] for r in csv.reader(io.StringIO(content[f"{DIST}/RECORD"].decode()))}
    assert rows["img2grey/data/blob.bin"] == wheel.record_hash(hashlib.sha256(big).digest())

    (vdir / "data" / "blob.bin").write_bytes(big[:-1] + b"\0")  # one byte changed, at the very end
    bad = rf"'data/blob.bin' does not match its metadata.json digest \({algorithm}\)"
    with pytest.raises(DigestMismatch, match=bad):
        convert(wheel_input(vdir), tmp_path / "c")
    assert os.listdir(tmp_path / "c") == []  # the half-made wheel is gone


def test_large_binary_checked_before_it_is_audited(tmp_path: Path) -> None:
    """A tampered large .so is refused for its digest, not parsed by the audit first."""
    vdir = make_variant(tmp_path / "repo", files={"_big.abi3.so": LIBZ.read_bytes() + _big(2)})
    (vdir / "_big.abi3.so").write_bytes(b"not an ELF any more" + _big(2))
    with pytest.raises(DigestMismatch, match="'_big.abi3.so' does not match"):
        convert(wheel_input(vdir), tmp_path / "o")
    assert os.listdir(tmp_path / "o") == []
