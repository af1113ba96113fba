"""`index --wheels DIR --out SITE` with no store named: SITE is a self-contained site, nothing written elsewhere."""

from __future__ import annotations

import sys
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import hostile as h
from support import run


class Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [v for k, v in attrs if k == "href" and v]


def local_links(site: Path) -> list[tuple[Path, Path]]:
    """(page, target) for every relative link of every page under ``site``."""
    found = []
    for page in site.rglob("*.html"):
        parser = Hrefs()
        parser.feed(page.read_text("utf-8"))
        for href in parser.hrefs:
            parts = urllib.parse.urlsplit(href)
            if parts.scheme or parts.netloc or not parts.path:
                continue
            target = (page.parent / urllib.parse.unquote(parts.path)).resolve()
            found.append((page, target / "index.html" if href.endswith("/") else target))
    return found


def test_out_alone_makes_a_self_contained_site(tmp_path: Path) -> None:
    wheels = h.small_wheels(tmp_path / "wheels", 5)
    before = h.snapshot(wheels)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = run(sys.executable, "-m", "kernel_factory", "index", "--wheels", wheels, "--out", "site", cwd=cwd)
    assert "adopted 5 wheel(s)" in proc.stdout, proc.stdout + proc.stderr
    site = (cwd / "site").resolve()
    assert [p.name for p in cwd.iterdir()] == ["site"]  # no ./public, nothing else in the current folder
    assert h.snapshot(wheels) == before
    assert sorted(p.name for p in (site / "files").glob("*.whl")) == sorted(p.name for p in wheels.glob("*.whl"))
    links = local_links(site)
    wheel_links = [t for _, t in links if t.suffix == ".whl"]
    assert len(wheel_links) >= 5
    outside = [(str(p), str(t)) for p, t in links if not t.is_relative_to(site) or not t.is_file()]
    assert outside == []
    assert h.check_root(site) == []
