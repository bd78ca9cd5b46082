"""One tap's partial sum (runner/ops/product_sum/conv_taps.py) against the whole convolution with the weight masked to
that tap, over random geometries: 1-3 spatial dims, strides, dilations, asymmetric padding, groups."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conv_geometries import geometries
from e2egen.runner.ops.product_sum.conv import ConvParams
from e2egen.runner.ops.product_sum.conv_taps import bwd_data_tap_partials, scattered_into_input, tap_offsets, tap_partial
from e2egen.runner.ops.product_sum.kernels import torch_conv_bwd_data, torch_conv_fwd, unpadded

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths


def _masked(w: torch.Tensor, tap: int) -> torch.Tensor:
    flat = w.reshape(*w.shape[:2], -1)
    masked = torch.zeros_like(flat)
    masked[..., tap] = flat[..., tap]
    return masked.reshape(w.shape)


def _inputs(params: ConvParams, generator: torch.Generator) -> dict[str, torch.Tensor]:
    def draw(shape):
        return torch.randn(shape, dtype=torch.float64, generator=generator)
    return {"x": draw(params.x_shape), "w": draw(params.w_shape), "dy": draw(params.y_shape)}


@settings(max_examples=150, deadline=None)
@given(params=geometries(), seed=st.integers(0, 2**31 - 1))
def test_tap_partial_equals_the_convolution_with_one_tap(params: ConvParams, seed: int) -> None:
    inputs = _inputs(params, torch.Generator().manual_seed(seed))
    geometry = params.geometry
    for tap in range(math.prod(params.kernel)):
        w = _masked(inputs["w"], tap)
        fwd = torch_conv_fwd(inputs["x"], w, **geometry)
        bwd = torch_conv_bwd_data(inputs["dy"], w, input_shape=params.x_shape, **geometry)
        torch.testing.assert_close(tap_partial("fwd", params, inputs, tap), fwd, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(tap_partial("bwd_data", params, inputs, tap), bwd, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(params=geometries(), seed=st.integers(0, 2**31 - 1))
def test_taps_add_up_to_the_convolution(params: ConvParams, seed: int) -> None:
    inputs = _inputs(params, torch.Generator().manual_seed(seed))
    taps = range(math.prod(params.kernel))
    total = sum(tap_partial("fwd", params, inputs, t) for t in taps)
    torch.testing.assert_close(total, torch_conv_fwd(inputs["x"], inputs["w"], **params.geometry))


def test_tap_offsets_are_row_major() -> None:
    kernel = (2, 3, 4)
    assert [tap_offsets(t, kernel) for t in range(24)] == [(a, b, c) for a in range(2) for b in range(3) for c in range(4)]


def test_bwd_weight_has_no_taps() -> None:
    params = ConvParams(n=1, c=1, k=1, size=(4,), kernel=(3,), stride=(1,), pad=(0,), dilation=(1,))
    with pytest.raises(ValueError, match="bwd_weight"):
        tap_partial("bwd_weight", params, _inputs(params, torch.Generator().manual_seed(0)), 0)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_a_depthwise_tap_is_the_convolution_with_one_tap(dims: int) -> None:
    """Depthwise convs (one channel per group) take the per-channel product: the same values."""
    params = ConvParams(n=2, c=6, k=6, size=(7,) * dims, kernel=(3,) * dims, stride=(2,) * dims, pad=(1,) * dims,
                        dilation=(1,) * dims, groups=6, pad_end=(0,) * dims)
    inputs = _inputs(params, torch.Generator().manual_seed(dims))
    for tap in range(math.prod(params.kernel)):
        w = _masked(inputs["w"], tap)
        fwd = torch_conv_fwd(inputs["x"], w, **params.geometry)
        bwd = torch_conv_bwd_data(inputs["dy"], w, input_shape=params.x_shape, **params.geometry)
        torch.testing.assert_close(tap_partial("fwd", params, inputs, tap), fwd, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(tap_partial("bwd_data", params, inputs, tap), bwd, rtol=1e-12, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(params=geometries(), seed=st.integers(0, 2**31 - 1))
def test_a_bwd_data_tap_is_placed_as_in_the_padded_input(params: ConvParams, seed: int) -> None:
    """Written straight into the unpadded input's shape, contiguous: bit for bit the tap's results placed
    in a zero padded input at its positions, then the unpadded part taken."""
    generator = torch.Generator().manual_seed(seed)
    gathered = torch.randn((params.n, params.c, *params.out_size), dtype=torch.float64, generator=generator)
    for tap in range(math.prod(params.kernel)):
        window = params.tap_positions(tap_offsets(tap, params.kernel))
        padded = gathered.new_zeros((params.n, params.c, *params.padded_size))
        padded[(..., *window)] = gathered
        placed = scattered_into_input(gathered, params, window)
        assert placed.is_contiguous() and torch.equal(placed, unpadded(padded, params.size, params.pads))


def test_a_tap_that_meets_only_padding_contributes_zeros() -> None:
    params = ConvParams(n=1, c=2, k=3, size=(1,), kernel=(3,), stride=(2,), pad=(2,), dilation=(1,))
    inputs = _inputs(params, torch.Generator().manual_seed(1))
    middle = tap_partial("bwd_data", params, inputs, 1)  # reads padded positions 1 and 3; the input is at 2
    assert middle.shape == params.x_shape and not middle.any()
    assert tap_partial("bwd_data", params, inputs, 0).any()  # positions 0 and 2: the input's one element


@settings(max_examples=100, deadline=None)
@given(params=geometries(), seed=st.integers(0, 2**31 - 1), reverse=st.booleans())
def test_bwd_data_taps_from_one_product_are_each_taps_partial(params: ConvParams, seed: int, reverse: bool) -> None:
    """bwd_data_tap_partials multiplies every tap's weight by dy at once: each tap's partial, in the order
    asked for, the same values as tap_partial's product of that tap alone (to float64's rounding)."""
    inputs = _inputs(params, torch.Generator().manual_seed(seed))
    taps = list(range(math.prod(params.kernel)))
    if reverse:
        taps.reverse()
    partials = list(bwd_data_tap_partials(params, inputs, taps))
    assert len(partials) == len(taps)
    for tap, partial in zip(taps, partials):
        assert partial.shape == params.x_shape and partial.is_contiguous()
        torch.testing.assert_close(partial, tap_partial("bwd_data", params, inputs, tap), rtol=1e-12, atol=1e-12)
