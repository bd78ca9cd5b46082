"""The files `e2egen init` writes into a new project (package data, read with importlib.resources): configs.toml,
my_kernels.py, and the GitHub workflows e2egen-pr.yml and e2egen-nightly.yml (their @E2EGEN_REQUIREMENT@ is the
pip requirement init is given)."""
