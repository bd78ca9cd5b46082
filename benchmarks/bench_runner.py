"""Where a case's time goes: input generation vs kernel vs float64 reference
vs error bound vs the accumulate = k reference, for realistic shapes.

    .venv/bin/python benchmarks/bench_runner.py [--device cpu] [--repeats 3] [--dtypes f32,f16]

Every figure is the median of --repeats runs of run() (one kernel call each,
as a test does); the "kernel" column is the median of an adaptive timing
loop (runner.TimingOptions) and its TFLOP/s. Input generation includes the
float64 draw, the correct rounding, the float64 copy for the reference and
the transfer to the device. "bound" is what run() times: for conv and gemm,
Σ|a·b| and the bound's recipe; the comparison forms the bound in its own pass
(benchmarks/bench_bound.py counts that part).
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from e2egen.runner import BoundModel, ReferenceOptions, TimingOptions, make_problem, run, select_device  # noqa: E402

SHAPES = [
    # ResNet-50 conv2_x 3x3, 64 -> 64 channels at 56x56, batch 2.
    ("resnet50 3x3-64", "conv2d", {"n": 2, "c": 64, "k": 64, "hw": 56, "kernel": 3, "pad": 1}, ("fwd", "bwd_data", "bwd_weight"), "nhwc"),
    # BERT-base FFN up-projection, 4 sequences of 128 tokens: 512 x 768 -> 512 x 3072.
    ("bert ffn1", "gemm", {"m": 512, "n": 3072, "k": 768}, ("fwd",), "nt"),
]
ACCUMULATE = (4, 32)


def median_of(repeats: int, fn) -> float:
    return statistics.median(fn() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtypes", default="f32,bf16")
    args = parser.parse_args()
    device = select_device(args.device)
    print(f"# torch {torch.__version__}, device {device}, {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}")
    header = ["shape", "dir", "dtype", "GFLOP", "inputs", "kernel", "TFLOP/s", "reference", "bound"]
    header += [f"acc={k}" for k in ACCUMULATE] + [f"acc={k}/ref" for k in ACCUMULATE]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, op, params, directions, layout in SHAPES:
        for direction in directions:
            for dtype in args.dtypes.split(","):
                problem = make_problem(op, direction, dtype, layout, params, (-1.0, 1.0), seed=1)
                timed = run(problem, device=device, timing=TimingOptions(min_time_s=1.0))
                runs = [run(problem, device=device, bound=BoundModel()) for _ in range(args.repeats)]
                column = {key: statistics.median(r.timings[key] for r in runs) for key in ("inputs", "kernel", "reference", "bound")}
                accumulate = {k: median_of(args.repeats, lambda k=k: run(problem, device=device, reference=ReferenceOptions(accumulate=k)).timings["reference"])
                              for k in ACCUMULATE}
                row = [name, direction, dtype, f"{problem.flops / 1e9:.2f}", f"{column['inputs'] * 1e3:.1f} ms",
                       f"{timed.kernel_timing.median_s * 1e3:.1f} ms", f"{timed.kernel_timing.tflops:.3f}",
                       f"{column['reference'] * 1e3:.1f} ms", f"{column['bound'] * 1e3:.1f} ms"]
                row += [f"{accumulate[k] * 1e3:.0f} ms" for k in ACCUMULATE]
                row += [f"{accumulate[k] / column['reference']:.1f}x" for k in ACCUMULATE]
                print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
