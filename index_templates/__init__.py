"""The shipped page templates (package data). A package, so that importlib finds this folder in an editable
install as in an installed wheel (factory/index/pages.py); a user's templates folder needs none."""
