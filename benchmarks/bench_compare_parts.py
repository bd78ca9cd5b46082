"""What each part of the comparison's per-element work costs: metrics/fused_numba.py's pass as shipped (the
baseline) against copies of it with one part taken out, on one core over cached data.

    .venv/bin/python benchmarks/bench_compare_parts.py [--elements 16384] [--calls 400] [--repeats 7]

Each variant is the module's source with one part's lines replaced (the histogram's eight counts, the bias
statistics' four sums and with them the deviation from the rounded reference they read, the two divisions made
multiplications, the rounding's directed modes, the rounding to the format), written to a temporary folder,
compiled by numba and timed calling _kernel directly, in turn (one thread: the pool is not involved) over
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
from e2egen.metrics import fused_numba, partials as P  # noqa: E402
from e2egen.metrics.backend import NUMBA_SMALLEST_CHUNK  # noqa: E402
from e2egen.metrics.formats import get_format  # noqa: E402

KERNEL_SOURCE = ROOT / "metrics" / "fused_numba.py"
# The directed modes' branch: from `if mode == 0:` to its last line, `kept = np.ceil(in_quanta)`.
_DIRECTED_MODES = (r"if mode == 0:\n(?:.*\n)*?\s*kept = np\.ceil\(in_quanta\)", "kept = np.rint(in_quanta)", 1)
_NO_MODES = (_DIRECTED_MODES[0], "kept = in_quanta", 1)
# part -> (pattern, replacement, how many times the kernel holds the pattern) that take it out (re.MULTILINE);
# a count that no longer matches means the kernel changed and the part would no longer be what it says
PARTS = {
    "histogram (eight counts)": [(r"^\s*counts_[bcd] \+= .*\brel\b.*\n", "", 8)],
    "bias statistics (four sums)": [(r"^\s*sum_(?:s|sq_s|t|sq_t) \+= .*\n", "", 4)],
    "two divisions": [(r"= d / (ax|abs\(bound_value\))", r"= d * \1", 2)],
    "directed rounding modes": [_DIRECTED_MODES],
    "rounding to the format": [(r"_rint_small\(in_quanta\)", "_bits(in_quanta)", 1), _NO_MODES],
}
CHUNK = NUMBA_SMALLEST_CHUNK  # the chunk compare() gives small outputs, as these 16K elements


def variant_source(source: str, part: str) -> str:
    for pattern, replacement, expected in PARTS[part]:
        source, count = re.subn(pattern, replacement, source, flags=re.MULTILINE)
        if count != expected:
            raise SystemExit(f"error: {KERNEL_SOURCE} holds the lines of '{part}' ({pattern}) {count} times, not "
                             f"{expected}: update the part with the kernel")
    return source


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_call(module, elements: int):
    """A call of the module's _kernel over `elements` cached f16 outputs a few ulps off a float64 reference,
    with a bound written out; the first call compiles."""
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(elements)
    flipped = ref.astype(np.float16).view(np.uint16) ^ rng.integers(0, 4, elements).astype(np.uint16)
    out = flipped.view(np.int16)
    bound = np.abs(ref) * 1e-3 + 1e-3
    args = module._format_args(get_format("f16"), ftz=False, rel_floor=1e-3, mode=0)
    n_chunks = -(-elements // CHUNK)
    floats = np.full((n_chunks, P.N_FLOAT), -1.0)
    ints = np.full((n_chunks, P.N_INT), -1, np.int64)
    maxima = np.empty((n_chunks, module.BAD_BOUNDS + 1), np.int64)

    def call():
        module._kernel(ref, out, bound, None, CHUNK, 0, n_chunks, maxima_bits=maxima, floats=floats, ints=ints,
                       **args)

    call()
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=positive, default=1 << 14)
    parser.add_argument("--calls", type=positive, default=400)
    parser.add_argument("--repeats", type=positive, default=7)
    args = parser.parse_args()
    if not fused_numba.AVAILABLE:
        raise SystemExit("error: numba is not installed; the comparison's pass is numba's")
    source = KERNEL_SOURCE.read_text(encoding="utf-8")
    variants = {"as shipped": source, **{part: variant_source(source, part) for part in PARTS}}
    best = dict.fromkeys(variants, float("inf"))
    with tempfile.TemporaryDirectory() as folder:
        calls = {}
        for index, (name, text) in enumerate(variants.items()):
            path = Path(folder) / f"compare_variant_{index}.py"
            path.write_text(text, encoding="utf-8")
            calls[name] = timed_call(load(path, path.stem), args.elements)
        for _ in range(args.repeats):  # the variants in turn, so that a slow spell of the machine hits them all
            for name, call in calls.items():
                started = time.perf_counter()
                for _ in range(args.calls):
                    call()
                best[name] = min(best[name], (time.perf_counter() - started) / args.calls / args.elements * 1e9)
    baseline = best.pop("as shipped")
    print(f"# {args.elements} cached f16 elements, a written bound, one core; ns per element, best of "
          f"{args.repeats} x {args.calls} calls, the variants in turn")
    print("| pass | ns per element | part's cost | share |")
    print("| --- | --- | --- | --- |")
    print(f"| as shipped (baseline) | {baseline:.2f} | | |")
    for part, ns in best.items():
        print(f"| without the {part} | {ns:.2f} | {baseline - ns:.2f} | {(baseline - ns) / baseline:.0%} |")


if __name__ == "__main__":
    main()
