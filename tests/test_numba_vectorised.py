"""Every per-element numba loop is one LLVM vectorises, with plain vector loads.

The kernels' speed rests on it, and nothing else notices when a loop is slow: the results are the same,
only several times slower. Three were (issue 20, eighth round): narrowing's rounding indexed the whole
array from each task's start, so that every load became a gather (numba's negative-index fix-up); the
monotone interval pass loaded an argument under a condition, a gather again; magnitude's scan took its
minimum through a conditional expression, which left the loop scalar. Here each kernel is compiled
afresh, without the cache, for every argument type the warm-up gives it, and its optimised LLVM IR must
hold the loop vectoriser's `vector.body` and no gathers.
"""
from __future__ import annotations

import importlib

import pytest

from e2egen.metrics import fused_numba

pytestmark = pytest.mark.skipif(not fused_numba.AVAILABLE, reason="numba is not installed")

# (module, kernel); fused_numba._reduce_chunk is checked inside _kernel, which inlines it (a cached
# _kernel never compiles _reduce_chunk on its own, so it has no signatures to recompile). Left out:
# narrowing._widen (a table look-up, gathers by nature) and fused_numba._count_specials (a scalar pass
# with branches over the rare chunks that hold NaN, inf or overflow).
VECTORISED = [
    ("e2egen.runner.narrowing", "_narrow"),
    ("e2egen.runner.draws", "_fill"),
    ("e2egen.runner.magnitude", "_narrow_chunk"),
    ("e2egen.runner.upper_matmul", "_round_up_chunk"),
    ("e2egen.runner.partial_passes", "_accumulate"),
    ("e2egen.metrics.rounding_numba", "_round_to"),
    ("e2egen.metrics.rounding_numba", "_ulp"),
    ("e2egen.metrics.rounding_numba", "_deviation"),
    ("e2egen.metrics.rounding_numba", "_codes"),
    ("e2egen.metrics.fused_numba", "_kernel"),
    ("e2egen.metrics.fused_numba", "_locate"),
    ("e2egen.metrics.fused_numba", "scaled_plus_ulps_into"),
    *(("e2egen.runner.interval_passes", name)
      for name in ("_monotone", "_output_side", "_outward", "_product", "_quotient", "_sum", "_width")),
]


@pytest.fixture(scope="module")
def warmed() -> None:
    from e2egen.runner import warmup

    assert warmup.warm() > 0  # every kernel called once per argument type: their signatures are known


def fresh_ir(dispatcher, signature) -> str:
    """The optimised LLVM IR of the dispatcher's function compiled anew for `signature`, cache off."""
    import numba

    options = {k: v for k, v in dispatcher.targetoptions.items() if k not in ("cache", "nopython")}
    compiled = numba.njit(signature, **options)(dispatcher.py_func)
    return compiled.inspect_llvm(compiled.signatures[0])


@pytest.mark.parametrize("module, name", VECTORISED, ids=[f"{m.rsplit('.', 1)[1]}.{n}" for m, n in VECTORISED])
def test_the_loop_is_vectorised(module, name, warmed):
    dispatcher = getattr(importlib.import_module(module), name)
    assert dispatcher.signatures, f"the warm-up never called {name}"
    irs = {str(s): fresh_ir(dispatcher, s) for s in dispatcher.signatures}
    scalar = [s for s, ir in irs.items() if "vector.body" not in ir]
    assert not scalar, f"{module}.{name} is not vectorised for {scalar}"
    gathering = [s for s, ir in irs.items() if "masked.gather" in ir]
    assert not gathering, f"{module}.{name} loads its elements by gathers for {gathering}"


def test_the_check_tells_a_scalar_loop():
    """The marker is absent where LLVM must leave a loop scalar: a float sum in order (without fastmath's
    reassociation every addition waits for the one before)."""
    import numba
    import numpy as np

    def ordered_sum(x, lo, hi):
        total = 0.0
        x_c = x[lo:hi]
        for i in range(hi - lo):
            total += x_c[i]
        return total

    dispatcher = numba.njit(error_model="numpy")(ordered_sum)
    assert dispatcher(np.ones(4), 0, 4) == 4.0
    assert "vector.body" not in fresh_ir(dispatcher, dispatcher.signatures[0])
