"""Run one case in this (fresh) process and print its measured peak memory next to the runner's estimate.

    python tests/runner/memory_probe.py '<json: op, direction, dtype, layout, params, range, reference, bound>'

tracemalloc does not see torch's allocations, so the peak is the process's peak resident set
(VmHWM, reset just before the case; ru_maxrss where that cannot be reset) minus the resident set before
it, after the numba warm-up and a tiny case of the same op
(imports, numba's compiled kernels and torch's one-time buffers). Prints one JSON line: peak, estimate (bytes).
"""
from __future__ import annotations

import json
import resource
import sys

from e2egen.runner import BoundModel, ReferenceOptions, make_problem, run
from e2egen.runner.memory import peak_bytes
from e2egen.runner.warmup import warm


def max_rss() -> int:
    """The peak resident set since reset_peak() (VmHWM), else since the process started (ru_maxrss)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def reset_peak() -> None:
    """Start the peak afresh (Linux: "5" to clear_refs resets VmHWM), so that what warming up took (numba's
    compiler, hundreds of MiB on a cold cache) is not counted as the case's."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        pass


def current_rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def main() -> None:
    spec = json.loads(sys.argv[1])
    tiny = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    reference = ReferenceOptions(**spec.get("reference", {}))
    bound = BoundModel() if spec.get("bound", True) else None

    def problem(params):
        return make_problem(spec["op"], spec["direction"], spec["dtype"], spec["layout"], params,
                            spec.get("range", (-1.0, 1.0)), 1)

    warm()  # numba's compiler (LLVM) takes hundreds of MiB while it compiles: never inside the measurement
    if tiny is not None:
        run(problem(tiny), device="cpu", reference=reference, bound=bound, measure=False)
    baseline = current_rss()
    reset_peak()
    case = problem(spec["params"])
    run(case, device="cpu", reference=reference, bound=bound, measure=False)
    print(json.dumps({"peak": max_rss() - baseline, "estimate": peak_bytes(case, reference, bound, same_device=True)}))


if __name__ == "__main__":
    main()
