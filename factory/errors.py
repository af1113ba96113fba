"""One exception hierarchy; each class carries the exit code the CLI returns.

Exit codes (documented in the README):
  0  every planned item done
  1  a bug (an exception that is not a FactoryError)
  2  usage or configuration error (unknown version, organisation not allowed)
  3  some items refused (bad input, failed audit, digest mismatch); the rest done
  4  a source or destination unreachable or unusable
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_UNREACHABLE = 4


class FactoryError(Exception):
    """Base class: the message is one line naming the problem and the fix."""

    exit_code = EXIT_BUG


class UsageError(FactoryError):
    """Bad command line or configuration."""

    exit_code = EXIT_USAGE


class ConfigError(UsageError):
    """A malformed or unknown configuration key or value."""


class VersionNotFound(UsageError):
    """The asked-for version, tag, branch or revision does not exist."""


class NotAllowed(UsageError):
    """The repository's organisation is not in allow-orgs."""


class Refused(FactoryError):
    """One item (a variant, a wheel) was refused; other items go on."""

    exit_code = EXIT_REFUSED


class UnknownVariant(Refused):
    """A build variant name the kernels project does not define."""


class BadKernel(Refused):
    """The variant folder or its metadata.json is not a usable kernel."""


class DigestMismatch(Refused):
    """Fetched files do not match metadata.json's digest."""


class AuditFailed(Refused):
    """The binaries do not meet the target policy, or are not abi3."""


class UnsafePath(Refused):
    """A symlink, absolute or '..' path, or a name that cannot be a wheel entry."""


class Unreachable(FactoryError):
    """A source or destination cannot be reached or used."""

    exit_code = EXIT_UNREACHABLE
