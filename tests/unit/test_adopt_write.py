"""What adoption (store/adopt.py) puts into a store's ``files/``: which wheels of a folder it takes, a kernel's name
refused, a link or an identical wheel already at the name, a wheel too large to be read whole copied and checked,
and the results in order across batches (no network, no processes)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from index_synth import adopt, make_wheel
from kernel_factory.libc import sync_fs
from kernel_factory.nofollow import fsync_path
from kernel_factory.store import adopt as adopt_module
from kernel_factory.store import wheelinfo
from kernel_factory.store.adopt import adopt_batch, adopt_wheels


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_wheel_of_a_kernel_the_store_builds_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels, store = tmp_path / "wheels", tmp_path / "store"
    make_wheel(wheels, "img2grey", "1.0")
    make_wheel(wheels, "helper", "1.0")
    result = adopt(store, wheels, kernels={"img2grey"})
    assert (result.adopted, result.refused) == (["helper-1.0-py3-none-any.whl"], ["img2grey-1.0-py3-none-any.whl"])
    assert capsys.readouterr().err.splitlines() == [
        "warning: skipped img2grey-1.0-py3-none-any.whl: project 'img2grey' is a kernel this store builds, and an "
        "adopted wheel would sit beside it in every install; remove the wheel, or pass --allow-kernel-names "
        "(allow-kernel-names = true) if you mean to add it"
    ]
    assert names(store / "files") == ["helper-1.0-py3-none-any.whl", "helper-1.0-py3-none-any.whl.json",
                                      "helper-1.0-py3-none-any.whl.metadata"]


def test_only_the_folders_visible_wheel_files_not_yet_listed_are_adopted(tmp_path: Path) -> None:
    wheels, store = tmp_path / "wheels", tmp_path / "store"
    make_wheel(wheels, "helper", "1.0")
    make_wheel(wheels, "listed", "1.0")
    hidden = make_wheel(tmp_path / "elsewhere", "hidden", "1.0")[0]
    hidden.rename(wheels / f".{hidden.name}")  # a dot file: a download in progress, an editor's copy
    (wheels / "folder-1.0-py3-none-any.whl").mkdir()  # not a file
    (wheels / "notes.txt").write_text("not a wheel")
    result = adopt(store, wheels, listing={"listed-1.0-py3-none-any.whl"})
    assert (result.adopted, result.present, result.refused) == (
        ["helper-1.0-py3-none-any.whl"], ["listed-1.0-py3-none-any.whl"], [])
    assert names(store / "files") == ["helper-1.0-py3-none-any.whl", "helper-1.0-py3-none-any.whl.json",
                                      "helper-1.0-py3-none-any.whl.metadata"]


def test_a_folder_whose_wheels_are_all_listed_writes_nothing(tmp_path: Path) -> None:
    wheels, store = tmp_path / "wheels", tmp_path / "store"
    make_wheel(wheels, "helper", "1.0")
    result = adopt(store, wheels, listing={"helper-1.0-py3-none-any.whl"})
    assert (result.adopted, result.present, result.rows) == ([], ["helper-1.0-py3-none-any.whl"], [])
    assert not store.exists()


def test_a_link_at_the_name_to_another_file_is_replaced_and_its_target_left(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "in", "helper", "1.0")[0]
    files = tmp_path / "store/files"
    files.mkdir(parents=True)
    other = tmp_path / "other.whl"
    other.write_bytes(b"someone else's file")
    (files / wheel.name).symlink_to(other)
    done, refused, _ = adopt_batch(files, [wheel])
    assert refused == [] and [r.filename for _, r, _ in done] == [wheel.name]
    assert not (files / wheel.name).is_symlink() and (files / wheel.name).read_bytes() == wheel.read_bytes()
    assert other.read_bytes() == b"someone else's file"


def test_a_link_at_the_name_to_the_same_bytes_is_replaced_too(tmp_path: Path) -> None:
    """The link is never read through: that it points at a copy of the wheel does not make it the wheel."""
    wheel = make_wheel(tmp_path / "in", "helper", "1.0")[0]
    files = tmp_path / "store/files"
    files.mkdir(parents=True)
    copy = tmp_path / "copy.whl"
    copy.write_bytes(wheel.read_bytes())
    (files / wheel.name).symlink_to(copy)
    done, refused, _ = adopt_batch(files, [wheel])
    assert refused == [] and [r.filename for _, r, _ in done] == [wheel.name]
    assert not (files / wheel.name).is_symlink() and (files / wheel.name).read_bytes() == wheel.read_bytes()


@pytest.mark.parametrize("after", [False, True], ids=["digest-sorts-before", "digest-sorts-after"])
def test_a_different_file_at_the_name_is_refused_and_left(tmp_path: Path, after: bool) -> None:
    """Refused whichever way the two digests compare (the one right test is equality)."""
    wheel = make_wheel(tmp_path / "in", "helper", "1.0")[0]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    other = next(data for n in range(1000) if (hashlib.sha256(data := b"other %d" % n).hexdigest() > digest) == after)
    files = tmp_path / "store/files"
    files.mkdir(parents=True)
    (files / wheel.name).write_bytes(other)
    assert adopt_batch(files, [wheel])[:2] == ([], [(wheel.name, f"{wheel.name}: a different file of that name is "
                                                                 f"already in {files}; remove one of them")])
    assert names(files) == [wheel.name] and (files / wheel.name).read_bytes() == other


LABELLED = "img2grey-1.0+torch27cu128cxx11-py3-none-linux_x86_64.whl"
CU_FIELDS = {"label": "torch27cu128cxx11", "variant": "torch27-cxx11-cu128-x86_64-linux", "backend": "cuda",
             "backend_version": "12.8", "framework": "torch", "framework_version": "2.7", "os": "linux",
             "arch": "x86_64"}  # fmt: skip


def test_a_batch_fills_the_label_mapping_it_is_given_or_a_new_one(tmp_path: Path) -> None:
    """``known`` (label and platform -> variant fields) comes back filled: the caller's own dict, or a new one."""
    wheel = make_wheel(tmp_path / "in", "img2grey", "1.0+torch27cu128cxx11", "py3-none-linux_x86_64")[0]
    assert wheel.name == LABELLED
    files = tmp_path / "store/files"
    files.mkdir(parents=True)
    known: dict[str, dict[str, object]] = {}
    done, _, found = adopt_batch(files, [wheel], known=known)
    assert found is known and known == {"torch27cu128cxx11|linux_x86_64": CU_FIELDS}
    assert done[0][1].variant == CU_FIELDS["variant"]
    (files / f"{wheel.name}.json").unlink()
    assert adopt_batch(files, [wheel])[2] == {"torch27cu128cxx11|linux_x86_64": CU_FIELDS}


def test_no_wheels_adopt_to_nothing(tmp_path: Path) -> None:
    result = adopt_wheels(tmp_path / "store", [])
    assert (result.adopted, result.refused, result.rows, result.present) == ([], [], [], [])


@pytest.mark.parametrize("count", [1, 4, 5])
def test_a_small_batch_fsyncs_its_files_a_larger_one_the_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """Up to SMALL (4) wheels: each wheel fsynced, then the folder, before any record, and the folder again once
    the records are in; more: the file system synced twice instead. (The real calls, counted on the way.)"""
    calls: list[tuple[str, str]] = []

    def counted(name: str, real: Callable[[str], None]) -> Callable[[str], None]:
        def call(path: str) -> None:
            calls.append((name, os.path.basename(path)))
            real(path)
        return call

    monkeypatch.setattr(adopt_module, "sync_fs", counted("sync_fs", sync_fs))
    monkeypatch.setattr(adopt_module, "fsync_path", counted("fsync", fsync_path))
    wheels = [make_wheel(tmp_path / "in", f"p{n}", "1.0")[0] for n in range(count)]
    files = tmp_path / "store/files"
    files.mkdir(parents=True)
    assert len(adopt_batch(files, wheels)[0]) == count
    if count <= 4:
        assert calls == [*(("fsync", w.name) for w in wheels), ("fsync", "files"), ("fsync", "files")]
    else:
        assert calls == [("sync_fs", "files"), ("sync_fs", "files")]


def test_the_same_wheel_already_in_the_store_gets_its_record_again(tmp_path: Path) -> None:
    """The wheel's record (and .metadata) lost, the wheel kept: adopting it again writes them, not a refusal."""
    wheel, meta = make_wheel(tmp_path / "in", "helper", "1.0")
    files = tmp_path / "store/files"
    files.mkdir(parents=True)
    assert adopt_batch(files, [wheel])[1] == []
    (files / f"{wheel.name}.json").unlink()
    (files / f"{wheel.name}.metadata").unlink()
    done, refused, _ = adopt_batch(files, [wheel])
    assert refused == [] and [r.sha256 for _, r, _ in done] == [hashlib.sha256(wheel.read_bytes()).hexdigest()]
    assert names(files) == [wheel.name, f"{wheel.name}.json", f"{wheel.name}.metadata"]
    assert (files / f"{wheel.name}.metadata").read_bytes() == meta


def test_a_wheel_too_large_to_read_whole_is_copied_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past wheelinfo.WHOLE a wheel is hashed as a stream and then copied (the copy hashed again)."""
    monkeypatch.setattr(wheelinfo, "WHOLE", 0)  # every wheel is "large"
    wheel = make_wheel(tmp_path / "in", "helper", "1.0")[0]
    os.utime(wheel, (1_700_000_000, 1_700_000_000))
    files = tmp_path / "store/files"
    files.mkdir(parents=True)
    done, refused, _ = adopt_batch(files, [wheel])
    record = done[0][1]
    assert refused == [] and (files / wheel.name).read_bytes() == wheel.read_bytes()
    assert record.sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest() and record.size == wheel.stat().st_size
    assert (files / wheel.name).stat().st_mtime == 1_700_000_000 and record.upload_time == "2023-11-14T22:13:20Z"
    assert names(files) == [wheel.name, f"{wheel.name}.json", f"{wheel.name}.metadata"]


def test_a_large_wheel_that_changes_while_it_is_adopted_is_refused_and_nothing_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wheelinfo, "WHOLE", 0)
    wheel = make_wheel(tmp_path / "in", "helper", "1.0")[0]
    def read_then_written(path: str, filename: str) -> wheelinfo.WheelData:  # another writer, between read and copy
        data = wheelinfo.read_wheel(path, filename)
        with open(path, "ab") as f:
            f.write(b"more")
        return data

    monkeypatch.setattr(adopt_module, "read_wheel", read_then_written)
    files = tmp_path / "store/files"
    files.mkdir(parents=True)
    assert adopt_batch(files, [wheel])[:2] == ([], [(wheel.name, f"{wheel.name}: the file changed while it was "
                                                                 "read; run again once the folder is still")])
    assert names(files) == []


def test_results_are_sorted_across_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(adopt_module, "BATCH", 2)
    wheels = [make_wheel(tmp_path / "in", name, "1.0")[0] for name in ("e", "c", "a", "d", "b")]
    for name in ("z-1.0-py3-none-any.whl", "y-1.0-py3-none-any.whl"):
        (tmp_path / "in" / name).write_bytes(b"not a zip")
        wheels.insert(1, tmp_path / "in" / name)
    result = adopt_wheels(tmp_path / "store", wheels, workers=1)
    assert result.adopted == [f"{n}-1.0-py3-none-any.whl" for n in "abcde"]
    assert [row[0] for row in result.rows] == [w.name for w in wheels if w.name[0] in "abcde"]
    assert result.refused == ["y-1.0-py3-none-any.whl", "z-1.0-py3-none-any.whl"]
    assert capsys.readouterr().err.splitlines() == [
        f"warning: skipped {n}-1.0-py3-none-any.whl: not a readable zip file (File is not a zip file); rebuild or "
        "remove it" for n in "yz"
    ]
    assert len(names(tmp_path / "store/files")) == 15
