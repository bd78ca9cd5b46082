"""pytest-xdist on a generated suite: the PR subset of the shipped catalogue at -n 0 (the baseline),
at -n N with each worker's share of the cores (what the generated suite's plugin does), and at
-n N with every worker using all cores (the behaviour before: OMP_NUM_THREADS = cores).

    .venv/bin/python benchmarks/bench_workers.py [--workers 2] [--repeats 1]

Goal (issue 20): -n N never slower than -n 0. Wall time of the whole pytest process, start-up included.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    base_env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "e2e"
        subprocess.run([sys.executable, "-m", "e2egen", "gen", "configs.toml", "--out", str(out)], cwd=REPO,
                       check=True, capture_output=True)
        pytest = [sys.executable, "-m", "pytest", str(out), "-m", "pr", "-q", "-p", "no:cacheprovider"]
        rows = {
            "-n 0 (baseline)": (pytest + ["-n", "0"], base_env),
            f"-n {args.workers}, shared cores": (pytest + ["-n", str(args.workers)], base_env),
            f"-n {args.workers}, all cores each": (pytest + ["-n", str(args.workers)], {**base_env, "OMP_NUM_THREADS": str(cores)}),
        }
        times = {label: statistics.median(timed(cmd, env) for _ in range(args.repeats)) for label, (cmd, env) in rows.items()}
    baseline = times["-n 0 (baseline)"]
    print(f"PR subset of configs.toml, {cores} cores, median of {args.repeats}")
    print(f"{'run':<28} {'seconds':>8} {'speed-up vs -n 0':>17}")
    for label, seconds in times.items():
        print(f"{label:<28} {seconds:8.1f} {baseline / seconds:16.2f}x")


if __name__ == "__main__":
    main()
