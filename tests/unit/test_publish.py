"""publish: ordering, the folder destination, and the pure parts of the S3 and upload destinations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from kernel_factory.cli import main
from kernel_factory.config import Flags
from kernel_factory.errors import EXIT_UNREACHABLE, Unreachable, UsageError
from kernel_factory.publish.directory import DirectoryDestination
from kernel_factory.publish.run import list_root, open_destination, phases, publish, store_root
from kernel_factory.publish.upload import parse_simple_page, split_credentials
from kernel_factory.record import PEP691_JSON as PEP691
from kernel_factory.s3util import content_type, explain, join_key, parse_s3_url

WHEEL = "img2grey-1.1.2+torch213cpucxx11-py3-none-any.whl"
ROOT_FILES = {
    f"files/{WHEEL}": b"PK wheel bytes",
    f"files/{WHEEL}.metadata": b"Metadata-Version: 2.1\nName: img2grey\n",
    f"files/{WHEEL}.json": b'{"filename": "x"}\n',
    "simple/index.html": b"<a href='img2grey/'>img2grey</a>",
    "simple/index.json": b"{}",
    "simple/img2grey/index.html": b"<a href='../../files/img2grey-1.1.2%2Btorch213cpucxx11-py3-none-any.whl'>w</a>",
    "simple/img2grey/index.json": b"{}",
    "variants/torch213cpucxx11/simple/img2grey/index.html": b"<a>w</a>",
    "index.html": b"<h1>kernels</h1>",
}


def make_root(tmp: Path) -> Path:
    root = tmp / "public"
    for rel, data in ROOT_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "files" / ".tmp-half-written").write_bytes(b"x")  # hidden files are never published
    (root / ".index-state.json").write_bytes(b"{}")
    return root


def test_list_root_skips_hidden_files(tmp_path: Path) -> None:
    assert sorted(f.rel for f in list_root(make_root(tmp_path))) == sorted(ROOT_FILES)


def test_phases_put_wheels_then_metadata_then_records_then_pages_deepest_first(tmp_path: Path) -> None:
    order = [[f.rel for f in phase] for phase in phases(list_root(make_root(tmp_path)))]
    assert order[:3] == [[f"files/{WHEEL}"], [f"files/{WHEEL}.metadata"], [f"files/{WHEEL}.json"]]
    assert order[3] == ["variants/torch213cpucxx11/simple/img2grey/index.html"]
    assert order[4] == ["simple/img2grey/index.html", "simple/img2grey/index.json"]
    assert order[5] == ["simple/index.html", "simple/index.json"]
    assert order[-1] == ["index.html"]


def test_folder_publish_copies_is_idempotent_and_deletes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_root(tmp_path)
    dest = tmp_path / "site"
    dest.mkdir()
    (dest / "keep.txt").write_bytes(b"the user's")
    summary = publish(root, DirectoryDestination(dest))
    assert (len(summary.uploaded_files), len(summary.unchanged_files)) == (len(ROOT_FILES), 0)
    for rel, data in ROOT_FILES.items():
        assert (dest / rel).read_bytes() == data
    assert (dest / f"files/{WHEEL}").stat().st_ino != (root / f"files/{WHEEL}").stat().st_ino  # a copy, not a link
    assert not any(p.name.startswith(".tmp-") for p in dest.rglob("*"))
    assert (dest / "keep.txt").read_bytes() == b"the user's"

    again = publish(root, DirectoryDestination(dest))
    assert (len(again.uploaded_files), len(again.unchanged_files)) == (0, len(ROOT_FILES))

    (root / "index.html").unlink()
    (root / "index.html").write_bytes(b"<h1>new</h1>")
    lines: list[str] = []
    third = publish(root, DirectoryDestination(dest), out=lines.append)
    assert len(third.uploaded_files) == 1 and lines == ["replaced index.html (0.0 MB)"]
    assert (dest / "index.html").read_bytes() == b"<h1>new</h1>"


def test_folder_publish_dry_run_writes_nothing(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    lines: list[str] = []
    summary = publish(root, DirectoryDestination(tmp_path / "site"), dry_run=True, out=lines.append)
    assert len(summary.uploaded_files) == len(ROOT_FILES)
    assert f"would upload files/{WHEEL} (0.0 MB)" in lines
    assert not (tmp_path / "site").exists()  # not even the folder is made


def test_cli_publish_to_file_url_prints_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_root(tmp_path)
    assert main(["publish", "--store", str(root), "--to", f"file://{tmp_path / 'out'}"]) == 0
    out = capsys.readouterr().out
    assert f"uploaded {len(ROOT_FILES)} files (0.0 MB), skipped 0 unchanged" in out
    assert main(["publish", "--store", str(root), "--to", str(tmp_path / "out"), "--dry-run"]) == 0
    assert f"would upload 0 files (0.0 MB), {len(ROOT_FILES)} already there" in capsys.readouterr().out


def test_cli_refuses_bad_store_and_destination(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_root(tmp_path)
    assert main(["publish", "--store", str(tmp_path / "missing"), "--to", str(tmp_path / "out")]) == 2
    assert "store folder" in capsys.readouterr().err
    assert main(["publish", "--store", str(root), "--to", str(root)]) == 2
    assert "is the store folder itself" in capsys.readouterr().err
    assert main(["publish", "--store", str(root), "--to", "ftp://host/x"]) == 2
    assert "unknown scheme ftp://" in capsys.readouterr().err
    (tmp_path / "a-file").write_bytes(b"")
    assert main(["publish", "--store", str(root), "--to", str(tmp_path / "a-file")]) == EXIT_UNREACHABLE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file, not a folder" in err
    assert sorted(f.rel for f in list_root(root)) == sorted(ROOT_FILES)


def test_store_root_defaults_to_public(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "public").mkdir()
    assert store_root(Flags()) == Path("public")
    with pytest.raises(UsageError, match="publish reads a local folder"):
        store_root(Flags(given={"store": "s3://bucket/store"}))


def test_open_destination_kinds(tmp_path: Path) -> None:
    assert isinstance(open_destination(str(tmp_path)), DirectoryDestination)
    assert open_destination(f"file://{tmp_path}").display == str(tmp_path)


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        (f"files/{WHEEL}", "application/octet-stream"),
        (f"files/{WHEEL}.metadata", "text/plain; charset=utf-8"),
        (f"files/{WHEEL}.json", "application/json"),
        ("simple/img2grey/index.json", PEP691),
        ("variants/torch213cpucxx11/simple/index.json", PEP691),
        ("simple/img2grey/index.html", "text/html; charset=utf-8"),
        ("index.html", "text/html; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("unknown.bin-x", "application/octet-stream"),
    ],
)
def test_content_types(rel: str, expected: str) -> None:
    assert content_type(rel) == expected


def test_parse_s3_url() -> None:
    assert parse_s3_url("s3://bucket") == ("bucket", "")
    assert parse_s3_url("s3://bucket/a/b/") == ("bucket", "a/b")
    assert join_key("", "index.html") == "index.html" and join_key("a/b", "x") == "a/b/x"
    with pytest.raises(UsageError, match="names no bucket"):
        parse_s3_url("s3:///prefix")


def _client_error(code: str, message: str = "detail") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "PutObject")


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (_client_error("NoSuchBucket"), "bucket b does not exist; create it or fix --to"),
        (_client_error("InvalidAccessKeyId", "key AKIASECRET"), "(InvalidAccessKeyId: the access key id is not known)"),
        (_client_error("SignatureDoesNotMatch"), "secret key does not match"),
        (_client_error("AccessDenied"), "access is denied"),
        (S3UploadFailedError("Failed to upload x"), "S3 upload to s3://b failed"),
        (NoCredentialsError(), "no AWS credentials"),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), "cannot reach S3 at http://e"),
        (_client_error("SlowDown", "please slow down"),
         "S3 at http://e is busy or failing (SlowDown: please slow down) for s3://b after 1 attempt; retry later"),
        (_client_error("Teapot", "short and stout"), "S3 error Teapot on s3://b: short and stout"),
    ],
)
def test_s3_errors_become_one_unreachable_line(exc: BaseException, words: str) -> None:
    err = explain(exc, "b", "http://e")
    assert isinstance(err, Unreachable) and err.exit_code == EXIT_UNREACHABLE
    assert words in str(err) and "\n" not in str(err) and "AKIASECRET" not in str(err)


def test_s3_upload_failure_wrapping_a_client_error_names_its_code() -> None:
    try:
        try:
            raise _client_error("AccessDenied")
        except ClientError as inner:
            raise S3UploadFailedError(f"Failed to upload x: {inner}")  # noqa: B904 - as boto3 does
    except S3UploadFailedError as outer:
        assert "AccessDenied" in str(explain(outer, "b", "http://e"))


def test_parse_simple_page() -> None:
    page = """<html><body>
    <a href="../../files/img2grey-1.1.2%2Btorch213cpucxx11-py3-none-any.whl#sha256=ABC123">a</a>
    <a href="/packages/relu-1.0.0-py3-none-any.whl#md5=ff">b</a>
    <a href="https://host/p/other-2.0-py3-none-any.whl">c</a>
    </body></html>"""
    assert parse_simple_page(page) == {
        WHEEL: "abc123",
        "relu-1.0.0-py3-none-any.whl": "",
        "other-2.0-py3-none-any.whl": "",
    }


def test_split_credentials_keeps_secrets_out_of_the_url() -> None:
    assert split_credentials("https://u%40x:p%3Aw@host:8443/repo/") == ("https://host:8443/repo/", "u@x", "p:w")
    assert split_credentials("http://127.0.0.1:8080/") == ("http://127.0.0.1:8080/", None, None)


def test_hard_link_falls_back_to_copy_across_devices(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs a second file system at /dev/shm")
    root = make_root(tmp_path)
    dest = shm / f"kf-publish-test-{os.getpid()}"
    try:
        assert len(publish(root, DirectoryDestination(dest)).uploaded_files) == len(ROOT_FILES)
        assert (dest / f"files/{WHEEL}").read_bytes() == ROOT_FILES[f"files/{WHEEL}"]
    finally:
        for path in sorted(dest.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        dest.rmdir()


def test_same_root_is_the_destinations_own_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Publishing a store into itself is refused through the Destination protocol, for a folder or file:// URL."""
    # The S3 destination builds a boto3 client: with no region or credentials botocore would ask the
    # instance-metadata address. Dummy values and no metadata service: nothing leaves the process.
    for key, value in {"AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")
                       }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    root = tmp_path / "public"
    root.mkdir()
    assert open_destination(str(root)).same_root(root)
    assert open_destination(root.as_uri()).same_root(tmp_path / "x" / ".." / "public")
    assert not open_destination(str(tmp_path / "other")).same_root(root)
    assert not open_destination("s3://bucket/prefix").same_root(root)
    assert main(["publish", "--store", str(root), "--to", root.as_uri()]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --to {root.as_uri()} is the store folder itself; publish to another folder\n"
