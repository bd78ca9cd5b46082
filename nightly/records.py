"""The record of one case as a sweep saw it, and the JSON-lines files that hold records.

A records file is a sequence of JSON objects, one per line, each with a
"type":

    run       a run's header: run_id, global_seed, started, machine, catalogue, git revision
    started   a case began (case_id): finds the case that killed an in-process run
    case      a finished case: CaseRecord.to_dict(), with the arithmetic of its cell (or null)
    run_end   the pytest session ended: ended, exitstatus

Writers append whole lines with one write() each under an exclusive lock, so
a killed run leaves every finished case intact and at most one torn last line;
a write that fails (disk full) is cut back to the last whole line. Readers
skip a torn line with a warning naming it (file:line); any other line that is
not a record (not JSON, a missing or mistyped field, a bad run id) is a
RecordsError naming file:line, never skipped without a word. Python's json
writes non-finite metrics as NaN/Infinity, which Python's json reads back.

One writer per run: `lock_run` takes an exclusive lock on RUN.lock beside the
run's records file for as long as a sweep writes the run; a second sweep of the
same run (two `--resume` at once) gets RunBusy naming the holder's pid.

Run ids are names (`check_run_id`): the sweep's own 20250114-031209-3fa2, or
up to 64 letters, digits, '.', '_' and '-' starting with a letter or digit.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Mapping, get_args

from e2egen import files
from e2egen.files import make_directory, open_appending, output_error
from e2egen.generator.case_id import PARTS, CaseIdParts
from e2egen.generator.execute import CASE_STATUSES, CaseStatus
from e2egen.nightly.errors import NightlyError, RecordsError, RunBusy
from e2egen.runner.safe_text import safe_strings

if TYPE_CHECKING:  # torch: the recorder runs while pytest collects and must not load it
    from e2egen.generator.execute import Outcome
    from e2egen.runner.arithmetic.lookup import Measured

FORMAT = 1
TIMING_KEYS = ("inputs", "kernel", "reference", "bound", "compare")
AXES = PARTS  # a record carries every part of its case's id (CaseRecord.parts), under the part's name
# Where a case ended: in the test body (call), in pytest's setup or teardown,
# at collection (its module did not import), in a crashed worker or process,
# or never started because the pytest process died first.
Phase = Literal["call", "setup", "teardown", "collect", "crash", "not-run"]
PHASES: tuple[Phase, ...] = get_args(Phase)


@dataclass(frozen=True)
class CaseRecord:
    """One case of one run: what ran, where, what it measured, the verdict and the time spent.

    `parts` holds the parts of the case's id; the JSON form writes them flat, each under its own name, where
    the field stands."""

    run_id: str
    case_id: str
    status: CaseStatus
    phase: Phase
    reason: str  # why it failed ("" unless failed)
    skip_reason: str  # why it was skipped ("" unless skipped)
    parts: CaseIdParts  # suite, op, config, direction, dtype, layout, range (JSON: one key each)
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
        """Every part of the case's id by name (AXES)."""
        return self.parts.as_dict()

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
        data: dict[str, Any] = {"type": "case", "format": FORMAT}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, CaseIdParts):
                data.update(value.as_dict())  # flat, in the field's place
                continue
            if isinstance(value, tuple):
                value = [dict(v) for v in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            data[f.name] = value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CaseRecord":
        """The record of a `case` object; RecordsError saying which field is missing or of the wrong type."""
        problem = case_problem(data)
        if problem is not None:
            raise RecordsError(problem)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["parts"] = CaseIdParts.from_mapping(data)
        known["failures"] = tuple(known.get("failures") or ())
        return cls(**known)


# What a `case` object must hold, by type (the fields CaseRecord has no default for are required).
_NUMBER = (int, float)
_CASE_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {  # name -> (accepted types, may be null)
    "run_id": ((str,), False), "case_id": ((str,), False), "status": ((str,), False), "phase": ((str,), False),
    "reason": ((str,), False), "skip_reason": ((str,), False),
    **{axis: ((str,), False) for axis in AXES},
    "params": ((dict,), False), "seed": ((int,), True), "global_seed": ((int,), True), "device": ((str,), False),
    "versions": ((dict,), False), "tolerances": ((dict,), False), "reference": ((dict,), False),
    "metrics": ((dict,), False),
}
_OPTIONAL_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "failures": ((list,), True), "histogram": ((dict,), True), "comparison": ((dict,), True),
    "timings": ((dict,), True), "duration": (_NUMBER, True), "flops": (_NUMBER, True), "repro": ((str,), True),
    "worker": ((str,), True), "finished": ((str,), True), "nodeid": ((str,), True), "arithmetic": ((dict,), True),
}
STATUSES = CASE_STATUSES


def case_problem(data: Any) -> str | None:
    """What is wrong with a `case` object (a missing field, a wrong type), or None when CaseRecord can hold it."""
    if not isinstance(data, Mapping):
        return f"a case record must be a JSON object, not {_json_type(data)}"
    missing = [name for name in _CASE_FIELDS if name not in data]
    if missing:
        return f"case record {_name_of(data)}lacks the field{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    for table in (_CASE_FIELDS, _OPTIONAL_FIELDS):
        for name, (types, nullable) in table.items():
            value = data.get(name)
            if value is None and (nullable or name not in data):
                continue
            if isinstance(value, bool) and bool not in types or not isinstance(value, types):
                wanted = " or ".join(_TYPE_NAMES[t] for t in types) + (" or null" if nullable else "")
                return f"case record {_name_of(data)}field {name!r} must be {wanted}, not {_json_type(value)}"
    if data["status"] not in STATUSES:
        return f"case record {_name_of(data)}field 'status' is {data['status']!r}; expected one of {', '.join(STATUSES)}"
    for name in ("metrics", "timings", "tolerances"):
        for key, value in (data.get(name) or {}).items():
            if value is not None and not isinstance(value, _NUMBER) or isinstance(value, bool) and name != "tolerances":
                return f"case record {_name_of(data)}{name}.{key} must be a number, not {_json_type(value)}"
    for index, failure in enumerate(data.get("failures") or ()):
        if not isinstance(failure, Mapping) or not isinstance(failure.get("metric"), str) \
                or isinstance(failure.get("ratio"), bool) or not isinstance(failure.get("ratio"), _NUMBER):
            return f"case record {_name_of(data)}failures[{index}] must be an object with a metric name and a numeric ratio"
    return None


_TYPE_NAMES = {str: "text", int: "an integer", float: "a number", dict: "an object", list: "a list"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    for kind, name in _TYPE_NAMES.items():
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _name_of(data: Mapping[str, Any]) -> str:
    case_id = data.get("case_id")
    return f"{case_id!r} " if isinstance(case_id, str) else ""


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


def record_from_outcome(outcome: Outcome, *, run_id: str, global_seed: int | None, nodeid: str, worker: str,
                        duration: float, versions: Mapping[str, str | None], finished: str) -> CaseRecord:
    """The record of a case the e2e_case fixture ran (an Outcome of generator.execute)."""
    case = outcome.case
    comparison = outcome.comparison.as_dict() if outcome.comparison is not None else None
    failures: tuple[Mapping[str, Any], ...] = ()
    if outcome.verdict is not None:
        failures = tuple({"metric": f.metric, "value": f.value, "tolerance": f.tolerance, "ratio": f.ratio,
                          "reason": f.reason} for f in outcome.verdict.failures)
    status = outcome.status
    return CaseRecord(
        run_id=run_id, case_id=case.id, status=status, phase="call",
        reason=outcome.reason if status == "failed" else "",
        skip_reason=outcome.reason if status == "skipped" else "",
        parts=case.key.unchecked(),
        params=dict(case.params), seed=case.seed, global_seed=global_seed, device=outcome.device,
        versions=dict(versions), tolerances=dict(case.tolerances), reference=case.reference.to_catalogue(),
        metrics=metrics_of(comparison), failures=failures,
        histogram=dict(comparison["histogram"]) if comparison and comparison.get("histogram") else None,
        comparison=comparison, timings={k: float(v) for k, v in outcome.timings.items()},
        duration=duration, flops=int(case.flops), repro=outcome.repro, worker=worker, finished=finished, nodeid=nodeid,
        arithmetic=_arithmetic_or_none(outcome),
    )


def _arithmetic_or_none(outcome: Outcome) -> dict[str, Any] | None:
    try:
        return arithmetic_record(outcome.arithmetic)
    except Exception as err:  # a malformed Measured costs the record its arithmetic, not the case's metrics
        import warnings

        warnings.warn(f"e2egen recorder: could not record the arithmetic of {outcome.case.id}: {err!r}")
        return None


def arithmetic_record(measured: Measured | None) -> dict[str, Any] | None:
    """A record's `arithmetic` from the runner's Measured (runner.arithmetic.lookup), or None without one.

    {"cell": "conv2d/bwd_data/f16/nchw/window", "device": name, "impl": impl, "versions": {name: version},
     "origin": "shipped profile …" | "cached profile …" | "probed now, cached in …" | "assumed (…)",
     "findings": Arithmetic.to_table()}. The runner (torch) is imported for type checking only, never by the
    recorder.
    """
    if measured is None:
        return None
    key = measured.device
    return {"cell": str(measured.cell), "device": str(key.device), "impl": str(key.impl),
            "versions": {str(name): str(version) for name, version in (key.versions or ())},
            "origin": str(measured.origin), "findings": dict(measured.arithmetic.to_table())}


def record_from_case_data(case: Mapping[str, Any], *, run_id: str, status: CaseStatus, phase: Phase, reason: str,
                          global_seed: int | None, seed: int | None, device: str, repro: str, nodeid: str, worker: str,
                          duration: float, versions: Mapping[str, str | None], finished: str) -> CaseRecord:
    """The record of a case that ended outside the fixture: setup or collection error, crash, never run."""
    return CaseRecord(
        run_id=run_id, case_id=str(case["id"]), status=status, phase=phase,
        reason=reason if status == "failed" else "", skip_reason=reason if status == "skipped" else "",
        parts=CaseIdParts.from_mapping(case),
        params=dict(case.get("params") or {}), seed=seed, global_seed=global_seed, device=device,
        versions=dict(versions), tolerances=dict(case.get("tolerances") or {}), reference=dict(case.get("reference") or {}),
        metrics={}, duration=duration, flops=int(case.get("flops") or 0), repro=repro, worker=worker,
        finished=finished, nodeid=nodeid,
    )


# -- JSON lines ---------------------------------------------------------------------
def encode(obj: Mapping[str, Any]) -> bytes:
    """One JSON line. Every string is made safe first (runner.safe_text): a kernel's text with lone surrogates
    would otherwise be written as a \\udcff escape that reads back as a str the store cannot encode."""
    return (json.dumps(safe_strings(obj), separators=(",", ":"), default=_json_default) + "\n").encode("utf-8")


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    return str(value)


class RecordWriter:
    """Appends JSON lines to a file that other processes may append to as well.

    An append cannot be atomic; what it can be is whole: a write that fails
    part way (disk full) cuts the file back to its last whole line and raises
    OutputError naming the file, so readers never meet a partial line of ours.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        make_directory(self.path.parent)
        self._fd = open_appending(self.path)

    def write(self, obj: Mapping[str, Any]) -> None:
        data = encode(obj)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(self._fd).st_size
            if size and os.pread(self._fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a killed writer left a torn line: start ours on a fresh one
            # One write() per line: with O_APPEND and the lock no other writer's bytes land inside it.
            try:
                files.write_all(self._fd, data)
            except OSError as err:
                self._cut_back(size)
                raise output_error(self.path, err, "the record was not written") from None
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _cut_back(self, size: int) -> None:
        """Drop the part of a line a failed write left (under the lock: no other writer is appending)."""
        try:
            os.ftruncate(self._fd, size)
        except OSError:
            pass  # the reader reports the partial last line instead

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1


class RecordTail:
    """Reads the complete lines appended to a records file since the last poll (the sweep, while pytest writes).

    Lenient, as a live reader must be: a line that is not a JSON object is counted
    (`malformed`) and described in `problems` (file:line), never raised.
    """

    def __init__(self, path: str | Path, offset: int = 0):
        self.path = Path(path)
        self.offset = offset
        self.malformed = 0
        self.problems: list[str] = []
        self.line: int | None = 0 if offset == 0 else None  # complete lines before `self.offset` (counted when needed)

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
        first_line = self._lines_before(self.offset)
        self.offset += end + 1
        out = []
        for number, line in enumerate(data[:end].split(b"\n"), first_line + 1):
            if not line.strip():
                continue
            obj, problem = _parse_line(line)
            if problem is not None:
                self.malformed += 1  # the torn last line of a killed writer, followed by newer lines
                self.problems.append(f"{self.path}:{number}: {problem}")
                continue
            out.append(obj)
        self.line = first_line + data[:end].count(b"\n") + 1
        return out

    def _lines_before(self, offset: int) -> int:
        if self.line is None:  # started part way into the file: count the lines before it once
            try:
                with open(self.path, "rb") as f:
                    self.line = f.read(offset).count(b"\n")
            except OSError:
                self.line = 0
        return self.line


Warn = Callable[[str], None]


def _warn_to_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def read_records_file(path: str | Path, *, validate: bool = False, warn: Warn | None = None) -> Iterator[dict]:
    """Every record (JSON object) of a records file, in order.

    A torn line (what a writer killed mid-line leaves: a cut-off JSON object) is
    skipped with a warning naming file:line, as is a last line without its
    newline that is not whole JSON. Any other line that is not a JSON object is
    a RecordsError naming file:line. validate: also check each record's fields
    (a case's required fields and their types, a run id that is a name): what
    merging and ingesting need; RecordsError naming file:line and the field.
    warn: where warnings go (default: "warning: ..." on stderr).
    """
    path = Path(path)
    warn = warn or _warn_to_stderr
    try:
        handle = open(path, "rb")
    except OSError as err:
        raise RecordsError(f"cannot read the records file: {err.strerror or err}", where=str(path)) from None
    with handle:
        try:
            lines = list(_numbered_lines(handle))
        except OSError as err:
            raise RecordsError(f"cannot read the records file: {err.strerror or err}", where=str(path)) from None
    for number, line, complete in lines:
        if not line.strip():
            continue
        where = f"{path}:{number}"
        obj, problem = _parse_line(line)
        if problem is not None:
            if problem.startswith(TORN):
                what = "the last line is cut off" if not complete else "a torn line"
                warn(f"{where}: {what} (a writer killed or out of disk space mid-line); skipped")
                continue
            raise RecordsError(problem, where=where)
        if validate:
            problem = record_problem(obj)
            if problem is not None:
                raise RecordsError(problem, where=where)
        yield obj


def _numbered_lines(handle) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, line without its newline, whether the newline was there)."""
    for number, line in enumerate(handle, 1):
        complete = line.endswith(b"\n")
        yield number, line.rstrip(b"\r\n") if complete else line, complete


TORN = "a torn line"
_PARTIAL_TOKEN = re.compile(r"[A-Za-z0-9.+-]*")  # what is left of a number, NaN, Infinity, true, false, null


def _parse_line(line: bytes) -> tuple[dict | None, str | None]:
    """(the JSON object, None), or (None, what is wrong): starting with TORN for a cut-off record."""
    stripped = line.strip()
    try:
        text = stripped.decode("utf-8")
    except UnicodeDecodeError as err:
        if stripped.startswith(b"{") and err.reason == "unexpected end of data":
            return None, f"{TORN} (cut inside a character)"
        return None, f"not a record: the line is not UTF-8 text (byte {err.start + 1}): {_excerpt(stripped)}"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        rest = text[err.pos:]
        if text.startswith("{") and err.msg != "Extra data" and (
                err.msg.startswith("Unterminated string") or _PARTIAL_TOKEN.fullmatch(rest)
                or (err.msg.startswith("Invalid \\u") and re.fullmatch(r"u[0-9a-fA-F]{0,3}", rest))):
            return None, f"{TORN} (cut after {err.pos} characters)"
        return None, f"not a record: not JSON ({err.msg} at column {err.colno}): {_excerpt(stripped)}"
    except RecursionError:
        return None, f"not a record: JSON nested too deep: {_excerpt(stripped)}"
    if not isinstance(obj, dict):
        return None, f"not a record: a JSON {_json_type(obj)}, not an object: {_excerpt(stripped)}"
    try:
        return safe_strings(obj), None  # a lone-surrogate escape written before it was made safe
    except RecursionError:
        return None, f"not a record: JSON nested too deep: {_excerpt(stripped)}"


def _excerpt(line: bytes, limit: int = 60) -> str:
    text = line.decode("utf-8", errors="replace")
    return repr(text if len(text) <= limit else text[:limit] + "…")


def record_problem(obj: Mapping[str, Any]) -> str | None:
    """What is wrong with one object of a records file (by its type), or None."""
    kind = obj.get("type")
    if not isinstance(kind, str):
        return "a record without a \"type\" (run, started, case, run_end)"
    run_id = obj.get("run_id")
    if kind in ("run", "run_end", "case") or run_id is not None:
        if not isinstance(run_id, str):
            return f"{kind} record: field 'run_id' must be text, not {_json_type(run_id)}" if "run_id" in obj \
                else f"{kind} record lacks the field run_id"
        problem = run_id_problem(run_id)
        if problem is not None:
            return f"{kind} record: {problem}"
    if kind == "case":
        return case_problem(obj)
    if kind in ("run", "run_end"):
        for name, types in _HEADER_FIELDS.items():
            value = obj.get(name)
            if value is not None and (not isinstance(value, types) or isinstance(value, bool) and bool not in types):
                return f"{kind} record {run_id!r}: field {name!r} must be {' or '.join(_TYPE_NAMES[t] for t in types)}, " \
                       f"not {_json_type(value)}"
    return None


_HEADER_FIELDS: dict[str, tuple[type, ...]] = {
    "global_seed": (int,), "started": (str,), "ended": (str,), "machine": (dict,), "device": (str,),
    "catalogue": (str,), "catalogue_sha256": (str,), "git_revision": (str,), "shard": (str,), "partition": (str,),
    "selected": (int,), "records_path": (str,), "merged_from": (list,),
}


# -- run ids ------------------------------------------------------------------------
RUN_ID_FORM = ("a name of 1 to 64 letters, digits, '.', '_' or '-' that starts with a letter or digit, "
               "like the sweep's own 20250114-031209-3fa2")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def run_id_problem(run_id: Any) -> str | None:
    """Why `run_id` is not a valid run id (it names files: RUN.jsonl, report-RUN.html), or None."""
    if isinstance(run_id, str) and _RUN_ID.fullmatch(run_id):
        return None
    return f"run id {run_id!r} is not valid: expected {RUN_ID_FORM}"


def check_run_id(run_id: str, option: str | None = None) -> str:
    """`run_id` when it is valid; else a NightlyError saying the valid form (`option`: where it was given)."""
    problem = run_id_problem(run_id)
    if problem is not None:
        raise NightlyError(problem, key=option)
    return run_id


def new_run_id(now=None) -> str:
    """A run id that sorts by start time and does not collide: 20250114-031209-3fa2."""
    import datetime as _dt
    import secrets

    now = now or _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


# -- one writer per run -------------------------------------------------------------
class RunLock:
    """An exclusive lock on a run, held by the one process that writes it; released by release() or at exit."""

    def __init__(self, run_id: str, path: Path, fd: int):
        self.run_id, self.path, self._fd = run_id, path, fd

    def release(self) -> None:
        if self._fd >= 0:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_path(records_path: str | Path) -> Path:
    return Path(records_path).with_suffix(".lock")


def lock_run(run_id: str, records_path: str | Path) -> RunLock:
    """Take the run's write lock (RUN.lock beside its records file RUN.jsonl) or raise RunBusy naming its holder.

    flock: the kernel releases it when the holder dies, however it dies, so a
    killed sweep never leaves a stale lock; the file stays (deleting a lock file
    races with the next taker) and holds the holder's pid.
    """
    path = lock_path(records_path)
    make_directory(path.parent)
    fd = open_appending(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _read_pid(fd)
        os.close(fd)
        raise RunBusy(f"run {run_id} is being written by another process (pid {holder}); wait for it to end, "
                      f"or stop it and resume with `e2egen nightly --resume {run_id}` (lock: {path})") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the pid is only for the message
    return RunLock(run_id, path, fd)


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        text = ""
    return text if text.isdigit() else "unknown"
