"""Conv layouts as data: memory order per tensor from the layout string, values and results independent of
it, bad strings refused with the reason, a kernel that reads the filter in the wrong order caught; layouts
that put the group dim away from the dim it splits give grouped tensors, and kernels that read them wrongly
are caught."""
from __future__ import annotations

import pytest
import torch
from conftest import catalogue_text, problems_of
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.runner import BoundModel, KernelFailure, ProblemError, make_problem, run
from e2egen.runner.inputs import arrange_for_kernel, generate_inputs
from e2egen.runner.ops.product_sum.conv_layouts import arrange, splits_groups, ungrouped

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths

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
        stored = problem.numerics.arrange(name, inputs[name], layout)
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
    ("nhwgcg-gkyxc-nghwk", "g appears more than once"),
    ("nhwc-gkyxc-nhwc", "expected a permutation of 'nkhw'"),
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
    (grouped,) = parse_catalogue(ok.replace('"nhwc-yxck-nhwk"', '"nghwc-gkyxc-nghwk"'), "configs.toml").suites
    assert grouped.layouts == ("nchw", "nghwc-gkyxc-nghwk")
    (problem,) = problems_of(ok.replace('"nhwc-yxck-nhwk"', '"nhwc-kyx-nhwk"'))
    assert "layouts[1]" in problem and "expected a permutation of 'kcyx'" in problem


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


# -- layouts that split the groups out ---------------------------------------------------
SPLIT_LAYOUTS = {1: ["ngwc-gkxc-ngwk", "wcgn-kgcx-wkgn"],
                 2: ["nghwc-gkyxc-nghwk", "hwcgn-gkcyx-hwkgn", "ngchw-kyxc-nghwk", "ng01c-gkc01-ng01k"],
                 3: ["ngdhwc-gkzyxc-ngdhwk"]}
SPLIT_CASES = [(dims, layout) for dims, layouts in SPLIT_LAYOUTS.items() for layout in layouts]
GROUPED_NAMES = {"input": "ngc", "filter": "gkc", "output": "ngk"}


def _grouped_names(role: str, dims: int, digits: bool) -> str:
    return GROUPED_NAMES[role] + _logical_names(role, dims, digits)[2:]


def _order_with_groups(role: str, layout: str) -> str:
    order = dict(zip(("input", "filter", "output"), layout.split("-")))[role]
    split = "c" if role == "input" else "k"
    return order if "g" in order else order.replace(split, "g" + split)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("dims,layout", SPLIT_CASES)
def test_a_layout_that_splits_groups_gives_grouped_tensors_in_its_order_and_the_same_results(dims, layout, direction):
    base = make_problem(f"conv{dims}d", direction, "f32", "nchw", PARAMS[dims], (-1.0, 1.0), 3)
    problem = make_problem(f"conv{dims}d", direction, "f32", layout, PARAMS[dims], (-1.0, 1.0), 3)
    groups = problem.params.groups
    inputs = generate_inputs(problem)
    stored = arrange_for_kernel(problem, inputs, torch.device("cpu"))
    for name, role in TENSORS[direction]:
        tensor = stored[name]
        axis = 0 if role == "filter" else 1
        logical = inputs[name].shape
        assert tensor.shape == (*logical[:axis], groups, logical[axis] // groups, *logical[axis + 1:])
        assert torch.equal(ungrouped(name, tensor), inputs[name])
        order = _order_with_groups(role, layout)
        names = _grouped_names(role, dims, digits="0" in order)
        strides = [tensor.stride(names.index(letter)) for letter in order]
        assert strides == sorted(strides, reverse=True) and strides[-1] == 1, (name, order, tensor.stride())
    result, plain = run(problem, bound=BoundModel(), measure=False), run(base, bound=BoundModel(), measure=False)
    assert torch.equal(result.ref, plain.ref) and torch.equal(result.bound, plain.bound)
    assert metrics.compare(result.ref, result.out, dtype="f32", bound=result.bound).check({"bound_ratio": 1.0}).passed


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_order_with_g_anywhere_stores_the_same_values_in_that_order(data):
    dims = data.draw(st.sampled_from([1, 2, 3]), "dims")
    role, name = data.draw(st.sampled_from([("input", "x"), ("filter", "w"), ("output", "dy")]), "role")
    letters = list(_logical_names(role, dims, digits=False))
    order = data.draw(st.permutations(letters), "order")
    at = data.draw(st.integers(0, len(order)), "g at")
    order = "".join(order[:at]) + "g" + "".join(order[at:])
    others = {"input": "n" + "c" + "dhw"[3 - dims:], "filter": "kc" + "zyx"[3 - dims:], "output": "nk" + "dhw"[3 - dims:]}
    layout = "-".join(order if r == role else others[r] for r in ("input", "filter", "output"))
    groups = data.draw(st.sampled_from([1, 2, 3]), "groups")
    shape = [2, 6, *[3, 4, 5][:dims]] if role != "filter" else [6, 2, *[3, 2, 2][:dims]]
    tensor = torch.arange(float(torch.tensor(shape).prod())).reshape(shape)
    split = order[order.index("g") + 1:order.index("g") + 2] != ("c" if role == "input" else "k")
    assert splits_groups(layout) == split
    stored = arrange(name, tensor, layout, dims, groups)
    if split:
        assert torch.equal(ungrouped(name, stored), tensor)
        names = _grouped_names(role, dims, digits=False)
    else:
        assert torch.equal(stored, tensor)
        names, order = _logical_names(role, dims, digits=False), order.replace("g", "")
    sized = [names.index(letter) for letter in order if stored.shape[names.index(letter)] > 1]  # size 1: any stride
    strides = [stored.stride(dim) for dim in sized]
    assert strides == sorted(strides, reverse=True) and strides[-1] == 1, (layout, stored.stride())


def groups_merged_the_wrong_way(x, w, *, stride, padding, dilation, groups):
    """Merges the grouped input back as (C/G, G), channel cg*G + g instead of g*C/G + cg: a group bug."""
    y = torch.nn.functional.conv2d(x.transpose(1, 2).flatten(1, 2), w.flatten(0, 1), None, stride, padding, dilation,
                                   groups)
    return y.unflatten(1, (groups, -1))


def output_read_in_the_input_order(x, dy, *, weight_shape, stride, padding, dilation, groups):
    """Reads dy's memory in x's order (n g h w, channels last) though the layout stores dy as hwkgn: the
    permutation applied to the wrong tensor."""
    n, g, k, ho, wo = dy.shape
    memory = dy.permute(3, 4, 2, 1, 0).contiguous().reshape(-1)  # hwkgn, as the case stores it
    misread = memory.reshape(n, g, ho, wo, k).permute(0, 1, 4, 2, 3)
    dw = torch.nn.grad.conv2d_weight(x.flatten(1, 2), [weight_shape[0] * weight_shape[1], *weight_shape[2:]],
                                     misread.flatten(1, 2), stride, padding, dilation, groups)
    return dw.unflatten(0, (groups, -1))


def returns_the_logical_shape(x, w, *, stride, padding, dilation, groups):
    return torch.nn.functional.conv2d(x.flatten(1, 2), w.flatten(0, 1), None, stride, padding, dilation, groups)


GROUPED = {"n": 2, "c": 8, "k": 6, "hw": [5, 6], "kernel": 3, "pad": 1, "groups": 2}


@pytest.mark.parametrize("direction,layout,impl", [
    ("fwd", "nghwc-gkyxc-nghwk", "groups_merged_the_wrong_way"),
    ("bwd_weight", "nghwc-gkyxc-hwkgn", "output_read_in_the_input_order"),
])
def test_a_kernel_that_reads_grouped_tensors_wrongly_fails(direction, layout, impl):
    problem = make_problem("conv2d", direction, "f32", layout, GROUPED, (-1.0, 1.0), 5)
    result = run(problem, impl=f"{__name__}:{impl}", bound=BoundModel(), measure=False)
    assert not metrics.compare(result.ref, result.out, dtype="f32", bound=result.bound).check({"bound_ratio": 1.0}).passed


def test_a_kernel_that_returns_the_logical_shape_for_a_grouped_layout_is_told_the_grouped_one():
    problem = make_problem("conv2d", "fwd", "f32", "nghwc-gkyxc-nghwk", GROUPED, (-1.0, 1.0), 5)
    with pytest.raises(KernelFailure) as info:
        run(problem, impl=f"{__name__}:returns_the_logical_shape", bound=BoundModel(), measure=False)
    assert "grouped shape (2, 2, 3, 5, 6)" in str(info.value)
