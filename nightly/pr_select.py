"""`e2egen select`: the PR subset, chosen from the catalogue and the nightly evidence within a time budget.

1. Cases the catalogue marks `pr = true` (suite or config) always run; their
   time counts against the budget and their coverage counts as covered.
2. Coverage: every value of every axis (suite, op, config, direction, dtype,
   layout, range) and every pair of values across op, dtype, direction and
   layout that some case of the catalogue has. Greedy set cover: the case
   covering the most uncovered requirements per second of expected time
   (ties: more covered, less headroom, catalogue order), while it fits.
3. Evidence: cases that failed in the chosen runs (the latest failure first),
   then the cases with the least headroom (largest value / tolerance over the
   runs), each while it fits in what is left of the budget.

Prices: a case's median recorded duration on the device (`cpu`, or any GPU
for `cuda`); cases without one are priced by FLOPs (plus nightly.shard's
per-case floor) at the rate the recorded cases show, or at a default rate
when nothing was recorded on that device. The budget is serial test time
(pytest -n N divides the wall time by about N).

The output is the selection file the generator reads (generator/selection.py):
deterministic, in catalogue order, with a header saying how it was made.
"""
from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Literal, Mapping, Sequence, get_args

from e2egen.generator.case_id import PARTS
from e2egen.generator.cases import Case
from e2egen.nightly.errors import NightlyError
from e2egen.nightly.evidence import Evidence
from e2egen.nightly.shard import PER_CASE_FLOPS
from e2egen.nightly.store import Store

VALUE_AXES = PARTS
PAIR_AXES = ("op", "dtype", "direction", "layout")
# Seconds per FLOP when the store has no duration on the device. CPU: measured with the shipped
# catalogue on a 2-core x86 VM (float64 reference and bound included, ~1.5 GFLOP/s end to end);
# CUDA: a conservative guess (reference on the GPU in float64), refined by the first nightly.
DEFAULT_SECONDS_PER_FLOP = {"cpu": 1 / 1.5e9, "cuda": 1 / 5e10}


# -- budget -------------------------------------------------------------------------
_BUDGET = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def parse_budget(text: str) -> float:
    """'300s', '5m', '1h30m', '1m30s' or plain seconds ('300') -> seconds >= 0 (0: choose nothing, so the PR
    subset is the cases the catalogue marks pr = true)."""
    stripped = (text or "").strip().lower()
    seconds = None
    try:
        seconds = float(stripped)
    except ValueError:
        match = _BUDGET.fullmatch(stripped)
        if match and any(match.groups()):
            h, m, s = (float(g) if g else 0.0 for g in match.groups())
            seconds = 3600 * h + 60 * m + s
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise NightlyError(f"--budget: expected a time >= 0 like 300s, 5m, 1h30m or a number of seconds, got {text!r}")
    return seconds


def format_seconds(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 60 or not float(seconds).is_integer():
        return f"{seconds:g}s" if seconds < 60 else f"{seconds:.0f}s"
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v)


# -- prices -------------------------------------------------------------------------
RateBasis = Literal["measured", "default"]  # the FLOP rate: from the recorded cases, or DEFAULT_SECONDS_PER_FLOP


@dataclass(frozen=True)
class Prices:
    seconds: Mapping[str, float]  # case id -> expected seconds
    recorded: int  # cases priced by a recorded duration
    estimated: int  # cases priced by FLOPs
    flops_per_second: float
    rate_basis: RateBasis
    device: str

    def describe(self) -> str:
        rate = f"{self.flops_per_second / 1e9:.3g} GFLOP/s, {self.rate_basis}"
        return (f"prices on {self.device}: recorded durations for {self.recorded} cases, "
                f"FLOPs for {self.estimated} (at {rate})")


def recorded_durations(store: Store, device: str) -> dict[str, float]:
    """case id -> median recorded seconds on `device` ('cpu', or the slowest GPU's median for 'cuda')."""
    if device == "cpu":
        return store.durations("cpu")
    merged: dict[str, float] = {}
    for name in store.devices():
        if name == "cpu":
            continue
        for case_id, seconds in store.durations(name).items():
            merged[case_id] = max(seconds, merged.get(case_id, 0.0))
    return merged


def price_cases(store: Store, cases: Sequence[Case], device: str) -> Prices:
    return price_from_durations(cases, recorded_durations(store, device), device)


def price_from_durations(cases: Sequence[Case], durations: Mapping[str, float], device: str) -> Prices:
    work = {c.id: float(c.flops) + PER_CASE_FLOPS for c in cases}
    known = {cid: float(durations[cid]) for cid in work if durations.get(cid, 0) > 0}
    if known:
        seconds_per_flop = sum(known.values()) / sum(work[cid] for cid in known)
        basis: RateBasis = "measured"
    else:
        seconds_per_flop = DEFAULT_SECONDS_PER_FLOP[device]
        basis = "default"
    seconds = {cid: known.get(cid, w * seconds_per_flop) for cid, w in work.items()}
    return Prices(seconds, len(known), len(work) - len(known), 1 / seconds_per_flop, basis, device)


# -- coverage -----------------------------------------------------------------------
def _value(case: Case, axis: str) -> str:
    return f"{case.suite}/{case.config}" if axis == "config" else str(getattr(case, axis))


def requirements(case: Case) -> frozenset[tuple]:
    """What a case covers: ('value', axis, v) and ('pair', a, va, b, vb)."""
    values = {("value", axis, _value(case, axis)) for axis in VALUE_AXES}
    pairs = {("pair", a, _value(case, a), b, _value(case, b)) for a, b in itertools.combinations(PAIR_AXES, 2)}
    return frozenset(values | pairs)


def describe_requirement(req: tuple) -> str:
    if req[0] == "value":
        return f"{req[1]} {req[2]}"
    return f"{req[2]} x {req[4]}"


@dataclass(frozen=True)
class Coverage:
    values: tuple[int, int]  # covered, total
    pairs: tuple[int, int]
    uncovered: tuple[tuple, ...]

    def describe(self) -> str:
        return (f"axis values {self.values[0]}/{self.values[1]}, pairs {self.pairs[0]}/{self.pairs[1]} "
                f"({', '.join(PAIR_AXES)})")


def coverage(universe: Iterable[tuple], covered: set[tuple]) -> Coverage:
    universe = sorted(set(universe))
    values = [r for r in universe if r[0] == "value"]
    pairs = [r for r in universe if r[0] == "pair"]
    return Coverage((sum(r in covered for r in values), len(values)), (sum(r in covered for r in pairs), len(pairs)),
                    tuple(r for r in universe if r not in covered))


# -- selection ----------------------------------------------------------------------
# Why a case was picked, in the order the picks are made (and counted): coverage, a recent failure, headroom.
PickKind = Literal["coverage", "failed", "headroom"]
PICK_KINDS: tuple[PickKind, ...] = get_args(PickKind)


@dataclass(frozen=True)
class Pick:
    case: Case
    kind: PickKind
    why: str
    seconds: float


@dataclass
class Selection:
    forced: list[Case]
    chosen: list[Pick]  # catalogue order
    budget: float
    prices: Prices
    coverage: Coverage
    evidence: Evidence
    notes: list[str] = field(default_factory=list)

    @property
    def forced_seconds(self) -> float:
        return sum(self.prices.seconds[c.id] for c in self.forced)

    @property
    def chosen_seconds(self) -> float:
        return sum(p.seconds for p in self.chosen)

    @property
    def estimate(self) -> float:
        return self.forced_seconds + self.chosen_seconds


def forced_by_catalogue(case: Case) -> bool:
    """pr = true on the suite or config (a previous selection file does not count: it is being replaced)."""
    return case.pr and not case.pr_reason.startswith("selection")


def select(cases: Sequence[Case], evidence: Evidence, prices: Prices, budget: float) -> Selection:
    order = {c.id: i for i, c in enumerate(cases)}
    reqs = {c.id: requirements(c) for c in cases}
    universe = set().union(*reqs.values()) if cases else set()
    forced = [c for c in cases if forced_by_catalogue(c)]
    covered: set[tuple] = set().union(*(reqs[c.id] for c in forced)) if forced else set()
    left = budget - sum(prices.seconds[c.id] for c in forced)
    notes = []
    if budget == 0:
        notes.append(f"budget 0: no case chosen; the PR subset is the {len(forced)} cases with pr = true in the catalogue")
    elif left < 0:
        notes.append(f"the {len(forced)} cases with pr = true in the catalogue alone take "
                     f"{budget - left:.1f} s, over the budget of {budget:.1f} s: nothing else selected")
    margin = {}
    for c in cases:
        ev = evidence.cases.get(c.id)
        best = ev.max_margin if ev is not None else None
        margin[c.id] = best if best is not None else (-1.0, "")
    picks: dict[str, Pick] = {}
    candidates = [c for c in cases if not forced_by_catalogue(c)]

    # 1. Pairwise coverage, greedily by requirements covered per second.
    while left > 0:
        best, best_key = None, None
        for c in candidates:
            if c.id in picks:
                continue
            seconds = prices.seconds[c.id]
            if seconds > left:
                continue
            gain = len(reqs[c.id] - covered)
            if not gain:
                continue
            key = (gain / max(seconds, 1e-6), gain, margin[c.id][0], -order[c.id])
            if best_key is None or key > best_key:
                best, best_key = c, key
        if best is None:
            break
        new = sorted(reqs[best.id] - covered)
        shown = ", ".join(describe_requirement(r) for r in new[:4]) + (f" and {len(new) - 4} more" if len(new) > 4 else "")
        picks[best.id] = Pick(best, "coverage", f"coverage: {shown}", prices.seconds[best.id])
        covered |= reqs[best.id]
        left -= prices.seconds[best.id]

    # 2. Recent failures (latest first), then least headroom.
    run_index = {run_id: i for i, run_id in enumerate(evidence.run_ids)}

    def last_failure(c: Case) -> tuple[int, str] | None:
        ev = evidence.cases.get(c.id)
        failures = [(run_index.get(run, -1), run, reason) for run, reason in (ev.failed_runs if ev else [])]
        if not failures:
            return None
        i, run, reason = max(failures)
        return i, f"failed in {run}: {' '.join(reason.split())[:100]}".rstrip(": ")

    failed = [(last_failure(c), c) for c in candidates if c.id not in picks]
    failed = sorted(((f, c) for f, c in failed if f), key=lambda item: (-item[0][0], -margin[item[1].id][0], order[item[1].id]))
    for (_, why), c in failed:
        if prices.seconds[c.id] <= left:
            picks[c.id] = Pick(c, "failed", why, prices.seconds[c.id])
            left -= prices.seconds[c.id]
    rest = [c for c in candidates if c.id not in picks and margin[c.id][0] >= 0]
    rest.sort(key=lambda c: (-margin[c.id][0], order[c.id]))
    for c in rest:
        if prices.seconds[c.id] <= left:
            value, run = margin[c.id]
            ev = evidence.cases[c.id]
            metric = ev.worst_metric.get(run, "worst metric")
            picks[c.id] = Pick(c, "headroom", f"headroom: {metric} at {value:.3g} of its tolerance in {run}",
                               prices.seconds[c.id])
            left -= prices.seconds[c.id]
    chosen = sorted(picks.values(), key=lambda p: order[p.case.id])
    return Selection(forced, chosen, budget, prices, coverage(universe, covered), evidence, notes)


# -- output -------------------------------------------------------------------------
def _breakdown(selection: Selection) -> str:
    kinds: dict[PickKind, int] = {}
    for pick in selection.chosen:
        kinds[pick.kind] = kinds.get(pick.kind, 0) + 1
    parts = ", ".join(f"{kinds[k]} {k}" for k in PICK_KINDS if k in kinds)
    return (f"{len(selection.forced)} cases with pr = true in the catalogue ({selection.forced_seconds:.1f} s) + "
            f"{len(selection.chosen)} selected here ({selection.chosen_seconds:.1f} s{': ' + parts if parts else ''})")


def render(selection: Selection, *, budget_text: str, catalogue: str) -> str:
    """The selection file: a header comment, then one [[case]] per selected id with why, in catalogue order."""
    runs = ", ".join(selection.evidence.run_ids) or "none"
    lines = [
        f"# Generated by `e2egen select` from {catalogue}: do not edit by hand; rerun it after a nightly.",
        f"# budget: {budget_text} (serial test time); estimated {selection.estimate:.1f} s: {_breakdown(selection)}",
        f"# {selection.prices.describe()}",
        f"# coverage: {selection.coverage.describe()}",
        f"# evidence (failures, headroom): runs {runs}",
    ]
    for note in selection.notes:
        lines.append(f"# note: {note}")
    for pick in selection.chosen:
        lines += ["", "[[case]]", f"id = {json.dumps(pick.case.id)}", f"why = {json.dumps(pick.why, ensure_ascii=False)}"]
    return "\n".join(lines) + "\n"


def report(selection: Selection) -> str:
    lines = [
        f"PR subset for {selection.prices.device}: {len(selection.forced) + len(selection.chosen)} cases, "
        f"estimated {selection.estimate:.1f} s of a {selection.budget:.1f} s budget",
        f"  {_breakdown(selection)}",
        f"coverage: {selection.coverage.describe()}",
        selection.prices.describe(),
        selection.evidence.describe_runs(),
    ]
    if selection.coverage.uncovered:
        missing = selection.coverage.uncovered
        lines.append(f"not covered within the budget ({len(missing)}): "
                     + ", ".join(describe_requirement(r) for r in missing[:12]) + (" …" if len(missing) > 12 else ""))
    lines += [f"note: {n}" for n in selection.notes]
    return "\n".join(lines)
