"""What every op's arithmetic probes share (torch-free): exact rounding of Python floats to a significand
width in each rounding mode a finding may name (every value the probes craft is exact in float64, so these
give each hypothesis its one exact expected outcome), and the long-row row-sum probes' geometry."""
from __future__ import annotations

import math
from typing import Callable, Literal

RoundingMode = Literal["nearest-even", "nearest-away", "toward-zero", "up", "down"]
ROUNDING_MODES: tuple[RoundingMode, ...] = ("nearest-even", "nearest-away", "toward-zero", "up", "down")

_MODES: dict[str, Callable[[float], float]] = {
    "nearest-even": round,  # Python rounds half to even
    "nearest-away": lambda v: math.copysign(math.floor(abs(v) + 0.5), v),
    "toward-zero": math.trunc, "up": math.ceil, "down": math.floor}


def round_bits(x: float, bits: int, mode: RoundingMode = "nearest-even") -> float:
    """x rounded to a `bits`-bit significand (unbounded exponent)."""
    if x == 0 or not math.isfinite(x):
        return x
    mantissa, exponent = math.frexp(x)  # x = mantissa * 2**exponent, 0.5 <= |mantissa| < 1
    scaled = math.ldexp(mantissa, bits)  # exact: float64 holds 53 bits
    if mode not in _MODES:
        raise ValueError(f"unknown rounding mode {mode!r}")
    rounded = _MODES[mode](scaled)
    return math.ldexp(rounded, exponent - bits)


def neighbours(x: float, bits: int) -> tuple[float, float]:
    """The `bits`-bit values just below and just above x (x itself twice when it has `bits` bits)."""
    return round_bits(x, bits, "down"), round_bits(x, bits, "up")


__all__ = ["ROUNDING_MODES", "RoundingMode", "neighbours", "round_bits"]


# -- the long-row row-sum probes (attention's o; softmax's, log_softmax's and logsumexp's rows) ----------------
LONG_ROW = 8192  # elements of a probe row: (LONG_ROW - 2)·2^-small_weight_exponent(bits) is 8 output ulps or more
TILE_KEYS = 256  # the most elements a kernel may add before it rounds its row sum that the probes see


def small_weight_exponent(bits: int) -> int:
    """e such that TILE_KEYS weights of 2^-e sum below half an ulp of a row sum l >= 1 kept to `bits` significand
    bits (TILE_KEYS·2^-e = 2^-(bits + 1)): an l rounded to that format after each tile drops them."""
    return bits + 1 + int(math.log2(TILE_KEYS))

