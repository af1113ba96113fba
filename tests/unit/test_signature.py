import sys
from pathlib import Path

import pytest
from kernel_factory.errors import EXIT_REFUSED, Refused
from kernel_factory.verify.signature import MAX_BUNDLE, SIGNERS, policy, verify_signature


def test_missing_bundle_is_refused_when_asked(tmp_path: Path) -> None:
    (tmp_path / "metadata.json").write_text("{}")
    with pytest.raises(Refused, match="no metadata.json.sigstore bundle") as info:
        verify_signature(tmp_path, "build/v")
    assert info.value.exit_code == EXIT_REFUSED


def test_garbage_bundle_is_refused(tmp_path: Path) -> None:
    (tmp_path / "metadata.json").write_text("{}")
    (tmp_path / "metadata.json.sigstore").write_text("not a bundle")
    with pytest.raises(Refused, match="signature verification failed"):
        verify_signature(tmp_path, "build/v")


def test_without_sigstore_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "metadata.json").write_text("{}")
    (tmp_path / "metadata.json.sigstore").write_text("{}")
    monkeypatch.setitem(sys.modules, "sigstore.verify", None)  # import fails as if sigstore were not installed
    with pytest.raises(Refused) as info:
        verify_signature(tmp_path, "build/v")
    assert str(info.value).startswith("build/v: signature verification needs sigstore (")
    assert str(info.value).endswith("); pip install 'kernel-factory[signatures]'")


def test_oversized_bundle_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "metadata.json").write_text("{}")
    (tmp_path / "metadata.json.sigstore").write_bytes(b" " * (MAX_BUNDLE + 1))
    with pytest.raises(Refused, match=r"the bundle is not a sigstore bundle \(more than 1048576 bytes\)"):
        verify_signature(tmp_path, "build/v")


def test_policy_is_kernels_own() -> None:
    """The repositories and workflows of kernels 0.19.1's DEFAULT_POLICY, as sigstore policies."""
    from sigstore.verify import policy as p

    built = policy()
    assert isinstance(built, p.AnyOf) and len(SIGNERS) == 2
    assert [w for _, ws in SIGNERS for w in ws] == ["build.yaml", "build-mac.yaml", "build-windows.yaml",
                                                    "sign-old-builds.yaml", "build.yaml"]
