"""Sigstore verification of ``metadata.json.sigstore`` (only when asked: ``verify-signatures = true``).

The kernels package does the work (``kernels.verify.verify_variant``): it checks
the bundle's signature over metadata.json against its policies (the curated
kernels-community build workflows), then the digest of every file. What this
does NOT prove: anything about a kernel signed by another workflow, and any
build variant without a bundle (refused when verification is on). Verifying
needs sigstore's trust root, fetched from the network unless already cached.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DigestMismatch, Refused, Unreachable


def verify_signature(variant_dir: Path, where: str) -> None:
    """Raise Refused unless the variant carries a valid sigstore bundle over a matching metadata.json."""
    try:
        from kernels.verify import VerificationResult, verify_variant
    except ImportError as exc:  # pragma: no cover - kernels[verify] missing
        raise Refused(f"{where}: signature verification needs the kernels package with sigstore ({exc})") from None
    try:
        result = verify_variant(variant_dir)
    except OSError as exc:
        raise Unreachable(f"{where}: cannot fetch sigstore's trust root ({exc}); check the network, "
                          "or turn verify-signatures off") from None
    except Exception as exc:  # sigstore raises its own errors for trust-root and TUF problems
        raise Unreachable(f"{where}: sigstore verification could not run ({type(exc).__name__}: {exc})") from None
    if isinstance(result, VerificationResult.Success):
        return
    if isinstance(result, VerificationResult.SignatureBundleMissing):
        raise Refused(f"{where}: no metadata.json.sigstore bundle, and verify-signatures is on; "
                      "leave this kernel out or turn verify-signatures off for it")
    if isinstance(result, VerificationResult.DigestVerificationFailure):
        first = result.violations[0] if result.violations else "unknown file"
        raise DigestMismatch(f"{where}: signed digest does not match the files ({first})")
    reason = getattr(result, "reason", type(result).__name__)
    raise Refused(f"{where}: signature verification failed: {reason}")
