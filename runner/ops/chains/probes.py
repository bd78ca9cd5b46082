"""Probes of a fused chain's arithmetic: gemm→gemm's two accumulators, conv→gemm's second one, and the format
the intermediate (A·B, or the conv's Y) is rounded to before ·C. They run on the case's own geometry (a fused kernel picks its tiling by shape),
each on crafted inputs whose exact output every hypothesis predicts, in the style of the reduction probes.

First accumulator (A·B over k): B's column 0 is 1 at three of k's positions (spread: 0, k/2, k-1; adjacent:
0, 1, 2), 0 elsewhere; row i of A carries +1.5·2^15, 2^(15-g_i), -1.5·2^15 there. C's row 0 is all ones, the
rest 0, so out[i, :] = E[i, 0]: 2^(15-g_i), or 0 where an accumulator of fewer than g_i bits lost it.

Second accumulator (R_T(E)·C over n): A's column 0 is 1, B's row 0 is (+1.5·2^15, 1, -1.5·2^15) at three of
n's positions, so every row of E is that row, exact in T; column j of C is (1, 2^(15-g_j), 1) there. out[:, j]
is 2^(15-g_j), or 0.

Intermediate: every row of E is e with e_j = 1 + 2^-(j+1), and C is the identity on the first columns:
out[:, j] = R_F(1 + 2^-(j+1)) for the format F the kernel rounds E to. The contract says T; every 1 + 2^-j with j below T's fraction bits is exact in
T, and one that comes back 1 shows a narrower F (the finding `intermediate`, which the default requirement
fails: inputs are never rounded below the case's dtype). A kernel that keeps E wider than T is not told apart
from one that rounds to T here; the bound allows it (RoundedIntermediate).

The accumulator finding is the narrower of the two (Arithmetic has one acc_bits); a note gives both. Wrong
results at the smallest gap (2) or at 1 + 2^-1 are no rounding but a bug (a dropped or doubled product, a
wrong index): `unexplained`. Cases with an element-wise step between the products are not probed (no crafted
value passes a gelu unchanged; GemmGemmOp.unprobed_reason says so). conv→gemm sets Y's rows through x = 1
and one tap of w (_ConvGemmProbe); its convolution's own accumulator is not probed here.
"""
from __future__ import annotations

from typing import Callable

import torch

from e2egen import metrics
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic, format_of_bits
from e2egen.runner.dtypes import input_format_name
from e2egen.runner.kernels import call_on_values
from e2egen.runner.ops.chains.intermediates import conv_output
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.problem import Problem

EXPONENT = 15  # 1.5·2^15 = 49152 fits f16; 2^(15-27) = 2^-12 stays normal in f16
GAPS = tuple(range(2, 28))


def probe_gemm_gemm(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    return _findings(_GemmGemmProbe(problem, kernel, device, label))


def probe_conv_gemm(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    return _findings(_ConvGemmProbe(problem, kernel, device, label))


def _findings(probe: "_Probe") -> Arithmetic:
    notes: list[str] = []
    first = probe.first_accumulator(notes)
    second = probe.second_accumulator(notes)
    intermediate = probe.intermediate(notes)
    measured = [bits for bits in (first, second) if bits is not None]
    acc_bits, exact = (min(bits for bits, _ in measured), all(e for _, e in measured)) if measured else (24, False)
    if not measured:
        notes.append("accumulators not probed: f32 assumed")
    return Arithmetic(acc_bits=acc_bits, acc_bits_exact=exact, intermediate=intermediate,
                      probed_with=probe.problem.describe(), notes=tuple(notes), unexplained=tuple(probe.unexplained))


class _Probe:
    """What both chains' probes share: the second sum and the intermediate, through `run_e` (every probed row
    of the first product set to one vector e, times C)."""

    second_name = "R(A·B)·C"

    def __init__(self, problem: Problem, kernel: Kernel, device: torch.device, label: str):
        self.problem, self.kernel, self.device, self.label = problem, kernel, device, label
        self.params = problem.params
        self.unexplained: list[str] = []

    @property
    def e_length(self) -> int:
        """The second sum's length (the first product's columns)."""
        raise NotImplementedError

    def run_e(self, e: torch.Tensor, c: torch.Tensor) -> torch.Tensor | None:
        """A probed output row (float64, o values) when the first product's row is e (exact in the input
        format); None when no output row can be had so."""
        raise NotImplementedError

    def first_accumulator(self, notes: list[str]) -> tuple[int, bool] | None:
        return None

    def _zeros(self, rows: int, columns: int) -> torch.Tensor:
        return torch.zeros(rows, columns, dtype=torch.float64)

    def _width(self, what: str, count: int, capacity: int, notes: list[str],
               outputs: Callable[[tuple[int, int, int], tuple[int, ...]], torch.Tensor | None]) -> tuple[int, bool] | None:
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
                if got is None:
                    notes.append(f"{what} accumulator not probed: no output row reads the probe's values")
                    return None
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

    def second_accumulator(self, notes: list[str]) -> tuple[int, bool] | None:
        n, o = self.e_length, self.params.o
        big = 1.5 * 2.0 ** EXPONENT

        def outputs(positions: tuple[int, int, int], gaps: tuple[int, ...]) -> torch.Tensor | None:
            first, middle, last = positions
            e, c = torch.zeros(n, dtype=torch.float64), self._zeros(n, o)
            e[first], e[middle], e[last] = big, 1.0, -big
            for column, gap in enumerate(gaps):
                c[first, column], c[middle, column], c[last, column] = 1.0, 2.0 ** (EXPONENT - gap), 1.0
            row = self.run_e(e, c)
            return None if row is None else row[:len(gaps)]

        return self._width(self.second_name, n, o, notes, outputs)

    def intermediate(self, notes: list[str]) -> str:
        """The format the first product is rounded to: the case's type T where every 1 + 2^-j exact in T comes
        back (e_j = 1 + 2^-j, C the identity on the first columns), else the narrower width it showed."""
        fmt = input_format_name(self.problem.dtype)
        fraction_bits = metrics.get_format(fmt).mantissa_bits
        width = min(self.e_length, self.params.o)
        kept = fraction_bits
        for start in range(1, fraction_bits + 1, width):
            exponents = list(range(start, min(start + width, fraction_bits + 1)))
            e, c = torch.zeros(self.e_length, dtype=torch.float64), self._zeros(self.e_length, self.params.o)
            for column, j in enumerate(exponents):
                e[column], c[column, column] = 1.0 + 2.0 ** -j, 1.0
            row = self.run_e(e, c)
            if row is None:
                notes.append("intermediate not probed: no output row reads the probe's values")
                return "exact" if fmt == "f32" else fmt
            for j, value in zip(exponents, row[:len(exponents)].tolist()):
                if value == 1.0 + 2.0 ** -j:
                    continue
                if j == 1 or value != 1.0:
                    self.unexplained.append(f"{self.second_name} of a first product 1 + 2^-{j} came back {value!r}, "
                                            f"expected {1.0 + 2.0 ** -j!r} (a dropped or doubled product, a wrong index?)")
                    return ""
                kept = min(kept, j - 1)
                break
            if kept < fraction_bits:
                break
        if kept == fraction_bits:
            notes.append(f"intermediate: rounded to {fmt} or kept wider, as the contract allows")
            return "exact" if fmt == "f32" else fmt
        bits = kept + 1
        notes.append(f"intermediate: 1 + 2^-{bits} came back 1: the first product is rounded to {format_of_bits(bits)}, "
                     f"narrower than {fmt}")
        return "bf16" if bits <= FORMAT_BITS["bf16"] else "f16"  # the named formats' widths: 8, 11


class _GemmGemmProbe(_Probe):
    @property
    def e_length(self) -> int:
        return self.params.n

    def run(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """The kernel's output (float64, rows × columns) on 2-d A, B, C (repeated over the batch), batch 0."""
        lead = self.params.batch_dims
        values = {name: tensor.expand(*lead, *tensor.shape) for name, tensor in (("a", a), ("b", b), ("c", c))}
        out = call_on_values(self.problem, self.kernel, values, self.device, label=self.label)["out"]
        return out.reshape(-1, *out.shape[-2:])[0]

    def run_e(self, e: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """A's column 0 is 1 and B's row 0 is e: every row of A·B is e."""
        p = self.params
        a, b = self._zeros(p.m, p.k), self._zeros(p.k, p.n)
        a[:, 0], b[0, :] = 1.0, e
        return self.run(a, b, c)[0]

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


class _ConvGemmProbe(_Probe):
    """x is all ones and w[kk] is e[kk] at channel 0, tap (0, 0), 0 elsewhere: every output position whose
    tap (0, 0) reads inside x has Y's row e (found from the exact conv of those inputs). The convolution's own
    accumulator is the conv2d op's to probe; here only the second sum and the intermediate."""

    second_name = "R(Y)·C"

    @property
    def e_length(self) -> int:
        return self.params.conv.k

    def run_e(self, e: torch.Tensor, c: torch.Tensor) -> torch.Tensor | None:
        conv = self.params.conv
        x = torch.ones(conv.x_shape, dtype=torch.float64)
        w = torch.zeros(conv.w_shape, dtype=torch.float64)
        w[:, 0, 0, 0] = e
        exact = conv_output(self.params, {"x": x, "w": w})
        rows = (exact == e).all(dim=1).nonzero().flatten()
        if not len(rows):
            return None
        out = call_on_values(self.problem, self.kernel, {"x": x, "w": w, "c": c}, self.device, label=self.label)["out"]
        return out[int(rows[0])]
