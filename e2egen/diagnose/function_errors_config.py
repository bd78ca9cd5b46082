"""A `kind = "function_errors"` study: the low-precision guide's error table (shared/seeds/004, 3.3 and 3.4).

    kind = "function_errors"
    title = "..."                          # optional
    description = "..."                    # optional
    inputs = "normal"                      # which f16 inputs: "normal" (every finite f16 with |x| >= 2^-14,
                                           #   and 0) or "finite" (every finite f16, subnormals too)
    conversion_samples = 4194304           # f32 values per conversion range (evenly spaced bit patterns)

    [[group]]                              # one row of the guide's table
    name = "sqrt/rsqrt"
    functions = ["sqrt", "rsqrt"]          # names from e2egen/diagnose/function_table.py
    guide = ["0.031227~0.062485", "0.000488", "0.002071~0.004158", "0.000172~0.000179"]   # optional: its figures

    [[conversion]]                         # section 3.4: f32 -> f16 rounding error
    name = "normal"
    range = [6.103515625e-05, 65504.0]
    guide = ["16", "0.00048", "0.51876", "0.000175"]

Every problem is reported at once with file:line and key path, then exit 2 (CatalogueError).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from e2egen.generator.errors import CatalogueError
from e2egen.generator.toml_lines import key_lines
from e2egen.generator.toml_reader import TomlReader, describe

from e2egen.diagnose.function_table import FUNCTIONS

KIND = "function_errors"
TOP_KEYS = ("kind", "title", "description", "inputs", "conversion_samples", "group", "conversion")
GROUP_KEYS = ("name", "functions", "guide")
CONVERSION_KEYS = ("name", "range", "guide")
INPUTS = ("normal", "finite")
STATISTICS = ("max abs", "max rel", "mean abs", "mean rel")
F16_MAX = 65504.0


@dataclass(frozen=True)
class FunctionGroup:
    name: str
    functions: tuple[str, ...]
    guide: tuple[str, ...] | None


@dataclass(frozen=True)
class ConversionRange:
    name: str
    low: float
    high: float
    guide: tuple[str, ...] | None


@dataclass(frozen=True)
class FunctionErrorStudy:
    path: str
    title: str
    description: str
    inputs: str
    conversion_samples: int
    groups: tuple[FunctionGroup, ...]
    conversions: tuple[ConversionRange, ...]


def parse_function_error_study(data: dict, text: str, path: str) -> FunctionErrorStudy:
    reader = _Reader(path, key_lines(text))
    study = reader.study(data)
    if reader.problems:
        raise CatalogueError(reader.problems)
    return study


class _Reader(TomlReader):
    def study(self, data: dict) -> FunctionErrorStudy:
        self.unknown_keys(data, TOP_KEYS, ())
        title = self.string(data.get("title", Path(self.path).stem), ("title",)) or Path(self.path).stem
        description = self.string(data.get("description", ""), ("description",)) or ""
        inputs = data.get("inputs", "normal")
        if inputs not in INPUTS:
            self.problem(("inputs",), f"unknown inputs {inputs!r}; valid: {', '.join(INPUTS)}")
        samples = self.integer(data.get("conversion_samples", 1 << 22), ("conversion_samples",), minimum=1)
        groups = tuple(self.group(item, ("group", i)) for i, item in enumerate(self.tables(data.get("group"), ("group",))))
        conversions = tuple(self.conversion(item, ("conversion", i))
                            for i, item in enumerate(self.tables(data.get("conversion"), ("conversion",))))
        if not groups and not conversions and not self.problems:
            self.problem((), "the study has no [[group]] and no [[conversion]] table: nothing to measure")
        for kind, items in (("group", groups), ("conversion", conversions)):
            names = [item.name for item in items if item is not None]
            for i, name in enumerate(names):
                if name in names[:i]:
                    self.problem((kind, i), f"{kind} name {name!r} is used twice")
        return FunctionErrorStudy(self.path, title, description, inputs if inputs in INPUTS else "normal", samples or 1,
                                  tuple(g for g in groups if g is not None), tuple(c for c in conversions if c is not None))

    def guide(self, item: dict, key_path: tuple) -> tuple[str, ...] | None:
        if "guide" not in item:
            return None
        value = item["guide"]
        if not isinstance(value, list) or len(value) != len(STATISTICS) or not all(isinstance(v, str) for v in value):
            self.problem(key_path + ("guide",), f"expected {len(STATISTICS)} strings ({', '.join(STATISTICS)}), "
                                                f"got {describe(value)}")
            return None
        return tuple(value)

    def name(self, item: dict, key_path: tuple, kind: str) -> str | None:
        if "name" not in item:
            self.problem(key_path, f"missing name of the {kind}")
            return None
        return self.string(item["name"], key_path + ("name",))

    def group(self, item: dict, key_path: tuple) -> FunctionGroup | None:
        self.unknown_keys(item, GROUP_KEYS, key_path, kind="group key")
        name = self.name(item, key_path, "group")
        functions = item.get("functions")
        if not isinstance(functions, list) or not functions or not all(isinstance(f, str) for f in functions):
            self.problem(key_path + ("functions",), f"expected a non-empty list of function names, got {describe(functions)}; "
                                                    f"valid: {', '.join(FUNCTIONS)}")
            return None
        for i, function in enumerate(functions):
            if function not in FUNCTIONS:
                self.problem(key_path + ("functions", i), f"unknown function {function!r}; valid: {', '.join(FUNCTIONS)}")
        guide = self.guide(item, key_path)
        if name is None or any(f not in FUNCTIONS for f in functions):
            return None
        return FunctionGroup(name, tuple(functions), guide)

    def conversion(self, item: dict, key_path: tuple) -> ConversionRange | None:
        self.unknown_keys(item, CONVERSION_KEYS, key_path, kind="conversion key")
        name = self.name(item, key_path, "conversion")
        bounds = item.get("range")
        valid = (isinstance(bounds, list) and len(bounds) == 2
                 and all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
                 and 0 < bounds[0] < bounds[1] <= F16_MAX)
        if not valid:
            self.problem(key_path + ("range",), f"expected [low, high] with 0 < low < high <= {F16_MAX:g} (f16's largest), "
                                                f"got {describe(bounds)}")
        guide = self.guide(item, key_path)
        if name is None or not valid:
            return None
        return ConversionRange(name, float(bounds[0]), float(bounds[1]), guide)
