"""e2egen per case against a plain harness on the same problem, per family, with peak memory, the comparison against
its floor, and the CPU's ISA.

    .venv/bin/python benchmarks/bench_vs_harness.py [--repeat 3] [--cases NAME ...]
    E2EGEN_EMULATE_CPU=avx2 ATEN_CPU_CAPABILITY=avx2 NUMBA_CPU_NAME=haswell .venv/bin/python benchmarks/bench_vs_harness.py

The plain harness is what a FlagGems-style accuracy test does: inputs by torch.randn, the kernel, a float64
reference of the same op, torch.testing.assert_close with the dtype's default tolerances. e2egen is
e2egen.judge on the same op, shape and dtype with torch's kernel: its inputs, probes (from the shipped profile
where it holds the cell), kernel, float64 reference, bound and comparison, the default verdict. Each run is a
fresh interpreter that has imported torch and e2egen: wall time of the call alone, and the peak RSS above the
interpreter's, against the kernel's working set (its inputs and outputs in their formats). --repeat runs of
each, min and median; the ratio is of the medians. Prints a markdown table and the CPU path it ran on, then
the comparison's time against its floor on the same path (benchmarks/bench_metrics.py's rows).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# name: (op, shape keys, dtype, direction)
CASES = {
    "layer_norm f16 4096x4096": ("layer_norm", {"shape": [4096, 4096]}, "f16", "fwd"),
    "exp f16 16M": ("exp", {"shape": [4096, 4096]}, "f16", "fwd"),
    "attention f16 s2048 h8 d128": ("attention", {"batch": 1, "heads_q": 8, "heads_kv": 8, "seq_q": 2048, "seq_k": 2048,
                                                  "head_dim_qk": 128, "head_dim_v": 128}, "f16", "fwd"),
    "conv2d bwd_weight bf16 56x56 3x3 64": ("conv2d", {"n": 2, "c": 64, "k": 64, "hw": [56, 56], "kernel": 3, "pad": 1},
                                            "bf16", "bwd_weight"),
    "gemm f16 1024x1024x4096": ("gemm", {"m": 1024, "n": 1024, "k": 4096}, "f16", "fwd"),
}
CHILD = r"""
import json, math, resource, sys, time
import torch, e2egen
from e2egen.runner.kernel_paths import apply_emulation
apply_emulation()
op, shape, dtype, direction, side = json.loads(sys.argv[1])
TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
F = torch.nn.functional

def harness():
    torch.manual_seed(0)
    if op == "layer_norm":
        x = torch.randn(shape["shape"], dtype=TORCH)
        out = F.layer_norm(x, x.shape[-1:]); ref = F.layer_norm(x.double(), x.shape[-1:]); ins = [x]
    elif op == "exp":
        x = torch.randn(shape["shape"], dtype=TORCH); out = torch.exp(x); ref = torch.exp(x.double()); ins = [x]
    elif op == "attention":
        q, k, v = (torch.randn(shape["batch"], shape["heads_q"], shape["seq_q"], shape["head_dim_qk"], dtype=TORCH)
                   for _ in range(3))
        out = F.scaled_dot_product_attention(q, k, v)
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double()); ins = [q, k, v]
    elif op == "conv2d":
        x = torch.randn(shape["n"], shape["c"], *shape["hw"], dtype=TORCH)
        w_shape = (shape["k"], shape["c"], shape["kernel"], shape["kernel"])
        dy = torch.randn(shape["n"], shape["k"], *shape["hw"], dtype=TORCH)
        out = torch.nn.grad.conv2d_weight(x, w_shape, dy, padding=shape["pad"])
        ref = torch.nn.grad.conv2d_weight(x.double(), w_shape, dy.double(), padding=shape["pad"]); ins = [x, dy]
    else:
        a = torch.randn(shape["m"], shape["k"], dtype=TORCH); b = torch.randn(shape["k"], shape["n"], dtype=TORCH)
        out = a @ b; ref = a.double() @ b.double(); ins = [a, b]
    try:
        torch.testing.assert_close(out, ref.to(out.dtype))
        passed = True
    except AssertionError:
        passed = False
    working = sum(t.numel() * t.element_size() for t in [*ins, out])
    return passed, working

base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
started = time.perf_counter()
if side == "harness":
    passed, working = harness()
else:
    outcome = e2egen.judge(None, op, shape, dtype, direction=direction)
    passed, working = outcome.passed, 0
wall = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"wall": wall, "above": peak - base, "passed": passed, "working": working}))
"""


def _run(case: tuple, side: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps([*case, side])], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    if done.returncode:
        raise SystemExit(f"{case} {side}: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cpu_path() -> str:
    probe = "from e2egen.runner.kernel_paths import apply_emulation, describe; apply_emulation(); print(describe())"
    path = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False)
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in flags.splitlines() if line.startswith("model name")), "?")
    return f"{name}; {path.stdout.strip() or path.stderr.strip()[-200:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", nargs="*", choices=list(CASES), default=list(CASES))
    args = parser.parse_args(argv)
    print(f"CPU: {_cpu_path()}")
    print("| case | e2egen s (min / median) | harness s (min / median) | e2egen ÷ harness | e2egen peak MiB | "
          "harness peak MiB | kernel working set MiB | e2egen verdict | assert_close |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.cases:
        runs = {side: [_run(CASES[name], side) for _ in range(args.repeat)] for side in ("e2egen", "harness")}
        walls = {side: [r["wall"] for r in rs] for side, rs in runs.items()}
        median = {side: statistics.median(w) for side, w in walls.items()}
        peak = {side: max(r["above"] for r in rs) / 2 ** 20 for side, rs in runs.items()}
        working = runs["harness"][0]["working"] / 2 ** 20
        print(f"| {name} | {min(walls['e2egen']):.2f} / {median['e2egen']:.2f} | "
              f"{min(walls['harness']):.2f} / {median['harness']:.2f} | {median['e2egen'] / median['harness']:.2f} | "
              f"{peak['e2egen']:.0f} | {peak['harness']:.0f} | {working:.0f} | "
              f"{'pass' if runs['e2egen'][0]['passed'] else 'FAIL'} | {'pass' if runs['harness'][0]['passed'] else 'FAIL'} |",
              flush=True)
    _compare_floor()
    return 0


def _compare_floor() -> None:
    """The comparison against its floor on the same CPU path (benchmarks/bench_metrics.py, 16M f16 elements)."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_metrics.py"), "--json", "--repeat", "5"],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode:
        print(f"compare against its floor: failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        return
    run = json.loads(done.stdout.strip().splitlines()[-1])
    print("\n| comparison, 16M f16 (bench_metrics.py) | ms | x its floor (one pass over what it reads) |")
    print("| --- | --- | --- |")
    for name, floor, seconds in run["rows"]:
        if "numba" in name or "assert_close" in name:
            print(f"| {name} | {seconds * 1e3:.0f} | {seconds / run['floors'][floor]:.2f} |")


if __name__ == "__main__":
    raise SystemExit(main())
