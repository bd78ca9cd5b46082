"""STUDY.toml: the grid of a numerics study (the seed's experiment), parsed and validated.

    title = "..."                      # optional
    catalogue = "../configs.toml"      # relative to the study file (default: configs.toml in the working directory)
    seed = 20221116                    # global seed for input draws (default: the catalogue's)
    rule = { max_eps_diff = 1.0 }      # what "passes" means: a tolerance table (default: max_eps_diff = 1)
    metrics = ["max_eps_diff", ...]    # rows of the tables (default: the seed's five)

    [ranges]                           # the grid's input ranges, in order
    r0 = [-1.0, 1.0]

    [cases]                            # cases of the catalogue (their own range is replaced by the grid's)
    select = ["resnet50/conv2d/*/*/f16/nhwc/*"]   # globs on case ids, any may match
    filter = "config=l1-1x1-64,l3-3x3-256"        # `e2egen list --filter` terms, all must match
    params = { n = 1 }                            # shape parameters overridden in every selected case

    [[case]]                           # inline cases (id study/OP/NAME/DIRECTION/DTYPE/LAYOUT)
    name = "tiny"
    op = "conv2d"
    direction = "fwd"
    dtype = "f16"
    layout = "nhwc"
    params = { n = 1, c = 8, k = 8, hw = 8, kernel = 3, pad = 1 }
    impl = "module:function"           # optional

    [[variant]]                        # reference variants (the first is the primary one)
    name = "original"                  # + ftz, accumulate, round_output as in the catalogue's [reference]

    [[validation]]                     # validation methods (the first is the primary one)
    name = "cpu"
    kernel = "case"                    # case (its own impl) | torch | im2col | f32 | native | "module:function"
                                       #   ({op} and {direction} in the function name are filled in)
    reference = "cpu"                  # cpu | device (float64 there) | a kernel name as above: that kernel's output

`kind = "function_errors"` at the top makes it another kind of study, the low-precision guide's error
table (function_errors_config.py); `kind = "grid"` (or no kind) is this one.

Every problem is reported at once with file:line and key path, then exit 2
(CatalogueError, as for the catalogue).
"""
from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from e2egen.generator.errors import CatalogueError, Location, Problem, did_you_mean, unknown
from e2egen.generator.toml_lines import key_lines
from e2egen.generator.toml_reader import TomlReader, describe, parse_toml
from e2egen.metrics.names import METRIC_NAMES, TOLERANCE_KEYS

from e2egen.diagnose import kernels as builtin_kernels

TOP_KEYS = ("title", "description", "catalogue", "seed", "rule", "metrics", "ranges", "cases", "case", "variant", "validation")
CASES_KEYS = ("select", "filter", "params")
CASE_KEYS = ("name", "op", "direction", "dtype", "layout", "params", "impl")
VARIANT_KEYS = ("name", "ftz", "accumulate", "round_output")
VALIDATION_KEYS = ("name", "kernel", "reference")
KERNEL_NAMES = ("case", "torch", *builtin_kernels.BUILTIN)
REFERENCE_NAMES = ("cpu", "device")
DEFAULT_RULE = {"max_eps_diff": 1.0}
DEFAULT_METRICS = ("max_eps_diff", "max_abs_diff", "max_rel_diff", "max_rel_diff_old", "rms")
NAME = r"[A-Za-z0-9][A-Za-z0-9_.+ -]*"
RANGE_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*"


@dataclass(frozen=True)
class StudyVariant:
    name: str
    ftz: bool = False
    accumulate: int = 0
    round_output: bool = False

    def options(self, device: str = "cpu"):
        from e2egen import runner

        return runner.ReferenceOptions(device=device, ftz=self.ftz, accumulate=self.accumulate, round_output=self.round_output)


@dataclass(frozen=True)
class StudyValidation:
    name: str
    kernel: str = "case"
    reference: str = "cpu"

    @property
    def reference_is_kernel(self) -> bool:
        return self.reference not in REFERENCE_NAMES


@dataclass(frozen=True)
class StudyCase:
    id: str  # without the range: suite/op/config/direction/dtype/layout
    op: str
    direction: str
    dtype: str
    layout: str
    params: Mapping[str, Any]
    impl: str | None
    config: str
    location: str = ""


@dataclass(frozen=True)
class StudyConfig:
    path: str
    title: str
    description: str
    catalogue: str | None
    seed: int
    rule: Mapping[str, float]
    metrics: tuple[str, ...]
    ranges: Mapping[str, tuple[float, float]]
    cases: tuple[StudyCase, ...]
    variants: tuple[StudyVariant, ...]
    validations: tuple[StudyValidation, ...]
    params_override: Mapping[str, Any] = field(default_factory=dict)


def resolve_kernel(spec: str, case: StudyCase) -> str | None:
    """The impl string the runner takes for a validation's kernel (None: torch's)."""
    if spec == "case":
        return case.impl
    if spec == "torch":
        return None
    if spec in builtin_kernels.BUILTIN:
        return builtin_kernels.impl_for(spec, case.op, case.direction)
    return spec.replace("{op}", case.op).replace("{direction}", case.direction)


def load_study(path: str | Path) -> StudyConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise CatalogueError([Problem(Location(str(path)), "", f"cannot read the study: {err.strerror}")])
    return parse_study(text, str(path))


def parse_study(text: str, path: str = "<study>") -> StudyConfig:
    data = parse_toml(text, path)
    reader = _Reader(path, key_lines(text))
    if "kind" in data:  # another kind of study, in a module of its own
        return _other_kind(data, text, path, reader)
    if _is_catalogue(data):  # one message saying so, not one unknown key per catalogue table
        reader.problem(("suite",), "this file is a catalogue (it has [[suite]] tables), not a study: a study names "
                                   "the catalogue with `catalogue = \"configs.toml\"`, picks its cases with [cases] and "
                                   "adds [ranges], [[variant]] and [[validation]] (`e2egen study --help` names a sample)")
        raise CatalogueError(reader.problems)
    config = reader.study(data)
    if reader.problems:
        raise CatalogueError(reader.problems)
    return config


STUDY_KINDS = ("grid", "function_errors")  # grid: this module's (the default); function_errors: the guide's table


def _other_kind(data: dict, text: str, path: str, reader: "_Reader"):
    kind = data["kind"]
    if kind == "function_errors":
        from e2egen.diagnose.function_errors_config import parse_function_error_study

        return parse_function_error_study(data, text, path)
    if kind != "grid":
        reader.problem(("kind",), unknown("study kind", kind, STUDY_KINDS))
        raise CatalogueError(reader.problems)
    data = {key: value for key, value in data.items() if key != "kind"}
    config = reader.study(data)
    if reader.problems:
        raise CatalogueError(reader.problems)
    return config


def _is_catalogue(data: Mapping) -> bool:
    """A catalogue given where a study goes: [[suite]] tables and none of the study's own."""
    return "suite" in data and not any(key in data for key in ("cases", "case", "variant", "validation"))


class _Reader(TomlReader):
    """Validates one parsed STUDY.toml (the catalogue loader's typed getters, plus the study's tables)."""

    def number(self, value: Any, key_path: tuple) -> float | None:
        number = super().number(value, key_path)
        return None if number is None else float(number)

    # -- the study ---------------------------------------------------------------------
    def study(self, data: dict) -> StudyConfig:
        self.unknown_keys(data, TOP_KEYS, ())
        title = self.string(data.get("title", Path(self.path).stem), ("title",)) or Path(self.path).stem
        description = self.string(data.get("description", ""), ("description",)) or ""
        seed = self.integer(data["seed"], ("seed",)) if "seed" in data else None
        rule = self.rule(data.get("rule", DEFAULT_RULE))
        metric_names = self.metric_list(data.get("metrics", list(DEFAULT_METRICS)))
        ranges = self.ranges(data.get("ranges"))
        variants = self.variants(data.get("variant"))
        validations = self.validations(data.get("validation"))
        catalogue_path = None
        if "catalogue" in data:
            name = self.string(data["catalogue"], ("catalogue",))
            if name is not None:
                catalogue_path = str((Path(self.path).parent / name)) if not Path(name).is_absolute() else name
        selected, override, catalogue_seed = self.catalogue_cases(self.table(data.get("cases"), ("cases",)), catalogue_path)
        inline = self.inline_cases(data.get("case"))
        cases = tuple(selected + inline)
        if not self.problems and not cases:
            self.problem(("cases",) if "cases" in data else (), "the study selects no case: give [cases] select/filter or [[case]] tables")
        ids = [c.id for c in cases]
        for i, cid in enumerate(ids):
            if cid in ids[:i]:
                self.problem(("case",), f"case {cid!r} is listed twice")
        if not self.problems:
            self.check_grid(cases, ranges, validations, ("ranges",))
        return StudyConfig(
            path=self.path, title=title, description=description, catalogue=catalogue_path,
            seed=seed if seed is not None else (catalogue_seed or 0), rule=rule, metrics=metric_names, ranges=ranges,
            cases=cases, variants=variants, validations=validations, params_override=override)

    def rule(self, value: Any) -> dict[str, float]:
        table = self.table(value, ("rule",))
        rule = {}
        for key, tolerance in table.items():
            if key not in TOLERANCE_KEYS or key == "mismatches":
                self.problem(("rule", key), unknown("metric", key, [k for k in TOLERANCE_KEYS if k != "mismatches"]))
                continue
            number = self.number(tolerance, ("rule", key))
            if number is not None:
                rule[key] = number
        if not rule and not self.problems:
            self.problem(("rule",), "the rule names no metric; e.g. rule = { max_eps_diff = 1.0 }")
        return rule

    def metric_list(self, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            self.problem(("metrics",), f"expected a non-empty list of metric names, got {describe(value)}; valid: {', '.join(METRIC_NAMES)}")
            return DEFAULT_METRICS
        names = []
        for i, name in enumerate(value):
            if name not in METRIC_NAMES:
                self.problem(("metrics", i), unknown("metric", name, METRIC_NAMES))
            elif name in names:
                self.problem(("metrics", i), f"metric {name!r} is listed twice")
            else:
                names.append(name)
        return tuple(names) or DEFAULT_METRICS

    def ranges(self, value: Any) -> dict[str, tuple[float, float]]:
        if value is None:
            self.problem(("ranges",), "missing: the grid's input ranges, e.g. [ranges] r0 = [-1.0, 1.0]")
            return {}
        table = self.table(value, ("ranges",))
        ranges = {}
        for name, bounds in table.items():
            key_path = ("ranges", name)
            if not re.fullmatch(RANGE_NAME, name):
                self.problem(key_path, f"{name!r} is not a valid range name")
                continue
            if (not isinstance(bounds, list) or len(bounds) != 2
                    or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in bounds)):
                self.problem(key_path, f"expected [lo, hi] (two finite numbers), got {describe(bounds)}")
                continue
            lo, hi = float(bounds[0]), float(bounds[1])
            if not lo < hi:
                self.problem(key_path, f"range [{lo:g}, {hi:g}] is empty: lo must be < hi")
                continue
            ranges[name] = (lo, hi)
        if not table and value is not None:
            self.problem(("ranges",), "no range given")
        return ranges

    def variants(self, value: Any) -> tuple[StudyVariant, ...]:
        items = self.tables(value, ("variant",))
        if not items:
            return (StudyVariant("original"),)
        variants = []
        for i, item in enumerate(items):
            key_path = ("variant", i)
            self.unknown_keys(item, VARIANT_KEYS, key_path, kind="variant key")
            name = self.required_name(item, key_path, "variant")
            ftz = self.boolean(item.get("ftz", False), key_path + ("ftz",))
            accumulate = self.integer(item.get("accumulate", 0), key_path + ("accumulate",))
            round_output = self.boolean(item.get("round_output", False), key_path + ("round_output",))
            if name is not None:
                variants.append(StudyVariant(name, bool(ftz), accumulate or 0, bool(round_output)))
        self.unique([v.name for v in variants], "variant")
        return tuple(variants)

    def validations(self, value: Any) -> tuple[StudyValidation, ...]:
        items = self.tables(value, ("validation",))
        if not items:
            return (StudyValidation("cpu"),)
        validations = []
        for i, item in enumerate(items):
            key_path = ("validation", i)
            self.unknown_keys(item, VALIDATION_KEYS, key_path, kind="validation key")
            name = self.required_name(item, key_path, "validation")
            kernel = self.kernel_spec(item.get("kernel", "case"), key_path + ("kernel",))
            reference = item.get("reference", "cpu")
            reference = self.kernel_spec(reference, key_path + ("reference",), references=True)
            if name is not None and kernel is not None and reference is not None:
                validations.append(StudyValidation(name, kernel, reference))
        self.unique([v.name for v in validations], "validation")
        return tuple(validations)

    def kernel_spec(self, value: Any, key_path: tuple, references: bool = False) -> str | None:
        text = self.string(value, key_path)
        if text is None:
            return None
        valid = (*REFERENCE_NAMES, *KERNEL_NAMES) if references else KERNEL_NAMES
        if text in valid or ":" in text:
            return text
        self.problem(key_path, unknown("reference" if references else "kernel", text, valid) + ", or \"module:function\"")
        return None

    def required_name(self, item: dict, key_path: tuple, kind: str) -> str | None:
        if "name" not in item:
            self.problem(key_path, f"missing name of the {kind}")
            return None
        return self.string(item["name"], key_path + ("name",), NAME, "letters, digits, spaces, '_', '.', '+', '-'")

    def unique(self, names: list[str], kind: str) -> None:
        for i, name in enumerate(names):
            if name in names[:i]:
                self.problem((kind, i), f"{kind} name {name!r} is used twice")

    def catalogue_cases(self, table: dict, catalogue_path: str | None) -> tuple[list[StudyCase], dict, int | None]:
        self.unknown_keys(table, CASES_KEYS, ("cases",))
        if not table:
            return [], {}, None
        select = table.get("select", ["*"])
        if isinstance(select, str):
            select = [select]
        if not isinstance(select, list) or not all(isinstance(s, str) for s in select):
            self.problem(("cases", "select"), f"expected a list of id globs, got {describe(select)}")
            return [], {}, None
        expression = self.string(table.get("filter", ""), ("cases", "filter")) or ""
        override = self.table(table.get("params"), ("cases", "params"))
        from e2egen.generator.case_filter import FilterError, case_filter
        from e2egen.generator.cases import expand
        from e2egen.generator.loader import load_catalogue

        try:
            case_filter(expression, key="cases.filter")  # a bad axis: said even when the catalogue is missing
        except FilterError as err:
            self.problem(("cases", "filter"), err.message)
            return [], override, None
        path = catalogue_path or "configs.toml"
        if not Path(path).is_file():
            self.problem(("catalogue",) if catalogue_path else ("cases",), f"catalogue {path!r} not found"
                         + ("" if catalogue_path else ": give catalogue = \"...\" (relative to the study file)"))
            return [], override, None
        catalogue = load_catalogue(path)  # its own problems are a CatalogueError of their own
        all_cases = expand(catalogue)
        try:
            matches = case_filter(expression, key="cases.filter", cases=all_cases)  # and a value no case has
        except FilterError as err:
            self.problem(("cases", "filter"), err.message)
            return [], override, None
        chosen: dict[str, StudyCase] = {}
        for case in all_cases:
            if not any(fnmatch.fnmatchcase(case.id, pattern) for pattern in select) or not matches(case):
                continue
            base = case.key.without_range
            if base not in chosen:
                chosen[base] = StudyCase(base, case.op, case.direction, case.dtype, case.layout,
                                         {**case.params, **override}, case.impl, case.config, case.location)
        if not chosen:
            self.problem(("cases", "select"), f"no case of {path} matches select = {select}"
                         + (f" and filter = {expression!r}" if expression else "") + "; see `e2egen list`")
        for case in chosen.values():
            self.check_problem(case, ("cases", "params"))
        return list(chosen.values()), override, catalogue.seed

    def inline_cases(self, value: Any) -> list[StudyCase]:
        from e2egen import runner

        cases = []
        for i, item in enumerate(self.tables(value, ("case",))):
            key_path = ("case", i)
            self.unknown_keys(item, CASE_KEYS, key_path, kind="case key")
            name = self.required_name(item, key_path, "case")
            fields = {}
            for key, choices in (("op", tuple(runner.OPS)), ("direction", None), ("dtype", runner.DTYPES), ("layout", None)):
                if key not in item:
                    if key == "direction" and item.get("op") == "gemm":
                        fields[key] = "fwd"
                        continue
                    self.problem(key_path, f"missing {key}" + (f"; valid: {', '.join(choices)}" if choices else ""))
                    continue
                fields[key] = self.string(item[key], key_path + (key,))
            params = self.table(item.get("params"), key_path + ("params",))
            impl = self.string(item["impl"], key_path + ("impl",)) if "impl" in item else None
            if name is None or None in fields.values() or len(fields) < 4:
                continue
            case = StudyCase(f"study/{fields['op']}/{name}/{fields['direction']}/{fields['dtype']}/{fields['layout']}",
                             fields["op"], fields["direction"], fields["dtype"], fields["layout"], params, impl, name,
                             str(self.location(key_path)))
            if self.check_problem(case, key_path):
                cases.append(case)
        return cases

    def check_problem(self, case: StudyCase, key_path: tuple) -> bool:
        from e2egen import runner

        try:
            runner.make_problem(case.op, case.direction, case.dtype, case.layout, case.params, (0.0, 1.0), 0)
        except runner.ProblemError as err:
            if key_path[0] == "cases":
                where = ("cases", "params")
            else:
                where = key_path + (("params", err.key) if err.key in case.params else (err.key,))
            self.problem(where, f"{case.id}: {err.message}")
            return False
        if case.impl is not None:
            try:
                runner.resolve_impl(case.op, case.direction, case.impl)
            except runner.ImplError as err:
                self.problem(key_path + ("impl",), str(err))
                return False
        return True

    def check_grid(self, cases, ranges, validations, ranges_path) -> None:
        """Every range must suit every dtype; every kernel named must import for every case."""
        from e2egen import runner
        import torch
        from e2egen.runner.dtypes import storage_dtype

        for name, (lo, hi) in ranges.items():
            for dtype in sorted({c.dtype for c in cases}):
                largest = torch.finfo(storage_dtype(dtype)).max
                if max(abs(lo), abs(hi)) > largest:
                    self.problem(ranges_path + (name,), f"[{lo:g}, {hi:g}] goes beyond {dtype}'s largest finite value "
                                                        f"{largest:g}: inputs would be inf")
        for i, validation in enumerate(validations):
            for key in ("kernel", "reference"):
                spec = getattr(validation, key)
                if spec in REFERENCE_NAMES or spec in ("case", "torch"):
                    continue
                for case in cases:
                    impl = resolve_kernel(spec, case)
                    try:
                        runner.resolve_impl(case.op, case.direction, impl)
                    except runner.ImplError as err:
                        self.problem(("validation", i, key), f"{case.id}: {err}")
                        break


__all__ = ["StudyCase", "StudyConfig", "StudyValidation", "StudyVariant", "did_you_mean", "load_study", "parse_study",
           "resolve_kernel"]
