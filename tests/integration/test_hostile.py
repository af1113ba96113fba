"""Hostile kernel repositories through `to-wheel`, `build` and `index`, run as a user runs them.

Each case: refused (exit 3) or neutralised with one clear line per bad item, the
good variant of the same repository still built, nothing written outside the
output folder (the whole tmp tree is snapshotted), nothing unescaped in any page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import hostile as h
import pytest
from support import free_port

SECRET_NAMES = ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "TWINE_PASSWORD", "TWINE_USERNAME")


@dataclass
class World:
    root: Path  # everything the tests make lives here
    repos: Path
    env: dict[str, str]

    def run(self, *args: str | Path, out: Path | None = None, extra_env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``python -m kernel_factory ARGS``; asserts nothing outside ``out`` (and the store) changed, TMPDIR empty."""
        before = h.snapshot(self.root)
        env = {**self.env, **(extra_env or {})}
        proc = subprocess.run([sys.executable, "-m", "kernel_factory", *map(str, args)], cwd=self.root / "cwd", env=env,
                              capture_output=True, text=True, timeout=timeout)
        after = h.snapshot(self.root)
        skip = () if out is None else (str(out.relative_to(self.root)),)
        changed = {p for p in set(before) ^ set(after) | {p for p in before if before.get(p) != after.get(p)}
                   if not p.startswith((*skip, "home/hf"))}  # home/hf: huggingface_hub's cache
        changed = {p for p in changed if not _is_dir_mtime(self.root, p, before, after)}
        assert not changed, f"written outside {out}: {sorted(changed)[:10]}\n{proc.stderr}"
        assert list((self.root / "tmp").iterdir()) == [], "temporary files left in TMPDIR"
        assert "Traceback" not in proc.stderr or "--debug" in args, proc.stderr
        return proc


def _is_dir_mtime(root: Path, rel: str, before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> bool:
    """A folder whose only change is its mtime because a child under the output folder changed."""
    return rel in before and rel in after and (root / rel).is_dir()


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error: ")]


def wheels(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.whl"))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("hostile")
    for name in ("cwd", "tmp", "home", "repos", "sentinel"):
        (root / name).mkdir()
    (root / "sentinel" / "keep.txt").write_text("must not change\n")
    env = {k: v for k, v in os.environ.items() if k not in SECRET_NAMES and not k.startswith(("HF_", "AWS_"))}
    env.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"), HF_HOME=str(root / "home" / "hf"),
               HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1", KERNEL_FACTORY_LOCK_WAIT="60")
    yield World(root, root / "repos", env)


def test_symlinks_out_of_the_variant_are_refused(world: World) -> None:
    repo = h.symlink_escapes(world.repos)
    out = world.root / "out-symlinks"
    proc = world.run("to-wheel", repo, "0.1.0", "-o", out, out=out)
    assert proc.returncode == 3, proc.stderr
    errs = errors(proc)
    assert len(errs) == 3, errs
    for variant, name in (("torch-cpu", "passwd.txt"), ("torch-cuda", "stolen.py"), ("torch-rocm", "up")):
        assert any(f"build/{variant}/{name} is a symlink that leaves the variant folder" in e for e in errs), errs
    assert wheels(out) == [h.good_wheel("symlinks")]
    with zipfile.ZipFile(out / h.good_wheel("symlinks")) as zf:
        assert not any(b"root:x:0:0" in zf.read(n) for n in zf.namelist())


def test_names_that_cannot_be_wheel_entries_are_refused(world: World) -> None:
    repo = h.bad_names(world.repos)
    out = world.root / "out-names"
    proc = world.run("to-wheel", repo, "0.1.0", "-o", out, out=out)
    assert proc.returncode == 3, proc.stderr
    errs = errors(proc)
    assert len(errs) == 3, errs
    assert any("torch-cpu/'a\\\\b.py' cannot be a wheel entry" in e for e in errs), errs
    assert any("torch-cuda/'new\\nline.py' cannot be a wheel entry" in e for e in errs), errs
    assert any("torch-rocm/" in e and "is not a UTF-8 file name; rename it" in e for e in errs), errs
    assert wheels(out) == [h.good_wheel("badnames")]


def test_broken_metadata_is_refused(world: World) -> None:
    repo = h.broken_metadata(world.repos)
    out = world.root / "out-meta"
    proc = world.run("to-wheel", repo, "0.1.0", "-o", out, out=out)
    assert proc.returncode == 3, proc.stderr
    errs = "\n".join(errors(proc))
    assert len(errors(proc)) == 5, errs
    assert "torch-cpu: metadata.json 'name' must be a string, not int" in errs
    assert "torch-cuda: metadata.json nests too deeply" in errs
    assert "torch-rocm: metadata.json is not valid UTF-8 JSON" in errs
    assert "torch-xpu: file '../../../etc/passwd' listed in metadata.json digest is missing" in errs
    assert ("torch-metal: kernels.get_kernel would refuse this metadata.json: Cannot parse metadata: unknown variant "
            "`md5`, expected `sha256` or `sha512`") in errs
    assert wheels(out) == [h.good_wheel("badmeta")]


def test_empty_shared_library_is_refused(world: World) -> None:
    repo = h.empty_so(world.repos)
    out = world.root / "out-emptyso"
    proc = world.run("to-wheel", repo, "0.1.0", "-o", out, out=out)
    assert proc.returncode == 3, proc.stderr
    assert errors(proc) == [f"error: {repo}@v0.1.0: build/{h.CPU}/_emptyso.abi3.so is named like a shared library "
                            "but is not an ELF file; rebuild the kernel"]
    assert wheels(out) == [h.good_wheel("emptyso")]


def test_markup_and_separators_in_names_are_refused(world: World) -> None:
    repo = h.script_name(world.repos)
    out = world.root / "out-scriptname"
    proc = world.run("to-wheel", repo, "0.1.0", "-o", out, out=out)
    assert proc.returncode == 3, proc.stderr
    errs = "\n".join(errors(proc))
    # kernels' own name rule refuses both before the factory's package-name check sees them
    assert "build/torch-cpu: kernels.get_kernel would refuse this metadata.json: Cannot parse metadata: Invalid " \
           "kernel name `<script>alert(\"n\")</script>`" in errs
    assert "build/torch-cuda: kernels.get_kernel would refuse this metadata.json: Cannot parse metadata: Invalid " \
           "kernel name `../../evil`" in errs
    assert wheels(out) == [h.good_wheel("scriptname")]


def test_tags_that_are_not_pep440_are_ignored(world: World) -> None:
    repo = h.bad_tags(world.repos)
    out = world.root / "out-tags"
    proc = world.run("to-wheel", repo, ">=0", "-o", out, out=out)
    assert proc.returncode == 0, proc.stderr
    assert wheels(out) == [h.good_wheel("badtags"), h.good_wheel("badtags", "1.0")], proc.stderr
    proc = world.run("to-wheel", repo, "not-a-version", "-o", out, out=out)
    assert proc.returncode == 2 and len(errors(proc)) == 1, proc.stderr
    assert "not-a-version" in errors(proc)[0]


def test_kernel_code_is_never_imported(world: World) -> None:
    marker = world.root / "home" / "imported.txt"
    repo = h.imports_forbidden(world.repos, marker)
    out = world.root / "out-import"
    proc = world.run("to-wheel", repo, "0.1.0", "-o", out, out=out)
    assert proc.returncode == 0, proc.stderr
    store = world.root / "out-import" / "store"
    proc = world.run("index", "--store", store, "--wheels", out, out=out)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    with zipfile.ZipFile(out / h.good_wheel("importbomb")) as zf:
        prov = json.loads(zf.read("importbomb-0.1.0.dist-info/kernel_factory.json"))
        assert "importbomb/evil.pth" in zf.namelist()  # inside the package folder: site never reads it
        assert not any(n.endswith(".pth") and "/" not in n for n in zf.namelist())
    assert prov["variant"] == h.GOOD and prov["source"] == str(repo) and len(prov["revision"]) == 40
    assert prov["digest"]["hash"].startswith("sha256:")


FILES = 30_000  # three times as many as `download` takes from one wheel (local/download/wheelcheck.py MAX_MEMBERS)


def test_many_tiny_files(world: World, tmp_path: Path) -> None:
    repo = h.many_files(tmp_path, FILES)  # outside world.root: snapshots stay quick
    out = tmp_path / "out"
    script = ("import resource, subprocess, sys\n"
              "rc = subprocess.run([sys.executable, '-m', 'kernel_factory', *sys.argv[1:]]).returncode\n"
              "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    proc = subprocess.run([sys.executable, "-c", script, "to-wheel", str(repo), "0.1.0", "-o", str(out)],
                          env=world.env, cwd=world.root / "cwd", capture_output=True, text=True,
                          timeout=900)  # a hang guard, not a speed check (speed: scripts/bench_*.py)
    rc, rss_kb = proc.stdout.splitlines()[-1].split()
    assert rc == "0", proc.stderr
    assert int(rss_kb) < 1_000_000  # memory stays bounded: the files are streamed, not held
    with zipfile.ZipFile(out / h.good_wheel("manyfiles")) as zf:
        assert len(zf.namelist()) == FILES + 2 + 4  # files, __init__.py, metadata.json, .dist-info (4)


def test_tampered_file_is_refused(world: World) -> None:
    repo = world.repos / "tampered"
    repo.mkdir()
    (repo / "README.md").write_text("Tampered.\n")
    h.variant(repo, h.GOOD, "tampered")
    h.variant(repo, "torch-cpu", "tampered", {"ops.py": "X = 1\n"})
    (repo / "build" / "torch-cpu" / "ops.py").write_text("X = 2  # changed after the digest\n")
    h.commit(repo)
    out = world.root / "out-tampered"
    proc = world.run("to-wheel", repo, "0.1.0", "-o", out, out=out)
    assert proc.returncode == 3, proc.stderr
    assert errors(proc) == [f"error: {repo}@v0.1.0: build/torch-cpu: file 'ops.py' does not match its metadata.json "
                            "digest (sha256)"]
    assert wheels(out) == [h.good_wheel("tampered")]


def test_build_and_index_of_a_hostile_config(world: World) -> None:
    """HTML in the README and metadata, twins that make the same wheel, markup in variant names: one store."""
    html = h.html_everywhere(world.repos)
    twin_a, twin_b = h.same_version_twice(world.repos / "twins")
    names = h.script_name(world.repos / "cfg")
    store = world.root / "store"
    config = world.root / "cwd" / "factory.toml"
    config.write_text(f"""
[factory]
store = "{store}"
allow-orgs = ["kernels-community"]

[[kernel]]
repo = "{html}"
tags = ">=0"

[[kernel]]
repo = "{twin_a}"
tags = ">=0"
repo-id = "org-a/twin"

[[kernel]]
repo = "{twin_b}"
tags = ">=0"
repo-id = "org-b/twin"

[[kernel]]
repo = "{names}"
tags = ">=0"
""")
    proc = world.run("build", "--config", config, "--jobs", "2", out=store)
    assert proc.returncode == 3, proc.stderr
    errs = errors(proc)
    assert len(errs) == 5, errs
    twin = h.good_wheel("twin")
    assert any(f"makes {twin}, which the store already holds from" in e for e in errs), errs
    assert sum("unknown build variant" in e for e in errs) == 2, errs
    built = wheels(store / "files")
    assert built == sorted([h.good_wheel("htmlkernel"), twin, h.good_wheel("scriptname")])
    first = json.loads((store / "files" / f"{twin}.json").read_bytes())
    proc = world.run("build", "--config", config, out=store)  # a rerun refuses the twin again, overwrites nothing
    assert proc.returncode == 3 and len(errors(proc)) == 5, proc.stderr
    assert json.loads((store / "files" / f"{twin}.json").read_bytes()) == first

    proc = world.run("index", "--store", store, out=store)
    assert proc.returncode == 0, proc.stderr
    assert h.check_root(store) == []
    assert h.unescaped(store) == []
    landing = (store / "index.html").read_text()
    assert "&lt;script&gt;alert(&#34;summary&#34;)&lt;/script&gt;" in landing  # the README's summary, escaped
    human = landing + "".join(p.read_text() for p in sorted((store / "projects").glob("*/index.html")))
    assert "&lt;script&gt;alert(&#34;license&#34;)&lt;/script&gt;" in human  # on the kernel's own page
    assert 'javascript:alert' not in human and '<script>alert("u")' not in human
    for page in store.rglob("index.json"):
        json.loads(page.read_bytes())


def test_organisation_not_allowed(world: World) -> None:
    config = world.root / "cwd" / "orgs.toml"
    store = world.root / "out-org"
    config.write_text(f'[factory]\nstore = "{store}"\nallow-orgs = ["kernels-community"]\n\n'
                      '[[kernel]]\nrepo = "evil-org/relu"\nversions = [1]\n')
    proc = world.run("build", "--config", config, out=store, extra_env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert proc.returncode == 2, proc.stderr
    assert errors(proc) == ["error: evil-org/relu: organisation 'evil-org' is not allowed (allowed: "
                            "kernels-community); add it to allow-orgs in factory.toml or pass --allow-org evil-org"]
    proc = world.run("to-wheel", "evil-org/relu", "1", "-o", store, out=store)
    assert proc.returncode == 2 and "--allow-org evil-org" in proc.stderr


def test_secrets_never_printed(world: World) -> None:
    port = free_port()
    dead = f"http://127.0.0.1:{port}"
    secrets = {name: f"s3cr3t-{name.lower()}-{time.time_ns()}" for name in SECRET_NAMES}
    env = {**secrets, "HF_ENDPOINT": dead, "HF_HUB_OFFLINE": "0", "AWS_ENDPOINT_URL": dead,
           "AWS_DEFAULT_REGION": "us-east-1", "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2",
           "AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard"}
    store = world.root / "store-secrets"
    store.mkdir()  # to-wheel -o makes its folder only where the parent is there
    h.kernel(store.parent / "secret-src", "plain", "plain")
    assert world.run("to-wheel", store.parent / "secret-src" / "plain", "0.1.0", "-o", store / "in",
                     out=store).returncode == 0
    assert world.run("index", "--store", store, "--wheels", store / "in", out=store).returncode == 0
    runs = [
        ("to-wheel", "kernels-community/relu", "1", "-o", store / "w"),
        ("--debug", "to-wheel", "kernels-community/relu", "1", "-o", store / "w"),
        ("index", "--store", "s3://bucket/prefix", "--out", store / "s3-index"),
        ("publish", "--store", store, "--to", "s3://bucket/prefix"),
        ("publish", "--store", store, "--to", f"{dead}/legacy/"),
        ("publish", "--store", store, "--to", f"http://user:{secrets['TWINE_PASSWORD']}@127.0.0.1:{port}/"),
    ]
    for args in runs:
        proc = world.run(*args, out=store, extra_env=env, timeout=120)
        assert proc.returncode == 4, (args, proc.returncode, proc.stderr)
        text = proc.stdout + proc.stderr
        for name, value in secrets.items():
            assert value not in text, f"{name} printed by {args}:\n{text}"


def test_metadata_header_injection_is_neutralised(world: World) -> None:
    repo = h.kernel(world.repos, "inject", "inject", bad_meta={h.GOOD: {
        "license": "MIT\nRequires-Dist: evilpkg"}})
    out = world.root / "out-inject"
    assert world.run("to-wheel", repo, "0.1.0", "-o", out, out=out).returncode == 0
    with zipfile.ZipFile(out / h.good_wheel("inject")) as zf:
        meta = zf.read("inject-0.1.0.dist-info/METADATA").decode()
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert requires == ["Requires-Dist: torch"], meta


def test_hostile_repositories_through_a_hub(world: World, tmp_path: Path) -> None:
    """The same repositories served by olah: what a malicious Hub repository can really deliver."""
    from hub_server import hf_env, hub, serve_repo

    src = world.root / "hub-src"
    repos = {"symlinks": h.symlink_escapes(src), "badmeta": h.broken_metadata(src), "emptyso": h.empty_so(src)}
    mirrors = tmp_path / "mirrors"  # olah and its logs live outside the snapshotted tree
    for name, repo in repos.items():
        serve_repo(repo, mirrors, f"kernels-community/{name}")
    fix = "; fix metadata.json or rebuild the kernel with kernel-builder"
    expected = {  # the Hub serves a link as a file holding its target: the digest no longer matches
        "symlinks": ["torch-cpu: file 'passwd.txt' does not match its metadata.json digest (sha256)",
                     "torch-cuda: file 'stolen.py' does not match its metadata.json digest (sha256)",
                     "torch-rocm: file 'up/torch-cpu/__init__.py' listed in metadata.json digest is missing"],
        "badmeta": [f"torch-cpu: metadata.json 'name' must be a string, not int{fix}",
                    f"torch-cuda: metadata.json nests too deeply{fix}",
                    "torch-metal: kernels.get_kernel would refuse this metadata.json: Cannot parse metadata: unknown "
                    f"variant `md5`, expected `sha256` or `sha512` at line 12 column 20{fix}",
                    "torch-rocm: metadata.json is not valid UTF-8 JSON ('utf-8' codec can't decode byte 0xff in "
                    f"position 0: invalid start byte){fix}",
                    "torch-xpu: file '../../../etc/passwd' listed in metadata.json digest is missing"],
        "emptyso": [f"{h.CPU}/_emptyso.abi3.so is named like a shared library but is not an ELF file; "
                    "rebuild the kernel"],
    }
    with hub(mirrors, tmp_path / "olah") as (_, proxy):
        env = {**hf_env(proxy.url, world.root / "home" / "hf"), "HF_HUB_OFFLINE": "0"}
        for name in repos:
            out = world.root / f"out-hub-{name}"
            proc = world.run("to-wheel", f"kernels-community/{name}", "0.1.0", "-o", out, out=out, extra_env=env)
            assert proc.returncode == 3, proc.stderr
            assert wheels(out) == [h.good_wheel(name)], proc.stderr
            errs = errors(proc)
            # one line per bad variant; variants are checked in parallel, so the lines come in any order
            assert sorted(errs) == [f"error: kernels-community/{name}@v0.1.0: build/{e}" for e in expected[name]], errs
            with zipfile.ZipFile(out / h.good_wheel(name)) as zf:
                assert not any(b"root:x:0:0" in zf.read(n) for n in zf.namelist())
