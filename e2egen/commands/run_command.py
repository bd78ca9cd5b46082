"""e2egen run CASE_ID: rerun one case and print its full metrics report."""
from __future__ import annotations

import os
import sys
import threading
from dataclasses import replace

from e2egen.commands.arguments import EXIT_FAILED, EXIT_OK, catalogue_argument, number_above
from e2egen.errors import UsageError
from e2egen.generator.cases import expand
from e2egen.generator.errors import close_match
from e2egen.generator.execute import describe, execute, timed_out
from e2egen.generator.loader import load_catalogue
from e2egen.json_output import emit, json_argument
from e2egen.runner.leftovers import ends_what_kernels_leave

# A kernel stuck outside Python (in C, on the device) cannot be interrupted at the limit: past the limit plus
# this grace (or this fraction of the limit, if longer) the command prints the failure and ends the process.
HARD_LIMIT_GRACE = 3.0
HARD_LIMIT_GRACE_FRACTION = 0.1


def register(sub) -> None:
    p = sub.add_parser("run", help="run one case and print its full metrics report",
                       description="Run one case and print its full report. Exit status: 0 passed or skipped, "
                                   "1 failed (a kernel that raises, exits, hangs past the time limit included), "
                                   "2 user error.")
    p.add_argument("case_id", help="a case id as printed by `e2egen list`")
    p.add_argument("--seed", type=int, default=None, help="the case's seed (default: derived from the catalogue's seed)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: CUDA when present, else CPU")
    p.add_argument("--timeout", type=number_above(0, finite=True), default=None, metavar="S",
                   help="seconds the case may run; past it the case fails, \"timed out after S s\" "
                        "(default: the catalogue's `timeout`, else 600)")
    catalogue_argument(p, positional=False)
    json_argument(p)
    p.set_defaults(handler=run_case)


def find_case(catalogue_path: str, case_id: str):
    cases = {c.id: c for c in expand(load_catalogue(catalogue_path))}
    if case_id not in cases:
        raise UsageError(f"{catalogue_path}: no case {case_id!r}{close_match(case_id, cases)} (`e2egen list` shows them all)")
    return cases[case_id]


@ends_what_kernels_leave
def run_case(args) -> int:
    case = find_case(args.catalogue, args.case_id)
    if args.seed is not None:
        case = case.with_seed(args.seed)
    limit = args.timeout if args.timeout is not None else case.time_limit
    watchdog = _hard_limit(case, args.device, args.catalogue, limit)
    try:
        outcome = execute(case, device=args.device, catalogue=args.catalogue, timeout=limit)
    finally:
        watchdog.cancel()
    if args.json:  # the case's record, as a sweep stores it (nightly.records.CaseRecord), and its report
        from e2egen.nightly import machine
        from e2egen.nightly.records import record_from_outcome

        record = record_from_outcome(outcome, run_id="", global_seed=None, nodeid="", worker="main",
                                     duration=sum(outcome.timings.values()), versions=machine.versions(),
                                     finished=machine.utc_now()).to_dict()
        emit("run", record=record, report=describe(outcome))
    else:
        print(describe(outcome), flush=True)
    return EXIT_OK if outcome.status != "failed" else EXIT_FAILED


def _hard_limit(case, device: str | None, catalogue: str, limit: float) -> threading.Timer:
    """A timer that, should the case outlive its limit by the grace, prints its timed-out report and exits 1."""
    grace = max(HARD_LIMIT_GRACE, HARD_LIMIT_GRACE_FRACTION * limit)

    def expire() -> None:
        limited = timed_out(case, device, catalogue, limit)
        outcome = replace(limited, report=limited.report + f"\nthe kernel did not give control back to Python "
                                                           f"within {grace:g} s more; the process was ended")
        print(describe(outcome), flush=True)
        sys.stderr.flush()
        os._exit(EXIT_FAILED)

    timer = threading.Timer(limit + grace, expire)
    timer.daemon = True
    timer.start()
    return timer
