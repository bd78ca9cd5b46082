"""compare(ref, out, dtype): every metric of docs/reference/metrics.md in one fused pass.

Rules for each element (ref exact in float64, out in T, round_T nearest-even):

* ref NaN: matches a NaN out; any other out is a nan_mismatch.
* |ref| > max_T, ±inf included (CTS overflow rule): finite ref counts as
  `overflow`. Accepted: inf of ref's sign, or max_T of ref's sign while
  |ref| < 2**(emax+1). Formats without inf (f8e4m3fn, the fnuz FP8s, e8m0):
  OCP FP8 conversions either saturate or give NaN, so there NaN or ±max of
  ref's sign is accepted; f4e2m1 has neither inf nor NaN: ±6 of ref's sign.
  Anything else is an inf_mismatch (nan_mismatch if out is NaN).

Encodings (formats.py): fnuz's only NaN is 0x80 and it has no -0 (a zero
out is +0); f4e2m1 has no NaN, so a NaN ref is always a nan_mismatch; e8m0
is unsigned with no zero (2**-127 is its smallest value): a negative ref is
compared like any other (|ref - out| is large), and a ref at or below
2**-128 (0 included) measures one ulp from 2**-127 though that is its
nearest E8M0 value.
f4e2m1 outputs come as codes, one a byte (uint8), or packed two a byte
(torch.float4_e2m1fn_x2, element 2i in the low nibble; encoding.py).
* |ref| <= max_T: out NaN is a nan_mismatch, out ±inf an inf_mismatch;
  a finite out is "compared": it enters every maximum, sum and histogram.
  With ftz=True, out = ±0 where 0 < |ref| < min_normal_T is accepted (the
  CTS rule: the exact result or its lower neighbour is subnormal) and counts
  as exact; `ftz_allowed` says how many used it.

So no NaN, inf or overflowed element ever reaches the maxima, RMS or
histogram; they are counted, and check() fails on any count it is not told
to allow.

Aggregates over the compared elements (n of them; an ftz-accepted element
counts with difference 0):

* bound_rms = sqrt(mean((|ref - out| / B)**2)), with bound=B only (0/0 = 0; a B of -0 is 0,
  so a nonzero difference over it is inf, in bound_ratio as in bound_rms).
* rounding_rms = sqrt(mean(u**2)), u below: how far, in ulps, the output is
  from the correctly rounded result on average (0 for a correctly rounded
  output; a correct kernel's level depends on its accumulation, so its
  tolerance comes from evidence, `e2egen calibrate`).
* bias_z: with u = (out - R(ref)) / ulp_T(ref), the deviation of the output
  from the correctly rounded result R(ref) in ulps (R rounds as the kernel
  does: `rounding` "toward-zero", "up", "down", else to nearest even; u = 0
  where ftz accepted the element) and v = u * sign(ref) (sign(0) = 0):
  z1 = sum(u) / sqrt(sum(u**2)), z2 = sum(v) / sqrt(sum(v**2)),
  bias_z = max(|z1|, |z2|) (a z is 0 when its denominator is). A correctly
  rounded result has u = 0 everywhere; a correct kernel's accumulation errors
  move some elements one ulp either way, with mean zero, so each z is about
  N(0, 1) even where the references cluster at one spot between two values
  of T (measuring s = (out - ref) / ulp instead would not be). A systematic
  error of a fraction of an ulp (a scaled result, truncation, a dropped term)
  makes it grow like sqrt(n).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from e2egen.metrics import backend as backends
from e2egen.metrics import fused_numba, fused_torch
from e2egen.metrics.comparison import FloatComparison, IntegerComparison, WorstElement
from e2egen.metrics.encoding import decode, unpack_fp4
from e2egen.metrics.formats import Format, IntegerFormat, get_format
from e2egen.metrics.integers import integer_totals
from e2egen.metrics.names import HISTOGRAM_BUCKETS
from e2egen.metrics.options import CompareOptions
from e2egen.metrics.partials import combine
from e2egen.metrics.ulp_terms import ScaledPlusUlps

# numpy has no bf16/fp8; ml_dtypes arrays carry torch's names for them.
_NUMPY_EXTENSION_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                           "float8_e8m0fnu")
_SAME_SIZE_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _as_tensor(x, what: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach()
    array = np.asarray(x)
    name = array.dtype.name
    if name in _NUMPY_EXTENSION_DTYPES and hasattr(torch, name):
        raw = np.ascontiguousarray(array).view(f"i{array.dtype.itemsize}")
        return torch.from_numpy(raw).view(getattr(torch, name))
    try:
        return torch.from_numpy(np.ascontiguousarray(array))
    except TypeError as error:
        raise ValueError(f"{what} has an unsupported dtype {array.dtype}: {error}") from None


def _flat(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    return x.to(device).reshape(-1).contiguous()


def _validate(ref: torch.Tensor, out: torch.Tensor, fmt: Format | IntegerFormat) -> None:
    if ref.shape != out.shape:
        raise ValueError(f"shape mismatch: ref {tuple(ref.shape)} vs out {tuple(out.shape)}")
    if ref.numel() == 0:
        raise ValueError(f"empty inputs (shape {tuple(ref.shape)}): nothing to compare")
    if ref.dtype != torch.float64:
        raise ValueError(f"ref must be float64 (the exact reference), got {ref.dtype}")
    if not isinstance(fmt, IntegerFormat) and fmt.packed_torch_name is not None:
        if out.dtype != torch.uint8:
            raise ValueError(f"dtype mismatch: {fmt.name} outputs are its 4-bit codes, one a byte (uint8), or "
                             f"packed two a byte ({fmt.packed_torch_name}); got {out.dtype}")
        return
    if fmt.torch_dtype is None:
        raise ValueError(f"this torch build has no storage dtype for {fmt.name}")
    if out.dtype != fmt.torch_dtype:
        raise ValueError(f"dtype mismatch: out is {out.dtype} but dtype={fmt.name!r} means {fmt.torch_dtype}; "
                         f"pass the kernel's result in its own format")


def _device(ref: torch.Tensor, out: torch.Tensor) -> torch.device:
    """Where to compare: on an accelerator if either input is there (moving the other)."""
    for t in (out, ref):
        if t.device.type != "cpu":
            return t.device
    return torch.device("cpu")


def _worst(indices: dict[str, int], values: dict[str, float | None], ref, out, bound: FlatBound,
           shape) -> dict[str, WorstElement]:
    """The elements behind each metric, gathered with one host copy per tensor (ref, out and bound are flat)."""
    named = {name: i for name, i in indices.items() if i >= 0}
    if not named:
        return {}
    flat = list(named.values())
    where = torch.tensor(flat, dtype=torch.int64, device=ref.device)
    refs = ref.index_select(0, where).cpu().tolist()
    outs = out.index_select(0, where).to(torch.float64).cpu().tolist()
    bounds = bound.at(where)
    positions = zip(*(axis.tolist() for axis in np.unravel_index(flat, shape))) if shape else [()] * len(flat)
    return {
        name: WorstElement(index=i, position=position, ref=r, out=o, bound=b, value=values.get(name))
        for (name, i), position, r, o, b in zip(named.items(), positions, refs, outs, bounds)
    }


def compare(ref, out, dtype, ftz: bool = False, rel_floor: float = 1e-3, bound=None, *,
            rounding: str = "nearest-even", backend: str | None = None, chunk: int | None = None):
    """Every metric of out (the kernel's result, in format `dtype`) against ref (float64).

    ref, out (and bound): torch tensors on any device or numpy arrays, same
    shape; bound may also be a metrics.ulp_terms.ScaledPlusUlps, formed inside
    the pass. Returns a FloatComparison, or an IntegerComparison for i8/i32.
    rounding: the kernel's final rounding ("nearest-even", "toward-zero", "up",
    "down", ...): bias_z measures the deviation from the result rounded that way; any other name: from
    the result rounded to nearest even.
    backend: 'numba', 'torch' or 'auto' (default: $E2E_METRICS_BACKEND, else
    auto). chunk: elements per chunk (tuning and tests only).
    """
    fmt = get_format(dtype)
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"chunk must be a positive number of elements, got {chunk!r}")
    if isinstance(rel_floor, bool) or not isinstance(rel_floor, (int, float)) or not (0 <= rel_floor < math.inf):
        raise ValueError(f"rel_floor must be a finite number >= 0, got {rel_floor!r}")
    if not isinstance(rounding, str):
        raise ValueError(f"rounding must be the name of a rounding mode (e.g. 'nearest-even'), got {rounding!r}")
    ref_t, out_t = _as_tensor(ref, "ref"), _as_tensor(out, "out")
    if isinstance(fmt, Format) and fmt.packed_torch_dtype is not None and out_t.dtype == fmt.packed_torch_dtype:
        out_t = unpack_fp4(out_t)
    _validate(ref_t, out_t, fmt)
    shape = tuple(ref_t.shape)
    device = _device(ref_t, out_t)
    ref_flat, out_flat = _flat(ref_t, device), _flat(out_t, device)
    if isinstance(fmt, IntegerFormat):
        if bound is not None:
            raise ValueError(f"bound= applies to float outputs; {fmt.name} outputs are compared exactly")
        return _compare_integers(ref_flat, out_flat, fmt, shape, chunk)
    flat_bound = FlatBound.of(bound, shape, device, ref, ref_flat)
    chosen = backends.choose(backend, device)
    # + 0.0: a rel_floor of -0 is 0 (its negative bit pattern would count zero refs as above it on the numba path)
    options = CompareOptions(fmt=pass_format(fmt), ftz=bool(ftz), rel_floor=float(rel_floor) + 0.0,
                             rounding=rounding, backend=chosen,
                             chunk=chunk or backends.default_chunk(chosen, device, ref_flat.numel()))
    return _compare_floats(ref_flat, out_flat, flat_bound, fmt, shape, options)


@dataclass(frozen=True, eq=False)
class FlatBound:
    """compare()'s bound in its one form, made once at its entry (FlatBound.of) from whatever came: None, a
    tensor, a numpy array or a ScaledPlusUlps, flat on the comparison's device. Either no bound, or its
    values (float64), or, for a ScaledPlusUlps of this very ref on the CPU, that object with its terms and
    ref flat, kept unformed: the numba pass forms each element inside its own pass (and the worst
    elements only those it reports); the torch pass has it formed first."""

    values: torch.Tensor | None = None  # formed
    unformed: ScaledPlusUlps | None = None  # not yet formed

    @classmethod
    def of(cls, bound, shape: tuple[int, ...], device: torch.device, ref, ref_flat: torch.Tensor) -> "FlatBound":
        """The one form of compare()'s `bound` for ref (as the caller gave it) of `shape`, flat as ref_flat;
        checked here (shape, float); formed here unless kept unformed, and not kept with the caller's object."""
        if bound is None:
            return cls()
        if isinstance(bound, ScaledPlusUlps):
            if bound.shape != shape:
                raise ValueError(f"shape mismatch: bound {bound.shape} vs ref {shape}")
            if bound.ref is not ref or device.type != "cpu":
                return cls(values=_flat(bound.formed(), device))
            return cls(unformed=replace(bound, terms=_flat(bound.terms, device), ref=ref_flat))  # this ref, flat
        bound_t = _as_tensor(bound, "bound")
        if tuple(bound_t.shape) != shape:
            raise ValueError(f"shape mismatch: bound {tuple(bound_t.shape)} vs ref {shape}")
        if not bound_t.is_floating_point():
            raise ValueError(f"bound must be a float tensor, got {bound_t.dtype}")
        return cls(values=_flat(bound_t.to(torch.float64), device))  # checked >= 0 by the fused passes

    @property
    def given(self) -> bool:
        """Whether compare() was given a bound (else bound_ratio and bound_rms are None)."""
        return self.values is not None or self.unformed is not None

    def formed(self) -> FlatBound:
        """This bound with its values formed (itself where they are, or where there is no bound)."""
        return self if self.unformed is None else FlatBound(values=self.unformed.formed())

    def for_numba(self) -> tuple[np.ndarray | None, tuple | None]:
        """What fused_numba.partials takes: the values, or the terms with the recipe that forms them."""
        if self.unformed is None:
            return (None if self.values is None else self.values.numpy()), None
        return self.unformed.terms.numpy(), self.unformed.recipe()

    def at(self, where: torch.Tensor) -> list[float | None]:
        """The values at these flat indices, on the host (formed for them alone where unformed)."""
        if self.unformed is not None:
            return self.unformed.at(where).cpu().tolist()
        if self.values is not None:
            return self.values.index_select(0, where).cpu().tolist()
        return [None] * len(where)


def _safe_ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator with 0/0 = 0 (all-zero data is a perfect match, not NaN)."""
    if numerator == 0:
        return 0.0
    return numerator / denominator if denominator != 0 else math.inf


def _z(centred_sum: float, centred_sum_sq: float) -> float:
    """sum(x - c) / sqrt(sum((x - c)**2)), 0 where the denominator is 0."""
    if centred_sum == 0 or not centred_sum_sq > 0:
        return 0.0
    return centred_sum / math.sqrt(centred_sum_sq)


def _compare_floats(ref, out, bound: FlatBound, reported: Format, shape, options: CompareOptions) -> FloatComparison:
    out, out_bits = _pass_inputs(reported, out)
    if options.backend == "numba":
        values, recipe = bound.for_numba()
        floats, ints = fused_numba.partials(ref.numpy(), out_bits.numpy(), values, options, recipe)
    else:
        bound = bound.formed()  # the torch pass reads values
        floats, ints = fused_torch.partials(ref, out, out_bits, bound.values, options)
    totals = combine(floats, ints)

    maxima = {name: max(value, 0.0) for name, (value, _) in totals.maxima.items()}  # no element: 0
    root_sum_sq = math.sqrt(totals.sum_sq_diff)
    scale = math.sqrt(max(totals.compared, 1)) * max(totals.max_abs_ref, totals.max_abs_out)
    rms = _safe_ratio(root_sum_sq, scale)
    rel_l2 = _safe_ratio(root_sum_sq, math.sqrt(totals.sum_sq_ref))
    has_bound = bound.given
    bound_rms = math.sqrt(totals.sum_sq_bound / max(totals.compared, 1)) if has_bound else None
    signed_z, magnitude_z = _z(totals.sum_s, totals.sum_sq_s), _z(totals.sum_t, totals.sum_sq_t)
    bias_z = max(abs(signed_z), abs(magnitude_z))
    bias_lean = ("" if bias_z == 0 else
                 ("toward zero" if magnitude_z < 0 else "away from zero") if abs(magnitude_z) >= abs(signed_z)
                 else "downward" if signed_z < 0 else "upward")
    leaned = totals.sum_t if abs(magnitude_z) >= abs(signed_z) else totals.sum_s
    bias_ulps = abs(leaned) / max(totals.compared, 1)
    rounding_rms = math.sqrt(totals.sum_sq_s / max(totals.compared, 1))

    # rms and rel_l2 point at the element with the largest difference
    indices = {name: index for name, (_, index) in totals.maxima.items()}
    indices["rms"] = indices["rel_l2"] = indices["max_abs_diff"]
    indices.update({name: first for name, (_, first) in totals.counts.items()})
    element_values = dict(maxima, rms=maxima["max_abs_diff"], rel_l2=maxima["max_abs_diff"])
    if not has_bound:
        del indices["bound_ratio"]
    worst = _worst(indices, element_values, ref, out, bound, shape)

    return FloatComparison(
        dtype=reported.name, shape=shape, n=ref.numel(), compared=totals.compared, ftz=options.ftz,
        rel_floor=options.rel_floor, format_max=reported.max,
        max_abs_diff=maxima["max_abs_diff"], max_rel_diff=maxima["max_rel_diff"],
        max_rel_diff_old=maxima["max_rel_diff_old"], max_eps_diff=maxima["max_eps_diff"],
        max_ulp_diff=maxima["max_ulp_diff"], rms=rms, rel_l2=rel_l2,
        bound_ratio=maxima["bound_ratio"] if has_bound else None, bound_rms=bound_rms, bias_z=bias_z,
        rounding_rms=rounding_rms,
        nan_mismatch=totals.counts["nan_mismatch"][0], inf_mismatch=totals.counts["inf_mismatch"][0],
        overflow=totals.counts["overflow"][0], ftz_allowed=totals.ftz_allowed,
        histogram=dict(zip(HISTOGRAM_BUCKETS, totals.histogram)),
        worst=worst, backend=options.backend, rounding=options.rounding, bias_lean=bias_lean,
        bias_ulps=bias_ulps,
    )


def pass_format(fmt: Format) -> Format:
    """The format as the fused passes read its bits (CompareOptions.fmt).

    They know sign-magnitude patterns with inf and NaN above max_pattern
    ("ieee") or NaN above it (any other has_inf=False format). The encodings
    that do not fit are handed over in an equivalent layout (_pass_inputs
    gives out's bits in it):

    * fnuz: out's NaN 0x80 sits where -0 would; the bits go over as 16-bit
      sign-magnitude with NaN at magnitude 0x7FFF, above max_pattern 0x7F.
    * f4e2m1: codes one a byte fit as they are (4 bits, no pattern above
      max); out's values are decoded for the passes that read them.
    * e8m0: code c (2**(c-127)) goes over as the pattern c + 1 of a 16-bit
      format with 0 mantissa bits and bias 128, which has the same values,
      ulps and rounding from 2**-127 up; 0xFF (NaN) as 0x7FFF.
    """
    if fmt.encoding in ("ieee", "fn", "none"):
        return fmt
    view = copy.copy(fmt)
    if fmt.encoding == "unsigned-exponent":
        for key, value in {"bias": fmt.bias + 1, "max_pattern": fmt.max_pattern + 1}.items():
            object.__setattr__(view, key, value)
    object.__setattr__(view, "bits", 16)
    return view


def _pass_inputs(fmt: Format, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out values, out bits) as the fused passes read them, in pass_format(fmt)'s layout."""
    if fmt.encoding in ("ieee", "fn"):
        return out, out.view(_SAME_SIZE_INT[out.element_size()])
    codes = out.view(torch.uint8).to(torch.int64)
    if fmt.encoding == "none":
        return decode(codes, fmt), codes.to(torch.int8)
    if fmt.encoding == "fnuz":
        bits = torch.where(codes == fmt.nan_pattern, 0x7FFF, ((codes & 0x80) << 8) | (codes & 0x7F))
    else:  # unsigned-exponent
        bits = torch.where(codes == fmt.nan_pattern, 0x7FFF, codes + 1)
    return out, bits.to(torch.int16)


def _compare_integers(ref, out, fmt: IntegerFormat, shape, chunk: int | None) -> IntegerComparison:
    totals = integer_totals(ref, out, fmt, chunk or backends.default_chunk("torch", ref.device))
    values = {"max_abs_diff": totals["max_abs_diff"][0]}
    worst = _worst({name: index for name, (_, index) in totals.items()}, values, ref, out, FlatBound(), shape)
    return IntegerComparison(
        dtype=fmt.name, shape=shape, n=ref.numel(), format_min=fmt.min, format_max=fmt.max,
        mismatches=totals["mismatches"][0], max_abs_diff=totals["max_abs_diff"][0],
        nan_mismatch=totals["nan_mismatch"][0], inf_mismatch=totals["inf_mismatch"][0],
        overflow=totals["overflow"][0], worst=worst,
    )
