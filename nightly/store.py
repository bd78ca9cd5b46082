"""The results store: every run and every case it recorded, in one SQLite file.

Schema (version 1):

    runs     one row per run: run_id, global_seed, started, ended (ISO 8601
             UTC; ended is NULL while running or after a kill), machine (JSON),
             device, catalogue, catalogue_sha256, git_revision, git_dirty,
             shard ("I/N" or NULL), partition (fingerprint of the shard split),
             selected (cases the run set out to run), records_path,
             merged_from (JSON list), merged_into (set on shard runs merged here)
    records  one row per (run_id, case_id), the primary key, so a case is never
             stored twice: axes, seed, device, versions, status, phase,
             reason, skip_reason, margin (max value/tolerance), timings,
             duration, flops, histogram (JSON) and the whole record (JSON), which
             carries the cell's measured arithmetic (`arithmetic`; absent in
             records written before it was recorded, read as None)
    metrics  one row per (run_id, case_id, metric): value, tolerance (NULL when
             not checked), ratio = value/tolerance, failed

Readers for the next steps: runs(), records(run_id), metric_history(case_id,
metric) and metric_maxima() for calibrating tolerances from what was
observed, durations(device) and headroom(run_id) for choosing the PR subset.

Failures are StoreErrors (user errors: one line naming the file, exit 2), never
SQLite tracebacks: a damaged page, a `record` that is not JSON (naming the run
and case), a full disk (the change is rolled back whole), a store locked by
another process. Another application's SQLite file is refused before anything
is written to it ("not an e2egen results store"), and so is a store SQLite's
integrity check (PRAGMA quick_check) finds damaged, whenever a store is opened
for writing; a missing or empty file
becomes a new store (tables created in one transaction). Run ids are checked
(records.check_run_id) wherever a run is looked up or created.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from e2egen.files import make_directory, refuse_overwriting_input
from e2egen.nightly.errors import NightlyError, RecordsError, StoreError
from e2egen.nightly.records import CaseRecord, check_run_id, read_records_file

DEFAULT_STORE = "results/e2e.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    global_seed INTEGER,
    started TEXT,
    ended TEXT,
    machine TEXT,
    device TEXT,
    catalogue TEXT,
    catalogue_sha256 TEXT,
    git_revision TEXT,
    git_dirty INTEGER,
    shard TEXT,
    partition TEXT,
    selected INTEGER,
    records_path TEXT,
    merged_from TEXT,
    merged_into TEXT
);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    case_id TEXT NOT NULL,
    suite TEXT, op TEXT, config TEXT, direction TEXT, dtype TEXT, layout TEXT, range TEXT,
    reference TEXT,
    seed INTEGER,
    device TEXT,
    torch TEXT, cuda TEXT, cudnn TEXT,
    status TEXT NOT NULL,
    phase TEXT,
    reason TEXT,
    skip_reason TEXT,
    margin REAL,
    t_inputs REAL, t_kernel REAL, t_reference REAL, t_bound REAL, t_compare REAL,
    duration REAL,
    flops INTEGER,
    worker TEXT,
    finished TEXT,
    histogram TEXT,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, case_id)
);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL,
    case_id TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    tolerance REAL,
    ratio REAL,
    failed INTEGER NOT NULL,
    PRIMARY KEY (run_id, case_id, metric)
);
CREATE INDEX IF NOT EXISTS metrics_by_case ON metrics (case_id, metric);
CREATE INDEX IF NOT EXISTS records_by_case ON records (case_id);
"""

# Everything an e2egen store holds in sqlite_master (SQLite's own sqlite_* objects aside).
_OBJECTS = frozenset({"meta", "runs", "records", "metrics", "metrics_by_case", "records_by_case"})

_RUN_COLUMNS = ("run_id", "global_seed", "started", "ended", "machine", "device", "catalogue", "catalogue_sha256",
                "git_revision", "git_dirty", "shard", "partition", "selected", "records_path", "merged_from", "merged_into")


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    global_seed: int | None = None
    started: str | None = None
    ended: str | None = None  # None: still running, or killed
    machine: Mapping[str, Any] = field(default_factory=dict)
    device: str | None = None
    catalogue: str | None = None
    catalogue_sha256: str | None = None
    git_revision: str | None = None
    git_dirty: bool | None = None
    shard: str | None = None
    partition: str | None = None
    selected: int | None = None
    records_path: str | None = None
    merged_from: tuple[str, ...] = ()
    merged_into: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)  # passed / failed / skipped, from its records

    @property
    def recorded(self) -> int:
        return sum(self.counts.values())

    @property
    def complete(self) -> bool:
        return self.ended is not None and (self.selected is None or self.recorded >= self.selected)


@dataclass(frozen=True)
class MetricPoint:
    """One observation of a case's metric: which run, when, on what, the value and the verdict."""

    run_id: str
    started: str | None
    device: str | None
    value: float | None
    tolerance: float | None
    ratio: float | None
    failed: bool


@dataclass(frozen=True)
class IngestResult:
    added: int
    duplicates: int
    runs: tuple[str, ...]


class UnknownRun(NightlyError):
    pass


SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite_file(path: str | Path) -> bool:
    """Whether `path` is a file that starts as an SQLite database does (a store, not a records file)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == SQLITE_MAGIC
    except OSError:
        return False


class Store:
    """A results store at `path` (created on first use unless create=False)."""

    def __init__(self, path: str | Path = DEFAULT_STORE, *, create: bool = True):
        self.path = Path(path)
        if create:  # a writer: never a file the running command reads (a catalogue given as --store)
            refuse_overwriting_input(self.path, "the results store")
        if self.path.is_dir():
            raise StoreError("a directory, not a results store file; give a file path with --store", where=str(self.path))
        if not self.path.exists():
            if not create:
                raise StoreError("no results store here (run `e2egen nightly`, or give --store)", where=str(self.path))
            if self.path.is_symlink():  # SQLite would create the store wherever the link points
                raise StoreError(f"a symbolic link to {os.readlink(self.path)}, which does not exist; e2egen creates "
                                 "a store only where it is named (remove the link, or give another --store)",
                                 where=str(self.path))
            make_directory(self.path.parent)
        try:
            connection = sqlite3.connect(str(self.path), timeout=60)
        except sqlite3.Error as err:
            raise store_error(self.path, err) from None
        connection.row_factory = sqlite3.Row
        self.db = Database(self.path, connection)
        try:
            self._open(create)
        except BaseException:
            connection.close()
            raise

    def _open(self, create: bool) -> None:
        """Check that the file is an e2egen store of this schema version (or empty: then create the tables)."""
        try:
            objects = {row[0] for row in self.db.connection.execute(
                "SELECT name FROM sqlite_master WHERE substr(name, 1, 7) != 'sqlite_'")}
        except sqlite3.DatabaseError as err:
            if "not a database" in str(err) or "encrypted" in str(err):
                raise StoreError(f"not a results store (not an SQLite database: {err}); it was left untouched",
                                 where=str(self.path)) from None
            raise store_error(self.path, err) from None
        if not objects:
            if not create:
                raise StoreError("an empty file, not a results store (run `e2egen nightly`, or give --store)",
                                 where=str(self.path))
            self.db.executescript(f"BEGIN; {_SCHEMA}\nINSERT OR IGNORE INTO meta VALUES ('schema_version', "
                                  f"'{SCHEMA_VERSION}'); COMMIT;")
            return
        foreign = sorted(objects - _OBJECTS)
        if foreign or "meta" not in objects:
            held = f"it holds {', '.join(foreign[:5])}{' …' if len(foreign) > 5 else ''}" if foreign else "no e2egen tables"
            raise StoreError(f"not an e2egen results store ({held}); it was left untouched: give another --store",
                             where=str(self.path))
        self._check_version()
        if create:
            self._check_integrity()
        if create:  # a writer: any table a crash kept from being created (the tables are made in one transaction)
            self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def transaction(self):
        """`with store.transaction():` what is written inside is stored whole or (on an error) not at all."""
        return self.db.transaction()

    def _check_integrity(self) -> None:
        """A writer opens only a store SQLite finds sound (PRAGMA quick_check): a damaged one is never written to."""
        try:
            problems = [str(row[0]) for row in self.db.connection.execute("PRAGMA quick_check(5)")]
        except sqlite3.DatabaseError as err:
            raise store_error(self.path, err) from None
        if problems != ["ok"]:
            raise StoreError(f"the results store is damaged (database disk image is malformed); SQLite's "
                             f"integrity check found: {' '.join(' '.join(problems).split())[:300]}; it was left untouched, nothing was written: "
                             "restore it from a backup, or give another --store (a run's records file can be "
                             "ingested again with `e2egen merge RUN.jsonl`)", where=str(self.path))

    def _check_version(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            raise StoreError("not an e2egen results store (its meta table has no schema version); it was left "
                             "untouched: give another --store", where=str(self.path))
        if str(row["value"]) != str(SCHEMA_VERSION):
            raise StoreError(f"store schema version {row['value']}, this e2egen reads {SCHEMA_VERSION}",
                             where=str(self.path))

    # -- runs -------------------------------------------------------------------------
    def upsert_run(self, header: Mapping[str, Any]) -> None:
        """Create a run or complete its row: known fields keep their value, started keeps the
        earliest and ended the latest (a resumed run has several headers and ends)."""
        with self.db.transaction():
            self._upsert_run_row(check_run_id(header["run_id"]), _run_values(header))

    def _upsert_run_row(self, run_id: str, values: Mapping[str, Any]) -> None:
        values = {**values, "run_id": run_id}
        row = self.db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            cols = ", ".join(values)
            self.db.execute(f"INSERT INTO runs ({cols}) VALUES ({', '.join('?' for _ in values)})", tuple(values.values()))
            return
        updates = {}
        for key, value in values.items():
            old = row[key]
            if key == "started" and old is not None:
                value = min(old, value)
            elif key == "ended" and old is not None:
                value = max(old, value)
            elif key == "selected":
                pass  # the latest plan wins (a resume counts it again)
            elif old is not None:
                continue
            if value != old:
                updates[key] = value
        if updates:
            sets = ", ".join(f"{k} = ?" for k in updates)
            self.db.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", (*updates.values(), run_id))

    def set_run_fields(self, run_id: str, **fields: Any) -> None:
        """Overwrite fields of a run (e.g. merged_into, ended)."""
        self.run(run_id)
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self.db.transaction():
            self.db.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", (*fields.values(), run_id))

    def runs(self) -> list[RunInfo]:
        """Every run, oldest first."""
        rows = self.db.execute("SELECT rowid, * FROM runs ORDER BY started, rowid").fetchall()
        counts = self._counts()
        return [self._run_info(row, counts.get(row["run_id"], {})) for row in rows]

    def run(self, run_id: str) -> RunInfo:
        """The run `run_id`; UnknownRun when there is none, NightlyError with the valid form when it is no run id."""
        row = self.db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            check_run_id(run_id)  # (a stored run is found whatever its id: one merged before ids were checked)
            known = [r.run_id for r in self.runs()]
            hint = f"; known runs: {', '.join(known[-5:])}" + (" (latest 5; see `e2egen runs`)" if len(known) > 5 else "") \
                if known else "; the store holds no runs yet"
            raise UnknownRun(f"{self.path}: unknown run id {run_id!r}{hint}")
        return self._run_info(row, self._counts(run_id).get(run_id, {}))

    def has_run(self, run_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None

    def report_runs(self) -> list[RunInfo]:
        """Runs a report compares by default: whole sweeps and merged runs, not the shards merged into them."""
        return [r for r in self.runs() if r.merged_into is None]

    def latest_run(self) -> RunInfo:
        runs = self.report_runs()
        if not runs:
            raise NightlyError(f"{self.path}: the store holds no runs yet (run `e2egen nightly`)")
        return runs[-1]

    def previous_run(self, run_id: str) -> RunInfo | None:
        """The run before `run_id` in report order, or None."""
        runs = self.report_runs()
        ids = [r.run_id for r in runs]
        if run_id not in ids:
            self.run(run_id)  # unknown: raises
            return runs[-1] if runs else None
        index = ids.index(run_id)
        return runs[index - 1] if index > 0 else None

    def _counts(self, run_id: str | None = None) -> dict[str, dict[str, int]]:
        sql = "SELECT run_id, status, COUNT(*) AS n FROM records"
        args: tuple = ()
        if run_id is not None:
            sql += " WHERE run_id = ?"
            args = (run_id,)
        out: dict[str, dict[str, int]] = {}
        for row in self.db.execute(sql + " GROUP BY run_id, status", args):
            out.setdefault(row["run_id"], {})[row["status"]] = row["n"]
        return out

    def _run_info(self, row: sqlite3.Row, counts: Mapping[str, int]) -> RunInfo:
        data = {k: row[k] for k in _RUN_COLUMNS}
        data["machine"] = self._json_column(data, "machine", dict) if data["machine"] else {}
        data["merged_from"] = tuple(self._json_column(data, "merged_from", list)) if data["merged_from"] else ()
        data["git_dirty"] = None if data["git_dirty"] is None else bool(data["git_dirty"])
        return RunInfo(**data, counts=dict(counts))

    def _json_column(self, data: Mapping[str, Any], column: str, kind: type) -> Any:
        try:
            value = json.loads(data[column])
        except (TypeError, ValueError, RecursionError) as err:
            value = err
        if not isinstance(value, kind):
            raise StoreError(f"run {data['run_id']}: its `{column}` is not a JSON {kind.__name__} "
                             f"({value if isinstance(value, Exception) else type(value).__name__}); the store is "
                             f"damaged: restore it from a backup", where=str(self.path))
        return value

    # -- records ----------------------------------------------------------------------
    def add_record(self, record: CaseRecord) -> bool:
        """Store one case of a run; False (and nothing changes) when that case is already stored."""
        with self.db.transaction():
            return self._insert(record)

    def _insert(self, record: CaseRecord) -> bool:
        if not self.has_run(record.run_id):
            check_run_id(record.run_id)
            self.db.execute("INSERT INTO runs (run_id, global_seed) VALUES (?, ?)", (record.run_id, record.global_seed))
        t = record.timings
        cursor = self.db.execute(
            "INSERT OR IGNORE INTO records VALUES (" + ", ".join("?" * 31) + ")",
            (record.run_id, record.case_id, *record.parts.values, record.reference_variant, record.seed, record.device,
             record.versions.get("torch"), record.versions.get("cuda"), record.versions.get("cudnn"),
             record.status, record.phase, record.reason, record.skip_reason, _real(record.margin),
             t.get("inputs"), t.get("kernel"), t.get("reference"), t.get("bound"), t.get("compare"),
             record.duration, record.flops, record.worker, record.finished,
             json.dumps(record.histogram) if record.histogram is not None else None,
             json.dumps(record.to_dict(), separators=(",", ":"))))
        if cursor.rowcount == 0:
            return False
        failed = {f["metric"] for f in record.failures}
        ratios = record.ratios()
        rows = []
        for metric, value in record.metrics.items():
            tolerance = record.tolerances.get(metric)
            ratio = ratios.get(metric)
            rows.append((record.run_id, record.case_id, metric, _real(value),
                         None if tolerance is None or isinstance(tolerance, bool) else float(tolerance),
                         _real(ratio), int(metric in failed or (ratio is not None and ratio > 1))))
        self.db.executemany("INSERT OR IGNORE INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        return True

    def ingest(self, objects: Iterable[Mapping[str, Any]], *, run_id: str | None = None) -> IngestResult:
        """Store run headers, case records and run ends from a records stream.

        run_id: store everything under this run instead of the ids in the stream
        (merge uses it). Cases already stored for the run are skipped, so
        ingesting the same file twice, or a resumed run's file, stores each case once.
        """
        added = duplicates = 0
        runs: list[str] = []
        if run_id is not None:
            check_run_id(run_id)
        with self.db.transaction():
            for obj in objects:
                kind = obj.get("type")
                target = run_id or obj.get("run_id")
                if not target:
                    continue
                if target not in runs:
                    check_run_id(target)
                    runs.append(target)
                if kind == "run":
                    self._upsert_run_row(target, _run_values({**obj, "run_id": target}))
                elif kind == "run_end":
                    if obj.get("ended"):
                        self._upsert_run_row(target, {"ended": obj["ended"]})
                elif kind == "case":
                    record = CaseRecord.from_dict({**obj, "run_id": target})
                    if self._insert(record):
                        added += 1
                    else:
                        duplicates += 1
        return IngestResult(added, duplicates, tuple(runs))

    def ingest_file(self, path: str | Path, *, run_id: str | None = None) -> IngestResult:
        """Ingest a records file; a line that is not a valid record is a RecordsError naming file:line."""
        return self.ingest(list(read_records_file(path, validate=True)), run_id=run_id)

    def records(self, run_id: str) -> list[CaseRecord]:
        """Every case of a run, in the order they finished."""
        self.run(run_id)
        rows = self.db.execute("SELECT case_id, record FROM records WHERE run_id = ? ORDER BY rowid", (run_id,))
        return [self._record_of(run_id, row) for row in rows]

    def _record_of(self, run_id: str, row: sqlite3.Row) -> CaseRecord:
        where = f"run {run_id}, case {row['case_id']}"
        try:
            data = json.loads(row["record"])
        except (TypeError, ValueError, RecursionError) as err:
            raise StoreError(f"{where}: the stored record is not JSON ({err}); the store is damaged: restore it "
                             f"from a backup, or ingest the run's records file into a new store", where=str(self.path)) from None
        try:
            return CaseRecord.from_dict(data)
        except RecordsError as err:
            raise StoreError(f"{where}: the stored record is damaged: {err.message}", where=str(self.path)) from None

    def recorded_case_ids(self, run_id: str) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT case_id FROM records WHERE run_id = ?", (run_id,))}

    def status_counts(self, run_id: str) -> dict[str, int]:
        return self._counts(run_id).get(run_id, {})

    # -- evidence for calibration and PR-subset selection ---------------------------
    def metric_history(self, case_id: str, metric: str) -> list[MetricPoint]:
        """Every recorded value of one case's metric, oldest run first (merged shards counted once)."""
        rows = self.db.execute(
            "SELECT m.run_id, r.started, rec.device, m.value, m.tolerance, m.ratio, m.failed "
            "FROM metrics m JOIN runs r USING (run_id) JOIN records rec USING (run_id, case_id) "
            "WHERE m.case_id = ? AND m.metric = ? AND r.merged_into IS NULL ORDER BY r.started, r.rowid",
            (case_id, metric))
        return [MetricPoint(row["run_id"], row["started"], row["device"], row["value"], row["tolerance"], row["ratio"],
                            bool(row["failed"])) for row in rows]

    def metric_maxima(self, metric: str | None = None, *, run_ids: Iterable[str] | None = None,
                      device: str | None = None) -> dict[tuple[str, str], float]:
        """(case_id, metric) -> the largest value observed over the given runs (default: all but merged shards)."""
        sql = ("SELECT m.case_id, m.metric, MAX(m.value) AS value FROM metrics m JOIN runs r USING (run_id) "
               "JOIN records rec USING (run_id, case_id) WHERE r.merged_into IS NULL")
        args: list[Any] = []
        if metric is not None:
            sql += " AND m.metric = ?"
            args.append(metric)
        if device is not None:
            sql += " AND rec.device = ?"
            args.append(device)
        if run_ids is not None:
            ids = list(run_ids)
            sql += f" AND m.run_id IN ({', '.join('?' for _ in ids)})"
            args.extend(ids)
        rows = self.db.execute(sql + " GROUP BY m.case_id, m.metric", args)
        return {(row["case_id"], row["metric"]): row["value"] for row in rows if row["value"] is not None}

    def durations(self, device: str | None = None) -> dict[str, float]:
        """case_id -> median wall time in seconds over the runs that ran it (on `device`, if given).

        Skipped cases and cases that never started do not count: their time says
        nothing about the case's cost.
        """
        sql = ("SELECT rec.case_id, rec.duration FROM records rec JOIN runs r USING (run_id) "
               "WHERE r.merged_into IS NULL AND rec.status != 'skipped' AND rec.phase IN ('call', 'teardown') "
               "AND rec.duration > 0")
        args: tuple = ()
        if device is not None:
            sql += " AND rec.device = ?"
            args = (device,)
        samples: dict[str, list[float]] = {}
        for row in self.db.execute(sql, args):
            samples.setdefault(row["case_id"], []).append(row["duration"])
        return {case_id: statistics.median(values) for case_id, values in samples.items()}

    def devices(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT DISTINCT device FROM records WHERE device IS NOT NULL ORDER BY device")]

    def headroom(self, run_id: str) -> dict[str, float]:
        """case_id -> margin (max value/tolerance) in one run; > 1 failed, near 0 is far from failing."""
        rows = self.db.execute("SELECT case_id, margin FROM records WHERE run_id = ? AND margin IS NOT NULL", (run_id,))
        return {row["case_id"]: row["margin"] for row in rows}


class Database:
    """The store's SQLite connection: every SQLite error becomes a StoreError naming the file.

    execute/executemany/executescript as sqlite3's (the rows they return translate
    errors met while iterating too); transaction() nests: only the outermost
    commits, and an error anywhere rolls the whole of it back.
    """

    def __init__(self, path: Path, connection: sqlite3.Connection):
        self.path = path
        self.connection = connection
        self._depth = 0

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as err:
            if isinstance(err, sqlite3.ProgrammingError):
                raise
            raise store_error(self.path, err) from None

    def execute(self, sql: str, args: Iterable[Any] = ()) -> "Rows":
        with self.errors():
            return Rows(self, self.connection.execute(sql, tuple(args)))

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> "Rows":
        with self.errors():
            return Rows(self, self.connection.executemany(sql, rows))

    def executescript(self, script: str) -> None:
        with self.errors():
            self.connection.executescript(script)

    def commit(self) -> None:
        if self._depth == 0:
            with self.errors():
                self.connection.commit()

    def close(self) -> None:
        self.connection.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._depth = 1
        try:
            yield
            self._depth = 0
            with self.errors():
                self.connection.commit()
        except BaseException:
            self._depth = 0
            try:
                self.connection.rollback()
            except sqlite3.Error:
                pass
            raise


class Rows:
    """A cursor whose reads report SQLite errors as StoreErrors."""

    def __init__(self, db: Database, cursor: sqlite3.Cursor):
        self._db, self._cursor = db, cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> sqlite3.Row | None:
        with self._db.errors():
            return self._cursor.fetchone()

    def fetchall(self) -> list[sqlite3.Row]:
        with self._db.errors():
            return self._cursor.fetchall()

    def __iter__(self) -> Iterator[sqlite3.Row]:
        while True:
            with self._db.errors():
                row = self._cursor.fetchone()
            if row is None:
                return
            yield row


def store_error(path: Path, err: sqlite3.Error) -> StoreError:
    """One line naming the store and what SQLite met, with what to do about it."""
    text = str(err)
    lowered = text.lower()
    if "malformed" in lowered or "corrupt" in lowered:
        message = (f"the results store is damaged ({text}); restore it from a backup, or give another --store "
                   "(a run's records file can be ingested again with `e2egen merge RUN.jsonl`)")
    elif "not a database" in lowered:
        message = f"not a results store (not an SQLite database: {text}); it was left untouched"
    elif "disk is full" in lowered or "disk full" in lowered:
        message = "cannot write: disk full (SQLite: database or disk is full); the change was rolled back, nothing of it was stored"
    elif "locked" in lowered or "busy" in lowered:
        message = f"another process holds the store locked ({text}); try again when it has finished"
    elif "readonly" in lowered or "read-only" in lowered:
        message = f"cannot write: the store is read-only ({text})"
    elif "unable to open" in lowered:
        message = f"cannot open the results store ({text}: no permission, or its directory is missing)"
    elif "i/o error" in lowered or "disk i/o" in lowered:
        message = f"cannot read or write the store: disk I/O error ({text})"
    else:
        message = f"SQLite error: {text}"
    return StoreError(message, where=str(path))


def _run_values(header: Mapping[str, Any]) -> dict[str, Any]:
    """A run header's known, non-null fields as SQLite values."""
    values = {k: header.get(k) for k in _RUN_COLUMNS if header.get(k) is not None}
    if "machine" in values and not isinstance(values["machine"], str):
        values["machine"] = json.dumps(values["machine"], sort_keys=True)
    if "merged_from" in values and not isinstance(values["merged_from"], str):
        values["merged_from"] = json.dumps(list(values["merged_from"]))
    if "git_dirty" in values:
        values["git_dirty"] = int(bool(values["git_dirty"]))
    return values


def _real(value: Any) -> float | None:
    """A float for SQLite (NaN becomes NULL there anyway; say so explicitly)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def iter_store_records(path: str | Path, run_id: str | None = None) -> Iterator[dict]:
    """A store's run (default: its latest) as a records stream: header, cases, end. Used by merge."""
    with Store(path, create=False) as store:
        run = store.run(run_id) if run_id else store.latest_run()
        header = {"type": "run", **{k: getattr(run, k) for k in _RUN_COLUMNS if k not in ("merged_into",)}}
        header["merged_from"] = list(run.merged_from)
        records = store.records(run.run_id)
    yield header
    for record in records:
        yield record.to_dict()
    if run.ended:
        yield {"type": "run_end", "run_id": run.run_id, "ended": run.ended}
