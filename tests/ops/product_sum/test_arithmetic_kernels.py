"""The emulated-arithmetic plug-in kernels (tests/arithmetic_kernels.py).

Three independent checks: the rounding helper against e2egen.metrics.round_to
and brute force over every f16/bf16 value; every kernel configuration against
an oracle in exact rational arithmetic (fractions.Fraction) on the same
lowered form; and the plain kernels against torch's float64 conv/gemm.
"""
from __future__ import annotations

import importlib
import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.runner import make_problem, run
from e2egen.runner.gemm_form import accumulate_chunked
from e2egen.runner.ops.product_sum.conv import ConvParams
from e2egen.runner.ops.product_sum.lowering import lower_conv_bwd_data, lower_conv_bwd_weight, lower_conv_fwd
from e2egen.runner.ops.product_sum.numerics import channels_last


def _sibling(name):
    package = __name__.rpartition(".")[0]  # tests/ may or may not be a package
    return importlib.import_module(f"{package}.{name}" if package else name)


ak = _sibling("arithmetic_kernels")
EmulatedKernel, round_to_format = ak.EmulatedKernel, ak.round_to_format

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
F64 = torch.float64
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- an exact oracle ---------------------------------------------------------------
# (significand bits, emin, emax), written out again here on purpose.
SPEC = {"f64": (53, -1022, 1023), "f32": (24, -126, 127), "tf32": (11, -126, 127),
        "f16": (11, -14, 15), "bf16": (8, -126, 127)}


def exact_round(q: Fraction, fmt: str, mode: str = "nearest"):
    """q rounded to fmt, by integer arithmetic: a Fraction, or ±inf."""
    p, emin, emax = SPEC[fmt]
    if q == 0:
        return Fraction(0)
    sign, a = (-1 if q < 0 else 1), abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # floor(log2 a) is e or e - 1
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - (p - 1))
    units = a / quantum
    whole = units.numerator // units.denominator
    if mode == "nearest":
        rest = units - whole
        if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2):
            whole += 1
    magnitude = whole * quantum
    largest = Fraction((1 << p) - 1) * Fraction(2) ** (emax - p + 1)
    if magnitude > largest:
        return sign * math.inf if mode == "nearest" else sign * largest
    return sign * magnitude


def oracle_values(kernel, tensor: torch.Tensor) -> torch.Tensor:
    """The kernel's input preparation, element by element in exact arithmetic."""
    storage = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[tensor.dtype]
    min_normal = Fraction(2) ** SPEC[storage][1]
    values = []
    for value in tensor.double().flatten().tolist():
        q = Fraction(value)
        if kernel.ftz and abs(q) < min_normal:
            q = Fraction(0)
        if kernel.inputs is not None:
            q = exact_round(q, kernel.inputs, kernel.inputs_rounding)
        values.append(float(q))
    return torch.tensor(values, dtype=F64).reshape(tensor.shape)


def oracle_reduce(kernel, form, out_fmt: str, *, window=None, samples=None) -> torch.Tensor:
    """fold(result) with every addition done exactly, then rounded as the kernel describes."""
    g, m, r = form.lhs.shape
    ncol = form.rhs.shape[2]
    lhs, rhs = form.lhs.tolist(), form.rhs.tolist()
    order = list(range(r))[::-1] if kernel.order == "reversed" else list(range(r))
    if kernel.groups is None:
        partitions = None
    elif kernel.groups == "taps":
        partitions = [[order[j] for j in range(r) if j % window == t] for t in range(window)]
    else:
        size = r // samples if kernel.groups == "samples" else kernel.groups
        partitions = [order[i:i + size] for i in range(0, r, size)]
    min_normal = Fraction(2) ** SPEC[out_fmt][1]
    out = torch.empty(g, m, ncol, dtype=F64)
    for gi in range(g):
        for mi in range(m):
            row = [Fraction(v) for v in lhs[gi][mi]]
            for ni in range(ncol):
                products = [row[i] * Fraction(rhs[gi][i][ni]) for i in range(r)]
                running = Fraction(0)
                if partitions is None:
                    for i in order:
                        running = exact_round(running + products[i], kernel.acc, kernel.rounding)
                else:
                    for part in partitions:
                        partial = exact_round(sum(products[i] for i in part), kernel.inner, kernel.rounding)
                        running = exact_round(running + partial, kernel.acc, kernel.rounding)
                result = exact_round(running, out_fmt, kernel.rounding)
                if result != 0 and abs(result) < min_normal and kernel.ftz:
                    result = Fraction(0)
                out[gi, mi, ni] = float(result)
    return form.fold(out)


def oracle(kernel, case) -> torch.Tensor:
    """What `kernel` must return for a case of `cases()` (as float64)."""
    kind, tensors, geometry = case
    out_fmt = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[tensors[0].dtype]
    first, second = (oracle_values(kernel, t) for t in tensors)
    if kind == "gemm":
        a, b = first, second
        batch = a.shape[0] if a.dim() == 3 else 1
        shape = (*a.shape[:-1], b.shape[-1])
        form = ak.GemmForm(a.reshape(batch, *a.shape[-2:]), b.reshape(batch, *b.shape[-2:]),
                           lambda out: out.reshape(shape))
        return oracle_reduce(kernel, form, out_fmt)
    p = conv_params(kind, tensors, geometry)
    if kind == "fwd":
        form = lower_conv_fwd(first, second, p.stride, p.pad, p.dilation, p.groups)
        return oracle_reduce(kernel, form, out_fmt, window=math.prod(p.kernel))
    if kind == "bwd_data":
        return oracle_reduce(kernel, lower_conv_bwd_data(first, second, p), out_fmt, window=math.prod(p.kernel))
    return oracle_reduce(kernel, lower_conv_bwd_weight(first, second, p), out_fmt, samples=p.n)


def conv_params(kind, tensors, geometry) -> ConvParams:
    g = geometry
    if kind == "fwd":
        x, w = tensors
        return ConvParams(x.shape[0], x.shape[1], w.shape[0], tuple(x.shape[2:]), tuple(w.shape[2:]),
                          g["stride"], g["padding"], g["dilation"], g["groups"])
    if kind == "bwd_data":
        dy, w = tensors
        shape = g["input_shape"]
        return ConvParams(dy.shape[0], shape[1], w.shape[0], tuple(shape[2:]), tuple(w.shape[2:]),
                          g["stride"], g["padding"], g["dilation"], g["groups"])
    x, dy = tensors
    shape = g["weight_shape"]
    return ConvParams(x.shape[0], x.shape[1], dy.shape[1], tuple(x.shape[2:]), tuple(shape[2:]),
                      g["stride"], g["padding"], g["dilation"], g["groups"])


def call(kernel, case) -> torch.Tensor:
    _, tensors, geometry = case
    return kernel(*tensors, **geometry)


def moderate(shape, dtype, generator) -> torch.Tensor:
    """Random ±2**e·(1 + j/4096), e in [-6, 1] (13 significant bits), rounded to dtype: a
    group's products then span few enough bits (< 53) that float64 sums them exactly."""
    exponent = torch.randint(-6, 2, shape, generator=generator).to(F64)
    fraction = torch.randint(0, 4096, shape, generator=generator).to(F64) / 4096
    sign = torch.where(torch.rand(shape, generator=generator) < 0.5, -1.0, 1.0).to(F64)
    return (sign * (1 + fraction) * torch.exp2(exponent)).to(dtype)


def conv_case(direction, dtype, *, n, c, k, size, kernel, stride=1, pad=0, dilation=1, groups=1, seed=0,
              values=moderate):
    dims = len(size)
    tup = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * dims  # noqa: E731
    p = ConvParams(n, c, k, tuple(size), tup(kernel), tup(stride), tup(pad), tup(dilation), groups)
    gen = torch.Generator().manual_seed(seed)
    geometry = dict(p.geometry)
    if direction == "fwd":
        tensors = (values(p.x_shape, dtype, gen), values(p.w_shape, dtype, gen))
    elif direction == "bwd_data":
        tensors = (values(p.y_shape, dtype, gen), values(p.w_shape, dtype, gen))
        geometry["input_shape"] = p.x_shape
    else:
        tensors = (values(p.x_shape, dtype, gen), values(p.y_shape, dtype, gen))
        geometry["weight_shape"] = p.w_shape
    return direction, tensors, geometry


def gemm_case(dtype, m, k, n, batch=None, seed=0, values=moderate):
    gen = torch.Generator().manual_seed(seed)
    lead = () if batch is None else (batch,)
    return "gemm", (values((*lead, m, k), dtype, gen), values((*lead, k, n), dtype, gen)), {}


# -- round_to_format ---------------------------------------------------------------
def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values (NaN equal to NaN) and equal signs of zeros."""
    both_nan = torch.isnan(a) & torch.isnan(b)
    equal = (a == b) & (torch.signbit(a) == torch.signbit(b))
    return bool((both_nan | equal).all())


def _all_values(fmt) -> torch.Tensor:
    """Every finite non-negative value of f16 / bf16, ascending, as float64."""
    top = {"f16": 0x7C00, "bf16": 0x7F80}[fmt]
    return torch.arange(0, top, dtype=torch.int16).view(DTYPES[fmt]).to(F64)


def _edge_values(fmt) -> torch.Tensor:
    """Values, midpoints (ties), and their float64 neighbours, subnormals, overflow, specials."""
    if fmt == "f32":
        gen = torch.Generator().manual_seed(3)
        bits = torch.randint(0, 0x7F800000, (20000,), generator=gen, dtype=torch.int32)
        bits = torch.cat([bits, torch.arange(0, 2000, dtype=torch.int32), torch.arange(0x7F7FF000, 0x7F800000, dtype=torch.int32)])
        values = bits.unique().view(torch.float32).to(F64)
    else:
        values = _all_values(fmt)
    mids = (values[1:] + values[:-1]) / 2
    top = values[-1]
    gap = top - values[-2]
    specials = torch.tensor([0.0, math.inf, math.nan, top + gap / 2, top + gap, top * 2, 1e300, 5e-324, 1e-300,
                             values[1].item() / 2, values[1].item() / 4, values[1].item() * 0.75], dtype=F64)
    around = torch.cat([torch.nextafter(mids, torch.full_like(mids, math.inf)),
                        torch.nextafter(mids, torch.zeros_like(mids))])
    everything = torch.cat([values, mids, around, specials, torch.nextafter(specials[3:4], specials[:1])])
    return torch.cat([everything, -everything])


@pytest.mark.parametrize("fmt", ["f32", "f16", "bf16"])
def test_round_nearest_matches_metrics_on_values_ties_subnormals_and_overflow(fmt):
    x = _edge_values(fmt)
    assert _same(round_to_format(x, fmt), metrics.round_to(x, fmt))


@FAST
@given(st.lists(st.floats(width=64, allow_nan=True, allow_infinity=True), min_size=1, max_size=64),
       st.sampled_from(["f32", "f16", "bf16"]))
def test_round_nearest_matches_metrics_on_any_float64(values, fmt):
    x = torch.tensor(values, dtype=F64)
    assert _same(round_to_format(x, fmt), metrics.round_to(x, fmt))


@FAST
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=64),
       st.sampled_from([-130, -40, 0, 17, 120]))
def test_round_nearest_matches_metrics_on_scaled_values(values, shift):
    x = torch.tensor(values, dtype=F64) * 2.0 ** shift
    for fmt in ("f32", "f16", "bf16"):
        assert _same(round_to_format(x, fmt), metrics.round_to(x, fmt))


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_round_toward_zero_is_the_largest_value_not_above_brute_force(fmt):
    table = _all_values(fmt)
    x = _edge_values(fmt)
    x = x[torch.isfinite(x)]
    gen = torch.Generator().manual_seed(1)
    x = torch.cat([x, torch.randn(5000, generator=gen, dtype=F64) * torch.exp2(torch.randint(-30, 20, (5000,), generator=gen).to(F64))])
    result = round_to_format(x, fmt, "toward-zero")
    index = torch.searchsorted(table, x.abs(), right=True) - 1  # largest table value <= |x| (saturating at max)
    expected = torch.copysign(table[index], x)
    assert _same(result, expected)
    assert bool((result.abs() <= x.abs()).all())


@FAST
@given(st.lists(st.floats(width=64, allow_nan=False, allow_infinity=False), min_size=1, max_size=64))
def test_round_toward_zero_f32_never_grows_and_leaves_no_f32_value_between(values):
    x = torch.tensor(values, dtype=F64)
    result = round_to_format(x, "f32", "toward-zero")
    assert bool((result.abs() <= x.abs()).all())
    above = torch.nextafter(result.abs().float(), torch.tensor(math.inf)).to(F64)  # next f32 value above
    assert bool(((above > x.abs()) | (result.abs() == ak.format_max("f32"))).all())
    assert bool((torch.signbit(result) == torch.signbit(x)).all())


@pytest.mark.parametrize("mode", ["nearest", "toward-zero"])
def test_round_tf32_is_f16_rounding_at_f32_range(mode):
    # tf32 and f16 both keep 11 significant bits: in a binade where both are normal
    # they round alike, so scaling into [1, 2) carries one to the other.
    gen = torch.Generator().manual_seed(5)
    mantissa = 1 + torch.rand(20000, generator=gen, dtype=F64)
    mantissa = torch.cat([mantissa, 1 + torch.arange(0, 2048, dtype=F64) / 1024 + 2.0 ** -11])  # ties
    exponent = torch.randint(-126, 128, (mantissa.numel(),), generator=gen).to(F64)
    x = mantissa * torch.exp2(exponent) * torch.where(torch.rand(mantissa.numel(), generator=gen) < 0.5, -1.0, 1.0).to(F64)
    ok = x.abs() * 2 <= ak.format_max("tf32")  # where f16's rounding of [1, 2) cannot reach 2 and overflow
    x = x[ok]
    scale = torch.exp2(torch.floor(torch.log2(x.abs())))
    assert _same(round_to_format(x, "tf32", mode), round_to_format(x / scale, "f16", mode) * scale)


def test_round_tf32_subnormals_and_overflow():
    quantum = 2.0 ** -136  # tf32 subnormals: f32's range, 10 stored bits
    x = torch.tensor([0.25, 0.5, 1.5, 2.5, 3.0, 1023.75, 1024.5], dtype=F64) * quantum
    assert round_to_format(x, "tf32").tolist() == [v * quantum for v in [0, 0, 2, 2, 3, 1024, 1024]]
    assert round_to_format(x, "tf32", "toward-zero").tolist() == [v * quantum for v in [0, 0, 1, 2, 3, 1023, 1024]]
    top = ak.format_max("tf32")
    assert top == (2 - 2.0 ** -10) * 2.0 ** 127
    half_gap = 2.0 ** (127 - 11)
    edge = torch.tensor([top, top + half_gap, math.nextafter(top + half_gap, 0), 2.0 ** 128, 1e300], dtype=F64)
    assert round_to_format(edge, "tf32").tolist() == [top, math.inf, top, math.inf, math.inf]
    assert round_to_format(-edge, "tf32", "toward-zero").tolist() == [-top] * 5


@FAST
@given(st.floats(width=32, allow_nan=False, allow_infinity=False),
       st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-2.0 ** 50, max_value=2.0 ** 50),
       st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-2.0 ** 50, max_value=2.0 ** 50),
       st.sampled_from(["f64", "f32", "f16", "bf16"]), st.sampled_from(["nearest", "toward-zero"]))
def test_add_rounded_rounds_the_exact_sum_once(a, u, v, fmt, mode):
    # a running value plus an exact product of two f32 values, as in the kernels
    product = u * v  # exact in float64
    got = ak.add_rounded(torch.tensor([a], dtype=F64), torch.tensor([product], dtype=F64), fmt, mode).item()
    expected = exact_round(Fraction(a) + Fraction(product), fmt, mode)
    assert got == float(expected)


def test_add_rounded_breaks_a_float64_double_rounding():
    # 1 + (2**-24 + 2**-60): float64 drops 2**-60 and leaves a tie that rounds to 1;
    # the exact sum is above the tie, so f32 gives 1 + 2**-23.
    one, product = torch.tensor([1.0], dtype=F64), torch.tensor([2.0 ** -24 + 2.0 ** -60], dtype=F64)
    assert ak.add_rounded(one, product, "f32").item() == 1 + 2.0 ** -23
    assert ak.add_rounded(-one, -product, "f32").item() == -(1 + 2.0 ** -23)
    # 1 - 2**-24 - 2**-60 is just below the f32 value 1 - 2**-24 that float64 rounds it to
    assert ak.add_rounded(one, -product, "f32", "toward-zero").item() == 1 - 2.0 ** -23
    assert ak.add_rounded(one, -product, "f64", "toward-zero").item() == 1 - 2.0 ** -24 - 2.0 ** -53


def test_correct_rounds_the_exact_running_sum_in_a_kernel():
    # 2**36 + 1 = 4097 * 16773121: a product of two f32 values equal to 2**-24 + 2**-60.
    a = torch.tensor([[1.0, 4097 * 2.0 ** -36]], dtype=torch.float32)
    b = torch.tensor([[1.0], [16773121 * 2.0 ** -24]], dtype=torch.float32)
    assert float(a[0, 1]) * float(b[1, 0]) == 2.0 ** -24 + 2.0 ** -60
    assert ak.correct(a, b).item() == 1 + 2.0 ** -23
    # An f64 running sum keeps 1 + 2**-24 (2**-60 is lost), a tie to f32 that rounds to even: 1.
    assert ak.correct_f64(a, b).item() == 1.0


# -- every kernel against the exact oracle -------------------------------------------
def _oracle_cases():
    return {
        "gemm_f32": gemm_case(torch.float32, 3, 41, 4, seed=1),
        "gemm_batched_f16": gemm_case(torch.float16, 2, 37, 3, batch=2, seed=2),
        "gemm_bf16": gemm_case(torch.bfloat16, 2, 70, 2, seed=3),
        "conv2d_fwd_f16": conv_case("fwd", torch.float16, n=1, c=3, k=2, size=(5, 4), kernel=3, pad=1, seed=4),
        "conv1d_fwd_f32_groups": conv_case("fwd", torch.float32, n=2, c=4, k=2, size=(9,), kernel=3, stride=2,
                                           dilation=2, groups=2, seed=5),
        "conv3d_fwd_bf16": conv_case("fwd", torch.bfloat16, n=1, c=2, k=2, size=(4, 3, 4), kernel=(2, 2, 3), seed=6),
        "conv2d_bwd_data_f32": conv_case("bwd_data", torch.float32, n=1, c=2, k=4, size=(6, 5), kernel=(3, 2),
                                         stride=2, pad=1, groups=2, seed=7),
        "conv1d_bwd_data_f16": conv_case("bwd_data", torch.float16, n=2, c=2, k=3, size=(8,), kernel=3,
                                         dilation=2, pad=1, seed=8),
        "conv2d_bwd_weight_f16": conv_case("bwd_weight", torch.float16, n=3, c=2, k=2, size=(4, 5), kernel=(2, 3),
                                           pad=1, seed=9),
        "conv1d_bwd_weight_f32": conv_case("bwd_weight", torch.float32, n=2, c=4, k=2, size=(20,), kernel=2,
                                           stride=2, groups=2, seed=10),
    }


ORACLE_CASES = _oracle_cases()


def _applies(kernel, kind) -> bool:
    if kernel.groups == "taps":
        return kind in ("fwd", "bwd_data")
    if kernel.groups == "samples":
        return kind == "bwd_weight"
    return True


@pytest.mark.parametrize("name", sorted(ak.KERNELS))
def test_every_kernel_matches_the_exact_oracle(name):
    kernel = ak.KERNELS[name]
    checked = 0
    for case_name, case in ORACLE_CASES.items():
        if not _applies(kernel, case[0]):
            with pytest.raises(ValueError, match=str(kernel.groups)):
                call(kernel, case)
            continue
        got = call(kernel, case)
        dtype = case[1][0].dtype
        assert got.dtype == dtype and tuple(got.shape) == tuple(oracle(kernel, case).shape), case_name
        assert _same(got.to(F64), oracle(kernel, case)), (name, case_name)
        checked += 1
    assert checked >= 2


_configs = st.builds(
    EmulatedKernel,
    inputs=st.sampled_from([None, "tf32", "bf16", "f16"]),
    inputs_rounding=st.sampled_from(["nearest", "toward-zero"]),
    acc=st.sampled_from(["f64", "f32", "f16", "bf16"]),
    groups=st.sampled_from([None, 1, 3, 8, 16]),
    inner=st.sampled_from(["f64", "f32"]),
    rounding=st.sampled_from(["nearest", "toward-zero"]),
    ftz=st.booleans(),
    order=st.sampled_from(["natural", "reversed"]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_configs, st.integers(1, 3), st.integers(1, 40), st.integers(1, 3), st.sampled_from(list(DTYPES)),
       st.integers(0, 2 ** 16))
def test_any_configuration_matches_the_exact_oracle_on_gemm(kernel, m, k, n, dtype, seed):
    case = gemm_case(DTYPES[dtype], m, k, n, seed=seed)
    assert _same(call(kernel, case).to(F64), oracle(kernel, case)), kernel


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_configs.filter(lambda kern: kern.groups != "samples"), st.sampled_from(["fwd", "bwd_data"]),
       st.sampled_from(list(DTYPES)), st.integers(0, 2 ** 16))
def test_any_configuration_matches_the_exact_oracle_on_conv(kernel, direction, dtype, seed):
    case = conv_case(direction, DTYPES[dtype], n=1, c=2, k=2, size=(4, 4), kernel=3, pad=1, seed=seed)
    assert _same(call(kernel, case).to(F64), oracle(kernel, case)), kernel


# -- the plain kernels against torch's float64 convolutions ---------------------------
def _geometries():
    return {
        "plain": dict(n=2, c=3, k=4, size=(6, 5, 5), kernel=(3, 2, 3)),
        "stride2": dict(n=2, c=3, k=2, size=(7, 6, 5), kernel=(3, 2, 3), stride=2),
        "pad1": dict(n=1, c=3, k=2, size=(5, 4, 4), kernel=(3, 3, 2), pad=1),
        "dilation2": dict(n=2, c=2, k=3, size=(7, 6, 5), kernel=(3, 2, 2), dilation=2),
        "groups2": dict(n=2, c=4, k=6, size=(5, 5, 4), kernel=(3, 2, 2), groups=2),
        "mixed": dict(n=1, c=4, k=4, size=(8, 7, 6), kernel=(3, 3, 2), stride=2, pad=1, dilation=2, groups=2),
    }


GEOMETRIES = _geometries()
_TORCH = {
    "fwd": {1: F.conv1d, 2: F.conv2d, 3: F.conv3d},
    "bwd_data": {1: torch.nn.grad.conv1d_input, 2: torch.nn.grad.conv2d_input, 3: torch.nn.grad.conv3d_input},
    "bwd_weight": {1: torch.nn.grad.conv1d_weight, 2: torch.nn.grad.conv2d_weight, 3: torch.nn.grad.conv3d_weight},
}


def torch_reference(case, absolute=False) -> torch.Tensor:
    """torch's float64 result on float64 copies (of |inputs| when absolute)."""
    kind, tensors, g = case
    first, second = (t.to(F64).contiguous() for t in tensors)
    if absolute:
        first, second = first.abs(), second.abs()
    if kind == "gemm":
        return first @ second
    geometry = (g["stride"], g["padding"], g["dilation"], g["groups"])
    dims = first.dim() - 2
    if kind == "fwd":
        return _TORCH[kind][dims](first, second, None, *geometry)
    if kind == "bwd_data":
        return _TORCH[kind][dims](list(g["input_shape"]), second, first, *geometry)
    return _TORCH[kind][dims](first, list(g["weight_shape"]), second, *geometry)


def assert_close_to_exact(kernel, case, acc_bits: int, reduction: int):
    """|out - exact| <= R·2**-acc_bits·Σ|products| (accumulation) + one ulp of the output format."""
    got = call(kernel, case)
    _, tensors, _ = case
    assert got.dtype == tensors[0].dtype and got.device == tensors[0].device
    exact = torch_reference(case)
    assert got.shape == exact.shape
    out_fmt = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[got.dtype]
    accumulation = (reduction + 2) * 2.0 ** -acc_bits * torch_reference(case, absolute=True)
    allowed = accumulation + metrics.ulp(exact.abs() + accumulation, out_fmt)
    error = (got.to(F64) - exact).abs()
    assert bool((error <= allowed).all()), f"max error {error.max().item()} (allowed there {allowed[error.argmax()]})"
    return got


def _arrange(case, layout):
    kind, tensors, geometry = case
    if layout == "nhwc":
        tensors = tuple(channels_last(t) for t in tensors)
        if tensors[0].dim() > 3:
            assert not tensors[0].is_contiguous()
    return kind, tensors, geometry


def _normal(shape, dtype, generator):
    return torch.randn(shape, generator=generator, dtype=F64).to(dtype)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_correct_kernels_agree_with_torch_float64_conv(dims, geometry, direction):
    spec = dict(GEOMETRIES[geometry])
    spec["size"], spec["kernel"] = spec["size"][:dims], spec["kernel"][:dims]
    for i, dtype in enumerate(DTYPES.values()):
        layout = ("nchw", "nhwc")[(i + list(GEOMETRIES).index(geometry) + dims) % 2]
        case = _arrange(conv_case(direction, dtype, **spec, seed=i, values=_normal), layout)
        p = conv_params(direction, case[1], case[2])
        reduction = {"fwd": p.c // p.groups, "bwd_data": p.k // p.groups, "bwd_weight": p.n}[direction]
        reduction *= math.prod(p.kernel) if direction != "bwd_weight" else math.prod(p.out_size)
        assert_close_to_exact(ak.correct, case, 24, reduction)
        assert_close_to_exact(ak.correct_f64, case, 53, reduction)


@pytest.mark.parametrize("batch", [None, 3])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_correct_kernels_agree_with_torch_float64_gemm(batch, dtype):
    case = gemm_case(DTYPES[dtype], 5, 300, 4, batch=batch, seed=11, values=_normal)
    got = assert_close_to_exact(ak.correct, case, 24, 300)
    assert got.shape == ((5, 4) if batch is None else (3, 5, 4))
    assert_close_to_exact(ak.correct_f64, case, 53, 300)
    # A transposed (non-contiguous) operand gives the same values.
    kind, (a, b), geometry = case
    b_t = b.transpose(-1, -2).contiguous().transpose(-1, -2)
    assert torch.equal(ak.correct(a, b_t), got)


def test_correct_f64_is_the_exact_result_rounded_once():
    case = gemm_case(torch.float32, 6, 200, 5, seed=12, values=_normal)
    exact = torch_reference(case)
    assert torch.equal(ak.correct_f64(*case[1]).to(F64), metrics.round_to(exact, "f32"))


def test_chunks_with_float64_partials_match_e2egens_accumulate_chunked():
    # lowering.accumulate_chunked adds each chunk's float64 sum straight into the f32
    # running sum: groups=16 with inner="f64". correct_chunked rounds the partial to f32
    # first (inner="f32"), one more rounding, visible on these inputs.
    chunked_f64_partials = EmulatedKernel(groups=16, inner="f64", acc="f32")
    for case in (conv_case("fwd", torch.float32, n=2, c=8, k=3, size=(5, 5), kernel=3, pad=1, seed=13, values=_normal),
                 gemm_case(torch.float32, 4, 100, 6, seed=14, values=_normal)):
        kind, tensors, geometry = case
        first, second = (t.to(F64) for t in tensors)
        if kind == "gemm":
            form = ak.GemmForm(first[None], second[None], lambda out: out[0])
        else:
            form = lower_conv_fwd(first, second, geometry["stride"], geometry["padding"], geometry["dilation"],
                                   geometry["groups"])
        expected = accumulate_chunked(form, 16).to(torch.float32)
        got = call(chunked_f64_partials, case)
        assert torch.equal(got, expected)
        assert not torch.equal(call(ak.correct_chunked, case), expected)
        assert not torch.equal(got, call(ak.correct, case))  # the chunking shows


# -- the arithmetic each instance models, on crafted inputs ---------------------------
def test_rounded_inputs_equal_correct_on_pre_rounded_inputs():
    for name, fmt in (("bf16_inputs", "bf16"), ("tf32_inputs", "tf32"), ("f16_inputs", "f16")):
        kernel = ak.KERNELS[name]
        for case in (gemm_case(torch.float32, 4, 50, 3, seed=15, values=_normal),
                     conv_case("bwd_weight", torch.float32, n=2, c=2, k=3, size=(6, 5), kernel=2, seed=16,
                               values=_normal)):
            kind, tensors, geometry = case
            rounded = tuple(metrics.round_to(t.double(), fmt).float() if fmt != "tf32"
                            else round_to_format(t.double(), "tf32").float() for t in tensors)
            got = call(kernel, case)
            assert torch.equal(got, call(ak.correct, (kind, rounded, geometry))), (name, kind)
            assert not torch.equal(got, call(ak.correct, case)), (name, kind)


@FAST
@given(st.integers(1, 4), st.integers(1, 60), st.integers(1, 4), st.integers(0, 2 ** 16))
def test_bf16_inputs_equal_correct_on_bf16_rounded_inputs(m, k, n, seed):
    _, (a, b), _ = gemm_case(torch.float32, m, k, n, seed=seed, values=_normal)
    pre = lambda t: metrics.round_to(t.double(), "bf16").float()  # noqa: E731
    assert torch.equal(ak.bf16_inputs(a, b), ak.correct(pre(a), pre(b)))
    # inputs already bf16 in storage: rounding them again changes nothing
    assert torch.equal(ak.bf16_inputs(a.bfloat16(), b.bfloat16()), ak.correct(a.bfloat16(), b.bfloat16()))


def test_short_accumulators_lose_terms_an_f32_sum_keeps():
    # 1 + 16 terms of 2**-12: each product is exact, but an f16 running sum (11 bits)
    # rounds 1 + 2**-12 back to 1 every time.
    a = torch.tensor([[1.0] + [2.0 ** -12] * 16])
    b = torch.ones(17, 1)
    assert ak.correct(a, b).item() == 1 + 16 * 2.0 ** -12
    assert ak.f16_acc(a, b).item() == 1.0
    assert ak.f16_acc(a.flip(1), b).item() == 1 + 16 * 2.0 ** -12  # small terms first: they add up
    assert ak.correct_f64(a, b).item() == 1 + 16 * 2.0 ** -12
    a_bf = torch.tensor([[1.0] + [2.0 ** -9] * 16])
    assert ak.bf16_acc(a_bf, b).item() == 1.0
    assert ak.correct(a_bf, b).item() == 1 + 16 * 2.0 ** -9
    # f16 chunks of 32: each chunk summed in f32 first, so the small terms survive as one partial.
    a32 = torch.tensor([[2.0 ** -12] * 32 + [1.0] + [2.0 ** -12] * 31])
    b32 = torch.ones(64, 1)
    assert ak.f16_acc(a32, b32).item() == 2.0 ** -7 + 1  # the first 32 add up exactly; later ones are lost
    # f16 chunks: 2**-7, then the chunk 1 + 31·2**-12 (exact in f32): 1 + 63·2**-12 rounds to 1 + 64·2**-12 in f16
    assert ak.f16_chunks(a32, b32).item() == 1 + 2.0 ** -6
    assert ak.correct(a32, b32).item() == 1 + 63 * 2.0 ** -12


def test_reversed_order_changes_which_terms_survive():
    a = torch.tensor([[1.0, 2.0 ** -24, 2.0 ** -24]])
    b = torch.ones(3, 1)
    assert ak.correct(a, b).item() == 1.0  # 1 + 2**-24 is a tie: even, 1
    assert ak.correct_reversed(a, b).item() == 1 + 2.0 ** -23


def test_toward_zero_never_exceeds_the_exact_result_for_positive_inputs():
    gen = torch.Generator().manual_seed(17)
    a = torch.rand(6, 120, generator=gen) + 0.01
    b = torch.rand(120, 5, generator=gen) + 0.01
    got = ak.toward_zero(a, b).double()
    # math.fsum is the exact sum rounded to nearest once (products of f32 are exact in
    # float64); rounding is monotonic, so an f32 value <= the exact sum is <= it too.
    exact = torch.tensor([[math.fsum(x * y for x, y in zip(a[i].double().tolist(), b[:, j].double().tolist()))
                           for j in range(5)] for i in range(6)], dtype=F64)
    assert bool((got <= exact).all())
    assert bool((got <= ak.correct(a, b).double()).all())
    assert bool((got < exact).any())
    assert bool(((-ak.toward_zero(-a, b).double()) == got).all())  # symmetric: magnitudes shrink for negatives too


def test_flush_subnormals_zeroes_subnormal_products_and_inputs():
    tiny = torch.tensor([[2.0 ** -70]])
    assert ak.correct(tiny, tiny).item() == 2.0 ** -140  # an f32 subnormal output
    assert ak.flush_subnormals(tiny, tiny).item() == 0.0
    subnormal = torch.tensor([[2.0 ** -130]])  # an f32 subnormal input
    big = torch.tensor([[2.0 ** 10]])
    assert ak.correct(subnormal, big).item() == 2.0 ** -120
    assert ak.flush_subnormals(subnormal, big).item() == 0.0
    half = torch.tensor([[2.0 ** -20]], dtype=torch.float16)  # f16 subnormal input
    assert ak.correct(half, torch.tensor([[2.0 ** 8]], dtype=torch.float16)).item() == 2.0 ** -12
    assert ak.flush_subnormals(half, torch.tensor([[2.0 ** 8]], dtype=torch.float16)).item() == 0.0
    normal = torch.tensor([[2.0 ** -10]], dtype=torch.float16)
    assert ak.flush_subnormals(normal, normal).item() == 0.0  # 2**-20: subnormal as an f16 output


def test_f16_per_tap_is_a_per_tap_f32_partial_then_an_f16_sum_by_hand():
    gen = torch.Generator().manual_seed(18)
    x = (torch.randn(1, 3, 4, 4, generator=gen) * 3).half()
    w = torch.randn(2, 3, 3, 3, generator=gen).half()
    got = ak.f16_per_tap(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
    assert got.shape == (1, 2, 2, 2) and got.dtype == torch.float16
    xf, wf = x.double(), w.double()
    for k in range(2):
        for i in range(2):
            for j in range(2):
                running = 0.0
                for r in range(3):
                    for s in range(3):
                        partial = sum(Fraction(xf[0, c, i + r, j + s].item()) * Fraction(wf[k, c, r, s].item())
                                      for c in range(3))
                        partial = float(exact_round(partial, "f32"))
                        running = float(exact_round(Fraction(running) + Fraction(partial), "f16"))
                assert got[0, k, i, j].item() == running, (k, i, j)
    sequential = ak.f16_acc(x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
    assert not torch.equal(got, sequential)  # the grouping is visible on this example


def test_f16_per_sample_sums_each_sample_first():
    # dw = Σ over (n, positions): sample 0 brings 1 then many small terms, sample 1 the same.
    x = torch.zeros(2, 1, 5)
    x[:, 0, 0] = 1.0
    x[:, 0, 1:] = 2.0 ** -12
    dy = torch.ones(2, 1, 5)
    geometry = dict(weight_shape=(1, 1, 1), stride=(1,), padding=(0,), dilation=(1,), groups=1)
    assert ak.f16_per_sample(x, dy, **geometry).item() == 2 + 2.0 ** -9  # each sample: 1 + 4·2**-12 exact in f32
    assert ak.f16_acc(x, dy, **geometry).item() == 2.0


def test_describe_and_validation():
    assert "f16" in ak.f16_per_tap.describe() and "tap" in ak.f16_per_tap.describe()
    assert ak.correct.describe() != ak.correct_reversed.describe()
    assert len({k.describe() for k in ak.KERNELS.values()}) == len(ak.KERNELS)
    for bad in (dict(acc="f8"), dict(groups=0), dict(groups="rows"), dict(inputs="f32"), dict(rounding="up"),
                dict(order="random"), dict(inner="f16")):
        with pytest.raises(ValueError):
            EmulatedKernel(**bad)
    with pytest.raises(TypeError):
        ak.correct(torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float16))


# -- through e2egen's runner: the contract holds -------------------------------------
_RUNNER_PROBLEMS = [
    ("conv1d", "bwd_data", {"n": 2, "c": 4, "k": 2, "w": 9, "kernel": 3, "stride": 2, "pad": 1, "groups": 2}, "nhwc"),
    ("conv2d", "fwd", {"n": 1, "c": 2, "k": 4, "hw": [6, 5], "kernel": [3, 2], "dilation": [2, 1], "pad": 1}, "nhwc"),
    ("conv3d", "bwd_weight", {"n": 1, "c": 2, "k": 2, "dhw": 4, "kernel": 2, "stride": 2}, "nchw"),
    ("gemm", "fwd", {"m": 4, "n": 5, "k": 6, "batch": 2}, "nt"),
]


@pytest.mark.parametrize("name,op,direction,params,layout", [
    (name, *problem) for name in ("correct", "f16_per_tap", "f16_per_sample", "tf32_inputs") for problem in _RUNNER_PROBLEMS
    if _applies(ak.KERNELS[name], "gemm" if problem[0] == "gemm" else problem[1])])
def test_runs_through_the_runner(name, op, direction, params, layout):
    dtype = "f32" if name == "tf32_inputs" else "f16"  # tf32 cases need a GPU
    problem = make_problem(op, direction, dtype, layout, params, (-1.0, 1.0), 3)
    result = run(problem, impl=f"{ak.__name__}:{name}", device="cpu")
    assert result.out.shape == problem.output_shape
    torch.testing.assert_close(result.out.double(), result.ref.double(), rtol=2e-2, atol=2e-2)
