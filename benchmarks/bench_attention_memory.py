"""Attention's peak memory and time per case, against the kernel's working set and the memory estimate.

    .venv/bin/python benchmarks/bench_attention_memory.py [--cases NAME ...] [--chunk-scores N]

Each case runs alone in a fresh interpreter, judged as a generated case is (e2egen.judge, torch's SDPA, default
verdict): its wall time, its peak RSS (ru_maxrss: the process's, the interpreter and torch included, measured
against an interpreter that only imported them), the kernel's working set (its inputs and outputs in their
stored formats), the kernel's own peak when a harness calls it alone (randn inputs, one call) and
runner/memory.peak_bytes's estimate. --chunk-scores sets the score elements per chunk of
the reference and the bound (runner/ops/attention/params.CHUNK_SCORES; a huge value: one chunk, the whole
case at once, as before chunking). Prints a markdown table with the CPU (its ISA) that produced it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "sq4096 sk4096 h8 d128": {"batch": 1, "heads_q": 8, "heads_kv": 8, "seq_q": 4096, "seq_k": 4096,
                              "head_dim_qk": 128, "head_dim_v": 128},
    "sq512 sk32768 gqa 8/2 causal": {"batch": 1, "heads_q": 8, "heads_kv": 2, "seq_q": 512, "seq_k": 32768,
                                     "head_dim_qk": 128, "head_dim_v": 128, "causal": True,
                                     "align": "bottom-right", "return_lse": True},
    "decode sk131072 gqa 32/8": {"batch": 1, "heads_q": 32, "heads_kv": 8, "seq_q": 1, "seq_k": 131072,
                                 "head_dim_qk": 128, "head_dim_v": 128, "return_lse": True},
}
CHILD = r"""
import json, resource, sys, time
import torch, e2egen
from e2egen.runner.ops.attention import params as attention_params
from e2egen.runner import make_problem
from e2egen.runner.memory import peak_bytes
from e2egen.runner.options import BoundModel, ReferenceOptions
from e2egen.runner.dtypes import element_size
import math
shape, chunk, mode = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if mode == "baseline":
    print(json.dumps({"base": base})); sys.exit()
if mode == "kernel":  # the kernel alone, as a harness calls it: randn inputs in the format, one call
    from e2egen.runner.ops.attention.kernels import torch_attention
    params = make_problem("attention", "fwd", "f16", "bhsd", shape, (-1.0, 1.0), 0).params
    q, k, v = (torch.randn(s, dtype=torch.float16) for s in (params.shapes()[n] for n in ("q", "k", "v")))
    torch_attention(q, k, v, scale=params.softmax_scale, causal=params.causal, align=params.align,
                    return_lse=params.return_lse)
    print(json.dumps({"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024})); sys.exit()
attention_params.CHUNK_SCORES = chunk
problem = make_problem("attention", "fwd", "f16", "bhsd", shape, (-1.0, 1.0), 0)
working = sum(math.prod(s) * element_size(problem.dtype) for s in problem.input_shapes.values())
working += sum(math.prod(o.shape) * element_size(o.dtype) for o in problem.outputs.values())
estimate = peak_bytes(problem, ReferenceOptions(), BoundModel(), same_device=True)
started = time.perf_counter()
outcome = e2egen.judge(None, "attention", shape, "f16")
wall = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"wall": wall, "peak": peak, "working": working, "estimate": estimate, "status": outcome.status,
                  "reason": (outcome.reason or "")[:200]}))
"""


def _child(shape: dict, chunk: int, mode: str = "judge") -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(shape), str(chunk), mode],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cpu() -> str:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in flags.splitlines() if line.startswith("model name")), "?")
    return f"{name}, {'AVX-512' if ' avx512f' in flags else 'AVX2' if ' avx2' in flags else 'no AVX2'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", choices=list(CASES), default=list(CASES))
    parser.add_argument("--chunk-scores", type=int, default=1 << 22)
    args = parser.parse_args(argv)
    base = _child({}, 0, "baseline")["base"]
    print(f"CPU: {_cpu()}; interpreter with torch and e2egen imported: {base / 2 ** 20:.0f} MiB; "
          f"chunk: {args.chunk_scores:,} score elements")
    print("| case | verdict | wall s | peak RSS MiB (above the interpreter) | kernel working set MiB | "
          "peak / working set | kernel alone MiB | peak / kernel alone | estimate MiB | estimate / peak |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.cases:
        result = _child(CASES[name], args.chunk_scores)
        if "error" in result:
            print(f"| {name} | error: {result['error']} | | | | | | |")
            continue
        above = result["peak"] - base
        kernel = _child(CASES[name], args.chunk_scores, "kernel")["peak"] - base
        print(f"| {name} | {result['status']} | {result['wall']:.1f} | {above / 2 ** 20:.0f} | "
              f"{result['working'] / 2 ** 20:.1f} | {above / result['working']:.1f} | {kernel / 2 ** 20:.0f} | "
              f"{above / kernel:.1f} | {result['estimate'] / 2 ** 20:.0f} | {result['estimate'] / result['peak']:.2f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
