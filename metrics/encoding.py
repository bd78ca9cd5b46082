"""Values to bit patterns and back for the byte-sized formats, fp4 packing, and OCP MX block scales.

A "code" is a value's full bit pattern in T (sign included) as an integer:
uint8 for every format here up to 8 bits; f4e2m1's codes use the low 4 bits.
torch has no one-element fp4 dtype (only float4_e2m1fn_x2, two elements a
byte with no arithmetic), so fp4 data lives as codes, one a byte, or packed
two a byte: element 2i in the low nibble, 2i+1 in the high one (the order of
an LLVM <2 x fp4> vector in a byte).

MX scales (OCP Microscaling v1.0): a block of k elements shares the E8M0
scale 2**(floor(log2(amax)) - emax_elem), amax the block's largest magnitude
and emax_elem the element format's largest exponent (f4e2m1 2, f8e4m3fn 8,
f8e5m2 15); the elements are then round_elem(x / scale).
"""
from __future__ import annotations

import functools

import torch

from e2egen.metrics import rounding_numba
from e2egen.metrics.backend import numba_path
from e2egen.metrics.formats import Format, float_format
from e2egen.metrics.rounding import e8m0_exponent, pattern_value, pow2, rounded_pattern, round_to, split_float64

E8M0_NAN = 0xFF
E8M0_BIAS = 127


def _byte_format(dtype) -> Format:
    fmt = float_format(dtype)
    if fmt.bits > 8:
        raise ValueError(f"codes are for formats of at most 8 bits; {fmt.name} has {fmt.bits}")
    return fmt


def encode(x, dtype, *, saturate: bool = False) -> torch.Tensor:
    """The codes (uint8) of round_to(x, dtype, saturate=saturate).

    NaN becomes T's NaN pattern (fn: 0x7F, fnuz: 0x80, e8m0: 0xFF, ieee: the
    quiet NaN with sign 0); f4e2m1 has none, so NaN in x is a ValueError.
    """
    fmt = _byte_format(dtype)
    values = torch.as_tensor(x).detach().to(torch.float64)
    if fmt.signed and numba_path(values.device):
        return _encoded_by_numba(values, fmt, saturate)
    rounded = round_to(values, fmt, saturate=saturate)
    nan = torch.isnan(rounded)
    if fmt.nan_pattern is None and bool(nan.any()):
        raise ValueError(f"{fmt.name} has no NaN: x has NaN at flat index {int(torch.nonzero(nan.view(-1))[0])}")
    if not fmt.signed:  # e8m0: the biased exponent
        codes = (e8m0_exponent(torch.where(nan, 1.0, rounded)) + E8M0_BIAS)
    else:
        negative, biased, mantissa = split_float64(torch.where(nan, 0.0, rounded))
        pattern = rounded_pattern(biased, mantissa, fmt)  # exact: rounded is a value of T (or ±inf)
        pattern = torch.where(torch.isinf(rounded), fmt.max_pattern + 1, pattern)
        codes = pattern | (negative.to(torch.int64) << (fmt.bits - 1))
    codes = torch.where(nan, fmt.nan_pattern if fmt.nan_pattern is not None else 0, codes)
    return codes.to(torch.uint8)


def _encoded_by_numba(values: torch.Tensor, fmt: Format, saturate: bool) -> torch.Tensor:
    """encode's codes in one pass (rounding_numba.codes_into), equal to the torch definition bit for bit."""
    flat = values.contiguous().view(-1)
    codes = torch.empty(flat.shape, dtype=torch.uint8)
    if rounding_numba.codes_into(flat.numpy(), codes.numpy(), fmt, saturate) and fmt.nan_pattern is None:
        raise ValueError(f"{fmt.name} has no NaN: x has NaN at flat index {int(torch.nonzero(torch.isnan(flat))[0])}")
    return codes.view(values.shape)


def decode(codes, dtype) -> torch.Tensor:
    """The float64 values of codes (any integer tensor; only the low `bits` bits are read): one look-up in
    the format's table of every code's value."""
    fmt = _byte_format(dtype)
    codes = torch.as_tensor(codes)
    bits = codes.to(torch.int64) & ((1 << fmt.bits) - 1)
    return _value_table(fmt.name, codes.device).take(bits)  # a copy, also for a 0-d code: the table is shared


@functools.lru_cache(maxsize=None)
def _value_table(name: str, device: torch.device) -> torch.Tensor:
    """Every code's value (float64, indexed by the code), from its fields (_decode_fields)."""
    fmt = _byte_format(name)
    return _decode_fields(torch.arange(1 << fmt.bits, device=device), fmt)


def _decode_fields(bits: torch.Tensor, fmt: Format) -> torch.Tensor:
    """The float64 values of the codes `bits` (int64, inside the format's width) from sign, exponent and
    mantissa."""
    if not fmt.signed:
        values = pow2(bits - E8M0_BIAS)
        return torch.where(bits == E8M0_NAN, float("nan"), values)
    negative = (bits >> (fmt.bits - 1)) == 1
    pattern = bits & ((1 << (fmt.bits - 1)) - 1)
    magnitude = pattern_value(pattern.clamp(max=fmt.max_pattern), fmt)
    values = torch.where(negative, -magnitude, magnitude)
    if fmt.encoding == "ieee":
        values = torch.where(pattern == fmt.max_pattern + 1, torch.where(negative, -torch.inf, torch.inf), values)
        nan = pattern > fmt.max_pattern + 1
    elif fmt.encoding == "fn":
        nan = pattern > fmt.max_pattern
    elif fmt.encoding == "fnuz":
        nan = bits == fmt.nan_pattern
    else:
        nan = torch.zeros_like(negative)
    return torch.where(nan, float("nan"), values)


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """f4e2m1 codes (..., 2n), one a byte, packed two a byte (..., n) as uint8: element 2i low.

    `.view(torch.float4_e2m1fn_x2)` gives torch's packed dtype.
    """
    codes = torch.as_tensor(codes)
    if codes.shape[-1] % 2:
        raise ValueError(f"packing fp4 needs an even last dimension, got shape {tuple(codes.shape)}")
    nibbles = codes.to(torch.uint8) & 0xF
    return nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """Packed fp4 (..., n), uint8 or torch.float4_e2m1fn_x2, as codes (..., 2n), one a byte (uint8)."""
    raw = packed.view(torch.uint8) if packed.dtype != torch.uint8 else packed
    return torch.stack((raw & 0xF, raw >> 4), dim=-1).reshape(*raw.shape[:-1], 2 * raw.shape[-1])


def block_amax(x: torch.Tensor, block_size: int = 32) -> torch.Tensor:
    """max |x| over consecutive blocks of block_size along the last dimension (float64; NaN if a block has one)."""
    values = torch.as_tensor(x).detach().to(torch.float64)
    if values.shape[-1] % block_size:
        raise ValueError(f"the last dimension {values.shape[-1]} is not a multiple of the block size {block_size}")
    blocks = values.abs().reshape(*values.shape[:-1], values.shape[-1] // block_size, block_size)
    return torch.where(torch.isnan(blocks).any(dim=-1), float("nan"), blocks.amax(dim=-1))


def mx_scale_exponent(amax, element_dtype) -> torch.Tensor:
    """floor(log2(amax)) - emax_elem clamped to E8M0's [-127, 127] (int64); amax 0 gives -127.

    NaN or inf amax has no exponent: those give 128 (above E8M0's range), which
    mx_scale_codes turns into the NaN code 0xFF.
    """
    emax = float_format(element_dtype).emax
    amax = torch.as_tensor(amax).detach().to(torch.float64).abs()
    _, exponent = torch.frexp(amax)  # amax = f * 2**exponent, f in [0.5, 1): exact for subnormals too
    scale = (exponent.to(torch.int64) - 1 - emax).clamp(min=-E8M0_BIAS, max=E8M0_BIAS)
    scale = torch.where(amax == 0, -E8M0_BIAS, scale)
    return torch.where(torch.isfinite(amax), scale, E8M0_BIAS + 1)


def mx_scale_codes(amax, element_dtype) -> torch.Tensor:
    """The E8M0 codes (uint8) of the MX scales for blocks with these amax; 0xFF (NaN) for NaN or inf amax."""
    return (mx_scale_exponent(amax, element_dtype) + E8M0_BIAS).to(torch.uint8)
