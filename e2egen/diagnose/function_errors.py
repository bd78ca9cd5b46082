"""Run a `kind = "function_errors"` study (function_errors_config.py) and write its tables.

Per function: every f16 input of the study's set (`inputs`: every finite normal f16 value and 0, or every
finite one) inside the function's domain whose f32 result f16 can hold (|result| <= 65504: the guide's
figures have no overflow, its largest absolute error is 16, half an ulp at 65504). The "FP16 result" is
torch's f16 kernel on those inputs, the "FP32 result" torch's f32 kernel on the same values; the four
statistics are the guide's: max and mean of |f16 − f32| and of |f16 − f32| / |f32| (the relative ones over
f32 results != 0). For functions e2egen has an op for, the interval verdict: how many f16 results lie
outside e2egen's f32-computed acceptance interval rounded to f16, for torch's kernel and for the
function computed step by step in f16 (function_table.py).

Conversion ranges (section 3.4): f32 values evenly spaced in bit pattern over [low, high] (as every f32
value would be, each binade weighted alike), `conversion_samples` of them, rounded to f16.
"""
from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from e2egen.files import write_text_atomically

from e2egen.diagnose import tables as fmt
from e2egen.diagnose.function_errors_config import STATISTICS, FunctionErrorStudy
from e2egen.diagnose.function_table import FUNCTIONS, TableFunction

F16_MAX = 65504.0
F16_MIN_NORMAL = 2.0 ** -14


@dataclass
class FunctionRecord:
    function: str
    group: str
    inputs: int
    statistics: dict[str, float]
    op: str | None = None
    outside_torch: int | None = None  # torch's f16 results outside the f32-computed interval
    outside_in_f16: int | None = None  # the f16-step results outside it
    in_f16: str = ""


@dataclass
class ConversionRecord:
    name: str
    low: float
    high: float
    samples: int
    statistics: dict[str, float]


@dataclass
class FunctionErrorResult:
    config: FunctionErrorStudy
    functions: list[FunctionRecord]
    conversions: list[ConversionRecord]
    seconds: float
    started: str
    versions: dict[str, str] = field(default_factory=dict)
    skipped_count: int = 0

    @property
    def records(self) -> list:
        return [*self.functions, *self.conversions]

    def write(self, out: str | Path) -> list[Path]:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        md, data = out / "study.md", out / "results.json"
        write_text_atomically(md, render_markdown(self, out))
        payload = {"title": self.config.title, "study": self.config.path, "kind": "function_errors",
                   "inputs": self.config.inputs, "versions": self.versions, "started": self.started,
                   "seconds": self.seconds, "functions": [asdict(r) for r in self.functions],
                   "conversions": [asdict(r) for r in self.conversions]}
        write_text_atomically(data, json.dumps(payload, indent=1, allow_nan=True))
        return [md, data]


# -- measuring -----------------------------------------------------------------------------------
def f16_inputs(which: str) -> torch.Tensor:
    """Every finite f16 value (which = "finite"), or only the normal ones and 0 ("normal"), as f16."""
    values = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    keep = torch.isfinite(values)
    if which == "normal":
        keep &= (values.abs() >= F16_MIN_NORMAL) | (values == 0)
    return values[keep]


def error_statistics(low: torch.Tensor, high: torch.Tensor) -> dict[str, float]:
    """The guide's four figures of `low` (the f16 result) against `high` (the f32 one), float64 tensors."""
    absolute = (low - high).abs()
    nonzero = high != 0
    relative = absolute[nonzero] / high[nonzero].abs()
    return {"max abs": float(absolute.max()), "max rel": float(relative.max()) if relative.numel() else 0.0,
            "mean abs": float(absolute.mean()), "mean rel": float(relative.mean()) if relative.numel() else 0.0}


def measure_function(function: TableFunction, group: str, inputs16: torch.Tensor) -> FunctionRecord:
    x64 = inputs16.to(torch.float64)
    x16 = inputs16[function.domain(x64)]
    wide = function.torch_form(x16.float()).double()
    narrow = function.torch_form(x16).double()
    keep = torch.isfinite(wide) & (wide.abs() <= F16_MAX) & torch.isfinite(narrow)
    x16, wide, narrow = x16[keep], wide[keep], narrow[keep]
    record = FunctionRecord(function.name, group, int(x16.numel()), error_statistics(narrow, wide), function.op)
    if function.op is not None:
        x = x16.double()
        lo, hi = acceptance_interval(function.op, x)
        step_result = function.in_f16(x)
        record.outside_torch = int(((narrow < lo) | (narrow > hi)).sum())
        record.outside_in_f16 = int(((step_result < lo) | (step_result > hi) | step_result.isnan()).sum())
        record.in_f16 = function.in_f16_text
    return record


def acceptance_interval(op: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """e2egen's interval for op at x (reciprocal: div(1, x)), computed in f32 and rounded outward to f16."""
    from e2egen.runner.intervals import Interval, IntervalContext, to_output
    from e2egen.runner.ops.math_functions import FUNCTIONS as OPS

    arguments = [Interval.point(torch.ones_like(x)), Interval.point(x)] if op == "div" else [Interval.point(x)]
    interval = to_output(OPS[op].interval(*arguments, IntervalContext(compute="f32")), "f16")
    return interval.lo, interval.hi


def measure_conversion(low: float, high: float, samples: int) -> tuple[int, dict[str, float]]:
    bits = torch.tensor([low, high], dtype=torch.float32).view(torch.int32).tolist()
    step = max(1, (bits[1] - bits[0]) // samples)
    values = torch.arange(bits[0], bits[1] + 1, step, dtype=torch.int32).view(torch.float32)
    return int(values.numel()), error_statistics(values.to(torch.float16).double(), values.double())


def run_function_error_study(config: FunctionErrorStudy, progress: Callable[[str], None] | None = print) -> FunctionErrorResult:
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.perf_counter()
    inputs16 = f16_inputs(config.inputs)
    functions = []
    for group in config.groups:
        for name in group.functions:
            functions.append(measure_function(FUNCTIONS[name], group.name, inputs16))
            if progress is not None:
                stats = functions[-1].statistics
                progress(f"{name}: max abs {fmt.num(stats['max abs'])}, max rel {fmt.num(stats['max rel'])}")
    conversions = []
    for conversion in config.conversions:
        count, stats = measure_conversion(conversion.low, conversion.high, config.conversion_samples)
        conversions.append(ConversionRecord(conversion.name, conversion.low, conversion.high, count, stats))
        if progress is not None:
            progress(f"f32 -> f16 {conversion.name}: max rel {fmt.num(stats['max rel'])}")
    versions = {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine()}
    return FunctionErrorResult(config, functions, conversions, time.perf_counter() - started, started_at, versions)


# -- writing -------------------------------------------------------------------------------------
def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return fmt.num(low) if fmt.num(low) == fmt.num(high) else f"{fmt.num(low)}~{fmt.num(high)}"


def render_markdown(result: FunctionErrorResult, out: Path | None = None) -> str:
    c = result.config
    inputs_text = ("every finite normal f16 value (|x| >= 2^-14) and 0" if c.inputs == "normal"
                   else "every finite f16 value, subnormals included")
    lines = [f"# {c.title}", ""]
    if c.description:
        lines += [c.description.strip(), ""]
    lines += [f"Made by `e2egen study {c.path}" + (f" --out {out}" if out is not None else "") + f"` "
              f"({', '.join(f'{k} {v}' for k, v in result.versions.items())}), {result.started}, {result.seconds:.1f} s. "
              f"Inputs: {inputs_text}, inside each function's domain, where the f32 result is within f16's range. "
              "FP16 result: torch's f16 kernel (CPU: computes in f32, rounds once); FP32 result: torch's f32 kernel "
              "on the same values.", ""]
    if c.groups:
        lines += ["## FP16 against FP32 (section 3.3)", "",
                  "Each cell: smallest~largest over the group's functions, as the guide gives them.", ""]
        rows = []
        for group in c.groups:
            records = [r for r in result.functions if r.group == group.name]
            if group.guide:
                rows.append([group.name, "guide", *group.guide])
            rows.append([group.name if not group.guide else "", "e2egen study",
                         *[_span([r.statistics[s] for r in records]) for s in STATISTICS]])
        lines += fmt.markdown_table(["functions", "source", *STATISTICS], rows) + [""]
        lines += ["## Per function, with e2egen's interval verdict", "",
                  "Outside: f16 results outside e2egen's acceptance interval computed in f32 and rounded outward "
                  "to f16 (runner/intervals.py), for torch's kernel and for the function computed step by step in "
                  "f16 (each step rounded to f16); – where e2egen has no op.", ""]
        rows = [[r.function, str(r.inputs), *[fmt.num(r.statistics[s]) for s in STATISTICS],
                 "–" if r.op is None else str(r.outside_torch),
                 "–" if r.op is None else f"{r.outside_in_f16} ({r.in_f16})"] for r in result.functions]
        lines += fmt.markdown_table(["function", "inputs", *STATISTICS, "outside: torch f16", "outside: computed in f16"],
                                    rows) + [""]
    if result.conversions:
        lines += ["## FP32 → FP16 conversion (section 3.4)", "",
                  f"f32 values evenly spaced in bit pattern over each range (every f32 value would weight each binade "
                  f"alike; {c.conversion_samples} samples asked per range).", ""]
        rows = []
        for record, conversion in zip(result.conversions, c.conversions):
            label = f"{record.name} [{record.low:g}, {record.high:g}]"
            if conversion.guide:
                rows.append([label, "guide", *conversion.guide])
            rows.append(["" if conversion.guide else label, f"e2egen study ({record.samples} values)",
                         *[fmt.num(record.statistics[s]) for s in STATISTICS]])
        lines += fmt.markdown_table(["range", "source", *STATISTICS], rows) + [""]
    return "\n".join(lines)


__all__ = ["FunctionErrorResult", "acceptance_interval", "error_statistics", "f16_inputs", "measure_conversion",
           "run_function_error_study"]
