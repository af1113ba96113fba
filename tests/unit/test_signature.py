from pathlib import Path

import pytest
from kernel_factory.errors import EXIT_REFUSED, Refused
from kernel_factory.verify.signature import verify_signature


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
