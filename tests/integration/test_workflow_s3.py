"""The documented CI workflow (.github/workflows/kernels.yml) end to end against a moto S3 server:
two shards build into one s3:// store, one job renders the index from it and publishes the pages."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3
from servers import moto_server, page_links, s3_env
from support import kf

CONFIG = """
[factory]
store = "s3://kernels/public"
index-out = "site"

[[kernel]]
repo = "{repos}/img2grey"
repo-id = "kernels-community/img2grey"
tags = ">=1.1.2"

[[kernel]]
repo = "{repos}/relu-nested"
repo-id = "kernels-community/relu-nested"
versions = [1]
"""


def keys(s3: Any, bucket: str, prefix: str) -> set[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return {obj["Key"].removeprefix(prefix + "/") for page in pages for obj in page.get("Contents", [])}


def test_shards_into_s3_then_index_and_publish(example_repos: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "factory.toml"
    cfg.write_text(CONFIG.format(repos=example_repos))
    with moto_server(tmp_path) as url:
        env = {**os.environ, **s3_env(url)}
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
        s3.create_bucket(Bucket="kernels")
        for k in (1, 2):
            proc = kf("build", "--config", cfg, "--shard", f"{k}/2", "--jobs", "1", env=env)
            assert proc.returncode == 0, proc.stderr
        wheels = {k for k in keys(s3, "kernels", "public") if k.endswith(".whl")}
        assert len(wheels) == 4  # img2grey 1.1.2 x3 variants, relu-nested 1.0.2

        proc = kf("index", "--config", cfg, env=env)  # records from S3, pages into index-out
        assert proc.returncode == 0, proc.stderr
        site = tmp_path / "site"
        assert (site / "simple" / "img2grey" / "index.json").is_file() and not (site / "files").exists()

        proc = kf("publish", "--config", cfg, "--to", "s3://kernels/public", env=env)
        assert proc.returncode == 0, proc.stderr
        assert "files/" not in proc.stdout  # the wheels were there already: only pages went up
        published = keys(s3, "kernels", "public")
        for key in published:
            if key.endswith(".html"):
                body = s3.get_object(Bucket="kernels", Key=f"public/{key}")["Body"].read().decode()
                local = [link for link in page_links(key, body) if "://" not in link]  # Hub and source links aside
                missing = [link for link in local if link not in published]
                assert not missing, f"{key} links missing objects {missing}"
        assert "variants/torch213cpucxx11/simple/relu-nested/index.html" in published

        proc = kf("publish", "--config", cfg, "--to", "s3://kernels/public", env=env)
        assert proc.returncode == 0 and "uploaded 0 files" in proc.stdout, proc.stdout
