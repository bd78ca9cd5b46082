"""Helpers for the calibrate and select tests (no tests here): a commented catalogue and synthetic nightly stores."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable, Mapping

from e2egen.generator.cases import Case, expand
from e2egen.generator.loader import parse_catalogue
from e2egen.nightly.store import Store

# A catalogue with comments, odd spacing and every way of writing a layered table.
COMMENTED = """\
# The catalogue under test: comments and layout must survive `calibrate --write`.
seed = 7

[ranges]
r0 = [-1.0, 1.0]   # straddles zero
r4 = [1.0, 5.0]

# Per-dtype defaults.
[tolerances.f32]
rms = 1e-6          # f32: accumulation order only
bound_ratio = 1.0

[tolerances.f16]
rms   = 1e-3        # f16 default
max_abs_diff = 0.5
bound_ratio = 1.0

[[suite]]
name = "g"          # gemms
op = "gemm"
dtypes = ["f32", "f16"]
layouts = ["nn", "tt"]
ranges = ["r0"]

[[suite.config]]
name = "a"
m = 8
n = 8
k = 16

[[suite]]
name = "h"
op = "gemm"
dtypes = ["f32", "f16"]
layouts = ["nn"]
ranges = ["r0", "r4"]
tolerances = { f32 = { rms = 2e-6 } }   # inline, suite level

[[suite.config]]
name = "b"
m = 4
n = 4
k = 8
tolerances.f16 = { bound_ratio = 1.0 }  # dotted, config level

[[suite.config]]
name = "c"
m = 4
n = 8
k = 8
"""


def cases_of(text: str, path: str = "configs.toml") -> list[Case]:
    return expand(parse_catalogue(text, path))


def record(case: Case, run_id: str, metrics: Mapping[str, float], *, status: str | None = None,
           duration: float = 0.5, device: str = "cpu", magnitude: float = 3.0, reason: str = "") -> dict:
    """A `case` records-stream object for `case` with these metric values (verdict from the case's tolerances)."""
    failures = []
    for name, tolerance in case.tolerances.items():
        value = metrics.get(name)
        if value is not None and not isinstance(tolerance, bool) and value > tolerance:
            failures.append({"metric": name, "value": value, "tolerance": tolerance, "ratio": value / tolerance,
                             "reason": ""})
    status = status or ("failed" if failures else "passed")
    worst = {"max_abs_diff": {"index": 0, "position": [0, 0], "ref": magnitude, "out": magnitude, "bound": 1.0,
                              "value": metrics.get("max_abs_diff", 0.0)}}
    return {
        "type": "case", "format": 1, "run_id": run_id, "case_id": case.id, "status": status, "phase": "call",
        "reason": reason or ("; ".join(f"{f['metric']} too large" for f in failures) if status == "failed" else ""),
        "skip_reason": "no such device" if status == "skipped" else "",
        "suite": case.suite, "op": case.op, "config": case.config, "direction": case.direction, "dtype": case.dtype,
        "layout": case.layout, "range": case.range, "params": dict(case.params), "seed": case.seed, "global_seed": 1,
        "device": device, "versions": {"torch": "2.x"}, "tolerances": dict(case.tolerances),
        "reference": case.reference.to_catalogue(), "metrics": {} if status == "skipped" else dict(metrics),
        "failures": failures, "comparison": {"worst": worst} if status != "skipped" else None,
        "timings": {}, "duration": duration, "flops": case.flops, "repro": f"e2egen run {case.id}",
    }


def fill_store(path: Path, cases: list[Case], runs: int,
               metrics_of: Callable[[Case, int], Mapping[str, float] | None], **kwargs) -> list[str]:
    """`runs` runs through Store.ingest; metrics_of(case, i) gives a case's metrics in run i (None: not run)."""
    ids = []
    with Store(path) as store:
        for i in range(runs):
            run_id = f"run{i + 1}"
            objects = [{"type": "run", "run_id": run_id, "global_seed": i + 1, "started": f"2025-01-1{i}T02:00:00Z",
                        "device": "cpu", "selected": len(cases)}]
            for case in cases:
                values = metrics_of(case, i)
                if values is not None:
                    extra = kwargs.get("extra", lambda c, i: {})(case, i)
                    objects.append(record(case, run_id, values, **extra))
            objects.append({"type": "run_end", "run_id": run_id, "ended": f"2025-01-1{i}T03:00:00Z"})
            store.ingest(objects)
            ids.append(run_id)
    return ids


def damage_store_page(path: Path, table: str) -> None:
    """Overwrite the head of a table's root page with garbage: SQLite reads it as a damaged page (its integrity
    check reports the store as corrupt)."""
    with sqlite3.connect(path) as db:
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with open(path, "r+b") as f:
        f.seek((root - 1) * page)
        f.write(b"\xff" * 64)
