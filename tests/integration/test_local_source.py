"""LocalSource.fetch on a real git repository: a clean checkout of the revision is read in place, anything
else (changed, untracked or ignored files, another commit checked out, assume-unchanged) from git itself."""

from __future__ import annotations

from pathlib import Path

import hostile as h
import pytest
from kernel_factory.sources.local import LocalSource

VARIANT = "torch-cpu"


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "kern"
    repo.mkdir()
    h.variant(repo, VARIANT, "kern", {"ops.py": "X = 1\n"})
    return repo, h.commit(repo)


def _ops(src: LocalSource, sha: str) -> str:
    folder = src.fetch(sha, VARIANT)
    try:
        return (folder / "build" / VARIANT / "ops.py").read_text()
    finally:
        src.release()


def _change(path: Path, change: str) -> None:
    """Leave VARIANT's folder in the work tree other than the commit: modified, untracked or ignored files."""
    ops = path / "build" / VARIANT / "ops.py"
    if change == "modified":
        ops.write_text("X = 2\n")
    elif change == "untracked":
        (ops.parent / "extra.py").write_text("")
    else:  # ignored
        (path / ".git" / "info" / "exclude").write_text("*.log\n")
        (ops.parent / "build.log").write_text("")


def test_clean_checkout_is_read_in_place(repo: tuple[Path, str]) -> None:
    path, sha = repo
    src = LocalSource(path)
    assert src.fetch(sha, VARIANT) == path.resolve()


@pytest.mark.parametrize("change", ["modified", "untracked", "ignored", "assume-unchanged", "other-head"])
def test_anything_but_a_clean_checkout_is_read_from_git(repo: tuple[Path, str], change: str) -> None:
    path, sha = repo
    ops = path / "build" / VARIANT / "ops.py"
    if change == "assume-unchanged":
        h.git(path, "update-index", "--assume-unchanged", f"build/{VARIANT}/ops.py")
        ops.write_text("X = 2\n")
    elif change == "other-head":
        ops.write_text("X = 2\n")
        h.commit(path, tags=("v0.2.0",))
    else:
        _change(path, change)
    src = LocalSource(path)
    assert src.fetch(sha, VARIANT) != path.resolve()
    assert _ops(src, sha) == "X = 1\n"  # what the revision holds, not the work tree
    if change == "untracked":
        assert not (src.fetch(sha, VARIANT) / "build" / VARIANT / "extra.py").exists()
        src.release()


def test_fetch_writes_into_the_folder_it_is_given(repo: tuple[Path, str], tmp_path: Path) -> None:
    """``fetch(..., into=DIR)``: the copy git makes lies under DIR (the build's scratch), gone after release."""
    path, sha = repo
    (path / "build" / VARIANT / "ops.py").write_text("X = 2\n")  # not a clean checkout: read from git
    into = tmp_path / "scratch"
    into.mkdir()
    src = LocalSource(path)
    folder = src.fetch(sha, VARIANT, into=into)
    assert folder.is_relative_to(into) and (folder / "build" / VARIANT / "ops.py").read_text() == "X = 1\n"
    assert src.lfs_paths(sha, VARIANT) == set()
    src.release()
    assert list(into.iterdir()) == []


@pytest.mark.parametrize("change", ["modified", "untracked", "ignored", "renamed", "skip-worktree"])
def test_one_changed_variant_leaves_the_others_read_in_place(repo: tuple[Path, str], change: str) -> None:
    """The work tree is checked once for the whole build/ folder: a change in one variant sends that one to git
    and no other; sizes() says which are read in place (no scratch)."""
    path, _ = repo
    h.variant(path, "torch-xpu", "kern", {"ops.py": "X = 3\n"})
    sha = h.commit(path, tags=())
    if change == "renamed":
        h.git(path, "mv", f"build/{VARIANT}/ops.py", f"build/{VARIANT}/ops2.py")
    elif change == "skip-worktree":
        h.git(path, "update-index", "--skip-worktree", f"build/{VARIANT}/ops.py")
    else:
        _change(path, change)
    src = LocalSource(path)
    total, scratch = src.sizes(sha, VARIANT) or (0, 0)
    assert scratch == total > 0  # copied out of git
    other = src.sizes(sha, "torch-xpu")
    assert other is not None and other[0] > 0 and other[1] == 0  # read in place
    assert src.fetch(sha, "torch-xpu") == path.resolve()
    assert src.fetch(sha, VARIANT) != path.resolve()
    src.release()


def test_checked_once_then_no_git_command(repo: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's size check answers for every variant; fetch (in a worker, later) runs no git command."""
    path, sha = repo
    (path / "build" / "notes.txt").write_text("")  # beside the variants, in none of them
    src = LocalSource(path)
    assert (src.sizes(sha, VARIANT) or (0, 1))[1] == 0
    monkeypatch.setenv("PATH", "")  # no git to run
    assert src.fetch(sha, VARIANT) == path.resolve()


def test_one_listing_gives_variants_and_sizes(repo: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One ``git ls-tree`` of build/ per revision names the variants (folders only) and sums each one's files,
    nested ones included; the sizes of every variant then come without another listing."""
    path, _ = repo
    h.variant(path, "torch-xpu", "kern", {"ops.py": "X = 3\n", "sub/deep.bin": "0123456789"})
    (path / "build" / "notes.txt").write_text("not a variant\n")
    sha = h.commit(path, tags=())
    src = LocalSource(path)
    assert src.variants(sha) == [VARIANT, "torch-xpu"]
    src.sizes(sha, VARIANT)  # the work tree's check (its own git commands), once
    monkeypatch.setenv("PATH", "")  # no git to run from here on
    for name in (VARIANT, "torch-xpu"):
        folder = path / "build" / name
        expected = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        assert src.sizes(sha, name) == (expected, 0)
    assert src.sizes(sha, "torch-missing") is None


def test_a_bare_repository_is_git_a_folder_inside_a_repository_is_not(repo: tuple[Path, str], tmp_path: Path) -> None:
    """One ``git rev-parse`` tells a bare repository (read from git) from a folder inside another repository
    (a plain folder: its parent's history is not the kernel's)."""
    path, sha = repo
    bare = tmp_path / "kern.git"
    h.git(tmp_path, "clone", "-q", "--bare", str(path), str(bare))
    src = LocalSource(bare)
    assert src.is_git and src.name == "kern"
    assert src.variants(sha) == [VARIANT]
    total, scratch = src.sizes(sha, VARIANT) or (0, 0)
    assert scratch == total == sum(f.stat().st_size for f in (path / "build" / VARIANT).iterdir())  # copied
    assert LocalSource(path).is_git
    inner = path / "vendored"
    h.variant(inner, VARIANT, "kern", {"ops.py": "X = 4\n"})
    plain = LocalSource(inner)
    assert not plain.is_git
    assert plain.variants("worktree") == [VARIANT]
