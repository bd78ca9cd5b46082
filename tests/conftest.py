"""Shared helpers for the project's own tests."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]

# E2EGEN_EMULATE_CPU=avx2 (make test-avx2) must take effect before any test runs a torch kernel: torch picks its
# instruction set at its first one.
if os.environ.get("E2EGEN_EMULATE_CPU"):
    from e2egen.runner.kernel_paths import apply_emulation

    apply_emulation()

# Seconds: the one wall-clock limit the tests put on their own waits (a subprocess, a join, waiting for a run
# to make progress). It only stops a hang: a slow but correct run on a loaded machine (load 20 on 2 cores runs
# these tests ten times slower) must never reach it, so no test's verdict depends on the machine's speed.
# Wait for an event (with this as the limit), never for a fixed short time.
HANG_LIMIT = 900

# Under CI (CI=true, as .ci/run runs) hypothesis draws the same examples every run, so a CI result says
# whether the change broke something, not whether this run's draws found an old rare case; developers' runs
# keep drawing new examples and find those (docs/concepts/normalization-bound.md, Findings, is one).
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI", "").lower() in ("true", "1"):
    settings.load_profile("ci")

# Probed arithmetic profiles go to a cache of this test session, never the user's (~/.cache/e2egen):
# subprocesses (the CLI, generated suites) inherit it. Tests that need a clean cache set their own.
os.environ["E2EGEN_PROFILES"] = tempfile.mkdtemp(prefix="e2egen-test-profiles-")


@pytest.fixture
def fresh_profiles(tmp_path, monkeypatch):
    """Probe results go to a directory of this test's own (yielded), and none are remembered from other
    tests: for tests whose kernels share a device key, or that count what the probes found."""
    from e2egen.runner.arithmetic import lookup

    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path / "profiles"))
    lookup.forget()
    yield tmp_path / "profiles"
    lookup.forget()

BASE = """
seed = 7
[ranges]
r0 = [-1.0, 1.0]
r4 = [1.0, 5.0]
[tolerances.f32]
rms = 1e-6
max_abs_diff = 1e-3
[tolerances.f16]
rms = 1e-3
[tolerances.bf16]
rms = 1e-2
"""

TINY_CONV = """
[[suite]]
name = "tiny"
op = "conv2d"
dtypes = ["f32", "f16"]
directions = ["fwd", "bwd_data", "bwd_weight"]
layouts = ["nchw", "nhwc"]
ranges = ["r0"]

[[suite.config]]
name = "c4"
n = 1
c = 4
k = 4
hw = [6, 6]
kernel = 3
pad = 1
"""

TINY_GEMM = """
[[suite]]
name = "mm"
op = "gemm"
dtypes = ["f32"]
layouts = ["nn", "tt"]
ranges = ["r0", "r4"]

[[suite.config]]
name = "m8"
m = 8
n = 8
k = 16
"""


def run_e2egen(*args: str) -> tuple[int, str, str]:
    """`e2egen ARGS` in-process: (exit status, stdout, stderr); argparse's exits count as statuses."""
    import contextlib
    import io

    from e2egen import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(list(args))
        except SystemExit as exit:
            status = exit.code
    return status, out.getvalue(), err.getvalue()


def square_gemm_suite(name: str = "mm", impl: str | None = None) -> str:
    """One f32 8x8x8 gemm case (nn, r0), with torch's kernel or `impl`."""
    impl_line = f'impl = "{impl}"\n' if impl else ""
    return f"""
[[suite]]
name = "{name}"
op = "gemm"
{impl_line}dtypes = ["f32"]
layouts = ["nn"]
ranges = ["r0"]

[[suite.config]]
name = "m8"
m = 8
n = 8
k = 8
"""


def catalogue_text(*parts: str) -> str:
    return textwrap.dedent(BASE) + "".join(textwrap.dedent(p) for p in parts)


@pytest.fixture
def write_catalogue(tmp_path):
    """Write catalogue text to tmp_path/configs.toml and return the path."""

    def write(text: str, name: str = "configs.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


def wait_until(condition, *, process: subprocess.Popen | None = None, limit: float = HANG_LIMIT, every: float = 0.05):
    """Poll condition() until it gives a true value, and return that value; give up (returning the last value)
    when `process` has ended without it, or after `limit` seconds (a hang, not a slow machine)."""
    deadline = time.monotonic() + limit
    while True:
        found = condition()
        if found or time.monotonic() > deadline:
            return found
        if process is not None and process.poll() is not None:
            return condition()  # what the process left behind when it ended
        time.sleep(every)


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `e2egen ARGS` in a subprocess, as a user would."""
    return subprocess.run([sys.executable, "-m", "e2egen", *args], cwd=cwd or REPO, capture_output=True, text=True, env=env)


def problems_of(text: str) -> list[str]:
    """The loader's messages for a catalogue text that must not load."""
    from e2egen.generator.errors import CatalogueError
    from e2egen.generator.loader import parse_catalogue

    with pytest.raises(CatalogueError) as info:
        parse_catalogue(text, "configs.toml")
    return [str(p) for p in info.value.problems]


def line_number(text: str, needle: str) -> int:
    """The 1-based line of `text` holding `needle`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)
