"""How long compare() takes next to torch.testing.assert_close and a plain pass over the data.

    python benchmarks/bench_metrics.py                 # 16M f16 elements on the CPU
    python benchmarks/bench_metrics.py --device cuda   # on a GPU
    python benchmarks/bench_metrics.py -n 1000000 --repeat 20
    python benchmarks/bench_metrics.py --general   # also the torch path with its general kernel only (the old one)
    python benchmarks/bench_metrics.py --processes 5   # the same in 5 fresh interpreters: medians and ranges

Every timing: warm-up calls, then --repeat timed calls; median and
interquartile range. "+ unformed bound" is the bound as the runner hands conv
and gemm bounds over (ulp_terms.ScaledPlusUlps: f32 sums, widened, scaled and
given their ulp term inside the pass); its floor reads the f32 sums in place of
a float64 bound. Each row is a ratio against its named baselines, measured
in the same run (x numba: the numba path's time with the same inputs): the floor is one plain pass over the inputs it reads (a sum
of each: ref and out, or ref, out and the bound), the memory-bound least a
comparison can cost; the torch path's rows use the same sums taken its way
("chunked": its chunks on its threads); assert_close is
torch.testing.assert_close. The numba
JIT cost is measured apart, in fresh interpreters: cold (empty cache) and
cached. (A torch.compile'd torch path was measured here too, and removed:
docs/evidence/performance-history.md, "torch.compile".)
"""
from __future__ import annotations

import argparse
import json
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
from e2egen.metrics.backend import numba_path  # noqa: E402
from e2egen.metrics.ulp_terms import ScaledPlusUlps  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_tool_work import positive  # noqa: E402


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


def general_kernel_rows(ref, out, bound, run) -> list[tuple[str, str, "Timing"]]:
    """The torch path with its general kernel on every chunk (what it was before the fast kernel)."""
    from e2egen.metrics import fused_torch

    try:
        fused_torch.FAST_PATH = False
        return [("compare [torch, general kernel]", "ref+out, chunked",
                 run(lambda: metrics.compare(ref, out, "f16", backend="torch"))),
                ("compare [torch, general] + bound", "ref+out+bound, chunked",
                 run(lambda: metrics.compare(ref, out, "f16", bound=bound, backend="torch")))]
    finally:
        fused_torch.FAST_PATH = True


def chunked_sums(*tensors):
    """One read of each tensor the way the torch path reads it: its chunks, on its threads (threads.py),
    each op serial. Its floor: unlike one .sum() per tensor, no OpenMP region that a busy machine stalls."""
    from e2egen.metrics import threads

    chunk = fused_torch_chunk(tensors[0])
    if tensors[0].device.type != "cpu":
        return [t.sum() for t in tensors]
    return threads.run(lambda start: [t[start:start + chunk].sum() for t in tensors],
                       range(0, tensors[0].numel(), chunk))


def fused_torch_chunk(ref) -> int:
    from e2egen.metrics import backend

    return backend.default_chunk("torch", ref.device)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=positive, default=1 << 24, help="elements (default 16M)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=positive, default=9)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--processes", type=positive, default=1,
                        help="run the measurement in this many fresh interpreters, one after the other, and print "
                             "each row's ratios as their median and range across them (default 1: this one)")
    parser.add_argument("--general", action="store_true",
                        help="also time the torch path with its general kernel on every chunk (the path before "
                             "the fast kernel; slow)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one interpreter's rows, for --processes
    return parser.parse_args()


def across_processes(args: argparse.Namespace) -> None:
    """--processes: the same measurement in fresh interpreters. The same work gives medians a fifth apart from
    one process to the next on some machines (a VM's placement of memory, say), so a single run's ratio
    can land on either side of a goal; each process's ratios are against its own floors and assert_close."""
    command = [sys.executable, __file__, "--json", "-n", str(args.n), "--device", args.device,
               "--repeat", str(args.repeat), "--warmup", str(args.warmup)]
    command += ["--general"] * args.general
    runs = []
    for _ in range(args.processes):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"a measuring interpreter failed:\n{done.stderr.strip()}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{args.n} elements, f16 out vs float64 ref, device {args.device}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch threads, {args.processes} interpreters of --repeat {args.repeat} each, "
          f"load average {load:.2f} at the end; median (min-max) across the interpreters")

    def spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
        values = [v * scale for v in values]
        return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

    print(f"{'what':<34}{'median ms':>26}{'floor':>24}{'x floor':>24}{'x faster than assert_close':>30}")
    for name in runs[0]["floors"]:
        times = [run["floors"][name] for run in runs]
        faster = [run["assert_close"] / run["floors"][name] for run in runs]
        print(f"{'floor: ' + name:<34}{spread(times, 1e3):>26}{name:>24}{'1.00':>24}{spread(faster):>30}")
    for index, (name, floor, _) in enumerate(runs[0]["rows"]):
        times = [run["rows"][index][2] for run in runs]
        over_floor = [run["rows"][index][2] / run["floors"][floor] for run in runs]
        faster = [run["assert_close"] / run["rows"][index][2] for run in runs]
        print(f"{name:<34}{spread(times, 1e3):>26}{floor:>24}{spread(over_floor):>24}{spread(faster):>30}")


def main() -> None:
    args = parse_args()
    if args.processes > 1:
        across_processes(args)
        return
    device = torch.device(args.device)

    g = torch.Generator(device="cpu").manual_seed(0)
    ref = torch.randn(args.n, generator=g, dtype=torch.float64)
    noise = 1 + 1e-3 * torch.rand(args.n, generator=g, dtype=torch.float64)
    out = (ref * noise).to(torch.float16)
    ref, out = ref.to(device), out.to(device)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if not args.json:
        print(f"{args.n} elements, f16 out vs float64 ref, device {device}, torch {torch.__version__}, "
              f"{torch.get_num_threads()} torch threads, load average {load:.2f}")

    def run(fn):
        return measure(fn, args.repeat, args.warmup, device)

    bound = (ref.abs() * 2.0 ** -11 + 2.0 ** -24).to(device)  # a plausible per-element bound, float64
    # the same kind of bound as the runner hands over for conv and gemm: f32 sums, formed in the pass
    unformed = ScaledPlusUlps(ref.abs().float(), 2.0 ** -11, ref, "f16", 1.0, widening=1.0 + 2.0 ** -20)
    floors = {"ref+out": run(lambda: (ref.sum(), out.sum())),
              "ref+out+bound": run(lambda: (ref.sum(), out.sum(), bound.sum())),
              "ref+out+f32 terms": run(lambda: (ref.sum(), out.sum(), unformed.terms.sum())),
              "ref+out, chunked": run(lambda: chunked_sums(ref, out)),
              "ref+out+bound, chunked": run(lambda: chunked_sums(ref, out, bound))}
    assert_close = run(lambda: torch.testing.assert_close(out, ref, check_dtype=False, rtol=1e-2, atol=1e-2))
    rows = [("torch.testing.assert_close", "ref+out", assert_close)]
    backends = (["numba"] if numba_path(device, "auto") else []) + ["torch"]
    for backend in backends:
        chunked = ", chunked" if backend == "torch" else ""
        rows.append((f"compare [{backend}]", "ref+out" + chunked,
                     run(lambda: metrics.compare(ref, out, "f16", backend=backend))))
        rows.append((f"compare [{backend}] + bound", "ref+out+bound" + chunked,
                     run(lambda: metrics.compare(ref, out, "f16", bound=bound, backend=backend))))
        if backend == "numba":
            rows.append(("compare [numba] + unformed bound", "ref+out+f32 terms",
                         run(lambda: metrics.compare(ref, out, "f16", bound=unformed, backend=backend))))
    if args.general:
        rows += general_kernel_rows(ref, out, bound, run)

    if args.json:  # for across_processes: medians in seconds, no first-call timings
        print(json.dumps({"floors": {name: timing.median for name, timing in floors.items()},
                          "assert_close": assert_close.median,
                          "rows": [(name, floor, timing.median) for name, floor, timing in rows]}))
        return

    numba_rows = {name: timing for name, _, timing in rows if name.startswith("compare [numba]")}

    def versus_numba(name: str, timing: Timing) -> str:
        baseline = numba_rows.get("compare [numba] + bound" if name.endswith("bound") else "compare [numba]")
        return f"{timing.median / baseline.median:>10.2f}" if baseline and name.startswith("compare") else f"{'':>10}"

    print(f"{'what':<34}{'median (IQR)':<36}{'floor':>24}{'x floor':>9}{'x faster than assert_close':>28}"
          f"{'x numba':>10}")
    for name, timing in floors.items():
        print(f"{'floor: ' + name:<34}{timing!s:<36}{name:>24}{1.0:>9.2f}{assert_close.median / timing.median:>28.2f}")
    for name, floor, timing in rows:
        print(f"{name:<34}{timing!s:<36}{floor:>24}{timing.median / floors[floor].median:>9.2f}"
              f"{assert_close.median / timing.median:>28.2f}{versus_numba(name, timing)}")

    if "numba" in backends:
        with tempfile.TemporaryDirectory() as cache_dir:
            cold = first_call_seconds(cache_dir)
            cached = first_call_seconds(cache_dir)
        print(f"numba first call (f16, after import): cold cache {cold:.2f} s, cached {cached:.2f} s")


if __name__ == "__main__":
    main()
