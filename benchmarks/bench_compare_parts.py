"""What each part of the comparison's per-element work costs: metrics/fused_numba.py's pass as shipped (the
baseline) against copies of it with one part taken out, on one core over cached data.

    .venv/bin/python benchmarks/bench_compare_parts.py [--elements 16384] [--calls 400] [--repeats 7]

Each variant is the module's source with one part's lines replaced (the histogram's eight counts, the bias
statistics' four sums and with them the deviation from the rounded reference they read, the two divisions made
multiplications, the rounding's directed modes, the rounding to the format), written to a temporary folder,
compiled by numba and timed calling _kernel directly (one thread: the pool is not involved) over
--elements f16 outputs against a float64 reference and bound, in chunks of 4096, best of --repeats runs of
--calls calls. A variant computes wrong values; only its time is read. The cost of a part is the baseline's
ns per element less the variant's. If the source no longer holds a part's lines the script stops and names
the part: update its patterns with the kernel.
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tool_work import positive  # noqa: E402
from e2egen.metrics import partials as P  # noqa: E402
from e2egen.metrics.formats import get_format  # noqa: E402

KERNEL_SOURCE = ROOT / "metrics" / "fused_numba.py"
# The directed modes' branch: from `if mode == 0:` to its last line, `kept = np.ceil(in_quanta)`.
_DIRECTED_MODES = (r"if mode == 0:\n(?:.*\n)*?\s*kept = np\.ceil\(in_quanta\)", "kept = np.float64(quanta)")
# part -> (pattern, replacement) pairs (re.MULTILINE) that take it out; each pattern must match
PARTS = {
    "histogram (eight counts)": [(r"^\s*counts_[bcd] \+= .*\brel\b.*\n", "")],
    "bias statistics (four sums)": [(r"^\s*sum_(?:s|sq_s|t|sq_t) \+= .*\n", "")],
    "two divisions": [(r"= d / (ax|abs\(bound_value\))", r"= d * \1")],
    "directed rounding modes": [_DIRECTED_MODES],
    "rounding to the format": [(r"np\.int64\(np\.rint\(in_quanta\)\)", "np.int64(in_quanta)"), _DIRECTED_MODES],
}
CHUNK = 4096


def variant_source(source: str, part: str) -> str:
    for pattern, replacement in PARTS[part]:
        source, count = re.subn(pattern, replacement, source, flags=re.MULTILINE)
        if count == 0:
            raise SystemExit(f"error: {KERNEL_SOURCE} no longer holds the lines of '{part}' ({pattern})")
    return source


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ns_per_element(module, elements: int, calls: int, repeats: int) -> float:
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(elements)
    flipped = ref.astype(np.float16).view(np.uint16) ^ rng.integers(0, 4, elements).astype(np.uint16)
    out = flipped.view(np.int16)  # a few ulps off the rounded reference
    bound = np.abs(ref) * 1e-3 + 1e-3
    args = module._format_args(get_format("f16"), False, 1e-3, 0)
    n_chunks = -(-elements // CHUNK)
    floats = np.full((n_chunks, P.N_FLOAT), -1.0)
    ints = np.full((n_chunks, P.N_INT), -1, np.int64)
    maxima = np.empty((n_chunks, module.BAD_BOUNDS + 1), np.int64)

    def call():
        module._kernel(ref, out, bound, None, CHUNK, 0, n_chunks, maxima_bits=maxima, floats=floats, ints=ints,
                       **args)

    call()  # compiles
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - started) / calls / elements * 1e9)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=positive, default=1 << 14)
    parser.add_argument("--calls", type=positive, default=400)
    parser.add_argument("--repeats", type=positive, default=7)
    args = parser.parse_args()
    source = KERNEL_SOURCE.read_text(encoding="utf-8")
    if "import numba" not in source or importlib.util.find_spec("numba") is None:
        raise SystemExit("error: numba is not installed; the comparison's pass is numba's")
    with tempfile.TemporaryDirectory() as folder:
        timings = {}
        for index, part in enumerate([None, *PARTS]):
            path = Path(folder) / f"compare_variant_{index}.py"
            path.write_text(source if part is None else variant_source(source, part), encoding="utf-8")
            timings[part] = ns_per_element(load(path, path.stem), args.elements, args.calls, args.repeats)
    baseline = timings.pop(None)
    print(f"# {args.elements} cached f16 elements, a written bound, one core; ns per element, best of "
          f"{args.repeats} x {args.calls} calls")
    print("| pass | ns per element | part's cost | share |")
    print("| --- | --- | --- | --- |")
    print(f"| as shipped (baseline) | {baseline:.2f} | | |")
    for part, ns in timings.items():
        print(f"| without the {part} | {ns:.2f} | {baseline - ns:.2f} | {(baseline - ns) / baseline:.0%} |")


if __name__ == "__main__":
    main()
