"""`make setup`'s numba warm-up runs every kernel for every argument type a run gives it."""
from __future__ import annotations

import pytest

from e2egen.metrics import formats, fused_numba, rounding_numba
from e2egen.runner import draws, interval_passes, magnitude, narrowing, partial_passes, softmax_passes, upper_matmul
from e2egen.runner.warmup import warm


@pytest.mark.skipif(not fused_numba.AVAILABLE, reason="numba is not installed")
def test_warm_compiles_every_comparison_and_input_rounding_signature():
    float_formats = [name for name in formats.DTYPE_NAMES
                     if not formats.get_format(name).is_integer and formats.get_format(name).torch_dtype is not None]
    draw_calls = len(draws.DRAW_DTYPES)
    rounding_calls = 11  # round_to, ulp, rounding_deviation, encode and the interval primitives' seven passes
    # each comparison without a bound, with one written out, and with one formed in its pass from f32 or
    # float64 sums
    # the f32 scan, the rounding up, the partial sums' start and accumulation for float64 and f32 partials,
    # one at a time and in pairs, and the bound formed on them from float64 and f32 sums; the ulp terms
    # per format
    bound_calls = 2 + 3 + 8 + 2 * 2 * 2 + 2 + 3 * 3
    # the same scan taken while f32, f16 and bf16 inputs are widened
    input_scan_calls = 1 + len(narrowing.NARROW_DTYPES)
    assert warm() == (4 * len(float_formats) + 2 * len(narrowing.NARROW_DTYPES) + draw_calls + bound_calls
                      + input_scan_calls + rounding_calls)
    from e2egen.metrics import fused_numba

    recipes = {str(signature[3]) for signature in fused_numba._kernel.signatures}
    assert len(recipes) == 2 and "none" in recipes  # a comparison without a recipe, and with one
    assert {str(signature[2].dtype) for signature in fused_numba._kernel.signatures if str(signature[3]) != "none"} \
        == {"float32", "float64"}  # formed from f32 sums and from float64 ones
    for kernel in (rounding_numba._round_to, rounding_numba._ulp, rounding_numba._codes, rounding_numba._deviation, interval_passes._outward,
                   interval_passes._width, interval_passes._product, interval_passes._sum,
                   interval_passes._monotone, interval_passes._quotient, interval_passes._output_side,
                   fused_numba.scaled_plus_ulps_into, fused_numba.add_ulps_into,
                   fused_numba.partial_sums_plus_ulps_into, fused_numba._maxima, fused_numba._locate,
                   upper_matmul._round_up_chunk, partial_passes._accumulate, partial_passes._start,
                   partial_passes._accumulate_pair, partial_passes._start_pair, softmax_passes._rows,
                   upper_matmul._widen_chunk, upper_matmul._widen_stacked_rows, magnitude._scan_f32_chunk,
                   magnitude._widen_patterns_chunk):
        assert kernel.signatures, kernel  # compiled (or loaded from the cache) by warm()
    for kernel in (partial_passes._accumulate, partial_passes._start, partial_passes._accumulate_pair,
                   partial_passes._start_pair):
        assert {str(signature[0].dtype) for signature in kernel.signatures} == {"float32", "float64"}
    assert {str(signature[3].dtype) for signature in softmax_passes._rows.signatures} == {"float32", "float64"}
    kinds = {(str(signature[3].dtype), str(signature[4]) != "none", str(signature[5]) != "none")
             for signature in softmax_passes._rows.signatures}  # (Q·Kᵀ terms, score scale given, bias given)
    assert kinds == {(dtype, scaled, biased) for dtype in ("float32", "float64") for scaled in (False, True)
                     for biased in (False, True)}
    assert {str(signature[0].dtype) for signature in upper_matmul._widen_chunk.signatures} == {"float32", "float64"}
