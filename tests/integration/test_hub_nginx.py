"""docs/hub.md's nginx recipe (examples/hub/nginx.conf), run: Debian's nginx on 127.0.0.1 in front of olah (a
model) and `kernel-factory serve --hub` (a kernel), one HF_ENDPOINT for both, huggingface_hub and kernels 0.17.2
as clients."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hub_clients import MARK, MEGA, build_store, client, served
from hub_server import OlahServer, git, serve_repo
from support import ROOT, free_port, wait_http

pytestmark = pytest.mark.integration
CONF = ROOT / "examples" / "hub" / "nginx.conf"

FETCH = """
import sys, kernels, torch
from huggingface_hub import hf_hub_download
config = hf_hub_download("acme/tiny-model", "config.json")
print("MODEL", open(config).read().strip())
layer = kernels.get_kernel("@MEGA@", version=1).layers.Doubler()
print("KERNEL", layer(torch.ones(1)).tolist())
""".replace("@MEGA@", MEGA)


def _nginx() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if found is None:
        pytest.fail("nginx is not installed; run `make system-deps`")
    return found


def test_docs_show_the_tested_config() -> None:
    conf = CONF.read_text()
    body = conf[conf.index("upstream kernel_factory_hub"):]
    assert body in (ROOT / "docs" / "hub.md").read_text()


def test_one_endpoint_serves_models_from_the_mirror_and_kernels_from_the_store(tmp_path: Path) -> None:
    nginx = _nginx()
    store = build_store(tmp_path / "build", None)
    model = tmp_path / "model"
    model.mkdir()
    git(model, "init", "-q", "-b", "main")
    (model / "config.json").write_text('{"model_type": "tiny"}\n')
    git(model, "add", "-A")
    git(model, "commit", "-q", "-m", "tiny model", when=1_700_000_000)
    serve_repo(model, tmp_path / "mirrors", "acme/tiny-model", "model")
    olah = OlahServer(tmp_path / "mirrors", tmp_path / "olah")
    olah.start()
    try:
        with served(store, tmp_path / "hub.log") as hub_url:
            port = free_port()
            conf = (CONF.read_text().replace("127.0.0.1:8081", hub_url.removeprefix("http://"))
                    .replace("127.0.0.1:8090", f"127.0.0.1:{olah.port}").replace("127.0.0.1:8080", f"127.0.0.1:{port}"))
            (tmp_path / "hub.conf").write_text(conf)
            for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
                (tmp_path / "nginx" / sub).mkdir(parents=True)
            main = tmp_path / "nginx.conf"
            main.write_text(
                f"daemon off;\npid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/nginx-error.log;\nevents {{}}\n"
                f"http {{\n  access_log {tmp_path}/nginx-access.log;\n"
                + "".join(f"  {sub}_temp_path {tmp_path}/nginx/{sub};\n" for sub in ("proxy", "fastcgi", "uwsgi",
                                                                                       "scgi"))
                + f"  client_body_temp_path {tmp_path}/nginx/body;\n  include {tmp_path}/hub.conf;\n}}\n")
            proc = subprocess.Popen([nginx, "-p", str(tmp_path), "-c", str(main)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.STDOUT)
            try:
                endpoint = f"http://127.0.0.1:{port}"
                wait_http(f"{endpoint}/api/organizations/kernels-community/overview")
                out = client(Path(sys.executable), FETCH, tmp_path / "cache", endpoint, tmp_path).stdout.splitlines()
            finally:
                proc.terminate()
                proc.wait(10)
    finally:
        olah.stop()
    assert out[-3:] == ['MODEL {"model_type": "tiny"}', MARK, "KERNEL [2.0]"]
    access = (tmp_path / "nginx-access.log").read_text()
    assert "/kernels/kernels-community/megablocks/resolve/" in access and "/acme/tiny-model/resolve/" in access
    hub_log = (tmp_path / "hub.log").read_text()
    assert "/api/organizations/kernels-community/overview 200" in hub_log and "tiny-model" not in hub_log
