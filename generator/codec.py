"""How cases are written into a generated test module and read back: one codec.

A module lists shared tables once, then one compact row per case (compiling a
module with a full dict per case took seconds for 10,000 cases, and bytecode
caching is often off):

    CONFIGS   config name -> {"params", "location", "markers", "timeout"}  (the catalogue's own markers;
              the config's resolved time limit in seconds, None for the default)
    RANGES    range name -> (low, high), or (low, high, data) where inputs are not uniform reals; an edges
              case's range is not there: its op gives its data (cases.edge_data)
    SETTINGS  "s0", "s1", ... -> {"tolerances", "reference", "bound", "require", "verifier", "accepted"}
              (options as catalogue tables; accepted: the [[accept]] entries as tables)
    rows      (case id, seed, settings name, PR reason or None, flops, bytes needed, reduction size)

`decode(encode(cases), impl)` gives back the same cases (tested), so the
generated suite runs exactly what `gen` expanded.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from e2egen.generator.case_id import CaseId
from e2egen.generator.cases import Case, case_markers, edge_data
from e2egen.runner.arithmetic.requirements import Acceptance
from e2egen.runner.edge_data import EDGES_RANGE
from e2egen.runner.options import BoundModel, ReferenceOptions, Requirements, VerifierOptions

ROW_FIELDS = ("id", "seed", "settings", "pr_reason", "flops", "bytes_needed", "reduction_size")


def encode(cases: Sequence[Case]) -> dict[str, Any]:
    """The tables and rows of one module (cases of one suite, sharing impl)."""
    configs: dict[str, Any] = {}
    ranges: dict[str, tuple] = {}
    settings: dict[str, Any] = {}
    settings_names: dict[tuple, str] = {}
    rows = []
    for case in cases:
        config = configs.setdefault(case.config, {"params": dict(case.params), "location": case.location, "markers": [],
                                                  "timeout": case.timeout})
        # A catalogue marker named like an axis value is dropped from the cases that have that value: the
        # union over the config's cases gives every case its own back.
        config["markers"] += [m for m in case.catalogue_markers if m not in config["markers"]]
        if case.range != EDGES_RANGE:  # an edges case's data is its op's for its dtype and direction: decode asks it
            ranges.setdefault(case.range, (case.lo, case.hi) if case.data == "uniform" else (case.lo, case.hi, case.data))
        # options are hashable values
        key = (tuple(sorted(case.tolerances.items())), case.reference, case.bound, case.require, case.verifier, case.accepted)
        if key not in settings_names:
            settings_names[key] = f"s{len(settings_names)}"
            settings[settings_names[key]] = {
                "tolerances": dict(case.tolerances), "reference": case.reference.to_catalogue(),
                "bound": case.bound.to_catalogue() if case.bound is not None else None,
                "require": case.require.to_catalogue(), "verifier": case.verifier.to_catalogue(),
                "accepted": [entry.to_catalogue() for entry in case.accepted]}
        rows.append((case.id, case.seed, settings_names[key], case.pr_reason if case.pr else None,
                     case.flops, case.bytes_needed, case.reduction_size))
    return {"configs": configs, "ranges": ranges, "settings": settings, "rows": rows}


def decode(tables: Mapping[str, Any], impl: str | None) -> list[Case]:
    """The cases of a module from its tables (keys as `encode` writes them, upper- or lower-case)."""
    configs, ranges = _table(tables, "configs"), _table(tables, "ranges")
    # Options are decoded once per settings entry: many cases share one.
    settings = {name: (entry["tolerances"], ReferenceOptions.from_catalogue(entry["reference"]),
                       BoundModel.from_catalogue(entry["bound"]) if entry["bound"] is not None else None,
                       Requirements.from_catalogue(entry.get("require") or {}),
                       VerifierOptions.from_catalogue(entry.get("verifier") or {}),
                       tuple(Acceptance.from_catalogue(a) for a in entry.get("accepted") or ()))
                for name, entry in _table(tables, "settings").items()}
    cases = []
    for row in _table(tables, "rows"):
        values = dict(zip(ROW_FIELDS, row))
        key = CaseId.parse(values["id"])
        config = configs[key.config]
        tolerances, reference, bound, require, verifier, accepted = settings[values["settings"]]
        params = config["params"]
        if key.range == EDGES_RANGE:
            edge = edge_data(key.op, params, key.direction, key.dtype)
            if edge is None:
                raise ValueError(f"case {values['id']!r}: {key.op} has no edge data for {key.dtype} {key.direction} any more; "
                                 "generate the suite again")
            lo, hi, data, params = edge.lo, edge.hi, [edge.data], {**params, **edge.params}
        else:
            lo, hi, *data = ranges[key.range]
        pr = values["pr_reason"] is not None
        cases.append(Case(
            suite=key.suite, op=key.op, config=key.config, direction=key.direction, dtype=key.dtype,
            layout=key.layout, range=key.range, lo=lo, hi=hi, params=params, seed=values["seed"],
            tolerances=tolerances, reference=reference, bound=bound,
            impl=impl, markers=case_markers(key, pr, config["markers"]), pr=pr, pr_reason=values["pr_reason"] or "",
            flops=values["flops"], bytes_needed=values["bytes_needed"], reduction_size=values["reduction_size"],
            require=require, verifier=verifier, accepted=accepted, location=config["location"], timeout=config.get("timeout"),
            data=data[0] if data else "uniform",
        ))
    return cases


def _table(tables: Mapping[str, Any], name: str) -> Any:
    return tables[name] if name in tables else tables[name.upper()]
