"""pytest-xdist on a generated suite: a fixed sample of the shipped catalogue's PR subset at -n 0 (the
baseline), at -n N with each worker's share of the cores (what the generated suite's plugin does), and at
-n N with every worker using all cores (the behaviour before: OMP_NUM_THREADS = cores); and -n N with
shared cores under --dist worksteal (idle workers take queued cases from busy ones: uneven case times).

    .venv/bin/python benchmarks/bench_workers.py [--workers 2] [--repeats 1] [--every 3]

--every K runs every Kth case of the PR subset in collection order (1: all of it), the same cases in every
row, with --e2e-kernel-time first as make pr runs them. Each row is the wall time of the whole pytest process, start-up included, and its speed-up against
-n 0 from the same run. A probe plugin records what torch.get_num_threads() is in each process while
its cases run, so the table shows that the suite's plugin really divided the threads.

Goals (issue 20): -n N never slower than -n 0; >= 1.7x at 2 workers on 2 cores. Each row also says how
many cores its processes kept busy (their CPU seconds over the wall time): -n 0 already runs torch's and
the tool's work on every core, and the speed-up N workers can reach is N over that.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = '''
"""Records each pytest process's torch thread count while it runs cases (bench_workers.py)."""
import os


def pytest_runtest_teardown(item):
    import torch

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(os.environ["E2E_BENCH_THREADS_DIR"], worker), "w") as f:
        f.write(str(torch.get_num_threads()))
'''


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if result.returncode not in (0, 1):  # 1: some case failed; the timing still counts
        sys.exit(f"{' '.join(command)} ended with exit status {result.returncode}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], env: dict[str, str], threads_dir: Path) -> tuple[float, float, str, str]:
    """Wall seconds, CPU seconds (every process of the run), the thread counts the probe saw (per
    process), and pytest's summary line."""
    for old in threads_dir.iterdir():
        old.unlink()
    started, cpu_before = time.perf_counter(), child_cpu_seconds()
    result = run(command, env)
    elapsed, cpu = time.perf_counter() - started, child_cpu_seconds() - cpu_before
    threads = ",".join(sorted(p.read_text() for p in threads_dir.iterdir()))
    summary = (result.stdout.strip().splitlines() or [""])[-1]
    return elapsed, cpu, threads, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=positive, default=2)
    parser.add_argument("--repeats", type=positive, default=1)
    parser.add_argument("--every", type=positive, default=3, help="run every Kth PR case (default 3; 1: all)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out, threads_dir = tmp / "e2e", tmp / "threads"
        threads_dir.mkdir()
        (tmp / "e2e_bench_threads.py").write_text(PROBE, encoding="utf-8")
        base_env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        base_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp), os.environ.get("PYTHONPATH")]))
        base_env["E2E_BENCH_THREADS_DIR"] = str(threads_dir)
        subprocess.run([sys.executable, "-m", "e2egen", "gen", "configs.toml", "--out", str(out)], cwd=REPO,
                       check=True, capture_output=True)
        collected = run([sys.executable, "-m", "pytest", str(out), "-m", "pr", "-q", "-p", "no:cacheprovider",
                         "--collect-only"], base_env)
        node_ids = [line for line in collected.stdout.splitlines() if "::" in line]
        sample = node_ids[::args.every]
        (tmp / "cases.txt").write_text("".join(f"{out / n}\n" for n in sample), encoding="utf-8")
        pytest = [sys.executable, "-m", "pytest", f"@{tmp / 'cases.txt'}", "-m", "pr", "-q", "-p", "no:cacheprovider",
                  "--e2e-kernel-time", "first", "-p", "e2e_bench_threads"]  # as make pr runs it
        rows = {
            "-n 0 (baseline)": (pytest + ["-n", "0"], base_env),
            f"-n {args.workers}, shared cores": (pytest + ["-n", str(args.workers)], base_env),
            f"-n {args.workers}, shared cores, --dist worksteal": (pytest + ["-n", str(args.workers), "--dist", "worksteal"], base_env),
            f"-n {args.workers}, all cores each": (pytest + ["-n", str(args.workers)], {**base_env, "OMP_NUM_THREADS": str(cores)}),
        }
        load_before = os.getloadavg()[0]
        results = {}
        for label, (command, env) in rows.items():
            runs = [timed(command, env, threads_dir) for _ in range(args.repeats)]
            results[label] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                              runs[-1][2], runs[-1][3])
        load_after = os.getloadavg()[0]
    baseline, baseline_cpu = results["-n 0 (baseline)"][:2]
    print(f"{len(sample)} of the {len(node_ids)} PR cases of configs.toml (every {args.every}.), {cores} cores, "
          f"median of {args.repeats}; load average {load_before:.1f} before, {load_after:.1f} after")
    print("| run | seconds | speed-up vs -n 0 | cores busy (CPU s ÷ wall s) | torch threads per process | pytest |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, (seconds, cpu, threads, summary) in results.items():
        print(f"| {label} | {seconds:.1f} | {baseline / seconds:.2f}x | {cpu / seconds:.2f} | {threads} | {summary} |")
    busy = baseline_cpu / baseline
    ceiling = min(args.workers, cores) / busy
    print(f"\n-n 0 keeps {busy:.2f} of {cores} cores busy (torch's and the tool's threads), so {args.workers} workers "
          f"can be at most {ceiling:.2f}x faster, and only if they do no work the single process does not "
          "(each worker imports torch and collects the suite again)")


if __name__ == "__main__":
    main()
