"""Probes of a gemm→gemm kernel's arithmetic: both products' accumulators and the format the intermediate
A·B is rounded to before ·C. They run on the case's own geometry (a fused kernel picks its tiling by shape),
each on crafted inputs whose exact output every hypothesis predicts, in the style of the reduction probes.

First accumulator (A·B over k): B's column 0 is 1 at three of k's positions (spread: 0, k/2, k-1; adjacent:
0, 1, 2), 0 elsewhere; row i of A carries +1.5·2^15, 2^(15-g_i), -1.5·2^15 there. C's row 0 is all ones, the
rest 0, so out[i, :] = E[i, 0]: 2^(15-g_i), or 0 where an accumulator of fewer than g_i bits lost it.

Second accumulator (R_T(E)·C over n): A's column 0 is 1, B's row 0 is (+1.5·2^15, 1, -1.5·2^15) at three of
n's positions, so every row of E is that row, exact in T; column j of C is (1, 2^(15-g_j), 1) there. out[:, j]
is 2^(15-g_j), or 0.

Intermediate: A[i, 0] = 1 + 2^-(i+1), B[0, 0] = 1, C's row 0 ones: out[i, :] = R_F(1 + 2^-(i+1)) for the
format F the kernel rounds E to. The contract says T; every 1 + 2^-j with j below T's fraction bits is exact in
T, and one that comes back 1 shows a narrower F (the finding `intermediate`, which the default requirement
fails: inputs are never rounded below the case's dtype). A kernel that keeps E wider than T is not told apart
from one that rounds to T here; the bound allows it (RoundedIntermediate).

The accumulator finding is the narrower of the two (Arithmetic has one acc_bits); a note gives both. Wrong
results at the smallest gap (2) or at 1 + 2^-1 are no rounding but a bug (a dropped or doubled product, a
wrong index): `unexplained`. Cases with an element-wise step between the products are not probed (no crafted
value passes a gelu unchanged; GemmGemmOp.unprobed_reason says so).
"""
from __future__ import annotations

from typing import Callable

import torch

from e2egen import metrics
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic, format_of_bits
from e2egen.runner.dtypes import input_format_name
from e2egen.runner.kernels import call_on_values
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.problem import Problem

EXPONENT = 15  # 1.5·2^15 = 49152 fits f16; 2^(15-27) = 2^-12 stays normal in f16
GAPS = tuple(range(2, 28))


def probe_gemm_gemm(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    probe = _Probe(problem, kernel, device, label)
    notes: list[str] = []
    first = probe.first_accumulator(notes)
    second = probe.second_accumulator(notes)
    intermediate = probe.intermediate(notes)
    measured = [bits for bits in (first, second) if bits is not None]
    acc_bits, exact = (min(bits for bits, _ in measured), all(e for _, e in measured)) if measured else (24, False)
    if not measured:
        notes.append("accumulators not probed: f32 assumed")
    return Arithmetic(acc_bits=acc_bits, acc_bits_exact=exact, intermediate=intermediate,
                      probed_with=problem.describe(), notes=tuple(notes), unexplained=tuple(probe.unexplained))


class _Probe:
    def __init__(self, problem: Problem, kernel: Kernel, device: torch.device, label: str):
        self.problem, self.kernel, self.device, self.label = problem, kernel, device, label
        self.params = problem.params
        self.unexplained: list[str] = []
        self.out_format = problem.out_dtype

    def run(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """The kernel's output (float64, rows × columns) on 2-d A, B, C (repeated over the batch), batch 0."""
        lead = self.params.batch_dims
        values = {name: tensor.expand(*lead, *tensor.shape) for name, tensor in (("a", a), ("b", b), ("c", c))}
        out = call_on_values(self.problem, self.kernel, values, self.device, label=self.label)["out"]
        return out.reshape(-1, *out.shape[-2:])[0]

    def _zeros(self, rows: int, columns: int) -> torch.Tensor:
        return torch.zeros(rows, columns, dtype=torch.float64)

    def _width(self, what: str, count: int, capacity: int, notes: list[str],
               outputs: Callable[[tuple[int, int, int], tuple[int, ...]], torch.Tensor]) -> tuple[int, bool] | None:
        """The accumulator width from `outputs(positions, gaps)` (one result per gap), gaps in batches of
        `capacity`, both placements; None when the sum has fewer than 3 terms."""
        if count < 3:
            notes.append(f"{what} accumulator not probed: it sums {count} terms (3 needed)")
            return None
        big = 1.5 * 2.0 ** EXPONENT
        width = GAPS[-1] + 1
        for positions in ((0, count // 2, count - 1), (0, 1, 2)):
            for start in range(0, len(GAPS), capacity):
                gaps = GAPS[start:start + capacity]
                got = outputs(positions, gaps)
                for gap, value in zip(gaps, got.tolist()):
                    expected = 2.0 ** (EXPONENT - gap)
                    if value == expected:
                        continue
                    if value != 0 or gap == GAPS[0]:
                        odd = (f"{what} of +{big:g}, 2^{EXPONENT - gap}, -{big:g} came back {value!r}, expected "
                               f"{expected!r} or 0")
                        if gap == GAPS[0]:
                            self.unexplained.append(odd + " (a dropped or doubled product, a wrong index?)")
                        else:
                            notes.append(f"{what} accumulator: {odd}; width not measured, f32 assumed")
                        return 24, False
                    width = min(width, gap)
                    break
        notes.append(f"{what} accumulator: {format_of_bits(width, width <= GAPS[-1])}")
        return width, width <= GAPS[-1]

    def first_accumulator(self, notes: list[str]) -> tuple[int, bool] | None:
        p = self.params
        big = 1.5 * 2.0 ** EXPONENT

        def outputs(positions: tuple[int, int, int], gaps: tuple[int, ...]) -> torch.Tensor:
            a, b, c = self._zeros(p.m, p.k), self._zeros(p.k, p.n), self._zeros(p.n, p.o)
            first, middle, last = positions
            b[[first, middle, last], 0] = 1.0
            for row, gap in enumerate(gaps):
                a[row, first], a[row, middle], a[row, last] = big, 2.0 ** (EXPONENT - gap), -big
            c[0, :] = 1.0
            return self.run(a, b, c)[:len(gaps), 0]

        return self._width("A·B", p.k, p.m, notes, outputs)

    def second_accumulator(self, notes: list[str]) -> tuple[int, bool] | None:
        p = self.params
        big = 1.5 * 2.0 ** EXPONENT

        def outputs(positions: tuple[int, int, int], gaps: tuple[int, ...]) -> torch.Tensor:
            a, b, c = self._zeros(p.m, p.k), self._zeros(p.k, p.n), self._zeros(p.n, p.o)
            first, middle, last = positions
            a[:, 0] = 1.0
            b[0, first], b[0, middle], b[0, last] = big, 1.0, -big
            for column, gap in enumerate(gaps):
                c[first, column], c[middle, column], c[last, column] = 1.0, 2.0 ** (EXPONENT - gap), 1.0
            return self.run(a, b, c)[0, :len(gaps)]

        return self._width("R(A·B)·C", p.n, p.o, notes, outputs)

    def intermediate(self, notes: list[str]) -> str:
        """The format E is rounded to: the case's type T where every 1 + 2^-j exact in T comes back, else the
        narrower width it showed."""
        p = self.params
        fraction_bits = metrics.get_format(input_format_name(self.problem.dtype)).mantissa_bits
        kept = fraction_bits
        for start in range(1, fraction_bits + 1, p.m):
            exponents = list(range(start, min(start + p.m, fraction_bits + 1)))
            a, b, c = self._zeros(p.m, p.k), self._zeros(p.k, p.n), self._zeros(p.n, p.o)
            for row, j in enumerate(exponents):
                a[row, 0] = 1.0 + 2.0 ** -j
            b[0, 0], c[0, :] = 1.0, 1.0
            got = self.run(a, b, c)[:len(exponents), 0].tolist()
            for j, value in zip(exponents, got):
                if value == 1.0 + 2.0 ** -j:
                    continue
                if j == 1 or value != 1.0:
                    self.unexplained.append(f"R(A·B)·C of A·B = 1 + 2^-{j} came back {value!r}, expected {1.0 + 2.0 ** -j!r}"
                                            " (a dropped or doubled product, a wrong index?)")
                    return ""
                kept = min(kept, j - 1)
                break
            if kept < fraction_bits:
                break
        fmt = input_format_name(self.problem.dtype)
        if kept == fraction_bits:
            notes.append(f"intermediate: rounded to {fmt} or kept wider, as the contract allows")
            return "exact" if fmt == "f32" else fmt
        bits = kept + 1
        notes.append(f"intermediate: 1 + 2^-{bits} came back 1: A·B is rounded to {format_of_bits(bits)}, "
                     f"narrower than {fmt}")
        return "bf16" if bits <= FORMAT_BITS["bf16"] else "f16"  # the named formats' widths: 8, 11
