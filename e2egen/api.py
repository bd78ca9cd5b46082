"""Judge a kernel from Python, without a catalogue file: `judge(kernel, op, shape, dtype)` -> Outcome.

The call is a one-suite, one-config catalogue in all but its spelling: it goes through the catalogue's own
loader (the same checks, defaults, seeds and case id) and through generator.execute (the same inputs,
probes, reference, metrics and verdict as a generated test), so a kernel passes here exactly when it passes
in a catalogue. Mistakes name the keyword argument that holds them.

A kernel is any callable with the op's signature (docs/reference/kernel-contract.md). One that Python can
import by its own name (a module-level function) is named so in the case and its report; any other (a
lambda, a closure, a bound method) is lent to the runner for the call under a name in
e2egen.lent_kernels, the one place kernels are looked up from.
"""
from __future__ import annotations

import importlib
import itertools
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from e2egen.generator.errors import CatalogueError, Location, Problem

if TYPE_CHECKING:
    from e2egen.generator.cases import Case
    from e2egen.generator.execute import Outcome

SOURCE = "e2egen.judge()"  # where a mistake is, as messages name it
_SUITE, _CONFIG, _RANGE = "judge", "given", "given"
DEFAULT_DATA_RANGE = (-1.0, 1.0)
# The suite-level tables a call may give, as in a catalogue's [[suite]] (docs/reference/catalogue.md).
_LENT_NAMES = itertools.count(1)


def judge(kernel: Callable[..., Any] | str | None, op: str, shape: Mapping[str, Any], dtype: str, *,
          direction: str = "fwd", layout: str | None = None, data_range: tuple[float, float] = DEFAULT_DATA_RANGE,
          integer_data: bool = False, seed: int = 0, device: str | None = None,
          tolerances: Mapping[str, Any] | None = None, reference: Mapping[str, Any] | None = None,
          bound: Mapping[str, Any] | None = None, require: Mapping[str, Any] | None = None,
          verifier: Mapping[str, Any] | None = None, accept: list[Mapping[str, Any]] | None = None,
          timeout: float | None = None) -> Outcome:
    """Run `kernel` on one problem and judge it as a generated test would; returns its Outcome.

    kernel: a callable with the op's signature, "package.module:function", or None / "torch" for torch's own.
    shape: the op's shape keys, as a catalogue's [[suite.config]] gives them (gemm: m, n, k; conv2d: n, c, k,
        hw, kernel, stride, pad, ...; `e2egen validate` and docs/reference/ops.md list them).
    layout: one of the op's layouts (None: its first, e.g. "nn" for gemm, "nchw" for conv).
    data_range, integer_data: where inputs are drawn, uniform reals in [lo, hi] or the integers lo..hi.
    seed: the global seed; the case's own seed derives from it and the case id, as in a catalogue.
    tolerances, reference, bound, require, verifier, accept: a catalogue's tables of the same names (the
        suite-level ones, and [[accept]] entries); None: the defaults, i.e. the model's verdict alone.
    timeout: seconds the case may take (None: no limit).

    Outcome.passed says whether it passed; .status, .reason, .report (every metric, the worst element, the
    arithmetic measured), .verdict and .comparison hold the details; .repro is the call that reruns it.
    Raises CatalogueError (a ValueError-like UserError) naming the argument for invalid input.
    """
    from e2egen.generator.execute import execute

    with _kernel_name(kernel) as impl:
        case = _the_case(impl, op, shape, dtype, direction, layout, data_range, integer_data, seed,
                         {"tolerances": tolerances, "reference": reference, "bound": bound, "require": require,
                          "verifier": verifier},
                         accept)
        repro = _repro(kernel, impl, op, shape, dtype, direction, case.layout, data_range, integer_data, seed)
        return execute(case, device=device, timeout=timeout, repro=repro)


def check(kernel: Callable[..., Any] | str | None, op: str, shape: Mapping[str, Any], dtype: str,
          **options: Any) -> Outcome:
    """judge(), for a test of one's own: raises AssertionError carrying the report when the case fails.

    A skipped case (the kernel declined it, or the device is missing) is returned, not raised: its
    .status is "skipped" and .reason says why.
    """
    outcome = judge(kernel, op, shape, dtype, **options)
    if outcome.status == "failed":
        raise AssertionError(f"{outcome.case.id}: {outcome.reason}\n{outcome.report}\nrerun: {outcome.repro}")
    return outcome


def _the_case(impl: str | None, op: str, shape: Mapping[str, Any], dtype: str, direction: str,
              layout: str | None, data_range: tuple[float, float], integer_data: bool, seed: int,
              tables: Mapping[str, Mapping[str, Any] | None], accept: list[Mapping[str, Any]] | None) -> Case:
    """The call as a catalogue, validated by the catalogue's loader, expanded to its one case."""
    from e2egen import runner
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import parse_catalogue_data

    if not isinstance(shape, Mapping):
        raise _error("shape", f"expected a mapping of the op's shape keys (e.g. {{'m': 64, 'n': 64, 'k': 256}}), "
                              f"got {type(shape).__name__}")
    suite: dict[str, Any] = {"name": _SUITE, "op": op, "dtypes": [dtype], "directions": [direction],
                             "ranges": [_RANGE], "config": [{"name": _CONFIG, **shape}]}
    if layout is None and isinstance(op, str) and op in runner.OPS:
        layout = runner.OPS[op].layouts[0]
    if layout is not None:
        suite["layouts"] = [layout]
    if impl is not None:
        suite["impl"] = impl
    suite.update({name: dict(table) for name, table in tables.items() if table is not None})
    data_range_value: Any = list(data_range) if isinstance(data_range, (tuple, list)) else data_range
    # edges = false: the call judges its one problem on the data it gives (a catalogue adds edges cases to low-bit ones)
    data: dict[str, Any] = {"seed": seed, "edges": False, "suite": [suite],
                            "ranges": {_RANGE: {"range": data_range_value, "data": "integers"} if integer_data
                                       else data_range_value}}
    if accept is not None:
        data["accept"] = [dict(entry) for entry in accept]
    try:
        (case,) = expand(parse_catalogue_data(data, SOURCE))
    except CatalogueError as err:
        raise CatalogueError([Problem(p.location, _argument(p.key), p.message) for p in err.problems]) from None
    return case


# Where each catalogue key of the call came from: the keyword argument a message names instead.
_ARGUMENTS = (
    (rf"suite\[0\]\.config\[0\]\.(\w+)(.*)", r"shape['\1']\2"),
    (r"suite\[0\]\.(dtype|direction|layout)s(\[\d+\])?(.*)", r"\1\3"),
    (r"suite\[0\]\.impl", "kernel"),
    (r"suite\[0\]\.config\[0\]|suite\[0\]\.ranges.*|suite\[0\]\.config", "shape"),
    (r"suite\[0\]\.(.*)", r"\1"),
    (rf"ranges\.{_RANGE}.*", "data_range"),
    (r"suite.*", ""),
)


def _argument(key: str) -> str:
    for pattern, replacement in _ARGUMENTS:
        if re.fullmatch(pattern, key):
            return re.sub(pattern, replacement, key)
    return key


def _error(argument: str, message: str) -> CatalogueError:
    return CatalogueError([Problem(Location(SOURCE), argument, message)])


@contextmanager
def _kernel_name(kernel: Callable[..., Any] | str | None) -> Iterator[str | None]:
    """The name the case calls `kernel` by: its own where Python imports it by that name, else a name it is
    lent under (e2egen.lent_kernels) for the duration of the call."""
    if kernel is None or isinstance(kernel, str):
        yield kernel
        return
    if not callable(kernel):
        raise _error("kernel", f"expected a callable, \"package.module:function\" or None (torch's own), "
                               f"got {type(kernel).__name__}")
    own = _importable_name(kernel)
    if own is not None:
        yield own
        return
    from e2egen import lent_kernels
    from e2egen.runner.kernels import LENT_KERNELS_MODULE

    name = f"{re.sub(r'[^A-Za-z0-9_]', '_', getattr(kernel, '__name__', 'kernel'))}_{next(_LENT_NAMES)}"
    setattr(lent_kernels, name, kernel)
    try:
        yield f"{LENT_KERNELS_MODULE}:{name}"
    finally:
        delattr(lent_kernels, name)


def _importable_name(kernel: Callable[..., Any]) -> str | None:
    """"module:qualname" when importing that gives this very object back, else None."""
    module_name, qualname = getattr(kernel, "__module__", None), getattr(kernel, "__qualname__", None)
    if not module_name or not qualname or "<" in qualname or module_name == "__main__":
        return None  # a lambda or a local function; __main__ is another module in the runner's subprocesses
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except Exception:  # noqa: BLE001 - not importable by its name: lent instead
        return None
    return f"{module_name}:{qualname}" if target is kernel else None


def _repro(kernel: Any, impl: str | None, op: str, shape: Mapping[str, Any], dtype: str, direction: str,
           layout: str, data_range: tuple[float, float], integer_data: bool, seed: int) -> str:
    """The call that reruns this case (the tables given, if any, go with it as they were passed)."""
    from e2egen.runner.kernels import is_lent

    if kernel is None or isinstance(kernel, str) or not is_lent(impl):
        kernel_text = repr(kernel) if kernel is None or isinstance(kernel, str) else repr(impl)
    else:
        kernel_text = getattr(kernel, "__qualname__", "kernel")
    extras = "" if tuple(data_range) == DEFAULT_DATA_RANGE else f", data_range={tuple(data_range)!r}"
    extras += ", integer_data=True" if integer_data else ""
    return (f"e2egen.judge({kernel_text}, {op!r}, {dict(shape)!r}, {dtype!r}, direction={direction!r}, "
            f"layout={layout!r}{extras}, seed={seed})")
