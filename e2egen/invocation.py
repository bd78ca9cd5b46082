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

from e2egen.files import same_file

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
        if found and same_file(found, script):
            return NAME
        return shell_quote(str(script))
    return f"{shell_quote(executable)} -m {NAME}"


def shell_quote(text: str) -> str:
    """`text` as one word of a POSIX shell command line that means exactly it: shlex.quote, except for a name
    holding bytes that are not UTF-8 (os.fsdecode keeps each as a lone surrogate, U+DC80..U+DCFF): bash's
    $'...' form then names the real bytes, each such byte as \\xNN.

    Every printed command (repro lines) quotes its words here, before any text cleaning (runner.safe_text)
    would turn those surrogates into the escape text "\\udcff", which names no file."""
    if not any("\udc80" <= ch <= "\udcff" for ch in text):
        return shlex.quote(text)
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # other lone surrogates: no bytes they stand for
        return shlex.quote(text)
    words = []
    for byte in data:
        if byte in b"\\'":
            words.append("\\" + chr(byte))
        elif 0x20 <= byte < 0x7F:
            words.append(chr(byte))
        else:
            words.append(f"\\x{byte:02x}")
    return "$'" + "".join(words) + "'"
