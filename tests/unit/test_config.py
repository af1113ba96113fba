import argparse
from pathlib import Path

import pytest
from kernel_factory import config
from kernel_factory.errors import EXIT_USAGE, ConfigError


def ns(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "config": None,
        "store": None,
        "jobs": None,
        "manylinux": None,
        "accept_higher_policy": None,
        "allow_no_digest": None,
        "allow_org": None,
    }
    base.update(kw)
    return argparse.Namespace(**base)


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
    opts = config.load(ns(config=str(p)), env={})
    assert opts.store == str(tmp_path / "out")  # relative to the config file's folder
    assert (opts.manylinux, opts.jobs, opts.allow_orgs) == ("2_34", 3, ("acme",))
    (k,) = opts.kernels
    assert k.repo == "kernels-community/activation"
    assert k.versions == ("1", ">=1.1.2,<2")
    opts = config.load(ns(config=str(p)), env={"KERNEL_FACTORY_JOBS": "5", "KERNEL_FACTORY_MANYLINUX": "2_17"})
    assert (opts.jobs, opts.manylinux) == (5, "2_17")
    opts = config.load(
        ns(config=str(p), jobs=1, manylinux="2_28", allow_org=["other"]), env={"KERNEL_FACTORY_JOBS": "5"}
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
    opts = config.load(ns(config=str(p)), env={})
    assert opts.store == "s3://bucket/prefix"
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
        config.load(ns(config=str(p)), env={})
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == EXIT_USAGE


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        config.load(ns(config=str(tmp_path / "nope.toml")), env={})


def test_s3_keys_file_then_flags(tmp_path: Path) -> None:
    p = write(tmp_path, """
[factory]
s3-put-args = { ServerSideEncryption = "aws:kms", StorageClass = "STANDARD_IA" }
cache-control-pages = "public, max-age=60"
s3-directory-keys = true
""")
    opts = config.load(ns(config=str(p), s3_put_arg=["StorageClass=GLACIER_IR", "ACL=private"],
                          cache_control_immutable="max-age=99"), env={})
    assert opts.s3_put_args == (("ACL", "private"), ("ServerSideEncryption", "aws:kms"), ("StorageClass", "GLACIER_IR"))
    assert (opts.cache_control_pages, opts.cache_control_immutable) == ("public, max-age=60", "max-age=99")
    assert opts.s3_directory_keys is True
    assert config.Options().cache_control_immutable == "public, max-age=31536000, immutable"
    for bad in ('s3-put-args = "x"', 's3-put-args = { ACL = 1 }', 'cache-control-pages = ""'):
        with pytest.raises(ConfigError):
            config.load(ns(config=str(write(tmp_path, f"[factory]\n{bad}\n"))), env={})
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        config.load(ns(s3_put_arg=["ACL"]), env={})


def test_org_glob_with_exclude(tmp_path: Path) -> None:
    p = write(tmp_path, '[[kernel]]\nrepo = "kernels-community/*"\nexclude = ["*-test"]\nversions = [1]\n')
    spec = config.load(ns(config=str(p)), env={}).kernels[0]
    assert (spec.repo, spec.exclude) == ("kernels-community/*", ("*-test",))
    for bad in ('repo = "kernels-community/relu"\nexclude = ["x"]', 'repo = "*/relu"', 'repo = "./local/*"',
                'repo = "kernels-community/*"\nrevision = "main"'):
        with pytest.raises(ConfigError):
            config.load(ns(config=str(write(tmp_path, f"[[kernel]]\n{bad}\nversions = [1]\n"))), env={})
