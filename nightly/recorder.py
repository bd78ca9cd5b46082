"""pytest plugin: one JSON record per finished case (--e2e-record PATH.jsonl; inactive without it).

The generated conftest does not load it (a PR run imports nothing of nightly):
load it on pytest's command line, `pytest build/e2e -p e2egen.nightly.recorder
--e2e-record PATH.jsonl`, as the sweep does; it loads the sweep plugin in turn.
Where it runs:

- The process that runs a test (the single process, or an xdist worker)
  builds the case's record from the Outcome the e2e_case fixture stashed on
  the item and attaches it to the test report (xdist ships report attributes
  to the controller).
- The process that is not an xdist worker is the only writer: it appends the
  record when the case's teardown report arrives, so a case is written once,
  with its total time, and a killed run keeps every finished case.

Cases that end outside the fixture are recorded as well, as failed (or
skipped) with the reason: setup errors and skips, teardown errors, modules
that do not import (every case of the module, from manifest.json), cases
that crash an xdist worker, and tests that fail without an Outcome.
"""
from __future__ import annotations

import json
import os
import re
import traceback
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping

import pytest

from e2egen.generator.cases import Case, derive_seed
from e2egen.generator.execute import catalogue_argument, repro_command
from e2egen.generator.catalogue import module_slug
from e2egen.generator.plugin import OUTCOME, expired_time_limit, resolve_catalogue
from e2egen.invocation import e2egen_command
from e2egen.runner.errors import format_seconds
from e2egen.nightly import machine
from e2egen.nightly.records import (RecordWriter, new_run_id, record_from_case_data, record_from_outcome)
from e2egen.nightly.case_filter import CASE_FILTER, case_data

pytest_plugins = ["e2egen.nightly.sweep_plugin"]

RECORD_ATTR = "e2e_record"  # a JSON string on the TestReport: xdist carries extra report attributes as-is
MAX_REASON = 4000
XDIST_HEADER = re.compile(r"\[gw\d+\] \S+ -- Python ")


def pytest_addoption(parser):
    group = parser.getgroup("e2egen nightly")
    group.addoption("--e2e-record", metavar="PATH.jsonl", default=None,
                    help="append one JSON record per finished case to PATH (JSON lines; off by default)")
    group.addoption("--e2e-record-run-id", metavar="RUN_ID", default=None,
                    help="the run id written in the records (default: a new id from the time)")


def pytest_configure(config):
    path = config.getoption("--e2e-record")
    if path:
        is_worker = hasattr(config, "workerinput")
        config.pluginmanager.register(Recorder(config, Path(path), is_writer=not is_worker), "e2egen-recorder")


def case_id_of(nodeid: str) -> str | None:
    """The case id in a generated test's node id: build/e2e/test_x.py::test_case[<case id>]."""
    name = nodeid.rsplit("::", 1)[-1]
    if "[" not in name or not name.endswith("]"):
        return None
    return name[name.index("[") + 1:-1]


def _suite_directory(path: Path) -> Path:
    """The generated suite's directory of a collected path (its module, or the directory itself)."""
    return path if path.is_dir() else path.parent


def _reason(report) -> str:
    """One readable reason from a report: the exception's message, else the last lines of its text."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, "Skipped: why")
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else (report.longreprtext or str(longrepr or ""))
    # xdist prefixes a worker's texts with "[gw0] linux -- Python ...": not part of the reason.
    text = "\n".join(line for line in text.splitlines() if not XDIST_HEADER.match(line)).strip()
    expired = expired_time_limit(text)
    if expired is not None:  # pytest-timeout stopped the test outside the case runner (its setup or teardown)
        return f"timed out after {format_seconds(expired)} s"
    if len(text) > MAX_REASON:
        text = text[:MAX_REASON] + " …"
    return text


class Manifests:
    """The generated cases beside each test module (manifest.json), for records without an item."""

    def __init__(self, rootpath: Path):
        self.rootpath = rootpath
        self._by_dir: dict[Path, dict] = {}

    def manifest(self, directory: Path) -> dict | None:
        directory = directory.resolve()
        if directory not in self._by_dir:
            try:
                self._by_dir[directory] = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                self._by_dir[directory] = {}
        return self._by_dir[directory] or None

    def case(self, nodeid: str) -> tuple[dict | None, dict | None]:
        """(case dict, manifest) of a test node id."""
        case_id = case_id_of(nodeid)
        module = self.rootpath / nodeid.split("::", 1)[0]
        manifest = self.manifest(module.parent)
        if manifest is None or case_id is None:
            return None, manifest
        return next((c for c in manifest["cases"] if c["id"] == case_id), None), manifest

    def cases_under(self, nodeid: str) -> tuple[list[dict], dict | None]:
        """Every case whose generated module is the collector `nodeid` or lies below it."""
        path = (self.rootpath / nodeid.split("::", 1)[0]).resolve()
        directory = path.parent if path.suffix == ".py" else path
        manifest = self.manifest(directory)
        if manifest is None:
            return [], None
        cases = [c for c in manifest["cases"]
                 if path.suffix != ".py" or f"test_{module_slug(c['suite'])}.py" == path.name]
        return cases, manifest


class Recorder:
    def __init__(self, config: pytest.Config, path: Path, *, is_writer: bool):
        self.config = config
        self.run_id = config.getoption("--e2e-record-run-id") or new_run_id()
        self.global_seed = config.getoption("--e2e-global-seed")
        self.device_option = config.getoption("--e2e-device")
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.writer = RecordWriter(path) if is_writer else None
        self.manifests = Manifests(config.rootpath)
        self.pending: dict[str, dict] = {}  # nodeid -> record waiting for its teardown report
        self.durations: dict[str, float] = defaultdict(float)
        self.written: set[str] = set()

    # -- in the process that runs the test ----------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        try:
            record = self._record_for(item, report)
        except Exception:  # recording must never change a test's outcome
            warnings.warn(f"e2egen recorder: could not build the record of {item.nodeid}:\n{traceback.format_exc()}")
            record = None
        if record is not None:
            setattr(report, RECORD_ATTR, json.dumps(record))
        return report

    def _record_for(self, item: pytest.Item, report) -> dict | None:
        case = case_data(item)
        if case is None:
            return None
        catalogue = self._catalogue_of(item.nodeid)
        if report.when == "setup" and not report.passed:
            status = "skipped" if report.skipped else "failed"
            reason = _reason(report) if report.skipped else f"setup error: {_reason(report)}"
            return self._from_case(case, status=status, phase="setup", reason=reason, nodeid=item.nodeid,
                                   catalogue=catalogue)
        if report.when == "teardown" and report.failed:
            return {"teardown_error": f"teardown error: {_reason(report)}"}
        if report.when != "call":
            return None
        outcome = item.stash.get(OUTCOME, None)
        status = report.outcome
        if outcome is None:  # the test failed before (or without) running the case
            reason = _reason(report)
            if status == "failed":
                reason = f"error outside the case runner: {reason}"
            return self._from_case(case, status=status, phase="call", reason=reason, nodeid=item.nodeid,
                                   catalogue=catalogue)
        record = record_from_outcome(outcome, run_id=self.run_id, global_seed=self.global_seed, nodeid=item.nodeid,
                                     worker=self.worker, duration=0.0, versions=machine.versions(),
                                     finished=machine.utc_now()).to_dict()
        if status != outcome.status:  # pytest saw a different ending than the runner (an error after the verdict)
            record["status"] = status
            record["reason"] = _reason(report) if status == "failed" else ""
            record["skip_reason"] = _reason(report) if status == "skipped" else ""
        return record

    def _from_case(self, case: Mapping[str, Any], *, status: str, phase: str, reason: str, nodeid: str,
                   catalogue: str | None = None) -> dict:
        seed = derive_seed(self.global_seed, case["id"]) if self.global_seed is not None else case.get("seed")
        return record_from_case_data(
            case, run_id=self.run_id, status=status, phase=phase, reason=reason, global_seed=self.global_seed,
            seed=seed, device=self._device_name(), repro=self._repro(case, seed, catalogue), nodeid=nodeid,
            worker=self.worker, duration=0.0, versions=machine.versions(), finished=machine.utc_now(),
        ).to_dict()

    def _catalogue_of(self, nodeid: str) -> str | None:
        """The catalogue of the suite a test belongs to, as an absolute path where it can be found."""
        _, manifest = self.manifests.case(nodeid)
        catalogue = (manifest or {}).get("catalogue")
        return resolve_catalogue(catalogue, (self.config.rootpath / nodeid.split("::", 1)[0]).parent)

    def _repro(self, case: Mapping[str, Any], seed: int | None, catalogue: str | None) -> str:
        try:
            c = Case.from_dict(case)
            return repro_command(c.with_seed(seed) if seed is not None else c, self.device_option, catalogue)
        except Exception:  # a case dict too broken to rebuild still gets a command
            path = catalogue_argument(catalogue)
            return (f"{e2egen_command()} run {case['id']}" + (f" --seed {seed}" if seed is not None else "")
                    + (f" --catalogue {path}" if path else ""))

    def _device_name(self) -> str:
        try:
            from e2egen import runner

            return runner.device.device_name(runner.select_device(self.device_option))
        except Exception:
            return str(self.device_option or "unknown")

    # -- in the writer ---------------------------------------------------------------
    def pytest_sessionstart(self, session):
        if self.writer is None:
            return
        header = {"type": "run", "run_id": self.run_id, "global_seed": self.global_seed, "started": machine.utc_now(),
                  "machine": machine.describe_machine(), "device": self._device_name()}
        catalogue = self._catalogue()
        if catalogue:
            header.update(machine.catalogue_metadata(catalogue))
        self.writer.write(header)

    def _catalogue(self) -> str | None:
        for arg in self.config.args:
            path = Path(arg.split("::", 1)[0])
            path = path if path.is_absolute() else Path(self.config.invocation_params.dir) / path
            manifest = self.manifests.manifest(path if path.is_dir() else path.parent)
            if manifest and manifest.get("catalogue"):  # relative to the suite's directory
                return resolve_catalogue(manifest["catalogue"], path if path.is_dir() else path.parent)
        return None

    def pytest_runtest_logstart(self, nodeid, location):
        if self.writer is None:
            return
        case_id = case_id_of(nodeid)
        if case_id is not None:
            # Lets the sweep name the case that killed an in-process run (no xdist worker to lose).
            self.writer.write({"type": "started", "run_id": self.run_id, "case_id": case_id, "nodeid": nodeid,
                               "at": machine.utc_now()})

    def pytest_runtest_logreport(self, report):
        if self.writer is None:
            return
        nodeid = report.nodeid
        self.durations[nodeid] += report.duration or 0.0
        data = getattr(report, RECORD_ATTR, None)
        record = json.loads(data) if data else None
        if report.when in ("setup", "call"):
            if record is not None:
                self.pending[nodeid] = record
            elif report.when == "call" or not report.passed:
                self.pending.setdefault(nodeid, self._fallback(report))
        elif report.when == "teardown":
            pending = self.pending.pop(nodeid, None)
            if record and "teardown_error" in record:
                pending = pending or self._fallback(report)
                if pending is not None and pending.get("status") != "failed":
                    pending.update(status="failed", phase="teardown", reason=record["teardown_error"], skip_reason="")
            if pending is not None:
                self._write(pending, nodeid)
        else:  # xdist's report for a test whose worker died ("???"): the case crashed
            self.pending.pop(nodeid, None)
            crashed = self._fallback(report, phase="crash", reason=f"crashed: {_reason(report)}")
            if crashed is not None:
                self._write(crashed, nodeid)

    def _fallback(self, report, *, phase: str | None = None, reason: str | None = None) -> dict | None:
        """A record from the manifest, for a report that carries none."""
        case, manifest = self.manifests.case(report.nodeid)
        if case is None:
            return None
        status = "skipped" if report.skipped else ("failed" if report.failed else "passed")
        if reason is None:
            reason = _reason(report) if status != "passed" else ""
        return self._from_case(case, status=status, phase=phase or report.when, reason=reason, nodeid=report.nodeid,
                               catalogue=self._catalogue_of(report.nodeid))

    def _write(self, record: dict, nodeid: str) -> None:
        case_id = record["case_id"]
        if case_id in self.written:
            return
        record["run_id"] = self.run_id
        record["duration"] = self.durations.pop(nodeid, 0.0)
        record["finished"] = machine.utc_now()
        self.writer.write(record)
        self.written.add(case_id)

    def pytest_collectreport(self, report):
        if self.writer is None or not report.failed:
            return
        cases, manifest = self.manifests.cases_under(report.nodeid)
        case_filter = self.config.stash.get(CASE_FILTER, None)
        reason = f"collection error in {report.nodeid}: {_reason(report)}"
        for case in cases:
            if case_filter is not None and not case_filter.allows(case["id"]):
                continue
            record = self._from_case(case, status="failed", phase="collect", reason=reason, nodeid=report.nodeid,
                                     catalogue=resolve_catalogue((manifest or {}).get("catalogue"),
                                                                 _suite_directory(self.config.rootpath / report.nodeid.split("::", 1)[0])))
            self._write(record, f"{report.nodeid}::{case['id']}")

    def pytest_sessionfinish(self, session, exitstatus):
        if self.writer is None:
            return
        for nodeid, record in list(self.pending.items()):  # interrupted between a test's call and teardown
            self._write(record, nodeid)
        self.pending.clear()
        self.writer.write({"type": "run_end", "run_id": self.run_id, "ended": machine.utc_now(), "exitstatus": int(exitstatus)})
        self.writer.close()
