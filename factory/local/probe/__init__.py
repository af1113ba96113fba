"""An interpreter's torch build and its kernels library, asked in that interpreter's own process.

run.py runs facts.py (the facts of torch) and askkernels.py (what its kernels loads) with the interpreter;
environment.py turns the facts into the one Environment of local/; rules.py turns kernels' answers into a
Judge. ``which``, ``download`` and ``local-kernels`` use it; it imports none of them.
"""
