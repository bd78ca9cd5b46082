"""Probes of an attention kernel's arithmetic: the P·V accumulator's width, the row sum l's (the narrower
of the two is acc_bits), and the format P is rounded to before P·V. They run on the case's own geometry (sizes, masks, scale, path options; the long-row row sum apart),
because attention kernels pick their algorithm by shape (torch's SDPA keeps P in f32 on some shapes
and rounds it on others). Each runs the kernel on crafted inputs whose exact output every hypothesis
predicts; the findings fill the same `Arithmetic` as a product sum's (acc_bits: the P·V accumulator;
intermediate: what P is rounded to before P·V, "exact" when it stays in the compute format). Q, K and V
reach the products as given (inputs "exact").

Every probe uses head 0 (and so kv head 0) of the batch whose rows allow the most keys. Keys it does not use get a score of about -1000
(feature 0): exp(-1000 - m) is 0 in every format, so only the chosen keys count and the row sum is
exact. A score-scale of 1 and a bias of 0 are passed where the case has them.

Accumulator: in the row that allows the most keys, three or four spread keys score 0 (P = 1, l = 3 or
4) and V carries +1.5·2^E at the first, 2^(E-g) in the middle, -1.5·2^E at the last (and 0 at the
fourth), one column per gap g: the output is 2^(E-g)/l, or 0 where an accumulator of fewer than g bits
lost the small term.

Row sum: _Probe.row_sum (one key of P = 1 first, every other key 2^-e; through lse when the case returns it).
Without lse, o cannot show an l rounded once per tile on the case's own rows, so _Probe.long_row_sum runs on
long_row_problem: the case's heads and options on 8,192 unmasked keys, the only probe off the case's geometry.

P's format: rows (of every head) that allow keys a and b score 0 on a and t_i < 0 on b; V = (-c, 1) on
(a, b) in column i, with c = R_F(exp t_i) for a format F the input format holds. The output's diagonal is
(P̂_i - c)/l: 0 exactly when P̂_i = R_F(exp t_i). Each hypothesis (P kept in f32, or rounded to
f16/bf16 to nearest or toward zero, before or after normalising) predicts every row; the one that
predicts all of them is the finding (where several do, the input format's, else the coarsest), and a
note says so when none does.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from e2egen import metrics
from e2egen.runner.arithmetic.model import FORMAT_BITS, Arithmetic
from e2egen.runner.arithmetic.probing import LONG_ROW, round_bits, small_weight_exponent
from e2egen.runner.dtypes import FLOAT8
from e2egen.runner.errors import KernelFailure, Skip
from e2egen.runner.kernels import call_on_values
from e2egen.runner.ops.attention.attention_math import allowed_keys
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.problem import Problem

INACTIVE_SCORE = -1000.0
ACC_EXPONENT = 15  # 1.5·2^15 = 49152 fits f16
GAPS = tuple(range(6, 28))  # 2^(15-27)/4 = 2^-14: f16's smallest normal, so no flushing hides a result
P_FORMATS = ("f16", "bf16")
P_ROWS = 12
SCORE_LEVEL = 4000.0  # the scores' format probe's scores: an f16 ulp of 2 there, bf16's 16, f32's 2.4e-4
SCORE_STEPS = tuple(i / 8 for i in range(3, 16, 2))  # s_b - s_a tried until every rounding of the scores moves o
SCORE_ULPS = 8  # ... this many of its ulps or more; a reading within a quarter of that matches
F32_SCORE_SLACK = 0.25 * 16 * 2.0 ** -24 * 4096  # o's move when f32 scores near SCORE_LEVEL are 16 ulps off
TIE_MARGIN = 2.0 ** -6  # of the tested format's ulp: a fast f32 exp (torch CPU: about 2^-20) cannot cross a tie


def probe_attention(problem: Problem, kernel: Kernel, device: torch.device, label: str) -> Arithmetic:
    if problem.input_format in FLOAT8:  # the lookup then assumes f32 sums and P in the input format
        raise Skip(f"{problem.input_format} cannot hold the probes' values (V's 1.5·2^15, scores of -1000, "
                   "P's formats f16 and bf16)")
    probe = _Probe(problem, kernel, device, label)
    acc_bits, acc_exact, notes = probe.accumulator()
    row_sum_bits, row_sum_notes = probe.row_sum()
    if row_sum_bits is None and not probe.returns_lse:
        row_sum_bits, row_sum_notes = _long_row_sum(problem, kernel, device, label, row_sum_notes)
    if row_sum_bits is not None and row_sum_bits < acc_bits:  # one acc_bits: the narrower sum's
        acc_bits, acc_exact = row_sum_bits, True
    p_format, p_rounding, more = probe.p_format()
    scores, score_notes = probe.scores_format()
    return Arithmetic(intermediate=p_format, intermediate_rounding=p_rounding, acc_bits=acc_bits, acc_bits_exact=acc_exact,
                      compute=scores, probed_with=problem.describe(), notes=tuple(notes + row_sum_notes + more + score_notes))


def long_row_problem(problem: Problem) -> Problem:
    """The case's heads, head sizes, scale and score tensors on one batch of at most 16 query rows and LONG_ROW keys,
    none masked: the rows `_Probe.long_row_sum` needs."""
    p = problem.params
    params = replace(p, batch=1, seq_q=min(p.seq_q, 16), seq_k=LONG_ROW, causal=False, window=None, kv_lengths=None,
                     prefix_offset=None, look_back=None)
    return replace(problem, params=params)


def _long_row_sum(problem: Problem, kernel: Kernel, device: torch.device, label: str,
                  notes: list[str]) -> tuple[int | None, list[str]]:
    """long_row_sum on long_row_problem: a kernel that declines those rows keeps the short rows' reading."""
    if problem.params.head_dim_qk < 2:
        return None, notes
    try:
        bits, more = _Probe(long_row_problem(problem), kernel, device, label).long_row_sum()
    except (Skip, KernelFailure) as declined:
        return None, [*notes, f"row sum over {LONG_ROW} keys not probed: {declined}"]
    return bits, [*notes, *more]


def _round(value: float, fmt: str, toward_zero: bool = False) -> float:
    return round_bits(value, FORMAT_BITS[fmt], "toward-zero" if toward_zero else "nearest-even")


class _Probe:
    def __init__(self, problem: Problem, kernel: Kernel, device: torch.device, label: str):
        self.problem, self.kernel, self.device, self.label = problem, kernel, device, label
        self.p = problem.params
        mask = allowed_keys(self.p, torch.device("cpu"))
        # experiments run in head 0 of the batch whose rows allow the most keys
        self.batch = int(mask.sum(dim=(1, 2, 3)).argmax()) if mask is not None else 0
        self.allowed = (mask[self.batch, 0] if mask is not None else torch.ones(self.p.seq_q, self.p.seq_k, dtype=torch.bool))
        self.in_fmt = problem.input_format
        self.sigma = self.p.softmax_scale

    def exact_input(self, value: float) -> float:
        return _round(value, self.in_fmt) if self.in_fmt != "f32" else float(torch.tensor(value).float())

    def tensors(self, active: list[int]) -> dict[str, torch.Tensor]:
        """q, k, v of zeros except: q feature 0 = 1 everywhere, k feature 0 ≈ -1000/σ on inactive keys."""
        p = self.p
        q = torch.zeros(p.batch, p.heads_q, p.seq_q, p.head_dim_qk, dtype=torch.float64)
        k = torch.zeros(p.batch, p.heads_kv, p.seq_k, p.head_dim_qk, dtype=torch.float64)
        q[..., 0] = 1.0
        k[..., 0] = self.exact_input(INACTIVE_SCORE / self.sigma)
        k[..., active, 0] = 0.0
        v = torch.zeros(p.batch, p.heads_kv, p.seq_k, p.head_dim_v, dtype=torch.float64)
        shape = (p.batch, p.heads_q, p.seq_q, p.seq_k)
        extra = {**({"score_scale": torch.ones(shape, dtype=torch.float64)} if p.score_scale else {}),
                 **({"score_bias": torch.zeros(shape, dtype=torch.float64)} if p.score_bias else {})}
        return {"q": q, "k": k, "v": v, **extra}

    def run(self, values: dict[str, torch.Tensor]) -> torch.Tensor:
        """The kernel's o for the probed batch, every head (float64, CPU), on logical float64 inputs exact in the input format."""
        out = call_on_values(self.problem, self.kernel, values, self.device, label=self.label)
        return out[self.problem.primary_output][self.batch]

    # -- the P·V accumulator ----------------------------------------------------------------------
    def accumulator(self) -> tuple[int, bool, list[str]]:
        counts = self.allowed.sum(dim=1)
        row = int(counts.argmax())
        keys = self.allowed[row].nonzero().flatten().tolist()
        if len(keys) < 3:
            return 24, False, ["P·V accumulator not probed: no row allows 3 keys; f32 assumed"]
        first, small, last = keys[0], keys[len(keys) // 2], keys[-1]
        if len(keys) >= 4:  # a fourth active key with v = 0 makes the row sum 4, a power of two
            zero = keys[len(keys) // 4] if keys[len(keys) // 4] not in (first, small) else keys[1 if small != keys[1] else 2]
            active = [first, small, zero, last]
        else:
            active = [first, small, last]
        big = 1.5 * 2.0 ** ACC_EXPONENT
        kept: dict[int, bool] = {}
        columns = self.p.head_dim_v
        for start in range(0, len(GAPS), columns):
            gaps = GAPS[start:start + columns]
            values = self.tensors(active)
            for column, gap in enumerate(gaps):
                v = values["v"][self.batch, 0]
                v[first, column], v[small, column], v[last, column] = big, 2.0 ** (ACC_EXPONENT - gap), -big
            out = self.run(values)[0, row]
            for column, gap in enumerate(gaps):
                expected, got = 2.0 ** (ACC_EXPONENT - gap) / len(active), float(out[column])
                # a kernel that normalises P first adds ±l·P·big, rounded more coarsely: within 2x is kept
                if got != 0.0 and not expected / 2 <= got <= 2 * expected:
                    return 24, False, [f"P·V accumulator: gap {gap} gave {got!r}, expected {expected!r} or 0; "
                                       "width not measured, f32 assumed"]
                kept[gap] = got != 0.0
        lost = [gap for gap in GAPS if not kept[gap]]
        return (lost[0], True, []) if lost else (GAPS[-1] + 1, False, [])

    # -- the row sum l ----------------------------------------------------------------------------------
    def row_sum(self) -> tuple[int | None, list[str]]:
        """The row sum's width where it drops the small weights (None: it keeps them, or not probed), from the row
        allowing the most keys: its first key scores 0 (P = 1, v = 1 in column 0), every other key scores ln π
        (v = 0). l = 1 + L·π exactly; a running l of fewer than e + 1 bits that holds 1 first drops every
        π = 2^-e (o = 1/l comes back 1, lse 0). With lse (f32) e = 20: a running l in f16 or bf16 loses them
        even added 512 at a time, as a tile's sum; with o alone e = 12 (per key or per pair), and L·π must
        show in o's format. A tile's sum of 2^-12 weights does not drop, so without lse `long_row_sum` follows."""
        if self.p.head_dim_qk < 2:
            return None, ["row sum not probed: the scores need a second feature"]
        row = int(self.allowed.sum(dim=1).argmax())
        keys = self.allowed[row].nonzero().flatten().tolist()
        lse = self.returns_lse
        exponent = 20 if lse else 12
        if len(keys) < 2 or (not lse and (len(keys) - 1) * 2.0 ** -exponent < 4 * self.unit_out):
            return None, [f"row sum not probed: {len(keys) - 1} small keys cannot show 2^-{exponent} each in "
                          f"{self.problem.out_dtype} (return_lse shows more)"]
        kept = self._row_sum_kept(row, keys[:1], keys[1:], exponent, lse)
        if kept is None:
            return None, [f"row sum: the outputs fit neither l = 1 + {len(keys) - 1}·2^-{exponent} nor l = 1; not measured"]
        if kept:  # at least exponent + 1 bits: no narrower than the P·V accumulator's finding says
            return None, []
        # how many keys a kernel adds before it rounds l decides which width drops them: the width is not
        # measured, only that it is below e + 1 bits; the input format is what such kernels store l in
        return FORMAT_BITS[self.l_format], [f"row sum: 1 + {len(keys) - 1}·2^-{exponent} came back 1: l runs in fewer "
                                            f"than {exponent + 1} bits, taken as {self.l_format}"]

    def long_row_sum(self) -> tuple[int | None, list[str]]:
        """The row sum rounded between tiles of keys, which rows of the case's own length may not show without lse:
        on LONG_ROW keys (this probe's problem is `long_row_problem`'s), the first and the last score 0 (P = 1,
        v = 1) and every other ln π, π = 2^-e (small_weight_exponent of the format F the kernel would store l in).
        A tile of up to TILE_KEYS small weights then sums below half an ulp of l ≥ 1 in F, so an l rounded to F
        after each tile keeps 1 (or 2), from whichever end the kernel starts, and o = 2/l comes back 1; held in
        f32 (any order, any tiles: the sum is exact) o is 2/(2 + (LONG_ROW - 2)·π), 8 of o's ulps or more away."""
        keys = list(range(self.p.seq_k))
        heavy, small = [keys[0], keys[-1]], keys[1:-1]
        exponent = small_weight_exponent(FORMAT_BITS[self.l_format])
        kept = self._row_sum_kept(0, heavy, small, exponent, lse=False)
        if kept is None:
            return None, [f"row sum over {len(keys)} keys: the outputs fit neither l = 2 + {len(small)}·2^-{exponent} "
                          "nor l = 2; not measured"]
        if kept:
            return None, []
        return FORMAT_BITS[self.l_format], [f"row sum over {len(keys)} keys: 2 + {len(small)}·2^-{exponent} came back 2: "
                                            f"l is rounded to {self.l_format} between tiles of keys"]

    @property
    def returns_lse(self) -> bool:
        return self.p.return_lse and "lse" in self.problem.output_names

    @property
    def unit_out(self) -> float:
        """o's ulp at 1."""
        return float(metrics.ulp(torch.tensor([1.0], dtype=torch.float64), self.problem.out_dtype)[0])

    @property
    def l_format(self) -> str:
        """The format a kernel that rounds its row sum stores it in: the input format's, f16 for f32 inputs."""
        return self.in_fmt if self.in_fmt in ("f16", "bf16") else "f16"

    def _row_sum_kept(self, row: int, heavy: list[int], small: list[int], exponent: int, lse: bool) -> bool | None:
        """Whether the small weights reached l (None: the outputs fit neither reading): heavy keys score 0 with
        v = 1 in column 0, small ones -e·ln 2 with v = 0."""
        values = self.tensors(heavy + small)
        q1 = self.exact_input(-exponent * math.log(2.0) / self.sigma)
        values["q"][self.batch, :, row, 1] = q1
        values["k"][self.batch, :, small, 1] = 1.0
        values["v"][self.batch, :, heavy, 0] = 1.0
        outputs = call_on_values(self.problem, self.kernel, values, self.device, label=self.label)
        row_sum = len(heavy) + len(small) * math.exp(self.sigma * q1)
        if lse:
            got, kept, lost = float(outputs["lse"][self.batch, 0, row]), math.log(row_sum), math.log(len(heavy))
        else:
            got, kept, lost = float(outputs["o"][self.batch, 0, row, 0]), len(heavy) / row_sum, 1.0
        if abs(got - kept) <= abs(kept - lost) / 4:
            return True
        if abs(got - lost) <= abs(kept - lost) / 4:
            return False
        return None

    # -- P's format ---------------------------------------------------------------------------------
    def p_format(self) -> tuple[str, str, list[str]]:
        in_bits = metrics.get_format(self.in_fmt).mantissa_bits
        formats = [fmt for fmt in P_FORMATS if metrics.get_format(fmt).mantissa_bits <= in_bits]  # c travels in V
        a, b, rows = self._key_pair()
        # experiments: (head, row) pairs, each with its own V column (every head sees the same keys)
        slots = [(head, row) for head in range(self.p.heads_q) for row in rows][:min(P_ROWS, self.p.head_dim_v)]
        if len(slots) < 2:
            return self._assumed("no two rows share two allowed keys and a V column each")
        values = self.tensors([a, b])
        values["k"][self.batch, :, b, 1] = 1.0
        tested, exponents, constants = [], [], []
        candidate = 1
        for index, (head, row) in enumerate(slots):
            fmt = formats[index * len(formats) // len(slots)]
            while True:  # a score t = σ·q (q exact in the input format) whose exp is far from fmt's ties
                q1 = self.exact_input(-candidate / 64.0 / self.sigma)
                candidate += 3
                t = self.sigma * q1
                if all(self._far_from_ties(math.exp(t), f) for f in P_FORMATS):
                    break
            values["q"][self.batch, head, row, 1] = q1
            c = _round(math.exp(t), fmt)
            values["v"][self.batch, :, a, index], values["v"][self.batch, :, b, index] = -c, 1.0
            tested.append(fmt), exponents.append(t), constants.append(c)
        out = self.run(values)
        got = [float(out[head, row, index]) for index, (head, row) in enumerate(slots)]
        matching = [(fmt, toward_zero, normalised) for fmt, toward_zero, normalised in HYPOTHESES
                    if all(_close(g, _predict(t, c, fmt, toward_zero, normalised), self.problem.out_dtype)
                           for g, t, c in zip(got, exponents, constants))]
        if not matching:
            return self._assumed(f"no hypothesis predicts the outputs {got}")
        # where the output format cannot tell some apart: the input format (what kernels do) if it fits,
        # else the coarsest (the widest bound)
        expected = [h for h in matching if h[0] == self.in_fmt and not h[1]]
        fmt, toward_zero, normalised = (expected or sorted(matching, key=lambda h: -_unit(h[0]) * (2 if h[1] else 1)))[0]
        notes = ["P is normalised before it is rounded"] if normalised else []
        if len(matching) > 1:
            notes.append(f"{len(matching)} hypotheses fit these outputs; {'the input format' if expected else 'the coarsest'} "
                         "is taken")
        return ("exact" if fmt == "f32" else fmt), ("toward-zero" if toward_zero else "nearest"), notes

    # -- the scores' format ----------------------------------------------------------------------------
    def scores_format(self) -> tuple[str, list[str]]:
        """The format the scores are rounded to before the softmax ("" where they stay in f32, or not found): keys
        a and b of a row score about SCORE_LEVEL and SCORE_LEVEL + σ·d (k = (c, 0) and (c, d), q = (1, 1)), v = 0
        at a and 1 at b, so o = 1/(1 + exp(s_a - s_b)). At SCORE_LEVEL an f16 score's ulp is 2 and a bf16
        one's 16: rounded there, before or after the scale, the difference s_b - s_a moves by a good part of one,
        and o by SCORE_ULPS of its ulps or more; kept in f32 it moves by F32_SCORE_SLACK or less."""
        a, b, rows = self._key_pair()
        c = self.exact_input(SCORE_LEVEL / self.sigma)
        if self.p.head_dim_qk < 2 or not rows or not math.isfinite(c) or abs(c) > 6e4:
            return "", ["scores' format not probed: no row allows two keys with a second feature, or the scale is too small"]
        unit = float(metrics.ulp(torch.tensor([0.5], dtype=torch.float64), self.problem.out_dtype)[0])
        for step in SCORE_STEPS:
            d = self.exact_input(step / self.sigma)
            exact = self._weight_b(self.sigma * c, self.sigma * (c + d))
            readings = {fmt: [self._weight_b(_round(self.sigma * _round(c, fmt), fmt), _round(self.sigma * _round(c + d, fmt), fmt)),
                              self._weight_b(_round(self.sigma * c, fmt), _round(self.sigma * (c + d), fmt))]
                        for fmt in P_FORMATS}
            if all(abs(o - exact) >= max(SCORE_ULPS * unit, 4 * F32_SCORE_SLACK) for found in readings.values() for o in found):
                break
        else:
            return "", ["scores' format not probed: no step of the second feature tells the formats apart"]
        row = rows[0]
        values = self.tensors([a, b])
        values["q"][self.batch, :, row, 1] = 1.0
        values["k"][self.batch, :, (a, b), 0] = c
        values["k"][self.batch, :, b, 1] = d
        values["v"][self.batch, :, b, 0] = 1.0
        got = float(self.run(values)[0, row, 0])
        tolerance = max(SCORE_ULPS * unit / 4, F32_SCORE_SLACK)
        if abs(got - exact) <= tolerance:
            return "", []
        # where several formats predict the output: the input format's, else the coarsest (as P's format)
        for fmt in sorted(readings, key=lambda f: (f != self.in_fmt, -_unit(f))):
            if any(abs(got - o) <= tolerance for o in readings[fmt]):
                return fmt, [f"the scores are rounded to {fmt} before the softmax: scores {self.sigma * c:.6g} and "
                             f"{self.sigma * (c + d):.6g} gave o = {got:.6g}, {exact:.6g} in f32"]
        return "", [f"scores' format not identified: scores {self.sigma * c:.6g} and {self.sigma * (c + d):.6g} gave "
                    f"o = {got:.6g}, {exact:.6g} in f32, {readings} rounded"]

    @staticmethod
    def _weight_b(score_a: float, score_b: float) -> float:
        return 1.0 / (1.0 + math.exp(score_a - score_b))

    def _key_pair(self) -> tuple[int, int, list[int]]:
        """Two keys allowed together in the most rows, and those rows."""
        first_two = [row.nonzero().flatten()[:2].tolist() for row in self.allowed]
        pairs: dict[tuple[int, int], list[int]] = {}
        for row, keys in enumerate(first_two):
            if len(keys) == 2:
                pairs.setdefault((keys[0], keys[1]), []).append(row)
        if not pairs:
            return 0, 1, []
        (a, b), rows = max(pairs.items(), key=lambda item: len(item[1]))
        return a, b, rows

    @staticmethod
    def _far_from_ties(value: float, fmt: str) -> bool:
        fraction = (math.frexp(value)[0] * 2.0 ** FORMAT_BITS[fmt]) % 1.0
        return min(fraction, 1 - fraction, abs(fraction - 0.5)) > TIE_MARGIN

    def _assumed(self, why: str) -> tuple[str, str, list[str]]:
        assumed = "exact" if self.in_fmt == "f32" else self.in_fmt
        return assumed, "nearest", [f"P's format before P·V not identified ({why}); assumed {assumed}"]


HYPOTHESES = [(fmt, toward_zero, normalised)
              for fmt in ("f32", *P_FORMATS) for toward_zero in (False, True) for normalised in (False, True)
              if not (fmt == "f32" and (toward_zero or normalised))]


def _unit(fmt: str) -> float:
    return math.ldexp(1.0, -FORMAT_BITS[fmt])


def _predict(t: float, c: float, fmt: str, toward_zero: bool, normalised: bool) -> float:
    e = _round(math.exp(t), "f32")
    if normalised:
        return _round(e / (1 + e), fmt, toward_zero) - _round(1 / (1 + e), fmt, toward_zero) * c
    return (_round(e, fmt, toward_zero) - c) / (1 + e)


def _close(got: float, want: float, out_fmt: str) -> bool:
    ulp = float(metrics.ulp(torch.tensor([want], dtype=torch.float64), out_fmt)[0])
    return abs(got - want) <= 2 * ulp + 2.0 ** -18  # a fast exp's error in the f32 hypothesis
