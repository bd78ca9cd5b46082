"""Run a study (study_config.py) and write the seed's tables, in Markdown and HTML.

The grid is cases x ranges x validation methods x reference variants. Per
(case, range) the inputs are drawn once (seed derived from the study's global
seed and "CASE_ID/RANGE"), each distinct kernel runs once, each reference
variant is computed once and shared by the validations that compare against
it. One record per (case, range, validation, variant): every metric, the
histogram, the verdict of the study's rule.

Tables (the primary validation and variant are the first listed):
  by range          per metric average and max, pass rate, by range (seed: "Input number magnitude",
                    "Underflow and overflow")
  variants          pass rate per reference variant and range
  validation        per metric average and max, pass rate, per validation method (seed: "Validation methods")
  direction         first metric average and pass rate per direction and range
  worst histogram   |ref-out|/|ref| buckets of the worst run under each variant (seed: "better validation function")
  all histogram     the same summed over every run
  cases             first metric and pass/fail of every case and range
"""
from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from e2egen.files import write_text_atomically
from e2egen.metrics.names import HISTOGRAM_BUCKETS, METRIC_NAMES

from e2egen.diagnose import tables as fmt
from e2egen.diagnose.study_config import StudyConfig, StudyValidation, resolve_kernel

SKIPPED, OK = "skipped", "ok"


@dataclass
class Record:
    case: str
    config: str
    op: str
    direction: str
    dtype: str
    layout: str
    range: str
    seed: int
    validation: str
    variant: str
    status: str = OK  # ok | skipped
    reason: str = ""
    values: dict[str, float] = field(default_factory=dict)  # every metric and count
    histogram: dict[str, int] = field(default_factory=dict)
    worst_rel_old: tuple[float, float] | None = None  # (ref, out) of the max_rel_diff_old element
    passed: bool | None = None  # the study's rule

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Record":
        data = dict(data)
        if data.get("worst_rel_old") is not None:
            data["worst_rel_old"] = tuple(data["worst_rel_old"])
        return cls(**data)


@dataclass
class Table:
    key: str
    title: str
    note: str
    header: list[str]
    rows: list[list[Any]]  # first cell a label; the rest raw values
    kinds: list[str]  # per row: num | seed | rate | bucket | text

    def cell(self, row: int, value: Any) -> str:
        kind = self.kinds[row]
        if value is None:
            return "–"
        if kind == "rate":
            return fmt.rate(value)
        if kind == "seed":
            return fmt.seed_number(value)
        if kind == "num":
            return fmt.num(value)
        return str(value)

    def formatted(self) -> list[list[str]]:
        return [[str(row[0]), *[self.cell(i, v) for v in row[1:]]] for i, row in enumerate(self.rows)]


@dataclass
class StudyResult:
    config: StudyConfig
    device: str
    records: list[Record]
    notes: list[str]
    seconds: float
    started: str
    versions: dict[str, str]
    tables: list[Table] = field(default_factory=list)

    @property
    def skipped_count(self) -> int:
        return sum(r.status == SKIPPED for r in self.records)


# -- running ----------------------------------------------------------------------------------
def _unavailable(validation: StudyValidation, device_type: str) -> str:
    from e2egen.diagnose.kernels import CUDA_ONLY

    if validation.reference == "device" and device_type == "cpu":
        return "no accelerator: the kernel runs on the CPU, so a float64 reference on the device is the CPU reference"
    for spec in (validation.kernel, validation.reference):
        if spec in CUDA_ONLY and device_type != "cuda":
            return f"kernel {spec!r}: {CUDA_ONLY[spec]}"
    return ""


def run_study(config: StudyConfig, device: str | None = None, progress: Callable[[str], None] | None = print) -> StudyResult:
    if not isinstance(config, StudyConfig):  # kind = "function_errors": the guide's table, on the CPU
        from e2egen.diagnose.function_errors import run_function_error_study

        return run_function_error_study(config, progress)
    import torch

    from e2egen import metrics
    from e2egen import runner
    from e2egen.errors import UsageError
    from e2egen.generator.cases import derive_seed
    from e2egen.runner.bound import product_sum_bound
    from e2egen.runner.inputs import generate_inputs, reference_inputs
    from e2egen.runner.reference import compute_reference

    try:
        dev = runner.select_device(device)
    except (runner.Skip, ValueError) as err:
        raise UsageError(f"--device: {err}") from None
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.perf_counter()
    notes = []
    unavailable = {v.name: _unavailable(v, dev.type) for v in config.validations}
    for name, reason in unavailable.items():
        if reason:
            notes.append(f"validation {name!r} skipped: {reason}")
    need_bound = "bound_ratio" in config.metrics or "bound_ratio" in config.rule
    objective = runner.BoundModel()
    cpu = torch.device("cpu")
    records: list[Record] = []
    total = len(config.cases) * len(config.ranges)
    step = 0
    for case in config.cases:
        for range_name, (lo, hi) in config.ranges.items():
            step += 1
            t0 = time.perf_counter()
            seed = derive_seed(config.seed, f"{case.id}/{range_name}")
            base = dict(case=case.id, config=case.config, op=case.op, direction=case.direction, dtype=case.dtype,
                        layout=case.layout, range=range_name, seed=seed)
            problem = runner.make_problem(case.op, case.direction, case.dtype, case.layout, case.params, (lo, hi), seed)
            inputs64 = reference_inputs(generate_inputs(problem), cpu)
            error_bound = product_sum_bound(problem, inputs64) if need_bound else None
            outputs: dict[str, Any] = {}
            refs: dict[tuple[str, str], Any] = {}

            def kernel_output(spec: str):
                impl = resolve_kernel(spec, case)
                key = impl or "torch"
                if key not in outputs:
                    try:
                        result = runner.run(problem, impl=impl, device=dev)
                        outputs[key] = result.out.detach().to(cpu)
                        refs.setdefault(("original-plain", "cpu"), result.ref.to(cpu))
                    except runner.Skip as skip:
                        outputs[key] = f"skipped: {skip.reason}"
                    except runner.KernelFailure as failure:
                        outputs[key] = f"kernel failed: {failure.reason}"
                return outputs[key]

            def reference(variant, where: str):
                options = variant.options("device" if where == "device" else "cpu")
                key = (repr(options), where)
                if key not in refs:
                    if options == runner.ReferenceOptions() and ("original-plain", "cpu") in refs:
                        refs[key] = refs[("original-plain", "cpu")]
                    else:
                        tensors = inputs64 if where == "cpu" else {n: t.to(dev) for n, t in inputs64.items()}
                        refs[key] = compute_reference(problem, tensors, options).value.to(cpu)
                return refs[key]

            for validation in config.validations:
                for index, variant in enumerate(config.variants):
                    record = Record(**base, validation=validation.name, variant=variant.name)
                    records.append(record)
                    if unavailable[validation.name]:
                        record.status, record.reason = SKIPPED, unavailable[validation.name]
                        continue
                    if validation.reference_is_kernel and index > 0:
                        record.status, record.reason = SKIPPED, "reference variants do not apply to a kernel reference"
                        continue
                    out = kernel_output(validation.kernel)
                    if isinstance(out, str):
                        record.status, record.reason = SKIPPED, out
                        continue
                    if validation.reference_is_kernel:
                        other = kernel_output(validation.reference)
                        if isinstance(other, str):
                            record.status, record.reason = SKIPPED, f"reference kernel: {other}"
                            continue
                        ref, ftz = other.to(torch.float64), False
                    else:
                        ref, ftz = reference(variant, validation.reference), variant.ftz
                    bound = None
                    if need_bound:
                        bound = error_bound.evaluate(objective, ref)
                    comparison = metrics.compare(ref, out, dtype=problem.out_dtype, ftz=ftz, bound=bound)
                    # A maximum over no element (everything overflowed) is undefined, not 0: left out.
                    record.values = {name: getattr(comparison, name) for name in METRIC_NAMES
                                     if getattr(comparison, name) is not None and comparison.compared}
                    record.values.update(comparison.counts)
                    record.values.update(elements=comparison.n, compared=comparison.compared)
                    record.histogram = dict(comparison.histogram)
                    worst = comparison.worst.get("max_rel_diff_old")
                    record.worst_rel_old = (worst.ref, worst.out) if worst is not None else None
                    record.passed = comparison.check(config.rule).passed
            if progress is not None:
                first = config.metrics[0]
                primary = [r for r in records[-len(config.validations) * len(config.variants):]
                           if r.status == OK and r.validation == config.validations[0].name and r.variant == config.variants[0].name]
                shown = "skipped"
                if primary:
                    values = primary[0].values
                    shown = f"{first} {fmt.num(values.get(first))}" + (f", overflow {values['overflow']}" if values.get("overflow") else "")
                    shown += " pass" if primary[0].passed else " FAIL"
                progress(f"[{step}/{total}] {case.id} {range_name}: {shown} ({time.perf_counter() - t0:.1f} s)")
    versions = {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine()}
    if dev.type == "cuda":
        versions["cuda"] = str(torch.version.cuda)
    from e2egen.runner.device import device_name

    result = StudyResult(config, device_name(dev), records, notes,
                         time.perf_counter() - started, started_at, versions)
    result.tables = build_tables(config, records, notes)
    return result


# -- aggregation --------------------------------------------------------------------------------
def select(records: Sequence[Record], **axes) -> list[Record]:
    return [r for r in records if r.status == OK and all(getattr(r, k) == v for k, v in axes.items())]


def average_and_max(records: Sequence[Record], metric: str) -> tuple[float | None, float | None]:
    values = [r.values[metric] for r in records if metric in r.values and math.isfinite(r.values[metric])]
    if not values:
        return None, None
    return sum(values) / len(values), max(values)


def pass_rate(records: Sequence[Record]) -> float | None:
    judged = [r for r in records if r.passed is not None]
    return sum(r.passed for r in judged) / len(judged) if judged else None


def _metric_rows(config: StudyConfig, groups: Sequence[Sequence[Record]]) -> tuple[list[list[Any]], list[str]]:
    rows, kinds = [], []
    for metric in config.metrics:
        pairs = [average_and_max(g, metric) for g in groups]
        rows.append([f"{metric} ave", *[p[0] for p in pairs]])
        rows.append([f"{metric} max", *[p[1] for p in pairs]])
        kinds += ["seed", "seed"]
    rows.append(["pass rate", *[pass_rate(g) for g in groups]])
    rows.append(["runs", *[len(g) for g in groups]])
    rows.append(["runs with overflow", *[sum(1 for r in g if r.values.get("overflow")) for g in groups]])
    kinds += ["rate", "text", "text"]
    return rows, kinds


def rule_text(config: StudyConfig) -> str:
    return " and ".join(f"{k} <= {v:g}" for k, v in config.rule.items())


def build_tables(config: StudyConfig, records: Sequence[Record], notes: Sequence[str] = ()) -> list[Table]:
    validation0, variant0 = config.validations[0].name, config.variants[0].name
    ranges = list(config.ranges)
    first = config.metrics[0]
    rule = rule_text(config)
    tables = []

    groups = [select(records, validation=validation0, variant=variant0, range=r) for r in ranges]
    rows, kinds = _metric_rows(config, groups)
    tables.append(Table("by_range", "Metrics by input range",
                        f"Average and maximum over all cases; validation {validation0!r}, reference {variant0!r}; "
                        f"pass = {rule} (and no overflow, inf or NaN mismatch).",
                        ["", *[f"{r} [{config.ranges[r][0]:g}, {config.ranges[r][1]:g}]" for r in ranges]], rows, kinds))

    rows = [[v.name, *[pass_rate(select(records, validation=validation0, variant=v.name, range=r)) for r in ranges],
             pass_rate(select(records, validation=validation0, variant=v.name))] for v in config.variants]
    rows += [[f"{first} ave ({v.name})", *[average_and_max(select(records, validation=validation0, variant=v.name, range=r), first)[0]
                                            for r in ranges],
              average_and_max(select(records, validation=validation0, variant=v.name), first)[0]] for v in config.variants]
    tables.append(Table("variants", "Pass rate by reference variant and range",
                        f"Validation {validation0!r}; pass = {rule}.", ["reference variant", *ranges, "all"], rows,
                        ["rate"] * len(config.variants) + ["seed"] * len(config.variants)))

    groups = [select(records, validation=v.name, variant=variant0) for v in config.validations]
    rows, kinds = _metric_rows(config, groups)
    skipped = [f"{v.name}: {records_reason(records, v.name)}" for v in config.validations if not groups[config.validations.index(v)]]
    tables.append(Table("validation", "Validation methods",
                        f"All ranges; reference variant {variant0!r}; kernel and reference of each: "
                        + "; ".join(f"{v.name} = kernel {v.kernel}, reference {v.reference}" for v in config.validations)
                        + (". Not run: " + "; ".join(skipped) if skipped else "") + ".",
                        ["", *[v.name for v in config.validations]], rows, kinds))

    directions = list(dict.fromkeys(c.direction for c in config.cases))
    rows, kinds = [], []
    for d in directions:
        rows.append([f"{d}: {first} ave", *[average_and_max(select(records, validation=validation0, variant=variant0, range=r,
                                                                    direction=d), first)[0] for r in ranges]])
        rows.append([f"{d}: {first} max", *[average_and_max(select(records, validation=validation0, variant=variant0, range=r,
                                                                    direction=d), first)[1] for r in ranges]])
        rows.append([f"{d}: pass rate", *[pass_rate(select(records, validation=validation0, variant=variant0, range=r,
                                                            direction=d)) for r in ranges]])
        kinds += ["seed", "seed", "rate"]
    tables.append(Table("direction", "By direction and range", f"Validation {validation0!r}, reference {variant0!r}.",
                        ["", *ranges], rows, kinds))

    worst = worst_run(records, validation0, variant0, first)
    if worst is not None:
        per_variant = [next((r for r in select(records, validation=validation0, variant=v.name, case=worst.case,
                                               range=worst.range)), None) for v in config.variants]
        tables.append(_histogram_table("worst_histogram", f"Histogram of the worst run: {worst.case} {worst.range}",
                                       f"Buckets of |ref − out| / |ref| per reference variant for the run with the largest {first} "
                                       f"({fmt.num(worst.values.get(first))}); validation {validation0!r}. "
                                       "Last rows: the max_rel_diff_old element (the seed's max / cpuVal / gpuVal).",
                                       config, per_variant))
    summed = []
    for v in config.variants:
        rs = select(records, validation=validation0, variant=v.name)
        total = {b: sum(r.histogram.get(b, 0) for r in rs) for b in HISTOGRAM_BUCKETS}
        summed.append(total)
    rows = [[b, *[(h[b], sum(h.values())) for h in summed]] for b in HISTOGRAM_BUCKETS]
    tables.append(Table("all_histogram", "Histogram of all runs", f"Elements of every run summed; validation {validation0!r}.",
                        ["|ref − out| / |ref|", *[v.name for v in config.variants]],
                        [[b, *[fmt.bucket_cell(c, t) for c, t in cells]] for b, *cells in rows], ["text"] * len(rows)))

    rows = []
    for case in config.cases:
        cells = []
        for r in ranges:
            rec = next(iter(select(records, validation=validation0, variant=variant0, case=case.id, range=r)), None)
            if rec is None:
                cells.append("–")
                continue
            text = fmt.num(rec.values.get(first)) if first in rec.values else "–"
            if rec.values.get("overflow"):
                text += f" (overflow {rec.values['overflow']}/{rec.values.get('elements', '?')})"
            cells.append(f"{text} {'✓' if rec.passed else '✗'}")
        rows.append([case.id, *cells])
    tables.append(Table("cases", f"Every case: {first} and pass (✓) / fail (✗); overflowing elements / all",
                        f"Validation {validation0!r}, reference {variant0!r}.", ["case", *ranges], rows, ["text"] * len(rows)))
    return tables


def records_reason(records: Sequence[Record], validation: str) -> str:
    reasons = [r.reason for r in records if r.validation == validation and r.reason]
    return reasons[0] if reasons else "no run"


def worst_run(records: Sequence[Record], validation: str, variant: str, metric: str) -> Record | None:
    candidates = [r for r in select(records, validation=validation, variant=variant)
                  if metric in r.values and math.isfinite(r.values[metric])]
    return max(candidates, key=lambda r: r.values[metric]) if candidates else None


def _histogram_table(key: str, title: str, note: str, config: StudyConfig, per_variant: Sequence[Record | None]) -> Table:
    rows, kinds = [], []
    for b in HISTOGRAM_BUCKETS:
        row = [b]
        for rec in per_variant:
            row.append("–" if rec is None else fmt.bucket_cell(rec.histogram.get(b, 0), sum(rec.histogram.values())))
        rows.append(row)
        kinds.append("text")
    rows.append(["max_rel_diff_old", *[None if rec is None else rec.values.get("max_rel_diff_old") for rec in per_variant]])
    rows.append(["ref", *[None if rec is None or rec.worst_rel_old is None else rec.worst_rel_old[0] for rec in per_variant]])
    rows.append(["out", *[None if rec is None or rec.worst_rel_old is None else rec.worst_rel_old[1] for rec in per_variant]])
    kinds += ["num", "num", "num"]
    return Table(key, title, note, ["|ref − out| / |ref|", *[v.name for v in config.variants]], rows, kinds)


# -- writing ----------------------------------------------------------------------------------
def command_line(config: StudyConfig, out: Path | None = None) -> str:
    return f"e2egen study {config.path}" + (f" --out {out}" if out is not None else "")


def render_markdown(result: StudyResult, out: Path | None = None) -> str:
    c = result.config
    lines = [f"# {c.title}", ""]
    if c.description:
        lines += [c.description.strip(), ""]
    lines += [f"Made by `{command_line(c, out)}` on {result.device} ({', '.join(f'{k} {v}' for k, v in result.versions.items())}), "
              f"{result.started}, {result.seconds:.0f} s. {len(c.cases)} cases x {len(c.ranges)} ranges x "
              f"{len(c.validations)} validation methods x {len(c.variants)} reference variants; "
              f"pass = {rule_text(c)}; global seed {c.seed}"
              + (f"; shape parameters overridden: {dict(c.params_override)}" if c.params_override else "") + ".", ""]
    for note in result.notes:
        lines += [f"- {note}"]
    if result.notes:
        lines.append("")
    for table in result.tables:
        lines += [f"## {table.title}", "", table.note, ""]
        lines += fmt.markdown_table(table.header, table.formatted())
        lines.append("")
    return "\n".join(lines)


def render_html(result: StudyResult, out: Path | None = None) -> str:
    from html import escape

    c = result.config
    css = _css()
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{escape(c.title)}</title>",
             f"<style>{css}</style></head><body>", f"<h1>{escape(c.title)}</h1>"]
    if c.description:
        parts.append(f"<p>{escape(c.description.strip())}</p>")
    parts.append(f'<p class="meta">Made by <code>{escape(command_line(c, out))}</code> on {escape(result.device)} '
                 f"({escape(', '.join(f'{k} {v}' for k, v in result.versions.items()))}), {escape(result.started)}, "
                 f"{result.seconds:.0f} s; pass = {escape(rule_text(c))}; global seed {c.seed}.</p>")
    for note in result.notes:
        parts.append(f'<p class="note">{escape(note)}</p>')
    plot = _histogram_plot(result)
    for table in result.tables:
        parts.append(f"<h2>{escape(table.title)}</h2><p class=\"note\">{escape(table.note)}</p>")
        if table.key == "all_histogram" and plot:
            parts.append(plot)
        parts.append(fmt.html_table(table.header, table.formatted()))
    parts.append("</body></html>")
    return "\n".join(parts)


def _css() -> str:
    from e2egen.nightly.report.html import CSS  # the nightly report's look (nightly and matplotlib are always installed)

    return CSS


def _histogram_plot(result: StudyResult) -> str:
    """The summed histograms as a bar chart (the nightly report's plot), or '' when unavailable."""
    try:
        import base64

        from e2egen.nightly.report.aggregate import HistogramColumn
        from e2egen.nightly.report.plots import histogram_plot
    except Exception:  # pragma: no cover - nightly is optional here
        return ""
    validation0 = result.config.validations[0].name
    columns = []
    for v in result.config.variants:
        rs = select(result.records, validation=validation0, variant=v.name)
        counts = {b: sum(r.histogram.get(b, 0) for r in rs) for b in HISTOGRAM_BUCKETS}
        columns.append(HistogramColumn(v.name, counts, None))
    try:
        png = histogram_plot(columns, "Relative difference by reference variant (all runs)")
    except Exception:  # pragma: no cover
        return ""
    if not png:
        return ""
    return f'<img alt="histogram by reference variant" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def write_study(result: StudyResult, out: str | Path) -> list[Path]:
    if not isinstance(result, StudyResult):  # another kind of study writes its own files
        return result.write(out)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md, html, data = out / "study.md", out / "study.html", out / "results.json"
    write_text_atomically(md, render_markdown(result, out))
    write_text_atomically(html, render_html(result, out))
    payload = {
        "title": result.config.title, "study": result.config.path, "device": result.device, "versions": result.versions,
        "started": result.started, "seconds": result.seconds, "seed": result.config.seed, "rule": dict(result.config.rule),
        "metrics": list(result.config.metrics), "ranges": {k: list(v) for k, v in result.config.ranges.items()},
        "validations": [asdict(v) for v in result.config.validations], "variants": [asdict(v) for v in result.config.variants],
        "notes": result.notes, "records": [r.to_dict() for r in result.records],
    }
    write_text_atomically(data, json.dumps(payload, indent=1, allow_nan=True))
    return [md, html, data]


__all__ = ["Record", "StudyResult", "Table", "average_and_max", "build_tables", "pass_rate", "run_study",
           "select", "write_study"]
