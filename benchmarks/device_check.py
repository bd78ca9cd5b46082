"""Everything that needs a GPU, in one command that fits a lent machine's 10-minute command limit.

    make device-check                                      # gen + warm, then every step on CUDA
    .venv/bin/python benchmarks/device_check.py --dry-run  # the commands and their time budgets, anywhere
    make device-check DEVICE_CHECK_ARGS="--steps pr,bench --pr-budget 300"

Steps, in this order, each a subprocess with its own time budget and log file (one failing or running out
of time never stops the others):

  tests   the project's own tests whose behaviour depends on CUDA. The suite has no CUDA marker and no
          test skips without CUDA (the one CUDA skip, test_runner_device.py's no_cuda, skips *with* it),
          so the step runs the test files that consult torch.cuda.is_available(): there the default
          device, and with it the kernels and bounds a test checks, becomes CUDA.
  probes  e2egen arithmetic --device cuda on the cells of the PR subset (--probe-filter; "" for every cell)
  pr      the generated suite's PR subset on CUDA, as `make pr` runs it (-n 0: one process owns the GPU)
  bench   benchmarks/bench_metrics.py --device cuda: metrics.compare's time, on a small input

The probes write the CUDA profile into the profile cache named by $E2EGEN_PROFILES, set to
OUT/profiles for both the probes and the pr step: the pr step then finds the cells probed and does not
probe them again (a cell costs a few tenths of a second, ~330 in the PR subset), and the profile comes
back with the logs (its name carries the cache's version digest; `e2egen arithmetic --out` writes the same
cells under the shipped profiles' name).

OUT: --out, else $OUT/device-check when $OUT is set (what a lent machine's harness copies back; a
subfolder, because make's OUT ?= takes the same $OUT and `make gen` writes the suite there), else
build/device-check. The script ends with one summary table (also OUT/summary.txt). Exit 0 when every step
asked for passed, 1 otherwise, 2 for bad arguments or a machine without CUDA (unless --dry-run).
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STEPS = ("tests", "probes", "pr", "bench")
# Default budgets (s): ~475 s of steps, and TOTAL_BUDGET_S caps them together at 510 s, so that `make
# device-check` (gen, then warm: ~45 s of numba compilation on a fresh machine) ends inside a lent
# machine's 10-minute command with its summary printed.
BUDGETS_S = {"tests": 100, "probes": 150, "pr": 180, "bench": 45}
TOTAL_BUDGET_S = 510
# A step out of time gets SIGINT first: pytest then stops and still prints its counts and the e2egen summary;
# after GRACE_S it is killed, with the processes it started (xdist workers).
GRACE_S = 5
MIN_STEP_S = 10  # a step left less than this of the total is skipped rather than started to be cut off
CUDA_TESTS_NEEDLE = "torch.cuda.is_available()"
UNBUFFERED = {"PYTHONUNBUFFERED": "1"}  # a step stopped at its budget keeps every line it printed


@dataclass
class Step:
    name: str
    command: list[str]
    budget_s: float
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    refusal: str | None = None  # why the step cannot run at all (a failure, not a skip)


@dataclass
class Result:
    step: str
    status: str  # passed, failed, timed out, skipped
    seconds: float
    figures: str
    log: Path | None
    asked_for: bool = True  # False: left out by --steps, which is not a failure


# ---- arguments


def step_list(text: str) -> tuple[str, ...]:
    """--steps: names from STEPS, comma-separated, kept in STEPS' order (the probes must precede pr)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in STEPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of {', '.join(STEPS)}")
    return tuple(name for name in STEPS if name in names)


def seconds(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: a budget is a positive number of seconds")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the commands and budgets, run nothing")
    parser.add_argument("--steps", type=step_list, default=STEPS, metavar="LIST",
                        help=f"comma-separated steps to run (default: all of {','.join(STEPS)})")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="logs and profiles (default: $OUT/device-check when $OUT is set, else "
                             "build/device-check)")
    parser.add_argument("--suite", default="build/e2e", metavar="DIR",
                        help="the generated suite, as `make gen` wrote it (default: build/e2e)")
    parser.add_argument("--catalogue", default="configs.toml",
                        help="catalogue the probes read (default: configs.toml)")
    parser.add_argument("--probe-filter", default="pr=yes", metavar="EXPR",
                        help="`e2egen arithmetic --filter` terms for the probes (default: pr=yes; '' probes "
                             "every cell)")
    parser.add_argument("--test-workers", default="4", metavar="N",
                        help="pytest-xdist workers for the tests step (default: 4)")
    parser.add_argument("--bench-elements", type=int, default=1 << 22, metavar="N",
                        help="bench_metrics.py -n (default: 4M)")
    for name in STEPS:
        parser.add_argument(f"--{name}-budget", type=seconds, default=BUDGETS_S[name], metavar="S",
                            help=f"seconds the {name} step may run (default: {BUDGETS_S[name]})")
    parser.add_argument("--total-budget", type=seconds, default=TOTAL_BUDGET_S, metavar="S",
                        help="seconds all steps may run together; a later step gets what is left "
                             f"(default: {TOTAL_BUDGET_S})")
    return parser.parse_args(argv)


def output_dir(args: argparse.Namespace) -> Path:
    if args.out:
        return Path(args.out).resolve()
    harness_out = os.environ.get("OUT", "").strip()
    return (Path(harness_out) / "device-check").resolve() if harness_out else REPO / "build" / "device-check"


# ---- the steps


def cuda_dependent_test_files(tests_dir: Path = REPO / "tests") -> list[Path]:
    """The test files that branch on torch.cuda.is_available(): the only place the suite's behaviour
    depends on CUDA (there is no CUDA marker)."""
    return [path for path in sorted(tests_dir.rglob("test_*.py"))
            if CUDA_TESTS_NEEDLE in path.read_text(encoding="utf-8")]


def build_steps(args: argparse.Namespace, out: Path) -> list[Step]:
    # The probes' cells go to the cache that the pr step then reads: it does not probe them again.
    shared_profiles = {**UNBUFFERED, "E2EGEN_PROFILES": str(out / "profiles")}
    return [tests_step(args, out), probes_step(args, out, shared_profiles), pr_step(args, out, shared_profiles),
            bench_step(args, out)]


def tests_step(args: argparse.Namespace, out: Path) -> Step:
    test_files = [shown(path) for path in cuda_dependent_test_files()]
    step = Step("tests", [sys.executable, "-m", "pytest", *test_files, "-q", "-n", args.test_workers],
                args.tests_budget, out / "tests.log", UNBUFFERED)
    if not test_files:  # pytest given no file would run the whole of tests/
        step.refusal = f"no test file of tests/ contains {CUDA_TESTS_NEEDLE}: the selection needs a new rule"
    return step


def probes_step(args: argparse.Namespace, out: Path, env: dict[str, str]) -> Step:
    command = [sys.executable, "-m", "e2egen", "arithmetic", "--catalogue", args.catalogue, "--device", "cuda"]
    command += ["--filter", args.probe_filter] if args.probe_filter else []
    return Step("probes", command, args.probes_budget, out / "probes.log", env)


def pr_step(args: argparse.Namespace, out: Path, env: dict[str, str]) -> Step:
    suite = Path(args.suite).resolve()
    step = Step("pr", [sys.executable, "-m", "pytest", shown(suite), "-m", "pr", "-n", "0", "-q",
                       "--e2e-device", "cuda", "--e2e-kernel-time", "first"], args.pr_budget, out / "pr.log", env)
    if not (suite / "conftest.py").is_file():
        step.refusal = f"no generated suite in {shown(suite)}: `make gen` writes it (make device-check does)"
    return step


def bench_step(args: argparse.Namespace, out: Path) -> Step:
    return Step("bench", [sys.executable, shown(REPO / "benchmarks" / "bench_metrics.py"), "--device", "cuda",
                          "-n", str(args.bench_elements), "--repeat", "5"],
                args.bench_budget, out / "bench.log", UNBUFFERED)


def shown(path: Path) -> str:
    """A path as the commands and the table give it: relative to the repository when inside it."""
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def command_line(step: Step) -> str:
    return shlex.join([f"{name}={value}" for name, value in step.env.items()] + step.command)


# ---- running one step


def run_step(step: Step, timeout_s: float) -> tuple[str, float, str]:
    """(status, seconds, output) of the step run under `timeout_s`, its output written to its log as it comes."""
    step.log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(step.log, "w", encoding="utf-8") as log:
        log.write(f"$ {command_line(step)}\n")
        log.flush()
        # its own session, so that a stop reaches the processes it starts too
        process = subprocess.Popen(step.command, cwd=REPO, env={**os.environ, **step.env}, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = process.wait(timeout=timeout_s)
            status = "passed" if code == 0 else "failed"
        except subprocess.TimeoutExpired:
            stop(process)
            status = "timed out"
        finally:
            if process.poll() is None:  # this script interrupted: leave nothing running
                stop(process)
    elapsed = time.monotonic() - started
    return status, elapsed, step.log.read_text(encoding="utf-8", errors="replace")


def stop(process: subprocess.Popen) -> None:
    """SIGINT to the step's process group (pytest reports what ran), SIGKILL after GRACE_S."""
    for sig, wait_s in ((signal.SIGINT, GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


# ---- figures from the outputs


def pytest_counts(text: str) -> str | None:
    """The outcome counts of pytest's last result line ('465 passed, 50 skipped in 80.2s' ->
    '465 passed, 50 skipped'), or None when it printed none (it crashed or was killed)."""
    found = re.findall(r"^[=\s]*((?:\d+ \w+(?:, )?)+|no tests ran) in [\d.]+s\b", text, flags=re.MULTILINE)
    return found[-1].rstrip(", ") if found else None


def probed_cells(text: str) -> tuple[int, int]:
    """(cells probed, cells not probed) from `e2egen arithmetic`'s lines: one per cell, as it finishes."""
    probed = re.findall(r"^\S+ +\d+\.\d s  \S", text, flags=re.MULTILINE)
    failed = re.findall(r"^\S+  not probed: ", text, flags=re.MULTILINE)
    return len(probed), len(failed)


def e2egen_summary(text: str) -> list[str]:
    """The lines of the generated suite's 'e2egen summary' section (up to pytest's result line)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if re.fullmatch(r"=+ e2egen summary =+", line.strip())), None)
    if start is None:
        return []
    section = []
    for line in lines[start + 1:]:
        if line.startswith("=") or pytest_counts(line) is not None:
            break
        section.append(line)
    return section


def compare_timings(text: str) -> list[tuple[str, float]]:
    """(row, median ms) of bench_metrics.py's compare rows ('compare [torch] + bound   0.52 ms  (IQR ...')."""
    rows = re.findall(r"^(compare \[[^\]]+\](?: \+ [a-z ]+?)?) +(\d+\.\d+) ms", text, flags=re.MULTILINE)
    return [(name, float(ms)) for name, ms in rows]


def figures_of(step: str, text: str) -> str:
    """The key figures of one step's output, for the table."""
    parts = []
    if step in ("tests", "pr"):
        parts.append(pytest_counts(text) or "no pytest result line")
    if step == "pr":
        summary = e2egen_summary(text)
        parts.append(f"e2egen: {summary[0]}" if summary else "no e2egen summary")
    if step == "probes":
        probed, failed = probed_cells(text)
        parts.append(f"{probed} cells probed" + (f", {failed} not probed" if failed else ""))
    if step == "bench":
        rows = compare_timings(text)
        parts.append("compare " + "; ".join(f"{name.removeprefix('compare ')} {ms:.2f} ms" for name, ms in rows)
                     if rows else "no compare rows")
    return "; ".join(parts)


# ---- the whole check


def no_cuda_reason() -> str | None:
    """None where torch sees a CUDA device, else the line that says why nothing is checked."""
    import torch

    if torch.cuda.is_available():
        return None
    build = torch.version.cuda or "no"
    return f"device-check: no CUDA device here (torch {torch.__version__}, CUDA build: {build}); nothing to check"


def device_description() -> str:
    import torch

    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def print_plan(steps: list[Step], chosen: tuple[str, ...], total_s: float, out: Path) -> None:
    print(f"device-check --dry-run: output in {shown(out)}; at most {total_s:.0f} s of steps in all, "
          f"each stopped at its budget (SIGINT, SIGKILL {GRACE_S} s later)")
    for step in steps:
        if step.name not in chosen:
            print(f"{step.name:7s} skipped (not in --steps)")
            continue
        print(f"{step.name:7s} budget {step.budget_s:.0f} s, log {shown(step.log)}")
        print(f"        {command_line(step)}")
        if step.refusal:
            print(f"        would fail: {step.refusal}")


def run_all(steps: list[Step], chosen: tuple[str, ...], total_s: float) -> list[Result]:
    started = time.monotonic()
    results = []
    for step in steps:
        if step.name not in chosen:
            results.append(Result(step.name, "skipped", 0.0, "not in --steps", None, asked_for=False))
            continue
        if step.refusal:
            results.append(Result(step.name, "failed", 0.0, step.refusal, None))
            continue
        left_s = total_s - (time.monotonic() - started) - GRACE_S
        if left_s < MIN_STEP_S:
            results.append(Result(step.name, "skipped", 0.0, f"no time left of the {total_s:.0f} s total", None))
            continue
        timeout_s = min(step.budget_s, left_s)
        print(f"device-check: {step.name} (budget {timeout_s:.0f} s) -> {shown(step.log)}", flush=True)
        status, elapsed, text = run_step(step, timeout_s)
        results.append(Result(step.name, status, elapsed, figures_of(step.name, text), step.log))
        print(f"device-check: {step.name} {status} in {elapsed:.1f} s", flush=True)
    return results


def log_tail(path: Path, lines: int = 15) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]


def report(results: list[Result], device: str, out: Path) -> str:
    """The text printed at the end: the tails of the steps that did not pass, the e2egen summary, the table."""
    text = []
    for result in results:
        if result.status in ("failed", "timed out") and result.log is not None:
            text += [f"---- {result.step} {result.status}: last lines of {shown(result.log)}"]
            text += log_tail(result.log)
    pr = next((r for r in results if r.step == "pr" and r.log is not None), None)
    summary = e2egen_summary(pr.log.read_text(encoding="utf-8", errors="replace")) if pr else []
    if summary:
        text += ["---- pr: e2egen summary"] + summary
    text += [f"==== device-check summary ({device}; output in {shown(out)})"]
    rows = [("step", "status", "seconds", "figures", "log")]
    rows += [(r.step, r.status, f"{r.seconds:.1f}", r.figures, shown(r.log) if r.log else "-") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        text.append("  ".join(cell.ljust(width) if i != 2 else cell.rjust(width)
                              for i, (cell, width) in enumerate(zip(row[:4], widths))) + "  " + row[4])
    return "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = output_dir(args)
    steps = build_steps(args, out)
    if args.dry_run:
        print_plan(steps, args.steps, args.total_budget, out)
        return 0
    reason = no_cuda_reason()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    results = run_all(steps, args.steps, args.total_budget)
    text = report(results, device_description(), out)
    print(text)
    (out / "summary.txt").write_text(text + "\n", encoding="utf-8")
    return 0 if all(r.status == "passed" or not r.asked_for for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
