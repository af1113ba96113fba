"""A corpus of hostile kernel repositories, made as git repositories (or plain folders) in a tmp folder.

Each builder returns the repository path. Every repository also holds a good
variant (``GOOD``), so a test can check that one bad variant does not stop the
others. Digests are computed with factory.digest, so a variant is refused for
the hostile thing it carries, not for a stale digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import urllib.parse
from collections.abc import Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from kernel_factory.verify import digest

GOOD = "torch-universal"  # noarch: no binaries, always buildable
CPU = "torch213-cxx11-cpu-x86_64-linux"
COMMIT_DATE = "2025-05-05T08:00:00+00:00"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Hostile",
    "GIT_AUTHOR_EMAIL": "hostile@example.com",
    "GIT_COMMITTER_NAME": "Hostile",
    "GIT_COMMITTER_EMAIL": "hostile@example.com",
    "GIT_AUTHOR_DATE": COMMIT_DATE,
    "GIT_COMMITTER_DATE": COMMIT_DATE,
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}
Files = Mapping[str, bytes | str]  # relative path -> content; a str value starting with "->" makes a symlink


def init_py(package: str) -> bytes:
    return f'"""{package} kernel."""\n\n\ndef ping() -> str:\n    return "{package}"\n'.encode()


def metadata(name: str, folder: Path, **extra: Any) -> dict[str, Any]:
    """A metadata.json object with the digest of ``folder`` as it is now."""
    meta: dict[str, Any] = {
        "name": name,
        "id": f"_{name.replace('-', '_')}_0000000",
        "version": 1,
        "license": "Apache-2.0",
        "python-depends": [],
        "backend": {"type": "cpu", "archs": []},
        "digest": {"algorithm": "sha256", "files": digest.compute(folder)},
    }
    meta.update(extra)
    return meta


def write_files(folder: Path, files: Files) -> None:
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and content.startswith("->"):
            os.symlink(content[2:], path)
        else:
            path.write_bytes(content.encode() if isinstance(content, str) else content)


def variant(repo: Path, name: str, package: str, files: Files | None = None, *,
            meta: dict[str, Any] | bytes | None = None, digest_files: bool = True) -> Path:
    """``build/<name>/`` in the flat layout: __init__.py, ``files``, then metadata.json (digest of what is there)."""
    folder = repo / "build" / name
    folder.mkdir(parents=True, exist_ok=True)
    write_files(folder, {"__init__.py": init_py(package), **(files or {})})
    if isinstance(meta, bytes):
        (folder / "metadata.json").write_bytes(meta)
    else:
        data = metadata(package, folder) if digest_files else {
            "name": package, "id": f"_{package}_0000000", "version": 1, "license": "Apache-2.0",
            "python-depends": [], "backend": {"type": "cpu"},
        }
        data.update(meta or {})
        (folder / "metadata.json").write_text(json.dumps(data, indent=1))
    return folder


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=True)
    return proc.stdout.decode()


def commit(repo: Path, tags: tuple[str, ...] = ("v0.1.0",), message: str = "kernel") -> str:
    """git init (once), add everything, commit, tag; the commit sha."""
    if not (repo / ".git").exists():
        git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    for tag in tags:
        git(repo, "tag", tag)
    return git(repo, "rev-parse", "HEAD").strip()


def kernel(root: Path, repo_name: str, package: str, bad: Mapping[str, Files] | None = None, *,
           readme: str = "A hostile test kernel.\n", tags: tuple[str, ...] = ("v0.1.0",),
           as_git: bool = True, bad_meta: Mapping[str, dict[str, Any] | bytes] | None = None) -> Path:
    """A repository with the good variant plus one variant per entry of ``bad`` (name -> files)."""
    repo = root / repo_name
    repo.mkdir(parents=True)
    (repo / "README.md").write_text(readme)
    variant(repo, GOOD, package)
    for name, files in (bad or {}).items():
        variant(repo, name, package, files, meta=(bad_meta or {}).get(name))
    for name, meta in (bad_meta or {}).items():
        if name not in (bad or {}):
            variant(repo, name, package, meta=meta)
    if as_git:
        commit(repo, tags)
    return repo


def good_wheel(package: str, version: str = "0.1.0") -> str:
    return f"{package}-{version}-py3-none-any.whl"


# -- whole-repository cases -------------------------------------------------------------------------------
def symlink_escapes(root: Path) -> Path:
    """One variant links to /etc/passwd, another into a sibling variant, a third links to its parent folder."""
    return kernel(root, "symlinks", "symlinks", {
        "torch-cpu": {"passwd.txt": "->/etc/passwd"},
        "torch-cuda": {"stolen.py": f"->../{GOOD}/__init__.py"},
        "torch-rocm": {"up": "->.."},
    })


def bad_names(root: Path) -> Path:
    """File names that cannot be wheel entries: a backslash, a newline, a non-UTF-8 byte (git stores all three)."""
    repo = kernel(root, "badnames", "badnames", {"torch-cpu": {"a\\b.py": b"x = 1\n"},
                                                 "torch-cuda": {"new\nline.py": b"x = 1\n"}}, as_git=False)
    folder = repo / "build" / "torch-rocm"
    folder.mkdir()
    (folder / "__init__.py").write_bytes(init_py("badnames"))
    os.close(os.open(os.fsencode(folder) + b"/caf\xe9.py", os.O_CREAT | os.O_WRONLY, 0o644))
    (folder / "metadata.json").write_text(json.dumps(metadata("badnames", folder)))
    commit(repo)
    return repo


def broken_metadata(root: Path) -> Path:
    """metadata.json with wrong types, 10 MB of nesting, not JSON, a digest of files that are not there."""
    deep = b"[" * 5_000_000 + b"]" * 5_000_000
    return kernel(root, "badmeta", "badmeta", bad_meta={
        "torch-cpu": {"name": 5},
        "torch-cuda": deep,
        "torch-rocm": b"\xff\xfe not json",
        "torch-xpu": {"digest": {"algorithm": "sha256", "files": {"__init__.py": "AAAA", "../../../etc/passwd":
                                                                 "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="}}},
        "torch-metal": {"digest": {"algorithm": "md5", "files": {}}},
    })


def empty_so(root: Path) -> Path:
    """A linux variant whose extension module is a 0-byte file."""
    return kernel(root, "emptyso", "emptyso", {CPU: {"_emptyso.abi3.so": b""}})


def html_everywhere(root: Path) -> Path:
    """README and metadata fields with HTML; a variant folder whose name is markup (not a kernels variant)."""
    readme = ('<script>alert("readme")</script>\n\n'
              'An <b>evil</b> kernel<script>alert("summary")</script> & "quotes" \'here\' '
              '<img src=x onerror=alert(1)>.\n')
    repo = kernel(root, "htmlkernel", "htmlkernel", readme=readme, as_git=False,
                  bad_meta={GOOD: {"license": '<script>alert("license")</script>',
                                   "upstream": 'https://x.example/"><script>alert("u")</script>'}})
    variant(repo, '<script>alert("v")</script>', "htmlkernel")
    variant(repo, "torch-\"quoted'", "htmlkernel")
    commit(repo)
    return repo


def script_name(root: Path) -> Path:
    """metadata.json names the distribution with markup and a path separator."""
    return kernel(root, "scriptname", "scriptname", bad_meta={
        "torch-cpu": {"name": '<script>alert("n")</script>'},
        "torch-cuda": {"name": "../../evil"},
    })


def bad_tags(root: Path) -> Path:
    """Tags that are not PEP 440 beside ones that are: v0.1.0, then v1.0 on a later commit (one version per commit)."""
    repo = kernel(root, "badtags", "badtags", tags=("v0.1.0", "vnot-a-version"))
    commit(repo, ("v1.0.0<script>", "v1.0"), "second release")
    return repo


def same_version_twice(root: Path) -> tuple[Path, Path]:
    """Two repositories of other organisations' names that make the same wheel file name."""
    first = kernel(root / "org-a", "twin", "twin")
    second = kernel(root / "org-b", "twin", "twin", readme="The other twin.\n")
    (second / "build" / GOOD / "extra.py").write_text("EXTRA = 1\n")
    folder = second / "build" / GOOD
    (folder / "metadata.json").write_text(json.dumps(metadata("twin", folder)))
    commit(second, (), "differ")
    git(second, "tag", "-f", "v0.1.0")
    return first, second


def imports_forbidden(root: Path, marker: Path) -> Path:
    """A kernel whose __init__.py, _ops.py and a .pth/sitecustomize write ``marker`` when imported."""
    payload = f"open({str(marker)!r}, 'a').write('imported\\n')\nraise SystemExit('kernel code ran')\n"
    repo = root / "importbomb"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("Imports are forbidden.\n")
    pth = f"import os; {payload.splitlines()[0]}\n"
    variant(repo, GOOD, "importbomb", {"_ops.py": payload, "sitecustomize.py": payload, "usercustomize.py": payload,
                                       "evil.pth": pth, "__main__.py": payload, "setup.py": payload,
                                       "conftest.py": payload})
    init = repo / "build" / GOOD / "__init__.py"
    init.write_text(payload)
    folder = repo / "build" / GOOD
    (folder / "metadata.json").write_text(json.dumps(metadata("importbomb", folder)))
    commit(repo)
    return repo


def many_files(root: Path, count: int) -> Path:
    """A plain folder (no git) whose one variant holds ``count`` tiny files."""
    repo = root / "manyfiles"
    folder = repo / "build" / GOOD
    for i in range(0, count, 1000):
        sub = folder / f"d{i // 1000:03d}"
        sub.mkdir(parents=True)
        for j in range(i, min(i + 1000, count)):
            (sub / f"f{j}.txt").write_bytes(b"%d\n" % j)
    (repo / "README.md").write_text("Many files.\n")
    (folder / "__init__.py").write_bytes(init_py("manyfiles"))
    (folder / "metadata.json").write_text(json.dumps(metadata("manyfiles", folder)))
    return repo


def big(root: Path, name: str, variants: tuple[str, ...], size: int, seed: int = 0) -> Path:
    """A repository whose variants each hold ``size`` bytes of incompressible data (for kills mid-work)."""
    import random

    rng = random.Random(seed)
    repo = root / name
    repo.mkdir(parents=True)
    (repo / "README.md").write_text(f"{name}: a big kernel.\n")
    for v in variants:
        variant(repo, v, name.replace("-", "_"), {"blob.bin": rng.randbytes(size)})
    commit(repo)
    return repo


FOLDER = -1  # the size snapshot gives a folder (a file emptied to 0 bytes is a change, a folder's new time is not)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Path -> (size, mtime_ns) of everything under ``root`` (symlinks not followed; a folder's size: FOLDER)."""
    found: dict[str, tuple[int, int]] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            found[os.path.relpath(p, root)] = (st.st_size if not os.path.isdir(p) else FOLDER, st.st_mtime_ns)
    return found


# -- what every store, index root and published copy must satisfy ----------------------------------------
class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[dict[str, str | None]] = []
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        if tag == "a":
            self.links.append(dict(attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_link(page: Path, url: str, sha: str | None, meta_sha: str | None, problems: list[str]) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path:
        return
    target = (page.parent / urllib.parse.unquote(parts.path)).resolve()
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        problems.append(f"{page}: link {url} -> missing {target}")
        return
    frag = sha or (parts.fragment.removeprefix("sha256=") if parts.fragment.startswith("sha256=") else None)
    if frag and sha256(target) != frag:
        problems.append(f"{page}: link {url} hash does not match the file")
    if meta_sha:
        meta = target.with_name(target.name + ".metadata")
        if not meta.is_file() or sha256(meta) != meta_sha:
            problems.append(f"{page}: {url}.metadata missing or its hash does not match")


def check_root(root: Path) -> list[str]:
    """Problems with a store / index root: records without whole files, links to missing or different files."""
    problems: list[str] = []
    files = root / "files"
    if files.is_dir():
        for rec_path in files.glob("*.whl.json"):
            if rec_path.name.startswith("."):
                continue
            rec = json.loads(rec_path.read_bytes())
            wheel = files / rec["filename"]
            meta = files / (rec["filename"] + ".metadata")
            if not wheel.is_file():
                continue  # a record without its wheel is not listed (store.py); a rerun rebuilds it
            if wheel.stat().st_size != rec["size"] or sha256(wheel) != rec["sha256"]:
                problems.append(f"{wheel}: size or sha256 differs from its record (half-written?)")
            if not meta.is_file() or sha256(meta) != rec["metadata_sha256"]:
                problems.append(f"{meta}: missing or differs from its record")
    for page in sorted(root.rglob("index.html")):
        if any(p.startswith(".tmp-") for p in page.relative_to(root).parts):
            continue
        parser = _Links()
        parser.feed(page.read_text("utf-8"))
        for link in parser.links:
            href = link.get("href") or ""
            core = link.get("data-core-metadata") or ""
            _check_link(page, href, None, core.removeprefix("sha256=") or None, problems)
    for page in sorted(root.rglob("index.json")):
        data = json.loads(page.read_bytes())
        for f in data.get("files", []) if isinstance(data, dict) else []:
            meta = f.get("core-metadata")
            _check_link(page, f["url"], f["hashes"]["sha256"], meta.get("sha256") if isinstance(meta, dict) else None,
                        problems)
    return problems


def unescaped(root: Path, template_scripts: int = 1) -> list[str]:
    """Markup from kernel input that reached a page as markup: event handlers, javascript: links, extra scripts."""
    problems: list[str] = []
    for page in sorted(root.rglob("*.html")):
        if any(p.startswith(".") for p in page.relative_to(root).parts):
            continue
        parser = _Links()
        parser.feed(page.read_text("utf-8"))
        known = {"html", "head", "meta", "title", "body", "h1", "h2", "h3", "a", "br", "p", "code", "pre", "span",
                 "div", "section", "details", "summary", "table", "thead", "tbody", "tr", "th", "td", "footer",
                 "script", "style", "button", "ul", "li", "nav", "header", "main", "link", "small", "strong", "em",
                 "dl", "dt", "dd", "label", "input", "kbd", "abbr", "time", "caption", "colgroup", "col", "ol", "hr",
                 "select", "option"}
        for tag, attrs in parser.tags:
            if tag not in known:
                problems.append(f"{page}: unexpected <{tag}> element")
            for key, value in attrs:
                if key.startswith("on"):
                    problems.append(f"{page}: <{tag} {key}=...> event handler")
                if key in ("href", "src") and (value or "").strip().lower().startswith(("javascript:", "data:")):
                    problems.append(f"{page}: <{tag} {key}={value!r}>")
        if len(parser.scripts) > template_scripts or any("alert" in s for s in parser.scripts):
            problems.append(f"{page}: a script that is not the template's")
    return problems


def small_wheels(folder: Path, count: int, versions: int = 1) -> Path:
    """``count`` tiny valid wheels (for `index --wheels`): of distinct projects, or ``versions`` of each
    project (1.0, 1.1, ...)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        if versions == 1:
            name, version = f"proj{i:04d}", f"1.{i % 7}"
        else:
            name, version = f"proj{i // versions:04d}", f"1.{i % versions}"
        info = f"{name}-{version}.dist-info"
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: project {i}\n"
        with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as zf:
            zf.writestr(f"{name}/__init__.py", "")
            zf.writestr(f"{info}/METADATA", meta)
            zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hostile\nRoot-Is-Purelib: true\n"
                                         "Tag: py3-none-any\n")
            zf.writestr(f"{info}/RECORD", "")
        os.utime(folder / f"{name}-{version}-py3-none-any.whl", (1_700_000_000, 1_700_000_000))
    return folder


def tree(root: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under ``root`` whose path has no part starting with '.'."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}


def children(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (from /proc: each of its threads' ``children`` file, a read or two where the
    kernel has them; else every process's stat, which a poll every few ms would take a core for)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    listed: set[int] = set()
    try:
        for tid in tasks:
            try:
                listed.update(int(x) for x in Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
            except FileNotFoundError:
                if os.path.exists(f"/proc/{pid}/task/{tid}"):
                    raise
        return sorted(listed)
    except FileNotFoundError:  # no children files in this kernel
        pass
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped by init counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
