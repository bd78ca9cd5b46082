"""An acceptance interval as the runner's per-element bound.

compare() judges |out - ref| <= B. An interval [lo, hi] around the exact result ref is two-sided, so the
bound a run hands to compare is the side the output fell on: B = hi - ref where out >= ref, else
ref - lo (`evaluate_for_output`); bound_ratio <= 1 is then exactly membership. Without an output
(explain's what-ifs, studies), `evaluate` gives the wider side.

The interval follows the kernel's measured arithmetic like every bound here: the compute format is
what the probes found (runner/ops/pointwise/probes.py: f32, or the input format for a kernel
that computes in it), f32 where nothing was measured; `require.compute` judges that finding.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import torch

from e2egen.runner.bound import ErrorBound
from e2egen.runner.interval_passes import fused_output_side
from e2egen.runner.intervals import COMPUTE_FORMATS, Interval, IntervalContext, to_output
from e2egen.runner.options import TABLE, BoundModel
from e2egen.runner.ops.math_functions import MathFunction

if TYPE_CHECKING:
    from e2egen.metrics.ulp_terms import ScaledPlusUlps


def interval_context(model: BoundModel, input_format: str) -> IntervalContext:
    measured = model.arithmetic.compute if model.arithmetic is not None else ""
    compute = measured if measured in COMPUTE_FORMATS else "f32"
    if input_format == "f32":
        compute = "f32"
    return IntervalContext(compute=compute, ulps=None if model.ulps == TABLE else float(model.ulps),
                           abs_error=None if model.abs_error == TABLE else float(model.abs_error))


@dataclass(eq=False)
class AcceptanceInterval:
    function: MathFunction
    out_format: str
    input_format: str
    inputs64: Mapping[str, torch.Tensor]
    _cache: dict[IntervalContext, Interval] = field(default_factory=dict, repr=False)

    def interval(self, model: BoundModel) -> Interval:
        context = interval_context(model, self.input_format)
        if context not in self._cache:
            arguments = [Interval.point(self.inputs64[name]) for name in self.function.inputs]
            self._cache[context] = to_output(self.function.interval(*arguments, context), self.out_format)
        return self._cache[context]

    def sides(self, model: BoundModel, ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        interval = self.interval(model)
        below = (ref - interval.lo.to(ref.device)).clamp_(min=0)
        above = (interval.hi.to(ref.device) - ref).clamp_(min=0)
        # outside the domain, or a pole (log1p(-1) = -inf): compare matches NaN and inf itself, no bound needed
        undefined = ~torch.isfinite(ref)
        return below.masked_fill_(undefined, 0.0), above.masked_fill_(undefined, 0.0)

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        below, above = self.sides(model, ref)
        return torch.maximum(below, above)

    def evaluate_for_output(self, model: BoundModel, ref: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        out64 = out.to(device=ref.device, dtype=torch.float64).contiguous()  # the bound in ref's memory order
        interval = self.interval(model)
        fused = fused_output_side(interval.lo, interval.hi, ref, out64)  # the same values in one numba pass
        if fused is not None:
            return fused
        below, above = self.sides(model, ref)
        return torch.where(out64 >= ref, above, below).contiguous()


def bound_for_output(part: ErrorBound, model: BoundModel, ref: torch.Tensor,
                     out: torch.Tensor) -> torch.Tensor | ScaledPlusUlps:
    """A bound evaluated for the output it judges, as metrics.compare takes it: two-sided ones pick the
    output's side; one that compare can form inside its own pass (SumOfBounds.deferred) comes unformed."""
    sided = getattr(part, "evaluate_for_output", None)
    if sided is not None:
        return sided(model, ref, out)
    deferred = getattr(part, "deferred", None)
    return deferred(model, ref) if deferred is not None else part.evaluate(model, ref)


__all__ = ["AcceptanceInterval", "bound_for_output", "interval_context"]
