"""Where an impl's module ("mykern:scaled_gemm") is imported from: one rule for every command and the generated suite.

The directory of the catalogue that names it first (as Python puts a script's
directory first), then PYTHONPATH, then the installed packages. Whoever loads a
catalogue or a generated suite with an impl calls `import_beside(catalogue)`
before the kernel is resolved (runner.kernels.resolve_impl).

Standard library only: a suite's collection calls it, and must not import torch.
"""
from __future__ import annotations

import importlib
import os
import sys

_catalogue_directories: list[str] = []  # put first on sys.path by import_beside, oldest first


def import_beside(catalogue: str | os.PathLike) -> None:
    """Let impl modules import from the catalogue's directory: put it first on sys.path (once)."""
    directory = os.path.dirname(os.path.abspath(catalogue))
    if directory in _catalogue_directories:
        return
    _catalogue_directories.append(directory)
    sys.path.insert(0, directory)
    importlib.invalidate_caches()  # a module written since this process last listed the directory must be found


def search_path_text() -> str:
    """Where an impl's module was looked for, in the rule's order, for a message."""
    places = [f"the catalogue's directory {d}" for d in reversed(_catalogue_directories)]
    if os.environ.get("PYTHONPATH"):
        places.append(f"PYTHONPATH {os.environ['PYTHONPATH']}")
    return ", ".join(places + ["the installed packages"])
