"""An interpreter's torch build (facts.py -> environment.py) and its kernels library (askkernels.py -> rules.py),
asked in that interpreter's own process (run.py). It imports none of the commands that use it.
"""
