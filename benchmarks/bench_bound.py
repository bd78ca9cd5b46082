"""What the error bound costs next to the float64 reference it comes with, before and after issue 20.

    python benchmarks/bench_bound.py              # three shapes on the CPU, median of 3
    python benchmarks/bench_bound.py --repeat 9

Per shape, in the same run:
  reference   the float64 reference (runner.reference.compute_reference), the baseline;
  bound       the bound as the runner hands it to compare (error_bounds + bound_for_output under the
              default model): Σ|a·b| summed in f32 (runner/magnitude.py), kept with its recipe
              (metrics.ulp_terms.ScaledPlusUlps), not yet formed;
  in compare  what forming it inside the comparison's pass adds: compare with the unformed bound less
              compare with the same bound written out (both with every metric);
  total       bound + in compare, as a ratio to the reference (goal: <= 0.5);
  scanned     the same total where, as in runner.run, Σ|a·b|'s f32 scan was taken while the inputs
              were widened (runner/magnitude.widened_with_scan): the bound without its scan, plus what
              the scan adds to the widening (reference_inputs with the scan less without it);
  written     the fourth round's way, for comparison: the bound formed as a float64 tensor in one fused
              pass (ScaledPlusUlps.values), Σ|a·b| in f32;
  float64     the earlier way: Σ|a·b| in float64, then metrics.ulp as a separate tensor (no widening: it
              is the time that matters here).
Large tensors reuse freed pages, as in runner.run (runner/host_memory.py).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from e2egen import metrics  # noqa: E402
from e2egen.runner import BoundModel, ReferenceOptions, make_problem  # noqa: E402
from e2egen.runner.bound import error_bounds, product_sum_parts  # noqa: E402
from e2egen.runner.host_memory import retain_freed_memory  # noqa: E402
from e2egen.runner.interval_bound import bound_for_output  # noqa: E402
from e2egen.runner.inputs import generate_inputs, reference_inputs  # noqa: E402
from e2egen.runner.magnitude import f32_premises, magnitude  # noqa: E402
from e2egen.runner.reference import compute_reference  # noqa: E402

SHAPES = {
    "gemm 1024x1024, K=16384 (issue 20)": ("gemm", "fwd", "f32", "nn", {"m": 1024, "n": 1024, "k": 16384}),
    "gemm 4096x4096, K=16 (small K)": ("gemm", "fwd", "f16", "nn", {"m": 4096, "n": 4096, "k": 16}),
    "ResNet-50 3x3-64, n=2, fwd": ("conv2d", "fwd", "f32", "nchw",
                                   {"n": 2, "c": 64, "k": 64, "hw": [56, 56], "kernel": [3, 3], "pad": 1}),
}


def median_seconds(fn, repeat: int) -> float:
    fn()  # warm-up (numba's first call, allocator)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def float64_bound(problem, inputs64, ref, model: BoundModel) -> torch.Tensor:
    """The bound as computed before: float64 Σ|a·b|, then c_out·ulp_T(ref) as a tensor of its own."""
    accumulation = product_sum_parts(problem, magnitude(problem, inputs64)).parts[0]
    return accumulation.evaluate(model).add_(metrics.ulp(ref, problem.out_dtype).mul_(model.c_out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    retain_freed_memory()  # as runner.run does: a repeat reuses the pages the last one freed
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {load:.2f}; "
          f"median of {args.repeat}")
    columns = ("reference", "bound", "in compare", "total ÷ ref", "scanned ÷ ref", "written ÷ ref", "float64 ÷ ref")
    print(f"{'shape':<38}" + "".join(f"{c:>14}" for c in columns) + "  magnitude in")
    model = BoundModel()
    for name, (op, direction, dtype, layout, params) in SHAPES.items():
        problem = make_problem(op, direction, dtype, layout, params, (-1.0, 1.0), seed=1)
        inputs = generate_inputs(problem)
        inputs64 = {key: t.to(torch.float64) for key, t in inputs.items()}
        ref = compute_reference(problem, inputs64, ReferenceOptions()).value
        out = ref.to(metrics.get_format(problem.out_dtype).torch_dtype)
        part = error_bounds(problem, inputs64)[problem.primary_output]
        unformed = bound_for_output(part, model, ref, out)
        written = unformed.values
        reference = median_seconds(lambda: compute_reference(problem, inputs64, ReferenceOptions()), args.repeat)
        bound = median_seconds(
            lambda: bound_for_output(error_bounds(problem, inputs64)[problem.primary_output], model, ref, out),
            args.repeat)
        in_pass = median_seconds(lambda: metrics.compare(ref, out, problem.out_dtype, bound=unformed), args.repeat)
        after = median_seconds(lambda: metrics.compare(ref, out, problem.out_dtype, bound=written), args.repeat)
        forming = max(in_pass - after, 0.0)
        earlier = median_seconds(
            lambda: error_bounds(problem, inputs64)[problem.primary_output].evaluate(model, ref), args.repeat)
        old = median_seconds(lambda: float64_bound(problem, inputs64, ref, model), args.repeat)
        cpu = torch.device("cpu")
        widening = median_seconds(lambda: reference_inputs(inputs, cpu), args.repeat)
        scanning = median_seconds(lambda: reference_inputs(inputs, cpu, scanned=inputs), args.repeat)
        scanned64 = reference_inputs(inputs, cpu, scanned=inputs)  # each repeat reads its recorded scan
        scanned = median_seconds(
            lambda: bound_for_output(error_bounds(problem, scanned64)[problem.primary_output], model, ref, out),
            args.repeat) + max(scanning - widening, 0.0)
        path = f32_premises(problem, inputs64) or "f32"
        cells = (f"{reference * 1e3:.1f}ms", f"{bound * 1e3:.1f}ms", f"{forming * 1e3:.1f}ms",
                 f"{(bound + forming) / reference:.2f}", f"{(scanned + forming) / reference:.2f}",
                 f"{earlier / reference:.2f}", f"{old / reference:.2f}")
        print(f"{name:<38}" + "".join(f"{c:>14}" for c in cells) + f"  {path}")


if __name__ == "__main__":
    main()
