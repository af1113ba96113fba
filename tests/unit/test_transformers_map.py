"""[[transformers]]: the config table, and transformers' mapping (as the probe prints it) -> kernel specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernel_factory.config import Flags, KernelSpec, TransformersSpec, resolve
from kernel_factory.errors import EXIT_USAGE, ConfigError, UsageError
from kernel_factory.sources.transformers_map import MARK, KernelMapping, chosen, parse, specs

ENTRIES = [
    {"layer": "RMSNorm", "device": "cuda", "modes": ["training"], "repo_id": "kernels-community/liger-kernels",
     "version": 3, "revision": None},
    {"layer": "RMSNorm", "device": "cuda", "modes": ["inference"], "repo_id": "kernels-community/liger-kernels",
     "version": 3, "revision": None},
    {"layer": "SiLU", "device": "cuda", "modes": ["inference", "torch_compile"],
     "repo_id": "kernels-community/activation", "version": 1, "revision": None},
    {"layer": "Detr", "device": "cuda", "modes": ["fallback"], "repo_id": "kernels-community/deformable-detr",
     "version": 1, "revision": None},
    {"layer": "Gdn", "device": "cuda", "modes": ["fallback"], "repo_id": "Atlas-Inference/gdn", "version": None,
     "revision": "531ae679ab5c13a3bf49607e1b6e6459300772e9"},
    {"layer": "MegaBlocksMoeMLP", "device": "cpu", "modes": ["inference"], "repo_id": "kernels-community/megablocks",
     "version": 1, "revision": None},
    {"layer": "Local", "device": "cuda", "modes": ["inference"], "repo_id": None, "version": None, "revision": None},
]


def probe_output(**out: object) -> str:
    return "some warning transformers printed\n" + MARK + json.dumps(out) + "\n"


def mapping() -> KernelMapping:
    return parse(probe_output(transformers="5.22.2", kernels="0.17.2", entries=ENTRIES), "/venv")


def test_cuda_inference_gives_one_spec_per_repository_and_version() -> None:
    made, skipped = specs(TransformersSpec("/venv", ("cuda",), ("inference",), ("*-x86_64-linux",)), mapping())
    assert made == [
        KernelSpec(repo="kernels-community/liger-kernels", versions=("3",), variants=("*-x86_64-linux",)),
        KernelSpec(repo="kernels-community/activation", versions=("1",), variants=("*-x86_64-linux",)),
        KernelSpec(repo="kernels-community/deformable-detr", versions=("1",), variants=("*-x86_64-linux",)),
        KernelSpec(repo="Atlas-Inference/gdn", sha="531ae679ab5c13a3bf49607e1b6e6459300772e9",
                   variants=("*-x86_64-linux",)),
    ]
    assert skipped == ["Local (cuda): a local repository, nothing to mirror"]


def test_devices_and_modes_choose_entries() -> None:
    m = mapping()
    assert [e.layer for e in chosen(m.entries, ("cpu",), ())] == ["MegaBlocksMoeMLP"]
    assert [e.layer for e in chosen(m.entries, ("cuda",), ("training",))] == ["RMSNorm", "Detr", "Gdn"]
    assert len(chosen(m.entries, (), ())) == len(ENTRIES)
    with pytest.raises(UsageError) as info:
        specs(TransformersSpec("/venv", ("cpu",), ("training",)), m)
    assert str(info.value) == (
        "transformers 5.22.2 at /venv maps no kernel for devices ['cpu'] and modes ['training']; its mapping has "
        "devices: cpu, cuda; fix 'devices' or 'modes' in [[transformers]]")


def test_what_is_missing_is_one_line() -> None:
    with pytest.raises(UsageError) as info:
        parse(probe_output(transformers="5.19.0", kernels=None, error="no-function", detail=""), "/venv")
    assert info.value.exit_code == EXIT_USAGE and "\n" not in str(info.value)
    assert str(info.value).startswith("transformers 5.19.0 at /venv has no kernel mapping (transformers.integrations."
                                      "hub_kernels.get_kernel_mapping_transformers; kernels not installed)")
    with pytest.raises(UsageError, match="printed no kernel mapping"):
        parse("Python 2.7\n", "/usr/bin/python2")


def test_config_table(tmp_path: Path) -> None:
    (tmp_path / "factory.toml").write_text(
        '[[transformers]]\npython = ".venv"\ndevices = ["cuda"]\nmodes = ["inference", "fallback"]\n'
        'exclude-variants = ["*-aarch64-*"]\n')
    opts = resolve(Flags(config=str(tmp_path / "factory.toml")), env={})
    assert opts.transformers == (TransformersSpec(str(tmp_path / ".venv"), ("cuda",), ("inference", "fallback"),
                                                  (), ("*-aarch64-*",)),)
    assert opts.kernels == ()
    (tmp_path / "factory.toml").write_text('[[transformers]]\npython = "python3"\nmodes = ["inferance"]\n')
    with pytest.raises(ConfigError) as info:
        resolve(Flags(config=str(tmp_path / "factory.toml")), env={})
    assert str(info.value).endswith("[[transformers]] #1.modes: unknown mode 'inferance'; did you mean 'inference'? "
                                    "(modes: inference, training, torch_compile, fallback)")
    (tmp_path / "factory.toml").write_text('[[transformers]]\npyhton = "python3"\n')
    with pytest.raises(ConfigError, match="did you mean 'python'"):
        resolve(Flags(config=str(tmp_path / "factory.toml")), env={})
