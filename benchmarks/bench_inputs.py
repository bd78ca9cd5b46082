"""Input generation against a plain torch.rand draw of the same tensors, in the same process.

    .venv/bin/python benchmarks/bench_inputs.py [--repeats 5]

"inputs" is what run() times as inputs: generate_inputs (the counter-based draw of runner/draws.py, f32 or
float64, in the range; exact rounding to the input format) plus the float64 copies the reference gets, with
|inputs| as f32 scanned in the same pass where the op's bound reads them (runner/magnitude.widened_with_scan;
every case here, attention's Q, K and V). "scan together ÷ apart" compares that widening with the way before
the thirteenth round of issue 20: the float64 copies alone, then the scan of each scanned copy
(magnitude._narrowed), the baseline.
Baselines: torch.rand of the same shapes in float64 and in the input dtype (the cheapest possible draw).
Goal (issue 20): inputs <= 2x a plain draw. Every figure is a median of --repeats, runs interleaved, with
freed memory kept for reuse as runner.run keeps it (runner/host_memory.py), so that no figure is mostly
the kernel zero-filling fresh pages.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from e2egen.runner import make_problem  # noqa: E402
from e2egen.runner.dtypes import storage_dtype  # noqa: E402
from e2egen.runner.host_memory import retain_freed_memory  # noqa: E402
from e2egen.runner import magnitude  # noqa: E402
from e2egen.runner.inputs import _round_to_odd_f32, generate_inputs, reference_inputs  # noqa: E402

CASES = [
    ("gemm 1024x1024x16384", "gemm", "f32", "nn", {"m": 1024, "n": 1024, "k": 16384}),
    ("gemm 256x12288x4096", "gemm", "f16", "nt", {"m": 256, "n": 12288, "k": 4096}),
    ("gemm 256x12288x4096", "gemm", "bf16", "nt", {"m": 256, "n": 12288, "k": 4096}),
    ("resnet50 3x3-64 n=8", "conv2d", "f16", "nhwc", {"n": 8, "c": 64, "k": 64, "hw": 56, "kernel": 3, "pad": 1}),
    # attention shapes its draws (adjust_inputs): a float64 draw rounded by runner/narrowing.py
    ("attention prefill 32 heads s1024 d128", "attention", "bf16", "bhsd",
     {"batch": 1, "heads_q": 32, "heads_kv": 32, "seq_q": 1024, "seq_k": 1024, "head_dim_qk": 128}),
]


def seconds(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    retain_freed_memory()  # as runner.run does: a repeat reuses the pages the last one freed
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads; median of {args.repeats}")
    header = ["case", "dtype", "Melements", "inputs", "rand f64", "rand dtype", "inputs/rand f64", "inputs/rand dtype",
              "ns/element", "torch rounding path ns/element", "scan together ÷ apart"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for label, op, dtype, layout, params in CASES:
        problem = make_problem(op, "fwd", dtype, layout, params, (-1.0, 1.0), seed=1)
        shapes = list(problem.input_shapes.values())
        target = storage_dtype(dtype)
        generator = torch.Generator().manual_seed(0)
        scanned = magnitude.scanned_inputs(problem)
        drawn = generate_inputs(problem)
        cpu = torch.device("cpu")
        work = {
            "inputs": lambda: reference_inputs(generate_inputs(problem), cpu, scanned=scanned),
            "together": lambda: reference_inputs(drawn, cpu, scanned=scanned),
            "apart": lambda: [magnitude._narrowed(t) for name, t in reference_inputs(drawn, cpu).items()
                              if name in scanned],
            "rand f64": lambda: [torch.rand(s, generator=generator, dtype=torch.float64) for s in shapes],
            "rand dtype": lambda: [torch.rand(s, generator=generator, dtype=target) for s in shapes],
        }
        for fn in work.values():  # first touch of the memory, numba's cached kernels
            fn()
        samples = {key: [] for key in work}
        for _ in range(args.repeats):
            for key, fn in work.items():
                samples[key].append(seconds(fn))
        median = {key: statistics.median(values) for key, values in samples.items()}
        elements = problem.input_elements
        torch_path = "-"
        if target in (torch.float16, torch.bfloat16):  # the fallback without numba, on one input
            values = torch.rand(shapes[0], generator=generator, dtype=torch.float64)
            per = statistics.median(seconds(lambda: _round_to_odd_f32(values).to(target)) for _ in range(3))
            torch_path = f"{per / values.numel() * 1e9:.1f}"
        row = [label, dtype, f"{elements / 1e6:.1f}", f"{median['inputs'] * 1e3:.0f} ms",
               f"{median['rand f64'] * 1e3:.0f} ms", f"{median['rand dtype'] * 1e3:.0f} ms",
               f"{median['inputs'] / median['rand f64']:.2f}x", f"{median['inputs'] / median['rand dtype']:.2f}x",
               f"{median['inputs'] / elements * 1e9:.1f}", torch_path,
               f"{median['together'] / median['apart']:.2f} ({median['together'] * 1e3:.0f} / {median['apart'] * 1e3:.0f} ms)"]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
