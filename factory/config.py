"""Options: defaults -> config file -> environment -> command line, resolved once into frozen dataclasses.

The config is ``factory.toml`` (``[factory]`` and ``[[kernel]]`` tables) or
``[tool.kernel-factory]`` in a pyproject.toml. Relative paths in a config
file are relative to that file's folder. Unknown keys fail with a hint.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError

DEFAULT_CONFIG = "factory.toml"
DEFAULT_STORE = "public"
DEFAULT_ORGS = ("kernels-community",)
ALLOW_ORGS_ENV = "KERNEL_FACTORY_ALLOW_ORGS"  # more trusted organisations, comma-separated (the --allow-org option)
DEFAULT_LOCK_WAIT_S = 600.0  # KERNEL_FACTORY_LOCK_WAIT
DEFAULT_RETRY_S = 60.0  # KERNEL_FACTORY_RETRY_S: retry.Backoff's budget
KERNEL_KEYS = {  # a [[kernel]] table's keys (the [factory] keys are the options': see OPTIONS)
    "repo", "versions", "tags", "revision", "variants", "exclude-variants", "repo-id", "repo-type", "allow-no-digest",
    "exclude",
}
TRANSFORMERS_KEYS = {"python", "devices", "modes", "variants", "exclude-variants"}  # a [[transformers]] table's
TRANSFORMERS_MODES = ("inference", "training", "torch_compile", "fallback")  # kernels' Mode flags, lowercased

@dataclass(frozen=True)
class Location:
    """Where a store (or an index root) is, parsed once: a local folder (a path, or ``file://PATH``) or a
    remote URL (``s3://bucket/prefix``). ``display`` is the location as given, for messages."""

    display: str
    local: Path | None  # the folder of a local location; None for a remote one

    @classmethod
    def parse(cls, text: str | Path) -> Location:
        given = str(text)
        if given.startswith("file://"):
            return cls(given, Path(given.removeprefix("file://")))
        if "://" in given:
            return cls(given, None)
        return cls(given, Path(given))

    @property
    def scheme(self) -> str:
        """``file`` for a local location, else the URL's scheme (``s3``)."""
        return "file" if self.local is not None else self.display.split("://", 1)[0]

    def __str__(self) -> str:
        return self.display


@dataclass(frozen=True)
class Flags:
    """The command line's overrides of the options (cli fills it): ``given`` maps an option's name (a field
    of Options, see OPTIONS) to the value given on the command line, as given; an option not given is absent."""

    config: str | None = None  # --config FILE
    default_config: bool = True  # without --config, read ./factory.toml if there (to-wheel: False)
    given: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class KernelSpec:
    repo: str  # Hub id or local path (made absolute)
    versions: tuple[str, ...] = ()  # requests: "1", "1.1.2", ">=1,<2", "all"
    revision: str | None = None
    variants: tuple[str, ...] = ()  # include globs (empty: all)
    exclude_variants: tuple[str, ...] = ()
    repo_id: str | None = None  # for a local path: the Hub id it mirrors
    repo_type: str | None = None  # "kernel" or "model" (None: try kernel, then model)
    allow_no_digest: bool | None = None
    sha: str | None = None  # pinned by a lock file
    version_override: str | None = None  # to-wheel --revision with an X.Y.Z version
    lock_hashes: tuple[tuple[str, str], ...] = ()  # kernels.lock: (variant, "sha256-<hex>") to check after fetch
    exclude: tuple[str, ...] = ()  # with repo = "org/*": repository ids (globs) left out


@dataclass(frozen=True)
class TransformersSpec:
    """``[[transformers]]``: the kernels transformers' own default mapping asks for (read from the transformers of
    ``python`` when the plan is made), for these devices and modes (empty: all), as ``[[kernel]]`` entries."""

    python: str  # an interpreter, or a venv folder (its bin/python), made absolute
    devices: tuple[str, ...] = ()  # "cuda", "rocm", "xpu", "cpu", "mps", "npu", ...
    modes: tuple[str, ...] = ()  # TRANSFORMERS_MODES
    variants: tuple[str, ...] = ()
    exclude_variants: tuple[str, ...] = ()


@dataclass(frozen=True)
class Variables:
    """What the code underneath takes from the process's environment variables (no flag, no config key), read in
    one place: ``variables(env)``, which ``resolve`` calls to fill ``Options.variables``; code called without
    Options (a source opened by hand) falls back to ``variables()``."""

    hf_endpoint: str | None = None  # HF_ENDPOINT (None: huggingface_hub's default)
    hf_token: str | None = None  # HF_TOKEN
    hf_offline: bool = False  # HF_HUB_OFFLINE = 1/ON/YES/TRUE
    hf_cache: str | None = None  # HF_HUB_CACHE, else $HF_HOME/hub (None: huggingface_hub's default)
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S  # KERNEL_FACTORY_LOCK_WAIT: how long a run waits for a store's lock
    retry_s: float = DEFAULT_RETRY_S  # KERNEL_FACTORY_RETRY_S: the retry budget against a busy service
    stages_file: str | None = None  # KERNEL_FACTORY_STAGES: append each conversion's seconds per stage there
    source_date_epoch: str | None = None  # SOURCE_DATE_EPOCH: a local source's commit time (as given)


def hub_cache(env: Mapping[str, str]) -> Path:
    """The Hugging Face Hub cache folder as huggingface_hub expands it: HF_HUB_CACHE (HUGGINGFACE_HUB_CACHE), else
    HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. The one home of that rule: the
    factory's Hub source (``Variables.hf_cache``) and the cache kernels reads (local/cache ``cache_root``)."""
    hub = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if not hub:
        cache = env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        hub = os.path.join(env.get("HF_HOME") or os.path.join(cache, "huggingface"), "hub")
    return Path(os.path.expandvars(os.path.expanduser(hub)))


def repo_folder_name(repo_id: str, kind: str) -> str:
    """A repository's folder in the Hub cache, as huggingface_hub names it: ``<kind>s--org--name`` (``kind``
    "kernel", "model" ...)."""
    return "--".join([f"{kind}s", *repo_id.split("/")])


def variables(env: Mapping[str, str] | None = None) -> Variables:
    """The ``Variables`` of ``env`` (default: os.environ, the one place that reads it)."""
    env = os.environ if env is None else env
    try:
        retry_s = max(0.0, float(env.get("KERNEL_FACTORY_RETRY_S") or DEFAULT_RETRY_S))
    except ValueError:
        retry_s = DEFAULT_RETRY_S
    wait = env.get("KERNEL_FACTORY_LOCK_WAIT") or str(DEFAULT_LOCK_WAIT_S)
    try:
        lock_wait_s = float(wait)
    except ValueError:
        raise ConfigError(f"KERNEL_FACTORY_LOCK_WAIT={wait!r}: expected a number of seconds") from None
    return Variables(
        hf_endpoint=env.get("HF_ENDPOINT") or None,
        hf_token=env.get("HF_TOKEN") or None,
        hf_offline=env.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"},
        hf_cache=str(hub_cache(env)) if env.get("HF_HUB_CACHE") or env.get("HF_HOME") else None,
        lock_wait_s=lock_wait_s,
        retry_s=retry_s,
        stages_file=env.get("KERNEL_FACTORY_STAGES") or None,
        source_date_epoch=env.get("SOURCE_DATE_EPOCH") or None,
    )


@dataclass(frozen=True)
class Options:
    store: Location = Location.parse(DEFAULT_STORE)
    allow_orgs: tuple[str, ...] = DEFAULT_ORGS
    manylinux: str = "2_28"
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    accept_higher_policy: bool = False
    allow_no_digest: bool = False
    verify_signatures: bool = False
    index_out: str | None = None
    templates: str | None = None
    base_url: str | None = None
    scratch: str | None = None  # temp space for fetched sources (default: TMPDIR)
    simple_url: str | None = None  # publish: the upload endpoint's simple index, where not <url>/simple/
    allow_kernel_names: bool = False  # index --wheels may adopt wheels of a kernel's project
    kernels: tuple[KernelSpec, ...] = ()
    transformers: tuple[TransformersSpec, ...] = ()  # [[transformers]]: kernels from transformers' own mapping
    s3_put_args: tuple[tuple[str, str], ...] = ()  # every S3 put: ServerSideEncryption, SSEKMSKeyId, ACL, ...
    allow_s3_put_args: tuple[str, ...] = ()  # risky put args named on the command line (never from a file)
    cache_control_immutable: str = "public, max-age=31536000, immutable"  # wheels and .metadata on S3
    cache_control_pages: str = "public, max-age=300"  # pages, JSON and records on S3
    s3_directory_keys: bool = False  # S3: every .../index.html also at the key .../
    variables: Variables = Variables()  # filled by resolve from env; not an option of the table


def _check_keys(table: Mapping[str, Any], known: set[str], where: str) -> None:
    for key in table:
        if key not in known:
            import difflib

            hint = difflib.get_close_matches(key, sorted(known), n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else f"; known keys: {', '.join(sorted(known))}"
            raise ConfigError(f"{where}: unknown key {key!r}{extra}")


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return (str(value),)
    if isinstance(value, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return tuple(str(v) for v in value)
    raise ConfigError(f"{where}: expected a string or a list of strings, got {value!r}")


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "0", "false", "no"):
        return value.lower() in ("1", "true", "yes")
    raise ConfigError(f"{where}: expected true or false, got {value!r}")


def _int(value: Any, where: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a whole number, got {value!r}") from None
    if number < 1 or isinstance(value, bool):
        raise ConfigError(f"{where}: expected a number of at least 1, got {value!r}")
    return number


def _manylinux(value: Any, where: str) -> str:
    text = str(value).removeprefix("manylinux_").removeprefix("manylinux")
    parts = text.split("_")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        raise ConfigError(f"{where}: manylinux policy {value!r} is not like 2_28")
    return text


def _path(value: str, base: Path) -> str:
    """A plain relative path made absolute against ``base`` (``~`` expanded); a URL (file:// included) unchanged."""
    if "://" in value:
        return value
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())


def _looks_path(repo: str) -> bool:
    return repo.startswith(("/", ".", "~")) or repo.count("/") != 1


def _kernel(table: Mapping[str, Any], base: Path, where: str) -> KernelSpec:
    _check_keys(table, KERNEL_KEYS, where)
    repo = table.get("repo")
    if not isinstance(repo, str) or not repo:
        raise ConfigError(f"{where}: 'repo' must be a Hub id like 'kernels-community/activation' or a local path")
    globbed = any(c in repo for c in "*?[")
    if not globbed and (_looks_path(repo) or (base / repo).exists()):
        repo = _path(repo, base)
    versions = tuple(v for key in ("versions", "tags") if key in table for v in _str_list(table[key], f"{where}.{key}"))
    revision = table.get("revision")
    if not versions and revision is None:
        raise ConfigError(f"{where}: give 'versions' (e.g. [1]), 'tags' (e.g. '>=1.1.2,<2') or 'revision'")
    exclude = _str_list(table.get("exclude", []), f"{where}.exclude")
    if exclude and not globbed:
        raise ConfigError(f"{where}: 'exclude' goes with a glob repo like 'org/*'; drop it or glob 'repo'")
    if globbed and (_looks_path(repo) or any(c in repo.split("/")[0] for c in "*?[")):
        raise ConfigError(f"{where}: a glob repo names one Hub organisation and globs the names, e.g. 'org/*'")
    if globbed and (table.get("repo-id") or table.get("revision")):
        raise ConfigError(f"{where}: 'repo-id' and 'revision' name one repository; not with a glob repo")
    repo_type = table.get("repo-type")
    if repo_type not in (None, "kernel", "model"):
        raise ConfigError(f"{where}.repo-type: expected 'kernel' or 'model', got {repo_type!r}")
    return KernelSpec(
        repo=repo,
        versions=versions,
        revision=str(revision) if revision is not None else None,
        variants=_str_list(table.get("variants", []), f"{where}.variants"),
        exclude_variants=_str_list(table.get("exclude-variants", []), f"{where}.exclude-variants"),
        repo_id=table.get("repo-id"),
        repo_type=repo_type,
        allow_no_digest=_bool(table["allow-no-digest"], f"{where}.allow-no-digest")
        if "allow-no-digest" in table
        else None,
        exclude=exclude,
    )


def _transformers(table: Mapping[str, Any], base: Path, where: str) -> TransformersSpec:
    _check_keys(table, TRANSFORMERS_KEYS, where)
    python = table.get("python")
    if not isinstance(python, str) or not python.strip():
        raise ConfigError(f"{where}: 'python' must name the interpreter (or venv folder) whose transformers to read, "
                          "e.g. python = \"/opt/inference/.venv\"")
    if "/" in python or python.startswith((".", "~")):
        python = str((base / Path(python).expanduser()).absolute())
    modes = _str_list(table.get("modes", []), f"{where}.modes")
    for mode in modes:
        if mode not in TRANSFORMERS_MODES:
            import difflib

            hint = difflib.get_close_matches(mode, TRANSFORMERS_MODES, n=1)
            raise ConfigError(f"{where}.modes: unknown mode {mode!r}{f'; did you mean {hint[0]!r}?' if hint else ''}"
                              f" (modes: {', '.join(TRANSFORMERS_MODES)})")
    return TransformersSpec(
        python=python,
        devices=_str_list(table.get("devices", []), f"{where}.devices"),
        modes=modes,
        variants=_str_list(table.get("variants", []), f"{where}.variants"),
        exclude_variants=_str_list(table.get("exclude-variants", []), f"{where}.exclude-variants"),
    )


def read_file(path: Path) -> dict[str, Any]:
    """The kernel-factory tables of a factory.toml or pyproject.toml: [factory], [[kernel]], [[transformers]] and
    [prune] (the first three checked to be a table or lists of them)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found; create it or pass --config FILE") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file") from None
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("kernel-factory", {})
    _check_keys(data, {"factory", "kernel", "prune", "transformers"}, str(path))
    if not isinstance(data.get("factory", {}), dict) or not all(
            isinstance(data.get(key, []), list) for key in ("kernel", "transformers")):
        raise ConfigError(f"{path}: expected a [factory] table, [[kernel]] tables and [[transformers]] tables")
    return data


PRUNE_KEYS = {"keep-per-major", "keep-since", "keep-locked"}  # the [prune] table's keys (docs/withdraw.md)


def read_prune(flags: Flags) -> tuple[dict[str, Any], Path | None]:
    """The config file's ``[prune]`` table (empty without one) and the folder its relative paths start in; an
    unknown key fails with a hint."""
    path = find_config(flags)
    if path is None:
        return {}, None
    table = read_file(path).get("prune", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: expected a [prune] table")
    _check_keys(table, PRUNE_KEYS, f"{path} [prune]")
    return table, path.resolve().parent


def _cache_control(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\r\n"):
        raise ConfigError(f"{where}: expected a Cache-Control value like 'public, max-age=300', got {value!r}")
    return value.strip()


def _put_args(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``{ServerSideEncryption = "aws:kms", ...}`` or ``["Key=Value", ...]`` -> sorted (key, value) pairs."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        pairs = [v.partition("=") for v in value]
        if any(not sep or not k for k, sep, _ in pairs):
            raise ConfigError(f"{where}: expected KEY=VALUE, e.g. ServerSideEncryption=aws:kms, got {value!r}")
        value = {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where}: expected a table of strings, e.g. {{ ServerSideEncryption = \"aws:kms\" }}")
    return tuple(sorted(value.items()))


def _folder(value: Any, where: str, base: Path) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a folder or s3:// URL, got {value!r}")
    return _path(value, base)


def _split_orgs(values: Iterable[str]) -> list[str]:
    return [o for v in values for o in v.split(",") if o]


def given_orgs(env: Mapping[str, str] | None = None, flags: Iterable[str] = ()) -> list[str]:
    """The organisations given by ``ALLOW_ORGS_ENV`` in ``env`` (default: os.environ), then by the ``--allow-org``
    values ``flags`` (each may hold several, comma-separated), once each in that order; empty: neither gave one.
    For the commands that take --allow-org outside OPTIONS (local-kernels, download, serve --hub)."""
    env = os.environ if env is None else env
    return list(dict.fromkeys(_split_orgs([env.get(ALLOW_ORGS_ENV, ""), *flags])))


def allowed_orgs(flags: Iterable[str]) -> tuple[str, ...]:
    """DEFAULT_ORGS and then given_orgs(flags=flags), once each: what local-kernels and serve --hub allow."""
    return tuple(dict.fromkeys([*DEFAULT_ORGS, *given_orgs(flags=flags)]))


def _simple_url(value: Any, where: str, base: Path) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: expected the endpoint's simple index URL (http(s)://...), got {value!r}")
    return value


Parse = Callable[[Any, str, Path], Any]  # (value, where it came from, the folder relative paths start in)


@dataclass(frozen=True)
class Option:
    """One option, declared once: its Options field, [factory] key, environment variable, flag and help.

    ``commands`` are the subcommands that take the flag; a boolean option's flag comes with a ``--no-`` form.
    ``merge`` combines a flag's value with the value from the config file (default: the flag replaces it).
    """

    name: str
    parse: Parse
    help: str
    flag: str | None = None
    commands: tuple[str, ...] = ()
    env: str | None = None
    metavar: str | None = None
    boolean: bool = False
    repeat: bool = False  # the flag may be given more than once; its values are parsed as one list
    merge: Callable[[Any, Any], Any] | None = None
    config_key: bool = True  # also a [factory] key (``name`` with dashes)

    @property
    def key(self) -> str:
        return self.name.replace("_", "-")


_BUILD = ("to-wheel", "plan", "build")
_S3 = ("build", "publish", "index")  # index, yank, unyank, status and prune put to an s3:// store too

OPTIONS: tuple[Option, ...] = (
    Option("store", lambda v, w, b: Location.parse(_folder(v, w, b)),
           "store folder or s3://bucket/prefix (overrides the config; default ./public)", "--store",
           ("plan", "build", "index", "publish"), env="KERNEL_FACTORY_STORE", metavar="DIR"),
    Option("allow_orgs", lambda v, w, b: tuple(_split_orgs(_str_list(v, w))),
           "also allow this organisation (repeatable)", "--allow-org", _BUILD, env=ALLOW_ORGS_ENV, metavar="ORG",
           repeat=True, merge=lambda old, new: tuple(dict.fromkeys((*old, *new)))),
    Option("manylinux", lambda v, w, b: _manylinux(v, w), "target manylinux policy, e.g. 2_28 (default)",
           "--manylinux", _BUILD, env="KERNEL_FACTORY_MANYLINUX", metavar="X_Y"),
    Option("jobs", lambda v, w, b: _int(v, w), "parallel processes (default: number of cores)", "--jobs", _BUILD,
           env="KERNEL_FACTORY_JOBS", metavar="N"),
    Option("accept_higher_policy", lambda v, w, b: _bool(v, w),
           "publish binaries that need a newer glibc under the policy they really meet", "--accept-higher-policy",
           _BUILD, boolean=True),
    Option("allow_no_digest", lambda v, w, b: _bool(v, w), "build variants whose metadata.json has no digest",
           "--allow-no-digest", ("to-wheel", "build"), boolean=True),
    Option("verify_signatures", lambda v, w, b: _bool(v, w),
           "require a valid metadata.json.sigstore bundle (sigstore, through the kernels package)",
           "--verify-signatures", ("build",), boolean=True),
    Option("scratch", _folder, "temporary space for fetched variants (default: TMPDIR); wheels are written in the "
           "store", "--scratch", ("to-wheel", "build"), env="KERNEL_FACTORY_SCRATCH", metavar="DIR"),
    Option("index_out", _folder, "index root (default: the store folder)", "--out", ("index",), metavar="DIR"),
    Option("templates", _folder, "templates overriding the shipped ones", "--templates", ("index",), metavar="DIR"),
    Option("base_url", lambda v, w, b: str(v).rstrip("/"),
           "where the index will be served, for the landing page's pip commands", "--base-url", ("index",),
           metavar="URL"),
    Option("allow_kernel_names", lambda v, w, b: _bool(v, w),
           "let --wheels adopt wheels whose project is a kernel the store holds", "--allow-kernel-names",
           ("index",), boolean=True),
    Option("simple_url", _simple_url, "the upload endpoint's simple index, where not detected (devpi: "
           "<index>/+simple/)", "--simple-url", ("publish",), metavar="URL"),
    Option("s3_put_args", lambda v, w, b: _put_args(v, w),
           "S3: pass to every put, e.g. ServerSideEncryption=aws:kms (repeatable)", "--s3-put-arg", _S3,
           metavar="KEY=VALUE", repeat=True, merge=lambda old, new: tuple(sorted({**dict(old), **dict(new)}.items()))),
    Option("cache_control_immutable", lambda v, w, b: _cache_control(v, w),
           "S3: Cache-Control of wheels and .metadata (default 'public, max-age=31536000, immutable')",
           "--cache-control-immutable", _S3, metavar="VALUE"),
    Option("cache_control_pages", lambda v, w, b: _cache_control(v, w),
           "S3: Cache-Control of pages, JSON and records (default 'public, max-age=300')", "--cache-control-pages",
           _S3, metavar="VALUE"),
    Option("s3_directory_keys", lambda v, w, b: _bool(v, w),
           "S3: also put each .../index.html at the key .../ (a CDN without index documents)", "--s3-directory-keys",
           _S3, boolean=True),
    Option("allow_s3_put_args", lambda v, w, b: tuple(sorted(set(_str_list(v, w)))),
           "S3: apply a risky put arg anyway (ACL granting public write, WebsiteRedirectLocation, object lock; "
           "repeatable; flag only)", "--allow-s3-put-arg", _S3, metavar="KEY", repeat=True, config_key=False),
)
BY_NAME = {o.name: o for o in OPTIONS}
FACTORY_KEYS = {o.key for o in OPTIONS if o.config_key}
ENV = {o.env: o for o in OPTIONS if o.env}  # environment variable -> its option


def apply_table(opts: Options, table: Mapping[str, Any], base: Path, where: str) -> Options:
    """A [factory] table (or the environment's values, keyed alike) over ``opts``: each value replaces."""
    _check_keys(table, FACTORY_KEYS, where)
    by_key = {o.key: o for o in OPTIONS}
    return replace(opts, **{by_key[k].name: by_key[k].parse(v, f"{where}.{k}", base) for k, v in table.items()})


def find_config(flags: Flags) -> Path | None:
    """``--config``, else ./factory.toml if there (and the command reads one by default), else none."""
    if flags.config:
        return Path(flags.config)
    if flags.default_config and Path(DEFAULT_CONFIG).is_file():
        return Path(DEFAULT_CONFIG)
    return None


def resolve(flags: Flags, env: Mapping[str, str] | None = None) -> Options:
    """The one place where defaults, the config file, the environment and the flags meet, in that order."""
    env = os.environ if env is None else env
    opts = Options()
    path = find_config(flags)
    if path is not None:
        data = read_file(path)
        base = path.resolve().parent
        opts = apply_table(opts, data.get("factory", {}), base, f"{path} [factory]")
        specs = tuple(_kernel(k, base, f"{path} [[kernel]] #{i + 1}") for i, k in enumerate(data.get("kernel", [])))
        mapped = tuple(_transformers(t, base, f"{path} [[transformers]] #{i + 1}")
                       for i, t in enumerate(data.get("transformers", [])))
        opts = replace(opts, kernels=specs, transformers=mapped)
    opts = apply_table(opts, {o.key: env[var] for var, o in ENV.items() if env.get(var)}, Path.cwd(), "environment")
    changes: dict[str, Any] = {}
    for name, raw in flags.given.items():  # a flag replaces the value, or merges with it where its option says so
        if raw is None or raw == () or raw == []:
            continue
        option = BY_NAME[name]
        value = option.parse(list(raw) if option.repeat else raw, option.flag or name, Path.cwd())
        changes[name] = option.merge(getattr(opts, name), value) if option.merge else value
    return replace(opts, **changes, variables=variables(env))
