"""Whether numba's on-disk cache already holds the kernels of these sources: `make setup` and `make pr` run

    e2egen warm      warm the cache (runner.warmup) unless its stamp is current (e2egen/commands/warm_command.py)

The stamp is a file in the cache directory itself (NUMBA_CACHE_DIR, which importing e2egen points at a per-user
folder): it names a digest of every module that compiles numba kernels, numba's and Python's versions and the
CPU. So an emptied cache, another cache directory (NUMBA_CACHE_DIR, XDG_CACHE_HOME), an edited kernel or another
numba is warmed again, where a stamp beside the virtual environment could not tell. Checking a current stamp
takes a few milliseconds: neither torch nor numba is imported. Torch-free.
"""
from __future__ import annotations

import hashlib
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from e2egen import metrics  # light: its numba and torch parts load when first used
from e2egen.files import OutputError, write_text_atomically

STAMP_NAME = "e2egen-warm.stamp"
_PACKAGE_DIRS = (Path(metrics.__file__).parent, Path(__file__).parent)  # where numba kernels live
_JIT_MARKERS = (b"numba.njit(", b"numba.jit(", b"@njit", b"@jit")


def cache_directory() -> Path:
    return Path(os.environ["NUMBA_CACHE_DIR"])  # set when the e2egen package was imported, unless the user set it


def _kernel_sources() -> list[Path]:
    """The modules whose numba kernels the cache holds: those that call numba's jit, found by their text."""
    found = []
    for directory in _PACKAGE_DIRS:
        for path in sorted(directory.rglob("*.py")):
            if path != Path(__file__) and any(marker in path.read_bytes() for marker in _JIT_MARKERS):
                found.append(path)
    return found


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "absent"


def current_stamp() -> str:
    digest = hashlib.sha256()
    for path in _kernel_sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return "\n".join([f"sources {digest.hexdigest()}", f"numba {_version('numba')}",
                      f"python {platform.python_version()}", f"cpu {platform.machine()} {_cpu_model()}", ""])


def _cpu_model() -> str:
    """numba compiles for the host CPU's features: a cache in a home directory shared with other machines is
    not theirs."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            lines = [line for line in cpuinfo if line.startswith(("model name", "flags"))][:2]
        return hashlib.sha256("".join(lines).encode()).hexdigest()[:16]
    except OSError:
        return platform.processor() or "unknown"


def is_warm() -> bool:
    try:
        return (cache_directory() / STAMP_NAME).read_text(encoding="utf-8") == current_stamp()
    except (OSError, ValueError):
        return False


def mark_warm() -> None:
    """Stamp the cache as warm for the current sources; a cache that cannot be written is simply not stamped
    (every run then compiles what it needs, as numba does without a cache)."""
    try:
        write_text_atomically(cache_directory() / STAMP_NAME, current_stamp())
    except OutputError as err:
        print(f"warning: the numba cache was not stamped: {err}", file=sys.stderr)
