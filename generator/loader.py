"""Read configs.toml into a validated Catalogue, or raise CatalogueError with every problem.

Nothing is generated from a catalogue that fails here: each problem names the
file and line, the key path, the bad value and the valid choices.
"""
from __future__ import annotations

import difflib
import itertools
import math
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from e2egen import metrics
from e2egen import runner
from e2egen.generator import schema
from e2egen.generator.cases import SEED_RULE, parse_seed
from e2egen.generator.catalogue import Catalogue, Config, Exclude, Layered, Suite, frozen, module_slug
from e2egen.generator.errors import CatalogueError, Location, Problem, did_you_mean, unknown
from e2egen.generator.layers import TABLES as LAYERED_TABLES
from e2egen.generator.selection import read_selection
from e2egen.generator.toml_lines import key_lines
from e2egen.generator.toml_reader import TomlReader, describe, key_text, parse_toml, read_toml_text, unreadable
from e2egen.runner.arithmetic.requirements import Acceptance
from e2egen.runner.edge_data import EDGES_RANGE
from e2egen.runner.ops.base import UNKNOWN_LAYOUT
from e2egen.runner.options import OPTION_TYPES, OptionKey, Requirements

RANDOM_INPUTS_KEY = "random"  # schema.RANGE_KEYS' key: a [ranges] table's inputs drawn at random (the others constant)
INPUT_NAME = r"[A-Za-z_][A-Za-z0-9_]*"  # an op's input name (conv's x, w, dy; gemm's a, b)


def load_catalogue(path: str | Path) -> Catalogue:
    """Parse and validate a catalogue file."""
    return parse_catalogue(read_toml_text(path, "catalogue"), str(path))


def parse_catalogue(text: str, path: str = "<catalogue>") -> Catalogue:
    """Validate catalogue `text`; `path` names it in messages and anchors pr_selection."""
    return _validated(parse_toml(text, path), path, key_lines(text))


def parse_catalogue_data(data: dict, source: str) -> Catalogue:
    """Validate a catalogue given as parsed TOML (e2egen.api builds one per call); messages name `source`."""
    return _validated(data, source, {})


def _validated(data: dict, path: str, lines: dict[tuple, int]) -> Catalogue:
    reader = _Reader(path, lines)
    catalogue = reader.catalogue(data)
    if reader.problems:
        raise CatalogueError(reader.problems)
    return catalogue


def op_dtype_problem(op: Any, dtype: str) -> str | None:
    """None when `op` runs in `dtype`; UNKNOWN_LAYOUT when `dtype` is no dtype at all (the caller lists the valid
    ones); else that the op does not run in this (valid) dtype, with the ones it does (Op.dtypes, declared once)."""
    if dtype in op.dtypes:
        return None
    if dtype not in runner.DTYPES:
        return UNKNOWN_LAYOUT
    return f"{op.name} does not run in {dtype}{dtype_kind(dtype)}; valid for {op.name}: {', '.join(op.dtypes)}"


def dtype_kind(dtype: str) -> str:
    from e2egen.runner.dtypes import FLOAT4, FLOAT8, FLOAT8_PAIRS, INTEGER_DTYPES

    for kinds, what in ((FLOAT8_PAIRS, "an fp8 pair"), (FLOAT8, "fp8"), (FLOAT4, "fp4"), (INTEGER_DTYPES, "an integer format")):
        if dtype in kinds:
            return f" ({what})"
    return ""


class _Reader(TomlReader):
    """Validates one parsed catalogue, collecting problems instead of stopping at the first."""

    def choices(self, value: Any, key_path: tuple, valid: Iterable[str], kind: str,
                accepts: Callable[[str], str | None] | None = None) -> tuple[str, ...]:
        """A list of names, each among `valid` (a single string is a list of one), or one `accepts` takes
        (Op.layout_problem: None, UNKNOWN_LAYOUT, or what is wrong with a layout string)."""
        valid = tuple(valid)
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not values:
            kinds = kind.replace(" ", "s ", 1) if " " in kind else kind + "s"  # "directions for gemm"
            self.problem(key_path, f"expected a non-empty list of {kinds}, got {describe(value)}; valid: {', '.join(valid)}")
            return ()
        good = []
        for i, item in enumerate(values):
            if item in valid:
                problem = None
            elif accepts is not None and isinstance(item, str):
                problem = accepts(item)
            else:
                problem = UNKNOWN_LAYOUT
            if problem == UNKNOWN_LAYOUT:
                self.problem(key_path + (i,), unknown(kind, item, valid))
            elif problem is not None:
                self.problem(key_path + (i,), problem)
            elif item in good:
                self.problem(key_path + (i,), f"{kind} {item!r} is listed twice")
            else:
                good.append(item)
        return tuple(good)

    # -- the catalogue ---------------------------------------------------
    def catalogue(self, data: dict) -> Catalogue:
        self.unknown_keys(data, schema.TOP_KEYS, ())
        seed = self.seed(data.get("seed", 0))
        ranges, range_data = self.ranges(self.table(data.get("ranges"), ("ranges",)))
        layered = {name: self.layered(name, data.get(name), (name,)) for name in LAYERED_TABLES}
        accepted = self.accepts(data.get("accept"), ("accept",))
        self.edges_default = self.boolean(data.get("edges", True), ("edges",)) is not False
        suites_data = data.get("suite", [])
        if isinstance(suites_data, list) and suites_data:
            suites_data = self.tables(suites_data, ("suite",))
        else:
            self.problem(("suite",), "the catalogue defines no [[suite]]" if suites_data in ([], None) else
                         f"expected [[suite]] tables, got {describe(suites_data)}")
            suites_data = []
        suites = tuple(s for s in (self.suite(d, ("suite", i), ranges, range_data) for i, d in enumerate(suites_data)) if s)
        self.no_duplicates([s.name for s in suites], ("suite",), "suite", [s.location for s in suites])
        # Compared without case: on macOS's and Windows' file systems test_A.py and test_a.py are one file.
        slugs = [module_slug(s.name).casefold() for s in suites]
        for i, slug in enumerate(slugs):
            if slug in slugs[:i] and suites[i].name != suites[slugs.index(slug)].name:
                first = suites[slugs.index(slug)]
                self.problems.append(Problem(suites[i].location, "suite.name",
                                             f"suite {suites[i].name!r} would share the test module "
                                             f"test_{module_slug(suites[i].name)}.py with suite {first.name!r} (at "
                                             f"{first.location}): rename one (names differing only in case or in "
                                             f"characters other than letters, digits and _ make the same module)"))
        selection_path, selection = self.selection(data.get("pr_selection"))
        return Catalogue(
            path=self.path, seed=seed, ranges=frozen(ranges), range_data=frozen(range_data), suites=suites,
            pr_selection_path=selection_path, pr_selection=frozen(selection), accepted=accepted, **layered,
            timeout=self.timeout(data.get("timeout"), ("timeout",)),
        )

    def seed(self, value: Any) -> int:
        """The catalogue's seed: the rule of every seed (cases.parse_seed), said as the command line says it."""
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(("seed",), f"expected {SEED_RULE}, got {describe(value)}")
            return 0
        try:
            return parse_seed(value)
        except ValueError as err:
            self.problem(("seed",), str(err))
            return 0

    def ranges(self, table: dict) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
        """name -> (lo, hi), and name -> data (runner.join_input_data's string) for the ranges that are not
        uniform reals.

        A range is `[lo, hi]` (uniform reals) or a table `{ range = [lo, hi], data = KIND, random = [INPUT, ...] }`:
        data "integers" draws the integers lo..hi inclusive, each equally likely (rocMLIR's seeded default
        data); "pattern" is rocmlir-gen's fixed pattern and "ones" all ones, both inside [lo, hi]; `random`
        (uniform or integer data only) draws the inputs it names and fills the others with rocmlir-gen's
        constant (its -rand_side).
        """
        from e2egen.runner.problem import join_input_data  # with the runner, as runner.INPUT_DATA below

        ranges, kinds = {}, {}
        self.defined_ranges = tuple(name for name in table if re.fullmatch(schema.NAME_PATTERN, name))
        for name, value in table.items():
            key_path = ("ranges", name)
            if not re.fullmatch(schema.NAME_PATTERN, name):
                self.problem(key_path, f"{name!r} is not a valid range name")
                continue
            if name == EDGES_RANGE:
                self.problem(key_path, f"{name!r} is the range of e2egen's edge-data cases (docs/reference/catalogue.md, "
                                       "\"Edge data\"): give this range another name")
                continue
            data, random = "uniform", ()
            if isinstance(value, dict):
                self.unknown_keys(value, schema.RANGE_KEYS, key_path)
                data = value.get("data", "uniform")
                if data not in runner.INPUT_DATA:
                    self.problem(key_path + ("data",), unknown("data", data, runner.INPUT_DATA))
                    continue
                if RANDOM_INPUTS_KEY in value:
                    random = self.random_inputs(value[RANDOM_INPUTS_KEY], data, key_path + (RANDOM_INPUTS_KEY,))
                    if random is None:
                        continue
                if "range" not in value:
                    self.problem(key_path + ("range",), "missing: expected range = [lo, hi]")
                    continue
                value, key_path = value["range"], key_path + ("range",)
            if not (isinstance(value, list) and len(value) == 2):
                self.problem(key_path, f"expected [lo, hi] or {{ range = [lo, hi], data = \"integers\" }}, got {describe(value)}")
                continue
            lo, hi = (self.number(v, key_path, minimum=-math.inf) for v in value)
            if lo is None or hi is None:
                continue
            if not lo < hi:
                self.problem(key_path, f"range [{lo}, {hi}] is empty: lo must be < hi")
                continue
            if data == "integers" and not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                self.problem(key_path, f"integer data needs integer bounds, got [{lo}, {hi}]")
                continue
            ranges[name] = (float(lo), float(hi))
            if data != "uniform" or random:
                kinds[name] = join_input_data(data, random)
        return ranges, kinds

    def random_inputs(self, value: Any, data: str, key_path: tuple) -> tuple[str, ...] | None:
        """A range's `random`: the op's inputs drawn at random (each input named once), for random data only."""
        from e2egen.runner.problem import RANDOM_DATA

        if data not in RANDOM_DATA:
            self.problem(key_path, f"random inputs need data {' or '.join(map(repr, RANDOM_DATA))}, not {data!r}")
            return None
        if not (isinstance(value, list) and value and all(isinstance(v, str) and re.fullmatch(INPUT_NAME, v) for v in value)
                and len(set(value)) == len(value)):
            self.problem(key_path, f"expected a non-empty list of distinct input names such as [\"w\"] (the op's inputs, "
                                   f"e.g. conv's x, w, dy), got {describe(value)}")
            return None
        return tuple(value)

    def check_range_data(self, ranges: Mapping, range_data: Mapping, axes: Mapping, key_path: tuple) -> None:
        """Integer data must be exact, and a pattern or ones inside its range, in every dtype of the suite."""
        for name in axes["ranges"]:
            if name not in range_data:
                continue
            for dtype in axes["dtypes"]:
                try:
                    runner.check_input_data(range_data[name], ranges[name], dtype)
                except runner.ProblemError as err:
                    self.problem(key_path + ("ranges",), f"range {name!r} with dtype {dtype}: {err.message}")

    def selection(self, value: Any) -> tuple[str | None, dict[str, str]]:
        if value is None:
            return None, {}
        name = self.string(value, ("pr_selection",))
        if name is None:
            return None, {}
        path = Path(self.path).parent / name
        try:
            if not path.exists():
                return name, {}  # written later by `e2egen select`; no selection yet
            return name, read_selection(path)  # a directory, unreadable, not UTF-8, bad entries: named there
        except CatalogueError as err:
            self.problems.extend(err.problems)
        except (OSError, UnicodeDecodeError) as err:
            self.problems.append(unreadable(path, err, "PR selection file"))
        return name, {}

    def no_duplicates(self, names: list[str], key_path: tuple, kind: str, locations: list[Location]) -> None:
        seen: dict[str, Location] = {}
        for name, location in zip(names, locations):
            if name in seen:
                self.problems.append(Problem(location, key_text(key_path), f"duplicate {kind} name {name!r} (first at {seen[name]})"))
            seen.setdefault(name, location)

    # -- accepted deviations: [[accept]] ---------------------------------
    def accepts(self, value: Any, key_path: tuple) -> tuple[Acceptance, ...]:
        """The [[accept]] entries: device glob, impl glob, cells glob, requirements they excuse, reason."""
        entries = []
        for i, item in enumerate(self.tables(value, key_path)):
            entry = self.accept(item, key_path + (i,))
            if entry is not None:
                entries.append(entry)
        return tuple(entries)

    def accept(self, data: dict, key_path: tuple) -> Acceptance | None:
        self.unknown_keys(data, schema.ACCEPT_KEYS, key_path, kind="accept key")
        known = len(self.problems)
        requirement_keys = tuple(sorted(Requirements.catalogue_keys()))
        for key, what in (("device", 'a glob over device names, e.g. "cpu" or "NVIDIA H100*"'),
                          ("require", f"a list of requirement keys; valid: {', '.join(requirement_keys)}"),
                          ("reason", "why the deviation is accepted")):
            if key not in data:
                self.problem(key_path + (key,), f"missing: {what}")
        globs = {}
        for key in ("device", "impl", "cells"):
            if key in data:
                globs[key] = self.glob(data[key], key_path + (key,))
        if "cells" in globs and globs["cells"] is not None:
            self.cells_glob(globs["cells"], key_path + ("cells",))
        requirements = ()
        if "require" in data:
            if isinstance(data["require"], list):
                requirements = self.choices(data["require"], key_path + ("require",), requirement_keys, "requirement")
            else:
                self.problem(key_path + ("require",), f"expected a non-empty list of requirements, got {describe(data['require'])}; "
                                                      f"valid: {', '.join(requirement_keys)}")
        reason = data.get("reason")
        if "reason" in data and (not isinstance(reason, str) or not reason.strip()):
            self.problem(key_path + ("reason",), f"expected a non-empty string saying why the deviation is accepted, got {describe(reason)}")
        if len(self.problems) > known:
            return None
        return Acceptance(device=globs["device"], reason=reason.strip(), requirements=requirements,
                          impl=globs.get("impl", "*"), cells=globs.get("cells", "*"))

    def glob(self, value: Any, key_path: tuple) -> str | None:
        if not isinstance(value, str) or not value:
            self.problem(key_path, f"expected a non-empty glob string (* ? [...] match as in fnmatch), got {describe(value)}")
            return None
        return value

    def cells_glob(self, pattern: str, key_path: tuple) -> None:
        """A cells glob is op/direction/dtype/layout[/shape class]; literal parts where their position is certain
        (no wildcard before them) must name an op, direction, dtype or layout, so a typo is not a silent no-match."""
        parts = pattern.split("/")
        if len(parts) > 5:
            self.problem(key_path, f"{pattern!r} has {len(parts)} parts; a cell is op/direction/dtype/layout[/shape class]")
            return
        op = None
        for position, part in enumerate(parts[:4]):
            if any(ch in part for ch in "*?["):
                break
            if position == 0:
                valid = tuple(runner.OPS)
            elif position == 1:
                valid = runner.OPS[op].directions
            elif position == 2:
                valid = runner.DTYPES
            else:
                valid = runner.OPS[op].layouts
                if runner.OPS[op].layout_problem(part) is None:
                    continue
            if part not in valid:
                axis = ("op", "direction", "dtype", "layout")[position]
                self.problem(key_path, f"unknown {axis} {part!r} in cells {pattern!r}{did_you_mean(part, valid)}")
                return
            op = op or part

    # -- layered settings: tolerances, reference, bound, require ---------
    def layered(self, kind: str, value: Any, key_path: tuple) -> Layered:
        """A tolerances/reference/bound/require table: keys, and sub-tables per dtype, direction or dtype.direction."""
        table = self.table(value, key_path)
        if kind == "tolerances":
            check, valid = self.tolerance, tuple(metrics.TOLERANCE_KEYS)
        else:
            options = OPTION_TYPES[kind]
            check, valid = (lambda key, item, path: self.option(options.key(key), item, path)), options.catalogue_keys()
        directions = tuple(dict.fromkeys(d for op in runner.OPS.values() for d in op.directions))
        common, specific = {}, {}
        for key, item in table.items():
            if key in valid:
                checked = check(key, item, key_path + (key,))
                if checked is not None:
                    common[key] = checked
            elif key in runner.DTYPES or key in directions:
                sub = self.table(item, key_path + (key,))
                nested = directions if key in runner.DTYPES else ()
                for direction in nested:
                    if direction in sub:
                        inner = self.table(sub[direction], key_path + (key, direction))
                        specific[f"{key}.{direction}"] = frozen(self.settings(inner, key_path + (key, direction), valid, check))
                flat = {k: v for k, v in sub.items() if k not in nested}
                specific[key] = frozen(self.settings(flat, key_path + (key,), (*valid, *nested), check))
            else:
                self.problem(key_path + (key,), unknown(f"{kind} key", key, (*valid, *runner.DTYPES, *directions)))
        return Layered(frozen(common), frozen(specific))

    def settings(self, table: dict, key_path: tuple, valid: Iterable[str], check: Callable) -> dict:
        valid = tuple(valid)
        out = {}
        for key, item in table.items():
            if key not in valid:
                self.problem(key_path + (key,), unknown("key", key, valid))
                continue
            checked = check(key, item, key_path + (key,))
            if checked is not None:
                out[key] = checked
        return out

    def tolerance(self, key: str, value: Any, key_path: tuple) -> Any:
        if value is False:
            return False  # removes a metric a less specific level chose
        if key in metrics.ALLOWANCE_NAMES:
            return self.integer(value, key_path)
        return self.number(value, key_path)

    def option(self, key: OptionKey, value: Any, key_path: tuple) -> Any:
        """A [reference], [bound] or [require] value, checked by the kind its options dataclass declares."""
        if key.kind == "choice":
            if value not in key.choices:
                self.problem(key_path, unknown(key.what or key.name, value, key.choices))
                return None
            return value
        if key.kind == "bool":
            return self.boolean(value, key_path)
        if key.kind == "count":
            return self.integer(value, key_path)
        return self.number(value, key_path, strict=(key.kind == "positive"))

    # -- suites and configs ----------------------------------------------
    def suite(self, data: dict, key_path: tuple, ranges: Mapping, range_data: Mapping) -> Suite | None:
        self.unknown_keys(data, schema.SUITE_KEYS, key_path)
        name = self.string(data.get("name"), key_path + ("name",), schema.NAME_PATTERN)
        if name is not None and len(name) > schema.SUITE_NAME_MAX:
            self.problem(key_path + ("name",), f"a suite name is at most {schema.SUITE_NAME_MAX} characters (it names "
                                               f"the test module test_<name>.py); this one has {len(name)}")
            name = None
        if "description" in data:
            self.string(data["description"], key_path + ("description",))
        if "op" not in data:
            self.problem(key_path + ("op",), f"missing; valid: {', '.join(runner.OPS)}")
            return None
        op_name = self.string(data["op"], key_path + ("op",))
        if op_name is None:
            return None
        if op_name not in runner.OPS:
            self.problem(key_path + ("op",), unknown("op", op_name, runner.OPS))
            return None
        op = runner.OPS[op_name]
        axes = {}
        # Excludes are checked against what the axis lists; where the list itself has a bad name,
        # against every valid name instead, so one typo gives one message.
        exclude_axes = {}
        for axis, valid, default in (
            ("dtypes", runner.DTYPES, None),
            ("directions", op.directions, op.directions),
            ("layouts", op.layouts, op.layouts),
            # a range defined but invalid is reported at its definition, not again as unknown where it is used
            ("ranges", getattr(self, "defined_ranges", tuple(ranges)), None),
        ):
            known_problems = len(self.problems)
            if axis not in data and default is None:
                self.problem(key_path + (axis,), f"missing; valid: {', '.join(valid)}")
                axes[axis] = ()
            else:
                kind = f"{axis[:-1]} for {op_name}" if axis in ("directions", "layouts") else axis[:-1]
                accepts = op.layout_problem if axis == "layouts" else (lambda dtype: op_dtype_problem(op, dtype)) if axis == "dtypes" else None
                axes[axis] = self.choices(data.get(axis, list(default or ())), key_path + (axis,),
                                          op.dtypes if axis == "dtypes" else valid, kind, accepts)
            exclude_axes[axis] = axes[axis] if len(self.problems) == known_problems else tuple(valid)
            if axis == "ranges":  # cases are made of the valid ranges only; an exclude may name the edges cases' too
                axes[axis] = tuple(r for r in axes[axis] if r in ranges)
                exclude_axes[axis] = (*exclude_axes[axis], EDGES_RANGE)
        self.check_range_data(ranges, range_data, axes, key_path)
        impl = data.get("impl")
        if impl is not None and self.string(impl, key_path + ("impl",)) is not None and impl != "torch":
            self.check_impl(op_name, axes["directions"], impl, key_path + ("impl",))
        configs_data = data.get("config", [])
        if isinstance(configs_data, list) and configs_data:
            configs_data = self.tables(configs_data, key_path + ("config",), "suite.config")
        else:
            self.problem(key_path + ("config",), "the suite has no [[suite.config]]" if configs_data in ([], None)
                         else f"expected [[suite.config]] tables, got {describe(configs_data)}")
            configs_data = []
        configs, checkable = [], []
        for i, config_data in enumerate(configs_data):
            known_problems = len(self.problems)
            config = self.config(config_data, key_path + ("config", i), op_name, axes, exclude_axes, ranges)
            if config is not None:
                configs.append(config)
                if len(self.problems) == known_problems:
                    checkable.append((config, key_path + ("config", i)))
        configs = tuple(configs)
        self.no_duplicates([c.name for c in configs], key_path + ("config",), "config", [c.location for c in configs])
        excludes = self.excludes(data.get("exclude"), key_path + ("exclude",), schema.SUITE_EXCLUDE_KEYS, {**exclude_axes, "configs": tuple(c.name for c in configs)})
        pr = self.boolean(data.get("pr", False), key_path + ("pr",))
        edges = self.boolean(data.get("edges", getattr(self, "edges_default", True)), key_path + ("edges",))
        if name is None:
            return None
        if configs and all(axes.values()):
            self.check_some_case_left(name, configs, axes, excludes, key_path + (("exclude",) if excludes else ()))
            self.check_combinations(op_name, data, checkable, axes, excludes, ranges, range_data, key_path)
        return Suite(
            name=name, op=op_name, configs=configs, location=self.location(key_path),
            dtypes=axes["dtypes"], directions=axes["directions"], layouts=axes["layouts"], ranges=axes["ranges"],
            tolerances=self.layered("tolerances", data.get("tolerances"), key_path + ("tolerances",)),
            reference=self.layered("reference", data.get("reference"), key_path + ("reference",)),
            bound=self.layered("bound", data.get("bound"), key_path + ("bound",)),
            require=self.layered("require", data.get("require"), key_path + ("require",)),
            verifier=self.layered("verifier", data.get("verifier"), key_path + ("verifier",)),
            excludes=excludes, impl=None if impl in (None, "torch") else impl,
            markers=self.markers(data.get("markers"), key_path + ("markers",)), pr=bool(pr),
            timeout=self.timeout(data.get("timeout"), key_path + ("timeout",)), edges=bool(edges),
        )

    def check_impl(self, op: str, directions: Iterable[str], impl: str, key_path: tuple) -> None:
        if Path(self.path).is_file():  # the import rule (runner.import_path): the catalogue's directory first
            from e2egen.runner.import_path import import_beside

            import_beside(self.path)
        for direction in directions:
            try:
                runner.resolve_impl(op, direction, impl)
            except runner.ImplError as err:  # a module that exits or raises anything on import included
                self.problem(key_path, str(err))
                return

    def check_some_case_left(self, name: str, configs: tuple[Config, ...], axes: Mapping, excludes: tuple[Exclude, ...],
                             key_path: tuple) -> None:
        """A suite whose excludes (its own and its configs') remove every case is a mistake, not an empty suite."""
        for config in configs:
            for direction, dtype, layout, range_name in itertools.product(
                    axes["directions"], axes["dtypes"], axes["layouts"], axes["ranges"]):
                case_axes = {"config": config.name, "direction": direction, "dtype": dtype, "layout": layout, "range": range_name}
                if not any(e.matches(case_axes) for e in (*excludes, *config.excludes)):
                    return
        self.problem(key_path, f"suite {name!r} has no case left: its excludes (and its configs') remove every "
                               "combination of configs, dtypes, directions, layouts and ranges")

    def config(self, data: dict, key_path: tuple, op_name: str, axes: Mapping, exclude_axes: Mapping, ranges: Mapping) -> Config | None:
        op = runner.OPS[op_name]
        param_names = (*op.param_names, *op.optional_params)
        self.unknown_keys(data, (*schema.CONFIG_META_KEYS, *param_names), key_path, kind=f"{op_name} config key")
        name = self.string(data.get("name"), key_path + ("name",), schema.NAME_PATTERN)
        params = {k: v for k, v in data.items() if k in param_names}
        missing = [p for p in op.param_names if p not in data]
        misspelled = [k for k in data if k not in (*schema.CONFIG_META_KEYS, *param_names)]
        for p in missing:
            if difflib.get_close_matches(p, misspelled, n=1, cutoff=0.6):
                continue  # already reported as the unknown key it was misspelled as
            self.problem(key_path + (p,), f"missing shape parameter of {op_name}; required: {', '.join(op.param_names)}")
        if not missing and all(axes.values()):
            self.check_catalogue_minimums(op, params, key_path)
            self.check_shape(op_name, params, key_path, axes, ranges)
        excludes = self.excludes(data.get("exclude"), key_path + ("exclude",), schema.CONFIG_EXCLUDE_KEYS, exclude_axes)
        pr = data.get("pr")
        if pr is not None:
            pr = self.boolean(pr, key_path + ("pr",))
        if name is None:
            return None
        return Config(
            name=name, params=frozen(params), location=self.location(key_path),
            tolerances=self.layered("tolerances", data.get("tolerances"), key_path + ("tolerances",)),
            reference=self.layered("reference", data.get("reference"), key_path + ("reference",)),
            bound=self.layered("bound", data.get("bound"), key_path + ("bound",)),
            require=self.layered("require", data.get("require"), key_path + ("require",)),
            verifier=self.layered("verifier", data.get("verifier"), key_path + ("verifier",)),
            excludes=excludes, markers=self.markers(data.get("markers"), key_path + ("markers",)), pr=pr,
            timeout=self.timeout(data.get("timeout"), key_path + ("timeout",)),
        )

    def check_combinations(self, op: str, data: Mapping, configs: list[tuple[Config, tuple]], axes: Mapping,
                           excludes: tuple[Exclude, ...], ranges: Mapping, range_data: Mapping, key_path: tuple) -> None:
        """Every case the suite makes (its excludes and its configs' left out) must be a valid problem: a dtype the
        config cannot run in (quantized attention in f16), a layout its shape cannot have (channels_last on a
        rank-2 tensor), a range beyond a format's largest value. Each is named once, at the suite's entry for
        the dtype, layout or range (the key that chose it), with the configs it fails for."""
        found: dict[tuple, list[str]] = {}  # (where, what, message) -> the configs it holds for
        for config, config_path in configs:
            for direction, dtype, layout, range_name in itertools.product(
                    axes["directions"], axes["dtypes"], axes["layouts"], axes["ranges"]):
                case_axes = {"config": config.name, "direction": direction, "dtype": dtype, "layout": layout, "range": range_name}
                if any(e.matches(case_axes) for e in (*excludes, *config.excludes)):
                    continue
                try:
                    runner.make_problem(op, direction, dtype, layout, config.params, ranges[range_name], 0,
                                        range_data.get(range_name, "uniform"))
                except runner.ProblemError as err:
                    names = found.setdefault(self.combination_problem(
                        err, data, config_path, config.params, dtype, layout, range_name, key_path), [])
                    if config.name not in names:
                        names.append(config.name)
        here = key_text(key_path) + "."
        seen = {p.message for p in self.problems if p.key.startswith(here)}  # check_range_data's inexact integer ranges
        for (where, what, message), names in found.items():
            if what:
                listed = ", ".join(map(repr, names[:5])) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                message = f"{what} with config{'s' if len(names) > 1 else ''} {listed}: {message}"
            if message not in seen:
                seen.add(message)
                self.problem(where, message)

    def combination_problem(self, err: Any, data: Mapping, config_path: tuple, params: Mapping, dtype: str, layout: str,
                            range_name: str, key_path: tuple) -> tuple[tuple, str, str]:
        """(where, what, message) for a failing case: the suite's dtypes, layouts or ranges entry that chose the value
        at fault (the config's own key for a shape parameter: what is then ""), and what names that value."""
        axis, value = {"dtype": ("dtypes", dtype), "layout": ("layouts", layout), "input_range": ("ranges", range_name)}.get(
            err.key, (None, None))
        if axis is None:
            return config_path + ((err.key,) if err.key in params else ()), "", err.message  # a shape parameter
        listed = data.get(axis)
        if isinstance(listed, list) and value in listed:
            where = key_path + (axis, listed.index(value))
        elif axis in data:
            where = key_path + (axis,)
        else:  # the axis is the op's default (every layout): the config is what to change
            where = config_path
        if axis == "ranges":
            return where, "", f"range {range_name!r} with dtype {dtype}: {err.message}"
        default = "" if axis in data else f" (the suite lists no {axis}: it takes every one the op has; list the ones that apply)"
        return where, f"{axis[:-1]} {value}", err.message + default

    def check_catalogue_minimums(self, op: Any, params: dict, key_path: tuple) -> None:
        """Values the runner takes internally but a catalogue may not write: an integer below the op's
        catalogue minimum (gemm's batch = 0, its "no batch"; scaled gemm's block = 0, "the scaling's default"),
        and the empty string of every optional parameter whose default it is (out_dtype = "", "the usual")."""
        for key, (minimum, hint) in op.catalogue_minimums.items():
            value = params.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value < minimum:
                self.problem(key_path + (key,), f"expected an integer >= {minimum}, got {value}" + (f"; {hint}" if hint else ""))
        for key, default in op.optional_params.items():
            if default == "" and params.get(key) == "":
                self.problem(key_path + (key,), f"an empty {key} is {op.name}'s own \"not given\": leave {key} out for "
                                                f"its default{self.param_choices(op, params, key)}")

    @staticmethod
    def param_choices(op: Any, params: dict, key: str) -> str:
        """"; valid: ..." for a parameter with a closed set of values (what the op's own check lists), else ""."""
        try:
            op.parse_params({**params, key: "\x00"})
        except runner.ProblemError as err:
            if err.key == key and err.choices:
                return f"; valid: {', '.join(map(str, err.choices))}"
        except Exception:  # the op's own parser: any failure only loses the hint
            pass
        return ""

    def check_shape(self, op: str, params: dict, key_path: tuple, axes: Mapping, ranges: Mapping) -> None:
        """Let the runner judge the shape: sizes, output size, groups. What depends on the case's dtype, layout or
        range is judged for every case, at the suite's axis entry (check_combinations)."""
        try:
            runner.make_problem(op, axes["directions"][0], axes["dtypes"][0], axes["layouts"][0], params, ranges[axes["ranges"][0]], 0)
        except runner.ProblemError as err:
            if err.key in ("dtype", "layout", "input_range") and err.key not in params:
                return
            key = err.key if err.key in params else None
            where = key_path + ((key,) if key else ())
            if key and any(p.key == key_text(where) for p in self.problems):
                return  # one message for one key: check_catalogue_minimums said it
            self.problem(where, err.message)

    def excludes(self, value: Any, key_path: tuple, allowed: tuple[str, ...], axes: Mapping) -> tuple[Exclude, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problem(key_path, f"expected a list of tables like {{ dtypes = [\"f16\"], directions = [\"bwd_data\"] }}, got {describe(value)}")
            return ()
        excludes = []
        for i, item in enumerate(value):
            item_path = key_path + (i,)
            item = self.table(item, item_path)
            if not item:
                self.problem(item_path, f"an exclude names no axis; valid: {', '.join(allowed)}")
                continue
            self.unknown_keys(item, allowed, item_path, kind="exclude axis")
            picked = {}
            for axis in allowed:
                if axis in item:
                    picked[axis] = frozenset(self.choices(item[axis], item_path + (axis,), axes[axis], axis[:-1]))
            if picked and all(picked.values()):
                excludes.append(Exclude(frozen(picked)))
        return tuple(excludes)

    def timeout(self, value: Any, key_path: tuple) -> float | None:
        """A `timeout`: the seconds each case may run, a finite number > 0 (None: not given here)."""
        if value is None:
            return None
        problem = schema.timeout_problem(value)
        if problem is not None:
            self.problem(key_path, problem)
            return None
        return float(value)

    def markers(self, value: Any, key_path: tuple) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problem(key_path, f"expected a list of marker names, got {describe(value)}")
            return ()
        for i, marker in enumerate(value):
            if not isinstance(marker, str):
                self.problem(key_path + (i,), f"expected a string (a marker name), got {describe(marker)}")
            elif not re.fullmatch(schema.MARKER_PATTERN, marker):
                self.problem(key_path + (i,), f"{marker!r} is not a valid pytest marker name (a Python identifier)")
            elif marker in schema.RESERVED_MARKERS:
                self.problem(key_path + (i,), f"{marker!r} is {schema.RESERVED_MARKERS[marker]}: it would change how the "
                                              f"case runs or is judged; catalogue markers only label cases "
                                              f"(reserved: {', '.join(sorted(schema.RESERVED_MARKERS))})")
        return tuple(m for m in value if isinstance(m, str))
