"""S3 behind a CDN (a real moto server on 127.0.0.1): Cache-Control on every object, the s3-put-args on every
put (a KMS key, a storage class), and pages at their directory keys for a bucket without index documents."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import boto3
import pytest
from kernel_factory import config
from kernel_factory.cli import main
from kernel_factory.publish.run import list_root
from kernel_factory.store import open_store
from servers import tiny_wheel

pytestmark = pytest.mark.integration
IMMUTABLE = "public, max-age=31536000, immutable"




def test_publish_headers_put_args_and_directory_keys(s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from servers import make_root

    root = make_root(tmp_path, [("img2grey", "1.1.2+torch213cpucxx11"), ("relu", "1.0.0")]).path
    key_id = boto3.client("kms").create_key()["KeyMetadata"]["KeyId"]
    s3.create_bucket(Bucket="private")
    (tmp_path / "factory.toml").write_text(
        "[factory]\n"
        f's3-put-args = {{ ServerSideEncryption = "aws:kms", SSEKMSKeyId = "{key_id}" }}\n'
        'cache-control-pages = "public, max-age=60"\n'
    )
    monkeypatch.chdir(tmp_path)
    args = ["publish", "--store", str(root), "--to", "s3://private/idx", "--s3-put-arg", "StorageClass=STANDARD_IA",
            "--s3-directory-keys"]
    assert main(args) == 0
    local = {f.rel for f in list_root(root)}
    pages = [rel for rel in local if rel.endswith("/index.html")]
    assert {"simple/index.html", "simple/relu/index.html", "index.html"} <= local
    keys = {o["Key"].removeprefix("idx/") for o in s3.list_objects_v2(Bucket="private", Prefix="idx/")["Contents"]}
    assert keys == local | {rel.removesuffix("index.html") for rel in pages} | {""}  # "" is idx/ itself
    for rel in keys:
        head = s3.head_object(Bucket="private", Key=f"idx/{rel}")
        immutable = rel.endswith((".whl", ".whl.metadata"))
        assert head["CacheControl"] == (IMMUTABLE if immutable else "public, max-age=60"), rel
        assert (head["ServerSideEncryption"], head["SSEKMSKeyId"].rsplit("/", 1)[-1]) == ("aws:kms", key_id), rel
        assert head["StorageClass"] == "STANDARD_IA", rel
    page = s3.get_object(Bucket="private", Key="idx/simple/relu/")
    assert page["ContentType"].startswith("text/html")
    assert page["Body"].read() == (root / "simple" / "relu" / "index.html").read_bytes()

    capsys.readouterr()
    assert main(args) == 0  # nothing changed: nothing uploaded, directory keys included
    assert "uploaded 0 files" in capsys.readouterr().out


def test_bad_put_arg_is_refused_before_any_upload(s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                  ) -> None:
    from servers import make_root

    root = make_root(tmp_path, [("relu", "1.0.0")]).path
    s3.create_bucket(Bucket="refused")
    assert main(["publish", "--store", str(root), "--to", "s3://refused/p",
                 "--s3-put-arg", "ServerSideEncyption=AES256"]) == 2
    assert "did you mean 'ServerSideEncryption'" in capsys.readouterr().err
    assert main(["publish", "--store", str(root), "--to", "s3://refused/p", "--s3-put-arg", "CacheControl=x"]) == 2
    assert s3.list_objects_v2(Bucket="refused").get("KeyCount") == 0


def test_s3_store_puts_carry_headers(s3: Any, tmp_path: Path) -> None:
    from kernel_factory.record import Record

    s3.create_bucket(Bucket="store")
    opts = config.Options(s3_put_args=(("ServerSideEncryption", "AES256"),))
    wheel, metadata = tiny_wheel(tmp_path, "relu", "1.0.0")
    data = wheel.read_bytes()
    record = Record(filename=wheel.name, name="relu", version="1.0.0", sha256=hashlib.sha256(data).hexdigest(),
                    size=len(data), metadata_sha256=hashlib.sha256(metadata).hexdigest(), requires_python=None,
                    upload_time="2026-01-01T00:00:00Z")
    open_store("s3://store/s", opts).put(wheel, metadata, record)
    for name, cache in ((wheel.name, IMMUTABLE), (f"{wheel.name}.metadata", IMMUTABLE),
                        (f"{wheel.name}.json", "public, max-age=300")):
        head = s3.head_object(Bucket="store", Key=f"s/files/{name}")
        assert (head["CacheControl"], head["ServerSideEncryption"]) == (cache, "AES256"), name
