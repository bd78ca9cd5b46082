"""Issue 46: numba's on-disk cache goes to a per-user directory ($XDG_CACHE_HOME/e2egen/numba, else
~/.cache/e2egen/numba), not beside the installed package, unless the user set NUMBA_CACHE_DIR (e2egen/__init__.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

KERNEL = """
import numba

@numba.njit(cache=True)
def twice(x):
    return 2 * x
"""

RUN = """
import sys
sys.path.insert(0, sys.argv[1])
{first}
import e2egen.metrics  # what a run imports first
import numba, numba_cached_kernel
assert numba_cached_kernel.twice(21) == 42
print(numba.config.CACHE_DIR)
"""


def run(tmp_path: Path, first: str = "", **env: str) -> str:
    module_dir = tmp_path / "module"
    module_dir.mkdir(exist_ok=True)
    (module_dir / "numba_cached_kernel.py").write_text(KERNEL, encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", RUN.format(first=first), str(module_dir)], env=environment,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def index_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*.nbi")]


@pytest.mark.parametrize("first", ["", "import numba"], ids=["e2egen-first", "numba-imported-before"])
def test_the_numba_cache_goes_to_the_per_user_cache_directory(tmp_path, first):
    cache = tmp_path / "xdg"
    where = run(tmp_path, first, XDG_CACHE_HOME=str(cache))
    assert Path(where) == cache / "e2egen" / "numba"
    assert index_files(cache / "e2egen" / "numba")  # the kernel's cache was written there
    assert not index_files(tmp_path / "module")  # and not beside the module


def test_without_xdg_cache_home_it_is_under_the_home_directory(tmp_path):
    where = run(tmp_path, HOME=str(tmp_path / "home"))
    assert Path(where) == tmp_path / "home" / ".cache" / "e2egen" / "numba"
    assert index_files(tmp_path / "home" / ".cache" / "e2egen" / "numba")


def test_a_numba_cache_dir_the_user_set_is_kept(tmp_path):
    mine = tmp_path / "mine"
    where = run(tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg"), NUMBA_CACHE_DIR=str(mine))
    assert Path(where) == mine and index_files(mine)
    assert not (tmp_path / "xdg").exists()


def test_the_warm_stamp_lives_in_the_cache_and_names_what_was_compiled(tmp_path, monkeypatch):
    """`e2egen warm` (make warm; runner.numba_cache) skips the warm-up only where the cache in use is stamped for these
    kernel sources: another or an emptied cache directory, or other sources, is warmed again."""
    from e2egen.runner import numba_cache

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    assert not numba_cache.is_warm()  # a new cache directory
    numba_cache.mark_warm()
    assert numba_cache.is_warm()
    assert (tmp_path / "cache" / numba_cache.STAMP_NAME).is_file()

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "other"))
    assert not numba_cache.is_warm()  # the stamp is the cache's own, not the checkout's
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))

    kernel_sources = {p.name for p in numba_cache._kernel_sources()}
    assert {"fused_numba.py", "rounding_numba.py", "draws.py", "magnitude.py"} <= kernel_sources
    stamp = (tmp_path / "cache" / numba_cache.STAMP_NAME)
    stamp.write_text(stamp.read_text(encoding="utf-8").replace("sources ", "sources 0"), encoding="utf-8")
    assert not numba_cache.is_warm()  # a kernel source changed since the stamp


def test_a_current_stamp_is_checked_without_importing_torch_or_numba(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    check = ("import sys; from e2egen.runner import numba_cache; from e2egen.cli import main; "
             "numba_cache.mark_warm(); main(['warm']); print(sorted({'torch', 'numba'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"numba cache warm ({tmp_path})", "[]"]
