import hashlib
import json
from pathlib import Path

import pytest
from kernel_factory.errors import EXIT_REFUSED, EXIT_USAGE, ConfigError, DigestMismatch
from kernel_factory.verify.lockfile import (
    Dependency,
    LockedKernel,
    lock_hash,
    parse_dependencies,
    parse_lock,
    read_dependencies,
    read_lock,
    verify_lock_hash,
)

SHA = "ece277f908b9453112722d584fee4b5696f21c49"
H1 = "sha256-" + "a" * 64
H2 = "sha256-" + "b" * 64


def old_lock(**over: object) -> str:
    entry: dict[str, object] = {
        "repo_id": "kernels-community/activation",
        "sha": SHA,
        "variants": {
            "torch28-cxx11-cu128-x86_64-linux": {"hash": H1, "hash_type": "git_lfs_concat"},
            "torch-universal": {"hash": H2, "hash_type": "git_lfs_concat"},
        },
    }
    entry.update(over)
    return json.dumps([entry])


def test_old_format() -> None:
    (lk,) = parse_lock(old_lock())
    assert lk == LockedKernel(
        "kernels-community/activation", SHA, ("torch-universal", "torch28-cxx11-cu128-x86_64-linux"),
        {"torch28-cxx11-cu128-x86_64-linux": H1, "torch-universal": H2},
    )


def test_new_format_written_by_kernels_017() -> None:
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    text = KernelLocks({
        KernelDependency("kernels-community/relu", KernelVersion.Version(1)): KernelLock(SHA),
        KernelDependency("kernels-community/gelu", KernelVersion.Revision("main")): KernelLock("1" * 40),
    }).to_json()
    got = {lk.repo_id: lk for lk in parse_lock(text)}
    assert got["kernels-community/relu"] == LockedKernel("kernels-community/relu", SHA, ref="v1")
    assert got["kernels-community/gelu"].sha == "1" * 40
    assert got["kernels-community/gelu"].ref == "main"  # what download points refs/<ref> at
    assert got["kernels-community/gelu"].variants == ()


def test_nested_kernel_depends_flattened_and_merged() -> None:
    text = json.dumps([
        {"repo_id": "a/top", "sha": SHA, "kernel_depends": {"b/dep": {"repo_id": "b/dep", "sha": "2" * 40}}},
        {"repo_id": "b/dep", "sha": "2" * 40, "variants": {"torch-universal": {"hash": H1}}},
    ])
    got = parse_lock(text)
    assert [(lk.repo_id, lk.sha) for lk in got] == [("a/top", SHA), ("b/dep", "2" * 40)]
    assert got[1].variants == ()  # the nested entry locked every variant
    assert got[1].hashes == {"torch-universal": H1}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "not valid JSON"),
        ('{"repo_id": "a/b"}', "JSON list"),
        ("[1]", "must be an object"),
        ('[{"name": "x"}]', "neither 'repo_id' nor 'dependency'"),
        (old_lock(repo_id="noslash"), "org/name"),
        (old_lock(sha="abc"), "40-character"),
        (old_lock(variants={"v": {"hash": "md5-00", "hash_type": "git_lfs_concat"}}), "sha256-<64 hex"),
        (old_lock(variants={"v": {"hash": H1, "hash_type": "nix"}}), "hash_type 'nix'"),
        (old_lock(variants=[]), "'variants' must be an object"),
        ('[{"dependency": {"repo-id": "a/b"}, "lock": {}}]', "40-character"),
    ],
)
def test_malformed_lock(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_lock(text, "kernels.lock")
    msg = str(info.value)
    assert needle in msg and msg.startswith("kernels.lock") and "\n" not in msg
    assert info.value.exit_code == EXIT_USAGE


def test_read_lock_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the lock file"):
        read_lock(tmp_path / "kernels.lock")
    (tmp_path / "kernels.lock").write_text(old_lock())
    assert read_lock(tmp_path / "kernels.lock")[0].sha == SHA


def test_dependencies(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.kernels.dependencies]\n'
        '"kernels-community/relu" = 1\n"kernels-community/old" = ">=0.0.1"\n"kernels-community/str" = "2"\n'
    )
    assert read_dependencies(tmp_path / "pyproject.toml") == [
        Dependency("kernels-community/relu", major=1),
        Dependency("kernels-community/old", specifier=">=0.0.1"),
        Dependency("kernels-community/str", major=2),
    ]
    assert parse_dependencies({"project": {}}) == []


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"a/b": True}, "major version number"),
        ({"a/b": 1.5}, "major version number"),
        ({"a/b": "~~1"}, "neither a major version nor a version specifier"),
        ({"ab": 1}, "org/name"),
    ],
)
def test_bad_dependencies(table: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_dependencies({"tool": {"kernels": {"dependencies": table}}})


def test_bad_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.kernels\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_dependencies(tmp_path / "pyproject.toml")


def _git_blob(data: bytes) -> bytes:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).digest()


def test_lock_hash_matches_kernels_algorithm(tmp_path: Path) -> None:
    v = tmp_path / "build" / "torch-universal"
    (v / "pkg" / "__pycache__").mkdir(parents=True)
    (v / "__init__.py").write_bytes(b"x = 1\n")
    (v / "pkg" / "big.so").write_bytes(b"\x7fELF" * 100)
    (v / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"junk")
    (v / "b.pyc").write_bytes(b"junk")
    # As the kernels project's get_kernel_locks computes it from the Hub's tree listing:
    files = [(b"__init__.py", _git_blob(b"x = 1\n")), (b"pkg/big.so", hashlib.sha256(b"\x7fELF" * 100).digest())]
    m = hashlib.sha256()
    for name, oid in sorted(files):
        m.update(name)
        m.update(oid)
    expected = f"sha256-{m.hexdigest()}"
    assert lock_hash(v, {"pkg/big.so"}) == expected
    verify_lock_hash(v, expected, lfs_paths={"pkg/big.so"})
    with pytest.raises(DigestMismatch) as info:
        verify_lock_hash(v, expected, where="a/b@abc torch-universal")  # big.so taken as a git blob
    assert info.value.exit_code == EXIT_REFUSED
    assert str(info.value).startswith("a/b@abc torch-universal: files do not match the kernels.lock hash")


def test_lock_hash_git_blob_vector(tmp_path: Path) -> None:
    # `printf 'hello world' | git hash-object --stdin` = 95d09f2b10159347eece71399a7e2e907ea3df4f
    (tmp_path / "f").write_bytes(b"hello world")
    m = hashlib.sha256(b"f" + bytes.fromhex("95d09f2b10159347eece71399a7e2e907ea3df4f"))
    assert lock_hash(tmp_path) == f"sha256-{m.hexdigest()}"
