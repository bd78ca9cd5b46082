"""Brute force for the reductions' bounds (runner/ops/reductions/bound.py): kernels emulated step by step in
f32, f16 or bf16 (every addition, division, square rounded in that format) in several orders, on drawn
data (zero-mean, offset, sorted, tiny, long rows), stay within the bound element-wise under the model
whose accumulator is that format; the one-pass variance does not, on offset data."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from e2egen.runner import BoundModel, make_problem
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic
from e2egen.runner.bound import ComputeSubnormalRounding, ComputeRoundings, SquaredCoefficient
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


def worst_ratio(op: str, order: str, dtype: str, acc: str, x64: torch.Tensor, correction: int = 1) -> float:
    """max |emulated - ref| / bound over the rows of x64 (rows, N), reduced over dim 1."""
    params = {"shape": list(x64.shape), "axis": 1, **({"correction": correction} if op == "var" else {})}
    problem = make_problem(op, "fwd", dtype, "contiguous", params, (-1.0, 1.0), 0)
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
    assert worst_ratio(op, order, dtype, acc, x64, correction) <= 1.0


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


def test_squared_coefficient_adds_then_squares():
    model = BoundModel(acc="f16")
    parts = (ComputeRoundings(1, "f32"), ComputeRoundings(3, "f32"))
    assert SquaredCoefficient(parts)(model) == pytest.approx((4 * 2.0 ** -11) ** 2)


@pytest.mark.parametrize("acc, expected", [("f32", 2.0 ** -150), ("f16", 2.0 ** -25), ("bf16", 2.0 ** -134)])
def test_compute_subnormal_rounding_follows_the_accumulator(acc, expected):
    assert ComputeSubnormalRounding("f32")(BoundModel(acc=acc)) == expected


def test_an_unnamed_accumulator_width_takes_f16s_coarse_spacing():
    model = BoundModel(arithmetic=Arithmetic(acc_bits=13))
    assert ComputeSubnormalRounding("f32")(model) == 2.0 ** -25
    assert math.isclose(ComputeRoundings(1, "f32")(model), 2.0 ** -13)
