"""The landing page and a project page in headless chromium: non-trivial screenshots, the matrix in the DOM,
names escaped."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from index_synth import add_kernel, adopt, make_wheel
from kernel_factory.index.command import index_with_adoption
from kernel_factory.index.pages import DEFAULT_BASE_URL
from support import http_server

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
EVIL = '<script>document.title="pwned"</script>'


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: apt-get install -y chromium (the CI setup installs it)")
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}", *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("landing") / "public"
    variants = (
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cu130-x86_64-linux",
        "torch213-cxx11-cu130-aarch64-linux",
        "torch212-cxx11-cu126-x86_64-linux",
        "torch212-cxx11-rocm71-x86_64-linux",
        "torch213-metal-aarch64-darwin",
        "torch-universal",
    )
    for version in ("1.1.0", "1.1.2"):
        for variant in variants:
            add_kernel(
                store, "img2grey", version, variant, repo_id="kernels-community/img2grey",
                archs=("8.0", "9.0", "10.0") if "cu" in variant else (), upstream="https://github.com/example/img2grey",
                summary=f"Greyscale images {EVIL}",
            )  # fmt: skip
    add_kernel(store, "My_Kernel", "0.1.0", variants[1], summary="Quotes \" and ' and <b>tags</b>")
    make_wheel(store / "adopt", "helper-lib", "2.0")
    adopt(store, store / "adopt")
    index_with_adoption(str(store), store, None, "https://kernels.example.com")
    return store / "index.html"


@pytest.mark.parametrize("page", ["index.html", "projects/img2grey/index.html"])
def test_screenshot(landing: Path, tmp_path: Path, page: str) -> None:
    png = tmp_path / "page.png"
    chromium(tmp_path / "profile", f"--screenshot={png}", "--window-size=1280,1600", (landing.parent / page).as_uri())
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 30_000  # a rendered page, not a blank one


def test_landing_dom(landing: Path, tmp_path: Path) -> None:
    dom = chromium(tmp_path / "profile", "--dump-dom", landing.as_uri()).stdout
    assert '<input id="search" type="search"' in dom
    for project in ("helper-lib", "img2grey", "my-kernel"):
        assert f'<a href="./projects/{project}/">' in dom
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]
    assert "&lt;script&gt;document.title=" in dom


def test_dom(landing: Path, tmp_path: Path) -> None:
    page = landing.parent / "projects/img2grey/index.html"
    dom = chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    assert '<table class="matrix">' in dom
    assert "<th>cuda 13.0</th>" in dom and "<th>torch 2.13</th>" in dom
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]  # the injected script did not run
    assert "&lt;script&gt;document.title=" in dom
    assert 'href="../../files/img2grey-1.1.2%2Btorch213cu130cxx11-py3-none-linux_x86_64.whl"' in dom
    assert (
        'data-cmd="pip install img2grey==1.1.2+torch213cu130cxx11 --index-url https://kernels.example.com/simple"'
        in dom
    )


def test_selector_filters_and_shows_commands(landing: Path, tmp_path: Path) -> None:
    uri = (landing.parent / "projects/img2grey/index.html").as_uri() + "#torch=2.13&backend=cuda+13.0&arch=x86_64-linux"
    dom = chromium(tmp_path / "profile", "--dump-dom", uri).stdout
    cmds = dom.split('<div id="sel-cmds">')[1].split("</div>\n")[0]
    root = "https://kernels.example.com/variants/torch213cu130cxx11/simple"
    assert f"<code>pip install img2grey --index-url {root}</code>" in cmds
    assert f"<code>uv pip install img2grey --index-url {root}</code>" in cmds
    assert cmds.count("<code>") == 2  # the project page's own kernel, pip and uv: nothing else fits
    entries = dom.split('<div class="entry"')[1:]
    shown = [e.split("</a>")[0].rsplit(">", 1)[1] + " " + e.split('class="plat">')[1].split("<")[0].split(" ")[0]
             for e in entries if not e.startswith(" hidden")]
    assert sorted(set(shown)) == ["+torch213cu130cxx11 x86_64-linux", "universal any"]


@pytest.fixture(scope="module")
def unaddressed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index made without base-url."""
    store = tmp_path_factory.mktemp("unaddressed") / "public"
    for variant in ("torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux"):
        add_kernel(store, "img2grey", "1.1.2", variant, repo_id="kernels-community/img2grey")
    index_with_adoption(str(store), store, None, DEFAULT_BASE_URL)
    return store


def test_without_base_url_the_pages_say_so_and_a_browser_fills_in_their_address(unaddressed: Path,
                                                                                 tmp_path: Path) -> None:
    pin = "pip install img2grey==1.1.2+torch213cu130cxx11 --index-url"
    for page in ("index.html", "projects/img2grey/index.html"):
        html = (unaddressed / page).read_text()
        assert "127.0.0.1" not in html and "--index-url INDEX_URL/simple" in html
        assert "This page does not know the address it is served from" in html
        dom = chromium(tmp_path / "profile", "--dump-dom", (unaddressed / page).as_uri()).stdout
        assert "--index-url INDEX_URL/simple" in dom  # from a file: nothing to derive, the note stays
    with http_server(unaddressed) as url:
        landing = chromium(tmp_path / "profile", "--dump-dom", f"{url}/").stdout
        project_uri = f"{url}/projects/img2grey/#torch=2.13&backend=cuda+13.0&arch=x86_64-linux"
        project = chromium(tmp_path / "profile", "--dump-dom", project_uri).stdout
    for dom in (landing, project):
        assert "INDEX_URL" not in dom
        assert f"--index-url {url}/simple</code>" in dom
        assert "<footer data-root=" in dom and f"Commands use {url}, the address this page was loaded from." in dom
    assert f'data-cmd="{pin} {url}/simple"' in project
    assert f"<code>pip install img2grey --index-url {url}/variants/torch213cu130cxx11/simple</code>" in project
    assert f"kernel-factory which --index-url {url} --kernel img2grey" in project
