"""The error model of exp and log in a softmax, in units of the compute format's roundoff u: shared by
attention's bound (runner/ops/attention/bound.py) and the stand-alone softmax's (runner/ops/normalization/
bound.py), so that both judge exp, its argument and the online rescales by the same model."""
from __future__ import annotations

import torch

EXP_ULPS = 16  # exp in the compute format, in u: libm's expf is within 1 ulp, CUDA's ex2.approx 2, torch CPU's vectorised exp_u20 (flash attention) about 2^-20 relative
ARGUMENT_ROUNDINGS = 2  # the exponent's argument: s - m, then a multiply by log2 e (or one fma)
LOG_ULPS = 4  # log (or log2 then · ln 2) in the compute format


def rescale_roundings(spread: torch.Tensor) -> torch.Tensor:
    """Per online rescale by exp(m_old - m_new), in u: its argument's roundings (|m_old - m_new| <= spread),
    exp's own error and the multiply; shared by attention's and the stand-alone softmax's bounds."""
    return spread.mul(ARGUMENT_ROUNDINGS).add_(EXP_ULPS + 1)


__all__ = ["ARGUMENT_ROUNDINGS", "EXP_ULPS", "LOG_ULPS", "rescale_roundings"]
