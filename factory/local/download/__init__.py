"""``kernel-factory download``: kernels.lock -> the Hub cache, from your index (command.py); depends.py follows
kernel-depends, wheelcheck.py checks and unpacks each wheel. It writes the cache through ``local.cache`` alone.
"""
