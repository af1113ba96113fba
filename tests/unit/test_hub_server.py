"""serve --hub's ASGI app (factory/hub/server.py) called directly, and the CLI's refusals (no sockets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from kernel_factory import cli
from kernel_factory.hub import wheels
from kernel_factory.hub.catalog import HubState
from kernel_factory.hub.server import HubApp
from kernel_factory.wheel.convert import convert
from wheel_kit import make_variant, wheel_input

SHA = "0123456789abcdef0123456789abcdef01234567"
BIG = bytes(range(256)) * (3 * wheels.CHUNK // 256 + 7)  # more than three pieces


def _state(tmp_path: Path) -> HubState:
    vdir = make_variant(tmp_path / "repo", "torch-universal", layout="nested", package="relu", name="relu", elf=None,
                        files={"relu/big.bin": BIG})
    _, _, record = convert(wheel_input(vdir, repo_name="relu", repo_id="example/relu", source="example/relu"),
                           tmp_path / "store" / "files")
    return HubState(tmp_path / "store", ["example"], lambda: [record])


def _call(app: HubApp, method: str, path: str, disconnect_after: int | None = None) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": []}
    gone = anyio.Event()  # set by send once disconnect_after messages have gone out: no polling, no race

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if disconnect_after is not None and len(sent) >= disconnect_after:
            gone.set()

    anyio.run(app, scope, receive, send)
    return sent


def test_a_file_goes_out_in_pieces_of_chunk_bytes(tmp_path: Path) -> None:
    app = HubApp(_state(tmp_path))
    sent = _call(app, "GET", f"/kernels/example/relu/resolve/{SHA}/build/torch-universal/relu/big.bin")
    start, *bodies = sent
    assert start["status"] == 200 and (b"content-length", str(len(BIG)).encode()) in start["headers"]
    assert [len(m["body"]) for m in bodies] == [wheels.CHUNK] * 3 + [len(BIG) - 3 * wheels.CHUNK, 0]
    assert b"".join(m["body"] for m in bodies) == BIG and bodies[-1]["more_body"] is False


def test_head_sends_the_headers_and_no_body(tmp_path: Path) -> None:
    app = HubApp(_state(tmp_path))
    start, body = _call(app, "HEAD", f"/kernels/example/relu/resolve/{SHA}/build/torch-universal/relu/big.bin")
    headers = dict(start["headers"])
    assert headers[b"content-length"] == str(len(BIG)).encode() and headers[b"x-repo-commit"] == SHA.encode()
    assert body == {"type": "http.response.body", "body": b""}


def test_a_client_that_goes_away_stops_the_transfer(tmp_path: Path) -> None:
    app = HubApp(_state(tmp_path))
    sent = _call(app, "GET", f"/kernels/example/relu/resolve/{SHA}/build/torch-universal/relu/big.bin",
                 disconnect_after=2)
    # the piece being read when the client left still goes out; the next is never read
    assert [m["type"] for m in sent] == ["http.response.start"] + ["http.response.body"] * 2
    assert all(m["more_body"] for m in sent[1:])


def test_a_json_answer_carries_its_length(tmp_path: Path) -> None:
    app = HubApp(_state(tmp_path))
    start, body = _call(app, "GET", "/api/kernels/example/relu/refs")
    assert (b"content-length", str(len(body["body"])).encode()) in start["headers"]
    assert json.loads(body["body"])["tags"][0]["name"] == "v1.1.2"


@pytest.mark.parametrize(("argv", "line"), [
    (["serve", "--hub", "--out", "public"],
     "--out is for the index preview; `serve --hub` serves a store: give --store DIR"),
    (["serve", "--store", "x"], "--store is for `serve --hub`; `serve` alone previews an index folder (--out)"),
    (["serve", "--hub", "--store", "s3://bucket/store"],
     "--store s3://bucket/store: serve --hub serves a store folder; copy the store to a folder first (e.g. `aws s3 "
     "sync s3://bucket/store DIR`) and give --store DIR"),
    (["serve", "--hub", "--store", "{tmp}/none"],
     "--store {tmp}/none: no store there (no files/ folder); run `kernel-factory build` first, or give the store's "
     "folder"),
    (["serve", "--hub", "--store", "{tmp}", "--port", "70000"],
     "--port 70000: not a TCP port; give one from 1 to 65535 (0: any free port)"),
])
def test_serve_hub_refuses_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                         line: str) -> None:
    (tmp_path / "files").mkdir()
    assert cli.main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(line.replace("{tmp}", str(tmp_path)))
