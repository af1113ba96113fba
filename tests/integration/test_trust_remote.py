"""Remote answers and remote settings trusted too far (issue 26 items 2, 6, 9 and 10): next pages of every Hub
listing stay on HF_ENDPOINT, an organisation listing's ids are plain Hub ids (never local paths), no URL's
credentials are printed, and risky s3-put-args are refused unless named. Each through the real CLI."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_hub import branch, commit, fake_hub, folder
from support import clean_env, kf

pytestmark = pytest.mark.integration

SHA = "a" * 40
TOKEN = "hf_s3cr3t_token"


def _world(tmp_path: Path, endpoint: str, repo: str) -> tuple[dict[str, str], Path]:
    for name in ("cwd", "home"):
        (tmp_path / name).mkdir(exist_ok=True)
    config = tmp_path / "cwd" / "factory.toml"
    config.write_text(f'[factory]\nstore = "{tmp_path / "store"}"\n\n[[kernel]]\nrepo = "{repo}"\nversions = [1]\n')
    env = clean_env(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "home" / "hf"), HF_TOKEN=TOKEN,
                    HF_HUB_OFFLINE="0", HF_HUB_ETAG_TIMEOUT="3", HF_HUB_DOWNLOAD_TIMEOUT="3",
                    HOME=str(tmp_path / "home"))
    return env, config


def _errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error: ")]


def test_file_listing_next_page_on_another_host_gets_no_token(tmp_path: Path) -> None:
    with fake_hub() as hub, fake_hub(record_only=True) as thief:
        hub.refs["branches"] = [branch("v1", SHA)]
        hub.pages = [([commit(SHA)], {"X-Total-Count": "1"})]
        steal = f"{thief.url}/steal/api/kernels/kernels-community/evil/tree/{SHA}/build?page=1"
        hub.trees = [([folder("build/torch-universal")], {"Link": f'<{steal}>; rel="next"'})]
        env, config = _world(tmp_path, hub.url, "kernels-community/evil")
        proc = kf("plan", "--config", config, cwd=tmp_path / "cwd", env=env)
    assert proc.returncode == 4, proc.stderr
    assert _errors(proc) == [
        f"error: kernels-community/evil: the file listing of {hub.url} points its next page at another host "
        f"({steal}); not following it, so HF_TOKEN is not sent there: check HF_ENDPOINT"]
    assert thief.seen == []  # not even a request without the token
    assert any("/tree/" in path and auth == f"Bearer {TOKEN}" for path, auth in hub.seen)
    assert TOKEN not in proc.stdout + proc.stderr


def test_organisation_listing_next_page_on_another_host_gets_no_token(tmp_path: Path) -> None:
    with fake_hub() as hub, fake_hub(record_only=True) as thief:
        own = f"{hub.url}/api/kernels?author=kernels-community&page=1"
        steal = f"{thief.url}/steal/api/kernels?author=kernels-community&page=2"
        hub.listing = [([{"id": "kernels-community/relu"}], {"Link": f'<{own}>; rel="next"'}),
                       ([{"id": "kernels-community/gelu"}], {"Link": f'<{steal}>; rel="next"'})]
        env, config = _world(tmp_path, hub.url, "kernels-community/*")
        proc = kf("plan", "--config", config, cwd=tmp_path / "cwd", env=env)
    assert proc.returncode == 4, proc.stderr
    assert _errors(proc) == [
        f"error: kernels-community/*: the repository listing of {hub.url} points its next page at another host "
        f"({steal}); not following it, so HF_TOKEN is not sent there: check HF_ENDPOINT"]
    assert thief.seen == []
    assert [path for path, _ in hub.seen] == ["/api/kernels?author=kernels-community",
                                              "/api/kernels?author=kernels-community&page=1"]
    assert TOKEN not in proc.stdout + proc.stderr


def _local_kernel(path: Path) -> None:
    (path / "build" / "torch-universal" / "relu").mkdir(parents=True)
    (path / "build" / "torch-universal" / "relu" / "__init__.py").write_text("")


def test_listed_ids_are_plain_hub_ids_never_local_paths(tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    _local_kernel(cwd / "good")  # reached as kernels-community/../good while ./kernels-community exists
    _local_kernel(cwd / "kernels-community" / "evil")  # a folder named like a listed id: still the Hub's
    with fake_hub() as hub:
        hub.refs["branches"] = [branch("v1", SHA)]
        hub.pages = [([commit(SHA)], {"X-Total-Count": "1"})]
        hub.listing = [([{"id": "kernels-community/../good"}, {"id": "kernels-community/evil"},
                         {"id": "kernels-community/.hidden"}, {"id": "kernels-community/x\x1b[8m"}], {})]
        env, config = _world(tmp_path, hub.url, "kernels-community/*")
        proc = kf("plan", "--config", config, cwd=cwd, env=env)
    assert proc.returncode == 3, proc.stderr
    hint = ("(org/name; letters, digits, '-', '_', '.'); left out: check HF_ENDPOINT points at a Hub you trust")
    assert proc.stdout.splitlines() == [
        f"  refuse kernels-community/*: the Hub listed 'kernels-community/../good', which is not a Hub repository id "
        f"{hint}",
        f"  refuse kernels-community/*: the Hub listed 'kernels-community/.hidden', which is not a Hub repository id "
        f"{hint}",
        f"  refuse kernels-community/*: the Hub listed 'kernels-community/x\\x1b[8m', which is not a Hub repository "
        f"id {hint}",
        "  refuse kernels-community/evil@v1: no build/ variants; is this a kernel repository?",
        "plan: 0 to build, 0 already in the store, 4 refused"], proc.stdout
    assert "/api/kernels/kernels-community/evil/refs" in [path for path, _ in hub.seen]
    assert "Traceback" not in proc.stderr



def test_listing_inside_huggingface_hub_sends_no_token_elsewhere(tmp_path: Path) -> None:
    with fake_hub() as hub, fake_hub(record_only=True) as thief:
        hub.refs["branches"] = [branch("v1", SHA)]
        hub.pages = [([commit(SHA)], {"X-Total-Count": "1"})]
        hub.trees = [([folder("build/torch-universal")], {})]
        steal = f"{thief.url}/steal/tree?page=1"
        hub.root_tree = [([], {"Link": f'<{steal}>; rel="next"'})]  # snapshot_download lists the files of a README
        env, config = _world(tmp_path, hub.url, "kernels-community/evil")
        proc = kf("plan", "--config", config, cwd=tmp_path / "cwd", env=env)
    assert proc.returncode == 4, proc.stderr
    assert _errors(proc) == [
        f"error: a Hub answer on {hub.url} sent a request with HF_TOKEN to another host ({steal}); stopped it, so "
        "HF_TOKEN is not sent there: check HF_ENDPOINT"]
    assert thief.seen == []
    assert TOKEN not in proc.stdout + proc.stderr

# -- credentials in URLs (item 6) ----------------------------------------------------------------------------
def test_hub_retries_print_no_credentials(tmp_path: Path) -> None:
    with fake_hub() as hub:
        hub.refs["branches"] = [branch("v1", SHA)]
        hub.pages = [([commit(SHA)], {"X-Total-Count": "1"})]
        hub.busy = ("/tree/",)
        env, config = _world(tmp_path, hub.url.replace("http://", "http://someone:p@ss-in-url@"),
                             "kernels-community/evil")
        proc = kf("plan", "--config", config, cwd=tmp_path / "cwd", env={**env, "KERNEL_FACTORY_RETRY_S": "2"})
    assert proc.returncode == 4, proc.stderr
    assert _errors(proc)[0].startswith(f"error: kernels-community/evil on {hub.url}: listing build/ at "
                                       f"{SHA[:12]} failed with HTTP 503; the Hub is busy or unavailable"), proc.stderr
    assert "p@ss-in-url" not in proc.stdout + proc.stderr and "someone" not in proc.stdout + proc.stderr
    assert "ss-in-url" not in proc.stdout + proc.stderr


def test_s3_endpoint_credentials_are_not_printed(tmp_path: Path) -> None:
    from servers import make_root
    from support import free_port

    root = make_root(tmp_path, [("relu", "1.0.0")])
    port = free_port()
    env = clean_env(AWS_ENDPOINT_URL=f"http://AKIAUSER:s3cr3t@key@127.0.0.1:{port}", AWS_ACCESS_KEY_ID="testing",
                    AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null",
                    AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_MAX_ATTEMPTS="1")
    proc = kf("publish", "--store", root.path, "--to", "s3://site/idx", cwd=tmp_path, env=env)
    assert proc.returncode == 4, proc.stderr
    assert _errors(proc) == [f"error: cannot reach S3 at http://127.0.0.1:{port} (EndpointConnectionError); "
                             "check AWS_ENDPOINT_URL and the network"], proc.stderr
    assert "s3cr3t" not in proc.stdout + proc.stderr and "AKIAUSER" not in proc.stdout + proc.stderr


def test_simple_url_credentials_are_not_printed(tmp_path: Path) -> None:
    from servers import make_root
    from support import http_server

    root = make_root(tmp_path, [("relu", "1.0.0")])
    (tmp_path / "empty").mkdir()
    with http_server(tmp_path / "empty") as url:  # answers 404 to every page: a new index, or the wrong URL
        simple = url.replace("http://", "http://someone:p@ss-in-url@") + "/nothere/"
        proc = kf("publish", "--store", root.path, "--to", f"{url}/legacy/", "--simple-url", simple, "--dry-run",
                  cwd=tmp_path, env=clean_env(TWINE_USERNAME="u", TWINE_PASSWORD="p"))
    assert proc.returncode == 0, proc.stderr
    assert (f"warning: {url}/nothere/ answers HTTP 404, so every file counts as new and is uploaded again; "
            "check --simple-url") in proc.stderr.splitlines(), proc.stderr
    assert "ss-in-url" not in proc.stdout + proc.stderr and "someone" not in proc.stdout + proc.stderr


# -- s3-put-args (item 10) -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from servers import moto_server

    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


def _s3(url: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def _keys(s3: Any, bucket: str) -> list[str]:
    return sorted(obj["Key"] for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


RISKY = [
    ('ACL = "public-read-write"', "ACL='public-read-write' lets anyone overwrite every object (public write)"),
    ('WebsiteRedirectLocation = "https://evil.example/x"',
     "WebsiteRedirectLocation='https://evil.example/x' redirects every object (wheels included) to another address"),
    ('ObjectLockLegalHoldStatus = "ON"', "ObjectLockLegalHoldStatus='ON' puts every object under a legal hold (it "
                                         "cannot be deleted or replaced until the hold is lifted)"),
    ('GrantFullControl = "uri=http://acs.amazonaws.com/groups/global/AllUsers"',
     "GrantFullControl='uri=http://acs.amazonaws.com/groups/global/AllUsers' lets anyone change every object's "
     "permissions (a public grant)"),
]


@pytest.mark.parametrize(("setting", "why"), RISKY, ids=["acl", "redirect", "legal-hold", "grant"])
def test_risky_put_args_from_a_config_file_are_refused(moto: str, tmp_path: Path, setting: str, why: str) -> None:
    from servers import make_root, s3_env

    root = make_root(tmp_path, [("relu", "1.0.0")])
    (tmp_path / "factory.toml").write_text(f"[factory]\ns3-put-args = {{ {setting} }}\n")  # read without --config
    s3 = _s3(moto)
    bucket = f"refuse-{tmp_path.name.lower().replace('_', '-')[-30:]}"
    s3.create_bucket(Bucket=bucket)
    key = setting.split(" ")[0]
    for extra in ((), ("--dry-run",)):
        proc = kf("publish", "--store", root.path, "--to", f"s3://{bucket}/idx", *extra, cwd=tmp_path,
                  env=clean_env(**s3_env(moto)))
        assert proc.returncode == 2, proc.stderr
        assert _errors(proc) == [f"error: s3-put-args: {why}; leave it out of s3-put-args, or pass "
                                 f"--allow-s3-put-arg {key} to apply it anyway"], proc.stderr
    assert _keys(s3, bucket) == []  # nothing put


def test_named_put_arg_applies_and_is_shown(moto: str, tmp_path: Path) -> None:
    from servers import make_root, s3_env

    root = make_root(tmp_path, [("relu", "1.0.0")])
    (tmp_path / "factory.toml").write_text('[factory]\ns3-put-args = { WebsiteRedirectLocation = "/moved", '
                                           'ServerSideEncryption = "AES256" }\n')
    s3 = _s3(moto)
    s3.create_bucket(Bucket="named")
    env = clean_env(**s3_env(moto))
    note = ("note: every object put to s3://named/idx carries s3-put-args ServerSideEncryption=AES256, "
            "WebsiteRedirectLocation=/moved")
    proc = kf("publish", "--store", root.path, "--to", "s3://named/idx", "--dry-run",
              "--allow-s3-put-arg", "WebsiteRedirectLocation", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [note]
    assert _keys(s3, "named") == []
    proc = kf("publish", "--store", root.path, "--to", "s3://named/idx", "--allow-s3-put-arg",
              "WebsiteRedirectLocation", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [note]
    head = s3.head_object(Bucket="named", Key="idx/simple/index.html")
    assert head["WebsiteRedirectLocation"] == "/moved" and head["ServerSideEncryption"] == "AES256"


def test_plan_shows_the_put_args_of_an_s3_store(moto: str, tmp_path: Path) -> None:
    from servers import s3_env

    _s3(moto).create_bucket(Bucket="planned")
    with fake_hub() as hub:
        hub.refs["branches"] = [branch("v1", SHA)]
        hub.pages = [([commit(SHA)], {"X-Total-Count": "1"})]
        env, config = _world(tmp_path, hub.url, "kernels-community/evil")
        config.write_text(config.read_text().replace(f'store = "{tmp_path / "store"}"', 'store = "s3://planned/ci"\n'
                                                     's3-put-args = { ACL = "public-read-write" }'))
        proc = kf("plan", "--config", config, cwd=tmp_path / "cwd", env={**env, **s3_env(moto)})
    assert proc.returncode == 3, proc.stderr  # the one revision has no build/ variants
    assert proc.stderr.splitlines() == [
        "note: every object put to s3://planned/ci carries s3-put-args ACL=public-read-write",
        "warning: s3-put-args: ACL='public-read-write' lets anyone overwrite every object (public write); build and "
        "publish refuse it unless --allow-s3-put-arg ACL names it"]


# -- a templates folder (item 11) ----------------------------------------------------------------------------
SHIPPED = Path(__file__).resolve().parents[2] / "index_templates"


def _store_and_templates(tmp_path: Path) -> tuple[Path, Path]:
    import shutil

    from index_synth import add_kernel

    store = tmp_path / "store"
    add_kernel(store, "img2grey", "1.1.2", "torch213-cxx11-cpu-x86_64-linux")
    templates = tmp_path / "templates"
    templates.mkdir()
    for page in SHIPPED.glob("*.html"):
        shutil.copy(page, templates / page.name)
    return store, templates


def _pages(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.html"))}


def test_a_templates_folder_runs_no_code(tmp_path: Path) -> None:
    store, templates = _store_and_templates(tmp_path)
    assert kf("index", "--store", store, "--out", tmp_path / "plain", cwd=tmp_path).returncode == 0
    proc = kf("index", "--store", store, "--out", tmp_path / "sandboxed", "--templates", templates, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # the shipped templates, copied, render the same in the sandbox
    assert _pages(tmp_path / "sandboxed") == _pages(tmp_path / "plain") != {}

    victim = tmp_path / "pwned"
    with (templates / "root.html").open("a") as f:
        f.write(f'{{{{ cycler.__init__.__globals__.os.system("touch {victim}") }}}}\n')
    lines = (templates / "root.html").read_text().count("\n")
    proc = kf("index", "--store", store, "--templates", templates, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert _errors(proc) == [f"error: templates {templates}/root.html line {lines}: access to attribute '__init__' "
                             "of 'type' object is unsafe; fix the template (templates render in jinja2's sandbox)"]
    assert not victim.exists()


def test_a_broken_template_is_one_line_before_any_page(tmp_path: Path) -> None:
    store, templates = _store_and_templates(tmp_path)
    (templates / "project.html").write_text("{% for x in %}\n")
    before = _pages(store)
    proc = kf("index", "--store", store, "--templates", templates, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert _errors(proc) == [f"error: templates {templates}/project.html line 1: Expected an expression, got 'end "
                             "of statement block'; fix the template (templates render in jinja2's sandbox)"]
    assert _pages(store) == before == {}


def test_library_retry_warnings_print_no_credentials(tmp_path: Path) -> None:
    with fake_hub() as hub:
        hub.refs["branches"] = [branch("v1", SHA)]
        hub.pages = [([commit(SHA)], {"X-Total-Count": "1"})]
        hub.trees = [([folder("build/torch-universal")], {})]
        hub.root_tree = [([{"type": "file", "path": "README.md", "oid": "1" * 40, "size": 5}], {})]
        hub.busy = ("/resolve/",)  # huggingface_hub's download retries warn with the URL it was given
        env, config = _world(tmp_path, hub.url.replace("http://", "http://someone:p@ss-in-url@"),
                             "kernels-community/evil")
        proc = kf("plan", "--config", config, cwd=tmp_path / "cwd", env={**env, "KERNEL_FACTORY_RETRY_S": "0"})
    assert proc.returncode == 4, proc.stderr
    assert "ss-in-url" not in proc.stdout + proc.stderr and "someone" not in proc.stdout + proc.stderr
    assert f"thrown while requesting HEAD {hub.url}/kernels/kernels-community/evil/resolve/{SHA}/README.md" in \
        proc.stderr
