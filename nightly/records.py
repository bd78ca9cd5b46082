"""The record of one case as a sweep saw it, and the JSON-lines files that hold records.

A records file is a sequence of JSON objects, one per line, each with a
"type":

    run       a run's header: run_id, global_seed, started, machine, catalogue, git revision
    started   a case began (case_id): finds the case that killed an in-process run
    case      a finished case: CaseRecord.to_dict(), with the arithmetic of its cell (or null)
    run_end   the pytest session ended: ended, exitstatus

Writers append whole lines with one write() each under an exclusive lock, so
a killed run leaves every finished case intact and at most one torn last line,
which readers skip. Python's json writes non-finite metrics as NaN/Infinity,
which Python's json reads back.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from e2egen.generator.case_id import PARTS

FORMAT = 1
TIMING_KEYS = ("inputs", "kernel", "reference", "bound", "compare")
AXES = PARTS  # a record carries every part of its case's id
# Where a case ended: in the test body (call), in pytest's setup or teardown,
# at collection (its module did not import), in a crashed worker or process,
# or never started because the pytest process died first.
PHASES = ("call", "setup", "teardown", "collect", "crash", "not-run")


@dataclass(frozen=True)
class CaseRecord:
    """One case of one run: what ran, where, what it measured, the verdict and the time spent."""

    run_id: str
    case_id: str
    status: str  # passed | failed | skipped
    phase: str  # one of PHASES
    reason: str  # why it failed ("" unless failed)
    skip_reason: str  # why it was skipped ("" unless skipped)
    suite: str
    op: str
    config: str
    direction: str
    dtype: str
    layout: str
    range: str
    params: Mapping[str, Any]
    seed: int | None
    global_seed: int | None
    device: str
    versions: Mapping[str, str | None]  # torch, cuda, hip, cudnn
    tolerances: Mapping[str, float]
    reference: Mapping[str, Any]  # the reference options the case ran with
    metrics: Mapping[str, float]  # every metric and count the comparison computed
    failures: tuple[Mapping[str, Any], ...] = ()  # metric, value, tolerance, ratio, reason
    histogram: Mapping[str, int] | None = None  # relative-difference buckets, the seed's table
    comparison: Mapping[str, Any] | None = None  # Comparison.as_dict(): worst elements and all
    timings: Mapping[str, float] = field(default_factory=dict)  # seconds: inputs, kernel, reference, bound, compare
    duration: float = 0.0  # pytest's wall time for the test, all phases
    flops: int = 0
    repro: str = ""
    worker: str = ""
    finished: str = ""
    nodeid: str = ""
    # The kernel's arithmetic for the case's cell (arithmetic_record): cell, device, impl, versions, origin and
    # findings (Arithmetic.to_table()); None when the runner measured none (and in records older than it).
    arithmetic: Mapping[str, Any] | None = None

    @property
    def axes(self) -> dict[str, str]:
        return {axis: getattr(self, axis) for axis in AXES}

    @property
    def reference_variant(self) -> str:
        """The reference as a short label: where it ran, then its variants, e.g. "cpu", "device+ftz+acc4"."""
        ref = self.reference or {}
        parts = [str(ref.get("device", "cpu"))]
        if ref.get("ftz"):
            parts.append("ftz")
        if ref.get("accumulate"):
            parts.append(f"acc{ref['accumulate']}")
        if ref.get("round_output"):
            parts.append("round")
        return "+".join(parts)

    def ratios(self) -> dict[str, float]:
        """value / tolerance for each metric the case checks (its headroom: <= 1 passes)."""
        out = {}
        for name, tolerance in self.tolerances.items():
            value = self.metrics.get(name)
            if value is None or isinstance(tolerance, bool):
                continue
            out[name] = tolerance_ratio(value, tolerance)
        for failure in self.failures:  # counts with an implicit tolerance of 0 fail without being named
            out.setdefault(failure["metric"], float(failure["ratio"]))
        return out

    @property
    def margin(self) -> float | None:
        """The largest value / tolerance over the checked metrics; None when nothing was measured."""
        ratios = [r for r in self.ratios().values() if not math.isnan(r)]
        return max(ratios) if ratios else None

    @property
    def worst_metric(self) -> str | None:
        ratios = self.ratios()
        return max(ratios, key=lambda k: (ratios[k], k)) if ratios else None

    def to_dict(self) -> dict[str, Any]:
        data = {"type": "case", "format": FORMAT}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, tuple):
                value = [dict(v) for v in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            data[name] = value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CaseRecord":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["failures"] = tuple(known.get("failures") or ())
        return cls(**known)


def tolerance_ratio(value: float, tolerance: float) -> float:
    if tolerance == 0:
        return 0.0 if value == 0 else math.inf
    return value / tolerance


def metric_keys() -> tuple[str, ...]:
    """The numbers of a comparison that are metrics (computed per case, aggregated in reports)."""
    # Imported here: metrics imports torch, which the recorder must not load while pytest collects.
    from e2egen.metrics.names import ALLOWANCE_NAMES, METRIC_NAMES

    return tuple(dict.fromkeys((*METRIC_NAMES, *ALLOWANCE_NAMES, "mismatches", "ftz_allowed")))


def metrics_of(comparison_dict: Mapping[str, Any] | None) -> dict[str, float]:
    if not comparison_dict:
        return {}
    return {k: comparison_dict[k] for k in metric_keys()
            if isinstance(comparison_dict.get(k), (int, float)) and not isinstance(comparison_dict.get(k), bool)}


def record_from_outcome(outcome, *, run_id: str, global_seed: int | None, nodeid: str, worker: str,
                        duration: float, versions: Mapping[str, str | None], finished: str) -> CaseRecord:
    """The record of a case the e2e_case fixture ran (an Outcome of generator.execute)."""
    case = outcome.case
    comparison = outcome.comparison.as_dict() if outcome.comparison is not None else None
    failures = ()
    if outcome.verdict is not None:
        failures = tuple({"metric": f.metric, "value": f.value, "tolerance": f.tolerance, "ratio": f.ratio,
                          "reason": getattr(f, "reason", "")} for f in outcome.verdict.failures)
    status = outcome.status
    return CaseRecord(
        run_id=run_id, case_id=case.id, status=status, phase="call",
        reason=outcome.reason if status == "failed" else "",
        skip_reason=outcome.reason if status == "skipped" else "",
        **{axis: getattr(case, axis) for axis in AXES},
        params=dict(case.params), seed=case.seed, global_seed=global_seed, device=outcome.device,
        versions=dict(versions), tolerances=dict(case.tolerances), reference=case.reference.to_catalogue(),
        metrics=metrics_of(comparison), failures=failures,
        histogram=dict(comparison["histogram"]) if comparison and comparison.get("histogram") else None,
        comparison=comparison, timings={k: float(v) for k, v in outcome.timings.items()},
        duration=duration, flops=int(case.flops), repro=outcome.repro, worker=worker, finished=finished, nodeid=nodeid,
        arithmetic=_arithmetic_or_none(outcome),
    )


def _arithmetic_or_none(outcome) -> dict[str, Any] | None:
    try:
        return arithmetic_record(getattr(outcome, "arithmetic", None))
    except Exception as err:  # a malformed Measured costs the record its arithmetic, not the case's metrics
        import warnings

        warnings.warn(f"e2egen recorder: could not record the arithmetic of {outcome.case.id}: {err!r}")
        return None


def arithmetic_record(measured) -> dict[str, Any] | None:
    """A record's `arithmetic` from the runner's Measured (runner.arithmetic.lookup), or None without one.

    {"cell": "conv2d/bwd_data/f16/nchw/window", "device": name, "impl": impl, "versions": {name: version},
     "origin": "shipped profile …" | "cached profile …" | "probed now, cached in …" | "assumed (…)",
     "findings": Arithmetic.to_table()}. Duck-typed: no runner (torch) import in the recorder.
    """
    if measured is None:
        return None
    key = measured.device
    return {"cell": str(measured.cell), "device": str(key.device), "impl": str(key.impl),
            "versions": {str(name): str(version) for name, version in (key.versions or ())},
            "origin": str(measured.origin), "findings": dict(measured.arithmetic.to_table())}


def record_from_case_data(case: Mapping[str, Any], *, run_id: str, status: str, phase: str, reason: str,
                          global_seed: int | None, seed: int | None, device: str, repro: str, nodeid: str, worker: str,
                          duration: float, versions: Mapping[str, str | None], finished: str) -> CaseRecord:
    """The record of a case that ended outside the fixture: setup or collection error, crash, never run."""
    return CaseRecord(
        run_id=run_id, case_id=str(case["id"]), status=status, phase=phase,
        reason=reason if status == "failed" else "", skip_reason=reason if status == "skipped" else "",
        **{axis: str(case.get(axis, "")) for axis in AXES},
        params=dict(case.get("params") or {}), seed=seed, global_seed=global_seed, device=device,
        versions=dict(versions), tolerances=dict(case.get("tolerances") or {}), reference=dict(case.get("reference") or {}),
        metrics={}, duration=duration, flops=int(case.get("flops") or 0), repro=repro, worker=worker,
        finished=finished, nodeid=nodeid,
    )


# -- JSON lines ---------------------------------------------------------------------
def encode(obj: Mapping[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), default=_json_default) + "\n").encode("utf-8")


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    return str(value)


class RecordWriter:
    """Appends JSON lines to a file that other processes may append to as well."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, obj: Mapping[str, Any]) -> None:
        data = encode(obj)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(self._fd).st_size
            if size and os.pread(self._fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a killed writer left a torn line: start ours on a fresh one
            # One write() per line: with O_APPEND and the lock no other writer's bytes land inside it.
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1


class RecordTail:
    """Reads the complete lines appended to a records file since the last poll."""

    def __init__(self, path: str | Path, offset: int = 0):
        self.path = Path(path)
        self.offset = offset
        self.malformed = 0

    def poll(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []  # only a line still being written (or torn by a kill)
        self.offset += end + 1
        out = []
        for line in data[:end].split(b"\n"):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                self.malformed += 1  # the torn last line of a killed writer, followed by newer lines
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out


def read_records_file(path: str | Path) -> Iterator[dict]:
    """Every complete JSON object of a records file, in order."""
    yield from RecordTail(path).poll()


def new_run_id(now=None) -> str:
    """A run id that sorts by start time and does not collide: 20250114-031209-3fa2."""
    import datetime as _dt
    import secrets

    now = now or _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
