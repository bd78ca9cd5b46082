"""The float64 reference and the bound on the kernel's device against the same on the CPU, per family.

    .venv/bin/python benchmarks/bench_device_reference.py [--device cuda] [--repeat 3] [--cases NAME ...]

Each case runs through runner.run as a GPU nightly runs it (`e2e-reference-device device`, the nightly's
default on CUDA: sweep.py) and as a PR run does (reference.device = "cpu"), the kernel on --device both times,
with the default bound: the reference's and the bound's seconds (runner.run's timings), min of --repeat runs,
and the ratio. On a machine without CUDA, `--device cpu` runs the same code path with both references on the
CPU (a check of the script, not a measurement); `--device cuda` there exits 2. Prints a markdown table and the
device it ran on.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from e2egen.runner import BoundModel, make_problem, run  # noqa: E402  (after the path: run from a checkout)
from e2egen.runner.options import ReferenceOptions  # noqa: E402

# name: (op, direction, dtype, layout, shape keys)
CASES = {
    "gemm f16 2048x2048x4096": ("gemm", "fwd", "f16", "nn", {"m": 2048, "n": 2048, "k": 4096}),
    "conv2d bwd_weight bf16 56x56 3x3 64": ("conv2d", "bwd_weight", "bf16", "nhwc",
                                            {"n": 8, "c": 64, "k": 64, "hw": [56, 56], "kernel": 3, "pad": 1}),
    "attention f16 s2048 h8 d128": ("attention", "fwd", "f16", "bhsd",
                                    {"batch": 1, "heads_q": 8, "heads_kv": 8, "seq_q": 2048, "seq_k": 2048,
                                     "head_dim_qk": 128, "head_dim_v": 128}),
    "layer_norm f16 4096x4096": ("layer_norm", "fwd", "f16", "contiguous", {"shape": [4096, 4096]}),
    "exp f16 16M": ("exp", "fwd", "f16", "contiguous", {"shape": [4096, 4096]}),
}


def _timed(case: tuple, device: str, reference_device: str, repeat: int) -> dict[str, float]:
    op, direction, dtype, layout, shape = case
    problem = make_problem(op, direction, dtype, layout, shape, (-1.0, 1.0), 0)
    best: dict[str, float] = {}
    for _ in range(repeat):
        result = run(problem, device=device, reference=ReferenceOptions(device=reference_device), bound=BoundModel())
        for part in ("kernel", "reference", "bound"):
            value = result.timings.get(part, float("nan"))
            best[part] = min(best.get(part, value), value)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", nargs="*", choices=list(CASES), default=list(CASES))
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device here: --device cpu checks the script on the CPU", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU (both references on it)"
    print(f"device: {name}; torch {torch.__version__}; min of {args.repeat}")
    print("| case | kernel ms | reference ms: CPU / device | bound ms: CPU / device | reference + bound, CPU ÷ device |")
    print("| --- | --- | --- | --- | --- |")
    for case in args.cases:
        on_cpu = _timed(CASES[case], args.device, "cpu", args.repeat)
        on_device = _timed(CASES[case], args.device, "device", args.repeat)
        cpu_total, device_total = (t["reference"] + t["bound"] for t in (on_cpu, on_device))
        print(f"| {case} | {on_device['kernel'] * 1e3:.1f} | {on_cpu['reference'] * 1e3:.0f} / "
              f"{on_device['reference'] * 1e3:.0f} | {on_cpu['bound'] * 1e3:.0f} / {on_device['bound'] * 1e3:.0f} | "
              f"{cpu_total / device_total:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
