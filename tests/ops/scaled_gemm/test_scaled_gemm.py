"""scaled_gemm: quantization as the MX spec says, the kernel's view of its tensors, exact structured cases,
the composed bound for torch's kernels, and wrong kernels caught."""
from __future__ import annotations

import math
import sys

import pytest
import torch
from hypothesis import given, settings, strategies as st

from conftest import REPO
from e2egen import metrics
from e2egen.generator.cases import expand
from e2egen.generator.loader import load_catalogue
from e2egen.metrics.encoding import decode
from e2egen.runner import run
from e2egen.runner.arithmetic.requirements import violations
from e2egen.runner.bound import BoundModel
from e2egen.runner.errors import ProblemError
from e2egen.runner.inputs import generate_inputs, input_formats, reference_inputs, round_to_format, store_exact
from e2egen.runner.options import Requirements
from e2egen.runner.ops.scaled_gemm.kernels import torch_scaled_gemm
from e2egen.runner.ops.scaled_gemm.scaling import expand_scales, quantize, quantized_operands
from e2egen.runner.ops.scaled_gemm.spec import PATTERNS, Blocks
from e2egen.runner.problem import make_problem

K = "e2egen.runner.ops.scaled_gemm.kernels"  # the family's alternate and planted-bug kernels

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths

SHAPE = {"m": 24, "n": 40, "k": 70}


def problem(dtype="f8e4m3fn", layout="nt", seed=3, value_range=(-50.0, 50.0), **params):
    return make_problem("scaled_gemm", "fwd", dtype, layout, {**SHAPE, **params}, list(value_range), seed)


def verdict(result):
    return metrics.compare(result.ref, result.out, result.out_dtype, bound=result.bound)


# -- quantization -------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 70), st.sampled_from([1, 2, 8, 32]), st.sampled_from(["f8e4m3fn", "f8e5m2", "f4e2m1", "f8e4m3fnuz"]),
       st.floats(1e-3, 1e4), st.integers(0, 2 ** 31))
def test_mx_quantization_follows_the_spec_block_by_block(rows, cols, block, element, spread, seed):
    generator = torch.Generator().manual_seed(seed)
    values = (torch.rand((rows, cols), generator=generator, dtype=torch.float64) * 2 - 1) * spread
    blocks = Blocks(rows, cols, 1, block)
    elements, scales = quantize(values, blocks, element, "e8m0")
    fmt = metrics.get_format(element)
    for r in range(rows):
        for j in range(math.ceil(cols / block)):
            chunk = values[r, j * block:(j + 1) * block]
            amax = float(chunk.abs().max())
            expected_exponent = (math.floor(math.log2(amax)) - fmt.emax) if amax > 0 else -127
            assert scales[r, j] == 2.0 ** max(-127, min(127, expected_exponent))
            for c, x in enumerate(chunk.tolist()):
                q = float(elements[r, j * block + c])
                scaled = x / float(scales[r, j])
                nearest = float(metrics.round_to(torch.tensor(scaled, dtype=torch.float64), element, saturate=True))
                assert q == nearest and abs(q) <= fmt.max


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(1, 5), st.integers(1, 5))
def test_blocks_expand_gives_each_element_its_blocks_scale(rows, cols, block_rows, block_cols):
    blocks = Blocks(rows, cols, block_rows, block_cols)
    scales = torch.arange(math.prod(blocks.scale_shape), dtype=torch.float64).reshape(blocks.scale_shape)
    full = expand_scales(blocks, scales)
    assert full.shape == (rows, cols)
    for r in range(rows):
        for c in range(cols):
            assert full[r, c] == scales[r // block_rows, c // block_cols]


def test_f32_scales_map_each_blocks_amax_onto_the_formats_largest_value():
    values = torch.tensor([[3.0, -700.0, 1.0, 0.25]], dtype=torch.float64)
    elements, scales = quantize(values, Blocks(1, 4, 1, 2), "f8e4m3fn", "f32")
    assert scales.tolist() == [[float(torch.tensor(700 / 448, dtype=torch.float32)), float(torch.tensor(1 / 448, dtype=torch.float32))]]
    assert elements[0, 1] == -448.0 and elements[0, 2] == 448.0  # each block's amax lands on ±max


# -- what the kernel receives -------------------------------------------------------------------------------
def test_the_kernel_receives_elements_and_scales_in_their_storage():
    seen = {}

    def spy(a, b, scale_a, scale_b, *, out_dtype, scaling, block):
        seen.update(a=a, b=b, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype, scaling=scaling, block=block)
        return torch_scaled_gemm(a, b, scale_a, scale_b, out_dtype=out_dtype, scaling=scaling, block=block)

    module = sys.modules[__name__]
    module.spy = spy
    run(problem("f4e2m1", "tn", k=64, out_dtype="bf16"), impl=f"{__name__}:spy")
    assert seen["a"].dtype == torch.float4_e2m1fn_x2 and tuple(seen["a"].shape) == (24, 32)
    assert not seen["a"].is_contiguous() and seen["a"].mT.is_contiguous()  # "t": column-major packed bytes
    assert tuple(seen["b"].shape) == (32, 40) and seen["b"].is_contiguous()
    assert seen["scale_a"].dtype == torch.float8_e8m0fnu and tuple(seen["scale_a"].shape) == (24, 2)
    assert tuple(seen["scale_b"].shape) == (2, 40) and seen["scale_b"].mT.is_contiguous()  # K contiguous
    assert seen["out_dtype"] == torch.bfloat16 and seen["scaling"] == "mx" and seen["block"] == 32
    run(problem("f8e5m2", "nnnn", scaling="blockwise", block=16, scale_b_dtype="e8m0"), impl=f"{__name__}:spy")
    assert seen["a"].dtype == torch.float8_e5m2 and seen["scale_a"].dtype == torch.float32
    assert tuple(seen["scale_b"].shape) == (5, 3) and seen["scale_b"].is_contiguous() and seen["scale_b"].dtype == torch.float8_e8m0fnu


@pytest.mark.parametrize("fmt", ["f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f4e2m1", "e8m0", "f32"])
def test_storing_values_the_format_holds_equals_rounding_them(fmt):
    """store_exact (the stored inputs' cast) against round_to_format (their rounding) on every finite value
    of the format, both zeros included (f32: a sample with its subnormals and extremes)."""
    if fmt == "f32":
        bits = torch.cat([torch.randint(-2 ** 31, 2 ** 31 - 1, (4096,), generator=torch.Generator().manual_seed(1),
                                        dtype=torch.int64), torch.tensor([0, 1, 0x7F7FFFFF, 0x00800000, -2 ** 31])])
        values = bits.to(torch.int32).view(torch.float32).to(torch.float64)
    else:
        values = decode(torch.arange(256 if fmt != "f4e2m1" else 16), fmt)
    values = values[torch.isfinite(values)]
    stored, rounded = store_exact(values, fmt), round_to_format(values, fmt, saturate=True)
    assert stored.dtype == rounded.dtype
    width = {1: torch.uint8, 4: torch.int32}[stored.element_size()]
    assert torch.equal(stored.view(width), rounded.view(width))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_pattern_hands_store_exact_values_its_formats_hold(pattern):
    """quantize_inputs stores without rounding (store_exact): what each pattern makes must already be values of
    the input's format, or the cast would round them where the reference does not."""
    for dtype, extra in [("f8e4m3fn", {}), ("f4e2m1", {}), ("f8e4m3fnuz_f8e5m2fnuz", {"scale_a_dtype": "f32"})]:
        case = problem(dtype, pattern=pattern, **extra)
        drawn = {name: torch.rand(shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 100 - 50
                 for name, shape in case.input_shapes.items()}
        formats = input_formats(case)
        for name, values in quantized_operands(case.params.pattern, case.params.blocks, drawn, formats).items():
            assert torch.equal(metrics.round_to(values, formats[name]), values), (dtype, name)


def test_same_seed_same_inputs_and_a_new_seed_new_ones():
    first, again, other = (generate_inputs(problem(seed=s)) for s in (5, 5, 6))
    assert all(torch.equal(first[name].view(torch.uint8), again[name].view(torch.uint8)) for name in first)
    assert not torch.equal(first["a"].view(torch.uint8), other["a"].view(torch.uint8))


# -- verdicts -------------------------------------------------------------------------------------------------
SCALINGS = [("mx", {}), ("mx", {"block": 16, "scale_a_dtype": "f32", "scale_b_dtype": "f32"}), ("blockwise", {"block": 16}),
            ("blockwise", {}), ("rowwise", {}), ("tensor", {})]


@pytest.mark.parametrize("dtype", ["f8e4m3fn", "f8e5m2", "f8e4m3fnuz_f8e5m2fnuz", "f4e2m1"])
@pytest.mark.parametrize("scaling,extra", SCALINGS, ids=[f"{s}-{'-'.join(map(str, e.values())) or 'default'}" for s, e in SCALINGS])
def test_torchs_kernel_is_within_the_bound(dtype, scaling, extra):
    for layout, out in (("nt", ""), ("tn", "bf16"), ("ntnn", "f16")):
        result = run(problem(dtype, layout, scaling=scaling, out_dtype=out, **extra), bound=BoundModel())
        assert verdict(result).bound_ratio <= 1.0, (layout, out)


@pytest.mark.parametrize("dtype", ["f8e4m3fn", "f4e2m1"])
def test_varied_blocks_get_different_scales_and_torchs_kernel_stays_within_the_bound(dtype):
    case = problem(dtype, "nt", pattern="varied", k=256)
    inputs64 = reference_inputs(generate_inputs(case), torch.device("cpu"))
    assert len(torch.unique(inputs64["scale_a"])) >= 6 and len(torch.unique(inputs64["scale_b"])) >= 6
    assert verdict(run(case, bound=BoundModel())).bound_ratio <= 1.0


@pytest.mark.parametrize("pattern", [p for p in PATTERNS if p not in ("random", "varied")])
@pytest.mark.parametrize("dtype,scaling,extra", [("f8e4m3fn", "mx", {}), ("f4e2m1", "mx", {"block": 16}),
                                                 ("f8e5m2", "blockwise", {"block": 8, "scale_b_dtype": "e8m0"}),
                                                 ("f8e4m3fn", "rowwise", {}), ("f8e4m3fnuz", "tensor", {})])
def test_structured_cases_are_exact_for_every_correct_kernel(pattern, dtype, scaling, extra):
    for impl in (None, f"{K}:blocked_in_reverse"):
        for layout in ("nt", "tntn"):
            result = run(problem(dtype, layout, pattern=pattern, scaling=scaling, **extra), impl=impl, bound=BoundModel())
            comparison = verdict(result)
            assert comparison.max_abs_diff == 0 and comparison.bound_ratio == 0, (impl, layout)


def test_a_structured_case_rounds_once_to_a_narrow_output():
    result = run(problem("f8e4m3fn", "nt", pattern="ones", k=1000, out_dtype="bf16"), bound=BoundModel())
    comparison = verdict(result)
    assert comparison.bound_ratio <= 1.0
    assert torch.equal(result.out.double(), metrics.round_to(result.ref, "bf16"))


def test_structured_patterns_compute_what_they_promise():
    identity = problem(pattern="identity_a", k=70, m=24)
    inputs64 = reference_inputs(generate_inputs(identity), torch.device("cpu"))
    b_values = inputs64["b"] * expand_scales(identity.params.blocks["b"], inputs64["scale_b"])
    assert torch.equal(run(identity).ref, b_values[:24])
    doubled = problem(pattern="double_a_scale")
    inputs64 = reference_inputs(generate_inputs(doubled), torch.device("cpu"))
    assert (inputs64["scale_a"] == 2).sum() == 1 and ((inputs64["scale_a"] == 1) | (inputs64["scale_a"] == 2)).all()


@pytest.mark.parametrize("kernel,case", [
    # seed 4 puts the 2 in A's middle block of three (k = 70: 32, 32, 6 wide), so reading the next block's
    # scale moves it into the 6-wide one; a 2 in the first block would move to another 32-wide one and leave
    # every sum of ones unchanged
    ("wrong_block_scale", dict(pattern="double_a_scale", seed=4)),
    ("wrong_block_scale", dict(pattern="ones")),
    # f32 scales follow each block's amax; uniform data give every e8m0 scale one value, which hides this
    # bug (the varied case below is the e8m0 one)
    ("wrong_block_scale", dict(scale_a_dtype="f32", scale_b_dtype="f32")),
    ("wrong_block_scale", dict(pattern="varied", scale_a_dtype="e8m0", scale_b_dtype="e8m0")),
    ("scale_b_untransposed", dict(layout="ntnn", pattern="ones")),
    ("scale_b_untransposed", dict(layout="ntnn")),
    ("e8m0_bias_off_by_one", dict(pattern="identity_b")),
    ("e8m0_bias_off_by_one", dict()),
    ("accumulates_in_f16", dict(k=2048, value_range=(0.0, 50.0))),  # overflows f16: inf
])
def test_wrong_kernels_fail(kernel, case):
    case = dict(case)
    layout = case.pop("layout", "nt")
    result = run(problem("f8e4m3fn", layout, **case), impl=f"{K}:{kernel}", bound=BoundModel())
    assert not verdict(result).check({"bound_ratio": 1.0}).passed


def test_an_f16_accumulator_is_measured_and_broken_by_require_acc():
    """Within f16's range the bound follows the accumulator the probes measured (11 bits): the kernel is as
    accurate as that arithmetic allows, and the catalogue's require.acc = "f32" is what fails it."""
    result = run(problem("f8e4m3fn", "nt", value_range=(0.0, 1.0), k=512), impl=f"{K}:accumulates_in_f16",
                 bound=BoundModel())
    assert result.arithmetic.arithmetic.acc_bits == 11
    assert [v.key for v in violations(Requirements(acc="f32"), result.arithmetic.arithmetic, "f8e4m3fn")] == ["acc"]
    torch_result = run(problem("f8e4m3fn", "nt", value_range=(0.0, 1.0), k=512), bound=BoundModel())
    assert violations(Requirements(acc="f32"), torch_result.arithmetic.arithmetic, "f8e4m3fn") == []
    assert verdict(result).max_abs_diff > 1000 * verdict(torch_result).max_abs_diff  # what require.acc is there for


@pytest.mark.parametrize("scaling,block", [("mx", 32), ("mx", 8), ("blockwise", 4), ("rowwise", 0), ("tensor", 0)])
def test_reference_matches_a_naive_per_element_scale_lookup(scaling, block):
    case = problem("f8e5m2", "nt", scaling=scaling, m=5, n=9, k=19, batch=2, **({"block": block} if block else {}))
    inputs64 = reference_inputs(generate_inputs(case), torch.device("cpu"))
    a, b, sa, sb = (inputs64[name] for name in ("a", "b", "scale_a", "scale_b"))

    def scale_of_a(g, i, kk):
        if scaling == "tensor":
            return sa[g, 0, 0]
        return sa[g, i, 0] if scaling == "rowwise" else sa[g, i, kk // block]

    def scale_of_b(g, kk, j):
        if scaling == "tensor":
            return sb[g, 0, 0]
        if scaling == "rowwise":
            return sb[g, 0, j]
        return sb[g, kk // block, j // block] if scaling == "blockwise" else sb[g, kk // block, j]

    expected = torch.zeros(2, 5, 9, dtype=torch.float64)
    for g in range(2):
        for i in range(5):
            for j in range(9):
                expected[g, i, j] = sum(float(a[g, i, kk] * scale_of_a(g, i, kk) * b[g, kk, j] * scale_of_b(g, kk, j))
                                        for kk in range(19))
    assert torch.allclose(run(case).ref, expected, rtol=1e-13, atol=0)


# -- catalogue errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("params,message", [
    ({"scaling": "tensor", "block": 32}, "tensor scaling has no block size"),
    ({"scaling": "mxx"}, "did you mean"),
    ({"scale_a_dtype": "e5m2"}, "e8m0, f32"),
    ({"pattern": "eye"}, "identity_a"),
    ({"out_dtype": "f64"}, "f32, bf16, f16"),
])
def test_bad_parameters_name_the_key_and_the_choices(params, message):
    with pytest.raises(ProblemError, match=message):
        problem(**params)


def test_scales_let_the_range_exceed_the_element_format():
    assert problem("f4e2m1", value_range=(-1e6, 1e6)).input_range == (-1e6, 1e6)


@pytest.mark.parametrize("scaling", ["mx", "tensor", "rowwise", "blockwise"])
def test_an_odd_k_packs_fp4_with_a_zero_nibble(scaling):
    seen = {}

    def spy(a, b, scale_a, scale_b, **keywords):
        seen.update(a=a, b=b)
        return torch_scaled_gemm(a, b, scale_a, scale_b, **keywords)

    sys.modules[__name__].spy_odd = spy
    result = run(problem("f4e2m1", "tn", k=71, scaling=scaling), impl=f"{__name__}:spy_odd", bound=BoundModel())
    assert tuple(seen["a"].shape) == (24, 36) and tuple(seen["b"].shape) == (36, 40)
    assert (seen["a"].view(torch.uint8)[:, -1] >> 4 == 0).all() and (seen["b"].view(torch.uint8)[-1, :] >> 4 == 0).all()
    assert verdict(result).bound_ratio <= 1.0


def test_bias_z_is_left_out_where_an_f32_scale_may_share_one_rounding():
    """A kernel may round sa·sb once and apply it to a whole tensor or block: its errors then all lean one
    way, which bias_z (independent per-element errors) would read as a bias. The shipped catalogue's scaled
    cases with an f32 scale are judged without it; e8m0 scales (exact powers of two) keep it."""
    cases = [c for c in expand(load_catalogue(REPO / "configs.toml"))
             if c.suite == "lowbit-scaled"]
    by_config = {c.config: c for c in cases}
    assert "bias_z" in by_config["mx-m128-n128-k1024"].tolerances
    for config in ("mx-f32-scales-out-bf16", "tensor-b2-m64-n64-k2048", "rowwise-m200-n120-k512-out-f16"):
        assert "bias_z" not in by_config[config].tolerances and "bound_ratio" in by_config[config].tolerances
