"""Number formats, described by their bit widths and NaN/inf encoding; every limit is derived.

A float format is [sign] + exponent_bits + mantissa_bits with IEEE-754 layout
(biased exponent, implicit leading 1, subnormals at exponent field 0). What
the top of the range holds is the format's `encoding`:

* "ieee" (f32, f16, bf16, f8e5m2): the all-ones exponent holds ±inf
  (mantissa 0) and NaN; bias 2**(e-1) - 1.
* "fn" (f8e4m3fn, OCP FP8): no inf; the all-ones exponent holds normal
  numbers except S.1111.111, the NaN. One more binade than IEEE (max 448).
* "fnuz" (f8e4m3fnuz, f8e5m2fnuz, AMD's FP8 on gfx940-gfx942): no inf, no
  negative zero; the only NaN is the pattern 0x80 (the "negative zero"), every
  other pattern is a number, and the bias is one larger, 2**(e-1)
  (max 240 and 57344).
* "none" (f4e2m1, OCP MX FP4): every pattern is a number: no inf, no NaN,
  bias 1, values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}. Overflow saturates to ±max.
* "unsigned-exponent" (e8m0, the OCP MX scale): no sign, no mantissa, bias
  127; pattern e is 2**(e-127) for e = 0..254 (no zero, no subnormals), 0xFF
  is NaN.

Storage: torch has one-element dtypes for all but f4e2m1, which torch only
has as packed pairs (float4_e2m1fn_x2, `packed_torch_name`); there
`torch_name` is None and compare() takes the 4-bit codes one per byte
(uint8) or the packed pairs (metrics.encoding has pack/unpack).

Formats know their torch dtype by name and import torch only when it is asked
for, so code that needs just the limits (validating a catalogue) stays fast.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, get_args

from e2egen.metrics.names import unknown_name_error

if TYPE_CHECKING:
    import torch

DTYPE_NAMES = ("f32", "tf32", "f16", "bf16", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f4e2m1", "e8m0",
               "i8", "i32")
# What the top of a format's range holds (the module's docstring says each).
Encoding = Literal["ieee", "fn", "fnuz", "none", "unsigned-exponent"]
ENCODINGS: tuple[Encoding, ...] = get_args(Encoding)


@dataclass(frozen=True)
class Format:
    """A binary floating-point format; everything below the widths and encoding is derived."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    encoding: Encoding  # what the top patterns (and 0x80 for fnuz) hold
    torch_name: str | None  # torch's one-element dtype ("float16"); None where torch has none (f4e2m1)
    packed_torch_name: str | None = None  # torch's packed dtype, two elements a byte (f4e2m1)
    bits: int = field(init=False)
    signed: bool = field(init=False)  # has a sign bit (all but e8m0)
    has_inf: bool = field(init=False)
    has_nan: bool = field(init=False)
    has_negative_zero: bool = field(init=False)
    has_zero: bool = field(init=False)
    has_subnormals: bool = field(init=False)
    nan_pattern: int | None = field(init=False)  # the full bit pattern of the (canonical) NaN
    bias: int = field(init=False)
    emin: int = field(init=False)  # unbiased exponent of the smallest normal
    emax: int = field(init=False)  # unbiased exponent of the largest finite value
    max: float = field(init=False)  # largest finite value
    min_normal: float = field(init=False)
    min_subnormal: float = field(init=False)  # the smallest positive value (min_normal without subnormals)
    eps: float = field(init=False)  # gap between 1 and the next value
    overflow_limit: float = field(init=False)  # 2**(emax+1): the CTS far-overflow threshold
    max_pattern: int = field(init=False)  # magnitude bits (no sign) of `max`

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, got {self.encoding!r}")
        e, m, encoding = self.exponent_bits, self.mantissa_bits, self.encoding
        signed = encoding != "unsigned-exponent"
        bias = (1 << (e - 1)) if encoding == "fnuz" else (1 << (e - 1)) - 1
        all_ones_exponent, all_ones_mantissa = (1 << e) - 1, (1 << m) - 1
        top_exponent, top_mantissa = {
            "ieee": (all_ones_exponent - 1, all_ones_mantissa),  # all-ones exponent: inf, NaN
            "fn": (all_ones_exponent, all_ones_mantissa - 1),  # S.1..1.1..1: NaN
            "fnuz": (all_ones_exponent, all_ones_mantissa),  # 0x80: NaN
            "none": (all_ones_exponent, all_ones_mantissa),
            "unsigned-exponent": (all_ones_exponent - 1, 0),  # 0xFF: NaN
        }[encoding]
        subnormals = signed  # e8m0's exponent field 0 is the value 2**-bias, not a subnormal
        emin = 1 - bias if subnormals else -bias
        emax = top_exponent - bias
        bits = int(signed) + e + m
        nan_pattern = {"ieee": (all_ones_exponent << m) | (1 << max(m - 1, 0)), "fn": (1 << (e + m)) - 1,
                       "fnuz": 1 << (bits - 1), "none": None, "unsigned-exponent": (1 << bits) - 1}[encoding]
        derived = {
            "bits": bits,
            "signed": signed,
            "has_inf": encoding == "ieee",
            "has_nan": encoding != "none",
            "has_negative_zero": encoding in ("ieee", "fn", "none"),
            "has_zero": signed,
            "has_subnormals": subnormals,
            "nan_pattern": nan_pattern,
            "bias": bias,
            "emin": emin,
            "emax": emax,
            "max": math.ldexp((1 << m) + top_mantissa, emax - m),
            "min_normal": math.ldexp(1.0, emin),
            "min_subnormal": math.ldexp(1.0, emin - m if subnormals else emin),
            "eps": math.ldexp(1.0, -m),
            "overflow_limit": math.ldexp(1.0, emax + 1),
            "max_pattern": (top_exponent << m) | top_mantissa,
        }
        for key, value in derived.items():
            object.__setattr__(self, key, value)

    @property
    def torch_dtype(self) -> torch.dtype | None:
        """The one-element storage dtype; None where this torch build (or torch at all: f4e2m1) lacks it."""
        return None if self.torch_name is None else _torch_dtype(self.torch_name)

    @property
    def packed_torch_dtype(self) -> torch.dtype | None:
        """torch's packed dtype (two 4-bit elements a byte) for formats narrower than a byte; else None."""
        return None if self.packed_torch_name is None else _torch_dtype(self.packed_torch_name)

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
    "f32": Format("f32", 8, 23, "ieee", "float32"),
    "tf32": Format("tf32", 8, 23, "ieee", "float32"),
    "f16": Format("f16", 5, 10, "ieee", "float16"),
    "bf16": Format("bf16", 8, 7, "ieee", "bfloat16"),
    "f8e4m3fn": Format("f8e4m3fn", 4, 3, "fn", "float8_e4m3fn"),
    "f8e5m2": Format("f8e5m2", 5, 2, "ieee", "float8_e5m2"),
    "f8e4m3fnuz": Format("f8e4m3fnuz", 4, 3, "fnuz", "float8_e4m3fnuz"),
    "f8e5m2fnuz": Format("f8e5m2fnuz", 5, 2, "fnuz", "float8_e5m2fnuz"),
    "f4e2m1": Format("f4e2m1", 2, 1, "none", None, packed_torch_name="float4_e2m1fn_x2"),
    "e8m0": Format("e8m0", 8, 0, "unsigned-exponent", "float8_e8m0fnu"),
    "i8": IntegerFormat("i8", 8, "int8"),
    "i32": IntegerFormat("i32", 32, "int32"),
}
assert tuple(_FORMATS) == DTYPE_NAMES


@functools.cache
def _by_torch_dtype() -> dict[torch.dtype, str]:
    # torch.float32 means f32: tf32 can only be asked for by name.
    names: dict[torch.dtype, str] = {}
    for name, fmt in _FORMATS.items():
        for dtype in (fmt.torch_dtype, getattr(fmt, "packed_torch_dtype", None)):
            if dtype is not None:
                names.setdefault(dtype, name)
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
