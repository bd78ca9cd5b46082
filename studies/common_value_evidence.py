"""Evidence for the reductions' common-value term (CommonValueSum, docs/concepts/reduction-bound.md): correct
sum and mean kernels in four orders, on adversarial data (a large common value with a narrow spread, sorted
rows, long rows) and on the catalogue's ranges, must stay within the bound; beside it the bound without the
term, which the adversarial data exceed. Two planted bugs (one element dropped, the result scaled by 1 + 2^-12)
show what the term costs in power. Writes docs/evidence/common-value.md.

    .venv/bin/python -m e2egen.studies.common_value_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from e2egen.files import write_text_atomically
from e2egen.runner import BoundModel, make_problem
from e2egen.runner.bound import CommonValueSum
from e2egen.runner.dtypes import storage_dtype
from e2egen.runner.inputs import round_to_storage
from e2egen.runner.ops.reductions import kernels
from e2egen.runner.ops.reductions.bound import reduction_bound

LENGTHS = (1000, 4096, 2 ** 15, 2 ** 16)
# (name, centre, half width, sorted): the catalogue's ranges, then adversarial rows
DATA = (("[-1, 1]", 0.0, 1.0, False), ("[0, 1]", 0.5, 0.5, False), ("[1, 5]", 3.0, 2.0, False),
        ("[1000, 1001]", 1000.5, 0.5, False), ("[1e4 - 1, 1e4 + 1]", 1e4, 1.0, False),
        ("[1, 2] sorted", 1.5, 0.5, True), ("[1000, 1001] sorted", 1000.5, 0.5, True))
DTYPES = ("f32", "f16", "bf16")


def _sequential(values: torch.Tensor) -> torch.Tensor:
    """One element after the other in f32 (numpy's accumulate does no pairwise blocking)."""
    array = values.to(torch.float32).numpy()
    return torch.from_numpy(np.add.accumulate(array, axis=-1, dtype=np.float32)[..., -1].copy())


def _reversed(values: torch.Tensor) -> torch.Tensor:
    return _sequential(values.flip(-1))


ORDERS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sequential": _sequential, "reversed": _reversed,
    "pairwise": lambda v: kernels.pairwise(v.to(torch.float32)),
    "blocked": lambda v: kernels.blocked(v.to(torch.float32)),
}


def _draw(n: int, dtype: str, centre: float, half: float, sort: bool, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    values = torch.rand(4, n, generator=generator, dtype=torch.float64).mul_(2 * half).add_(centre - half)
    values = values.sort(dim=-1).values if sort else values
    return round_to_storage(values, storage_dtype(dtype)).to(torch.float64)


def _ratios(op: str, dtype: str, x64: torch.Tensor, out: torch.Tensor, sort: bool) -> tuple[float, float]:
    """(bound_ratio, bound_ratio without the common-value term) of `out` against x64's exact reduction."""
    params = {"shape": list(x64.shape), "axis": 1}
    problem = make_problem(op, "fwd", dtype, "contiguous", params, (-1.0, 1.0), 0, "pattern" if sort else "uniform")
    ref = problem.numerics.reference(problem, {"x": x64})["out"]
    bound, model = reduction_bound(op, problem, x64), BoundModel(acc="f32")
    without = sum(part.evaluate(model, ref) for part in bound.parts if not isinstance(part, CommonValueSum))
    error = (out - ref).abs()
    with_term = torch.where(error == 0, 0.0, error / bound.evaluate(model, ref))
    return float(with_term.max()), float(torch.where(error == 0, 0.0, error / without).max())


def _output(op: str, dtype: str, total: torch.Tensor, n: int) -> torch.Tensor:
    result = total / np.float32(n) if op == "mean" else total
    return result.to(storage_dtype(dtype)).to(torch.float64)


def study(seeds: int) -> str:
    started = time.perf_counter()
    correct: dict[str, list[float]] = {}
    correct_without: dict[str, list[float]] = {}
    caught: dict[str, list[int]] = {}
    for name, centre, half, sort in DATA:
        for n in LENGTHS:
            for dtype in DTYPES:
                if dtype == "f16" and n * (abs(centre) + half) > 30000:
                    continue  # the sum overflows f16's output
                for seed in range(seeds):
                    x64 = _draw(n, dtype, centre, half, sort, seed)
                    for op in ("sum", "mean"):
                        for order, add in ORDERS.items():
                            total = add(x64)
                            ratio, without = _ratios(op, dtype, x64, _output(op, dtype, total, n), sort)
                            correct.setdefault(name, []).append(ratio)
                            correct_without.setdefault(name, []).append(without)
                        if dtype != "f32":
                            continue  # below an f16 or bf16 output's ulp these bugs change nothing
                        sequential = ORDERS["sequential"]
                        bugs = {"one element dropped": sequential(x64[:, 1:]),
                                "scaled by 1 + 2^-12": sequential(x64) * (1 + 2.0 ** -12)}
                        for bug, total in bugs.items():
                            ratio, without = _ratios(op, dtype, x64, _output(op, dtype, total, n), sort)
                            caught.setdefault(f"{name}|{bug}", []).append(int(ratio > 1))
                            caught.setdefault(f"{name}|{bug}|without", []).append(int(without > 1))
    lines = ["# Evidence: the reductions' common-value term", "",
             "Written by `.venv/bin/python -m e2egen.studies.common_value_evidence "
             f"--seeds {seeds}` ({time.perf_counter() - started:.0f} s on {platform.machine()}, "
             f"{torch.get_num_threads()} threads). The derivation: "
             "[The reductions' error bounds](../concepts/reduction-bound.md).", "",
             "Correct f32-accumulating sum and mean kernels in four orders (sequential, reversed, pairwise, blocked), "
             f"rows of {', '.join(map(str, LENGTHS))} elements, inputs f32, f16 and bf16, {seeds} seeds. Sorted rows are "
             "judged as data that are not drawn independently (a pattern's), so they get the proven term.", "",
             "| data | runs | worst bound_ratio | without the common-value term | over 1 without it |",
             "| --- | --- | --- | --- | --- |"]
    for name, *_ in DATA:
        with_term, without = correct[name], correct_without[name]
        lines.append(f"| {name} | {len(with_term)} | {max(with_term):.3f} | {max(without):.3f} | "
                     f"{sum(r > 1 for r in without)} |")
    lines += ["", "Planted bugs in the sequential kernel, f32, sum and mean, caught (bound_ratio > 1) with the term and "
              "without it (where the bound without it also fails correct kernels, its catches mean little):", "",
              "| data | one element dropped | without the term | scaled by 1 + 2^-12 | without the term |",
              "| --- | --- | --- | --- | --- |"]
    for name, *_ in DATA:
        cells = []
        for bug in ("one element dropped", "scaled by 1 + 2^-12"):
            for suffix in ("", "|without"):
                hits = caught[f"{name}|{bug}{suffix}"]
                cells.append(f"{sum(hits)} / {len(hits)}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines += ["", "A dropped element of [1000, 1001] at N = 65,536 moves the mean by 1/N of it, less than a correct "
              "sequential kernel's own error there: no bound that holds for every order can catch it.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("docs/evidence/common-value.md"))
    args = parser.parse_args(argv)
    text = study(args.seeds)
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
