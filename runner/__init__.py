"""The runner: one problem (op, direction, shape, dtype, layout, input range,
seed) -> the kernel's result on the device and a float64 reference from the
same inputs (and, on request, a rounding-error bound and kernel timings).

    p = make_problem("conv2d", "fwd", "f16", "nhwc", {"n": 1, "c": 8, "k": 8, "hw": 14, "kernel": 3, "pad": 1},
                     (-1.0, 1.0), seed=7)
    r = run(p)                       # r.out (device, f16), r.ref (float64)
    metrics.compare(r.ref, r.out, dtype=r.out_dtype)

The public names are loaded on first use (PEP 562). Describing and validating
a problem (OPS, DTYPES, make_problem, ProblemError) needs no torch; torch is
imported when a case runs, so generating a suite stays fast.
"""
from __future__ import annotations

from e2egen.metrics.lazy import lazy_exports

# public name -> the submodule that defines it
_SOURCES = {
    "BoundModel": "options", "ReferenceOptions": "options",
    "ErrorBound": "bound", "error_bounds": "bound",
    "DTYPES": "dtypes",
    "select_device": "device",
    "CaseTimedOut": "errors", "ImplError": "errors", "KernelDeclined": "errors", "KernelFailure": "errors",
    "ProblemError": "errors", "Skip": "errors",
    "resolve_impl": "kernels",
    "OPS": "ops", "Op": "ops", "ProductSumOp": "ops", "TensorSpec": "ops",
    "Problem": "problem", "make_problem": "problem", "INPUT_DATA": "problem", "check_input_data": "problem",
    "OutputResult": "run", "RunResult": "run", "run": "run",
    "KernelTiming": "timing", "TimingOptions": "timing",
}

__all__ = [
    "BoundModel", "CaseTimedOut", "DTYPES", "INPUT_DATA", "ErrorBound", "ImplError", "KernelDeclined", "KernelFailure", "KernelTiming",
    "OPS", "Op", "OutputResult", "Problem", "ProblemError", "ProductSumOp", "ReferenceOptions", "RunResult", "Skip",
    "TensorSpec", "TimingOptions", "check_input_data", "error_bounds", "make_problem", "resolve_impl", "run", "select_device",
]


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, __all__, globals())
