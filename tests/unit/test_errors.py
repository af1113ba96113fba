"""Exit codes: the most severe wins; OSErrors are classified in one place."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import pytest
from kernel_factory.errors import (
    EXIT_BUG,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Refused,
    Unreachable,
    VersionNotFound,
    unusable,
    unusable_from_text,
    worst,
)
from kernel_factory.pipeline import exit_code
from kernel_factory.pipeline.jobs import Outcome
from kernel_factory.plan import Job, Plan


def test_worst_orders_bug_unusable_refused_usage() -> None:
    assert worst([]) == EXIT_OK
    assert worst([EXIT_OK, EXIT_OK]) == EXIT_OK
    assert worst([EXIT_USAGE, EXIT_OK]) == EXIT_USAGE
    assert worst([EXIT_USAGE, EXIT_REFUSED]) == EXIT_REFUSED
    assert worst([EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE]) == EXIT_UNREACHABLE
    assert worst([EXIT_UNREACHABLE, EXIT_BUG, EXIT_OK]) == EXIT_BUG
    assert worst([7]) == EXIT_BUG  # an unknown code is not success


def _job(variant: str) -> Job:
    return Job(location="/r", repo_id="org/r", repo_type=None, repo_name="r", source="/r", sha="a" * 40, ref="v1",
               version="1.0.0", variant=variant, commit_time=0, readme=None, allow_no_digest=False)


def test_an_item_failing_with_code_2_is_not_success() -> None:
    failed = Outcome(_job("torch-cpu"), error="no build/torch-cpu", exit_code=VersionNotFound.exit_code)
    assert exit_code([failed], Plan()) == EXIT_USAGE
    assert exit_code([Outcome(_job("torch-cpu"), error="?")], Plan()) == EXIT_BUG  # a failure without a code
    plan = Plan(refused=[Refused("bad variant")])
    assert exit_code([failed], plan) == EXIT_REFUSED
    assert exit_code([failed, Outcome(_job("x"), error="disk", exit_code=EXIT_UNREACHABLE)], plan) == EXIT_UNREACHABLE


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO, errno.EFBIG])
def test_file_system_faults_are_unusable_naming_path_and_errno_text(code: int) -> None:
    err = unusable(OSError(code, os.strerror(code), "/store/files/x.whl"))
    assert isinstance(err, Unreachable) and err.exit_code == EXIT_UNREACHABLE
    line = str(err)
    assert line.startswith(f"/store/files/x.whl: {os.strerror(code)}; ") and "\n" not in line


def test_other_os_errors_are_not_classified_and_a_missing_name_takes_the_given_path() -> None:
    assert unusable(FileNotFoundError(errno.ENOENT, "No such file or directory", "/x")) is None
    assert unusable(OSError(errno.EINVAL, "Invalid argument")) is None
    err = unusable(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), "/scratch")
    assert err is not None and str(err).startswith("/scratch: No space left on device;")


def test_tool_stderr_is_classified_by_its_errno_text() -> None:
    err = unusable_from_text("tar: build/v/blob.bin: Cannot write: No space left on device\n", "/tmp/s/v")
    assert err is not None and str(err).startswith("/tmp/s/v: No space left on device;")
    assert unusable_from_text("fatal: not a tree object", "/tmp/s/v") is None


def test_a_failed_item_says_why_and_a_bug_keeps_its_traceback_for_debug(capsys: pytest.CaptureFixture[str]) -> None:
    from kernel_factory.pipeline import _describe, _summarise
    from kernel_factory.pipeline.jobs import failure
    from kernel_factory.pipeline.progress import Bytes, progress

    full = failure(_job("torch-cpu"), OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/store/files/.tmp-x"))
    assert full.exit_code == EXIT_UNREACHABLE and full.trace is None
    assert full.error == "org/r@v1: /store/files/.tmp-x: No space left on device; " \
        "free space there or point --store / --scratch at another file system"
    try:
        raise KeyError("boom")
    except KeyError as exc:
        bug = failure(_job("torch-cuda"), exc)
    assert bug.exit_code == EXIT_BUG and bug.error == "org/r@v1 torch-cuda: KeyError: 'boom'"
    _start, report, close = progress(2, Bytes(Path("."), None, []), lambda job: 0, _describe, stream=io.StringIO())
    report(full)
    report(bug)
    close()
    err = capsys.readouterr().err
    assert "[1/2] failed org/r@v1: /store/files/.tmp-x: No space left on device;" in err
    assert "[2/2] failed org/r@v1 torch-cuda: KeyError: 'boom'" in err

    _summarise([full, bug], Plan(), as_json=False, debug=False)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "this is a bug in kernel-factory" in err
    _summarise([full, bug], Plan(), as_json=False, debug=True)
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and 'raise KeyError("boom")' in err
    assert exit_code([full, bug], Plan()) == EXIT_BUG


def test_a_file_where_a_folder_is_wanted_is_unusable_naming_the_file(tmp_path: os.PathLike[str]) -> None:
    afile = os.path.join(tmp_path, "afile")
    with open(afile, "w") as f:
        f.write("x")
    want = f"{afile} is a file, not a folder; give a folder (--store, --out, -o) or remove the file"
    for exc in (FileExistsError(errno.EEXIST, "File exists", afile),
                NotADirectoryError(errno.ENOTDIR, "Not a directory", os.path.join(afile, "x", "y"))):
        err = unusable(exc)
        assert isinstance(err, Unreachable) and str(err) == want and err.exit_code == EXIT_UNREACHABLE
    # an existing folder, or a link's two names (os.link, os.rename): not this fault
    assert unusable(FileExistsError(errno.EEXIST, "File exists", os.fspath(tmp_path))) is None
    assert unusable(FileExistsError(errno.EEXIST, "File exists", afile, None, os.path.join(tmp_path, "b"))) is None
