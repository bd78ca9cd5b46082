"""Number formats, described by their bit widths; every limit is derived.

A float format is sign + exponent_bits + mantissa_bits with IEEE-754 layout
(biased exponent, implicit leading 1, subnormals at exponent 0). Two families:

* IEEE-like (f32, f16, bf16, f8e5m2): the all-ones exponent holds inf and NaN.
* "fn" (f8e4m3fn, OCP FP8): no inf; the all-ones exponent holds normal numbers
  except the all-ones mantissa, which is NaN. That buys one more binade
  (max 448 instead of 240).

Formats know their torch dtype by name and import torch only when it is asked
for, so code that needs just the limits (validating a catalogue) stays fast.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from e2egen.metrics.names import unknown_name_error

if TYPE_CHECKING:
    import torch

DTYPE_NAMES = ("f32", "tf32", "f16", "bf16", "f8e4m3fn", "f8e5m2", "i8", "i32")


@dataclass(frozen=True)
class Format:
    """A binary floating-point format; everything below the widths is derived."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    has_inf: bool
    torch_name: str  # the storage dtype's name in torch ("float16")
    bits: int = field(init=False)
    bias: int = field(init=False)
    emin: int = field(init=False)  # unbiased exponent of the smallest normal
    emax: int = field(init=False)  # unbiased exponent of the largest finite value
    max: float = field(init=False)  # largest finite value
    min_normal: float = field(init=False)
    min_subnormal: float = field(init=False)
    eps: float = field(init=False)  # gap between 1 and the next value
    overflow_limit: float = field(init=False)  # 2**(emax+1): the CTS far-overflow threshold
    max_pattern: int = field(init=False)  # magnitude bits (no sign) of `max`

    def __post_init__(self) -> None:
        e, m = self.exponent_bits, self.mantissa_bits
        bias = (1 << (e - 1)) - 1
        all_ones_exponent = (1 << e) - 1
        if self.has_inf:
            top_exponent, top_mantissa = all_ones_exponent - 1, (1 << m) - 1
        else:
            top_exponent, top_mantissa = all_ones_exponent, (1 << m) - 2
        emax = top_exponent - bias
        emin = 1 - bias
        derived = {
            "bits": 1 + e + m,
            "bias": bias,
            "emin": emin,
            "emax": emax,
            "max": math.ldexp((1 << m) + top_mantissa, emax - m),
            "min_normal": math.ldexp(1.0, emin),
            "min_subnormal": math.ldexp(1.0, emin - m),
            "eps": math.ldexp(1.0, -m),
            "overflow_limit": math.ldexp(1.0, emax + 1),
            "max_pattern": (top_exponent << m) | top_mantissa,
        }
        for key, value in derived.items():
            object.__setattr__(self, key, value)

    @property
    def torch_dtype(self) -> torch.dtype | None:
        """The storage dtype; None where this torch build lacks it."""
        return _torch_dtype(self.torch_name)

    @property
    def is_integer(self) -> bool:
        return False


@dataclass(frozen=True)
class IntegerFormat:
    """A two's complement integer format (compared exactly)."""

    name: str
    bits: int
    torch_name: str  # the storage dtype's name in torch ("int8")
    min: int = field(init=False)
    max: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "min", -(1 << (self.bits - 1)))
        object.__setattr__(self, "max", (1 << (self.bits - 1)) - 1)

    @property
    def torch_dtype(self) -> torch.dtype:
        return _torch_dtype(self.torch_name)

    @property
    def is_integer(self) -> bool:
        return True


def _torch_dtype(name: str) -> torch.dtype | None:
    import torch  # on first use, not at import

    return getattr(torch, name, None)


# tf32 is a compute mode, not a storage format: its results are f32 values,
# so it is compared with f32's bits under its own name.
_FORMATS: dict[str, Format | IntegerFormat] = {
    "f32": Format("f32", 8, 23, True, "float32"),
    "tf32": Format("tf32", 8, 23, True, "float32"),
    "f16": Format("f16", 5, 10, True, "float16"),
    "bf16": Format("bf16", 8, 7, True, "bfloat16"),
    "f8e4m3fn": Format("f8e4m3fn", 4, 3, False, "float8_e4m3fn"),
    "f8e5m2": Format("f8e5m2", 5, 2, True, "float8_e5m2"),
    "i8": IntegerFormat("i8", 8, "int8"),
    "i32": IntegerFormat("i32", 32, "int32"),
}
assert tuple(_FORMATS) == DTYPE_NAMES


@functools.cache
def _by_torch_dtype() -> dict[torch.dtype, str]:
    # torch.float32 means f32: tf32 can only be asked for by name.
    names: dict[torch.dtype, str] = {}
    for name, fmt in _FORMATS.items():
        if fmt.torch_dtype is not None:
            names.setdefault(fmt.torch_dtype, name)
    return names


def dtype_name(dtype: str | torch.dtype) -> str:
    """The canonical name of a dtype given by name or torch.dtype; ValueError if unknown."""
    if isinstance(dtype, str):
        if dtype in _FORMATS:
            return dtype
        raise unknown_name_error("dtype", dtype, DTYPE_NAMES)
    import torch  # only a torch.dtype gets here (or a mistake): torch is not needed for names

    if isinstance(dtype, torch.dtype):
        by_torch_dtype = _by_torch_dtype()
        if dtype in by_torch_dtype:
            return by_torch_dtype[dtype]
        choices = [str(d) for d in by_torch_dtype]
        raise unknown_name_error("dtype", str(dtype), choices + list(DTYPE_NAMES))
    raise unknown_name_error("dtype", dtype, DTYPE_NAMES)


def get_format(dtype: str | torch.dtype) -> Format | IntegerFormat:
    """The Format (or IntegerFormat for i8/i32) of a dtype name or torch.dtype."""
    return _FORMATS[dtype_name(dtype)]


def float_format(dtype: str | torch.dtype | Format) -> Format:
    """Like get_format, but only float formats (ulp and rounding mean nothing for integers)."""
    fmt = dtype if isinstance(dtype, Format) else get_format(dtype)
    if not isinstance(fmt, Format):
        floats = [n for n, f in _FORMATS.items() if isinstance(f, Format)]
        raise ValueError(f"{fmt.name} is an integer format; this needs a float format: {', '.join(floats)}")
    return fmt
