"""A problem's inputs: drawn, rounded, and stored the way the kernel expects.

Values are drawn uniformly from the case's range: real numbers by runner/draws.py, a counter-based
generator with one stream per input (in the op's input order) and values in logical shape order, on
every core; with input_data "integers" the integers lo..hi by a CPU torch.Generator seeded with the
case's seed, one tensor after the other. They are then rounded once (to nearest, ties to even) to the
input format; an op may shape the drawn values first (Op.adjust_inputs: attention's peaky and offset
scores) or quantize them itself (Op.quantize_inputs: a scaled gemm's block scales). So the values
depend on the seed, shapes and dtype only: not on the layout, not on the device. The reference gets
exactly these rounded values, upcast to float64.

rocmlir-gen's deterministic data (problem.py's input data kinds): "pattern" repeats its fixed pattern for
each input's format over the input's elements in the order the layout stores them, as rocmlir-gen fills
its buffers (so this one kind depends on the layout); "ones" makes every input 1. With random inputs named
(rocmlir-gen's -rand_side) only those are drawn, as above; the others hold rocmlir-gen's constant, 1 beside
integers and 0.1 beside reals.

The draw is float64, except where every input format has at most 11 significand bits (f16, bf16,
fp8) or is f32 and the op takes the plain draw: there it is f32 (24 bits, at least 13 more than a narrow
format, so the values still cover the format's grid), scaled to the range in float64 and rounded once to
f32, then to a narrow format by torch's f32 cast, which is a single correct rounding. For f32 inputs the
f32 draw is the input itself, the same values as the float64 draw rounded once to f32. An f32 draw
writes half the memory of a float64 one (1.8x faster here).
"""
from __future__ import annotations

import math
from typing import Collection

import torch

from e2egen import metrics
from e2egen.metrics.backend import numba_path
from e2egen.metrics.encoding import decode, encode

from e2egen.runner import draws, magnitude, narrowing
from e2egen.runner.dtypes import FLOAT8, input_format_name, storage_dtype
from e2egen.runner.problem import CONSTANT_BESIDE_RANDOM, Problem, pattern_of, split_input_data


def generate_inputs(problem: Problem) -> dict[str, torch.Tensor]:
    """Logical-shape, contiguous CPU tensors in the kernel's input dtype."""
    generator = torch.Generator(device="cpu")
    generator.manual_seed(problem.seed)
    ranges = problem.spec.input_ranges(problem.params, problem.input_range)
    formats = input_formats(problem)
    draw_dtype = torch.float32 if draws_in_f32(problem, formats) else torch.float64
    kind, random = split_input_data(problem.input_data)
    drawn = {}
    for stream, (name, shape) in enumerate(problem.input_shapes.items()):
        lo, hi = ranges.get(name, problem.input_range)
        if kind == "pattern":
            drawn[name] = pattern_in_memory_order(problem, name, shape, pattern_of(formats[name]))
        elif kind == "ones" or (random and name not in random):
            drawn[name] = torch.full(shape, CONSTANT_BESIDE_RANDOM.get(kind, 1.0), dtype=torch.float64)
        elif kind == "integers":
            drawn[name] = draw_integers(shape, lo, hi, generator)
        else:
            drawn[name] = draws.uniform(shape, lo, hi, problem.seed, stream, draw_dtype)
    problem.numerics.adjust_inputs(problem.params, drawn)
    return problem.numerics.quantize_inputs(problem.params, drawn, formats)


def pattern_in_memory_order(problem: Problem, name: str, shape, pattern: tuple[float, ...]) -> torch.Tensor:
    """The logical tensor whose storage in the problem's layout (arrange_for_kernel) repeats `pattern` element
    after element: rocmlir-gen fills a buffer in the order it lays the tensor out in memory, so the same
    logical element gets a different value in another layout."""
    count = math.prod(shape)
    index = torch.arange(count, dtype=torch.float64).reshape(shape)  # each element's logical position, exact
    stored = problem.numerics.arrange_inputs(problem.params, {name: index}, problem.layout)[name]
    by_stride = sorted(range(stored.dim()), key=lambda d: stored.stride(d), reverse=True)
    in_memory = stored.permute(by_stride).reshape(-1).to(torch.int64)  # a dense tensor: largest stride outermost
    position = torch.empty(count, dtype=torch.int64)
    position[in_memory] = torch.arange(count)
    return torch.tensor(pattern, dtype=torch.float64)[position % len(pattern)].reshape(shape)


F32_DRAW_MAX_BITS = 11  # significand bits (implicit one included) of the widest format an f32 draw serves


def draws_in_f32(problem: Problem, formats: dict[str, str]) -> bool:
    """Whether this problem's real-valued draw is f32 (module docstring): narrow formats and f32 itself, and
    only for an op that neither shapes nor quantizes the draw itself (those work on float64 values)."""
    if not problem.numerics.keeps_uniform_draw:
        return False
    return all(fmt == "f32" or (not metrics.get_format(fmt).is_integer and metrics.get_format(fmt).mantissa_bits + 1 <= F32_DRAW_MAX_BITS)
               for fmt in formats.values())


def input_formats(problem: Problem) -> dict[str, str]:
    """Each input's format (Op.input_formats): the dtype's, except for a pair "A_B" (fp8 with bf8), where the
    first input of the op takes A's format and every other input B's, and for ops whose inputs differ in kind."""
    return problem.spec.input_formats(problem.params, problem.direction, problem.dtype)


def draw_integers(shape, lo: float, hi: float, generator: torch.Generator) -> torch.Tensor:
    """Integers lo..hi inclusive, each equally likely, as float64 (exact in every input format the problem
    allows: Problem checks the range fits); one generator stream, so independent of layout and device."""
    return torch.randint(int(lo), int(hi) + 1, shape, generator=generator, dtype=torch.int64).to(torch.float64)


def round_to_input_format(values: torch.Tensor, problem: Problem) -> torch.Tensor:
    """float64 -> the dtype's (first) input format, rounded once to nearest even."""
    return round_to_format(values, input_format_name(problem.dtype))


def round_to_format(values: torch.Tensor, fmt: str, *, saturate: bool = False) -> torch.Tensor:
    """float64 -> a tensor of the format's storage dtype, rounded once to nearest even. fp8 rounds from
    float64 in metrics (exact for every format; an overflow there is NaN unless `saturate`, but Problem
    keeps the range inside the format); fp4 gives its codes, one a byte (it saturates: it has no inf or
    NaN); e8m0 takes powers of two; i8 takes the nearest integer (ties to even): integer data is exact."""
    dtype = storage_dtype(fmt)
    if fmt == "f4e2m1":
        return fp4_codes(values)
    if fmt == "e8m0":
        return metrics.round_to(values, fmt).to(torch.float32).to(dtype)  # exact: a power of two
    if fmt in FLOAT8:
        if saturate:
            largest = metrics.get_format(fmt).max
            values = values.clamp(-largest, largest)  # beyond ±max, saturating RNE gives ±max
            if values.dtype == torch.float64 and numba_path(values.device):
                # inside the range now: metrics.round_to's one numba pass (a tenth of the passes below),
                # then a cast that is exact
                return metrics.round_to(values, fmt).to(dtype)
        # f32 keeps more than 2 bits beyond fp8's, so rounding to odd first makes torch's f32 -> fp8 cast
        # (nearest even) the correct single rounding, as for f16 (round_to_storage); equal bit for bit to
        # metrics.round_to (tests/runner/test_runner_inputs.py)
        return (values if values.dtype == torch.float32 else _round_to_odd_f32(values)).to(dtype)
    if fmt == "i8":
        return torch.round(values).to(dtype)
    return round_to_storage(values, dtype)


def store_exact(values: torch.Tensor, fmt: str) -> torch.Tensor:
    """float64 values the format holds exactly (already rounded, e.g. scaling.quantize's) -> its storage
    dtype: torch's cast, which is exact for them, in place of round_to_format's rounding pass; fp4 its
    codes, i8 and the wide formats as round_to_format stores them (equal there: tests/test_scaled_gemm.py)."""
    if fmt in FLOAT8 or fmt == "f32":
        return values.to(storage_dtype(fmt))
    if fmt == "e8m0":
        return values.to(torch.float32).to(storage_dtype(fmt))  # powers of two: exact in f32
    return round_to_format(values, fmt)


_FP4_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # code & 7 -> |value|


def fp4_codes(values: torch.Tensor) -> torch.Tensor:
    """float64 -> f4e2m1 codes (uint8, one a byte), nearest with ties to the even code, saturating at ±6
    (fp4 has no inf or NaN): metrics.encoding.encode(values, "f4e2m1", saturate=True), one numba pass on
    the CPU. Elsewhere one search among the midpoints of its eight magnitudes, equal to it for every
    non-NaN value (drawn inputs have none)."""
    values = values.to(torch.float64)  # exact from f32
    if numba_path(values.device):
        return encode(values, "f4e2m1", saturate=True)
    magnitudes = torch.tensor(_FP4_MAGNITUDES, dtype=torch.float64)
    midpoints = (magnitudes[1:] + magnitudes[:-1]) / 2
    absolute = values.abs()
    codes = torch.bucketize(absolute, midpoints)  # a tie (|x| on a midpoint) gets the lower code
    tie = (codes < len(midpoints)) & (absolute == midpoints[codes.clamp(max=len(midpoints) - 1)])
    codes = torch.where(tie & (codes % 2 == 1), codes + 1, codes)
    return (codes | (torch.signbit(values).to(torch.int64) << 3)).to(torch.uint8)


def round_to_storage(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Correctly rounded (nearest even) float64 -> float32 / float16 / bfloat16.

    torch casts float64 to f16/bf16 through f32, rounding twice: 92 of 1.6M
    uniform f16 draws in [-1, 1] land on the wrong neighbour (their f32 value
    is exactly halfway between two f16 values). Rounding to f32 *to odd* first makes the second
    rounding correct (f32 keeps more than 2 extra bits; Boldo & Melquiond,
    "Emulation of FMA and correctly rounded sums: proved algorithms using
    rounding to odd", 2008). Equal to metrics.round_to, bit for bit. With numba
    the rounding is one vectorised pass over the bits instead (runner/narrowing.py: about
    1 ns per element with the draw and the float64 copy, against 6-7 for these torch passes alone;
    benchmarks/bench_inputs.py), equal bit for bit too.
    """
    if dtype in (torch.float32, torch.float64) or values.dtype == torch.float32:
        return values.to(dtype)  # from f32: torch's cast is the one correct rounding
    if narrowing.AVAILABLE and values.device.type == "cpu" and values.dtype == torch.float64:
        return narrowing.narrow(values.contiguous(), dtype)
    return _round_to_odd_f32(values).to(dtype)


def _round_to_odd_f32(values: torch.Tensor) -> torch.Tensor:
    nearest = values.to(torch.float32)
    bits = nearest.view(torch.int32)
    widened = nearest.to(torch.float64)
    # Inexact results with an even last bit move one step towards the exact
    # value (±1 on the sign-magnitude bits moves the magnitude); the other
    # neighbour has an odd last bit.
    needs_odd = (widened != values) & ((bits & 1) == 0)
    step = torch.where(values.abs() > widened.abs(), 1, -1).to(torch.int32)
    return torch.where(needs_odd, bits + step, bits).view(torch.float32)


def arrange_for_kernel(problem: Problem, inputs: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """The kernel's tensors: on the device, in the problem's memory layout."""
    on_device = {name: tensor.to(device) for name, tensor in inputs.items()}
    return problem.numerics.arrange_inputs(problem.params, on_device, problem.layout)


def reference_inputs(inputs: dict[str, torch.Tensor], device: torch.device,
                     flush_format: str | None = None, scanned: Collection[str] = (),
                     streamed: Collection[str] = ()) -> dict[str, torch.Tensor]:
    """The same values in float64 (exact: every input format is a subset of float64); with flush_format,
    flushed as the reference's ftz option flushes them (metrics.flush_subnormals in that format), where
    the storage allows in the widening pass itself. scanned: the inputs whose magnitudes the bound will
    read as f32 (magnitude.scanned_inputs), taken in the same pass where it can (magnitude.widened_with_scan).
    streamed: the inputs the op widens piece by piece itself (Op.streamed_inputs), kept in their format."""
    return {name: (_flushed_in_place_of_widening(tensor, flush_format) if name in streamed
                   else widen_to_float64(tensor, flush_format, name in scanned)).to(device)
            for name, tensor in inputs.items()}


def _flushed_in_place_of_widening(tensor: torch.Tensor, flush_format: str | None) -> torch.Tensor:
    """A streamed input as the reference reads it: flushed where the reference flushes (exact in its own format:
    a subnormal becomes a zero of its sign)."""
    return tensor if flush_format is None else metrics.flush_subnormals(tensor, flush_format).to(tensor.dtype)


def widen_to_float64(tensor: torch.Tensor, flush_format: str | None = None, scan_magnitudes: bool = False) -> torch.Tensor:
    """Exact. torch's f16/bf16 -> float64 casts run on one core at ~4 ns per element; with numba one
    vectorised pass over the bits on every core (narrowing.widen). uint8 holds fp4 codes (runner/dtypes.py). With
    flush_format, the values subnormal in that format become zeros of their sign. scan_magnitudes: take
    |tensor| as f32 in the same pass (reference_inputs' `scanned`)."""
    if scan_magnitudes:
        widened = magnitude.widened_with_scan(tensor, flush_format)
        if widened is not None:
            return widened
    if tensor.dtype == torch.uint8:
        widened = decode(tensor, "f4e2m1")
    elif (narrowing.AVAILABLE and tensor.dtype in narrowing.NARROW_DTYPES and tensor.device.type == "cpu"
            and tensor.is_contiguous()):
        if flush_format == narrowing.NARROW_DTYPES[tensor.dtype]:  # the widening flushes: no pass of its own
            return narrowing.widen(tensor, flush_subnormals=True)
        widened = narrowing.widen(tensor)
    else:
        widened = tensor.to(torch.float64)
    return widened if flush_format is None else metrics.flush_subnormals(widened, flush_format)
