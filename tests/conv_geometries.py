"""A hypothesis strategy of convolution geometries: strides, dilations, asymmetric padding, groups."""
from __future__ import annotations

from hypothesis import assume
from hypothesis import strategies as st

from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.product_sum.conv import ConvParams


@st.composite
def geometries(draw, dims=st.integers(1, 3)) -> ConvParams:
    spatial = draw(dims)
    groups = draw(st.sampled_from([1, 2, 3]))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(spatial))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(spatial))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(spatial))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(spatial))
    pad_end = tuple(draw(st.integers(0, 2)) for _ in range(spatial)) if draw(st.booleans()) else ()
    span = [d * (r - 1) + 1 for r, d in zip(kernel, dilation)]
    size = tuple(draw(st.integers(max(1, s - 1), s + 5)) for s in span)
    try:
        return ConvParams(n=draw(st.integers(1, 2)), c=groups * draw(st.integers(1, 3)),
                          k=groups * draw(st.integers(1, 3)), size=size, kernel=kernel, stride=stride, pad=pad,
                          dilation=dilation, groups=groups, pad_end=pad_end)
    except ProblemError:  # an output smaller than one position: not a convolution
        assume(False)
