"""e2egen: declarative end-to-end numerics tests for compute kernels.

The `e2egen` command (e2egen.cli) sits on top of nightly, generator, runner
and metrics; e2egen.diagnose holds `explain` and `study`. e2egen.errors holds
UserError, the base of every layer's user errors (a leaf: standard library only).

Importing e2egen (every e2egen.* module does, first) points numba's on-disk cache at a per-user directory,
$XDG_CACHE_HOME/e2egen/numba (else ~/.cache/e2egen/numba), unless NUMBA_CACHE_DIR is set: numba's default
writes it beside the installed package (the checkout's __pycache__, or an unwritable site-packages).
"""
import os as _os
import sys as _sys


def _default_numba_cache_dir() -> None:
    """Set NUMBA_CACHE_DIR to the per-user default where the user did not set it (before numba is imported by
    metrics.numba_kernels; a numba imported earlier re-reads its configuration)."""
    if _os.environ.get("NUMBA_CACHE_DIR", "").strip():
        return
    base = _os.environ.get("XDG_CACHE_HOME", "").strip()
    if not _os.path.isabs(base):  # the XDG rule: a relative value is ignored
        base = _os.path.join(_os.path.expanduser("~"), ".cache")
    if not _os.path.isabs(base):  # no home directory: a per-user folder in the temporary directory
        import tempfile

        base = _os.path.join(tempfile.gettempdir(), f"e2egen-{_os.getuid() if hasattr(_os, 'getuid') else 'user'}")
    _os.environ["NUMBA_CACHE_DIR"] = _os.path.join(base, "e2egen", "numba")
    numba = _sys.modules.get("numba")
    if numba is not None:
        try:
            numba.core.config.reload_config()
        except Exception:  # noqa: BLE001 - a numba without it keeps its default location
            pass


_default_numba_cache_dir()


_PYTHON_API = ("judge", "check")  # e2egen.api, imported on first use: `import e2egen` stays light


def __getattr__(name: str):
    if name in _PYTHON_API:
        from e2egen import api

        return getattr(api, name)
    raise AttributeError(f"module 'e2egen' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_PYTHON_API])
