"""Compile the numba kernels into their on-disk cache before the first case needs them.

    .venv/bin/python -m e2egen.runner.warmup      (`make setup` and `make pr` run it through `e2egen warm`,
                                                   when the cache's stamp is not current)

A cold cache costs every fresh process about 2 s of compilation before its first comparison, and under
pytest-xdist every worker pays it; compiled once here, each process loads the cached machine code instead.
Each kernel is compiled for every argument type a run gives it: every float format's comparison with
and without a bound (written out, or formed in the pass from f32 or float64 sums), the input draw in f32
and float64, the input rounding of f16 and bf16, Σ|a·b|'s scan while f32, f16 and bf16 inputs are
widened, the bound's passes (the partial sums' and attention's included), round_to and ulp, and the
interval primitives' passes.
"""
from __future__ import annotations

import itertools
import time

import torch

from e2egen import metrics
from e2egen.metrics import formats, numba_kernels
from e2egen.metrics import ulp_terms
from e2egen.metrics.encoding import encode
from e2egen.metrics.rounding import rounding_deviation
from e2egen.metrics.ulp_terms import ScaledPlusUlps
from e2egen.runner import draws, magnitude, narrowing, numba_cache, partial_passes, softmax_passes, upper_matmul
from e2egen.runner.interval_passes import (fused_monotone, fused_output_side, fused_outward, fused_product, fused_quotient,
                                  fused_sum, fused_width)
from e2egen.runner.intervals import ALLOWANCES, F64_SLACK


def warm() -> int:
    """Run each numba kernel once per argument type; returns the number of calls made (0 without numba)."""
    if not numba_kernels.AVAILABLE:
        return 0
    calls = 0
    ref = torch.linspace(-3.0, 3.0, 257, dtype=torch.float64)
    bound = torch.full_like(ref, 1e-3)
    # a bound the comparison forms in its pass, from f32 sums (widened) and from float64 ones
    unformed = (ScaledPlusUlps(bound.float(), 2.0, ref, "f32", 1.0, widening=1.5),
                ScaledPlusUlps(bound, 2.0, ref, "f16", 1.0))
    for name in formats.DTYPE_NAMES:
        fmt = formats.get_format(name)
        if fmt.is_integer or fmt.torch_dtype is None:
            continue
        out = ref.to(fmt.torch_dtype)
        for with_bound in (None, bound, *unformed):
            metrics.compare(ref, out, dtype=name, bound=with_bound, backend="numba")
            calls += 1
    for dtype in narrowing.NARROW_DTYPES:
        narrowing.widen(narrowing.narrow(ref, dtype))
        calls += 2
    calls += _warm_input_scans(ref)
    for dtype in draws.DRAW_DTYPES:
        draws.uniform((257,), -1.0, 1.0, 0, 0, dtype)
        calls += 1
    calls += _warm_bound_kernels(ref)
    calls += _warm_rounding_kernels(ref)
    return calls


def _warm_input_scans(ref: torch.Tensor) -> int:
    """Σ|a·b|'s f32 scan taken while f32, f16 and bf16 inputs are widened (runner/magnitude.py)."""
    for dtype in (torch.float32, *narrowing.NARROW_DTYPES):
        magnitude.widened_with_scan(ref.to(dtype))
    return 1 + len(narrowing.NARROW_DTYPES)


def _warm_bound_kernels(ref: torch.Tensor) -> int:
    """The bound's kernels: Σ|a·b|'s f32 scan (runner/magnitude.py), the rounding up of magnitudes to f32
    and the widening of their f32 or float64 sums, stacked or not (runner/upper_matmul.py), attention's
    pass over its scores from f32 and float64 Q·Kᵀ terms (runner/softmax_passes.py), the partial sums'
    running sums from float64 and f32 partials (runner/partial_passes.py), the bound formed on them, and
    the fused ulp term per output format, for float64 and f32 sums."""
    magnitude._narrowed(ref)
    upper_matmul.rounded_up(ref)
    calls = 2
    for summed in (ref.abs().float(), ref.abs()):  # a product of magnitudes summed in f32, or in float64
        upper_matmul.UnwidenedProduct.of(summed, 4).widened()
        calls += 1
    upper_matmul.UnwidenedProduct.of(ref.abs().float().view(-1, 1), 4).widened_by_term(1, 1)  # stacked operands
    calls += 1
    scores = ref.view(1, 1, 1, -1)
    # attention's Q·Kᵀ magnitudes summed in f32 or in float64 (decode's few query rows; quantized attention's
    # change factors), with or without score scale and bias tensors
    for raw, score_scale, bias in itertools.product((scores.float(), scores), (None, scores), (None, scores)):
        softmax_passes.weight_terms(scores.abs(), scores, scores.amax(-1, keepdim=True), raw, 1, allowance=0.0,
                                    widening=1.0, scale=1.0, score_ops=1, log_keys=1.0, argument_roundings=2,
                                    exp_term=32, score_scale=score_scale, bias=bias)
        calls += 1
    for part in (ref, ref.float()):  # the kernel's partials in float64 or, where proven, in f32
        for parts in ((part,), (part, part)):  # one at a time, and in pairs
            partial_passes.accumulate(parts, *partial_passes.start(parts))
            calls += 2
    for terms in (ref.abs(), ref.abs().float()):  # a bound on a kernel's partial sums, Σ|a·b| float64 or f32
        ulp_terms.partial_sums_plus_ulps(ref.abs(), ref.abs(), 2.0, 1.0, terms, 3.0, ref, "f16", 1.0)
        calls += 1
    for name in ("f32", "f16", "bf16"):
        ulp_terms.add_ulps(ref.abs(), ref, name, 1.0)
        ulp_terms.scaled_plus_ulps(ref.abs(), 2.0, ref, name, 1.0)
        ulp_terms.scaled_plus_ulps(ref.abs().float(), 2.0, ref, name, 1.0, widening=1.5)  # Σ|a·b| summed in f32
        calls += 3
    return calls


def _warm_rounding_kernels(ref: torch.Tensor) -> int:
    """metrics.round_to's, metrics.ulp's, rounding_deviation's and encode's numba passes, and the interval
    primitives' (runner/interval_passes.py); one argument type each, whatever the format."""
    metrics.round_to(ref, "f16")
    metrics.ulp(ref, "f16")
    rounding_deviation(ref, ref.abs(), "f16")
    encode(ref, "f4e2m1", saturate=True)
    fused_outward(ref, ref, "f32")
    fused_product(ref, ref, ref, ref, F64_SLACK, "f32")
    fused_sum(ref, ref, ref, ref, F64_SLACK, "f32")
    fused_width(ALLOWANCES["exp"]["f32"], ref, ref, "f32")
    fused_monotone(ref, ref, ref, ref, ALLOWANCES["exp"]["f32"], F64_SLACK, "f32")
    fused_quotient(ref, ref, ref, ref, ALLOWANCES["div"]["f32"], F64_SLACK, "f32")
    fused_output_side(ref, ref, ref, ref)
    return 11


def main() -> None:
    started = time.perf_counter()
    calls = warm()
    what = f"{calls} kernel calls" if calls else "numba is not installed: nothing to compile"
    print(f"numba cache warm ({what}, {time.perf_counter() - started:.1f} s)")
    if calls:
        numba_cache.mark_warm()


if __name__ == "__main__":
    main()
