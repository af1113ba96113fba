import dataclasses
from pathlib import Path

import pytest
from kernel_factory import cli, config
from kernel_factory.cli import options as cli_options
from kernel_factory.errors import EXIT_USAGE, ConfigError


def write(tmp_path: Path, text: str, name: str = "factory.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_defaults_file_env_cli_order(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
[factory]
store = "out"
manylinux = "2_34"
jobs = 3
allow-orgs = ["acme"]

[[kernel]]
repo = "kernels-community/activation"
versions = [1]
tags = ">=1.1.2,<2"
variants = ["torch2*-cu12*-x86_64-linux"]
""",
    )
    opts = config.resolve(config.Flags(config=str(p)), env={})
    assert opts.store.local == tmp_path / "out"  # relative to the config file's folder
    assert (opts.manylinux, opts.jobs, opts.allow_orgs) == ("2_34", 3, ("acme",))
    (k,) = opts.kernels
    assert k.repo == "kernels-community/activation"
    assert k.versions == ("1", ">=1.1.2,<2")
    env = {"KERNEL_FACTORY_JOBS": "5", "KERNEL_FACTORY_MANYLINUX": "2_17"}
    opts = config.resolve(config.Flags(config=str(p)), env=env)
    assert (opts.jobs, opts.manylinux) == (5, "2_17")
    opts = config.resolve(
        config.Flags(config=str(p), given={"jobs": "1", "manylinux": "2_28", "allow_orgs": ["other"]}),
        env={"KERNEL_FACTORY_JOBS": "5"},
    )
    assert (opts.jobs, opts.manylinux, opts.allow_orgs) == (1, "2_28", ("acme", "other"))


def test_pyproject_table(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
[project]
name = "x"
[tool.kernel-factory.factory]
store = "s3://bucket/prefix"
[[tool.kernel-factory.kernel]]
repo = "./kernels/relu"
versions = [2]
""",
        "pyproject.toml",
    )
    opts = config.resolve(config.Flags(config=str(p)), env={})
    assert (opts.store.local, opts.store.display, opts.store.scheme) == (None, "s3://bucket/prefix", "s3")
    assert opts.kernels[0].repo == str(tmp_path / "kernels" / "relu")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[factory]\nstroe = 'x'\n", "unknown key 'stroe'; did you mean 'store'?"),
        ("[[kernel]]\nrepo = 'a/b'\nversion = [1]\n", "did you mean 'versions'?"),
        ("[[kernel]]\nrepo = 'a/b'\n", "give 'versions'"),
        ("[factory]\njobs = 'many'\n", "expected a whole number"),
        ("[factory]\nmanylinux = 'new'\n", "is not like 2_28"),
        ("[factory\n", "not valid TOML"),
        ("[factori]\n", "did you mean 'factory'?"),
    ],
)
def test_bad_config_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        config.resolve(config.Flags(config=str(p)), env={})
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == EXIT_USAGE


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        config.resolve(config.Flags(config=str(tmp_path / "nope.toml")), env={})


def test_s3_keys_file_then_flags(tmp_path: Path) -> None:
    p = write(tmp_path, """
[factory]
s3-put-args = { ServerSideEncryption = "aws:kms", StorageClass = "STANDARD_IA" }
cache-control-pages = "public, max-age=60"
s3-directory-keys = true
""")
    opts = config.resolve(config.Flags(config=str(p), given={"s3_put_args": ["StorageClass=GLACIER_IR", "ACL=private"],
                                                     "cache_control_immutable": "max-age=99"}), env={})
    assert opts.s3_put_args == (("ACL", "private"), ("ServerSideEncryption", "aws:kms"), ("StorageClass", "GLACIER_IR"))
    assert (opts.cache_control_pages, opts.cache_control_immutable) == ("public, max-age=60", "max-age=99")
    assert opts.s3_directory_keys is True
    assert config.Options().cache_control_immutable == "public, max-age=31536000, immutable"
    for bad in ('s3-put-args = "x"', 's3-put-args = { ACL = 1 }', 'cache-control-pages = ""'):
        with pytest.raises(ConfigError):
            config.resolve(config.Flags(config=str(write(tmp_path, f"[factory]\n{bad}\n"))), env={})
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        config.resolve(config.Flags(given={"s3_put_args": ["ACL"]}), env={})


def test_org_glob_with_exclude(tmp_path: Path) -> None:
    p = write(tmp_path, '[[kernel]]\nrepo = "kernels-community/*"\nexclude = ["*-test"]\nversions = [1]\n')
    spec = config.resolve(config.Flags(config=str(p)), env={}).kernels[0]
    assert (spec.repo, spec.exclude) == ("kernels-community/*", ("*-test",))
    for bad in ('repo = "kernels-community/relu"\nexclude = ["x"]', 'repo = "*/relu"', 'repo = "./local/*"',
                'repo = "kernels-community/*"\nrevision = "main"'):
        with pytest.raises(ConfigError):
            config.resolve(config.Flags(config=str(write(tmp_path, f"[[kernel]]\n{bad}\nversions = [1]\n"))), env={})


def test_to_wheel_reads_no_config_it_was_not_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """to-wheel has no --config: a ./factory.toml beside it is not read (plan, which has --config, reads it)."""
    from kernel_factory.cli import main

    monkeypatch.chdir(tmp_path)
    write(tmp_path, "[factory\n")  # not valid TOML: reading it fails
    assert config.resolve(config.Flags(default_config=False), env={}) == config.Options()
    assert main(["to-wheel", "./nope", "1"]) == EXIT_USAGE
    err = capsys.readouterr().err
    hint = "give a kernel repository folder or a Hub id like org/name"
    assert err == f"error: {tmp_path / 'nope'}: not a folder; {hint}\n"
    assert main(["plan"]) == EXIT_USAGE
    assert "factory.toml: not valid TOML" in capsys.readouterr().err


def test_flags_override_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = write(tmp_path, '[factory]\nstore = "s3://b/p"\nscratch = "tmp"\n')
    opts = config.resolve(config.Flags(config=str(p)), env={"KERNEL_FACTORY_STORE": "file:///srv/store"})
    assert (opts.store.local, opts.store.display, opts.scratch) == (Path("/srv/store"), "file:///srv/store",
                                                                     str(tmp_path / "tmp"))
    opts = config.resolve(config.Flags(config=str(p), given={"store": "rel", "scratch": "s"}), env={})
    assert (opts.store.local, opts.scratch) == (tmp_path / "rel", str(tmp_path / "s"))


def test_every_option_is_declared_once_in_the_table() -> None:
    fields = {f.name for f in dataclasses.fields(config.Options)} - {"kernels", "transformers", "variables"}
    names = [o.name for o in config.OPTIONS]
    assert sorted(names) == sorted(fields)  # each Options field has one entry, and no entry is twice
    flags = [o.flag for o in config.OPTIONS if o.flag]
    assert len(flags) == len(set(flags))


def test_a_no_flag_switches_off_what_the_config_switched_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = write(tmp_path, "[factory]\naccept-higher-policy = true\nallow-no-digest = true\n")
    ns = cli.parser().parse_args(["build", "--config", str(p), "--no-accept-higher-policy"])
    opts = config.resolve(cli_options.flags_of(ns, "build"), env={})
    assert (opts.accept_higher_policy, opts.allow_no_digest) == (False, True)
    ns = cli.parser().parse_args(["build", "--config", str(p)])
    assert config.resolve(cli_options.flags_of(ns, "build"), env={}).accept_higher_policy is True


def test_flags_come_from_the_table_for_each_command() -> None:
    ns = cli.parser().parse_args(["index", "--out", "o", "--templates", "t", "--base-url", "https://h/",
                                  "--allow-kernel-names"])
    flags = cli_options.flags_of(ns, "index")
    assert flags.given == {"index_out": "o", "templates": "t", "base_url": "https://h/", "allow_kernel_names": True}
    ns = cli.parser().parse_args(["publish", "--to", "d", "--s3-put-arg", "A=1", "--s3-put-arg", "B=2"])
    assert cli_options.flags_of(ns, "publish").given == {"s3_put_args": ["A=1", "B=2"]}
    assert cli.main(["index", "--jobs", "2"]) == 2  # index takes no --jobs


def test_a_bad_flag_value_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--jobs: expected a whole number"):
        config.resolve(config.Flags(default_config=False, given={"jobs": "many"}), env={})


def test_given_orgs_one_reader_of_the_variable() -> None:
    """KERNEL_FACTORY_ALLOW_ORGS is read in config alone: the variable's organisations, then the flags', once each."""
    env = {config.ALLOW_ORGS_ENV: "acme,,beta"}
    assert config.ALLOW_ORGS_ENV == "KERNEL_FACTORY_ALLOW_ORGS" == config.BY_NAME["allow_orgs"].env
    assert config.given_orgs(env) == ["acme", "beta"]
    assert config.given_orgs(env, ["beta,gamma", "acme"]) == ["acme", "beta", "gamma"]
    assert config.given_orgs({}, []) == []
    assert config.given_orgs({}, ["x"]) == ["x"]


def test_the_hub_cache_and_its_repository_folders_are_named_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """config.hub_cache: huggingface_hub's rule, expanded; Variables.hf_cache takes it where HF_HUB_CACHE or
    HF_HOME is given (None: huggingface_hub's own default); repo_folder_name as huggingface_hub names them."""
    monkeypatch.setenv("HOME", "/home/u")
    assert config.hub_cache({"HF_HUB_CACHE": "~/h", "HF_HOME": "/x"}) == Path("/home/u/h")
    assert config.hub_cache({"HUGGINGFACE_HUB_CACHE": "/legacy"}) == Path("/legacy")
    assert config.hub_cache({"HF_HOME": "/hf"}) == Path("/hf/hub")
    assert config.hub_cache({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert config.hub_cache({}) == Path("/home/u/.cache/huggingface/hub")
    assert config.variables({"HF_HOME": "/hf"}).hf_cache == "/hf/hub"
    assert config.variables({"HF_HUB_CACHE": "/h"}).hf_cache == "/h"
    assert config.variables({"XDG_CACHE_HOME": "/x"}).hf_cache is None
    assert config.repo_folder_name("org/act", "kernel") == "kernels--org--act"
    assert config.repo_folder_name("org/act", "model") == "models--org--act"
