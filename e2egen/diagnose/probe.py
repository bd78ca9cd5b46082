"""The exact-arithmetic probe: a kernel bug test that no rounding can fool.

The kernel runs once more on inputs drawn from {-1, 0, +1}. Every product is
then -1, 0 or +1 and every partial sum, in any order, chunking or
accumulator, is an integer no larger in magnitude than the element's count of
non-zero products, Σ|a·b|. Integers up to 2^(p+1) are exact in a format with
p mantissa bits (2048 in f16, 256 in bf16), and none of them is subnormal or
overflows. So wherever Σ|a·b| <= that limit, a correct kernel returns the
exact result whatever its summation order, chunking, accumulator format or
flush-to-zero mode; a different value is a kernel bug (wrong index, dropped
or doubled products, a race), not a rounding effect.

The limit is taken from the narrower of the output format and f16 (2048 for
f16, f32 and tf32 outputs; 256 for bf16), so a kernel that keeps f32 outputs
but accumulates in f16 is not blamed either. The density of non-zero inputs
is chosen so that the expected count of non-zero products is a quarter of
the limit; elements above the limit (rare) are left out of the verdict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from e2egen import metrics
from e2egen import runner
from e2egen.runner.bound import magnitude
from e2egen.runner.kernels import call_on_values
from e2egen.runner.reference import apply_op

from e2egen.diagnose.coords import position_text


@dataclass(frozen=True)
class ProbeResult:
    limit: int = 0  # the largest integer partial sum the verdict relies on
    density: float = 0.0  # probability that an input is non-zero
    checked: int = 0  # output elements whose Σ|a·b| <= limit
    wrong: int = 0  # of those, elements that differ from the exact result
    examples: tuple[tuple[str, float, float], ...] = field(default_factory=tuple)  # (position, exact, out)
    skipped: str = ""  # why the probe did not run (kernel failure included)

    @property
    def ran(self) -> bool:
        return not self.skipped

    @property
    def passed(self) -> bool:
        return self.ran and self.wrong == 0

    def describe(self) -> str:
        if not self.ran:
            return f"exact-arithmetic probe: not run ({self.skipped})"
        head = (f"exact-arithmetic probe (inputs in {{-1, 0, 1}}, density {self.density:.2g}; every partial sum an "
                f"integer <= {self.limit}, exact in any order): ")
        if self.wrong == 0:
            return head + f"all {self.checked} elements exact"
        shown = "; ".join(f"{pos}: exact {exact:g}, out {out:g}" for pos, exact, out in self.examples)
        return head + f"{self.wrong} of {self.checked} elements WRONG ({shown})"


def exactness_limit(out_dtype: str) -> int:
    bits = min(metrics.get_format(out_dtype).mantissa_bits, metrics.get_format("f16").mantissa_bits)
    return 2 ** (bits + 1)


def probe_inputs(problem: runner.Problem, density: float, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed % (2 ** 63))
    inputs = {}
    for name, shape in problem.input_shapes.items():
        u = torch.rand(shape, generator=generator, dtype=torch.float64)
        sign = torch.where(torch.rand(shape, generator=generator, dtype=torch.float64) < 0.5, -1.0, 1.0)
        inputs[name] = torch.where(u < density, sign, torch.zeros_like(u))  # ±1 and 0: exact in every format
    return inputs


def run_probe(problem: runner.Problem, kernel, device: torch.device, label: str, examples: int = 3) -> ProbeResult:
    limit = exactness_limit(problem.out_dtype)
    density = min(1.0, math.sqrt(limit / (4 * max(problem.reduction_size, 1))))
    inputs64 = probe_inputs(problem, density, problem.seed + 1)
    try:
        out64 = call_on_values(problem, kernel, inputs64, device, label=label)[problem.primary_output].contiguous()
    except runner.KernelFailure as failure:
        return ProbeResult(limit, density, skipped=f"the kernel failed on the probe's inputs: {failure.reason}")
    except runner.Skip as skip:
        return ProbeResult(limit, density, skipped=skip.reason)
    exact = apply_op(problem, inputs64)
    terms = magnitude(problem, inputs64)
    eligible = terms <= limit
    wrong = eligible & ~(out64 == exact)
    count = int(wrong.sum())
    shown = []
    if count:
        flat = torch.nonzero(wrong.reshape(-1)).reshape(-1)[:examples]
        for index in flat.tolist():
            shown.append((position_text(problem, index), float(exact.reshape(-1)[index]), float(out64.reshape(-1)[index])))
    return ProbeResult(limit, density, int(eligible.sum()), count, tuple(shown))
