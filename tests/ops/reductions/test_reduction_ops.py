"""The reduction ops (sum, mean, max, var): parameters, shapes, layouts, the probes, and the verdict on
torch's kernels, correct kernels of other orders and algorithms, and wrong ones
(runner/ops/reductions/kernels.py), judged as a generated case judges them (the default metrics, the
probed arithmetic, configs.toml's require acc = "f32")."""
from __future__ import annotations

import pytest
import torch

from e2egen import metrics
from e2egen.runner import BoundModel, make_problem, run
from e2egen.runner.arithmetic.requirements import violations
from e2egen.runner.errors import ProblemError
from e2egen.runner.inputs import arrange_for_kernel, generate_inputs
from e2egen.runner.kernels import resolve_impl
from e2egen.runner.ops.reductions import kernels
from e2egen.runner.ops.reductions.spec import probe_shape
from e2egen.runner.options import Requirements

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths

DEFAULT = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}
REQUIRE = Requirements(acc="f32")  # configs.toml [require]
IMPL = "e2egen.runner.ops.reductions.kernels:"
ZERO_MEAN, OFFSET = (-1.0, 1.0), (1000.0, 1001.0)

# (dtype, layout, params, range): a row, a column, a channels and a full reduction
CASES = {
    "rows-f16": ("f16", "contiguous", {"shape": [16, 1000]}, ZERO_MEAN),
    "columns-bf16-strided": ("bf16", "strided", {"shape": [300, 24], "axis": 0}, ZERO_MEAN),
    "channels-f32-cl": ("f32", "channels_last", {"shape": [2, 16, 6, 6], "axis": 1}, ZERO_MEAN),
    "full-f16": ("f16", "contiguous", {"shape": [8, 8, 64], "axis": [0, 1, 2]}, ZERO_MEAN),
    "offset-rows-f32-strided": ("f32", "strided", {"shape": [8, 512]}, OFFSET),
    "offset-channels-f16-cl": ("f16", "channels_last", {"shape": [2, 32, 4, 4], "axis": [1, 3]}, OFFSET),
}


def execute(op: str, kernel: str, dtype: str, layout: str, params: dict, value_range, seed: int = 5):
    """(the verdict, the requirements the probed arithmetic breaks), as generator/execute.py judges a case."""
    problem = make_problem(op, "fwd", dtype, layout, params, value_range, seed)
    result = run(problem, impl=None if kernel == "torch" else IMPL + kernel, device="cpu",
                 bound=BoundModel(), measure=True)
    out = result.primary
    verdict = metrics.compare(out.ref, out.out, dtype=out.dtype, bound=out.bound).check(DEFAULT)
    return verdict, violations(REQUIRE, result.arithmetic.arithmetic, dtype)


def with_correction(op: str, params: dict, correction: int = 1) -> dict:
    return {**params, "correction": correction} if op == "var" else params


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("op, kernel", [(op, name) for op in ("sum", "mean", "max", "var")
                                        for name in ("torch", *kernels.CORRECT[op])])
def test_correct_kernels_pass(op, kernel, case):
    dtype, layout, params, value_range = CASES[case]
    if op == "sum" and value_range == OFFSET and dtype == "f16":
        pytest.skip("the sum of 64+ values near 1000 overflows f16 (the reference is beyond f16's range)")
    verdict, broken = execute(op, kernel, dtype, layout, with_correction(op, params), value_range)
    assert verdict.passed, f"{op} {kernel} on {case}: {verdict.summary}"
    assert not broken, [v.message for v in broken]


@pytest.mark.parametrize("op, kernel, case", [
    ("sum", "f16_sum", "rows-f16"), ("sum", "f16_sum", "rows-f32"), ("mean", "f16_mean", "rows-f16"),
    ("var", "f16_var", "rows-f16"), ("var", "f16_var", "rows-f32"),
])
def test_a_kernel_that_reduces_in_f16_breaks_the_accumulator_requirement(op, kernel, case):
    dtype = "f32" if case.endswith("f32") else "f16"
    verdict, broken = execute(op, kernel, dtype, "contiguous", with_correction(op, {"shape": [16, 1000]}), ZERO_MEAN)
    assert [v.key for v in broken] == ["acc"]
    assert "f16" in broken[0].message and 'require.acc = "f32"' in broken[0].message


@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_biased_unbiased_mix_up_fails(dtype, correction):
    verdict, broken = execute("var", "mixed_up_var", dtype, "contiguous",
                              {"shape": [64, 96], "correction": correction}, ZERO_MEAN)
    assert not verdict.passed or broken, "the mix-up passed"


def test_the_one_pass_variance_passes_on_zero_mean_data_and_fails_on_offset_data():
    params = {"shape": [16, 512], "correction": 1}
    verdict, _ = execute("var", "one_pass_var", "f32", "contiguous", params, ZERO_MEAN)
    assert verdict.passed, verdict.summary
    verdict, broken = execute("var", "one_pass_var", "f32", "contiguous", params, OFFSET)
    assert not verdict.passed or broken
    # under the assumed f32 arithmetic too (bound.acc = "f32"), the bound itself rejects it
    problem = make_problem("var", "fwd", "f32", "contiguous", params, OFFSET, 5)
    out = run(problem, impl=IMPL + "one_pass_var", device="cpu", bound=BoundModel(acc="f32"), measure=False).primary
    assert metrics.compare(out.ref, out.out, dtype=out.dtype, bound=out.bound).bound_ratio > 1.0


@pytest.mark.parametrize("op, kernel", [("sum", "drop_last_sum"), ("max", "drop_last_max")])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_a_kernel_that_drops_the_last_element_fails(op, kernel, layout):
    # 1000 rows of 50: some row has its largest element last (max), every row loses one (sum)
    verdict, broken = execute(op, kernel, "f16", layout, {"shape": [1000, 50]}, ZERO_MEAN)
    assert not verdict.passed


def test_a_kernel_that_ignores_strides_passes_contiguous_and_fails_strided():
    verdict, broken = execute("sum", "unit_stride_sum", "f32", "contiguous", {"shape": [16, 100]}, ZERO_MEAN)
    assert verdict.passed and not broken
    verdict, broken = execute("sum", "unit_stride_sum", "f32", "strided", {"shape": [16, 100]}, ZERO_MEAN)
    assert not verdict.passed
    assert any(v.key == "exact" for v in broken), "the probes should name a wrong result no rounding explains"


# -- the probes --------------------------------------------------------------------------------------
def probed(op: str, kernel: str, dtype: str, layout: str = "contiguous", params: dict | None = None):
    params = with_correction(op, params or {"shape": [8, 300]})
    problem = make_problem(op, "fwd", dtype, layout, params, ZERO_MEAN, 1)
    small = problem.spec.probe_params(problem.params, "fwd")
    probe = make_problem(op, "fwd", dtype, layout, with_correction(op, {"shape": list(small.shape), "axis": list(small.axes)},
                                                                   small.correction), ZERO_MEAN, 1)
    impl = None if kernel == "torch" else IMPL + kernel
    return probe.numerics.probe_arithmetic(probe, resolve_impl(op, "fwd", impl), torch.device("cpu"), kernel)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_torch_sums_in_f32(op, dtype):
    found = probed(op, "torch", dtype)
    assert found.acc_bits == 24 and found.acc_bits_exact and not found.unexplained


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("layout, params", [("contiguous", {"shape": [8, 300]}),
                                            ("channels_last", {"shape": [2, 8, 3, 3], "axis": 1})])
def test_torch_var_accumulates_in_f32_or_wider(dtype, layout, params):
    found = probed("var", "torch", dtype, layout, params)
    assert found.acc_bits >= 24 and not found.unexplained
    assert not violations(REQUIRE, found, dtype)


@pytest.mark.parametrize("op, kernel", [("sum", "f16_sum"), ("mean", "f16_mean"), ("var", "f16_var")])
def test_an_f16_reduction_measures_11_bits(op, kernel):
    found = probed(op, kernel, "f16")
    assert (found.acc_bits, found.acc_bits_exact) == (11, True)


def test_correct_orders_measure_f32():
    for op, names in kernels.CORRECT.items():
        for name in names:
            if op != "max":
                assert probed(op, name, "f16").acc_bits >= 24, name


def test_a_dropped_element_is_unexplained():
    found = probed("sum", "drop_last_sum", "f16")
    assert found.unexplained and "dropped" in found.unexplained[0]


def test_the_var_mix_up_is_unexplained():
    found = probed("var", "mixed_up_var", "f32")
    assert found.unexplained and "divisor" in found.unexplained[0]


def test_probe_shapes_keep_rank_and_axes():
    assert probe_shape("sum", (64, 1000), (1,)) == (4, 32)
    assert probe_shape("sum", (2, 64, 7, 7), (0, 2, 3)) == (1, 4, 4, 7)  # innermost first: 7·4·1 <= 32
    assert probe_shape("var", (2, 64, 7, 7), (0, 2, 3)) == (2, 4, 1, 1)
    assert probe_shape("var", (1, 64, 7, 7), (0, 2, 3)) == (1, 4, 2, 1)


# -- parameters, shapes, layouts --------------------------------------------------------------------
@pytest.mark.parametrize("params, key, words", [
    ({"shape": [4, 0]}, "shape", "positive"),
    ({"shape": [1, 2, 3, 4, 5, 6]}, "shape", "1 to 5"),
    ({"shape": [4, 5], "axis": 2}, "axis", "[-2, 1]"),
    ({"shape": [4, 5], "axis": [1, -1]}, "axis", "twice"),
    ({"shape": [4, 5], "axis": []}, "axis", "a dim"),
    ({"shape": [4, 5], "correction": 1}, "correction", "unknown"),
])
def test_bad_sum_parameters_name_the_key(params, key, words):
    with pytest.raises(ProblemError) as caught:
        make_problem("sum", "fwd", "f32", "contiguous", params, ZERO_MEAN, 0)
    assert caught.value.key == key and words in str(caught.value)


@pytest.mark.parametrize("correction, words", [(5, "smaller than"), (-1, ">= 0"), (True, "integer"), (0.5, "integer")])
def test_bad_var_correction_names_the_key(correction, words):
    with pytest.raises(ProblemError) as caught:
        make_problem("var", "fwd", "f32", "contiguous", {"shape": [4, 5], "correction": correction}, ZERO_MEAN, 0)
    assert caught.value.key == "correction" and words in str(caught.value)


def test_channels_last_needs_rank_3():
    with pytest.raises(ProblemError) as caught:
        make_problem("mean", "fwd", "f32", "channels_last", {"shape": [4, 5]}, ZERO_MEAN, 0)
    assert caught.value.key == "layout" and "rank >= 3" in str(caught.value)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "var"])
def test_output_shape_drops_the_reduced_dims(op):
    problem = make_problem(op, "fwd", "f16", "contiguous", {"shape": [2, 3, 4], "axis": [0, -1]}, ZERO_MEAN, 0)
    assert problem.output_shape == (3,) and problem.out_dtype == "f16" and problem.reduction_size == 8
    full = make_problem(op, "fwd", "bf16", "contiguous", {"shape": [2, 3], "axis": [0, 1]}, ZERO_MEAN, 0)
    assert full.output_shape == () and full.params.to_catalogue()["axis"] == [0, 1]


@pytest.mark.parametrize("layout", ["strided", "channels_last"])
def test_layouts_store_the_same_values(layout):
    params = {"shape": [2, 5, 3, 4], "axis": 1}
    base = make_problem("sum", "fwd", "f32", "contiguous", params, ZERO_MEAN, 9)
    other = make_problem("sum", "fwd", "f32", layout, params, ZERO_MEAN, 9)
    stored = arrange_for_kernel(other, generate_inputs(other), torch.device("cpu"))["x"]
    assert torch.equal(stored, generate_inputs(base)["x"])
    assert not stored.is_contiguous()


def test_a_kernel_that_ignores_channels_last_strides_is_unexplained():
    found = probed("sum", "unit_stride_sum", "f32", "channels_last", {"shape": [2, 32, 14, 14], "axis": 1})
    assert found.unexplained and "stride" in found.unexplained[0]
    verdict, broken = execute("sum", "unit_stride_sum", "f32", "channels_last", {"shape": [2, 32, 14, 14], "axis": 1},
                              ZERO_MEAN)
    assert any(v.key == "exact" for v in broken)


def _sequential_f32_mean(x, dim):
    """A correct mean whose f32 running sum adds one element after the other (numpy's accumulate)."""
    import numpy as np

    axis = dim[0]
    values = x.float().movedim(axis, -1).numpy()
    total = torch.from_numpy(np.add.accumulate(values, axis=-1, dtype=np.float32)[..., -1].copy())
    return (total / x.shape[axis]).to(x.dtype)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("n", [2 ** 15, 2 ** 16])
def test_a_sequential_f32_mean_of_long_offset_rows_passes_by_default(dtype, n):
    """A correct kernel meeting require.acc = "f32": its same-sign roundings add linearly on [1000, 1001]
    (f32 error ~4,000 ulps), which the bound's common-value term allows; before it, every run failed."""
    import e2egen

    outcome = e2egen.judge(_sequential_f32_mean, "mean", {"shape": [2, n], "axis": 1}, dtype,
                           data_range=OFFSET, require={"acc": "f32"})
    assert outcome.passed, outcome.report
    if dtype == "f32":
        assert outcome.comparison.max_ulp_diff > 1000  # the error is real, not rounded away


def _sequential_f32_sum(x, dim):
    """A correct sum: an f32 running sum, one element after the other (numpy's accumulate)."""
    import numpy as np

    values = x.float().movedim(dim[0], -1).numpy()
    return torch.from_numpy(np.add.accumulate(values, axis=-1, dtype=np.float32)[..., -1].copy()).to(x.dtype)


def _drops_element_40000(x, dim):
    """WRONG past 40,000 elements: one element of each row left out (a tile past the probes' sizes never read)."""
    if x.shape[dim[0]] > 40000:
        x = x.clone()
        x.select(dim[0], 40000).zero_()
    return _sequential_f32_sum(x, dim)


def _second_output_two_ulps_off(x, dim):
    """WRONG: one output two ulps of its format away from zero, the rest correct."""
    from e2egen import metrics

    out = _sequential_f32_sum(x, dim)
    flat = out.reshape(-1)
    value = flat[1:2].double()
    fmt = {torch.float16: "f16", torch.bfloat16: "bf16"}[x.dtype]
    flat[1] = (value + 2 * metrics.ulp(value, fmt) * value.sign()).to(out.dtype)[0]
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_element_dropped_from_a_long_zero_mean_row_fails_the_bound(seed):
    """Issue 42's item 2: one of 65,536 elements dropped, an error far above any correct order's, passed under
    G(N)'s term λ√N·u·Σ|x| (6 of 21 caught); the walk bounds the error through the partial sums instead."""
    import e2egen

    shape = {"shape": [2, 2 ** 16], "axis": 1}
    correct = e2egen.judge(_sequential_f32_sum, "sum", shape, "f32", seed=seed)
    assert correct.passed, correct.report
    dropped = e2egen.judge(_drops_element_40000, "sum", shape, "f32", seed=seed)
    assert not dropped.passed
    assert dropped.comparison.bound_ratio > 5


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_an_f16_or_bf16_sum_two_ulps_off_fails(dtype):
    """Issue 42's item 6: an f32-accumulating sum returns its outputs within an ulp; two ulps off is a bug."""
    import e2egen

    shape = {"shape": [8, 4096], "axis": 1}
    assert e2egen.judge(_sequential_f32_sum, "sum", shape, dtype).passed
    off = e2egen.judge(_second_output_two_ulps_off, "sum", shape, dtype)
    assert not off.passed
    assert off.comparison.bound_ratio > 1
