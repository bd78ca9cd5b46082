"""How long compare() takes next to torch.testing.assert_close and a plain pass over the data.

    python benchmarks/bench_metrics.py                 # 16M f16 elements on the CPU
    python benchmarks/bench_metrics.py --device cuda   # on a GPU
    python benchmarks/bench_metrics.py -n 1000000 --repeat 20

Every timing: warm-up calls, then --repeat timed calls; median and
interquartile range. The floor is one plain pass over both inputs (a sum of
each), the memory-bound least a comparison can cost. The numba JIT cost is
measured apart, in fresh interpreters: cold (empty cache) and cached.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from e2egen import metrics  # noqa: E402
from e2egen.metrics import fused_numba  # noqa: E402


@dataclass(frozen=True)
class Timing:
    median: float
    q1: float
    q3: float

    def __str__(self) -> str:
        return f"{self.median * 1e3:9.2f} ms  (IQR {self.q1 * 1e3:.2f}-{self.q3 * 1e3:.2f})"


def measure(fn, repeat: int, warmup: int, device: torch.device) -> Timing:
    def synced():
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        synced()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        synced()
        times.append(time.perf_counter() - start)
    q1, _, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times[0],) * 3
    return Timing(statistics.median(times), q1, q3)


FIRST_CALL = """
import time, torch
start = time.perf_counter()
from e2egen import metrics
ref = torch.randn(4096, dtype=torch.float64)
imported = time.perf_counter()
metrics.compare(ref, ref.to(torch.float16), "f16", backend="numba")
print(time.perf_counter() - imported)
"""


def first_call_seconds(cache_dir: str) -> float:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True, env=env, check=True)
    return float(result.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1 << 24, help="elements (default 16M)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    device = torch.device(args.device)

    g = torch.Generator(device="cpu").manual_seed(0)
    ref = torch.randn(args.n, generator=g, dtype=torch.float64)
    noise = 1 + 1e-3 * torch.rand(args.n, generator=g, dtype=torch.float64)
    out = (ref * noise).to(torch.float16)
    ref, out = ref.to(device), out.to(device)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{args.n} elements, f16 out vs float64 ref, device {device}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch threads, load average {load:.2f}")

    def run(fn):
        return measure(fn, args.repeat, args.warmup, device)

    rows = {"floor: ref.sum() + out.sum()": run(lambda: (ref.sum(), out.sum()))}
    rows["torch.testing.assert_close"] = run(
        lambda: torch.testing.assert_close(out, ref, check_dtype=False, rtol=1e-2, atol=1e-2))
    backends = ["torch"] + (["numba"] if fused_numba.AVAILABLE and device.type == "cpu" else [])
    for backend in backends:
        rows[f"e2egen.metrics.compare [{backend}]"] = run(lambda: metrics.compare(ref, out, "f16", backend=backend))

    floor = rows["floor: ref.sum() + out.sum()"].median
    assert_close = rows["torch.testing.assert_close"].median
    print(f"{'what':<34}{'median (IQR)':<36}{'x floor':>9}{'x faster than assert_close':>28}")
    for name, timing in rows.items():
        print(f"{name:<34}{timing!s:<36}{timing.median / floor:>9.2f}{assert_close / timing.median:>28.2f}")

    if "numba" in backends:
        with tempfile.TemporaryDirectory() as cache_dir:
            cold = first_call_seconds(cache_dir)
            cached = first_call_seconds(cache_dir)
        print(f"numba first call (f16, after import): cold cache {cold:.2f} s, cached {cached:.2f} s")


if __name__ == "__main__":
    main()
