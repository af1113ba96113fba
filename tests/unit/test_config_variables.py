"""The environment is read once, by config.variables (config.resolve fills Options.variables), and the code
underneath takes its values from there, never from os.environ (no network, no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_factory import config
from kernel_factory.errors import ConfigError
from kernel_factory.sources import open_source
from kernel_factory.sources.hub import HubSource
from kernel_factory.store import open_store

ENV = {
    "HF_ENDPOINT": "http://127.0.0.1:1234",
    "HF_TOKEN": "hf_given",
    "HF_HUB_OFFLINE": "yes",
    "HF_HOME": "/hf-home",
    "KERNEL_FACTORY_LOCK_WAIT": "2.5",
    "KERNEL_FACTORY_RETRY_S": "-3",
    "KERNEL_FACTORY_STAGES": "/tmp/stages.jsonl",
    "SOURCE_DATE_EPOCH": "1700000000",
}


@pytest.fixture
def other_process_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What os.environ says differs from what is passed down: the code must use the latter."""
    for name, value in {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_TOKEN": "hf_process", "HF_HUB_CACHE": "/elsewhere",
                        "KERNEL_FACTORY_LOCK_WAIT": "99", "SOURCE_DATE_EPOCH": "5"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def test_resolve_reads_the_environment_it_is_given(other_process_env: None) -> None:
    env = config.resolve(config.Flags(default_config=False), env=ENV).variables
    assert env == config.Variables(hf_endpoint="http://127.0.0.1:1234", hf_token="hf_given", hf_offline=True,
                                   hf_cache="/hf-home/hub", lock_wait_s=2.5, retry_s=0.0,
                                   stages_file="/tmp/stages.jsonl", source_date_epoch="1700000000")
    assert config.variables({}) == config.Variables()  # nothing set: the defaults (600 s lock, 60 s retry)
    assert config.variables({"HF_HUB_CACHE": "/c", "HF_HOME": "/h"}).hf_cache == "/c"


def test_a_bad_lock_wait_is_one_config_error() -> None:
    with pytest.raises(ConfigError, match="KERNEL_FACTORY_LOCK_WAIT='soon': expected a number of seconds"):
        config.variables({"KERNEL_FACTORY_LOCK_WAIT": "soon"})


def test_hub_source_takes_its_values_from_its_caller(other_process_env: None) -> None:
    env = config.variables(ENV)
    src = open_source("kernels-community/relu", env=env)
    assert isinstance(src, HubSource)
    assert (src.endpoint, src.token, src.offline, src.cache_dir) == ("http://127.0.0.1:1234", "hf_given", True,
                                                                      "/hf-home/hub")


def test_the_store_takes_its_lock_wait_from_its_caller(tmp_path: Path, other_process_env: None) -> None:
    """(A local source takes SOURCE_DATE_EPOCH alike, from open_source(env=); opening one runs git: no unit test.)"""
    opts = config.resolve(config.Flags(default_config=False), env=ENV)
    store = open_store(tmp_path / "store", opts)
    assert store.lock_wait_s == 2.5  # type: ignore[attr-defined]
