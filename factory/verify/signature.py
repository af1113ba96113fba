"""Sigstore verification of ``metadata.json.sigstore`` (only when asked: ``verify-signatures = true``).

kernels' own check (``kernels verify-signature``), done with sigstore's public API because kernels keeps it private
(docs/architecture.md): a valid signature over the exact bytes of metadata.json by one of the GitHub Actions
workflows in ``SIGNERS``. The digest metadata.json carries is then checked over every file (verify/digest.py), so
the signature covers every file. A variant without a bundle is refused while verification is on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import Refused, Unreachable

# (repository, workflows allowed to sign) as in kernels 0.19.1's DEFAULT_POLICY (kernels/_internals/verify.py).
SIGNERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("huggingface/kernels-community", ("build.yaml", "build-mac.yaml", "build-windows.yaml", "sign-old-builds.yaml")),
    ("huggingface/kernels-community-rs", ("build.yaml",)),
)
ISSUER = "https://token.actions.githubusercontent.com"
MAX_BUNDLE = 1 << 20  # a bundle is a few KB


def policy() -> Any:
    """sigstore's policy object for :data:`SIGNERS`: any of the repositories, each with one of its workflows."""
    from sigstore.verify import policy as p

    return p.AnyOf([
        p.AllOf([
            p.OIDCIssuer(ISSUER),
            p.OIDCIssuerV2(ISSUER),
            p.OIDCSourceRepositoryURI(f"https://github.com/{repo}"),
            p.AnyOf([p.OIDCBuildSignerURI(f"https://github.com/{repo}/.github/workflows/{w}@refs/heads/main")
                     for w in workflows]),
        ])
        for repo, workflows in SIGNERS
    ])


def verify_signature(variant_dir: Path, where: str) -> None:
    """Raise Refused unless the variant carries a valid sigstore bundle over its metadata.json."""
    bundle_path = variant_dir / "metadata.json.sigstore"
    if not bundle_path.is_file():
        raise Refused(f"{where}: no metadata.json.sigstore bundle, and verify-signatures is on; "
                      "leave this kernel out or turn verify-signatures off for it")
    try:
        from sigstore.errors import VerificationError
        from sigstore.models import Bundle, InvalidBundle
        from sigstore.verify import Verifier
    except ImportError as exc:
        raise Refused(f"{where}: signature verification needs sigstore ({exc}); "
                      "pip install 'kernel-factory[signatures]'") from None
    metadata = variant_dir / "metadata.json"
    if not metadata.is_file():
        raise Refused(f"{where}: signature verification failed: no metadata.json beside the bundle")
    with open(bundle_path, "rb") as f:
        raw = f.read(MAX_BUNDLE + 1)
    try:
        if len(raw) > MAX_BUNDLE:
            raise InvalidBundle(f"more than {MAX_BUNDLE} bytes")
        bundle = Bundle.from_json(raw)
    except (InvalidBundle, ValueError) as exc:
        raise Refused(f"{where}: signature verification failed: the bundle is not a sigstore bundle "
                      f"({_one_line(exc)})") from None
    try:
        verifier = Verifier.production()
    except OSError as exc:
        raise Unreachable(f"{where}: cannot fetch sigstore's trust root ({exc}); check the network, "
                          "or turn verify-signatures off") from None
    except Exception as exc:  # sigstore raises its own errors for trust-root and TUF problems
        raise Unreachable(f"{where}: sigstore verification could not run ({type(exc).__name__}: "
                          f"{_one_line(exc)})") from None
    try:
        verifier.verify_artifact(metadata.read_bytes(), bundle, policy())
    except VerificationError as exc:
        raise Refused(f"{where}: signature verification failed: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500]
