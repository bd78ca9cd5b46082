"""The comparison's pass with and without its stack alignment, at each place the stack can start.

    python benchmarks/bench_stack_alignment.py                # 16K cached elements, one core
    python benchmarks/bench_stack_alignment.py -n 65536 --repeat 300

The comparison's vectorised loop (metrics/fused_numba.py, _reduce_chunk inside _kernel) keeps more values
than the CPU has vector registers, and LLVM spills them with unaligned moves; fused_numba._align_stack()
makes the compiled function align its stack first. Where the stack starts is set per process by address
randomisation and by the size of the environment, which the kernel's frame inherits. Here each measurement
runs in a fresh interpreter under `setarch -R` (randomisation off, where the machine allows it), with the
environment padded by 0, 16, 32 and 48 bytes, so that the four 16-byte-aligned stack positions a 64-byte
spill can meet are all taken. In each interpreter the pass is compiled twice from the same source: as
shipped, and with _align_stack replaced by a no-op (the named baseline, the code before the change). Each
figure is the best of --samples medians of --repeat calls, in ns per element, over n cached elements on
one core (the interpreter is pinned to one CPU where sched_setaffinity exists).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_tool_work import positive  # noqa: E402

PADS = (0, 16, 32, 48)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=positive, default=1 << 14, help="elements (default 16K: in cache)")
    parser.add_argument("--repeat", type=positive, default=400, help="calls per sample (default 400)")
    parser.add_argument("--samples", type=positive, default=7, help="samples per figure (default 7)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one interpreter's figures
    return parser.parse_args()


def measure_here(args: argparse.Namespace) -> dict[str, float]:
    """ns per element of the pass as shipped and without its alignment, with a bound and without."""
    import numba
    import numpy as np
    import torch
    from numba.core import types as numba_types
    from numba.extending import intrinsic

    from e2egen.metrics import fused_numba
    from e2egen.metrics.formats import float_format

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    @intrinsic
    def no_alignment(typingctx):
        def codegen(context, builder, signature, args):
            return context.get_dummy_value()
        return numba_types.none(), codegen

    source = fused_numba._reduce_chunk.py_func
    options = {k: v for k, v in fused_numba._reduce_chunk.targetoptions.items() if k not in ("cache", "nopython")}
    unaligned = types.FunctionType(source.__code__, {**source.__globals__, "_align_stack": no_alignment},
                                   "unaligned")
    passes = {"aligned": numba.njit(**options)(source), "unaligned": numba.njit(**options)(unaligned)}

    fmt = float_format("f16")
    arguments = fused_numba._pass_args(fmt, False, 1e-3, 0)
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(args.n)
    out_bits = torch.from_numpy(ref).to(torch.float16).view(torch.int16).numpy()
    bounds = {"bound": np.abs(ref) * 2.0 ** -11, "no bound": None}

    figures = {}
    for name, compiled in passes.items():
        for label, bound in bounds.items():
            def call():
                return compiled(ref, out_bits, bound, None, 0, args.n, **arguments)

            assert call() == passes["aligned"](ref, out_bits, bound, None, 0, args.n, **arguments)
            samples = []
            for _ in range(args.samples):
                started = time.perf_counter()
                for _ in range(args.repeat):
                    call()
                samples.append((time.perf_counter() - started) / args.repeat / args.n * 1e9)
            figures[f"{name}, {label}"] = min(samples)
    return figures


def main() -> None:
    args = parse_args()
    if args.child:
        print(json.dumps(measure_here(args)))
        return
    setarch = shutil.which("setarch")
    prefix = [setarch, "-R"] if setarch and subprocess.run([setarch, "-R", "true"]).returncode == 0 else []
    command = [sys.executable, __file__, "--child", "-n", str(args.n), "--repeat", str(args.repeat),
               "--samples", str(args.samples)]
    rows = []
    for pad in PADS:
        env = {**os.environ, "E2EGEN_BENCH_PAD": "x" * pad, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(prefix + command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            sys.exit(f"a measuring interpreter failed:\n{done.stderr.strip()}")
        rows.append((pad, json.loads(done.stdout.strip().splitlines()[-1])))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# {args.n} cached f16 elements on one core, ns per element (best of {args.samples} x {args.repeat} calls); "
          f"randomisation {'off (setarch -R)' if prefix else 'on: setarch -R unavailable, so pads move nothing'}; "
          f"load average {load:.1f}")
    columns = list(rows[0][1])
    print("| environment pad | " + " | ".join(columns) + " |")
    print("|" + " --- |" * (len(columns) + 1))
    for pad, figures in rows:
        print(f"| {pad} bytes | " + " | ".join(f"{figures[c]:.2f}" for c in columns) + " |")
    for label in ("bound", "no bound"):
        spread = {name: [figures[f"{name}, {label}"] for _, figures in rows] for name in ("aligned", "unaligned")}
        print(f"{label}: aligned {min(spread['aligned']):.2f}-{max(spread['aligned']):.2f}, "
              f"unaligned (baseline) {min(spread['unaligned']):.2f}-{max(spread['unaligned']):.2f}; "
              f"mean aligned / unaligned {statistics.mean(spread['aligned']) / statistics.mean(spread['unaligned']):.2f}")


if __name__ == "__main__":
    main()
