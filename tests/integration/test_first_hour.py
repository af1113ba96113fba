"""A new user's first mistakes, through the installed command: each gets one line naming the problem and the fix,
the documented exit code, and leaves nothing behind (issue 36)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from kernel_factory.report import size as size_text
from support import kf, run

VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0].removeprefix("error: ")


@pytest.fixture
def site(example_repos: Path, tmp_path: Path) -> Path:
    """A store with one wheel (what `index --store` reads)."""
    assert kf("to-wheel", example_repos / "pyonly", "0.2.0", "-o", tmp_path / "w", cwd=tmp_path).returncode == 0
    assert kf("index", "--wheels", tmp_path / "w", "--out", tmp_path / "site", cwd=tmp_path).returncode == 0
    return tmp_path / "site"


@pytest.mark.parametrize("args", [
    ("index", "--store", "{site}", "--out", "{file}"),
    ("index", "--store", "{file}"),
    ("to-wheel", "{repos}/pyonly", "0.2.0", "-o", "{file}"),
    ("to-wheel", "{repos}/pyonly", "0.2.0", "-o", "{file}/x"),
    ("build", "--store", "{file}"),
    ("build", "--store", "{file}/x"),
])
def test_a_file_given_as_a_folder_is_one_line_exit_4(args: tuple[str, ...], example_repos: Path, site: Path,
                                                      tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    (tmp_path / "factory.toml").write_text(f'[[kernel]]\nrepo = "{example_repos}/pyonly"\ntags = ">=0.2"\n')
    argv = [a.format(site=site, file=afile, repos=example_repos) for a in args]
    proc = kf(*argv, cwd=tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert one_error_line(proc.stderr) == (
        f"{afile} is a file, not a folder; give a folder (--store, --out, -o) or remove the file"
    )
    assert afile.read_text() == "mine\n"


@pytest.mark.parametrize(("args", "flag"), [
    (("build", "--store", "{missing}"), "--store"),
    (("to-wheel", "{repos}/pyonly", "0.2.0", "-o", "{missing}"), "-o"),
    (("index", "--out", "{missing}"), "--out"),
    (("index", "--store", "{here}", "--out", "{missing}"), "--out"),
])
def test_a_folder_whose_parent_is_missing_is_refused_not_made(args: tuple[str, ...], flag: str,
                                                               example_repos: Path, tmp_path: Path) -> None:
    (tmp_path / "factory.toml").write_text(f'[[kernel]]\nrepo = "{example_repos}/pyonly"\ntags = ">=0.2"\n')
    missing = tmp_path / "no-such-root" / "store"
    proc = kf(*[a.format(missing=missing, repos=example_repos, here=tmp_path) for a in args], cwd=tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert one_error_line(proc.stderr) == (
        f"{flag} {missing}: its parent folder {missing.parent} does not exist; create it first "
        f"(mkdir -p {missing.parent}) or give another folder"
    )
    assert not missing.parent.exists()


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_serve_on_an_impossible_port_is_one_line_exit_2(port: str, tmp_path: Path) -> None:
    proc = kf("serve", "--out", tmp_path, "--port", port, cwd=tmp_path)
    assert proc.returncode == 2
    assert one_error_line(proc.stderr) == f"--port {port}: not a TCP port; give one from 1 to 65535 (0: any free port)"


def test_a_variant_glob_matching_nothing_names_the_variants_there_are(example_repos: Path, tmp_path: Path) -> None:
    repo = example_repos / "img2grey"
    proc = kf("to-wheel", repo, "1.1.2", "--variants", "torch213-cxx11-cpu-x86_64-linus", "--variants", VARIANT,
              "-o", tmp_path / "out", cwd=tmp_path)
    # The other pattern matches: what it matches is built, and the pattern that matched nothing is named.
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.startswith("warning: ")] == [
        f"warning: {repo}: variant pattern 'torch213-cxx11-cpu-x86_64-linus' matches no build variant; fix variants "
        f"(or --variants); the variants there are, nearest first: {VARIANT}, torch213-cxx11-cu130-x86_64-linux, "
        "torch213-cxx11-cpu-aarch64-linux"
    ]
    assert [p.name for p in (tmp_path / "out").glob("*.whl")] == [
        "img2grey-1.1.2+torch213cpucxx11-cp39-abi3-manylinux_2_28_x86_64.whl"]

    # No pattern matches: nothing would be built, exit 2 and nothing made.
    proc = kf("to-wheel", repo, "1.1.2", "--variants", "torch213-cxx11-cpu-x86_64-linus", "-o", tmp_path / "out2",
              cwd=tmp_path)
    assert proc.returncode == 2
    assert one_error_line(proc.stderr).startswith(
        f"{repo}: variant pattern 'torch213-cxx11-cpu-x86_64-linus' matches no build variant; fix variants ")
    assert not (tmp_path / "out2").exists()

    (tmp_path / "factory.toml").write_text(
        f'[factory]\nstore = "store"\n[[kernel]]\nrepo = "{repo}"\nrepo-id = "kernels-community/img2grey"\n'
        'versions = [1]\nvariants = ["nomatch*", "cu13*"]\n')
    for command in ("plan", "build"):
        proc = kf(command, cwd=tmp_path)
        assert proc.returncode == 2
        assert one_error_line(proc.stderr).startswith(
            "kernels-community/img2grey: variant patterns 'cu13*', 'nomatch*' match no build variant; fix variants ")
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("command", ["plan", "build"])
def test_plan_without_a_config_says_the_file_is_missing(command: str, tmp_path: Path) -> None:
    proc = kf(command, cwd=tmp_path)
    assert proc.returncode == 2
    assert one_error_line(proc.stderr) == (
        f"no factory.toml in {tmp_path}: write one with a [[kernel]] table for each kernel to mirror (README, "
        "Configuration; `make demo` uses the bundled one), or pass --config FILE or --lock kernels.lock"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_wheel_replaced_by_a_folder_is_named_a_folder_and_the_fix_works(site: Path, tmp_path: Path) -> None:
    (wheel,) = (site / "files").glob("*.whl")
    wheel.unlink()
    wheel.mkdir()
    want = (
        f"{wheel}: a folder, not the wheel its record {wheel.name}.json describes (changed outside kernel-factory); "
        f"it is left out of the pages: put back the wheel the record describes, or remove it and {wheel.name}.json "
        f"and {wheel.name}.metadata beside it (then run `kernel-factory index`)"
    )
    for extra in ((), ("--repair",)):  # --repair cannot record a folder: it says the same, not "Is a directory"
        proc = kf("index", "--store", site, *extra, cwd=tmp_path)
        assert proc.returncode == 3
        assert [line for line in proc.stderr.splitlines() if line.startswith("error: ")] == [f"error: {want}"]
    wheel.rmdir()
    for suffix in (".json", ".metadata"):
        Path(f"{wheel}{suffix}").unlink()
    proc = kf("index", "--store", site, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "pyonly" not in (site / "simple" / "index.html").read_text()


def on_a_terminal(*args: str | Path, cwd: Path) -> tuple[int, str]:
    """The installed command run on a pseudo-terminal of 160 columns, as a person at a terminal runs it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    command = Path(sys.executable).parent / "kernel-factory"
    proc = subprocess.Popen([str(command), *map(str, args)], cwd=cwd, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the command ended and closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(60), out.decode()


def test_build_on_a_terminal_shows_the_bytes_fetched_and_written(example_repos: Path, tmp_path: Path) -> None:
    (tmp_path / "factory.toml").write_text(
        f'[factory]\nstore = "store"\njobs = 2\n[[kernel]]\nrepo = "{example_repos}/img2grey"\n'
        'repo-id = "kernels-community/img2grey"\ntags = "==1.1.2"\n')
    code, out = on_a_terminal("build", cwd=tmp_path)
    assert code == 0, out
    wheels = sum(p.stat().st_size for p in (tmp_path / "store" / "files").glob("*.whl"))
    last_bar = [part for part in out.split("\r") if part.startswith("building: 100%")][-1]
    assert "3/3" in last_bar and f"wheels written {size_text(wheels)}" in last_bar and "fetched " in last_bar

    code, out = on_a_terminal("build", "--config", tmp_path / "factory.toml", "--store", tmp_path / "q", "-q",
                              cwd=tmp_path)
    assert code == 0 and "building" not in out and "fetched" not in out, out
    proc = kf("build", "--store", tmp_path / "log", cwd=tmp_path)  # not a terminal: a line per wheel, no bar
    assert proc.returncode == 0 and "fetched" not in proc.stderr and "[3/3] built  img2grey-1.1.2+" in proc.stderr


def test_make_says_which_debian_packages_it_installs_before_it_does(tmp_path: Path) -> None:
    stub = tmp_path / "apt-get"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls"}\necho "apt-get $@ ran"\n')
    stub.chmod(0o755)
    root = Path(__file__).resolve().parents[2]
    proc = run("make", "-s", "-C", root, "system-deps", f"APT_GET={stub}", "CHROMIUM=no-such-chromium",
               "CROSS_CXX=no-such-g++", "NGINX=no-such-nginx")
    lines = proc.stdout.splitlines()
    assert lines[0] == (f"system-deps: installing Debian packages for the integration tests with {stub} "
                        "(root needed): chromium g++-aarch64-linux-gnu nginx")
    assert lines[-1] == "apt-get update -qq ran"  # the install's own output is silenced; its call is below
    assert (tmp_path / "calls").read_text().splitlines() == [
        "update -qq", "install -y -qq chromium g++-aarch64-linux-gnu nginx"]
    proc = run("make", "-s", "-C", root, "system-deps", f"APT_GET={stub}", "CHROMIUM=sh", "CROSS_CXX=sh", "NGINX=sh")
    assert proc.stdout == "" and len((tmp_path / "calls").read_text().splitlines()) == 2  # all there: nothing
