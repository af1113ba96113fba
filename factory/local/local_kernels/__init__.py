"""``kernel-factory local-kernels``: the kernel wheels installed here (installed.py), what
the target interpreter's kernels loads (checks.py, loaders.py) and ``--cache`` (command.py), which
writes the Hub cache through ``local.cache`` alone.
"""
