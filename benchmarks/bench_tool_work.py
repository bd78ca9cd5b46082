"""Tool work against kernel time, per op family, on the shipped catalogue's cases (the CPU's own kernels as
the yardstick).

    .venv/bin/python benchmarks/bench_tool_work.py [--catalogue configs.toml] [--all] [--every 1] [--run-slow]
                                                   [--repeat 1] [--family NAME ...]

Each case of a deterministic sample (the PR subset by default, --all for every case; --every N keeps
every Nth case of each family in id order) runs as a test runs it (generator.execute: runner.run with the
case's bound, default unless the catalogue says otherwise, then metrics.compare for each output) on the
CPU, in this one process, twice: the table is the second pass (warm: what each further case costs); its
last column is the first pass, as a fresh test process meets the cases (one-time compilation included).
With --repeat N the table takes N warm passes and each case's median, part by part (the small families'
kernels take 0.1-0.2 ms, and single passes of them move by a quarter); --family keeps one op family
(repeatable). Tool work = inputs + reference + bound + compare (a conv or gemm bound is formed inside
compare's pass, so that part of it is in the compare column); the last column is the bound's time over
the reference's (goal: <= 0.5, without the part formed in compare); the baseline is the kernel's
recorded time (a warm call) in the same pass. Goal (issue 20): tool work <= kernel time in aggregate, per
family. Arithmetic probes (once per kernel and dtype, then cached on disk) are shown apart and not
counted. Cases marked slow are left out unless --run-slow, as the default CPU run does.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOL_PARTS = ("inputs", "reference", "bound", "compare")
# Op module -> family: the module's name within its package (product_sum's conv and gemm, chains' two), else the
# op family's package (runner/ops/<family>/spec.py); a package not named here is its own family.
FAMILIES = {"conv": "convolution", "gemm": "gemm", "attention": "attention", "gemm_gemm": "fused",
            "conv_gemm": "fused", "pointwise": "element-wise", "reductions": "reduction",
            "normalization": "normalisation", "scaled_gemm": "scaled gemm"}


def family_of(op_name: str) -> str:
    from e2egen.runner import OPS

    package, module = type(OPS[op_name]).__module__.rsplit(".", 2)[-2:]
    name = package if module == "spec" else module
    return FAMILIES.get(name, name)


def op_families() -> list[str]:
    from e2egen.runner import OPS

    return sorted({family_of(name) for name in OPS})


def tool_of(total: dict[str, float]) -> float:
    return sum(total[k] for k in TOOL_PARTS)


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def per_case_arguments(description: str, repeat: int) -> argparse.Namespace:
    """--catalogue, --repeat and --threads of a script that times the PR subset's cases one by one; applies
    the threads and keeps freed memory for reuse (as a run does), and prints the run's header line."""
    import torch

    from e2egen.runner.host_memory import retain_freed_memory

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--catalogue", default=str(Path(__file__).resolve().parents[1] / "configs.toml"))
    parser.add_argument("--repeat", type=positive, default=repeat)
    parser.add_argument("--threads", type=positive, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    retain_freed_memory()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeat}")
    return args


def catalogue_cases(path: str) -> list:
    """Every case of the catalogue at `path`; a bad catalogue is one line on stderr and exit status 2."""
    from e2egen.errors import UserError
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import load_catalogue

    try:
        return expand(load_catalogue(path))
    except (UserError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def sample(cases, every: int, run_slow: bool) -> tuple[dict[str, list], int]:
    """family -> cases (every `every`th in id order), and how many slow cases were left out."""
    by_family: dict[str, list] = defaultdict(list)
    for case in sorted(cases, key=lambda c: c.id):
        by_family[family_of(case.op)].append(case)
    chosen, slow = {}, 0
    for family, members in sorted(by_family.items()):
        kept = members[::every]
        slow += sum("slow" in c.markers for c in kept) if not run_slow else 0
        chosen[family] = [c for c in kept if run_slow or "slow" not in c.markers]
    return chosen, slow


def measure(chosen: dict[str, list], repeat: int = 1):
    """Passes over the sample: per family the summed timings (each case's median over `repeat` passes, part
    by part), each case's tool ÷ kernel, the case with the most tool work over its kernel time, the
    statuses (of the last pass); and the seconds the passes took."""
    from e2egen.generator.execute import execute

    sums: dict[str, dict[str, float]] = {}
    ratios: dict[str, list[float]] = {}
    worst: dict[str, tuple[float, str, dict]] = {}
    statuses: dict[str, dict[str, int]] = {}
    started = time.perf_counter()
    runs = {family: {case.id: [] for case in members} for family, members in chosen.items()}
    for _ in range(repeat):
        for family, members in chosen.items():
            statuses[family] = defaultdict(int)
            for case in members:
                outcome = execute(case, device="cpu")
                statuses[family][outcome.status] += 1
                if "kernel" in outcome.timings and "compare" in outcome.timings:
                    runs[family][case.id].append(outcome.timings)
                # else skipped, or failed before comparing: no timings to add
    for family, by_case in runs.items():
        sums[family] = defaultdict(float)
        ratios[family] = []
        for case_id, samples in by_case.items():
            if not samples:
                continue
            timings = {key: statistics.median(t.get(key, 0.0) for t in samples)
                       for key in (*TOOL_PARTS, "kernel", "probes")}
            tool = sum(timings[k] for k in TOOL_PARTS)
            for key, value in timings.items():
                sums[family][key] += value
            sums[family]["cases"] += 1
            ratios[family].append(tool / max(timings["kernel"], 1e-9))
            excess = tool - timings["kernel"]
            if family not in worst or excess > worst[family][0]:
                worst[family] = (excess, case_id, timings)
    return sums, ratios, worst, statuses, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalogue", default=str(REPO / "configs.toml"))
    parser.add_argument("--all", action="store_true", help="every case of the catalogue, not only the PR subset")
    parser.add_argument("--every", type=positive, default=1, help="keep every Nth case of each family (default 1)")
    parser.add_argument("--run-slow", action="store_true", help="include the cases marked slow")
    parser.add_argument("--repeat", type=positive, default=1,
                        help="warm passes; each case's median part by part (default 1)")
    parser.add_argument("--family", action="append", choices=op_families(),
                        help="only this op family (repeatable; default every family)")
    args = parser.parse_args()

    cases = [c for c in catalogue_cases(args.catalogue) if args.all or c.pr]
    chosen, slow_left_out = sample(cases, args.every, args.run_slow)
    if args.family:
        chosen = {family: members for family, members in chosen.items() if family in args.family}

    import torch

    total_cases = sum(len(v) for v in chosen.values())
    subset = "all cases" if args.all else "PR subset"
    print(f"# {args.catalogue}: {subset}, every {args.every}. case per family: {total_cases} cases"
          f"{f' ({slow_left_out} marked slow left out)' if slow_left_out else ''}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    first = measure(chosen)  # as a fresh test process meets them: one-time compilation and caches included
    sums, ratios, worst, statuses, elapsed = measure(chosen, args.repeat)  # warm: what each further case costs

    def ms(seconds: float) -> str:
        return f"{seconds * 1e3:.0f}" if seconds >= 0.01 else f"{seconds * 1e3:.1f}"

    header = ["family", "cases", "kernel ms (baseline)", *(f"{k} ms" for k in TOOL_PARTS), "tool ms",
              "tool ÷ kernel", "median per case", "meets", "first pass: tool ÷ kernel", "bound ÷ reference"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    grand = defaultdict(float)
    for family, total in sums.items():
        if not total["cases"]:
            continue
        tool = sum(total[k] for k in TOOL_PARTS)
        for key, value in total.items():
            grand[key] += value
        ratio = tool / max(total["kernel"], 1e-9)
        row = [family, f"{total['cases']:.0f}", ms(total["kernel"]), *(ms(total[k]) for k in TOOL_PARTS), ms(tool),
               f"{ratio:.2f}", f"{statistics.median(ratios[family]):.2f}", "yes" if ratio <= 1 else "no",
               f"{tool_of(first[0][family]) / max(first[0][family]['kernel'], 1e-9):.2f}",
               f"{total['bound'] / max(total['reference'], 1e-9):.2f}"]
        print("| " + " | ".join(row) + " |")
    tool = sum(grand[k] for k in TOOL_PARTS)
    print(f"| all | {grand['cases']:.0f} | {ms(grand['kernel'])} | " + " | ".join(ms(grand[k]) for k in TOOL_PARTS)
          + f" | {ms(tool)} | {tool / max(grand['kernel'], 1e-9):.2f} | "
          f"{statistics.median(r for v in ratios.values() for r in v):.2f} | {'yes' if tool <= grand['kernel'] else 'no'} | "
          f"{sum(tool_of(t) for t in first[0].values()) / max(sum(t['kernel'] for t in first[0].values()), 1e-9):.2f} | "
          f"{grand['bound'] / max(grand['reference'], 1e-9):.2f} |")
    print(f"\nfirst pass {first[4]:.1f} s, then {args.repeat} (the table) {elapsed:.1f} s; load average {os.getloadavg()[0]:.1f} at the end; "
          f"probes (first pass) outside the sums: {ms(sum(t['probes'] for t in first[0].values()))} ms")
    print("statuses: " + "; ".join(f"{f} {dict(s)}" for f, s in statuses.items()))
    print("\nlargest tool work over kernel, per family:")
    for family, (excess, case_id, timings) in worst.items():
        parts = ", ".join(f"{k} {ms(timings[k])}" for k in ("kernel", *TOOL_PARTS) if k in timings)
        print(f"  {family:<14} {case_id}: {parts} ms")


if __name__ == "__main__":
    main()
