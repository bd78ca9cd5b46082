"""What isolating a kernel costs (issue 46), against the kernel call it wraps, in the same process.

    .venv/bin/python benchmarks/bench_isolation.py [--repeats 200]

Rows: runner.kernels.call_kernel on a small f32 gemm (64x64x64: a kernel as short as the PR subset's), which
copies the inputs, snapshots the global state (runner.isolation), calls, restores and checks; the bare kernel
call (problem.numerics.call) on the same tensors, the baseline; the snapshot and the restore alone; and
runner.leftovers' check after each case (Leftovers.after), with and without a child process alive. Medians of
--repeats, runs interleaved.
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from e2egen.runner import make_problem  # noqa: E402
from e2egen.runner import isolation  # noqa: E402
from e2egen.runner.kernels import call_kernel  # noqa: E402
from e2egen.runner.leftovers import Leftovers  # noqa: E402


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times)


def _sleep() -> None:
    time.sleep(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    problem = make_problem("gemm", "fwd", "f32", "nn", {"m": 64, "n": 64, "k": 64}, (-1.0, 1.0), 1)
    tensors = {"a": torch.rand(64, 64), "b": torch.rand(64, 64)}
    cpu = torch.device("cpu")
    kernel = problem.numerics.default_kernel("fwd")
    state = isolation.snapshot()
    leftovers = Leftovers()
    rows = {
        "bare kernel call (baseline)": lambda: problem.numerics.call(kernel, "fwd", problem.params, tensors),
        "call_kernel (copies, isolation, checks)": lambda: call_kernel(problem, kernel, tensors, cpu, label="torch"),
        "isolation.snapshot": isolation.snapshot,
        "isolation.restore (nothing changed)": lambda: isolation.restore(state),
        "Leftovers.after, no child": lambda: leftovers.after("case"),
    }
    for fn in rows.values():  # warm: first calls import and allocate
        fn()
    print(f"{'row':42s} {'median ms':>10s}")
    for name, fn in rows.items():
        print(f"{name:42s} {_median_ms(fn, args.repeats):10.3f}")
    child = multiprocessing.get_context("spawn").Process(target=_sleep, daemon=True)
    child.start()
    try:
        with_child = Leftovers()
        print(f"{'Leftovers.after, a child alive (/proc walk)':42s} "
              f"{_median_ms(lambda: with_child.after('case'), args.repeats):10.3f}")
    finally:
        child.kill()
        child.join()


if __name__ == "__main__":
    main()
