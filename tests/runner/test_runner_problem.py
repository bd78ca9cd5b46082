"""make_problem: normalisation, validation messages, and what a problem knows about itself."""
from __future__ import annotations

import math

import pytest

from e2egen import runner
from e2egen.runner import OPS, ProblemError, make_problem
from e2egen.runner.inputs import generate_inputs

CONV2D = {"n": 2, "c": 8, "k": 6, "hw": [9, 7], "kernel": 3}


def conv2d(**changes):
    params = {**CONV2D, **changes}
    return {k: v for k, v in params.items() if v is not None}


def error_of(op="conv2d", params=None, direction="fwd", dtype="f16", layout="nchw", input_range=(-1.0, 1.0), seed=0):
    with pytest.raises(ProblemError) as info:
        make_problem(op, direction, dtype, layout, conv2d() if params is None else params, input_range, seed)
    return info.value


def test_public_names():
    for name in ("make_problem", "run", "OPS", "DTYPES", "Problem", "ReferenceOptions", "BoundModel", "TimingOptions",
                 "RunResult", "ProblemError", "Skip", "KernelFailure", "ImplError", "resolve_impl", "select_device"):
        assert hasattr(runner, name), name
    assert runner.DTYPES == ("f32", "tf32", "f16", "bf16", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz",
                             "f8e4m3fn_f8e5m2", "f8e5m2_f8e4m3fn", "f8e4m3fnuz_f8e5m2fnuz", "f8e5m2fnuz_f8e4m3fnuz", "f4e2m1", "i8")
    assert issubclass(ProblemError, ValueError) and issubclass(runner.ImplError, ValueError)


def test_ops_describe_their_axes_and_parameters():
    assert set(OPS) == {"conv1d", "conv2d", "conv3d", "gemm", "scaled_gemm", "attention", "gemm_gemm", "conv_gemm",
                        "exp", "log", "log1p", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "rsqrt", "sqrt", "square", "relu",
                        "div", "pow", "sum", "mean", "max", "var", "cumsum", "softmax", "log_softmax", "logsumexp", "layer_norm",
                        "rms_norm", "group_norm", "batch_norm"}
    for name, spatial in (("conv1d", "w"), ("conv2d", "hw"), ("conv3d", "dhw")):
        op = OPS[name]
        assert op.name == name
        assert op.directions == ("fwd", "bwd_data", "bwd_weight")
        assert op.layouts == ("nchw", "nhwc")
        assert op.param_names == ("n", "c", "k", spatial, "kernel")
        assert dict(op.optional_params) == {"stride": 1, "pad": 0, "dilation": 1, "groups": 1, "out_dtype": ""}
    gemm = OPS["gemm"]
    assert gemm.directions == ("fwd",) and gemm.layouts == ("nn", "nt", "tn", "tt")
    assert gemm.param_names == ("m", "n", "k") and dict(gemm.optional_params) == {"batch": 0, "out_dtype": ""}
    attention = OPS["attention"]
    assert attention.directions == ("fwd",) and {"bhsd", "bshd", "bhsd-kt", "bshd-qt-kt-vt"} <= set(attention.layouts)
    assert len(attention.layouts) == 16 and attention.param_names == ("seq_q", "seq_k", "head_dim_qk")


def test_ints_broadcast_to_every_spatial_dim():
    p = make_problem("conv3d", "fwd", "f32", "nhwc", {"n": 1, "c": 2, "k": 2, "dhw": 5, "kernel": [1, 3, 3], "pad": 1},
                     (-1, 1), 3)
    assert p.params.size == (5, 5, 5)
    assert p.params.kernel == (1, 3, 3)
    assert p.params.pad == (1, 1, 1) and p.params.stride == (1, 1, 1) and p.params.dilation == (1, 1, 1)
    assert p.input_range == (-1.0, 1.0)


def test_catalogue_form_round_trips():
    p = make_problem("conv2d", "bwd_data", "bf16", "nhwc", conv2d(stride=[2, 1], pad=1, dilation=2, groups=2), (1, 5), 9)
    again = make_problem("conv2d", "bwd_data", "bf16", "nhwc", p.params.to_catalogue(), (1, 5), 9)
    assert again == p
    g = make_problem("gemm", "fwd", "f16", "tn", {"m": 3, "n": 4, "k": 5, "batch": 2}, (-1, 1), 1)
    assert make_problem("gemm", "fwd", "f16", "tn", g.params.to_catalogue(), (-1, 1), 1) == g


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_conv_shapes_flops_and_reduction(direction):
    n, c, k, h, w, r, s, groups, stride, pad, dil = 2, 8, 6, 9, 7, 3, 2, 2, (2, 1), (1, 0), (1, 2)
    p = make_problem("conv2d", direction, "f16", "nchw",
                     {"n": n, "c": c, "k": k, "hw": [h, w], "kernel": [r, s], "stride": list(stride),
                      "pad": list(pad), "dilation": list(dil), "groups": groups}, (-1, 1), 0)
    ho = (h + 2 * pad[0] - dil[0] * (r - 1) - 1) // stride[0] + 1
    wo = (w + 2 * pad[1] - dil[1] * (s - 1) - 1) // stride[1] + 1
    x, wt, y = (n, c, h, w), (k, c // groups, r, s), (n, k, ho, wo)
    expected = {
        "fwd": ({"x": x, "w": wt}, y, c // groups * r * s),
        "bwd_data": ({"dy": y, "w": wt}, x, k // groups * r * s),
        "bwd_weight": ({"x": x, "dy": y}, wt, n * ho * wo),
    }[direction]
    assert p.input_shapes == expected[0]
    assert p.output_shape == expected[1]
    assert p.reduction_size == expected[2]
    # Every direction performs the forward pass's multiply-adds.
    assert p.flops == 2 * n * k * ho * wo * (c // groups) * r * s
    elements = sum(math.prod(v) for v in expected[0].values()) + math.prod(expected[1])
    assert p.bytes_needed == 2 * elements
    assert p.out_dtype == "f16"


def test_gemm_shapes_and_batch():
    plain = make_problem("gemm", "fwd", "tf32", "nt", {"m": 3, "n": 4, "k": 5}, (-1, 1), 0)
    assert plain.input_shapes == {"a": (3, 5), "b": (5, 4)} and plain.output_shape == (3, 4)
    assert plain.flops == 2 * 3 * 4 * 5 and plain.reduction_size == 5
    assert plain.out_dtype == "f32" and plain.bytes_needed == 4 * (15 + 20 + 12)
    assert make_problem("gemm", "fwd", "f16", "nn", {"m": 3, "n": 4, "k": 5, "batch": 0}, (-1, 1), 0).output_shape == (3, 4)
    one = make_problem("gemm", "fwd", "f16", "nn", {"m": 3, "n": 4, "k": 5, "batch": 1}, (-1, 1), 0)
    assert one.input_shapes == {"a": (1, 3, 5), "b": (1, 5, 4)} and one.output_shape == (1, 3, 4)


def test_unknown_parameter_suggests_the_close_one():
    err = error_of(params=conv2d(hww=4))
    assert err.key == "hww" and "did you mean 'hw'" in err.message
    assert set(err.choices) == {"n", "c", "k", "hw", "kernel", "stride", "pad", "dilation", "groups", "out_dtype"}


def test_missing_parameter():
    err = error_of(params=conv2d(kernel=None))
    assert err.key == "kernel" and "missing" in err.message and "hw" in err.message


@pytest.mark.parametrize("key,value", [("n", True), ("c", "8"), ("hw", 3.5), ("kernel", [3, 3.0]), ("groups", False)])
def test_wrong_type(key, value):
    err = error_of(params=conv2d(**{key: value}))
    assert err.key == key and "integer" in err.message and err.value == value


@pytest.mark.parametrize("key,value", [("n", 0), ("k", -1), ("stride", 0), ("dilation", [1, 0]), ("hw", [0, 4]), ("kernel", 0)])
def test_non_positive_sizes(key, value):
    err = error_of(params=conv2d(**{key: value}))
    assert err.key == key and "positive" in err.message


def test_negative_padding():
    err = error_of(params=conv2d(pad=-1))
    assert err.key == "pad" and ">= 0" in err.message


def test_output_smaller_than_one():
    err = error_of(params=conv2d(hw=[2, 9], kernel=5))
    assert err.key == "hw" and "output h would be" in err.message


def test_groups_must_divide_channels():
    err = error_of(params=conv2d(c=8, k=6, groups=4))
    assert err.key == "groups" and "c = 8" in err.message and "k = 6" in err.message
    assert err.choices == (1, 2)


@pytest.mark.parametrize("op,key,value", [("conv2d", "kernel", [3, 3, 3]), ("conv1d", "w", [4, 4]), ("conv3d", "stride", [1, 2])])
def test_list_of_wrong_length(op, key, value):
    dims = {"conv1d": 1, "conv2d": 2, "conv3d": 3}[op]
    spatial = {"conv1d": "w", "conv2d": "hw", "conv3d": "dhw"}[op]
    params = {"n": 1, "c": 2, "k": 2, spatial: 8, "kernel": 3, key: value}
    err = error_of(op=op, params=params)
    assert err.key == key and f"list of {dims} integers" in err.message


@pytest.mark.parametrize("axis,kwargs,choices", [
    ("op", {"op": "conv4d"}, tuple(OPS)),
    ("direction", {"direction": "bwd"}, ("fwd", "bwd_data", "bwd_weight")),
    ("dtype", {"dtype": "fp16"}, runner.DTYPES),
    ("layout", {"layout": "nwhc"}, ("nchw", "nhwc")),
])
def test_unknown_axis_values_name_the_choices(axis, kwargs, choices):
    err = error_of(**kwargs)
    assert err.key == axis and err.choices == choices
    for choice in choices:
        assert choice in err.message


def test_gemm_axes_and_params():
    assert error_of(op="gemm", params={"m": 1, "n": 1, "k": 1}, direction="bwd_data").choices == ("fwd",)
    assert error_of(op="gemm", params={"m": 1, "n": 1, "k": 1}, layout="nhwc").choices == ("nn", "nt", "tn", "tt")
    assert error_of(op="gemm", params={"m": 1, "n": 1, "k": 1, "batch": -1}, layout="nn").key == "batch"
    assert error_of(op="gemm", params={"m": 1, "n": 1}, layout="nn").key == "k"


@pytest.mark.parametrize("bad", [(1.0, -1.0), (0.0, 0.0), (0.0, float("inf")), (0.0,), "0,1", (0, True)])
def test_bad_input_range(bad):
    assert error_of(input_range=bad).key == "input_range"


def test_input_range_must_fit_the_dtype():
    assert error_of(input_range=(0.0, 1e5), dtype="f16").key == "input_range"
    make_problem("conv2d", "fwd", "f32", "nchw", conv2d(), (0.0, 1e5), 0)


def test_an_i8_range_reaches_minus_128_and_no_further():
    """Two's complement has one more value below zero: -128 is the value an i8 kernel's sign handling must meet."""
    problem = make_problem("gemm", "fwd", "i8", "nn", {"m": 32, "n": 32, "k": 64}, (-128.0, 127.0), 3, "integers")
    drawn = generate_inputs(problem)
    assert min(float(t.min()) for t in drawn.values()) == -128.0
    for outside in ((-129.0, 127.0), (-128.0, 128.0)):
        with pytest.raises(ProblemError, match=r"i8's range \[-128, 127\]: inputs would wrap"):
            make_problem("gemm", "fwd", "i8", "nn", {"m": 4, "n": 4, "k": 4}, outside, 0, "integers")


@pytest.mark.parametrize("seed", [-1, 2 ** 64, 1.5, True])
def test_bad_seed(seed):
    assert error_of(seed=seed).key == "seed"


def test_problem_checks_its_invariants_when_built_directly():
    p = make_problem("conv2d", "fwd", "f16", "nchw", conv2d(), (-1, 1), 0)
    with pytest.raises(ProblemError):
        runner.Problem("conv2d", "fwd", "f64", "nchw", p.params, (-1.0, 1.0), 0)
    with pytest.raises(ProblemError):
        runner.Problem("conv3d", "fwd", "f16", "nchw", p.params, (-1.0, 1.0), 0)
    with pytest.raises(ProblemError):
        runner.Problem("gemm", "fwd", "f16", "nn", p.params, (-1.0, 1.0), 0)
