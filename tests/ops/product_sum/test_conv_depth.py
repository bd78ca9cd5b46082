"""conv3d as 2-d convolutions per depth tap (runner/ops/product_sum/conv_depth.py, the CPU reference's conv3d) against
torch's conv3d, over random 3-d geometries: strides, dilations, asymmetric padding, groups; every direction."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conv_geometries import geometries
from e2egen.runner import make_problem
from e2egen.runner.ops.product_sum.conv import ConvParams
from e2egen.runner.ops.product_sum.conv_depth import conv3d_by_depth
from e2egen.runner.ops.product_sum.kernels import torch_conv_bwd_data, torch_conv_bwd_weight, torch_conv_fwd

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths


def torch_conv3d(direction: str, params: ConvParams, t: dict[str, torch.Tensor]) -> torch.Tensor:
    geometry = params.geometry
    if direction == "fwd":
        return torch_conv_fwd(t["x"], t["w"], **geometry)
    if direction == "bwd_data":
        return torch_conv_bwd_data(t["dy"], t["w"], input_shape=params.x_shape, **geometry)
    return torch_conv_bwd_weight(t["x"], t["dy"], weight_shape=params.w_shape, **geometry)


@settings(max_examples=120, deadline=None)
@given(params=geometries(dims=st.just(3)), seed=st.integers(0, 2**31 - 1), dtype=st.sampled_from([torch.float64, torch.float32]))
def test_depth_taps_give_the_3d_convolution(params: ConvParams, seed: int, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(seed)
    tensors = {name: torch.randn(shape, dtype=dtype, generator=generator)
               for name, shape in (("x", params.x_shape), ("w", params.w_shape), ("dy", params.y_shape))}
    tolerance = 1e-12 if dtype == torch.float64 else 1e-4
    for direction in ("fwd", "bwd_data", "bwd_weight"):
        got = conv3d_by_depth(direction, params, tensors)
        want = torch_conv3d(direction, params, tensors)
        assert got.dtype == dtype and got.shape == want.shape, direction
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance, msg=direction)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_the_conv3d_reference_equals_torchs_conv3d(direction):
    """The op's reference (by depth taps on the CPU) gives torch's conv3d's values on float64 inputs, with an
    asymmetric pad, a depth stride, a dilation and groups."""
    problem = make_problem("conv3d", direction, "f32", "nchw",
                           {"n": 2, "c": 4, "k": 6, "dhw": [5, 6, 7], "kernel": [3, 2, 3], "stride": [2, 1, 1],
                            "pad": [[1, 0], [0, 1], [1, 1]], "dilation": [1, 2, 1], "groups": 2}, (-1.0, 1.0), 0)
    generator = torch.Generator().manual_seed(1)
    inputs = {name: torch.randn(shape, dtype=torch.float64, generator=generator)
              for name, shape in problem.input_shapes.items()}
    (name, got), = problem.numerics.reference(problem, inputs).items()
    want = torch_conv3d(direction, problem.params, inputs)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
