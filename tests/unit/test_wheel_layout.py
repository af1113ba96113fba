"""The variant travels byte for byte: the wheel's variant root holds exactly build/<variant>/ (flat, nested, zip),
its provenance names the root, and consumers map wheel members back (wheel/layout.py), older wheels included."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from kernel_factory.errors import BadKernel, Refused
from kernel_factory.local.download import wheelcheck
from kernel_factory.verify import digest
from kernel_factory.wheel import distinfo as wheel
from kernel_factory.wheel.convert import convert
from kernel_factory.wheel.layout import NotMappable, legacy_map, member_map, recorded_root, root_name
from wheel_kit import make_variant, make_zip_variant, wheel_input


def _folder(vdir: Path) -> dict[str, bytes]:
    """Every file of a variant folder (what kernels' digest walk sees, metadata.json included)."""
    return {rel: (vdir / rel).read_bytes() for rel in digest.walk(vdir)}


def _root(whl: Path) -> tuple[dict[str, object], dict[str, bytes], list[str]]:
    """(provenance, the files below its variant root by path in the variant, every member name)."""
    with zipfile.ZipFile(whl) as zf:
        names = zf.namelist()
        prov = json.loads(zf.read(next(n for n in names if n.endswith(".dist-info/kernel_factory.json"))))
        mapped = member_map(prov, names, None)
        return prov, {rel: zf.read(n) for n, rel in mapped.items()}, names


def _sigstore(vdir: Path) -> None:
    (vdir / "metadata.json.sigstore").write_bytes(b'{"bundle": 1}\n')


@pytest.mark.parametrize("case", ["flat", "flat-noarch", "nested", "zip"])
def test_root_is_the_variant_folder_byte_for_byte(tmp_path: Path, case: str) -> None:
    if case == "zip":
        vdir = make_zip_variant(tmp_path / "repo")
        inp = wheel_input(vdir, repo_name="relu")
    elif case == "nested":
        vdir = make_variant(tmp_path / "repo", layout="nested", package="relu", name="relu")
        inp = wheel_input(vdir, repo_name="relu")
    else:
        vdir = make_variant(tmp_path / "repo", "torch-universal", elf=None) if case == "flat-noarch" else \
            make_variant(tmp_path / "repo")
        inp = wheel_input(vdir)
    _sigstore(vdir)
    whl, _, record = convert(inp, tmp_path / "out")
    prov, files, names = _root(whl)
    assert files == _folder(vdir)  # every file, at its place, nothing else
    root = str(prov["variant-root"])
    assert record.extra == {"variant-root": root}
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
    outside = sorted(n for n in names if not n.startswith((root + "/", dist_info + "/")))
    meta = json.loads(files["metadata.json"])
    unpacked = tmp_path / "unpacked"
    for rel, data in files.items():
        (unpacked / rel).parent.mkdir(parents=True, exist_ok=True)
        (unpacked / rel).write_bytes(data)
    assert digest.compute(unpacked) == meta["digest"]["files"]
    if case.startswith("flat"):
        assert (root, prov["layout"], outside) == ("img2grey", "flat", [])
        assert "img2grey/img2grey/__init__.py" in names and record.import_name == "img2grey"
    elif case == "nested":
        assert (root, prov["layout"], outside) == ("_relu_kernel", "nested", ["_relu_kernel.pth"])
        assert record.import_name == "relu"
    else:
        assert (root, prov["layout"], outside) == ("_relu_kernel", "zip", [])  # kernels loads it: no path file
        assert record.import_name is None and "_relu_kernel/_relu_abc123.zip" in names


def test_zip_layout_without_its_archive_is_refused(tmp_path: Path) -> None:
    vdir = make_zip_variant(tmp_path / "repo")
    (vdir / "_relu_abc123.zip").rename(vdir / "other.zip")
    meta = json.loads((vdir / "metadata.json").read_text())
    meta["digest"]["files"] = digest.compute(vdir)
    (vdir / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(BadKernel) as err:
        convert(wheel_input(vdir, repo_name="relu"), tmp_path / "out")
    assert str(err.value) == ('build/torch-universal: metadata.json says build-layout "zip" but the folder has no '
                              "_relu_abc123.zip; rebuild it with kernel-builder")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_root_name_is_one_private_folder_per_distribution() -> None:
    assert root_name("relu-nested") == "_relu_nested_kernel"
    assert root_name("Layer.Norm") == "_layer_norm_kernel"


@pytest.mark.parametrize("root", ["", "a/b", "..", ".", "x.dist-info", 3, "a\\b", "x\ny"])
def test_a_recorded_root_that_is_not_one_folder_is_refused(root: object) -> None:
    with pytest.raises(NotMappable, match="is not one folder of the wheel; rebuild it"):
        recorded_root({"variant-root": root})


def test_new_wheel_members_map_below_the_root_only() -> None:
    names = ["_relu_kernel/metadata.json", "_relu_kernel/relu/__init__.py", "_relu_kernel.pth",
             "relu-1.dist-info/RECORD", "_relu_kernel/"]
    assert member_map({"variant-root": "_relu_kernel", "package": "relu"}, names, None) == {
        "_relu_kernel/metadata.json": "metadata.json", "_relu_kernel/relu/__init__.py": "relu/__init__.py"}


def _meta(files: list[str]) -> bytes:
    return json.dumps({"name": "img2grey", "digest": {"algorithm": "sha256", "files": dict.fromkeys(files, "x")}}
                      ).encode()


def test_older_flat_wheel_without_its_compat_folder_is_refused() -> None:
    """An older kernel-factory left a flat build's compat folder out: a file the digest lists is not in the wheel."""
    meta = _meta(["__init__.py", "_ops.py", "img2grey/__init__.py"])
    with pytest.raises(NotMappable) as err:
        member_map({"package": "img2grey"}, ["img2grey/__init__.py", "img2grey/_ops.py", "img2grey/metadata.json"],
                   meta)
    assert str(err.value) == (
        "it was made by an older kernel-factory that left img2grey/__init__.py (listed in the variant's digest) out "
        "of the wheel, so kernels 0.18+ refuse it; rebuild it with this kernel-factory (to-wheel or build), which "
        "keeps the variant byte for byte")


def test_older_wheels_mapped_as_before_where_the_digest_allows() -> None:
    # a flat build without a compat folder (older Hub builds): the package folder is the variant folder
    assert legacy_map("img2grey", ["__init__.py", "metadata.json"], _meta(["__init__.py"])) == {
        "__init__.py": "__init__.py", "metadata.json": "metadata.json"}
    # a nested build: metadata.json had been moved into the package folder; the rest goes back into <pkg>/
    assert legacy_map("relu", ["__init__.py", "_ops.py", "metadata.json", "metadata.json.sigstore"],
                      _meta(["relu/__init__.py", "relu/_ops.py"])) == {
        "__init__.py": "relu/__init__.py", "_ops.py": "relu/_ops.py", "metadata.json": "metadata.json",
        "metadata.json.sigstore": "metadata.json.sigstore"}
    # no digest: where they are, as before
    assert legacy_map("relu", ["__init__.py", "metadata.json"], b'{"name": "relu"}') == {
        "__init__.py": "__init__.py", "metadata.json": "metadata.json"}
    with pytest.raises(NotMappable, match="that put relu/extra.py \\(not in the variant's digest\\) in the wheel"):
        legacy_map("relu", ["__init__.py", "extra.py"], _meta(["relu/__init__.py"]))


@pytest.mark.parametrize("case", ["flat", "nested", "zip"])
def test_download_unpacks_the_variant_folder_byte_for_byte(tmp_path: Path, case: str) -> None:
    """download's unpacking (local/download/wheelcheck.py) rebuilds build/<variant>/ exactly, from the recorded root."""
    if case == "zip":
        vdir = make_zip_variant(tmp_path / "repo")
    elif case == "nested":
        vdir = make_variant(tmp_path / "repo", layout="nested", package="relu", name="relu")
    else:
        vdir = make_variant(tmp_path / "repo")
    _sigstore(vdir)
    whl, _, _ = convert(wheel_input(vdir, repo_name="relu" if case != "flat" else "img2grey"), tmp_path / "out")
    prov, folder, files = wheelcheck.unpack(whl, tmp_path / "into")
    assert _folder(folder) == _folder(vdir) and sorted(files) == sorted(_folder(vdir))


def _older_wheel(tmp_path: Path, vdir: Path, *, nested: bool) -> Path:
    """The wheel an older kernel-factory made of ``vdir``: the package folder, metadata.json moved into it, a flat
    build's compat folder left out, and no variant root in the provenance."""
    whl = tmp_path / "old" / "relu-1.0-py3-none-any.whl"
    whl.parent.mkdir(parents=True)
    rows = []
    with zipfile.ZipFile(whl, "w") as zf:
        for rel in digest.walk(vdir):
            if nested:
                inner = rel.split("/", 1)[1] if rel.startswith("relu/") else rel
            elif rel.startswith("img2grey/"):
                continue
            else:
                inner = rel
            data = (vdir / rel).read_bytes()
            name = f"{'relu' if nested else 'img2grey'}/{inner}"
            zf.writestr(name, data)
            rows.append(f"{name},{wheel.record_hash(hashlib.sha256(data).digest())},{len(data)}")
        prov = {"package": "relu" if nested else "img2grey", "variant": vdir.name, "revision": "a" * 40}
        zf.writestr("relu-1.0.dist-info/kernel_factory.json", json.dumps(prov))
        zf.writestr("relu-1.0.dist-info/RECORD", "\n".join(rows) + "\n")
    return whl


def test_download_maps_an_older_nested_wheel_and_refuses_an_older_flat_one(tmp_path: Path) -> None:
    nested = make_variant(tmp_path / "n", layout="nested", package="relu", name="relu")
    _, folder, _ = wheelcheck.unpack(_older_wheel(tmp_path / "a", nested, nested=True), tmp_path / "into-n")
    assert _folder(folder) == _folder(nested)
    flat = make_variant(tmp_path / "f")
    with pytest.raises(Refused) as err:
        wheelcheck.unpack(_older_wheel(tmp_path / "b", flat, nested=False), tmp_path / "into-f")
    assert str(err.value) == (
        "relu-1.0-py3-none-any.whl: it was made by an older kernel-factory that left img2grey/__init__.py (listed in "
        "the variant's digest) out of the wheel, so kernels 0.18+ refuse it; rebuild it with this kernel-factory "
        "(to-wheel or build), which keeps the variant byte for byte; nothing was installed")


def test_local_kernels_leaves_out_an_installed_older_wheel_kernels_018_would_refuse() -> None:
    """local-kernels (--shell, --cache) keeps an older wheel only where its installed folder is the variant folder."""
    from kernel_factory.local.local_kernels.installed import older_layout

    files = (("__init__.py", "0" * 64), ("metadata.json", "0" * 64))
    assert older_layout("img2grey", {"package": "img2grey"}, files, _meta(["__init__.py"])) is None
    assert older_layout("x", {"variant-root": "x"}, files, _meta(["other.py"])) is None  # new wheels: by their root
    assert older_layout("relu", {"package": "relu"}, files, _meta(["relu/__init__.py"])) == (
        "it was made by an older kernel-factory that installs the package folder, not the build variant folder its "
        "digest describes (with relu/__init__.py), so kernels 0.18+ refuse it; rebuild it with this kernel-factory "
        "(to-wheel or build), which keeps the variant byte for byte")
    assert older_layout("img2grey", {"package": "img2grey"}, files,
                        _meta(["__init__.py", "img2grey/__init__.py"])) == (
        "it was made by an older kernel-factory that left img2grey/__init__.py (listed in the variant's digest) out "
        "of the wheel, so kernels 0.18+ refuse it; rebuild it with this kernel-factory (to-wheel or build), which "
        "keeps the variant byte for byte")


@pytest.mark.parametrize("name", ["sitecustomize.py", "usercustomize/__init__.py", "sitecustomize.abi3.so"])
def test_a_nested_build_cannot_run_code_at_python_start(tmp_path: Path, name: str) -> None:
    """The nested root goes on sys.path through the wheel's .pth: a startup hook at its top is refused."""
    vdir = make_variant(tmp_path / "repo", layout="nested", package="relu", name="relu", elf=None,
                        files={name: b"import os\n"})
    with pytest.raises(BadKernel) as err:
        convert(wheel_input(vdir, repo_name="relu"), tmp_path / "out")
    top = name.split("/")[0]
    assert str(err.value) == (f"build/torch27-cxx11-cpu-x86_64-linux: {top!r} at the top of a nested build would run "
                              "at every Python start once its folder is on sys.path; remove it from the build")


@pytest.mark.parametrize("case", ["flat", "zip"])
def test_a_repaired_record_keeps_the_variant_root(tmp_path: Path, case: str) -> None:
    """store/adopt.py repair rebuilds a record from the wheel: the variant root (and no import name for the zip
    layout) as convert recorded them, so the plan does not take the wheel for an older one."""
    from kernel_factory.store.adopt import repair

    vdir = make_zip_variant(tmp_path / "repo") if case == "zip" else make_variant(tmp_path / "repo")
    whl, _, built = convert(wheel_input(vdir, repo_name="relu" if case == "zip" else "img2grey"),
                            tmp_path / "store" / "files")
    record = repair(tmp_path / "store", whl.name)
    assert record.extra == built.extra == {"variant-root": "_relu_kernel" if case == "zip" else "img2grey"}
    assert record.import_name == built.import_name == (None if case == "zip" else "img2grey")
