"""The text `e2egen explain` prints for an Explanation."""
from __future__ import annotations

from e2egen.generator.execute import repro_command

from e2egen.diagnose.coords import coordinate_names
from e2egen.diagnose.tables import histogram_rows, num, text_table

VARIANT_COLUMNS = ("max_eps_diff", "max_ulp_diff", "max_abs_diff", "max_rel_diff", "max_rel_diff_old", "rms", "bound_ratio")


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.3g}%"


def _reproduced(miss) -> str:
    return "-" if miss is None else f"{100 * (1 - miss):.4g}%"


def _verdict_cell(verdict) -> str:
    return "-" if verdict is None else ("PASS" if verdict.passed else "FAIL")


def _counts(c) -> str:
    parts = [f"{name} {getattr(c, name)}" for name in ("overflow", "inf_mismatch", "nan_mismatch") if getattr(c, name)]
    if c.ftz and c.ftz_allowed:
        parts.append(f"ftz-accepted {c.ftz_allowed}")
    return ", ".join(parts)


def _metric_cells(c) -> list[str]:
    return [num(getattr(c, name)) for name in VARIANT_COLUMNS]


def render(ex, catalogue: str | None = None) -> str:
    case = ex.case
    lines = [f"explain {case.id}  seed={case.seed} device={ex.device} kernel={ex.impl}"]
    if ex.problem is not None:
        lines.append(f"  {ex.problem.describe()}; reduction K = {ex.problem.reduction_size}")
    tolerances = ", ".join(f"{k} <= {v:g}" for k, v in case.tolerances.items())
    bound = f" (bound: acc {case.bound.acc}, lambda {case.bound.lam:g})" if case.bound and "bound_ratio" in case.tolerances else ""
    lines.append(f"  tolerances: {tolerances}{bound}")
    if ex.skipped:
        lines.append(f"SKIPPED: {ex.skipped}")
        return "\n".join(lines)
    if ex.kernel_failure:
        lines.append(f"FAILED: kernel failed: {ex.kernel_failure}")
        lines += _findings(ex)
        lines.append(f"repro: {repro_command(case, ex.device, catalogue)}")
        return "\n".join(lines)
    verdict = ex.verdict
    lines.append(f"verdict: {verdict.summary}")
    for violation in ex.violations:
        lines.append(f"  but the case FAILS on its arithmetic: requirement broken: {violation.message}")
    if ex.passed and ex.findings and ex.findings[0].cause != "nothing to explain":
        lines.append("  (the case passes as `e2egen run` judges it; the findings explain its error against the plain "
                     "reference and an f32 accumulator)")
    lines.append("")
    lines += _findings(ex)
    lines.append("")
    if ex.arithmetic is not None:
        lines += _arithmetic(ex)
        lines.append("")
    lines.append("Reference variants (same inputs, same kernel output; verdict = the case's tolerances; "
                 "bound_ratio = f32-accumulator model)")
    rows = []
    for row in ([ex.case_row] if ex.case_row else []) + ex.rows:
        if not row.computed:
            rows.append([row.label, "-", *(["-"] * len(VARIANT_COLUMNS)), "-", f"not computed: {row.note}"])
            continue
        rows.append([row.label, _verdict_cell(row.verdict), *_metric_cells(row.comparison), _pct(row.miss), _counts(row.comparison)])
    search = ex.search
    if search is not None and search.full is not None:
        row = search.full
        rows.append([row.label, _verdict_cell(row.verdict), *_metric_cells(row.comparison), _pct(row.miss), _counts(row.comparison)])
    lines += text_table(["variant", "verdict", *VARIANT_COLUMNS, "not reproduced", ""], rows)
    if ex.plain.low_acc_ratio is not None:
        lines.append(f"  bound_ratio of plain under an {ex.problem.out_dtype} accumulator: {num(ex.plain.low_acc_ratio)}")
    if ex.plain.measured_ratio is not None:
        lines.append(f"  bound_ratio of plain under the measured arithmetic: {num(ex.plain.measured_ratio)}")
    if search is not None:
        lines.append("")
        lines.append(f"Accumulator models ({search.tried} tried on {search.sample} of {search.elements} elements, "
                     f"the worst included; plain there: max_eps_diff {num(search.plain_eps)}, bound_ratio "
                     f"{num(search.plain_ratio)}, reproduces {_reproduced(search.plain_miss)})")
        lines += text_table(["model", "max_eps_diff", "bound_ratio", "reproduces"],
                            [[m.describe(), num(e), num(r), _reproduced(miss)] for m, e, r, miss in search.ranked[:3]])
        if search.full is not None:
            lines.append(f"  the best over all {search.elements} elements: {search.full.label.removeprefix('model: ')} "
                         f"reproduces {_reproduced(search.full.miss)} of elements")
        elif search.ranked:
            lines.append("  (the best model is too costly to compute over every element; its figures are on the sample)")
        from e2egen.diagnose.causes import REPRODUCE_MAX_MISS
        lines.append(f"  (a model is named as the cause only when it reproduces >= {_reproduced(REPRODUCE_MAX_MISS)} "
                     f"of elements bit for bit)")
    if ex.rms_margin is not None:
        lines.append("")
        lines.append(f"Other seeds: {ex.rms_margin.describe()}")
        lines += [f"  not run: {note}" for note in ex.rms_margin.notes]
    if ex.ranges:
        lines.append("")
        lines.append("Input ranges (the kernel rerun on fresh inputs of each range, plain reference)")
        range_rows = []
        for r in ex.ranges:
            if r.comparison is None:
                range_rows.append([r.label, "-", *(["-"] * len(VARIANT_COLUMNS)), r.note])
            else:
                range_rows.append([r.label, _verdict_cell(r.verdict), *_metric_cells(r.comparison), _counts(r.comparison)])
        lines += text_table(["range", "verdict", *VARIANT_COLUMNS, ""], range_rows)
    lines.append("")
    lines += _histogram(ex)
    lines.append("")
    lines += _worst(ex)
    if ex.probe is not None:
        lines.append("")
        lines.append(ex.probe.describe())
    lines.append("")
    lines.append("time: " + ", ".join(f"{k} {v:.2f} s" for k, v in ex.timings.items()))
    lines.append(f"repro: {repro_command(case, ex.device, catalogue)}")
    return "\n".join(lines)


def _arithmetic(ex) -> list[str]:
    m = ex.arithmetic
    a = m.arithmetic
    lines = ["Arithmetic (probes)",
             f"  {a.describe()}",
             f"  cell {m.cell} on {m.device.device}, kernel {m.device.impl}: {m.origin}"]
    if not m.measured:
        lines.append("  (not measured: the bounds assume the dtype's arithmetic)")
    for text in a.unexplained:
        lines.append(f"  UNEXPLAINED (a kernel bug): {text}")
    for note in a.notes:
        lines.append(f"  note: {note}")
    for violation in ex.violations:
        lines.append(f"  REQUIREMENT BROKEN: {violation.message}")
    for violation, entry in ex.accepted:
        lines.append(f"  accepted deviation: {violation.message} — {entry.describe()}")
    return lines


def _findings(ex) -> list[str]:
    lines = []
    for i, f in enumerate(ex.findings, 1):
        tag = "" if f.confidence == "confirmed" else f" ({f.confidence})"
        lines.append(f"{'Cause' if i == 1 else 'Also'}: {f.headline}{tag}")
        lines += [f"  - {e}" for e in f.evidence]
        lines += [f"  remedy: {r}" for r in f.remedy]
    return lines


def _histogram(ex) -> list[str]:
    rows = [r for r in ([ex.case_row] if ex.case_row else []) + ex.rows if r.computed]
    if ex.search is not None and ex.search.full is not None:
        rows.append(ex.search.full)
    labels = [r.label.replace("model: ", "model") if r.key == "model" else r.label for r in rows]
    table = histogram_rows([r.comparison.histogram for r in rows])
    extra = []
    for name in ("max_rel_diff_old",):
        worst = [r.comparison.worst.get(name) for r in rows]
        extra.append([f"max {name}", *[num(getattr(r.comparison, name)) for r in rows]])
        extra.append(["  its ref", *[num(w.ref, 10) if w else "-" for w in worst]])
        extra.append(["  its out", *[num(w.out, 10) if w else "-" for w in worst]])
    header = ["|ref-out|/|ref|", *[_short(label) for label in labels]]
    return ["Relative-difference histogram per reference (the seed's \"better validation function\" table)"] + \
        text_table(header, table + extra)


def _short(label: str) -> str:
    label = label.replace("plain float64", "plain").replace("accumulate = ", "acc ").replace("reference on the device", "device")
    if label.startswith("model"):
        return "best model"
    if label.startswith("case reference"):
        return "case ref"
    return label.replace(" (whole)", "")


def _worst(ex) -> list[str]:
    if not ex.worst:
        return ["Worst elements: none differ"]
    names = ", ".join(coordinate_names(ex.problem))
    lines = [f"Worst elements (plain reference; logical coordinates ({names}); eps = |ref-out|/ulp(ref); "
             f"ulps = representable {ex.problem.out_dtype} values between round(ref) and out)"]
    rows = [[w.position, num(w.ref, 8), num(w.out, 8), num(w.abs_diff), num(w.eps), num(w.ulp_distance),
             "yes" if w.subnormal else "no", num(w.condition)] for w in ex.worst]
    lines += text_table(["position", "ref", "out", "|ref-out|", "eps", "ulps", "subnormal", "Σ|a·b|/|ref|"], rows)
    return lines

