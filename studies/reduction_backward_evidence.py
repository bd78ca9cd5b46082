"""Evidence for the reductions' backward (bwd_data: sum, mean, max, cumsum; docs/concepts/reduction-bound.md):
torch's autograd and kernels written apart from it must pass; each planted bug must fail wherever it changes a
result by more than an ulp of the output format. Each run is judged as a generated case is (e2egen.judge: the
default verdict), and beside it torch.testing.assert_close with the dtype's default tolerances on the very
same output. Writes docs/evidence/reduction-backward.md.

    .venv/bin/python -m e2egen.studies.reduction_backward_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from e2egen import metrics
from e2egen.api import judge
from e2egen.files import write_text_atomically
from e2egen.runner import run
from e2egen.runner.dtypes import storage_dtype
from e2egen.runner.ops.reductions import kernels

IMPL = "e2egen.runner.ops.reductions.kernels:"
OPS = ("sum", "mean", "max", "cumsum")
# (shape keys, layout): a row, a column (strided), the channels (channels_last), a full reduction
CASES = {
    "rows 16×1000": ({"shape": [16, 1000]}, "contiguous"),
    "columns 300×24, strided": ({"shape": [300, 24], "axis": 0}, "strided"),
    "channels 2×16×6×6, channels_last": ({"shape": [2, 16, 6, 6], "axis": 1}, "channels_last"),
    "everything 8×8×64": ({"shape": [8, 8, 64], "axis": [0, 1, 2]}, "contiguous"),
}
RANGES = {"[-1, 1]": (-1.0, 1.0), "[1, 5]": (1.0, 5.0)}
DTYPES = ("f32", "f16", "bf16")
# planted bugs that are bugs in some formats only (elsewhere the same arithmetic is correct)
BUG_DTYPES = {"half_reciprocal_mean_backward": ("f32",), "input_format_cumsum_backward": ("f16", "bf16")}


@dataclass
class Tally:
    runs: int = 0
    failed: int = 0  # by e2egen's default verdict
    peer_failed: int = 0  # by assert_close
    visible: int = 0  # runs where the output is more than an ulp from the exact result somewhere
    caught_visible: int = 0
    peer_caught_visible: int = 0
    misses: list[str] = field(default_factory=list)


def _shape(op: str, case: str) -> tuple[dict, str]:
    shape, layout = CASES[case]
    if op == "cumsum":
        if isinstance(shape.get("axis"), list):
            return {}, layout
        shape = {"shape": shape["shape"], "axis": shape.get("axis", -1)}
    return shape, layout


def _beyond_an_ulp(out: torch.Tensor, ref: torch.Tensor, dtype: str) -> bool:
    return bool(((out.double() - ref).abs() > metrics.ulp(ref, dtype)).any())


def _peer_fails(out: torch.Tensor, ref: torch.Tensor) -> bool:
    try:
        torch.testing.assert_close(out, ref.to(out.dtype))
    except AssertionError:
        return True
    return False


def evaluate(seeds: int) -> dict[tuple[str, str], Tally]:
    """(op, kernel) -> its tally over every case, range, dtype and seed."""
    tallies: dict[tuple[str, str], Tally] = {}
    for op in OPS:
        names = ("torch", *kernels.CORRECT_BACKWARD[op], *kernels.WRONG_BACKWARD.get(op, ()))
        for name in names:
            tally = tallies.setdefault((op, name), Tally())
            impl = None if name == "torch" else IMPL + name
            for case in CASES:
                shape, layout = _shape(op, case)
                if not shape:
                    continue
                for range_name, data_range in RANGES.items():
                    for dtype in BUG_DTYPES.get(name, DTYPES):
                        for seed in range(1, seeds + 1):
                            outcome = judge(impl, op, shape, dtype, direction="bwd_data", layout=layout,
                                            data_range=data_range, seed=seed)
                            result = run(outcome.case.problem(), impl=impl, device="cpu").primary
                            out = result.out.to(storage_dtype(dtype)) if result.out.dtype != storage_dtype(dtype) else result.out
                            visible = _beyond_an_ulp(result.out, result.ref, dtype)
                            peer = _peer_fails(out, result.ref)
                            tally.runs += 1
                            tally.failed += not outcome.passed
                            tally.peer_failed += peer
                            tally.visible += visible
                            tally.caught_visible += visible and not outcome.passed
                            tally.peer_caught_visible += visible and peer
                            if visible and outcome.passed:
                                tally.misses.append(f"{case} {range_name} {dtype} seed {seed}")
    return tallies


def render(tallies: dict[tuple[str, str], Tally], seeds: int, seconds: float) -> str:
    correct = {(op, name) for op in OPS for name in ("torch", *kernels.CORRECT_BACKWARD[op])}
    lines = ["# The reductions' backward: evidence", "",
             f"`.venv/bin/python -m e2egen.studies.reduction_backward_evidence --seeds {seeds}` "
             f"({seconds:.0f} s; torch {torch.__version__}, {platform.machine()}). Every kernel runs on four "
             f"geometries ({', '.join(CASES)}; cumsum on the first three), two ranges "
             f"({', '.join(RANGES)}), f32, f16 and bf16, seeds 1–{seeds}, each judged by e2egen's default verdict "
             "(`e2egen.judge`) and by `torch.testing.assert_close` with the dtype's tolerances on the same output. "
             "A planted bug that is one in some formats only runs in those (an f32 running sum is a correct f32 "
             "kernel). \"Beyond an ulp\": runs whose output lies more than an ulp of its format from the exact "
             "result somewhere.", "",
             "| op | kernel | kind | runs | e2egen fails | assert_close fails | beyond an ulp | e2egen catches of those "
             "| assert_close catches of those |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    totals = {"correct": [0, 0, 0], "wrong": [0, 0, 0], "bugs": [0, 0, 0]}
    for (op, name), tally in tallies.items():
        kind = "correct" if (op, name) in correct else "wrong"
        lines.append(f"| {op} | `{name}` | {kind} | {tally.runs} | {tally.failed} | {tally.peer_failed} | {tally.visible} "
                     f"| {tally.caught_visible} | {tally.peer_caught_visible} |")
        if kind == "correct":
            totals["correct"][0] += tally.runs
            totals["correct"][1] += tally.failed
            totals["correct"][2] += tally.peer_failed
        else:
            totals["wrong"][0] += tally.visible
            totals["wrong"][1] += tally.caught_visible
            totals["wrong"][2] += tally.peer_caught_visible
            totals["bugs"][0] += tally.runs
            totals["bugs"][1] += tally.failed
            totals["bugs"][2] += tally.peer_failed
    runs, failed, peer = totals["correct"]
    visible, caught, peer_caught = totals["wrong"]
    bug_runs, bug_caught, bug_peer = totals["bugs"]
    lines += ["", f"Correct kernels: {failed} false failures in {runs} runs (assert_close: {peer}).",
              f"Planted bugs: {bug_caught} / {bug_runs} runs caught (assert_close: {bug_peer}); of the runs beyond an "
              f"ulp, {caught} / {visible} (assert_close: {peer_caught} / {visible}).", ""]
    misses = [(op, name, miss) for (op, name), tally in tallies.items() if (op, name) not in correct
              for miss in tally.misses]
    if misses:
        lines += ["Bugs beyond an ulp that passed:", ""] + [f"- {op} `{name}`: {miss}" for op, name, miss in misses] + [""]
    lines += ["A bug within an ulp cannot be told from a correct kernel's rounding: the n − 1 divisor of a mean over "
              "4,096 elements moves it by 2.4e-4 relative, below an f16 ulp; 1/N rounded to f16 is exact where N is "
              "a power of two; ties, which the max backward splits, are rare in f32 draws.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("docs/evidence/reduction-backward.md"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    tallies = evaluate(args.seeds)
    text = render(tallies, args.seeds, time.perf_counter() - started)
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
