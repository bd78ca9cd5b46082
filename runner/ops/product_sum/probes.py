"""Probes: crafted product sums whose exact result differs under each
hypothesis about the kernel's arithmetic (in the style of Fasi, Higham,
Mikaitis & Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS
2021). Every value below is a power of two or a short multiple of one, so
each hypothesis has one exact expected output and the result is a finding,
not a fit.

inputs      one product v·2^j per element, v with every bit of the input
            format: the output is v·2^j if the kernel uses v as given, or
            round(v)·2^j for the format and rounding it narrows v to. tf32 and
            f16 keep the same 11 bits: a factor 2^16 (beyond f16's largest
            value) tells them apart, and after an f16 finding the other probes
            keep their factors within f16's range.
acc_bits    +2^E, 2^(E-g) and -2^E in one element (far apart in the
            reduction, in two placements): the small term survives iff the
            partial sums that meet it keep more than g bits, so the smallest
            g that loses it is the accumulator's significand width.
groups      when that width is narrower than f32: +2^E at i, 2^(E-g) at m,
            -2^E at j for many (i, m, j), g just lost: the small term
            survives iff i and j fall into one partial kept wider. Each
            grouping (none, per tap, per sample, chunks of k, in order or
            reversed) predicts every outcome exactly; the probe keeps the one
            that predicts all of them.
rounding    2^E ± f·ulp for f in {1/4, 1/2, 3/4}: each rounding mode maps
            these to known neighbours.
subnormals  a subnormal input times a large power of two (kept: a normal
            result; flushed: 0), and two normal factors whose product is
            subnormal in the output format.
specials    NaN·1, inf·1, inf·0, inf + (-inf).
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, Sequence

import torch

from e2egen import metrics
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic
from e2egen.runner.arithmetic.probing import ROUNDING_MODES, neighbours, round_bits
from e2egen.runner.dtypes import operand_formats
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.ops.product_sum.conv import ConvParams
from e2egen.runner.ops.product_sum.experiments import Experiment, IndexStructure, observe
from e2egen.runner.problem import Problem

# Any change here that can alter what a probe finds bumps runner.arithmetic.model.PROBES_REVISION.
F32_BITS = FORMAT_BITS["f32"]
Grouping = tuple[str, int, bool, Callable[[int], int]]  # (kind, size, reversed, group of r)


class ProbeContext:
    """The problem, the kernel and the places experiments may use."""

    def __init__(self, problem: Problem, kernel: Kernel, device: torch.device, label: str):
        self.problem, self.kernel, self.device, self.label = problem, kernel, device, label
        self.structure = IndexStructure(problem)
        self.positions = self.structure.valid_positions()
        # a pair of formats (fp8 with bf8): values must fit both, so the narrower exponent range and the
        # fewer significand bits
        formats = [metrics.get_format(fmt) for fmt in operand_formats(problem.dtype)]
        self.in_fmt = min(formats, key=lambda fmt: fmt.emax)
        self.out_fmt = metrics.get_format(problem.out_dtype)
        self.in_bits = min(fmt.mantissa_bits for fmt in formats) + 1
        self.out_bits = self.out_fmt.mantissa_bits + 1
        self.rng = random.Random(problem.seed)
        self.calls = 0
        self.unexplained: list[str] = []  # outcomes no hypothesis of any probe explains: not rounding, a bug

    def run(self, experiments: Sequence[Experiment]) -> list[float | None]:
        self.calls += 1
        return observe(self.problem, self.kernel, self.device, experiments, label=self.label,
                       structure=self.structure, seed=self.problem.seed + self.calls)

    def pick(self, count: int) -> list[int]:
        return self.rng.sample(self.positions, min(count, len(self.positions)))

    def power(self, exponent: int) -> tuple[float, float]:
        """2^exponent as a product of two normal input values."""
        half = exponent // 2
        return math.ldexp(1.0, half), math.ldexp(1.0, exponent - half)


# -- inputs -------------------------------------------------------------------------------------
def probe_inputs(ctx: ProbeContext) -> tuple[str, str, list[str]]:
    """(format, rounding, notes): what the products see of inputs with every bit set."""
    experiments = []
    for index in range(24):
        significand = 1 + ctx.rng.getrandbits(ctx.in_bits - 1) / 2 ** (ctx.in_bits - 1)
        value = math.copysign(significand, 1 if index % 3 else -1)
        scale = 2.0 ** (index % 4)
        r = ctx.pick(1)[0]
        term = (r, value, scale) if index % 2 == 0 else (r, scale, value)
        experiments.append(Experiment((term,), (value, scale)))
    seen = ctx.run(experiments)
    pairs = [(exp.tag, out) for exp, out in zip(experiments, seen) if out is not None]
    if not pairs:
        return "exact", "nearest", ["inputs: no element could hold the probe"]
    if all(out == value * scale for (value, scale), out in pairs):
        return "exact", "nearest", []
    candidates = [(fmt, mode) for fmt in ("tf32", "bf16", "f16") for mode in ("nearest", "toward-zero")
                  if FORMAT_BITS[fmt] < ctx.in_bits]
    narrowed: list[bool] = []  # measured once, when a candidate needs it
    for fmt, mode in candidates:
        bits = FORMAT_BITS[fmt]
        rounding = "nearest-even" if mode == "nearest" else "toward-zero"
        if all(out == round_bits(value, bits, rounding) * scale for (value, scale), out in pairs) and \
                _range_fits(ctx, fmt, narrowed):
            if _products_exact(ctx, bits):
                return fmt, mode, []
            return "exact", "nearest", [f"single products come back rounded to {bits} bits, but products of two "
                                        f"{bits}-bit inputs are exact: the narrowing is the accumulator's"]
    wrong = [((v, s), o) for (v, s), o in pairs if o != v * s]
    shown = ", ".join(f"{v * s!r} -> {o!r}" for (v, s), o in wrong[:3])
    ctx.unexplained.append(f"single products v·2^j came back as no input rounding explains ({shown})")
    return "exact", "nearest", []


def _range_fits(ctx: ProbeContext, fmt: str, narrowed: list[bool]) -> bool:
    """Does the kernel's input range agree with `fmt`'s? tf32 and f16 keep the same 11 bits, so the significands
    cannot tell them apart: a factor 2^16, beyond f16's largest value, comes back as itself unless the inputs are
    narrowed to f16 (inf, or 65504 rounding toward zero)."""
    f16 = metrics.get_format("f16")
    if ctx.in_fmt.emax <= f16.emax:
        return True  # the storage format is no wider than f16: nothing to tell apart
    if not narrowed:
        big, partner = math.ldexp(1.0, f16.emax + 1), 2.0 ** -4
        seen = ctx.run([Experiment(((ctx.pick(1)[0], big, partner),), big * partner)])
        narrowed.append(seen[0] is not None and seen[0] != big * partner)
    return narrowed[0] == (fmt == "f16")


def _products_exact(ctx: ProbeContext, bits: int) -> bool:
    """Do products of two `bits`-bit values come back exact (inputs narrowed) or rounded (the accumulator)?"""
    if 2 * bits > ctx.out_bits:
        return True  # the output cannot show it; the input finding stands
    experiments = []
    for _ in range(8):
        a = 1 + ctx.rng.getrandbits(bits - 1) / 2 ** (bits - 1) + 2.0 ** -(bits - 1)
        a = round_bits(a, bits)
        b = round_bits(1 + ctx.rng.getrandbits(bits - 1) / 2 ** (bits - 1), bits)
        experiments.append(Experiment(((ctx.pick(1)[0], a, b),), a * b))
    seen = ctx.run(experiments)
    return all(out == exp.tag for exp, out in zip(experiments, seen) if out is not None)


# -- accumulator width --------------------------------------------------------------------------
def _gap_range(ctx: ProbeContext) -> tuple[int, int]:
    """(E, largest gap g): 1.5·2^E stays far from overflow in f16 and 2^(E-g) normal in the output format."""
    big = min(13, ctx.out_fmt.emax - 2, 2 * ctx.in_fmt.emax - 2)  # 1.5·2^E is 3·2^(E-1), a product of two inputs
    smallest = max(ctx.out_fmt.emin, 2 * ctx.in_fmt.emin)
    return big, min(60, big - smallest)


def _cancelling(ctx: ProbeContext, big: int, gap: int, first: int, small: int, last: int, tag: Any) -> Experiment:
    """+1.5·2^E at `first`, 2^(E-g) at `small`, -1.5·2^E at `last`. 1.5·2^E keeps the same gap to its
    neighbours above and below (a power of two would not), so 2^(E-g) is lost exactly when g >= the bits."""
    a1, b1 = ctx.power(big - 1)
    a2, b2 = ctx.power(big - gap)
    return Experiment(((first, 3 * a1, b1), (small, a2, b2), (last, -3 * a1, b1)), tag)


def probe_acc_bits(ctx: ProbeContext) -> tuple[int, bool]:
    """(bits, exact): the smallest gap g at which 2^(E-g) is lost next to 2^E."""
    if len(ctx.positions) < 3:
        return 53, False  # nothing is accumulated
    big, widest = _gap_range(ctx)
    count = len(ctx.positions)
    first, last = ctx.positions[0], ctx.positions[-1]
    experiments = []
    for gap in range(2, widest + 1):
        for small in (ctx.positions[count // 2], ctx.positions[count // 3]):
            experiments.append(_cancelling(ctx, big, gap, first, small, last, gap))
    seen = ctx.run(experiments)
    lost = _lost_gaps(ctx, big, experiments, seen, "+1.5·2^E, 2^(E-g), -1.5·2^E")
    if not lost:
        return widest + 1, False
    return min(lost), True


def _lost_gaps(ctx: ProbeContext, big: int, experiments: Sequence[Experiment], seen: Sequence[float | None],
               what: str) -> list[int]:
    """The gaps g whose small term was lost. An outcome other than the small term itself, 0, or (directed
    rounding) one ulp of 1.5·2^E at some width is explained by no accumulator: recorded as unexplained."""
    lost, odd = [], []
    for exp, out in zip(experiments, seen):
        if out is None:
            continue
        small = math.ldexp(1.0, big - exp.tag)
        if out == small:
            continue
        magnitude = abs(out)
        directed = magnitude > small and magnitude <= math.ldexp(1.0, big - 4) and math.frexp(magnitude)[0] == 0.5
        if out == 0 or directed:
            lost.append(exp.tag)
        else:
            odd.append(f"g={exp.tag}: expected {small!r} or 0, got {out!r}")
    if odd:
        ctx.unexplained.append(f"cancelling sums ({what}) came back wrong: " + "; ".join(odd[:3]))
    return lost


# -- structure ----------------------------------------------------------------------------------
def grouping_hypotheses(problem: Problem, reduction: int) -> list[Grouping]:
    """(kind, size, reversed, group of r): the cuts a kernel is likely to make, simplest first (each is tried
    with stored and with running partials)."""
    hypotheses: list[Grouping] = [("none", 0, False, lambda r: r)]
    params = problem.params
    if isinstance(params, ConvParams):
        window = math.prod(params.kernel)
        if problem.direction != "bwd_weight" and window > 1:
            hypotheses += [("taps", window, rev, (lambda r, w=window: r % w)) for rev in (False, True)]
        if problem.direction == "bwd_weight" and params.n > 1:
            per_sample = reduction // params.n
            hypotheses += [("samples", per_sample, rev, (lambda r, s=per_sample: r // s)) for rev in (False, True)]
    sizes = {2 ** i for i in range(1, 16)} | {reduction // d for d in (2, 3, 4, 8) if reduction // d > 1}
    if isinstance(params, ConvParams):
        window = math.prod(params.kernel)
        sizes |= {window * 2 ** i for i in range(0, 10)}
    for size in sorted(s for s in sizes if 1 < s < reduction):
        hypotheses += [("chunks", size, rev, (lambda r, s=size: r // s)) for rev in (False, True)]
    return hypotheses


def simulate_groups(terms: Sequence[tuple[int, float]], group: Callable[[int], int], reverse: bool, partials: str,
                    inner_bits: int, acc_bits: int, out_bits: int) -> float:
    """The result of a kernel that sums each group's products in `inner_bits`, then adds the group partials
    in order to a running sum kept in `acc_bits`: each partial rounded to acc_bits first ("stored", as
    col2im's columns are) or added at its own width and the sum rounded ("running")."""
    sums: dict[int, float] = {}
    for r, product in sorted(terms, key=lambda t: t[0]):
        key = group(r)
        sums[key] = round_bits(sums.get(key, 0.0) + product, inner_bits)
    running = 0.0
    for key in sorted(sums, reverse=reverse):
        part = round_bits(sums[key], acc_bits) if partials == "stored" else sums[key]
        running = round_bits(running + part, acc_bits)
    return round_bits(running, out_bits)


def probe_groups(ctx: ProbeContext, acc_bits: int) -> tuple[str, int, bool, str, int, list[str]]:
    """(groups, group_size, reversed, partials, inner_bits, notes) for a kernel whose partial sums are narrower than f32."""
    reduction = ctx.structure.reduction
    valid = set(ctx.positions)
    big, widest = _gap_range(ctx)
    gap = acc_bits
    hypotheses = grouping_hypotheses(ctx.problem, reduction)
    triples = set()
    for kind, size, _, _ in hypotheses:
        if kind == "none":
            continue
        if kind == "taps":
            triples |= {(0, 1, size), (0, size + 1, 2 * size), (1, 2, size + 1), (0, size - 1, size)}
        else:
            triples |= {(size - 2, size - 1, size), (0, size // 2, size - 1), (size - 1, size, size + 1),
                        (0, size, 2 * size - 1)}
    ordered = sorted(valid)
    for _ in range(32):
        triples.add(tuple(sorted(ctx.rng.sample(ordered, 3))))
    triples = sorted(t for t in triples if len(set(t)) == 3 and all(r in valid for r in t))
    experiments = [_cancelling(ctx, big, gap, i, m, j, (i, m, j)) for i, m, j in triples]
    seen = ctx.run(experiments)
    observed = [(exp, out) for exp, out in zip(experiments, seen) if out is not None]
    inner = F32_BITS
    for kind, size, reverse, group in hypotheses:
        for partials in ("stored", "running"):
            if all(_same(out, simulate_groups([(r, a * b) for r, a, b in exp.terms], group, reverse, partials,
                                              inner if kind != "none" else acc_bits, acc_bits, ctx.out_bits))
                   for exp, out in observed):
                if kind == "none":
                    return "none", 0, False, "stored", 0, []
                inner_bits = _inner_bits(ctx, group, big, widest, acc_bits)
                return kind, (size if kind == "chunks" else 0), reverse, partials, inner_bits, []
    return "none", 0, False, "stored", 0, [f"structure: no modelled grouping (none, per tap, per sample, chunks) reproduces the "
                          f"{len(observed)} cancellation experiments; the bound assumes {acc_bits}-bit partials throughout"]


def _inner_bits(ctx: ProbeContext, group: Callable[[int], int], big: int, widest: int, acc_bits: int) -> int:
    """Significand bits inside one group: 2^(E-g) between +2^E and -2^E of the same group."""
    by_group: dict[int, list[int]] = {}
    for r in ctx.positions:
        by_group.setdefault(group(r), []).append(r)
    members = max(by_group.values(), key=len)
    if len(members) < 3:
        return F32_BITS
    i, m, j = members[0], members[len(members) // 2], members[-1]
    experiments = [_cancelling(ctx, big, gap, i, m, j, gap) for gap in range(acc_bits, widest + 1)]
    seen = ctx.run(experiments)
    lost = _lost_gaps(ctx, big, experiments, seen, "within one partial")
    return min(lost) if lost else widest + 1


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


# -- rounding -----------------------------------------------------------------------------------
def probe_rounding(ctx: ProbeContext, acc_bits: int) -> tuple[str, list[str]]:
    bits = min(ctx.out_bits, acc_bits)
    first, last = ctx.positions[0], ctx.positions[-1]
    experiments = []
    for sign in (1.0, -1.0):
        for below in (False, True):
            for quarters in (1, 2, 3):
                ulp_exponent = -bits if below else 1 - bits  # the gap under 2^0 is half the one above it
                offset = quarters * math.ldexp(1.0, ulp_exponent - 2) * (-1 if below else 1)
                exact = sign * (1.0 + offset)
                small_a, small_b = ctx.power(ulp_exponent - 2)  # two factors: each stays in the inputs' range
                a = (sign * 3.0 if quarters == 3 else sign) * small_a
                b = small_b * (-1 if below else 1) * (1 if quarters == 3 else quarters)
                terms = ((first, sign, 1.0), (last, a, b)) if len(ctx.positions) > 1 else ((first, exact, 1.0),)
                experiments.append(Experiment(terms, exact))
    seen = ctx.run(experiments)
    observed = [(exp.tag, out) for exp, out in zip(experiments, seen) if out is not None]
    for mode in ROUNDING_MODES:
        if all(out == round_bits(exact, bits, mode) for exact, out in observed):
            return mode, []
    if all(out in neighbours(exact, bits) for exact, out in observed):
        return "faithful", []
    shown = ", ".join(f"{exact!r} -> {out!r}" for exact, out in observed if out not in neighbours(exact, bits))
    ctx.unexplained.append(f"sums 1 ± f·ulp came back as neither neighbour ({shown[:200]})")
    return "faithful", []


# -- subnormals and special values ------------------------------------------------------------------
def probe_subnormals(ctx: ProbeContext) -> tuple[str, str]:
    r = ctx.positions[len(ctx.positions) // 2]
    tiny_in = math.ldexp(1.0, ctx.in_fmt.emin - 2)
    lift = math.ldexp(1.0, min(-ctx.in_fmt.emin, ctx.in_fmt.emax))
    tiny_out_exponent = ctx.out_fmt.emin - 2
    a, b = ctx.power(tiny_out_exponent)
    experiments = [Experiment(((r, tiny_in, lift),), "in"), Experiment(((r, -lift, tiny_in),), "in")]
    if min(math.frexp(a)[1], math.frexp(b)[1]) - 1 >= ctx.in_fmt.emin:  # else no product of normal inputs is that small
        experiments += [Experiment(((r, a, b),), "out"), Experiment(((r, -a, b),), "out")]
    seen = ctx.run(experiments)
    flushed = {"in": False, "out": False}
    for exp, out in zip(experiments, seen):
        (r_, a_, b_), = exp.terms
        if out is None or out == a_ * b_:
            continue
        if out == 0.0:
            flushed[exp.tag] = True
        else:
            ctx.unexplained.append(f"a subnormal product came back as {out!r} (exact {a_ * b_!r}, flushed 0)")
    return ("flushed" if flushed["in"] else "kept"), ("flushed" if flushed["out"] else "kept")


def probe_specials(ctx: ProbeContext) -> str:
    first, last = ctx.positions[0], ctx.positions[-1]
    inf, nan = math.inf, math.nan
    cases = [("nan*1", ((first, nan, 1.0),), nan), ("inf*1", ((first, inf, 1.0),), inf),
             ("-inf*1", ((first, 1.0, -inf),), -inf), ("inf*0", ((first, inf, 0.0),), nan)]
    if first != last:
        cases.append(("inf+(-inf)", ((first, inf, 1.0), (last, -inf, 1.0)), nan))
    experiments = [Experiment(terms, (name, expected)) for name, terms, expected in cases]
    seen = ctx.run(experiments)
    wrong = [f"{name} gave {out!r}" for (name, expected), out in ((e.tag, o) for e, o in zip(experiments, seen))
             if out is not None and not _same(out, expected)]
    return "ieee" if not wrong else "; ".join(wrong)


# -- all of them ------------------------------------------------------------------------------------
def probe_arithmetic(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    """Every probe on one problem of a cell. Raises the runner's KernelFailure / Skip if the kernel fails."""
    ctx = ProbeContext(problem, kernel, device, label)
    inputs, inputs_rounding, notes = probe_inputs(ctx)
    if inputs == "f16" and ctx.in_fmt.emax > metrics.get_format("f16").emax:
        ctx.in_fmt = metrics.get_format("f16")  # the products see f16's range: the other probes' factors stay in it
    acc_bits, acc_exact = probe_acc_bits(ctx)
    groups, group_size, reverse, partials, inner_bits = "none", 0, False, "stored", 0
    if acc_exact and acc_bits < F32_BITS:
        groups, group_size, reverse, partials, inner_bits, more = probe_groups(ctx, acc_bits)
        notes += more
    rounding, more = probe_rounding(ctx, acc_bits if acc_exact else 53)
    notes += more
    subnormal_inputs, subnormal_outputs = probe_subnormals(ctx)
    specials = probe_specials(ctx)
    return Arithmetic(inputs=inputs, inputs_rounding=inputs_rounding, acc_bits=acc_bits, acc_bits_exact=acc_exact,
                      groups=groups, group_size=group_size, reversed=reverse, partials=partials, inner_bits=inner_bits, rounding=rounding,
                      subnormal_inputs=subnormal_inputs, subnormal_outputs=subnormal_outputs, special_values=specials,
                      probed_with=problem.describe(), notes=tuple(notes), unexplained=tuple(ctx.unexplained))
