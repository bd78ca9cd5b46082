"""Generator speed: `e2egen gen` and pytest collection of a 10,000-case catalogue, and the
per-case overhead of running tiny cases (wall time minus inputs, kernel, reference, compare).

    .venv/bin/python benchmarks/bench_gen.py [--cases 10000] [--run 400]

Targets (issue 4): gen < 2 s, collection < 5 s, overhead < 5 ms a case.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

HEADER = """
seed = 1
[ranges]
r0 = [-1.0, 1.0]
r1 = [-10.0, 10.0]
r4 = [1.0, 5.0]
r5 = [5.0, 10.0]
[tolerances.f32]
rms = 1e-6
bound_ratio = 1.0
[tolerances.f16]
rms = 1e-3
bound_ratio = 1.0
[tolerances.bf16]
rms = 1e-2
bound_ratio = 1.0
"""


def synthetic_catalogue(target_cases: int) -> str:
    """Conv suites (36 cases a config) and gemm suites (48 a config) up to `target_cases`."""
    parts = [HEADER]
    conv_configs = target_cases * 36 // 100 // 36
    gemm_configs = (target_cases - conv_configs * 36 + 47) // 48
    parts.append('[[suite]]\nname = "conv"\nop = "conv2d"\ndtypes = ["f32", "f16", "bf16"]\nranges = ["r0", "r4"]\n')
    for i in range(conv_configs):
        parts.append(f'[[suite.config]]\nname = "c{i}"\nn = 1\nc = {4 + i % 5}\nk = {4 + i % 3}\nhw = [{5 + i % 4}, 6]\nkernel = 3\npad = 1\n')
    parts.append('[[suite]]\nname = "gemm"\nop = "gemm"\ndtypes = ["f32", "f16", "bf16"]\nranges = ["r0", "r1", "r4", "r5"]\n')
    for i in range(gemm_configs):
        parts.append(f'[[suite.config]]\nname = "g{i}"\nm = {4 + i % 7}\nn = {4 + i % 5}\nk = {8 + i % 9}\n')
    return "".join(parts)


def timed(command: list[str], repeats: int = 3) -> tuple[float, str]:
    times, out = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if result.returncode not in (0, 5):
            sys.exit(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
        out = result.stdout
    return statistics.median(times), out


class _TimingCollector:
    """Per test item: wall time of setup+call+teardown, and the time the case spent in its parts."""

    def __init__(self):
        self.wall: list[float] = []
        self.parts: list[float] = []
        self.inputs: list[float] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        start = time.perf_counter()
        yield
        self.wall.append(time.perf_counter() - start)
        from e2egen.generator.plugin import OUTCOME

        outcome = item.stash.get(OUTCOME, None)
        t = outcome.timings if outcome is not None else {}
        self.parts.append(sum(t.get(k, 0.0) for k in ("kernel", "reference", "bound", "compare")))
        self.inputs.append(t.get("inputs", 0.0))


def run_overhead(out_dir: Path, count: int) -> None:
    collector = _TimingCollector()
    args = [str(out_dir / "test_gemm.py"), "-q", "-p", "no:cacheprovider", "--e2e-device", "cpu"]
    pytest.main(args, plugins=[collector, _Slice(count)])
    n = len(collector.wall)
    if not n:
        print("  no case ran")
        return
    overheads = [(w - p) * 1e3 for w, p in zip(collector.wall, collector.parts)]
    wall, parts, inputs = (statistics.fmean(v) * 1e3 for v in (collector.wall, collector.parts, collector.inputs))
    print(f"  {n} tiny gemm cases: {wall:.2f} ms/case in pytest (setup+call+teardown); kernel+reference+bound+compare {parts:.2f} ms")
    print(f"  per-case overhead (pytest item time - kernel - reference - bound - compare): median {statistics.median(overheads):.2f} ms, "
          f"mean {statistics.fmean(overheads):.2f} ms, of which input generation {statistics.median(collector.inputs) * 1e3:.2f} ms   target < 5 ms")
    print(f"  the first case also pays the one-time import of torch and numba: {overheads[0]:.0f} ms")


class _Slice:
    def __init__(self, count: int):
        self.count = count

    def pytest_collection_modifyitems(self, config, items):
        del items[self.count:]


def _gen_in_process(catalogue: Path, out: Path) -> tuple[float, float, float]:
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import load_catalogue
    from e2egen.generator.render import render

    t0 = time.perf_counter()
    loaded = load_catalogue(catalogue)
    t1 = time.perf_counter()
    cases = expand(loaded)
    t2 = time.perf_counter()
    render(loaded, cases, out, loaded.seed)
    return t1 - t0, t2 - t1, time.perf_counter() - t2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--run", type=int, default=400, help="tiny cases to run for the overhead figure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        catalogue = tmp / "configs.toml"
        catalogue.write_text(synthetic_catalogue(args.cases))
        out = tmp / "e2e"
        e2egen = [sys.executable, "-m", "e2egen"]
        in_process = _gen_in_process(catalogue, tmp / "e2e-in-process")
        startup, _ = timed([*e2egen, "--help"])
        gen_time, gen_out = timed([*e2egen, "gen", str(catalogue), "--out", str(out)], repeats=1)
        print(f"e2egen gen: {gen_out.strip()}")
        regen_time, _ = timed([*e2egen, "gen", str(catalogue), "--out", str(out)])
        print(f"  `e2egen gen` command: first {gen_time:.2f} s, again {regen_time:.2f} s (median of 3), of which "
              f"interpreter + imports (`e2egen --help`) {startup:.2f} s   target < 2 s")
        print(f"  in-process: load {in_process[0]:.2f} s, expand {in_process[1]:.2f} s, render {in_process[2]:.2f} s")
        empty, _ = timed([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(out / "conftest.py")])
        collect, collect_out = timed([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(out)])
        print(f"pytest --collect-only: {collect_out.strip().splitlines()[-1]}")
        print(f"  collection: {collect:.2f} s (median of 3); pytest start-up with no test: {empty:.2f} s   target < 5 s")
        run_overhead(out, args.run)


if __name__ == "__main__":
    main()
