"""e2egen nightly | merge | report | runs: the full sweep, its results store and its reports."""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from e2egen.commands.arguments import EXIT_FAILED, EXIT_OK, catalogue_argument, number_above, whole_number
from e2egen.json_output import emit, json_argument
from e2egen.nightly.report.trends import DEFAULT_TREND_NIGHTS
from e2egen.nightly.store import DEFAULT_STORE

EXIT_INCOMPLETE = 3  # `e2egen merge`: shards missing or unfinished, the merged run is partial


def register(sub) -> None:
    p = sub.add_parser("nightly", help="run every case with fresh inputs, record the results in the store, write a report",
                       description="Run the whole catalogue with a fresh global seed, record every case in the results "
                                   "store, and write a report against the previous run. Exit status: 0 all passed, "
                                   "1 some failed, 2 user error.")
    catalogue_argument(p, positional=False)
    p.add_argument("--out", default="build/e2e", help="generated suite directory (default: build/e2e)")
    _store_argument(p)
    p.add_argument("--records-dir", default=None, metavar="DIR",
                   help="where each run's JSON-lines records and pytest log go (default: runs/ beside the store)")
    p.add_argument("--seed", type=int, default=None, help="global seed (default: today's UTC date as YYYYMMDD)")
    p.add_argument("--resume", metavar="RUN_ID", default=None,
                   help="continue a killed run: cases it recorded are not run again")
    p.add_argument("--workers", type=whole_number(0), default=None, metavar="N",
                   help="xdist workers: default one per GPU (each pinned to its GPU), else 1; 0 runs in-process")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="device of the kernels (default: CUDA when present)")
    p.add_argument("--reference", choices=("auto", "device", "cpu", "catalogue"), default="auto",
                   help="where the float64 reference runs: auto = on the GPU when the kernels run there, else as the "
                        "catalogue says (default: auto)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run only the I-th of N balanced, disjoint parts of the cases (1-based); merge them with `e2egen merge`")
    p.add_argument("--durations-from", default=None, metavar="STORE",
                   help="store whose recorded durations balance the shards (default: --store); every shard must use the same")
    p.add_argument("--timeout", type=number_above(0, finite=True), default=None, metavar="S",
                   help="seconds each case may run; a case past it fails, \"timed out after S s\", and the sweep goes on "
                        "(default: the catalogue's `timeout`, else 600)")
    p.add_argument("--filter", "-k", default="", metavar="EXPR",
                   help="sweep a subset: the `e2egen list --filter` terms (id globs, AXIS=V1,V2), all must match")
    p.add_argument("--no-gen", dest="generate", action="store_false", help="use the generated suite as it is")
    p.add_argument("--no-report", dest="report", action="store_false", help="do not write the report at the end")
    p.add_argument("--reports-dir", default=None, metavar="DIR", help="report directory (default: reports/ beside the store)")
    p.add_argument("--drift", type=number_above(0, finite=True), default=4.0, metavar="FACTOR",
                   help="report passing metrics that grew more than FACTOR since the previous run (default: 4)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST_ARGS",
                   help="more pytest arguments, after --")
    p.set_defaults(handler=nightly)

    p = sub.add_parser("merge", help="combine shards (stores, records files or run ids) into one run",
                       description="Combine the shards of a sweep into one run of the target store. Each input is a "
                                   "records file (.jsonl), a store file (its latest run; PATH#RUN_ID for another), or "
                                   "the id of a run in the target store. Exit status: 0 all passed, 1 some failed, 2 user error, "
                                   "3 incomplete (shards of the split missing, or a shard that never finished).")
    p.add_argument("inputs", nargs="+", metavar="INPUT")
    _store_argument(p, help_text="the store the merged run goes into")
    p.add_argument("--run-id", default=None, type=run_id_argument,
                   help="id of the merged run: letters, digits, '.', '_', '-' (default: a new one)")
    p.set_defaults(handler=merge)

    p = sub.add_parser("report", help="write the HTML and Markdown report of a run",
                       description="Write one self-contained HTML file and a Markdown summary of a run: the aggregate "
                                   "tables, relative-difference histograms, worst cases with repro commands, and the "
                                   "changes since another run.")
    p.add_argument("run_id", nargs="?", default=None, type=run_id_argument, metavar="RUN_ID", help="default: the latest run")
    p.add_argument("--against", default=None, type=run_id_argument, metavar="RUN_ID",
                   help="compare with this run (default: the one before)")
    _store_argument(p)
    p.add_argument("--out", default=None, metavar="DIR", help="output directory (default: reports/ beside the store)")
    p.add_argument("--drift", type=number_above(0, finite=True), default=4.0, metavar="FACTOR",
                   help="report passing metrics that grew more than FACTOR (default: 4)")
    p.add_argument("--top", type=whole_number(0), default=20, metavar="N", help="worst cases listed (default: 20)")
    p.add_argument("--trend-nights", type=whole_number(1), default=DEFAULT_TREND_NIGHTS, metavar="N",
                   help=f"nights (runs) the trend plots cover, up to and including the run reported "
                        f"(default: {DEFAULT_TREND_NIGHTS})")
    p.set_defaults(handler=report)

    p = sub.add_parser("runs", help="list the runs in the results store")
    _store_argument(p)
    json_argument(p)
    p.set_defaults(handler=list_runs)


def shard_spec(text: str):
    """--shard I/N as a ShardSpec; a NightlyError (exit 2) for a bad one, a number too long to read included.
    N beyond the cases to split is refused by the sweep once they are known, before anything is allocated."""
    from e2egen.nightly.errors import NightlyError
    from e2egen.nightly.shard import ShardSpec

    try:
        return ShardSpec.parse(text)
    except NightlyError:
        raise
    except ValueError:  # int() refuses more than 4,300 digits
        raise NightlyError(f"--shard {text[:40]}…: N is far more than any number of cases; give I/N with N at "
                           "most the number of cases") from None


def run_id_argument(text: str) -> str:
    """An argparse type: a run id is a name (nightly.records.check_run_id); else exit 2 with the valid form."""
    from e2egen.nightly.records import run_id_problem

    problem = run_id_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _store_argument(p, help_text: str = "results store") -> None:
    p.add_argument("--store", default=DEFAULT_STORE, metavar="PATH", help=f"{help_text} (SQLite; default: {DEFAULT_STORE})")




def _beside_store(store: str, name: str, given: str | None) -> Path:
    return Path(given) if given else Path(store).parent / name


def nightly(args) -> int:
    from e2egen.nightly.sweep import SweepOptions, run_sweep

    pytest_args = tuple(a for i, a in enumerate(args.pytest_args) if not (i == 0 and a == "--"))
    options = SweepOptions(
        catalogue=args.catalogue, out=Path(args.out), store=Path(args.store),
        records_dir=Path(args.records_dir) if args.records_dir else None, global_seed=args.seed,
        resume=args.resume, workers=args.workers, device=args.device, reference=args.reference,
        shard=shard_spec(args.shard) if args.shard is not None else None,
        durations_from=Path(args.durations_from) if args.durations_from else None,
        generate=args.generate, pytest_args=pytest_args, progress=args.progress,
        case_filter=_manifest_filter(args.filter, args.catalogue if args.generate else None) if args.filter else None,
        filter_text=args.filter,
        timeout=args.timeout,
    )
    result = run_sweep(options)
    counts = result.counts
    print(f"run {result.run_id} (global seed {result.global_seed}): {result.selected} cases: "
          f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, {counts.get('skipped', 0)} skipped; "
          f"store {args.store}")
    _print_failures(args.store, result.run_id)
    if args.report:
        _write_report(args.store, result.run_id, None, _beside_store(args.store, "reports", args.reports_dir), args.drift, 20)
    return result.exit_status


def _manifest_filter(expression: str, catalogue: str | None):
    """`e2egen list --filter` terms as a predicate on manifest case dicts; values checked against the catalogue's
    cases when it is given (the suite is generated from it; with --no-gen the suite is what it is)."""
    from e2egen.generator.case_filter import case_filter
    from e2egen.generator.cases import Case, expand
    from e2egen.generator.loader import load_catalogue

    # A bad axis, or a value no case has, is a FilterError (a user error) here, before anything runs.
    matches = case_filter(expression, cases=expand(load_catalogue(catalogue)) if catalogue else None)
    return lambda case: matches(Case.from_dict(case))


def _print_failures(store_path: str, run_id: str, limit: int = 10) -> None:
    from e2egen.nightly.store import Store

    with Store(store_path) as store:
        records = store.records(run_id)
    failed = [r for r in records if r.status == "failed"]
    for record in failed[:limit]:
        reason = " ".join(record.reason.split())
        print(f"FAILED {record.case_id}: {reason[:200]}\n  repro: {record.repro}")
    if len(failed) > limit:
        print(f"… and {len(failed) - limit} more failures (see the report)")
    # Skips by reason (a kernel that declined, a capability the device lacks), most frequent first.
    reasons = Counter(" ".join(r.skip_reason.split())[:200] or "no reason given" for r in records if r.status == "skipped")
    for reason, count in reasons.most_common(limit):
        print(f"SKIPPED {count} case{'s' if count != 1 else ''}: {reason}")
    if len(reasons) > limit:
        print(f"… and {len(reasons) - limit} more skip reasons")


def _write_report(store_path: str, run_id: str | None, against: str | None, out_dir: Path, drift: float, top: int,
                  trend_nights: int = DEFAULT_TREND_NIGHTS):
    from e2egen.nightly.report import write_report
    from e2egen.nightly.store import Store

    with Store(store_path, create=False) as store:
        files = write_report(store, out_dir, run_id, against, drift=drift, top=top, trend_nights=trend_nights)
    print(f"report: {files.html}\n        {files.markdown}")
    return files


def merge(args) -> int:
    from e2egen.nightly.merge import merge as merge_runs

    result = merge_runs(args.inputs, args.store, args.run_id)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    counts = result.counts
    print(f"merged {len(args.inputs)} inputs into run {result.run_id} in {args.store}: {result.cases} cases: "
          f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, {counts.get('skipped', 0)} skipped")
    if not result.complete:  # never a green "all passed" for a partial run
        print(f"INCOMPLETE: run {result.run_id} is not a whole run: {'; '.join(result.incomplete)}; it was stored "
              "without an end time (merge again with every shard)")
        return EXIT_INCOMPLETE
    return EXIT_FAILED if counts.get("failed") else EXIT_OK


def report(args) -> int:
    _write_report(args.store, args.run_id, args.against, _beside_store(args.store, "reports", args.out), args.drift, args.top,
                  args.trend_nights)
    return EXIT_OK


def list_runs(args) -> int:
    from e2egen.nightly.store import Store

    with Store(args.store, create=False) as store:
        runs = store.runs()
    if args.json:
        emit("runs", store=str(args.store), runs=[
            {"run_id": run.run_id, "started": run.started, "ended": run.ended, "complete": run.ended is not None,
             "global_seed": run.global_seed, "device": run.device, "catalogue": run.catalogue, "shard": run.shard,
             "planned": run.selected, "passed": run.counts.get("passed", 0), "failed": run.counts.get("failed", 0),
             "skipped": run.counts.get("skipped", 0), "git_revision": run.git_revision,
             "merged_from": list(run.merged_from), "merged_into": run.merged_into} for run in runs])
        return EXIT_OK
    print("run_id\tstarted\tended\tglobal_seed\tshard\tpassed\tfailed\tskipped\tplanned\tnote")
    for run in runs:
        note = f"merged into {run.merged_into}" if run.merged_into else (f"merged from {len(run.merged_from)}" if run.merged_from else "")
        print(f"{run.run_id}\t{run.started or '-'}\t{run.ended or 'incomplete'}\t{run.global_seed}\t{run.shard or '-'}\t"
              f"{run.counts.get('passed', 0)}\t{run.counts.get('failed', 0)}\t{run.counts.get('skipped', 0)}\t"
              f"{run.selected if run.selected is not None else '-'}\t{note}")
    return EXIT_OK
