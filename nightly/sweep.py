"""The nightly sweep: every case of the catalogue, fresh inputs, every result kept.

    run_sweep(SweepOptions(...)) -> SweepResult

1. (Re)generate the suite, unless told to use it as it is.
2. Choose the cases: all, or this machine's shard; on --resume, those the run
   has not recorded yet (they are deselected, never run twice).
3. Run pytest on them in a child process, with the recorder on, a global seed
   (default: the date), xdist workers (one per GPU, each pinned to its GPU,
   or N CPU workers), the reference on the GPU when there is one.
4. Meanwhile tail the records file: each record goes into the store at once
   and moves the progress bar (ETA, failures).
5. If pytest dies, carry on: a case that killed an in-process run (its
   session never ended: no run_end record, whatever the exit status) is
   recorded as failed, "the process died: ...", and the rest run in a new
   pytest; cases pytest never ran are recorded as failed with its exit
   status, so the run always accounts for every case it set out to run.
6. Time limits: every case has one (--timeout, else the catalogue's
   `timeout`, else 600 s), enforced by pytest-timeout in the test process: a
   case past it fails, "timed out after N s", and the session goes on. A
   kernel stuck where pytest-timeout cannot interrupt it (in C, on the
   device) is caught here: past its limit plus a grace the test process is
   killed, the case recorded as timed out, and the rest run in a new pytest.
   A case that timed out has its record, so --resume never runs it again.

A Ctrl-C stops the run (what finished is stored); `--resume RUN_ID` goes on.

Exit status (SweepResult.exit_status): 0 every case passed or was skipped, 1
some failed.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO

from e2egen.files import open_appending, write_text_atomically
from e2egen.generator.cases import DEFAULT_TIMEOUT
from e2egen.nightly import machine
from e2egen.nightly.errors import NightlyError
from e2egen.nightly.progress import progress
from e2egen.nightly.records import RecordTail, RecordWriter, lock_run, new_run_id, record_from_case_data
from e2egen.nightly.shard import ShardSpec, partition
from e2egen.nightly.store import Store
from e2egen.runner.errors import format_seconds
from e2egen.runner.leftovers import descendants

PYTEST_INTERRUPTED = 2
PYTEST_USAGE_ERROR = 4
PYTEST_FINISHED = (0, 1, 5)  # all passed, some failed, nothing collected: pytest ran to its end
# A case stuck past its time limit outside Python (pytest-timeout cannot interrupt it) is killed, with the
# test process, this long after the limit: max(HARD_LIMIT_GRACE, HARD_LIMIT_GRACE_FRACTION * limit) seconds.
HARD_LIMIT_GRACE = 3.0
HARD_LIMIT_GRACE_FRACTION = 0.1
POLL_SECONDS = 0.5
RECORDER_PLUGIN = "e2egen.nightly.recorder"  # pytest -p: the generated suite itself never loads nightly plugins


@dataclass(frozen=True)
class SweepOptions:
    catalogue: str = "configs.toml"
    out: Path = Path("build/e2e")
    store: Path = Path("results/e2e.sqlite")
    records_dir: Path | None = None  # default: runs/ beside the store
    global_seed: int | None = None  # default: the date (a new run) or the run's own (resume)
    resume: str | None = None
    workers: int | None = None  # None: one per GPU, else 1; 0: in-process, no xdist
    device: str | None = None  # None: CUDA when present, else CPU
    reference: str = "auto"  # auto: on the device when it is a GPU, else as the catalogue says
    shard: ShardSpec | None = None
    durations_from: Path | None = None  # store whose recorded durations balance the shards (default: store)
    generate: bool = True
    pytest_args: tuple[str, ...] = ()  # must not deselect cases: planned cases pytest never runs are recorded skipped
    progress: bool = True
    case_filter: Callable[[Mapping[str, Any]], bool] | None = None  # a subset sweep: which manifest cases to plan
    filter_text: str = ""
    timeout: float | None = None  # seconds each case may run; None: the catalogue's `timeout`, else 600


@dataclass(frozen=True)
class SweepResult:
    run_id: str
    global_seed: int
    selected: int
    counts: dict[str, int] = field(default_factory=dict)
    records_path: Path | None = None

    @property
    def exit_status(self) -> int:
        return 1 if self.counts.get("failed", 0) else 0


@dataclass(frozen=True)
class Plan:
    """What a run sets out to do, decided before pytest starts."""

    run_id: str
    global_seed: int
    seed_source: str
    case_ids: tuple[str, ...]  # what the run sets out to run
    cases: dict[str, dict]  # every case of the generated suite, by id
    catalogue: str | None
    records_path: Path
    selection_path: Path  # the run's case ids, so a resume runs exactly the same set
    log_path: Path
    shard: ShardSpec | None
    partition: str | None
    workers: int
    device: str
    reference_device: str | None
    gpus: tuple[str, ...]


def run_sweep(options: SweepOptions, out: TextIO | None = None) -> SweepResult:
    out = out or sys.stdout
    _refuse_store_in_suite(options)
    with Store(options.store) as store, contextlib.ExitStack() as held:
        plan = make_plan(options, store, out, held)
        recorded = _catch_up(store, plan)
        _say(out, f"nightly run {plan.run_id}: {len(plan.case_ids)} cases"
                  f"{f' (shard {plan.shard}, split by {plan.partition})' if plan.shard else ''}, "
                  f"global seed {plan.global_seed} ({plan.seed_source}), device {plan.device}, "
                  f"reference {plan.reference_device or 'as the catalogue says'}, "
                  f"{'in-process' if plan.workers == 0 else f'{plan.workers} xdist worker(s)'}"
                  + (f" pinned to GPUs {', '.join(plan.gpus)}" if plan.gpus else ""))
        if recorded:
            _say(out, f"resuming: {len(recorded)} cases already recorded are deselected")
        _say(out, f"records: {plan.records_path}  log: {plan.log_path}")
        try:
            _run_until_done(store, plan, options, recorded, out)
        except KeyboardInterrupt:
            _say(out, f"interrupted: what finished is stored; continue with `e2egen nightly --resume {plan.run_id}`")
            raise
        store.upsert_run({"run_id": plan.run_id, "ended": machine.utc_now()})
        counts = _counts(store, plan)
    return SweepResult(plan.run_id, plan.global_seed, len(plan.case_ids), counts, plan.records_path)


def _say(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)


# -- planning ---------------------------------------------------------------------------
def make_plan(options: SweepOptions, store: Store, out: TextIO, held: contextlib.ExitStack) -> Plan:
    """What the run will do; its write lock (one writer per run) is taken here and held by `held`."""
    # Absolute: the store keeps it, and a resume may start from another directory.
    records_dir = (Path(options.records_dir) if options.records_dir else Path(options.store).parent / "runs").resolve()
    previous = store.run(options.resume) if options.resume else None  # unknown id: a user error
    cases = _generated_cases(options, out)
    candidates = list(cases.values())
    if options.case_filter is not None and previous is None:
        candidates = [c for c in candidates if options.case_filter(c)]
        if not candidates:
            raise NightlyError(f"--filter {options.filter_text!r}: no case matches")
    if previous is not None:
        run_id = previous.run_id
        if options.global_seed is not None and previous.global_seed is not None and options.global_seed != previous.global_seed:
            raise NightlyError(f"--resume {run_id}: the run used global seed {previous.global_seed}, not {options.global_seed}; "
                               "leave --seed out to resume it")
        if options.shard is not None and previous.shard and str(options.shard) != previous.shard:
            raise NightlyError(f"--resume {run_id}: the run is shard {previous.shard}, not {options.shard}")
        global_seed = previous.global_seed if previous.global_seed is not None else machine.date_seed()
        seed_source = "the resumed run's"
        records_path = Path(previous.records_path) if previous.records_path else records_dir / f"{run_id}.jsonl"
        shard = ShardSpec.parse(previous.shard) if previous.shard else None
    else:
        run_id = new_run_id()
        global_seed = options.global_seed if options.global_seed is not None else machine.date_seed()
        seed_source = "given" if options.global_seed is not None else "from the date"
        records_path = records_dir / f"{run_id}.jsonl"
        shard = options.shard
    selection_path = records_path.with_suffix(".cases")
    fingerprint = previous.partition if previous is not None else None
    if previous is not None and selection_path.exists():
        wanted = [line for line in selection_path.read_text(encoding="utf-8").splitlines() if line]
        missing = [cid for cid in wanted if cid not in cases]
        if missing:
            print(f"warning: {len(missing)} cases of run {run_id} are not in the catalogue any more (e.g. {missing[0]}); "
                  "they stay unrecorded", file=sys.stderr)
        case_ids = tuple(cid for cid in wanted if cid in cases)
    elif shard is not None:
        if shard.count > len(candidates):  # checked before anything is allocated per shard
            raise NightlyError(f"--shard {shard}: cannot split {len(candidates)} case{'s' if len(candidates) != 1 else ''} "
                               f"into {shard.count:,} shards; give N between 1 and {len(candidates)}")
        durations = _durations_for_sharding(options, store)
        split = partition(candidates, shard.count, durations)
        case_ids, fingerprint = split.cases(shard), f"{split.basis} {split.fingerprint}"
    else:
        case_ids = tuple(c["id"] for c in candidates)
    device = _resolve_device(options.device)
    reference_device = {"auto": "device" if device.startswith("cuda") else None, "catalogue": None}.get(
        options.reference, options.reference)
    gpus = tuple(machine.visible_gpus()) if device.startswith("cuda") and options.device in (None, "cuda") else ()
    workers = options.workers if options.workers is not None else (len(gpus) or 1)
    if workers < 0:
        raise NightlyError(f"--workers {workers}: give 0 (in-process) or a positive number")
    plan = Plan(run_id=run_id, global_seed=global_seed, seed_source=seed_source, case_ids=case_ids, cases=cases,
                catalogue=options.catalogue, records_path=records_path, selection_path=selection_path,
                log_path=records_path.with_suffix(".log"), shard=shard, partition=fingerprint, workers=workers,
                device=device, reference_device=reference_device, gpus=gpus if workers > 0 else ())
    held.enter_context(lock_run(run_id, records_path))  # before anything is written for the run
    _start_run(store, plan, previous is None)
    return plan


def _refuse_store_in_suite(options: SweepOptions) -> None:
    """The store (and the records beside it) must not live in the generated suite's directory, which `gen`
    rewrites and pytest collects: checked before the store is created, so nothing is written."""
    suite = Path(os.path.abspath(options.out))
    for option, path in (("--store", options.store), ("--records-dir", options.records_dir)):
        where = Path(os.path.abspath(path)) if path else None
        if where is not None and (where == suite or suite in where.parents):
            raise NightlyError(f"{option} {path} is inside the generated suite's directory --out {options.out}, "
                               f"which e2egen rewrites: give a path outside it")


def _generated_cases(options: SweepOptions, out: TextIO) -> dict[str, dict]:
    from e2egen.generator.render import load_manifest

    if options.generate:
        from e2egen.generator.cases import expand
        from e2egen.generator.loader import load_catalogue
        from e2egen.generator.render import render

        catalogue = load_catalogue(options.catalogue)  # CatalogueError: a user error, reported by the CLI
        result = render(catalogue, expand(catalogue), options.out, catalogue.seed)
        if result.written or result.deleted:
            _say(out, f"{options.out}: regenerated ({len(result.written)} files written, {len(result.deleted)} deleted)")
    manifest_path = Path(options.out) / "manifest.json"
    if not manifest_path.exists():
        raise NightlyError(f"{manifest_path}: no generated suite here; run `e2egen gen` first or leave out --no-gen")
    manifest = load_manifest(options.out)
    if not options.generate:  # the suite's own check would stop pytest later, with no run recorded: say it now
        from e2egen.generator.sources import stale_problem

        problem = stale_problem(manifest, options.out)
        if problem is not None:
            raise NightlyError(f"{problem} (or leave out --no-gen)")
    return {c["id"]: c for c in manifest["cases"]}


def _durations_for_sharding(options: SweepOptions, store: Store) -> dict[str, float]:
    source = Path(options.durations_from) if options.durations_from else None
    device = machine_device_name(options.device)
    if source is not None and source.resolve() != Path(options.store).resolve():
        if not source.exists():  # the first night has no earlier store: FLOPs balance the shards
            print(f"warning: --durations-from {source}: no such store; splitting the shards by FLOPs", file=sys.stderr)
            return {}
        with Store(source, create=False) as other:
            return other.durations(device)
    return store.durations(device)


def machine_device_name(option: str | None) -> str:
    """The device name records carry ("cpu" or the GPU's name), for matching recorded durations."""
    from e2egen import runner
    from e2egen.runner.device import device_name

    try:
        return device_name(runner.select_device(option))
    except Exception:  # no CUDA where --device cuda was asked: the cases will be skipped, durations do not matter
        return str(option)


def _resolve_device(option: str | None) -> str:
    """The device asked for (the option, else $E2E_DEVICE), checked once (a bad or missing one is a user
    error, exit 2), else CUDA when present."""
    from e2egen.runner.device import DeviceError, check_device

    name = option or os.environ.get("E2E_DEVICE") or None
    try:
        check_device(name)
    except DeviceError as err:
        raise NightlyError(str(err)) from None
    if name:
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _start_run(store: Store, plan: Plan, is_new: bool) -> None:
    header = {"type": "run", "run_id": plan.run_id, "global_seed": plan.global_seed, "started": machine.utc_now(),
              "machine": machine.describe_machine(), "device": machine_device_name(plan.device),
              **machine.catalogue_metadata(plan.catalogue),
              "shard": str(plan.shard) if plan.shard else None, "partition": plan.partition,
              "selected": len(plan.case_ids), "records_path": str(plan.records_path)}
    plan.records_path.parent.mkdir(parents=True, exist_ok=True)
    if is_new or not plan.selection_path.exists():
        write_text_atomically(plan.selection_path, "".join(f"{cid}\n" for cid in plan.case_ids))
    if is_new:
        writer = RecordWriter(plan.records_path)  # the file describes its run even if pytest never starts
        writer.write(header)
        writer.close()
    else:
        header.pop("started")  # a resume keeps the run's start
    store.upsert_run(header)


def _catch_up(store: Store, plan: Plan) -> set[str]:
    """Ingest what the records file holds that the store lacks (a killed sweep ingests late); the run's recorded cases."""
    if plan.records_path.exists():
        store.ingest_file(plan.records_path)
    return store.recorded_case_ids(plan.run_id) & set(plan.case_ids)


# -- running ----------------------------------------------------------------------------
@dataclass
class Attempt:
    """What one pytest process did, as its records tell: the cases it started (in order, with the sweep's clock
    when each start was seen) and whether its session ended (the recorder's run_end record)."""

    started: dict[str, float] = field(default_factory=dict)
    session_ended: bool = False
    exitstatus: int | None = None  # pytest's, from run_end


def _run_until_done(store: Store, plan: Plan, options: SweepOptions, recorded: set[str], out: TextIO) -> None:
    failed = store.status_counts(plan.run_id).get("failed", 0)
    bar = progress(len(plan.case_ids), len(recorded), f"nightly {plan.run_id}", sys.stderr, options.progress)
    bar.set_postfix(failed=failed)
    tail = RecordTail(plan.records_path, offset=_file_size(plan.records_path))
    returncode: int | None = None
    attempt = Attempt()
    try:
        # A fresh pytest after each one that died; each must record at least one case, so this ends.
        while any(cid not in recorded for cid in plan.case_ids):
            process = _start_pytest(plan, options, recorded)
            attempt = Attempt()
            progress_before = len(recorded)
            hung = None
            while True:
                returncode = process.poll()
                failed = _show_failures(bar, failed, _ingest(store, tail, plan, recorded, attempt, bar))
                if returncode is not None:
                    break
                hung = _hung_case(plan, options, attempt, recorded)
                if hung is not None:  # past its limit and its grace: the kernel never gave control back
                    _kill_tree(process)
                    returncode = process.wait()
                    break
                time.sleep(POLL_SECONDS)
            failed = _show_failures(bar, failed, _ingest(store, tail, plan, recorded, attempt, bar))
            if hung is not None and hung not in recorded:
                limit = _time_limit(plan, options, hung)
                _record_unfinished(store, plan, [hung], status="failed", phase="timeout",
                                   reason=f"timed out after {format_seconds(limit)} s (the kernel did not give control "
                                          f"back; the test process was killed {format_seconds(_grace(limit))} s later)",
                                   recorded=recorded)
                failed = _show_failures(bar, failed, 1)
                bar.update(1)
                continue
            if all(cid in recorded for cid in plan.case_ids):
                return
            if returncode == PYTEST_USAGE_ERROR and len(recorded) == progress_before:
                raise NightlyError(f"pytest refused its arguments (exit status 4); the run is left as it was, "
                                   f"resume it with --resume {plan.run_id} once fixed:\n{_log_tail(plan.log_path)}")
            if _interrupted(returncode, attempt):
                # A Ctrl-C that reached pytest: the rest stays unrecorded, for --resume to run.
                _say(out, f"pytest was interrupted ({_describe_exit(returncode)})")
                raise KeyboardInterrupt
            culprit = _crashed_case(plan, attempt, recorded, returncode)
            if culprit is not None:  # it ended the pytest process: record it, run the rest in a fresh process
                _record_unfinished(store, plan, [culprit], status="failed", phase="crash",
                                   reason=f"the process died: {_describe_exit(returncode)} while running this case "
                                          f"(os._exit, abort or a crash in the kernel?); rerun it alone with the repro "
                                          f"command", recorded=recorded)
                failed = _show_failures(bar, failed, 1)
                bar.update(1)
                continue
            if len(recorded) > progress_before and not attempt.session_ended:
                continue  # pytest died outside any case (killed from outside?) after making progress: run the rest
            break
        remaining = [cid for cid in plan.case_ids if cid not in recorded]
        if remaining and attempt.session_ended and returncode in PYTEST_FINISHED:
            # pytest ended normally without these: deselected by the pytest arguments, or not in the suite.
            _record_unfinished(store, plan, remaining, status="skipped", phase="not-run",
                               reason=f"not run: pytest finished ({_describe_exit(returncode)}) without running it "
                                      "(deselected by the pytest arguments, or not collected)", recorded=recorded)
        elif remaining:
            # The reason names the crash and the log, never the log's lines: they quote other cases (their repro).
            ended = "ended" if attempt.session_ended else "died"
            how = f"the pytest process {ended} ({_describe_exit(returncode)})"
            print(f"warning: {how} with {len(remaining)} cases not run; the end of its log ({plan.log_path}):\n"
                  f"{_log_tail(plan.log_path)}", file=sys.stderr)
            running = [cid for cid in remaining if cid in attempt.started]
            if running:
                _record_unfinished(store, plan, running, status="failed", phase="not-run", recorded=recorded,
                                   reason=f"not run: {how} while this case was running (it may be the cause); "
                                          f"see the log {plan.log_path}")
            _record_unfinished(store, plan, [cid for cid in remaining if cid not in recorded], status="failed",
                               phase="not-run", recorded=recorded,
                               reason=f"not run: {how} before running it; see the log {plan.log_path}")
        bar.update(len(remaining))
    finally:
        bar.close()


def _interrupted(returncode: int | None, attempt: Attempt) -> bool:
    """pytest stopped on a KeyboardInterrupt (its exit status 2, or SIGINT)."""
    return returncode == PYTEST_INTERRUPTED or attempt.exitstatus == PYTEST_INTERRUPTED or returncode == -signal.SIGINT


def _time_limit(plan: Plan, options: SweepOptions, case_id: str) -> float:
    """A case's time limit: --timeout, else the catalogue's (in the manifest), else the default."""
    if options.timeout is not None:
        return float(options.timeout)
    limit = (plan.cases.get(case_id) or {}).get("timeout")
    return float(limit) if limit else DEFAULT_TIMEOUT


def _grace(limit: float) -> float:
    """How long past its limit the sweep waits for a case before killing the test process: pytest-timeout
    interrupts Python code at the limit; only a kernel stuck outside Python (in C, on the device) needs this."""
    return max(HARD_LIMIT_GRACE, HARD_LIMIT_GRACE_FRACTION * limit)


def _hung_case(plan: Plan, options: SweepOptions, attempt: Attempt, recorded: set[str]) -> str | None:
    """A started, unrecorded case running longer than its limit plus the grace, if any."""
    now = time.monotonic()
    for cid, since in attempt.started.items():
        if cid not in recorded and cid in plan.cases:
            limit = _time_limit(plan, options, cid)
            if now - since > limit + _grace(limit):
                return cid
    return None


def _kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL the pytest process and every process below it (its xdist workers)."""
    victims = [*descendants(process.pid), process.pid]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _show_failures(bar, failed: int, new: int) -> int:
    if new:
        bar.set_postfix(failed=failed + new, refresh=False)  # drawn with the next update, not one more line
    return failed + new


def _start_pytest(plan: Plan, options: SweepOptions, recorded: set[str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "pytest", str(options.out), "-p", "no:cacheprovider", "-q", "-rN",
               "--continue-on-collection-errors",
               # The generated conftest loads only the case runner; the recorder (and its sweep plugin) come from here.
               "-p", RECORDER_PLUGIN, "--e2e-record", str(plan.records_path), "--e2e-record-run-id", plan.run_id,
               "--e2e-global-seed", str(plan.global_seed),
               "--e2e-run-slow"]  # the nightly runs every planned case: slow ones too, on the CPU as well
    if options.device:
        command += ["--e2e-device", options.device]
    if plan.reference_device:
        command += ["--e2e-reference-device", plan.reference_device]
    if options.timeout is not None:
        command += ["--timeout", format_seconds(options.timeout)]  # pytest-timeout: beats the catalogue's limits
    if plan.workers > 0:
        # xdist also isolates crashes: a case that kills its worker is reported failed and the worker replaced.
        command += ["-n", str(plan.workers), "--dist", "load", "--max-worker-restart", str(len(plan.case_ids) + plan.workers)]
    command += ["--e2e-select-cases", str(plan.selection_path)]  # the plan, whatever the suite holds besides
    deselect_path = plan.records_path.with_suffix(".recorded")
    if recorded:
        write_text_atomically(deselect_path, "".join(f"{cid}\n" for cid in sorted(recorded)))
        command += ["--e2e-deselect-cases", str(deselect_path)]
    command += list(options.pytest_args)
    # The plugins are imported as e2egen.* from the installed package. No source folder goes on PYTHONPATH: that
    # would make the project's folders importable as top-level `metrics`, `runner`, ... in pytest's processes.
    env = dict(os.environ)
    if plan.gpus:
        env["E2E_WORKER_GPUS"] = ",".join(plan.gpus)
    elif plan.workers > 1 and "OMP_NUM_THREADS" not in env:
        # N CPU workers share the cores: one torch thread pool each of the full size would oversubscribe them.
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // plan.workers))
    log = os.fdopen(open_appending(plan.log_path, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8")
    log.write(f"\n$ {' '.join(command)}\n")
    log.flush()
    try:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_parent)
    finally:
        log.close()


def _die_with_parent() -> None:
    """In the pytest child: be killed when the sweep dies, so a killed sweep leaves no orphan
    appending to the run's records while a resume runs the same cases (Linux; elsewhere a no-op)."""
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _ingest(store: Store, tail: RecordTail, plan: Plan, recorded: set[str], attempt: Attempt, bar) -> int:
    """Store the new records; returns how many new failures they hold."""
    objects = tail.poll()
    if not objects:
        return 0
    wanted = set(plan.case_ids)
    failures = 0
    for obj in objects:
        if obj.get("run_id") != plan.run_id:
            continue
        if obj.get("type") == "started" and isinstance(obj.get("case_id"), str):
            attempt.started[obj["case_id"]] = time.monotonic()
        elif obj.get("type") == "run_end":
            attempt.session_ended = True
            attempt.exitstatus = obj.get("exitstatus")
    store.ingest(objects)
    for obj in objects:
        if obj.get("type") == "case" and obj.get("run_id") == plan.run_id and obj["case_id"] in wanted \
                and obj["case_id"] not in recorded:
            recorded.add(obj["case_id"])
            bar.update(1)
            failures += obj.get("status") == "failed"
    return failures


def _crashed_case(plan: Plan, attempt: Attempt, recorded: set[str], returncode: int | None) -> str | None:
    """The case an in-process pytest was running when it died (with xdist, the worker's crash is reported).

    Died, whatever its exit status (os._exit(1) looks like "some tests failed"): its session never ended,
    so the recorder wrote no run_end.
    """
    if plan.workers != 0 or attempt.session_ended or returncode is None:
        return None
    unfinished = [cid for cid in attempt.started if cid not in recorded and cid in plan.cases]
    return unfinished[-1] if unfinished else None


def _record_unfinished(store: Store, plan: Plan, case_ids: Sequence[str], *, status: str, phase: str, reason: str,
                       recorded: set[str]) -> None:
    """Record cases pytest could not: in the records file too, so it stays the run's complete account."""
    from e2egen.generator.cases import Case, derive_seed
    from e2egen.generator.execute import repro_command

    writer = RecordWriter(plan.records_path)
    versions = machine.versions()
    device = machine_device_name(plan.device)
    try:
        for cid in case_ids:
            case = plan.cases[cid]
            seed = derive_seed(plan.global_seed, cid)
            repro = repro_command(Case.from_dict(case).with_seed(seed), plan.device, plan.catalogue)
            record = record_from_case_data(case, run_id=plan.run_id, status=status, phase=phase, reason=reason,
                                           global_seed=plan.global_seed, seed=seed, device=device, repro=repro,
                                           nodeid="", worker="sweep", duration=0.0, versions=versions,
                                           finished=machine.utc_now())
            writer.write(record.to_dict())
            store.add_record(record)
            recorded.add(cid)
    finally:
        writer.close()


def _counts(store: Store, plan: Plan) -> dict[str, int]:
    wanted = set(plan.case_ids)
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for row in store.db.execute("SELECT case_id, status FROM records WHERE run_id = ?", (plan.run_id,)):
        if row["case_id"] in wanted:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
    return counts


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
