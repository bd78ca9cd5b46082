"""Expand a catalogue into cases: configs x dtypes x directions x layouts x ranges, minus excludes."""
from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from e2egen.generator import layers
from e2egen.generator.case_id import CaseId
from e2egen.metrics.names import BOUND_METRIC_NAMES
from e2egen.runner.arithmetic.requirements import Acceptance
from e2egen.runner.dtypes import is_low_bit
from e2egen.runner.edge_data import EDGES_RANGE
from e2egen.runner.options import BoundModel, ReferenceOptions, Requirements, VerifierOptions

if TYPE_CHECKING:
    from e2egen import runner
    from e2egen.runner.edge_data import EdgeData
    from e2egen.runner.problem import InputData
from e2egen.generator.catalogue import Catalogue, Config, Layered, Suite
from e2egen.generator.errors import CatalogueError, Problem


# A case's time limit when neither the command line nor the catalogue (`timeout`) gives one: generous,
# because CPU runs of big shapes are slow; a hang still ends within it.
DEFAULT_TIMEOUT = 600.0


def derive_seed(global_seed: int, case_id: str) -> int:
    """A case's seed: stable across runs and machines, independent of case order."""
    digest = hashlib.sha256(f"{global_seed}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1  # 63 bits: fits torch.Generator.manual_seed


# One rule for every seed a user gives (run/gen/nightly --seed, pytest --e2e-global-seed): what torch's and
# numpy's generators take.
SEED_LIMIT = 2 ** 64
SEED_RULE = "an integer in [0, 2**64)"


def parse_seed(value: str | int) -> int:
    """A seed as typed (decimal text) or given (an int); ValueError saying the rule otherwise."""
    if isinstance(value, str):  # plain ASCII decimal digits: not int()'s "1_0", " 3" or other scripts' digits
        number = int(value) if re.fullmatch(r"[+-]?[0-9]+", value) else None
    else:
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if number is None or not 0 <= number < SEED_LIMIT:
        raise ValueError(f"expected {SEED_RULE}, got {value!r}")
    return number


def seed_argument(text: str) -> int:
    """parse_seed as an argparse type (every command line's --seed, pytest's --e2e-global-seed)."""
    import argparse

    try:
        return parse_seed(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


@dataclass(frozen=True)
class Case:
    """One test: everything needed to run and judge it; `to_dict` is its JSON form."""

    suite: str
    config: str
    op: str
    direction: str
    dtype: str
    layout: str
    range: str
    lo: float
    hi: float
    params: Mapping[str, Any]
    seed: int
    tolerances: Mapping[str, float]
    reference: ReferenceOptions
    bound: BoundModel | None  # None: the case checks neither bound_ratio nor bound_rms
    impl: str | None
    markers: tuple[str, ...]
    pr: bool
    pr_reason: str
    flops: int
    bytes_needed: int
    reduction_size: int
    require: Requirements = Requirements()  # what the kernel's measured arithmetic must be (catalogue `require`)
    verifier: VerifierOptions = VerifierOptions()  # a second verifier beside e2egen's verdict (catalogue `verifier`)
    accepted: tuple[Acceptance, ...] = ()  # the catalogue's [[accept]] entries, all of them, in catalogue order
    location: str = field(default="", compare=False)
    timeout: float | None = None  # seconds the case may run (catalogue `timeout`); None: DEFAULT_TIMEOUT
    data: InputData = "uniform"  # how inputs are drawn from [lo, hi] (the range's `data`)

    def __post_init__(self) -> None:
        if not isinstance(self.reference, ReferenceOptions):
            raise TypeError(f"Case.reference must be ReferenceOptions, got {type(self.reference).__name__}")
        if self.bound is not None and not isinstance(self.bound, BoundModel):
            raise TypeError(f"Case.bound must be a BoundModel or None, got {type(self.bound).__name__}")
        if not isinstance(self.require, Requirements):
            raise TypeError(f"Case.require must be Requirements, got {type(self.require).__name__}")
        if not isinstance(self.verifier, VerifierOptions):
            raise TypeError(f"Case.verifier must be VerifierOptions, got {type(self.verifier).__name__}")
        if not isinstance(self.accepted, tuple) or not all(isinstance(a, Acceptance) for a in self.accepted):
            raise TypeError(f"Case.accepted must be a tuple of Acceptance, got {self.accepted!r}")

    # Cached: ids key every lookup in gen, collection and the sweep (a frozen dataclass still has a __dict__).
    @cached_property
    def key(self) -> CaseId:
        return CaseId(self.suite, self.op, self.config, self.direction, self.dtype, self.layout, self.range)

    @cached_property
    def id(self) -> str:
        return str(self.key)

    @property
    def axes(self) -> dict[str, str]:
        return self.key.axes

    @property
    def catalogue_markers(self) -> tuple[str, ...]:
        """The markers the catalogue added (after pr, op, dtype, direction, layout)."""
        return self.markers[len(case_markers(self.key, self.pr, ())):]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (manifest, records): the id first, options as their catalogue tables."""
        # Field by field, not dataclasses.asdict: its deep copies dominated `gen` on big catalogues.
        data = {"id": self.id, **{f.name: getattr(self, f.name) for f in fields(self)}}
        data["params"] = dict(self.params)
        data["tolerances"] = dict(self.tolerances)
        data["reference"] = self.reference.to_catalogue()
        data["bound"] = self.bound.to_catalogue() if self.bound is not None else None
        data["require"] = self.require.to_catalogue()
        data["verifier"] = self.verifier.to_catalogue()
        data["accepted"] = [entry.to_catalogue() for entry in self.accepted]
        data["markers"] = list(self.markers)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Case":
        """The inverse of to_dict (an "id" entry, if present, must agree with the parts)."""
        values = {k: v for k, v in data.items() if k != "id"}
        values["markers"] = tuple(data["markers"])
        values["reference"] = ReferenceOptions.from_catalogue(data["reference"])
        values["bound"] = BoundModel.from_catalogue(data["bound"]) if data["bound"] is not None else None
        # Records written before requirements existed have neither key: the defaults.
        values["require"] = Requirements.from_catalogue(data.get("require") or {})
        values["verifier"] = VerifierOptions.from_catalogue(data.get("verifier") or {})  # none in older records
        values["accepted"] = tuple(Acceptance.from_catalogue(entry) for entry in data.get("accepted") or ())
        case = cls(**values)
        if "id" in data and data["id"] != case.id:
            raise ValueError(f"case id {data['id']!r} does not match its parts ({case.id!r})")
        return case

    def problem(self) -> "e2egen.runner.Problem":
        from e2egen import runner  # torch comes with it: loaded when a case runs, not when a suite is collected

        return runner.make_problem(self.op, self.direction, self.dtype, self.layout, self.params, (self.lo, self.hi),
                                   self.seed, self.data)

    def with_seed(self, seed: int) -> "Case":
        return replace(self, seed=seed)

    @property
    def time_limit(self) -> float:
        """The seconds this case may run unless the command line says otherwise."""
        return self.timeout if self.timeout is not None else DEFAULT_TIMEOUT


def expand(catalogue: Catalogue, global_seed: int | None = None) -> list[Case]:
    """Every case of the catalogue, in catalogue order; raises CatalogueError for cases with no metrics."""
    from e2egen import runner

    seed = catalogue.seed if global_seed is None else global_seed
    default_tolerances = layers.default_layer("tolerances")
    cases, problems = [], []
    figures_by_shape: dict[tuple, tuple[int, int, int]] = {}  # ranges share a problem's size figures
    options: dict[tuple, Any] = {}  # many cases resolve to the same options: built once each
    for suite, config, axes in _combinations(catalogue):
        dtype = axes["dtype"]
        levels = (dtype, axes["direction"])
        tolerances = _resolve(levels, default_tolerances, catalogue.tolerances, suite.tolerances, config.tolerances)
        tolerances = {k: v for k, v in sorted(tolerances.items()) if v is not False}
        key = CaseId(suite.name, suite.op, config.name, axes["direction"], dtype, axes["layout"], axes["range"])
        cid = str(key)
        if not tolerances:
            problems.append(Problem(config.location, cid, f"the case checks no metric: the catalogue turned off every default one; give [tolerances.{dtype}] (or tolerances at the suite or config)"))
            continue
        reference = _options(options, ReferenceOptions, _resolve(levels, catalogue.reference, suite.reference, config.reference))
        require = _options(options, Requirements, _resolve(levels, catalogue.require, suite.require, config.require))
        verifier = _options(options, VerifierOptions, _resolve(levels, catalogue.verifier, suite.verifier, config.verifier))
        params, data = config.params, catalogue.range_data.get(axes["range"], "uniform")
        if axes["range"] == EDGES_RANGE:
            try:
                edge = _edge_data(catalogue, suite, config, axes)
            except runner.ProblemError as err:
                problems.append(Problem(config.location, cid, f"{err.key}: {err.message}"))
                continue
            if edge is None:
                continue
            lo, hi, data = edge.lo, edge.hi, edge.data
            params = {**config.params, **edge.params} if edge.params else config.params
        else:
            lo, hi = catalogue.ranges[axes["range"]]
        shape_key = (suite.name, config.name, axes["direction"], dtype, axes["layout"], params is not config.params)
        figures = figures_by_shape.get(shape_key)
        if figures is None:
            try:
                problem = runner.make_problem(suite.op, axes["direction"], dtype, axes["layout"], params, (lo, hi), 0)
            except runner.ProblemError as err:  # the loader judges every case (check_combinations); a Catalogue built
                problems.append(Problem(config.location, cid, f"{err.key}: {err.message}"))  # elsewhere still gets a location
                continue
            figures = figures_by_shape[shape_key] = (int(problem.flops), int(problem.bytes_needed), int(problem.reduction_size),
                                                     problem.spec.shared_rounding(problem.params, problem.direction), integer_output(problem),
                                                     problem.spec.judged_by_intervals(problem.params))
        tolerances = applicable_tolerances(tolerances, figures[3], figures[4], figures[5])
        bound = None
        if any(name in tolerances for name in BOUND_METRIC_NAMES):
            bound = _options(options, BoundModel, _resolve(levels, catalogue.bound, suite.bound, config.bound))
        pr, pr_reason = _pr(catalogue, suite, config, cid, axes["range"] == EDGES_RANGE)
        cases.append(Case(
            suite=suite.name, config=config.name, op=suite.op,
            direction=axes["direction"], dtype=dtype, layout=axes["layout"], range=axes["range"], lo=lo, hi=hi,
            params=dict(params), seed=derive_seed(seed, cid), tolerances=tolerances,
            reference=reference, bound=bound, impl=suite.impl,
            markers=case_markers(key, pr, (*suite.markers, *config.markers)), pr=pr, pr_reason=pr_reason,
            flops=figures[0], bytes_needed=figures[1], reduction_size=figures[2],
            require=require, verifier=verifier, accepted=catalogue.accepted, location=str(config.location),
            timeout=_timeout(catalogue, suite, config), data=data,
        ))
    if problems:
        raise CatalogueError(problems)
    return cases


def applicable_tolerances(tolerances: dict[str, Any], shared_rounding: str, integer_output: bool = False,
                          intervals: str = "") -> dict[str, Any]:
    """The tolerances that apply to a problem.

    bias_z assumes independent per-element errors, so it is left out where the op says a correct kernel may
    share one rounding across many elements (Op.shared_rounding). Where the op's bound is an acceptance
    interval (Op.judged_by_intervals: element-wise math), membership alone decides: bound_rms and bias_z are
    left out. An integer output has no rounding for the model's metrics to bound: they are left out and,
    unless the catalogue gives another, it must be exact (defaults.INTEGER_TOLERANCES)."""
    from e2egen.generator.defaults import INTEGER_TOLERANCES
    from e2egen.metrics.names import MODEL_TOLERANCES

    if integer_output:
        kept = {name: limit for name, limit in tolerances.items() if name not in MODEL_TOLERANCES}
        return kept or dict(INTEGER_TOLERANCES)
    dropped = {"bound_rms", "bias_z"} if intervals else {"bias_z"} if shared_rounding else set()
    return {name: limit for name, limit in tolerances.items() if name not in dropped}


def integer_output(problem: Any) -> bool:
    """Whether the problem's primary output is an integer format (i8's gemm and conv write i32)."""
    from e2egen.metrics.formats import get_format

    return get_format(problem.out_dtype).is_integer


def _combinations(catalogue: Catalogue) -> Iterator[tuple[Suite, Config, dict[str, str]]]:
    """Every combination of a suite's axes its excludes leave, and after the ranges of each low-bit dtype, the
    edges range (runner/edge_data.py; expand asks the op whether it has edge data there)."""
    for suite in catalogue.suites:
        for config in suite.configs:
            for direction, dtype, layout in itertools.product(suite.directions, suite.dtypes, suite.layouts):
                edges = (EDGES_RANGE,) if suite.edges and is_low_bit(dtype) else ()
                for range_name in (*suite.ranges, *edges):
                    axes = {"config": config.name, "direction": direction, "dtype": dtype, "layout": layout, "range": range_name}
                    if not _excluded(suite, config, axes):
                        yield suite, config, axes


def _excluded(suite: Suite, config: Config, axes: Mapping[str, str]) -> bool:
    return any(e.matches(axes) for e in (*suite.excludes, *config.excludes))


def edge_data(op: str, params: Mapping[str, Any], direction: str, dtype: str) -> "EdgeData | None":
    """An edges case's data: the op's (Op.edge_data), from the config's params. The one place expand and the
    generated modules (codec.decode) take it from."""
    from e2egen.runner.problem import lookup_op

    spec = lookup_op(op)
    return spec.edge_data(spec.parse_params(params), direction, dtype)


def _edge_data(catalogue: Catalogue, suite: Suite, config: Config, axes: Mapping[str, str]) -> "EdgeData | None":
    """edge_data for this combination, None where the op has none or where one of the suite's own ranges already
    draws the same data for it."""
    edge = edge_data(suite.op, config.params, axes["direction"], axes["dtype"])
    if edge is None or edge.params:
        return edge
    for name in suite.ranges:
        same = (catalogue.ranges[name] == (edge.lo, edge.hi) and catalogue.range_data.get(name, "uniform") == edge.data)
        if same and not _excluded(suite, config, {**axes, "range": name}):
            return None
    return edge


def _resolve(case_axes: tuple[str, str], *levels: Layered) -> dict[str, Any]:
    """Most specific wins: e2egen's defaults, catalogue, suite, config; within each, all < direction < dtype < dtype.direction."""
    return layers.merge(levels, *case_axes)  # case_axes is (dtype, direction)


def _pr(catalogue: Catalogue, suite: Suite, config: Config, cid: str, edges: bool = False) -> tuple[bool, str]:
    """Whether a case is in the PR subset, and why. An edges case is nightly data: only the selection picks it."""
    if not edges:
        if config.pr:
            return True, "config pr = true"
        if config.pr is None and suite.pr:
            return True, "suite pr = true"
    if cid in catalogue.pr_selection:
        return True, f"selection: {catalogue.pr_selection[cid]}" if catalogue.pr_selection[cid] else "selection"
    return False, ""


def _timeout(catalogue: Catalogue, suite: Suite, config: Config) -> float | None:
    """The most specific `timeout`: the config's, else the suite's, else the catalogue's (None: the default)."""
    for level in (config, suite, catalogue):
        if level.timeout is not None:
            return float(level.timeout)
    return None


def _options(built: dict[tuple, Any], kind: type, table: Mapping[str, Any]) -> Any:
    """kind.from_catalogue(table), once per distinct table."""
    key = (kind, tuple(sorted(table.items())))
    if key not in built:
        built[key] = kind.from_catalogue(table)
    return built[key]


def case_markers(key: CaseId, pr: bool, catalogue_markers: Iterable[str]) -> tuple[str, ...]:
    """pr (when selected), then op, dtype, direction, layout, edges (an edges case's), then the catalogue's own
    markers."""
    standard = (key.op, key.dtype, key.direction, key.layout, *((EDGES_RANGE,) if key.range == EDGES_RANGE else ()))
    extra = tuple(m for m in catalogue_markers if m not in standard)
    return (("pr",) if pr else ()) + standard + tuple(dict.fromkeys(extra))
