"""The Hugging Face Hub cache that kernels reads offline: its one writer and the readers the commands need.

``download`` and ``local-kernels --cache`` write through ``Writer`` and read through the functions named here;
nothing outside this package imports its modules (an import-linter contract). writer.py holds the rules and the
readers; stage.py the private scratch folder, the checked copies and the modes, trust and hashes they need.
"""

from .stage import CacheRefused
from .writer import (
                     MARKER,
                     SHA,
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

__all__ = ["MARKER", "SHA", "CacheConflict", "CacheRefused", "CacheUnusable", "Placement", "Writer", "cache_root",
           "is_ours", "origin_of", "read_own", "read_ref", "repo_folder", "scratch", "valid_ref", "variant_holds",
           "write_own"]
