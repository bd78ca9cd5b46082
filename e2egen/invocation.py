"""How a printed command names e2egen, so that it works as printed (repro lines).

After `make setup` or `pip install` into a virtual environment that is not activated, a bare `e2egen`
is not on PATH. A repro names the e2egen of the interpreter that is running: plain `e2egen` when that
is what PATH finds, else the script's absolute path, else `python -m e2egen` with this interpreter.
"""
from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
from pathlib import Path

NAME = "e2egen"


def e2egen_command() -> str:
    """The shell words that run this interpreter's e2egen, e.g. `e2egen` or `/work/.venv/bin/e2egen`."""
    return _command(sys.executable, os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def _command(executable: str, search_path: str) -> str:
    if not executable:  # an embedded interpreter: nothing better to name
        return NAME
    # Not resolved: a venv's python is a symlink to the base interpreter, whose bin/ has no e2egen.
    script = Path(executable).parent / (NAME + ".exe" if os.name == "nt" else NAME)
    if script.is_file() and os.access(script, os.X_OK):
        found = shutil.which(NAME, path=search_path)
        if found and _same_file(Path(found), script):
            return NAME
        return shlex.quote(str(script))
    return f"{shlex.quote(executable)} -m {NAME}"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
