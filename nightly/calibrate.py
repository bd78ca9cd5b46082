"""`e2egen calibrate`: tolerances from what the nightly runs observed.

For every metric a case checks, the proposal is its observed maximum over the
chosen runs times a margin (default 2), rounded up to a readable value
(1, 2 or 5 x 10^k), never below the floor the output format imposes:

    max_abs_diff                  one ulp of the output type at the output's magnitude (the largest |ref|
                                  among the recorded worst elements: a lower bound of max |ref|)
    max_rel_diff, max_rel_diff_old  eps of the output type (one rounding step, relative)
    max_eps_diff, max_ulp_diff    1 (one rounding step)
    rms, rel_l2                   none: the rounding-only value depends on the data's distribution
    bound_ratio                   1.0 is kept: the bound already holds the format's own rounding. A
                                  ratio above 1 on a correct kernel means the error model misses it
                                  (flag MODEL); the proposal is then observed x margin, but fixing
                                  the case's [bound] (acc, lambda) is the better answer.

Where the proposal lives. Tolerances resolve catalogue < suite < config, and
within each all < direction < dtype < dtype.direction. Each existing entry
(e.g. [tolerances.f16] rms) governs the cases that resolve to it. When every
one of those cases has evidence, the entry takes the value that passes all of
them and needs the fewest new overrides; when some have none, it is kept.
Cases whose need is not met by the value they inherit, or for which it is
more than `band` (default 10) times looser than they need, get an override
at the first level that fits, in this order: suite+dtype
(`tolerances.<dtype>.<metric>` in the suite's table), suite+dtype.direction,
config+dtype.direction (each nests in the one before). An override is only added where every
case it would govern has evidence. Nothing is guessed: a case never run, run
fewer times than asked, skipped, or with a non-finite value, is reported.

`--write` edits the catalogue with tomlkit: comments, order and formatting are
kept, only the changed numbers change and each override is one added line
(or one key added to an inline table); the result is re-read and must
resolve every case to the planned tolerances before anything is written.
"""
from __future__ import annotations

import difflib
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence

from e2egen.files import write_text_atomically
from e2egen.generator.cases import Case
from e2egen.generator.catalogue import Catalogue
from e2egen.generator.layers import Source, default_entries, existing_entries, resolve_with_sources, sources_for
from e2egen.metrics.names import MODEL_TOLERANCES
from e2egen.runner.dtypes import DTYPES
from e2egen.nightly.errors import NightlyError
from e2egen.nightly.evidence import Evidence

DEFAULT_MARGIN = 2.0
DEFAULT_BAND = 10.0
LOOSE_FACTOR = 100.0  # a tolerance that lets an error this many times the observed maximum pass is "loose"
# The model's own tolerances, kept unless the evidence exceeds them: bound_ratio and bias_z are absolute
# (a bound, a z-score); bound_rms is "a correct kernel's level", which the evidence may tighten per cell.
CEILING_METRICS = {name: MODEL_TOLERANCES[name] for name in ("bound_ratio", "bias_z")}
_REL = 1e-9  # readable values compare equal within this relative distance


# -- readable numbers ---------------------------------------------------------------
def readable_up(x: float) -> float:
    """The smallest value of the form 1, 2 or 5 x 10^k that is >= x (x > 0)."""
    if not x > 0 or not math.isfinite(x):
        raise ValueError(f"expected a finite number > 0, got {x}")
    k = math.floor(math.log10(x))
    for exponent in (k - 1, k, k + 1):
        for m in (1, 2, 5):
            value = float(f"{m}e{exponent}")
            if value >= x * (1 - _REL):
                return value
    raise AssertionError(x)  # pragma: no cover


def format_number(value: float, integer: bool = False) -> str:
    """TOML text for a readable value: 2e-4, 0.5, 1.0, 20.0, 1e5 (or 20 where the old value was an integer)."""
    if integer and float(value).is_integer():
        return str(int(value))
    text = f"{value:.0e}"  # '2e-04'
    mantissa, exponent = text.split("e")
    exponent = int(exponent)
    if -1 <= exponent <= 3:
        return repr(float(value))
    return f"{mantissa}e{exponent}"


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= _REL * max(abs(a), abs(b))


# -- where a tolerance lives --------------------------------------------------------
# A place for a tolerance (scope and key), its rank and the precedence: generator.layers, shared with `gen`.
Position = Source


# New overrides go here, coarsest first; each level nests in the one before (a direction is a
# kernel of its own, so it splits before the shape does).
def _refinements(case: Case) -> list[Position]:
    return [
        Position(("suite", case.suite), case.dtype),
        Position(("suite", case.suite), f"{case.dtype}.{case.direction}"),
        Position(("config", case.suite, case.config), f"{case.dtype}.{case.direction}"),
    ]


# -- floors and needs ---------------------------------------------------------------
def format_floor(metric: str, dtype: str, magnitude: float) -> tuple[float | None, str]:
    """The smallest tolerance the output format allows a correct kernel to meet reliably, and why."""
    import torch

    from e2egen import metrics
    from e2egen.runner.dtypes import output_dtype_name

    name = output_dtype_name(dtype)
    fmt = metrics.get_format(name)
    if metric == "max_abs_diff":
        if not magnitude > 0:
            return None, ""
        step = float(metrics.ulp(torch.tensor([magnitude], dtype=torch.float64), name)[0])
        return step, f"1 ulp of {name} at |ref| {magnitude:.3g}"
    if metric in ("max_rel_diff", "max_rel_diff_old"):
        return fmt.eps, f"eps of {name}"
    if metric in ("max_eps_diff", "max_ulp_diff"):
        return 1.0, "1 ulp"
    return None, ""


# What a case's need rests on: observed x margin, the format's floor, the model's own tolerance (the ceiling:
# kept), or observed x margin above that ceiling (the error model misses something).
Basis = Literal["margin", "floor", "ceiling", "model"]


@dataclass
class CaseState:
    """One case and one metric: its tolerance now, where it comes from, the evidence and what it needs."""

    case: Case
    metric: str
    current: float
    source: Position
    observed: float | None = None
    runs: int = 0
    failed: bool = False  # an observed value is above the current tolerance
    need: float | None = None  # the proposal for this case alone
    basis: Basis | Literal[""] = ""  # "" until a need is found
    floor: float | None = None
    missing: str = ""  # why there is no need: never run, 1 of 2 runs, non-finite, always 0


def case_need(metric: str, observed: float, floor: float | None, margin: float
              ) -> tuple[float, Basis] | tuple[None, Literal["always 0"]]:
    """(the tolerance one case needs, what it rests on), or (None, why there is none)."""
    if metric in CEILING_METRICS:
        ceiling = CEILING_METRICS[metric]
        if observed <= ceiling:
            return ceiling, "ceiling"
        return readable_up(observed * margin), "model"
    x = observed * margin
    basis: Basis = "margin"
    if floor is not None and floor > x:
        x, basis = floor, "floor"
    if x <= 0:
        return None, "always 0"
    return readable_up(x), basis


# -- the plan -----------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    position: Position
    metric: str
    old: float | None  # None: a new override
    new: float


RowStatus = Literal["kept", "changed", "new"]  # an entry kept as it is, its value changed, or a new override


@dataclass(frozen=True)
class Row:
    suite: str
    dtype: str
    metric: str
    level: str
    status: RowStatus
    cases: int
    evidenced: int
    current: tuple[float, ...]
    observed: float | None
    proposed: float
    flags: tuple[str, ...]

    @property
    def ratio_now(self) -> float | None:
        if self.observed is None or len(self.current) != 1:
            return None
        return _ratio(self.observed, self.current[0])

    @property
    def ratio_new(self) -> float | None:
        return None if self.observed is None else _ratio(self.observed, self.proposed)


def _ratio(value: float, tolerance: float) -> float:
    return (0.0 if value == 0 else math.inf) if tolerance == 0 else value / tolerance


@dataclass
class Calibration:
    evidence: Evidence
    margin: float
    band: float
    states: list[CaseState]
    changes: list[Change]
    rows: list[Row]
    effective: dict[tuple[str, str], float]  # (case id, metric) -> tolerance after the changes
    unresolved: list[CaseState]  # evidence says more is needed, but nowhere to put it without guessing
    not_calibrated: dict[str, int] = field(default_factory=dict)  # allowance -> cases (counts are not calibrated)
    stale: int = 0  # recorded cases no longer in the catalogue
    allowance_failures: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # count -> [(case, max)]


def calibrate(catalogue: Catalogue, cases: Sequence[Case], evidence: Evidence, *, margin: float = DEFAULT_MARGIN,
              band: float = DEFAULT_BAND) -> Calibration:
    from e2egen import metrics

    if not margin >= 1:
        raise NightlyError(f"--margin: expected a number >= 1, got {margin}")
    if not band >= 1:
        raise NightlyError(f"--band: expected a number >= 1, got {band}")
    entries = {**default_entries("tolerances"), **existing_entries(catalogue, "tolerances")}
    required = max(1, len(evidence.runs)) if len(evidence.runs) >= evidence.asked else evidence.asked
    states: list[CaseState] = []
    not_calibrated: dict[str, int] = defaultdict(int)
    for case in cases:
        ev = evidence.cases.get(case.id)
        resolved = resolve_with_sources(catalogue, case.suite, case.config, case.dtype, case.direction, "tolerances")
        for metric, current in case.tolerances.items():
            if isinstance(current, bool):
                continue
            if metric not in resolved:  # the op's own default (an integer output's exactness): not the catalogue's
                continue
            if metric not in metrics.METRIC_NAMES:
                not_calibrated[metric] += 1
                continue
            state = CaseState(case, metric, float(current), resolved[metric][1])
            if ev is not None:
                state.runs = ev.runs_with(metric)
                state.observed = ev.observed_max(metric)
                state.failed = state.observed is not None and state.observed > current
            if ev is None or not ev.statuses:
                state.missing = "not in these runs"
            elif state.runs == 0:
                skipped = all(status == "skipped" for _, status, _ in ev.statuses)
                state.missing = "skipped" if skipped else "no value recorded"
            elif state.runs < required:
                state.missing = f"{state.runs} of {required} runs"
            elif not math.isfinite(state.observed):
                state.missing = "non-finite value"
            elif not math.isfinite(state.observed * margin * 10):  # x margin, rounded up to 1-2-5: would overflow
                state.missing = f"value too large to calibrate ({state.observed:.3g})"
            else:
                state.floor, _ = format_floor(metric, case.dtype, ev.magnitude)
                need, basis = case_need(metric, state.observed, state.floor, margin)
                if need is None:
                    state.missing = basis
                else:
                    state.need, state.basis = need, basis
            states.append(state)

    by_metric: dict[str, list[CaseState]] = defaultdict(list)
    for state in states:
        by_metric[state.metric].append(state)
    changes: list[Change] = []
    effective: dict[tuple[str, str], float] = {}
    final_position: dict[tuple[str, str], Position] = {}
    for metric, metric_states in by_metric.items():
        planner = _Planner(metric, metric_states, entries, band)
        values = planner.plan()
        for position, value in sorted(values.items(), key=lambda item: (item[0].rank, item[0])):
            old = entries.get((position, metric))
            changes.append(Change(position, metric, None if old is None else float(old), value))
        for state in metric_states:
            c = state.case
            candidates = [p for p in sources_for(c.suite, c.config, c.dtype, c.direction) if p in values or (p, metric) in entries]
            position = max(candidates, key=lambda p: p.rank)
            value = values.get(position, entries.get((position, metric)))
            effective[(state.case.id, metric)] = float(value)
            final_position[(state.case.id, metric)] = position
    allowance_failures: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for case in cases:
        ev = evidence.cases.get(case.id)
        for name in metrics.ALLOWANCE_NAMES:
            observed = ev.observed_max(name) if ev is not None else None
            allowed = case.tolerances.get(name, 0)
            if observed is not None and observed > (0 if isinstance(allowed, bool) else allowed):
                allowance_failures[name].append((case.id, observed))
    unresolved = [s for s in states if s.need is not None and s.need > effective[(s.case.id, s.metric)] * (1 + _REL)]
    changed = {(c.position, c.metric): c for c in changes}
    rows = _rows(catalogue, states, effective, final_position, changed)
    known = {c.id for c in cases}
    stale = sum(1 for cid in evidence.cases if cid not in known)
    return Calibration(evidence, margin, band, states, changes, rows, effective, unresolved, dict(not_calibrated), stale,
                       dict(allowance_failures))


class _Planner:
    """Chooses the values of one metric's entries: existing ones re-valued, overrides added where needed."""

    def __init__(self, metric: str, states: list[CaseState], entries: Mapping[tuple[Position, str], Any], band: float):
        self.metric = metric
        self.states = states
        self.entries = entries
        self.band = band

    def fits(self, need: float, value: float) -> bool:
        return need <= value * (1 + _REL) and value <= need * self.band * (1 + _REL)

    def plan(self) -> dict[Position, float]:
        values: dict[Position, float] = {}
        by_source: dict[Position, list[CaseState]] = defaultdict(list)
        for state in self.states:
            by_source[state.source].append(state)
        for source in sorted(by_source, key=lambda p: (p.rank, p)):
            governed = by_source[source]
            current = float(self.entries[(source, self.metric)])
            self.memo: dict[tuple[Position, float], tuple[tuple[int, int, int], dict[Position, float]]] = {}
            self.root = source
            self.root_states = governed
            if all(s.need is not None for s in governed):
                best = None
                for value in sorted({s.need for s in governed}, reverse=True):
                    cost, extra = self.solve(source, governed, value)
                    if best is None or cost < best[0]:
                        best = (cost, value, extra)
                _, value, extra = best
            else:
                value = current
                _, extra = self.solve(source, governed, current)
            if not _same(value, current):
                values[source] = value
            values.update(extra)
        return values

    def solve(self, at: Position, governed: list[CaseState], value: float) -> tuple[tuple[int, int, int], dict[Position, float]]:
        """Overrides below `at` so that evidenced cases fit, with `value` inherited.

        The cost is (cases left needing more than they get, cases left more than `band` times
        too loose, overrides added), compared in that order: never leave a case failing where an
        override could fix it, then never leave one loose, then add as few overrides as possible.
        """
        key = (at, value)
        if key in self.memo:
            return self.memo[key]
        misfits = [s for s in governed if s.need is not None and not self.fits(s.need, value)]
        level = None
        if misfits:
            level = next((i for i, p in enumerate(_refinements(misfits[0].case)) if p.rank > at.rank), None)
        if level is None:
            failing = sum(1 for s in misfits if s.need > value * (1 + _REL))
            result = ((failing, len(misfits) - failing, 0), {})
        else:
            total = (0, 0, 0)
            chosen: dict[Position, float] = {}
            for position in sorted({_refinements(s.case)[level] for s in misfits}):
                sub = [s for s in self.root_states if position.matches(s.case)]
                best_cost, best = self.solve(position, sub, value)  # no override here: inherit `value`
                inherited = True
                if self.creatable(position, sub):
                    for candidate in sorted({s.need for s in sub}, reverse=True):
                        (f, l, o), extra = self.solve(position, sub, candidate)
                        # At equal cost an override here beats one further down: coarser reads better.
                        if (f, l, o + 1) < best_cost or ((f, l, o + 1) == best_cost and inherited):
                            best_cost, best, inherited = (f, l, o + 1), {position: candidate, **extra}, False
                total = tuple(a + b for a, b in zip(total, best_cost))
                chosen.update(best)
            result = (total, chosen)
        self.memo[key] = result
        return result

    def creatable(self, position: Position, sub: list[CaseState]) -> bool:
        """Every case the override would govern has evidence and comes from the entry being calibrated."""
        if any(s.need is None for s in sub):
            return False
        captured = {s.case.id for s in self.states if position.matches(s.case) and s.source.rank < position.rank}
        return captured == {s.case.id for s in sub}


def _rows(catalogue: Catalogue, states: list[CaseState], effective, final_position, changed) -> list[Row]:
    suite_order = {s.name: i for i, s in enumerate(catalogue.suites)}
    dtype_order = {d: i for i, d in enumerate(DTYPES)}
    from e2egen import metrics

    metric_order = {m: i for i, m in enumerate(metrics.METRIC_NAMES)}
    groups: dict[tuple, list[CaseState]] = defaultdict(list)
    for s in states:
        position = final_position[(s.case.id, s.metric)]
        groups[(s.case.suite, s.case.dtype, s.metric, position)].append(s)
    rows = []
    for (suite, dtype, metric, position), group in groups.items():
        change = changed.get((position, metric))
        status: RowStatus = "kept" if change is None else ("new" if change.old is None else "changed")
        observed = [s.observed for s in group if s.need is not None]
        evidenced = len(observed)
        obs = max(observed) if observed else None
        current = tuple(sorted({s.current for s in group}))
        proposed = effective[(group[0].case.id, metric)]
        flags = []
        if any(s.failed for s in group):
            flags.append("FAILED")
        if obs is not None and obs > 0 and max(current) > LOOSE_FACTOR * obs:
            flags.append("LOOSE")
        if any(s.basis == "model" for s in group):
            flags.append("MODEL")
        if any(s.basis == "floor" and _same(s.need, proposed) for s in group):
            flags.append("FLOOR")
        if evidenced < len(group):
            reasons = sorted({s.missing for s in group if s.need is None})
            flags.append(f"EVIDENCE {evidenced}/{len(group)}: " + ", ".join(reasons))
        rows.append(Row(suite, dtype, metric, position.label(), status, len(group), evidenced, current, obs,
                        proposed, tuple(flags)))
    rows.sort(key=lambda r: (suite_order.get(r.suite, 99), dtype_order.get(r.dtype, 99), metric_order.get(r.metric, 99),
                             r.level))
    return rows


# -- output -------------------------------------------------------------------------
def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0 or math.isinf(value):
        return f"{value:g}"
    return f"{value:.3g}" if 1e-3 <= abs(value) < 1e4 else f"{value:.2e}"


def format_table(calibration: Calibration) -> str:
    # headroom = observed max / tolerance, as the store's margin: > 1 fails, near 0 is far from failing.
    header = ("suite", "dtype", "metric", "level", "cases", "current", "observed", "proposed", "headroom",
              "new headroom", "flags")
    lines = [header]
    for row in calibration.rows:
        level = ("+ " if row.status == "new" else "* " if row.status == "changed" else "  ") + row.level
        lines.append((row.suite, row.dtype, row.metric, level, f"{row.evidenced}/{row.cases}",
                      "/".join(_num(c) for c in row.current), _num(row.observed), _num(row.proposed),
                      _num(row.ratio_now), _num(row.ratio_new), " ".join(row.flags)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line[:-1], widths)) + ("  " + line[-1] if line[-1] else "")
                     for line in lines).rstrip() + "\n"


def summary(calibration: Calibration) -> str:
    c = calibration
    lines = [c.evidence.describe_runs()]
    changed = sum(1 for ch in c.changes if ch.old is not None)
    added = sum(1 for ch in c.changes if ch.old is None)
    lines.append(f"{changed} tolerances change, {added} overrides added "
                 f"(margin {c.margin:g}, band {c.band:g}; levels: * changed, + new override)")
    for ch in c.changes:
        old = "new" if ch.old is None else format_number(ch.old)
        lines.append(f"  {ch.position.label(ch.metric)}: {old} -> {format_number(ch.new)}")
    missing = [s for s in c.states if s.need is None]
    if missing:
        reasons = defaultdict(int)
        for s in missing:
            reasons[s.missing] += 1
        detail = ", ".join(f"{why}: {n}" for why, n in sorted(reasons.items()))
        lines.append(f"too little evidence, not calibrated: {len(missing)} of {len(c.states)} (case, metric) pairs ({detail})")
    if c.unresolved:
        lines.append(f"evidence needs looser tolerances than can be placed without guessing ({len(c.unresolved)}):")
        for s in c.unresolved[:10]:
            lines.append(f"  {s.case.id} {s.metric}: observed {_num(s.observed)}, needs {format_number(s.need)}, "
                         f"keeps {format_number(c.effective[(s.case.id, s.metric)])}")
    for name, n in sorted(c.not_calibrated.items()):
        lines.append(f"{name}: an allowance (a count), not calibrated ({n} cases)")
    for name, failures in sorted(c.allowance_failures.items()):
        examples = ", ".join(f"{cid} ({value:g})" for cid, value in failures[:3])
        lines.append(f"{name} above its allowance in {len(failures)} cases, e.g. {examples}: counts are not "
                     f"calibrated; exclude those cases, change their range, or allow the count (tolerances.{name} = N)")
    if c.stale:
        lines.append(f"{c.stale} recorded cases are not in the catalogue any more (ignored)")
    flagged = [r for r in c.rows if any(f in ("FAILED", "LOOSE") for f in r.flags)]
    if flagged:
        lines.append("FAILED: an observed value is above the current tolerance; LOOSE: an error "
                     f"{LOOSE_FACTOR:g}x the observed maximum would still pass; MODEL: bound_ratio above 1 "
                     "(the error model misses this kernel: check [bound]); FLOOR: set by the format's floor")
    return "\n".join(lines) + "\n"


# -- writing ------------------------------------------------------------------------
def apply_changes(text: str, catalogue: Catalogue, changes: Iterable[Change]) -> str:
    """The catalogue text with the changes made by tomlkit: everything else byte for byte."""
    import tomlkit
    from tomlkit.container import OutOfOrderTableProxy
    from tomlkit.items import InlineTable, Integer

    doc = tomlkit.parse(text)
    suites = {s.name: i for i, s in enumerate(catalogue.suites)}
    configs = {(s.name, c.name): j for s in catalogue.suites for j, c in enumerate(s.configs)}
    for change in changes:
        scope = change.position.scope
        table = doc
        if scope[0] in ("suite", "config"):
            table = doc["suite"][suites[scope[1]]]
        if scope[0] == "config":
            table = table["config"][configs[scope[1:]]]
        path = change.position.path(change.metric)
        container, parent, parent_key = table, None, None
        for i, part in enumerate(path[:-1]):
            if part not in container:
                break
            parent, parent_key, container = container, part, container[part]
        else:
            i = len(path) - 1
        rest = path[i:]
        if len(rest) == 1 and rest[0] in container:
            old = container[rest[0]]
            item = tomlkit.value(format_number(change.new, integer=isinstance(old, Integer)))
            item.trivia.indent, item.trivia.comment_ws = old.trivia.indent, old.trivia.comment_ws
            item.trivia.comment, item.trivia.trail = old.trivia.comment, old.trivia.trail
            container[rest[0]] = item
            continue
        value = tomlkit.value(format_number(change.new))
        if isinstance(container, InlineTable):
            # Rewrite the inline table as `{ a = 1, b = { c = 2 } }`, every existing value as it was written.
            entry = format_number(change.new)
            for part in reversed(rest[1:]):
                entry = f"{{ {part} = {entry} }}"
            items = [f"{key.as_string().strip()} = {item.as_string().strip()}" for key, item in container.value.body
                     if key is not None]
            new_table = tomlkit.value("{ " + ", ".join([*items, f"{rest[0]} = {entry}"]) + " }")
            new_table.trivia.indent, new_table.trivia.comment_ws = container.trivia.indent, container.trivia.comment_ws
            new_table.trivia.comment, new_table.trivia.trail = container.trivia.comment, container.trivia.trail
            parent[parent_key] = new_table
        elif isinstance(container, OutOfOrderTableProxy):
            # A table written in pieces across the file ([tolerances.f16] ... [tolerances.f16.bwd_data]) has no
            # append; assignment adds the key to its first piece.
            container[tomlkit.key(rest) if len(rest) > 1 else rest[0]] = value
        elif len(rest) > 1:
            container.append(tomlkit.key(rest), value)
        else:
            container.append(rest[0], value)
    return tomlkit.dumps(doc)


def check_written(text: str, path: str, calibration: Calibration) -> None:
    """The new text must resolve every case to the planned tolerances (else nothing is written)."""
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import parse_catalogue

    cases = {c.id: c for c in expand(parse_catalogue(text, path))}
    wrong = [(cid, metric, value, cases.get(cid) and cases[cid].tolerances.get(metric))
             for (cid, metric), value in calibration.effective.items()
             if cid not in cases or not _same(float(cases[cid].tolerances.get(metric, -1)), value)]
    if wrong:
        cid, metric, want, got = wrong[0]
        raise NightlyError(f"{path}: the edited catalogue would resolve {cid} {metric} to {got}, planned {want} "
                           f"({len(wrong)} mismatches); nothing written")


def diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), path, f"{path} (calibrated)", n=1))


def write_catalogue(path: str | Path, catalogue: Catalogue, calibration: Calibration, *, dry_run: bool = False) -> str:
    """Apply the calibration's changes to the catalogue file; returns the unified diff."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    new = apply_changes(text, catalogue, calibration.changes)
    check_written(new, str(path), calibration)
    if not dry_run and new != text:
        write_text_atomically(path, new)  # whole or not at all: a full disk leaves the catalogue as it was
    return diff(text, new, str(path))
