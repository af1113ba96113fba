"""local/local_kernels/installed.py directly: which installed distribution may claim a kernel (claim_problem), and the
files of its package that its RECORD vouches for (record_files), which are what `local-kernels --cache` places."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as im
from pathlib import Path
from typing import Any

import pytest
from kernel_factory.local.local_kernels import installed as claims

PROV: dict[str, Any] = {"repo_id": "org/img2grey", "revision": "a" * 40, "ref": "v1",
                        "variant": "torch213-cxx11-cpu-x86_64-linux", "kernel_version": "1.1.2"}


def b64(data: bytes) -> str:
    """A RECORD's sha256 field: urlsafe base64 without its padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def dist(tmp_path: Path, lines: list[str] | None) -> im.Distribution:
    """A distribution whose RECORD holds ``lines`` (None: no RECORD at all)."""
    info = tmp_path / "img2grey-1.1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: img2grey\nVersion: 1.1.2\n")
    if lines is not None:
        (info / "RECORD").write_text("".join(f"{line}\n" for line in lines))
    return im.PathDistribution(info)


def test_the_kernels_own_distribution_may_claim_it_in_any_spelling() -> None:
    for name in ("img2grey", "Img2Grey", "IMG2GREY"):
        assert claims.claim_problem(name, "1.1.2+torch213cpucxx11", PROV) is None
    assert claims.claim_problem("img2grey", "1.1.2", PROV) is None  # no label
    assert claims.claim_problem("my-kernel", "1.1.2", {**PROV, "repo_id": "org/My_Kernel"}) is None  # by canonical name


@pytest.mark.parametrize("name", ["img2grey-helpers", "aaa"])  # a name that sorts after the project's, or before
def test_another_distribution_may_not(name: str) -> None:
    assert claims.claim_problem(name, "1.1.2", PROV) == (
        f"the distribution {name!r} claims org/img2grey, whose project is 'img2grey': only a distribution "
        f"of that name may; pip uninstall {name!r} unless you trust it, and install img2grey's wheel")


def test_a_version_that_is_not_one_fails_the_record_checks() -> None:
    why = claims.claim_problem("img2grey", "not a version", PROV)
    assert why is not None and why.startswith("its kernel_factory.json fails the checks a record passes (")
    assert why.endswith("): reinstall the wheel from your index")


def test_a_provenance_without_a_repo_id_needs_no_name_match() -> None:
    prov = {k: v for k, v in PROV.items() if k != "repo_id"}
    assert claims.claim_problem("anything-else", "1.1.2", prov) is None


def test_record_files_lists_the_packages_files_with_their_hashes_sorted(tmp_path: Path) -> None:
    """Every file below the package at any depth, by its path below it, with RECORD's sha256 as hex; bytecode,
    the package name alone, other packages and the dist-info are not files of the variant."""
    lines = [
        f"aaa/first.py,sha256={b64(b'f')},1",  # another package's, sorting before this one, listed first
        "img2grey/__pycache__/__init__.cpython-311.pyc,,",  # bytecode listed before the files
        f"img2grey/z.py,sha256={b64(b'z')},1",
        f"img2grey/_ops/deep/k.so,sha256={b64(b'k')},1",
        f"img2grey/__init__.py,sha256={b64(b'init')},4",
        "img2grey/__pycache__/__init__.cpython-311.pyc,,",
        "img2grey/stray.pyc,,",
        "img2grey,,",
        f"other/img2grey/x.py,sha256={b64(b'x')},1",
        f"img2grey-1.1.2.dist-info/METADATA,sha256={b64(b'm')},1",
        "img2grey-1.1.2.dist-info/RECORD,,",
    ]
    package = "".join(["img2", "grey"])  # as a caller has it (from JSON): equal, not the same object
    files, why = claims.record_files(dist(tmp_path, lines), package)
    assert why is None
    assert files == (
        ("__init__.py", hashlib.sha256(b"init").hexdigest()),
        ("_ops/deep/k.so", hashlib.sha256(b"k").hexdigest()),
        ("z.py", hashlib.sha256(b"z").hexdigest()),
    )


@pytest.mark.parametrize("digest", [hashlib.sha256(b"x").digest(), b"\xff" * 32, b"\x00" * 32])
def test_record_files_decodes_unpadded_urlsafe_base64(tmp_path: Path, digest: bytes) -> None:
    value = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert len(value) == 43  # one "=" of padding was cut: it is put back
    files, why = claims.record_files(dist(tmp_path, [f"img2grey/a.py,sha256={value},1"]), "img2grey")
    assert (files, why) == ((("a.py", digest.hex()),), None)


NO_SHA = "its RECORD gives no sha256 for img2grey/a.py: reinstall the wheel with pip"
DAMAGED = "its RECORD's sha256 for img2grey/a.py is damaged: reinstall the wheel with pip"


@pytest.mark.parametrize(("line", "why"), [
    ("img2grey/a.py,,", NO_SHA),
    (f"img2grey/a.py,sha512={b64(b'a')},1", NO_SHA),
    ("img2grey/a.py,md5=" + base64.urlsafe_b64encode(hashlib.md5(b"a").digest()).rstrip(b"=").decode() + ",1", NO_SHA),
    ("img2grey/a.py,sha256=" + base64.urlsafe_b64encode(b"\x01" * 31).rstrip(b"=").decode() + ",1",
     DAMAGED),
    ("img2grey/a.py,sha256=" + base64.urlsafe_b64encode(b"\x01" * 33).rstrip(b"=").decode() + ",1",
     DAMAGED),
    ("img2grey/a.py,sha256=" + base64.urlsafe_b64encode(b"\x01" * 48).decode() + ",1",
     DAMAGED),
    ("img2grey/a.py,sha256=not*base64,1", DAMAGED),
    ("img2grey/a.py,sha256=" + b64(b"a")[:42] + ",1",
     DAMAGED),
])
def test_record_files_refuses_a_file_it_cannot_vouch_for(tmp_path: Path, line: str, why: str) -> None:
    good = f"img2grey/b.py,sha256={b64(b'b')},1"
    assert claims.record_files(dist(tmp_path, [good, line]), "img2grey") == ((), why)


@pytest.mark.parametrize("lines", [
    None,
    [],
    ["img2grey-1.1.2.dist-info/RECORD,,", f"other/a.py,sha256={b64(b'a')},1", "img2grey/__pycache__/a.pyc,,"],
])
def test_record_files_with_no_file_of_the_package(tmp_path: Path, lines: list[str] | None) -> None:
    assert claims.record_files(dist(tmp_path, lines), "img2grey") == (
        (), "its RECORD lists no file of img2grey/: reinstall the wheel with pip")


# -- a .dist-info another distribution's RECORD lists ----------------------------------------------------------


def installed(site: Path, name: str, files: dict[str, bytes], listed: list[str] | None = None) -> im.Distribution:
    """``name``-1.0 installed in ``site``: ``files`` written, a RECORD listing them (``listed``: other paths) and
    itself."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    rows = [f"{rel},sha256={b64(files.get(rel, b''))},1" for rel in (listed if listed is not None else files)]
    (info / "RECORD").write_text("\n".join([*rows, f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]) + "\n")
    return im.PathDistribution(info)


def test_a_dist_info_listed_by_another_distributions_record_claims_nothing(tmp_path: Path) -> None:
    """pip put activation-1.0.dist-info there as fast-activation-helpers' data: the helper's RECORD lists it."""
    site = tmp_path / "site"
    fake = installed(site, "activation", {"act/__init__.py": b"X = 1\n"})
    helper = installed(site, "fast-activation-helpers", {"helpers/__init__.py": b""},
                       listed=["helpers/__init__.py", "activation-1.0.dist-info/METADATA",
                               "activation-1.0.dist-info/RECORD"])
    every = list(im.distributions(path=[str(site)]))
    assert claims.shared_problems([(fake, "act"), (helper, None)], every) == [
        "its file activation-1.0.dist-info/METADATA is listed in the RECORD of 'fast-activation-helpers' 1.0 too, "
        "which installed it: only the distribution that installed its own files may claim a kernel; pip uninstall "
        "'fast-activation-helpers' unless you trust it", None]


def test_a_package_file_another_record_lists_too_claims_nothing(tmp_path: Path) -> None:
    site = tmp_path / "site"
    kernel = installed(site, "activation", {"act/__init__.py": b"X = 1\n", "act/sub/ops.py": b""})
    installed(site, "zzz-overwriter", {"z.py": b""}, listed=["z.py", "act/sub/ops.py"])
    every = list(im.distributions(path=[str(site)]))
    (why,) = claims.shared_problems([(kernel, "act")], every)
    assert why is not None and why.startswith("its file act/sub/ops.py is listed in the RECORD of 'zzz-overwriter' 1.0")


def test_a_distribution_alone_with_its_files_may_claim(tmp_path: Path) -> None:
    site = tmp_path / "site"
    kernel = installed(site, "activation", {"act/__init__.py": b"X = 1\n"})
    installed(site, "other", {"actual/__init__.py": b"", "act.py": b""})  # names that only start alike
    installed(site, "third", {"t.py": b""}, listed=["t.py", "../elsewhere/act/__init__.py"])
    every = list(im.distributions(path=[str(site)]))
    assert claims.shared_problems([(kernel, "act")], every) == [None]
    assert claims.shared_problems([(kernel, None)], every) == [None]  # its .dist-info alone


def test_a_record_that_cannot_be_read_lists_nothing(tmp_path: Path) -> None:
    site = tmp_path / "site"
    kernel = installed(site, "activation", {"act/__init__.py": b"X = 1\n"})
    broken = installed(site, "broken", {"b.py": b""})
    (Path(str(broken._path)) / "RECORD").write_bytes(b"\xff\xfe act/__init__.py")  # type: ignore[attr-defined]
    nul = installed(site, "nul", {"n.py": b""})
    (Path(str(nul._path)) / "RECORD").write_text('"act/__init__.py\0,x\n')  # type: ignore[attr-defined]
    every = list(im.distributions(path=[str(site)]))
    assert claims.shared_problems([(kernel, "act")], every) == [None]
