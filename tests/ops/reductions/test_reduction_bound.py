"""Brute force for the reductions' bounds (runner/ops/reductions/bound.py): kernels emulated step by step in
f32, f16 or bf16 (every addition, division, square rounded in that format) in several orders, on drawn
data (zero-mean, offset, sorted, tiny, long rows), stay within the bound element-wise under the model
whose accumulator is that format; the one-pass variance does not, on offset data."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from e2egen.runner import BoundModel, make_problem
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic
from e2egen.runner.bound import (CommonValueSum, ComputeSubnormalRounding, ComputeRoundings, DrawnSum, ScaledMagnitude, SquaredBound,
                                 chain_square_sum)
from e2egen.runner.dtypes import storage_dtype
from e2egen.runner.inputs import round_to_storage
from e2egen.runner.ops.reductions import kernels as k
from e2egen.runner.ops.reductions.bound import reduction_bound

TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# (input dtype, accumulator format): the accumulator at least as wide as the inputs
ARITHMETIC = [("f32", "f32"), ("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("bf16", "bf16")]


def emulated(op: str, order: str, values: torch.Tensor, correction: int) -> torch.Tensor:
    """op over the last dim of `values` (already in the accumulator's dtype), every step rounded there."""
    n = values.shape[-1]
    sums = {"pairwise": k.pairwise, "sequential": k.sequential, "reversed": lambda v: k.sequential(v, True),
            "blocked": k.blocked}
    if op == "sum":
        return sums[order](values)
    if op == "mean":
        return sums[order](values) / n if order != "blocked" else sums[order](values) * (1.0 / n)
    if op == "max":
        return values.amax(dim=-1)
    if order == "welford":
        return k.welford(values)[1] / (n - correction)
    if order == "chan":
        return k.chan_var(values, dim=(1,), correction=correction).to(values.dtype)
    mean = sums[order](values) / n
    return sums[order]((values - mean[:, None]).square()) / (n - correction)


ORDERS = {"sum": ("pairwise", "sequential", "reversed", "blocked"), "mean": ("pairwise", "sequential", "blocked"),
          "max": ("pairwise",), "var": ("pairwise", "sequential", "welford", "chan")}


def within_the_model(dtype: str, acc: str, n: int, offset: float, spread: float) -> bool:
    """The data's sums stay finite in the accumulator and the output format, and N·u <= 1 there: beyond that a long sum in a narrow
    format stagnates (each addition rounds the same way) and no probabilistic model holds (Higham & Mary)."""
    largest = min({"f32": 3e38, "f16": 65504.0, "bf16": 3e38}[fmt] for fmt in (dtype, acc))
    return n * (abs(offset) + spread) < largest / 2 and n * 2.0 ** -FORMAT_BITS[acc] <= 1


def draw(rows: int, n: int, dtype: str, offset: float, spread: float, sorted_rows: bool, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    values = torch.rand(rows, n, generator=generator, dtype=torch.float64).mul_(2 * spread).add_(offset - spread)
    if sorted_rows:
        values = values.sort(dim=-1).values
    return round_to_storage(values, storage_dtype(dtype)).to(torch.float64)


def worst_ratio(op: str, order: str, dtype: str, acc: str, x64: torch.Tensor, correction: int = 1,
                sorted_rows: bool = False) -> float:
    """max |emulated - ref| / bound over the rows of x64 (rows, N), reduced over dim 1; sorted rows are judged as
    data not drawn independently (a pattern's), as a catalogue never draws them."""
    params = {"shape": list(x64.shape), "axis": 1, **({"correction": correction} if op == "var" else {})}
    problem = make_problem(op, "fwd", dtype, "contiguous", params, (-1.0, 1.0), 0, "pattern" if sorted_rows else "uniform")
    ref = problem.numerics.reference(problem, {"x": x64})["out"]
    bound = reduction_bound(op, problem, x64).evaluate(BoundModel(acc=acc), ref)
    out = emulated(op, order, x64.to(TORCH[acc]), correction).to(TORCH[dtype]).to(torch.float64)
    error = (out - ref).abs()
    assert bool(torch.isfinite(out).all()), f"{op} {order}: the emulation overflowed"
    return float(torch.where(error == 0, 0.0, error / bound).max())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(("sum", "mean", "max", "var")), arithmetic=st.sampled_from(ARITHMETIC),
       n=st.integers(2, 300), offset=st.sampled_from((0.0, 1.0, 100.0, 3000.0)),
       spread=st.sampled_from((1.0, 0.01)), sorted_rows=st.booleans(), seed=st.integers(0, 2 ** 31),
       correction=st.integers(0, 1), data=st.data())
def test_emulated_kernels_stay_within_the_bound(op, arithmetic, n, offset, spread, sorted_rows, seed, correction, data):
    dtype, acc = arithmetic
    assume(within_the_model(dtype, acc, n, offset, spread))
    order = data.draw(st.sampled_from(ORDERS[op]))
    x64 = draw(4, n, dtype, offset, spread, sorted_rows, seed)
    assert worst_ratio(op, order, dtype, acc, x64, correction, sorted_rows) <= 1.0


@pytest.mark.parametrize("op, order", [("sum", "sequential"), ("sum", "pairwise"), ("mean", "sequential"),
                                       ("var", "welford"), ("var", "chan"), ("var", "pairwise")])
@pytest.mark.parametrize("offset", [0.0, 1000.0])
def test_long_rows_stay_within_the_bound(op, order, offset):
    x64 = draw(2, 2 ** 14, "f32", offset, 1.0, False, 11)
    assert worst_ratio(op, order, "f32", "f32", x64) <= 1.0


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_subnormal_data_stays_within_the_bound(dtype):
    tiny = 4e-39  # subnormal in f32 and bf16
    x64 = draw(4, 100, dtype, 0.0, tiny, False, 3)
    assert bool((x64 != 0).any())
    for op in ("sum", "mean", "var"):
        for order in ORDERS[op][:2]:
            assert worst_ratio(op, order, dtype, "f32", x64) <= 1.0


def test_f16_subnormal_data_stays_within_the_bound():
    x64 = draw(4, 100, "f16", 0.0, 5e-5, False, 5)  # f16's smallest normal is 6.1e-5
    for op in ("sum", "mean", "var"):
        for acc in ("f32", "f16"):
            assert worst_ratio(op, "sequential", "f16", acc, x64) <= 1.0


@settings(max_examples=25, deadline=None)
@given(n=st.integers(64, 1024), offset=st.sampled_from((2.0 ** 12, 3e4, 1e5)), seed=st.integers(0, 2 ** 31))
def test_the_one_pass_variance_exceeds_the_bound_on_offset_data(n, offset, seed):
    """E[x²] - E[x]² loses about μ²/var·u relative to var, which the bound (at most |μ|/√var·u·G(N)) does not allow."""
    x64 = draw(4, n, "f32", offset, 1.0, False, seed)
    params = {"shape": [4, n], "axis": 1, "correction": 1}
    problem = make_problem("var", "fwd", "f32", "contiguous", params, (-1.0, 1.0), 0)
    ref = problem.numerics.reference(problem, {"x": x64})["out"]
    bound = reduction_bound("var", problem, x64).evaluate(BoundModel(acc="f32"), ref)
    out = k.one_pass_var(x64.float(), dim=(1,), correction=1).double()
    assert float(((out - ref).abs() / bound).max()) > 1.0


def test_max_is_exact_and_the_division_counts_twice():
    problem = make_problem("max", "fwd", "f16", "contiguous", {"shape": [3, 5]}, (-1.0, 1.0), 0)
    x64 = draw(3, 5, "f16", 0.0, 1.0, False, 1)
    ref = problem.numerics.reference(problem, {"x": x64})["out"]
    assert bool((reduction_bound("max", problem, x64).evaluate(BoundModel(), ref) == 0).all())
    assert ComputeRoundings(2, "f32")(BoundModel()) == 2 * 2.0 ** -24


def test_squared_bound_adds_then_squares():
    model = BoundModel(acc="f16")
    magnitude = torch.tensor([1.0, 3.0], dtype=torch.float64)
    parts = (ScaledMagnitude(ComputeRoundings(1, "f32"), magnitude, "one"),
             ScaledMagnitude(ComputeRoundings(3, "f32"), magnitude, "three"))
    squared = SquaredBound(parts, 2.0, "both").evaluate(model)
    assert torch.allclose(squared, 2 * (4 * 2.0 ** -11 * magnitude) ** 2)


@pytest.mark.parametrize("acc, expected", [("f32", 2.0 ** -150), ("f16", 2.0 ** -25), ("bf16", 2.0 ** -134)])
def test_compute_subnormal_rounding_follows_the_accumulator(acc, expected):
    assert ComputeSubnormalRounding("f32")(BoundModel(acc=acc)) == expected


def test_an_unnamed_accumulator_width_takes_f16s_coarse_spacing():
    model = BoundModel(arithmetic=Arithmetic(acc_bits=13))
    assert ComputeSubnormalRounding("f32")(model) == 2.0 ** -25
    assert math.isclose(ComputeRoundings(1, "f32")(model), 2.0 ** -13)


def _sequential_f32(x64: torch.Tensor) -> torch.Tensor:
    """A plain sequential f32 sum over the last dim (numpy's accumulate adds one element after the other)."""
    values = x64.to(torch.float32).numpy()
    return torch.from_numpy(np.add.accumulate(values, axis=-1, dtype=np.float32)[..., -1].copy()).double()


def _ratios(op: str, problem, x64: torch.Tensor, out: torch.Tensor) -> tuple[float, float]:
    """(bound_ratio, the ratio the bound gives without its common-value part)."""
    ref = problem.numerics.reference(problem, {"x": x64})["out"]
    bound = reduction_bound(op, problem, x64)
    model = BoundModel(acc="f32")
    without = sum(part.evaluate(model, ref) for part in bound.parts if not isinstance(part, CommonValueSum))
    error = (out - ref).abs()
    return float((error / bound.evaluate(model, ref)).max()), float((error / without).max())


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("n", [2 ** 15, 2 ** 16])
def test_a_sequential_sum_of_values_sharing_a_large_common_value_stays_within_the_bound(op, n):
    """[1000, 1001] in f32: every rounding of the running sum drops about the same low part, so the errors
    add linearly (~N·u·Σx/16) where λ√N assumes a random walk: the common-value term covers them."""
    x64 = draw(2, n, "f32", 1000.5, 0.5, False, 7)
    problem = make_problem(op, "fwd", "f32", "contiguous", {"shape": [2, n], "axis": 1}, (1000.0, 1001.0), 0)
    out = _sequential_f32(x64) / (n if op == "mean" else 1)
    ratio, without_common_value = _ratios(op, problem, x64, out.float().double())
    assert ratio <= 0.5
    assert without_common_value > 1  # the random-walk term alone is exceeded: the data are adversarial


@pytest.mark.parametrize("offset, spread", [(1.5, 0.5), (0.5, 0.5), (1000.5, 0.5)])
def test_sorted_rows_not_drawn_independently_get_the_proven_term(offset, spread):
    """Sorted data are no independent draws: the bound takes u·|Σx|·(N+1)/2, which holds in any order."""
    n = 2 ** 15
    x64 = draw(2, n, "f32", offset, spread, True, 5)
    problem = make_problem("sum", "fwd", "f32", "contiguous", {"shape": [2, n], "axis": 1}, (-1.0, 1.0), 0, "pattern")
    ratio, _ = _ratios("sum", problem, x64, _sequential_f32(x64))
    assert ratio <= 0.5
    common = next(part for part in reduction_bound("sum", problem, x64).parts if isinstance(part, CommonValueSum))
    assert common.spread is None
    proven = x64.sum(dim=1).abs() * ((n + 1) / 2 * 2.0 ** -24)
    assert torch.allclose(common.evaluate(BoundModel(acc="f32")), proven)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 5000), offset=st.floats(-1e4, 1e4), spread=st.floats(1e-6, 10.0), seed=st.integers(0, 2 ** 31),
       acc=st.sampled_from(("f32", "f16", "bf16")))
def test_the_drawn_common_value_term_never_exceeds_the_proven_one(n, offset, spread, seed, acc):
    x64 = draw(3, n, "f32", offset, spread, False, seed)
    absolute, signed = x64.abs().sum(dim=1), x64.sum(dim=1).abs()
    drawn = CommonValueSum(n, "f32", signed, absolute, x64.amax(dim=1) - x64.amin(dim=1))
    proven = CommonValueSum(n, "f32", signed, absolute, None)
    model = BoundModel(acc=acc)
    assert bool((drawn.evaluate(model) <= proven.evaluate(model)).all())
    assert torch.equal(proven.evaluate(model), signed * ((n + 1) / 2 * 2.0 ** -FORMAT_BITS[acc]))
    assert not proven.evaluate(BoundModel(acc=acc, strict=True)).any()  # λN covers it
    truncating = BoundModel(arithmetic=Arithmetic(acc_bits=24, rounding="toward-zero"))
    assert not drawn.evaluate(truncating).any()  # 2N covers it
    faithful = BoundModel(arithmetic=Arithmetic(acc_bits=24, rounding="faithful"))
    assert torch.equal(drawn.evaluate(faithful), proven.evaluate(faithful))  # ties may all go one way


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 3000), exponent=st.integers(-30, 10), seed=st.integers(0, 2 ** 31))
def test_a_sum_whose_partial_sums_fit_the_accumulator_has_no_common_value_term(n, exponent, seed):
    """Every partial sum of multiples of q is a multiple of q of magnitude at most Σ|x|: when Σ|x| <= q·2^24 an f32
    accumulator holds each exactly, in any order, so the sum is exact and the term is 0 (summand_quantum finds the
    data's own q, the smallest lowest set bit, which is at least the q they were drawn on)."""
    quantum = 2.0 ** exponent
    generator = torch.Generator().manual_seed(seed)
    limit = max(1, 2 ** 24 // n)  # integers whose magnitudes sum to at most 2^24
    x64 = torch.randint(-limit, limit + 1, (2, n), generator=generator).double().mul_(quantum)
    assert float(x64.abs().sum(dim=1).max()) <= quantum * 2 ** 24
    assert torch.equal(_sequential_f32(x64), x64.sum(dim=1))  # the premise, on one order
    problem = make_problem("sum", "fwd", "f32", "contiguous", {"shape": [2, n], "axis": 1}, (-1.0, 1.0), 0, "pattern")
    common = next(part for part in reduction_bound("sum", problem, x64).parts if isinstance(part, CommonValueSum))
    held = common.quantum * 2 ** 24 >= x64.abs().sum(dim=1)
    assert bool(held.all()) and not common.evaluate(BoundModel(acc="f32")).any()


def test_rocmlir_s_pattern_summed_in_f32_gets_no_common_value_term():
    """f16 values 0.5, -1, 0.75 (quantum 2^-11) over 4096 elements: Σ|x| = 3072 <= 2^-11·2^24 in f32, not in f16."""
    x64 = torch.tensor([0.5, -1.0, 0.75], dtype=torch.float64).repeat(1366)[:4096].reshape(1, 4096).repeat(2, 1)
    problem = make_problem("sum", "fwd", "f16", "contiguous", {"shape": [2, 4096], "axis": 1}, (-1.0, 1.0), 0, "pattern")
    common = next(part for part in reduction_bound("sum", problem, x64).parts if isinstance(part, CommonValueSum))
    assert not common.evaluate(BoundModel(acc="f32")).any()
    assert bool((common.evaluate(BoundModel(acc="f16")) > 0).all())


@pytest.mark.parametrize("n", [2, 3, 5, 7])
@pytest.mark.parametrize("offset", [0.0, 0.4, 3.0])
def test_the_chain_square_sum_bounds_the_partial_sums_of_every_order_on_average(n, offset):
    """DrawnSum's premise: over every order of the summands (all n! of them), the mean of Σ_k S_k² of a sequential
    sum (the largest subsets) and of a pairwise one is at most chain_square_sum of the summands' mean and variance."""
    x = draw(1, n, "f32", offset, 1.0, False, n)[0]
    mean, variance = x.mean(), x.var(correction=0)
    orders = torch.tensor(list(itertools.permutations(range(n))))
    sequential = x[orders].cumsum(dim=1).square().sum(dim=1).mean()
    pairwise = torch.zeros(())
    for order in orders:
        level = x[order]
        while level.numel() > 1:
            level = torch.cat([level, level.new_zeros(level.numel() % 2)]).reshape(-1, 2).sum(dim=1)
            pairwise = pairwise + level.square().sum() / len(orders)
    bound = chain_square_sum(n, mean, variance)
    assert float(sequential) <= float(bound) and float(pairwise) <= float(bound)
    exact = sum(m * m * mean ** 2 + m * variance * (n - m) / max(n - 1, 1) for m in range(1, n + 1))
    assert math.isclose(float(sequential), float(exact), rel_tol=1e-9)  # the formula chain_square_sum bounds


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 5000), offset=st.floats(-100.0, 100.0), seed=st.integers(0, 2 ** 31),
       acc=st.sampled_from(("f32", "f16", "bf16")))
def test_the_walk_is_never_above_g_n_s_term_and_gives_way_to_it_when_strict_or_truncating(n, offset, seed, acc):
    x64 = draw(3, n, "f32", offset, 1.0, False, seed)
    walk = DrawnSum.over(x64, 1, "f32")
    anywhere = ScaledMagnitude(ComputeRoundings(1, "f32"), x64.abs().sum(dim=1), "sum")  # u·Σ|x|
    model = BoundModel(acc=acc)
    g = model.lam * math.sqrt(n)
    assert bool((walk.evaluate(model) <= anywhere.evaluate(model) * g * (1 + 1e-12)).all())
    strict = BoundModel(acc=acc, strict=True)
    assert torch.allclose(walk.evaluate(strict), anywhere.evaluate(strict) * model.lam * n)
    truncating = BoundModel(arithmetic=Arithmetic(acc_bits=24, rounding="toward-zero"))
    assert torch.allclose(walk.evaluate(truncating), x64.abs().sum(dim=1) * (2 * n * 2.0 ** -24))  # errors of one sign


@pytest.mark.parametrize("n", [4096, 2 ** 16])
def test_on_zero_mean_data_the_walk_is_sqrt_n_below_g_n_s_term(n):
    """The point of the walk: about N·σ/√2 where G(N)'s term has √N·Σ|x| ≈ N^1.5·E|x|."""
    x64 = draw(2, n, "f32", 0.0, 1.0, False, 3)
    model = BoundModel(acc="f32")
    walk = DrawnSum.over(x64, 1, "f32").evaluate(model)
    g_term = x64.abs().sum(dim=1) * (model.lam * math.sqrt(n) * 2.0 ** -24)
    assert bool((g_term / walk > 0.5 * math.sqrt(n)).all())


def test_the_walk_takes_the_assumed_accumulator_where_the_probes_measured_a_wider_one():
    """A scan that adds blocks in float64 and carries their totals in f32 measures >= 29 bits on short sums; the walk
    keeps f32's u, G(N)'s term the measured one."""
    x64 = draw(2, 4096, "f32", 0.0, 1.0, False, 4)
    walk = DrawnSum.over(x64, 1, "f32")
    wide = BoundModel(arithmetic=Arithmetic(acc_bits=29))
    at_f32 = BoundModel(acc="f32")
    measured_g_term = x64.abs().sum(dim=1) * (5 * 64 * 2.0 ** -29)
    assert torch.allclose(walk.evaluate(wide), torch.minimum(walk.evaluate(at_f32), measured_g_term))
    assert torch.allclose(walk.evaluate(BoundModel(acc="f16")), walk.evaluate(at_f32) * 2.0 ** 13)  # bound.acc rules
