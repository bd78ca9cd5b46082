"""The error bound B against sums written out by hand, for every dtype, accumulator and growth mode.

B = (lam·g(K)·u_acc + u_in)·Σ|a_i·b_i| + c_out·ulp_T(ref). Σ|a_i·b_i| is summed
here element by element with math.fsum straight from the definition of each op
(index arithmetic, no im2col, no torch conv), on geometries where the
runner's lowering has to work hardest: stride with dilation, groups, padding
wider than the kernel's reach, and 1x1 stride-2 bwd_data, whose skipped
positions get no product at all (there B = c_out·ulp_T(0), and ref is 0).
tests/runner/test_runner_bound.py already checks B against runner_naive's products
for f16 and tf32; this file adds the other formats and accumulators.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from e2egen import metrics
from e2egen.runner import BoundModel, make_problem, run
from e2egen.runner.bound import compute_bound
from e2egen.runner.inputs import generate_inputs
from e2egen.runner.reference import apply_op

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths

GEOMETRIES = {
    "conv1d-dilated-grouped": ("conv1d", {"n": 2, "c": 4, "k": 6, "w": 9, "kernel": 3, "stride": 2, "pad": 2, "dilation": 2, "groups": 2}),
    "conv2d-1x1-s2": ("conv2d", {"n": 1, "c": 3, "k": 2, "hw": [6, 5], "kernel": 1, "stride": 2}),
    "conv2d-wide-pad": ("conv2d", {"n": 1, "c": 2, "k": 3, "hw": [4, 3], "kernel": [2, 3], "pad": [3, 2]}),
    "conv3d-grouped": ("conv3d", {"n": 1, "c": 2, "k": 4, "dhw": [3, 4, 5], "kernel": [2, 1, 3], "stride": [1, 2, 1],
                                  "pad": [0, 1, 1], "groups": 2}),
    "gemm": ("gemm", {"m": 3, "n": 5, "k": 11}),
    "gemm-batched": ("gemm", {"m": 2, "n": 3, "k": 7, "batch": 2}),
}
CASES = [(name, direction) for name, (op, _) in GEOMETRIES.items()
         for direction in (("fwd",) if op == "gemm" else ("fwd", "bwd_data", "bwd_weight"))]
U = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}
MODELS = [BoundModel(), BoundModel(lam=2.5, acc="f16"), BoundModel(lam=1.0, acc="bf16", strict=True, c_out=0.5),
          BoundModel(strict=True, c_out=0.0)]


def terms(problem, t, index):
    """The products a_i·b_i summed into output `index`, from the op's definition."""
    p = problem.params
    if problem.op == "gemm":
        *batch, i, j = index
        return [t["a"][(*batch, i, kk)].item() * t["b"][(*batch, kk, j)].item() for kk in range(p.k)]
    cg, kg = p.c // p.groups, p.k // p.groups
    taps = list(itertools.product(*map(range, p.kernel)))

    def source(o, tap):  # input position read by output position o through kernel tap `tap`
        return [oo * s + r * d - pp for oo, r, s, d, pp in zip(o, tap, p.stride, p.dilation, p.pad)]

    def inside(pos):
        return all(0 <= q < size for q, size in zip(pos, p.size))

    if problem.direction == "fwd":
        n, k, *o = index
        g = k // kg
        return [t["x"][(n, g * cg + c, *source(o, tap))].item() * t["w"][(k, c, *tap)].item()
                for c in range(cg) for tap in taps if inside(source(o, tap))]
    if problem.direction == "bwd_data":
        n, c, *i = index
        g = c // cg
        found = []
        for kk, tap in itertools.product(range(kg), taps):
            for o in itertools.product(*map(range, p.out_size)):
                if source(o, tap) == list(i):
                    k = g * kg + kk
                    found.append(t["dy"][(n, k, *o)].item() * t["w"][(k, c - g * cg, *tap)].item())
        return found
    k, c, *tap = index
    g = k // kg
    return [t["dy"][(n, k, *o)].item() * t["x"][(n, g * cg + c, *source(o, tap))].item()
            for n in range(p.n) for o in itertools.product(*map(range, p.out_size)) if inside(source(o, tap))]


@pytest.mark.parametrize("name,direction", CASES)
def test_bound_equals_the_hand_summed_formula(name, direction):
    op, params = GEOMETRIES[name]
    for dtype in ("f32", "tf32", "f16", "bf16"):
        layout = "nhwc" if op != "gemm" else "tn"
        problem = make_problem(op, direction, dtype, layout, params, (-3.0, 2.0), seed=len(name) + len(direction))
        tensors = {key: value.double() for key, value in generate_inputs(problem).items()}
        shape = problem.output_shape
        sums = torch.zeros(shape, dtype=torch.float64)
        magnitudes = torch.zeros(shape, dtype=torch.float64)
        most_terms = 0
        for index in itertools.product(*map(range, shape)):
            found = terms(problem, tensors, index)
            most_terms = max(most_terms, len(found))
            sums[index] = math.fsum(found)
            magnitudes[index] = math.fsum(abs(v) for v in found)
        k = problem.reduction_size
        assert most_terms <= k  # K counts every tap, also those that fall on padding or a stride gap
        ref = apply_op(problem, tensors)  # the runner's reference (run() skips tf32 on a CPU)
        torch.testing.assert_close(ref, sums, rtol=1e-12, atol=1e-12)
        out_format = "f32" if dtype == "tf32" else dtype
        ulps = metrics.ulp(ref, out_format)
        for model in MODELS:
            growth = k if model.strict else math.sqrt(k)
            u_in = 2 * 2.0 ** -11 if dtype == "tf32" else 0.0
            acc = "f32" if model.acc == "measured" else model.acc  # unmeasured: the assumed f32 accumulator
            factor = model.lam * growth * U[acc] + u_in
            expected = factor * magnitudes + model.c_out * ulps
            bound = compute_bound(problem, tensors, ref, model)
            # Σ|a·b| summed in f32 and widened (runner/magnitude.py): never below, at most (1 + (2K + 8)·u_f32) above
            widest = factor * magnitudes * (1 + (2 * k + 8) * U["f32"]) + model.c_out * ulps
            assert (bound >= expected * (1 - 1e-13)).all() and (bound <= widest * (1 + 1e-13)).all()
        if name == "conv2d-1x1-s2" and direction == "bwd_data":  # positions no tap reaches
            empty = magnitudes == 0
            assert empty.any() and (ref[empty] == 0).all()
            assert (compute_bound(problem, tensors, ref, BoundModel())[empty] == metrics.get_format(out_format).min_subnormal).all()


@pytest.mark.parametrize("op,params,direction", [
    ("conv2d", GEOMETRIES["conv2d-wide-pad"][1], "bwd_data"),
    ("gemm", GEOMETRIES["gemm"][1], "fwd"),
])
def test_strict_and_probabilistic_bounds_differ_by_sqrt_k(op, params, direction):
    problem = make_problem(op, direction, "bf16", "nchw" if op != "gemm" else "nn", params, (1.0, 5.0), seed=4)
    tensors = {key: value.double() for key, value in generate_inputs(problem).items()}
    ref = run(problem, device="cpu").ref
    k = problem.reduction_size
    loose = compute_bound(problem, tensors, ref, BoundModel(strict=True, c_out=0.0))
    tight = compute_bound(problem, tensors, ref, BoundModel(c_out=0.0))
    torch.testing.assert_close(loose, tight * math.sqrt(k), rtol=1e-14, atol=0)
    # the accumulator only scales the model's first term
    f16 = compute_bound(problem, tensors, ref, BoundModel(acc="f16", c_out=0.0))
    torch.testing.assert_close(f16, tight * 2.0 ** 13, rtol=1e-14, atol=0)


def test_an_overflowing_run_is_counted_apart_and_kept_out_of_bound_ratio():
    """The study's "overflow" runs: f16 r5 with a long reduction overflows; the bound judges the rest."""
    problem = make_problem("gemm", "fwd", "f16", "nn", {"m": 8, "n": 8, "k": 1164}, (5.0, 10.0), seed=2)
    result = run(problem, device="cpu", bound=BoundModel())
    c = metrics.compare(result.ref, result.out, "f16", bound=result.bound)
    beyond = result.ref.abs() > metrics.get_format("f16").max
    assert beyond.any() and not beyond.all()
    assert c.overflow == int(beyond.sum())
    assert c.compared == result.ref.numel() - c.overflow and c.bound_ratio <= 1
    verdict = c.check({"bound_ratio": 1.0})
    assert not verdict.passed and "overflow" in verdict.summary


def grouped_terms(problem, t, index, kind):
    """{group: [a_i·b_i]} for one output: grouped by the weight's kernel tap (flat, row-major) or by sample."""
    p = problem.params
    cg, kg = p.c // p.groups, p.k // p.groups
    taps = list(itertools.product(*map(range, p.kernel)))
    groups: dict[int, list[float]] = {}

    def source(o, tap):
        return [oo * s + r * d - pp for oo, r, s, d, pp in zip(o, tap, p.stride, p.dilation, p.pad)]

    def inside(pos):
        return all(0 <= q < size for q, size in zip(pos, p.size))

    if problem.direction == "fwd":
        n, k, *o = index
        g = k // kg
        for c in range(cg):
            for flat, tap in enumerate(taps):
                if inside(source(o, tap)):
                    groups.setdefault(flat, []).append(t["x"][(n, g * cg + c, *source(o, tap))].item() * t["w"][(k, c, *tap)].item())
    elif problem.direction == "bwd_data":
        n, c, *i = index
        g = c // cg
        for kk in range(kg):
            for flat, tap in enumerate(taps):
                for o in itertools.product(*map(range, p.out_size)):
                    if source(o, tap) == list(i):
                        k = g * kg + kk
                        groups.setdefault(flat, []).append(t["dy"][(n, k, *o)].item() * t["w"][(k, c - g * cg, *tap)].item())
    else:
        k, c, *tap = index
        g = k // kg
        for n in range(p.n):
            for o in itertools.product(*map(range, p.out_size)):
                if inside(source(o, tap)):
                    groups.setdefault(n, []).append(t["dy"][(n, k, *o)].item() * t["x"][(n, g * cg + c, *source(o, tap))].item())
    return groups


@pytest.mark.parametrize("name,direction", [c for c in CASES if not c[0].startswith("gemm")])
@pytest.mark.parametrize("partials,reverse", [("stored", False), ("running", True)])
@pytest.mark.parametrize("dtype,low,high", [("f16", -3.0, 2.0), ("f32", -3e3, 2e3)])
def test_partial_sums_bound_equals_the_hand_summed_partials(name, direction, partials, reverse, dtype, low, high):
    """A kernel keeping f16 partials per tap (fwd, bwd_data) or per sample (bwd_weight): the accumulation term
    is 2·u16·(Σ|P_t| [stored] + Σ|S_t|) over the kernel's order of partials, the rest λ·√(K/P)·u_f32·Σ|a·b|.
    The bound computes the partials in f32; with f32 inputs (24-bit significands) their products and sums
    round there, so its allowance for that has to hold up against the exact partials summed here."""
    from e2egen.runner.arithmetic import Arithmetic
    from e2egen.runner.bound import product_sum_bound

    op, params = GEOMETRIES[name]
    kind = "samples" if direction == "bwd_weight" else "taps"
    problem = make_problem(op, direction, dtype, "nchw", params, (low, high), seed=5)
    tensors = {key: value.double() for key, value in generate_inputs(problem).items()}
    arithmetic = Arithmetic(acc_bits=11, groups=kind, inner_bits=24, partials=partials, reversed=reverse)
    model = BoundModel(lam=3.0).with_arithmetic(arithmetic)
    ref = apply_op(problem, tensors)
    bound = product_sum_bound(problem, tensors, arithmetic).evaluate(model, ref)
    p = problem.params
    count = p.n if kind == "samples" else math.prod(p.kernel)
    k = problem.reduction_size
    inner = 3.0 * math.sqrt(math.ceil(k / count)) * 2.0 ** -24
    ulps = metrics.ulp(ref, dtype)
    for index in itertools.product(*map(range, problem.output_shape)):
        groups = grouped_terms(problem, tensors, index, kind)
        # the documented reduction order: taps ascending for fwd, the flipped kernel (descending) for bwd_data
        order = list(range(count))
        if direction == "bwd_data":
            order.reverse()
        if reverse:
            order.reverse()
        sums = [math.fsum(groups.get(g, [])) for g in order]
        running, running_total = 0.0, 0.0
        for value in sums:
            running += value
            running_total += abs(running)
        acc = running_total + (sum(abs(v) for v in sums) if partials == "stored" else 0.0)
        magnitude = math.fsum(abs(v) for values in groups.values() for v in values)
        expected = 2 * 2.0 ** -11 * acc + inner * magnitude + ulps[index].item()
        # The partials are computed in f32 (f16 inputs): each within γ_K·Σ|a·b| of its products (+ 2K·2^-126
        # for a flushed subnormal), which enters each of the count running sums and Σ|P_t| when stored. The
        # bound adds that allowance to sums of computed partials, which may exceed the exact ones by as much.
        entries = count + (1 if partials == "stored" else 0)
        gamma = k * U["f32"] / (1 - k * U["f32"])
        allowance = 2 * 2.0 ** -11 * entries * (gamma * magnitude + count * 2 * k * 2.0 ** -126)
        widest = expected + 2 * allowance + (inner + 2 * 2.0 ** -11 * entries * gamma) \
            * magnitude * (2 * k + 8) * U["f32"]  # Σ|a·b| summed in f32 and widened
        assert expected * (1 - 1e-9) <= bound[index].item() <= widest * (1 + 1e-9), index


@pytest.mark.parametrize("direction", ["bwd_data", "bwd_weight"])
def test_partials_are_summed_in_f32_only_where_its_premises_hold(direction):
    """f16 inputs meet the f32 premises: the partials come in f32, with γ_K at f32's unit roundoff; inputs
    that are not f32 values (a float64 perturbation) send them to float64, with float64's."""
    from e2egen.runner.arithmetic import Arithmetic
    from e2egen.runner.bound import product_sum_bound

    op, params = GEOMETRIES["conv2d-wide-pad"]
    problem = make_problem(op, direction, "f16", "nchw", params, (-3.0, 2.0), seed=9)
    tensors = {key: value.double() for key, value in generate_inputs(problem).items()}
    kind = "samples" if direction == "bwd_weight" else "taps"
    arithmetic = Arithmetic(acc_bits=11, groups=kind, inner_bits=24, partials="stored")
    k = problem.reduction_size
    perturbed = dict(tensors)
    name = next(iter(perturbed))
    perturbed[name] = perturbed[name] * (1 + 2.0 ** -40)  # no longer f32 values
    for inputs, unit in ((tensors, U["f32"]), (perturbed, 2.0 ** -53)):
        partials = product_sum_bound(problem, inputs, arithmetic).parts[0].partials
        relative, absolute = partials.partial_error
        assert relative == pytest.approx(k * unit / (1 - k * unit), rel=1e-12) and relative >= k * unit
        assert absolute > 0 and partials.count == (problem.params.n if kind == "samples" else 6)


@pytest.mark.parametrize("partials", ["stored", "running"])
@pytest.mark.parametrize("direction", ["bwd_data", "bwd_weight"])
def test_the_partial_sums_bound_in_one_pass_is_torchs_sum_of_its_parts(direction, partials):
    """SumOfBounds forms a bound on the kernel's partial sums in one numba pass (metrics.ulp_terms.
    partial_sums_plus_ulps): the value of its parts summed by torch's ops (_summed), to float64's rounding
    (the two add in another order)."""
    from e2egen.runner.arithmetic import Arithmetic
    from e2egen.runner.bound import product_sum_bound

    op, params = GEOMETRIES["conv3d-grouped"]
    problem = make_problem(op, direction, "f16", "nchw", params, (-3.0, 2.0), seed=11)
    tensors = {key: value.double() for key, value in generate_inputs(problem).items()}
    kind = "samples" if direction == "bwd_weight" else "taps"
    model = BoundModel().with_arithmetic(Arithmetic(acc_bits=11, groups=kind, inner_bits=24, partials=partials))
    ref = apply_op(problem, tensors)
    bound = product_sum_bound(problem, tensors, model.arithmetic)
    fused = bound._partials_and_rounding(model, ref)
    assert fused is not None
    torch.testing.assert_close(fused, bound._summed(model, ref), rtol=1e-14, atol=0.0)
    assert torch.equal(bound.evaluate(model, ref), fused)


@pytest.mark.parametrize("direction", ["bwd_data", "bwd_weight"])
def test_partials_keep_the_inputs_dtype_when_the_case_asks_for_another_output(direction, monkeypatch):
    """An fp8 convolution with bf16 outputs: the partials come in f32 (its inputs meet the f32 premises), not
    rounded to bf16 by the kernel's output conversion, and within their allowance of the float64 partials."""
    from e2egen.runner.arithmetic import Arithmetic
    from e2egen.runner.bound import PartialSums, _partial_sums
    from e2egen.runner.magnitude import f32_operands

    params = {"n": 3, "c": 4, "k": 5, "hw": [7, 6], "kernel": [3, 3], "out_dtype": "bf16"}
    problem = make_problem("conv2d", direction, "f8e4m3fn", "nchw", params, (-3.0, 2.0), seed=1)
    tensors = {key: value.double() for key, value in generate_inputs(problem).items()}
    kind = "samples" if direction == "bwd_weight" else "taps"
    arithmetic = Arithmetic(acc_bits=11, groups=kind, inner_bits=24, partials="stored")
    operands = f32_operands(problem, tensors)
    assert not operands.unmet
    seen = []
    original = PartialSums.of

    def recording(kind, reverse, partials, partial_error=(0.0, 0.0)):
        partials = list(partials)
        seen.extend(partials)
        return original(kind, reverse, partials, partial_error)

    monkeypatch.setattr(PartialSums, "of", recording)
    sums = _partial_sums(problem, tensors, arithmetic, operands)
    exact = list(problem.numerics.reduction_partials(problem, tensors, kind))
    assert seen and all(p.dtype == torch.float32 for p in seen) and len(seen) == len(exact) == sums.count
    relative, absolute = sums.partial_error
    magnitudes = problem.numerics.reduction_partials(problem, {k: v.abs() for k, v in tensors.items()}, kind)
    for computed, value, magnitude in zip(seen, exact, magnitudes):
        assert bool(((computed.double() - value).abs() <= relative * magnitude + absolute).all())
