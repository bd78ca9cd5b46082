"""Conv layouts as data: memory order per tensor from the layout string, values and results independent of
it, bad strings refused with the reason, a kernel that reads the filter in the wrong order caught."""
from __future__ import annotations

import pytest
import torch
from conftest import catalogue_text, problems_of

from e2egen import metrics
from e2egen.runner import BoundModel, ProblemError, make_problem, run
from e2egen.runner.inputs import generate_inputs

PARAMS = {1: {"n": 2, "c": 8, "k": 6, "w": 11, "kernel": 3, "pad": 1, "groups": 2},
          2: {"n": 2, "c": 8, "k": 6, "hw": [7, 6], "kernel": 3, "pad": [[1, 0], [0, 1]], "groups": 2},
          3: {"n": 1, "c": 4, "k": 4, "dhw": [4, 5, 4], "kernel": 2, "groups": 2}}
LAYOUTS = {1: ["nwc-kxc-nwk", "cwn-xck-kwn", "nc0-kc0-nk0"],
           2: ["nhwc-yxck-nhwk", "ngchw-gkyxc-ngkhw", "chwn-yxck-khwn", "nhwgc-gkcyx-nhwgk", "nc01-kc01-nk01"],
           3: ["nc012-kc012-nk012", "ndhwc-zyxck-ndhwk"]}
CASES = [(dims, layout) for dims, layouts in LAYOUTS.items() for layout in layouts]
TENSORS = {"fwd": (("x", "input"), ("w", "filter")), "bwd_data": (("dy", "output"), ("w", "filter")),
           "bwd_weight": (("x", "input"), ("dy", "output"))}


def _order(role: str, layout: str, dims: int) -> str:
    order = dict(zip(("input", "filter", "output"), layout.split("-")))[role].replace("g", "")
    return order


def _logical_names(role: str, dims: int, digits: bool) -> str:
    channels = {"input": "nc", "filter": "kc", "output": "nk"}[role]
    spatial = "012"[:dims] if digits else {"input": "dhw", "filter": "zyx", "output": "dhw"}[role][3 - dims:]
    return channels + spatial


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("dims,layout", CASES)
def test_each_tensor_is_stored_in_its_order_and_results_do_not_change(dims, layout, direction):
    seen = {}
    base = make_problem(f"conv{dims}d", direction, "f32", "nchw", PARAMS[dims], (-1.0, 1.0), 3)
    problem = make_problem(f"conv{dims}d", direction, "f32", layout, PARAMS[dims], (-1.0, 1.0), 3)
    inputs = generate_inputs(problem)
    for name, role in TENSORS[direction]:
        stored = problem.spec.arrange(name, inputs[name], layout)
        assert torch.equal(stored, inputs[name])
        order = _order(role, layout, dims)
        names = _logical_names(role, dims, digits=order[-1].isdigit() or order[0].isdigit() or "0" in order)
        strides = [stored.stride(names.index(letter)) for letter in order]
        assert strides == sorted(strides, reverse=True) and strides[-1] == 1, (name, order, stored.stride())
        seen[name] = stored
    result, plain = run(problem, bound=BoundModel(), measure=False), run(base, bound=BoundModel(), measure=False)
    assert torch.equal(result.ref, plain.ref) and torch.equal(result.bound, plain.bound)
    assert metrics.compare(result.ref, result.out, dtype="f32", bound=result.bound).check({"bound_ratio": 1.0}).passed


@pytest.mark.parametrize("layout,fragment", [
    ("nghwc-gkyxc-nghwk", "g must come just before c"),
    ("hwcgn-gkyxc-ngkhw", "g must come just before c"),
    ("nhwc-kyx-nhwk", "expected a permutation of 'kcyx'"),
    ("nhwc-yxck", "three orders input-filter-output"),
    ("ngcghw-gkyxc-ngkhw", "g appears more than once"),
])
def test_orders_that_are_no_layout_are_refused_with_the_reason(layout, fragment):
    with pytest.raises(ProblemError) as info:
        make_problem("conv2d", "fwd", "f32", layout, PARAMS[2], (-1.0, 1.0), 0)
    assert info.value.key == "layout" and fragment in str(info.value)


def test_the_catalogue_takes_layout_strings_and_names_a_bad_one():
    ok = catalogue_text('''[[suite]]
name = "lay"
op = "conv2d"
dtypes = ["f32"]
layouts = ["nchw", "nhwc-yxck-nhwk"]
ranges = ["r0"]
[[suite.config]]
name = "c"
n = 1
c = 4
k = 4
hw = [5, 5]
kernel = 3
''')
    from e2egen.generator.loader import parse_catalogue

    (suite,) = parse_catalogue(ok, "configs.toml").suites
    assert suite.layouts == ("nchw", "nhwc-yxck-nhwk")
    (problem,) = problems_of(ok.replace('"nhwc-yxck-nhwk"', '"nghwc-gkyxc-ngkhw"'))
    assert "layouts[1]" in problem and "g must come just before c" in problem


def filter_read_as_kyxc(x, w, *, stride, padding, dilation, groups):
    """Reads the filter's memory as if it were kyxc, whatever the layout stored (yxck here): a layout bug."""
    stored = w.permute(2, 3, 1, 0).contiguous()  # yxck memory, as the case stores it
    assumed = stored.reshape(w.shape[0], w.shape[2], w.shape[3], w.shape[1]).permute(0, 3, 1, 2)
    return torch.nn.functional.conv2d(x, assumed, None, stride, padding, dilation, groups)


def test_a_kernel_reading_the_filter_in_another_order_fails():
    params = {"n": 2, "c": 8, "k": 6, "hw": [7, 6], "kernel": 3, "pad": 1}
    problem = make_problem("conv2d", "fwd", "f32", "nhwc-yxck-nhwk", params, (-1.0, 1.0), 5)
    result = run(problem, impl=f"{__name__}:filter_read_as_kyxc", bound=BoundModel(), measure=False)
    assert not metrics.compare(result.ref, result.out, dtype="f32", bound=result.bound).check({"bound_ratio": 1.0}).passed
