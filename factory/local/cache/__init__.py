"""The Hub cache's interface: nothing outside this package imports its modules (an import-linter contract)."""

from .stage import CacheRefused
from .writer import (
                     MARKER,
                     CacheConflict,
                     CacheUnusable,
                     Placement,
                     Writer,
                     cache_root,
                     is_ours,
                     origin_of,
                     read_own,
                     read_ref,
                     repo_folder,
                     scratch,
                     valid_ref,
                     variant_holds,
                     write_own,
)

__all__ = ["MARKER", "CacheConflict", "CacheRefused", "CacheUnusable", "Placement", "Writer", "cache_root",
           "is_ours", "origin_of", "read_own", "read_ref", "repo_folder", "scratch", "valid_ref", "variant_holds",
           "write_own"]
