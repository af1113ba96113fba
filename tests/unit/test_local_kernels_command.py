"""local-kernels on fake site-packages folders: no network, no processes, no torch import."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from kernel_factory import cli
from kernel_factory.errors import EXIT_OK, EXIT_REFUSED
from kernel_factory.local.local_kernels.checks import check_kernel
from kernel_factory.local.local_kernels.command import local_kernels_value, report, shell_line, usable
from kernel_factory.local.local_kernels.installed import InstalledKernel, find_kernels
from kernel_factory.local.probe.environment import Environment, label_or_none

try:  # the installed kernels' own parser is the oracle: kernels.load (0.17) moved under kernels._internals (0.18+)
    from kernels._internals.load import _parse_local_kernel_overrides
except ImportError:  # pragma: no cover - kernels 0.17
    from kernels.load import _parse_local_kernel_overrides

CPU213 = Environment(os="linux", arch="x86_64", torch="2.13.0+cpu", cxx11_abi=True)


def metadata(name: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": name,
        "id": f"_{name}_0123abc",
        "version": 1,
        "license": "apache-2.0",
        "python-depends": [],
        "backend": {"type": "cpu"},
    }
    return base | extra


def install(
    site: Path,
    dist: str,
    version: str,
    *,
    repo_id: str | None = None,
    variant: str = "torch213-cxx11-cpu-x86_64-linux",
    package: str | None = None,
    meta: dict[str, Any] | None = None,
    requires: tuple[str, ...] = ("torch>=2.13,<2.14",),
    provenance: bool = True,
    init: bool = True,
) -> Path:
    """Lay out what pip leaves behind for one kernel wheel; returns the package folder."""
    pkg = package or dist.replace("-", "_")
    folder = site / pkg
    folder.mkdir(parents=True)
    if init:
        (folder / "__init__.py").write_text("")
    if meta is not None:
        (folder / "metadata.json").write_text(json.dumps(meta))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    lines = ["Metadata-Version: 2.1", f"Name: {dist}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    files = [f"{pkg}/__init__.py", f"{pkg}/metadata.json", f"{info.name}/METADATA"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    if provenance:
        prov = {
            "repo_id": repo_id,
            "revision": "0" * 40,
            "ref": "v1",
            "variant": variant,
            "digest": "sha256:00",
            "factory_version": "0.1.0",
            "package": pkg,
            "name": meta["name"] if meta else dist,
            "kernel_version": version.split("+")[0],
        }
        (info / "kernel_factory.json").write_text(json.dumps(prov, sort_keys=True))
    return folder


def plain_dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    d = tmp_path / "site-packages"
    d.mkdir()
    plain_dist(d, "torch", "2.13.0+cpu")
    plain_dist(d, "requests", "2.32.0")
    return d


def test_value_maps_repo_id_to_installed_folder(site: Path) -> None:
    folder = install(
        site, "img2grey", "1.1.2+torch213cpucxx11", repo_id="kernels-community/img2grey", meta=metadata("img2grey")
    )
    kernels = find_kernels([str(site)])
    assert [k.key for k in kernels] == ["kernels-community/img2grey"]
    value = local_kernels_value(usable(kernels)[0])
    assert value == f"kernels-community/img2grey={folder}"
    # The kernels library parses it back to the same mapping.
    assert _parse_local_kernel_overrides(value) == {"kernels-community/img2grey": folder}


def test_no_repo_id_uses_the_kernel_name_and_two_kernels_join_sorted(site: Path) -> None:
    a = install(site, "relu-nested", "1.0.2+torch213cpucxx11", meta=metadata("relu-nested"), package="relu")
    b = install(site, "img2grey", "1.1.2+torch213cpucxx11", repo_id="example/img2grey", meta=metadata("img2grey"))
    value = local_kernels_value(usable(find_kernels([str(site)]))[0])
    assert value == f"example/img2grey={b}:relu-nested={a}"
    assert _parse_local_kernel_overrides(value) == {"example/img2grey": b, "relu-nested": a}


def test_distributions_without_provenance_are_not_kernels(site: Path) -> None:
    install(site, "other", "1.0", meta=metadata("other"), provenance=False)
    assert find_kernels([str(site)]) == []
    out, err, code = report([], shell=True, check=False)
    assert (out, code) == (["unset LOCAL_KERNELS"], EXIT_OK)
    assert "no kernel wheels are installed" in err[0]
    # --check with nothing installed needs no environment (no torch import) and succeeds.
    assert report([], shell=False, check=True) == ([], err, EXIT_OK)


def test_shell_line_quotes_for_eval() -> None:
    value = "org/k=/tmp/it's here/k"
    line = shell_line(value)
    assert line.startswith("export LOCAL_KERNELS=")
    assert shlex.split(line.removeprefix("export ")) == [f"LOCAL_KERNELS={value}"]
    assert shell_line("") == "unset LOCAL_KERNELS"


def test_missing_metadata_json_is_left_out_with_exit_3(site: Path) -> None:
    install(site, "img2grey", "1.1.2+torch213cpucxx11", repo_id="org/img2grey", meta=None)
    install(
        site,
        "pyonly",
        "1.0.0",
        repo_id="org/pyonly",
        meta=metadata("pyonly"),
        variant="torch-universal",
        requires=("torch",),
    )
    kernels = find_kernels([str(site)])
    out, err, code = report(kernels, shell=False, check=False)
    assert code == EXIT_REFUSED
    assert out == [f"org/pyonly={site / 'pyonly'}"]
    assert len(err) == 1 and "img2grey/metadata.json, which the kernels library reads, is missing" in err[0]


def test_metadata_json_without_required_fields(site: Path) -> None:
    install(site, "img2grey", "1.1.2", meta={"name": "img2grey", "id": "x"})
    (k,) = find_kernels([str(site)])
    assert "kernels.get_kernel would refuse it: Cannot parse metadata: missing field `version`" in k.problems[0]


@pytest.mark.parametrize("name", ["scale_add", "Img2Grey_X"])
def test_metadata_name_that_kernels_refuses(site: Path, name: str) -> None:
    install(site, "img2grey", "1.1.2", repo_id="org/img2grey", meta=metadata("img2grey") | {"name": name})
    (k,) = find_kernels([str(site)])
    assert f"Invalid kernel name `{name}`. Name must: - Start with a lowercase letter" in k.problems[0]
    assert "\n" not in k.problems[0]


def test_missing_init_py(site: Path) -> None:
    install(site, "img2grey", "1.1.2", meta=metadata("img2grey"), init=False)
    (k,) = find_kernels([str(site)])
    assert k.problems == ("img2grey/__init__.py is missing: pip install --force-reinstall 'img2grey'",)


def test_folder_with_colon_cannot_be_expressed(tmp_path: Path) -> None:
    site = tmp_path / "a:b" / "site-packages"
    site.mkdir(parents=True)
    install(site, "img2grey", "1.1.2", repo_id="org/img2grey", meta=metadata("img2grey"))
    (k,) = find_kernels([str(site)])
    assert "contains ':', which LOCAL_KERNELS cannot express" in k.problems[0]
    out, err, code = report([k], shell=True, check=False)
    assert out == ["unset LOCAL_KERNELS"] and code == EXIT_REFUSED and "left out img2grey (org/img2grey)" in err[0]


def test_equals_sign_in_folder_is_fine(tmp_path: Path) -> None:
    site = tmp_path / "a=b" / "site-packages"
    site.mkdir(parents=True)
    folder = install(site, "img2grey", "1.1.2", repo_id="org/img2grey", meta=metadata("img2grey"))
    value = local_kernels_value(usable(find_kernels([str(site)]))[0])
    assert _parse_local_kernel_overrides(value) == {"org/img2grey": folder}


def test_two_distributions_for_one_kernel_name(site: Path) -> None:
    install(site, "img2grey", "1.1.2", meta=metadata("img2grey"))
    install(site, "img2grey-fork", "1.1.3", meta=metadata("img2grey"), package="img2grey2")
    keep, left = usable(find_kernels([str(site)]))
    assert [k.dist for k in keep] == ["img2grey"]
    assert "pip uninstall one of 'img2grey' and 'img2grey-fork'" in left[0][1]


def test_only_the_distribution_of_a_kernels_name_may_claim_it(site: Path) -> None:
    """A dependency named fast-activation-helpers whose provenance claims kernels-community/activation is not
    that kernel: not in LOCAL_KERNELS, and said why; the real one (any spelling of its name) is."""
    install(site, "fast-activation-helpers", "1.0.0", repo_id="kernels-community/activation",
            meta=metadata("activation"), package="activation")
    install(site, "Img2Grey", "1.1.2", repo_id="org/img2grey", meta=metadata("img2grey"), package="img2grey")
    keep, left = usable(find_kernels([str(site)]))
    assert [k.dist for k in keep] == ["Img2Grey"]
    assert [why for _, why in left] == [
        "the distribution 'fast-activation-helpers' claims kernels-community/activation, whose project is "
        "'activation': only a distribution of that name may; pip uninstall 'fast-activation-helpers' unless you "
        "trust it, and install activation's wheel"]


@pytest.mark.parametrize(("field", "value", "why"), [
    ("repo_id", "org/x\x1b[2Jy", "'repo_id' holds a control character"),
    ("repo_id", "org/x/y", "repo_id 'org/x/y' is not a Hub repository id (org/name)"),
    ("revision", "a" * 40 + "\x07", "'revision' holds a control character"),
    ("variant", "../../etc", "variant '../../etc' is not shaped like a build variant's name"),
    ("repo_id", ["org/img2grey"], "'repo_id' must be a string, not list"),
])
def test_a_provenance_that_fails_a_records_checks_claims_nothing(site: Path, field: str, value: Any, why: str) -> None:
    install(site, "img2grey", "1.1.2", repo_id="org/img2grey", meta=metadata("img2grey"))
    info = site / "img2grey-1.1.2.dist-info" / "kernel_factory.json"
    info.write_text(json.dumps({**json.loads(info.read_text()), field: value}))
    keep, left = usable(find_kernels([str(site)]))
    assert keep == []
    assert [w for _, w in left] == [f"its kernel_factory.json fails the checks a record passes ({why}): reinstall "
                                    "the wheel from your index"]


def one(site: Path, **kw: Any) -> InstalledKernel:
    kw.setdefault("meta", metadata("img2grey"))
    kw.setdefault("repo_id", "kernels-community/img2grey")
    install(site, "img2grey", kw.pop("version", "1.1.2+torch213cpucxx11"), **kw)
    (k,) = find_kernels([str(site)])
    return k


def test_check_loads(site: Path) -> None:
    k = one(site)
    out, err, code = report([k], shell=False, check=True, env=CPU213, path=[str(site)])
    assert code == EXIT_OK and err == []
    assert out == [
        f"img2grey (kernels-community/img2grey) 1.1.2+torch213cpucxx11: would load from {k.folder}",
        "1 of 1 installed kernels would load",
    ]


def test_check_torch_version(site: Path) -> None:
    k = one(
        site,
        version="1.1.2+torch27cu128cxx11",
        variant="torch27-cxx11-cu128-x86_64-linux",
        requires=("torch>=2.7,<2.8",),
    )
    reasons = check_kernel(k, CPU213, set(), [str(site)])
    assert reasons[0] == (
        "built for torch 2.7 but torch 2.13.0+cpu is installed: "
        "pip install --force-reinstall 'img2grey==1.1.2' from the variants/torch213cpucxx11/simple index"
    )
    # The backend is reported too; the torch requirement is not reported twice.
    assert len(reasons) == 2 and reasons[1].startswith("a CUDA build but torch 2.13.0+cpu has no CUDA")
    _, _, code = report([k], shell=False, check=True, env=CPU213, path=[str(site)])
    assert code == EXIT_REFUSED


def test_check_cuda_versions(site: Path) -> None:
    k = one(site, version="1.1.2+torch213cu132cxx11", variant="torch213-cxx11-cu132-x86_64-linux")
    cu130 = Environment("linux", "x86_64", "2.13.0", cuda="13.0", cxx11_abi=True)
    assert label_or_none(cu130) == "torch213cu130cxx11"
    assert check_kernel(k, cu130, set()) == [
        "built for CUDA 13.2 but torch 2.13.0 uses CUDA 13.0: "
        "pip install --force-reinstall 'img2grey==1.1.2' from the variants/torch213cu130cxx11/simple index"
    ]
    cu134 = Environment("linux", "x86_64", "2.13.0", cuda="13.4", cxx11_abi=True)
    assert check_kernel(k, cu134, set()) == []


def test_check_cxx_abi_and_platform(site: Path) -> None:
    k = one(
        site, version="1.1.2+torch26cpucxx98", variant="torch26-cxx98-cpu-aarch64-linux", requires=("torch>=2.6,<2.7",)
    )
    old = Environment("linux", "x86_64", "2.6.0", cxx11_abi=True)
    reasons = check_kernel(k, old, set())
    assert reasons[0].startswith("built for aarch64-linux but this machine is x86_64-linux: pip install")
    assert reasons[1].startswith("built for the cxx98 C++ ABI but the installed torch uses the cxx11 ABI")


def test_check_torch_missing_and_broken(site: Path) -> None:
    k = one(site)
    none = Environment("linux", "x86_64")
    assert check_kernel(k, none, set()) == [
        "built for torch 2.13 but torch is not installed: pip install 'torch==2.13.*'"
    ]
    broken = Environment("linux", "x86_64", "2.13.0", torch_error="ImportError: libtorch_cpu.so")
    assert "does not import (ImportError: libtorch_cpu.so)" in check_kernel(k, broken, set())[0]


def test_check_requirements_and_kernel_depends(site: Path) -> None:
    meta = metadata("img2grey", **{"kernel-depends": [{"repo-id": "org/relu", "version": 1}]})
    k = one(site, meta=meta, requires=("torch>=2.13,<2.14", "einops>=0.8", "requests>=3", "win32; os_name=='nt'"))
    reasons = check_kernel(k, CPU213, {"kernels-community/img2grey"}, [str(site)])
    assert reasons == [
        "needs einops>=0.8 which is not installed: pip install 'einops>=0.8'",
        "needs requests>=3 but requests 2.32.0 is installed: pip install 'requests>=3'",
        "depends on kernel org/relu, which is not installed as a wheel here "
        "(offline, get_kernel cannot fetch it): pip install its wheel too",
    ]
    assert check_kernel(k, CPU213, {"org/relu"}, [str(site)])[-1].startswith("needs requests>=3")


def test_check_universal_variant_loads_anywhere(site: Path) -> None:
    k = one(site, version="1.0.0", variant="torch-universal", requires=("torch",))
    assert check_kernel(k, Environment("darwin", "aarch64", "2.13.0", mps=True), set(), [str(site)]) == []


def test_check_unknown_variant(site: Path) -> None:
    k = one(site, variant="torch213-weird")
    assert "unknown build variant 'torch213-weird'" in check_kernel(k, CPU213, set())[0]


def test_check_without_kernels_library_fails(site: Path) -> None:
    k = one(site)
    out, _, code = report([k], shell=False, check=True, env=CPU213, has_kernels_lib=False, path=[str(site)])
    assert code == EXIT_REFUSED and out[0].startswith("the kernels library is not installed")
    assert out[-1] == "0 of 1 installed kernels would load"


def test_shell_and_check_put_the_report_on_stderr(site: Path) -> None:
    k = one(site)
    out, err, code = report([k], shell=True, check=True, env=CPU213, path=[str(site)])
    assert out == [shell_line(f"kernels-community/img2grey={k.folder}")]
    assert err[-1] == "1 of 1 installed kernels would load" and code == EXIT_OK


def test_cli_prints_the_value(site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    folder = install(site, "img2grey", "1.1.2", repo_id="org/img2grey", meta=metadata("img2grey"))
    monkeypatch.setattr(sys, "path", [str(site)])
    assert cli.main(["local-kernels"]) == EXIT_OK
    assert capsys.readouterr().out == f"org/img2grey={folder}\n"
    assert cli.main(["local-kernels", "--shell"]) == EXIT_OK
    assert capsys.readouterr().out == f"export LOCAL_KERNELS={shlex.quote(f'org/img2grey={folder}')}\n"


def test_a_provenance_without_package_takes_the_top_level_folder_holding_metadata_json(site: Path) -> None:
    """Before provenance files named the package, the package was the top-level folder whose metadata.json the
    RECORD lists; files at the top, deeper down and of other names (sorting below and above) do not count."""
    folder = install(site, "img2grey", "1.1.2+torch213cpucxx11", meta=metadata("img2grey"),
                     repo_id="kernels-community/img2grey")
    info = site / "img2grey-1.1.2+torch213cpucxx11.dist-info"
    prov = json.loads((info / "kernel_factory.json").read_text())
    del prov["package"]
    (info / "kernel_factory.json").write_text(json.dumps(prov))
    record = ["README", "helper/__init__.py", "other/zzz.py", "deep/sub/metadata.json", "img2grey/__init__.py",
              "img2grey/metadata.json", f"{info.name}/METADATA"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in record))
    (k,) = find_kernels([str(site)])
    assert (k.folder, k.problems) == (folder, ())


def test_without_the_kernels_library_the_fields_it_requires_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel_factory.local.local_kernels import installed
    from kernel_factory.verify import metadata as kernelmeta

    def no_library(raw: bytes) -> str | None:
        raise ImportError("No module named 'kernels'")

    monkeypatch.setattr(kernelmeta, "kernels_refusal", no_library)
    assert installed.kernels_refusal(b"{}", {"name": "act", "version": 1}) == (
        "lacks id, license, python-depends, backend, which the kernels library requires")
    assert installed.kernels_refusal(b"{}", metadata("act")) is None
