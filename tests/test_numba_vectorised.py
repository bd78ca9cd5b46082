"""Every per-element numba loop is one LLVM vectorises, with plain vector loads.

The kernels' speed rests on it, and nothing else notices when a loop is slow: the results are the same,
only several times slower. Three were (issue 20, eighth round): narrowing's rounding indexed the whole
array from each task's start, so that every load became a gather (numba's negative-index fix-up); the
monotone interval pass loaded an argument under a condition, a gather again; magnitude's scan took its
minimum through a conditional expression, which left the loop scalar. Here each kernel is compiled
afresh, without the cache, for every argument type the warm-up gives it, and its optimised LLVM IR must
hold the loop vectoriser's `vector.body` and no gathers. On x86-64, where a loop keeps vector registers
on the stack, its prologue must also align the stack (numba_kernels.align_stack; issue 20, tenth round).
"""
from __future__ import annotations

import functools
import importlib
import platform
import re

import pytest

from e2egen.metrics import fused_numba

pytestmark = pytest.mark.skipif(not fused_numba.AVAILABLE, reason="numba is not installed")

# (module, kernel); fused_numba._reduce_chunk is checked inside _kernel, which inlines it (a cached
# _kernel never compiles _reduce_chunk on its own, so it has no signatures to recompile). Left out:
# fused_numba._count_specials (a scalar pass with branches over the rare chunks that hold NaN, inf or
# overflow).
VECTORISED = [
    ("e2egen.runner.narrowing", "_narrow"),
    ("e2egen.runner.narrowing", "_widen"),
    ("e2egen.runner.draws", "_fill"),
    ("e2egen.runner.magnitude", "_narrow_chunk"),
    ("e2egen.runner.magnitude", "_scan_f32_chunk"),
    ("e2egen.runner.magnitude", "_widen_patterns_chunk"),
    ("e2egen.runner.upper_matmul", "_round_up_chunk"),
    ("e2egen.runner.upper_matmul", "_widen_chunk"),
    ("e2egen.runner.upper_matmul", "_widen_stacked_rows"),
    ("e2egen.runner.softmax_passes", "_rows"),
    ("e2egen.runner.partial_passes", "_accumulate"),
    ("e2egen.runner.partial_passes", "_start"),
    ("e2egen.runner.partial_passes", "_accumulate_pair"),
    ("e2egen.runner.partial_passes", "_start_pair"),
    ("e2egen.metrics.rounding_numba", "_round_to"),
    ("e2egen.metrics.rounding_numba", "_ulp"),
    ("e2egen.metrics.rounding_numba", "_deviation"),
    ("e2egen.metrics.rounding_numba", "_codes"),
    ("e2egen.metrics.fused_numba", "_kernel"),
    ("e2egen.metrics.fused_numba", "_locate"),
    ("e2egen.metrics.fused_numba", "scaled_plus_ulps_into"),
    ("e2egen.metrics.fused_numba", "add_ulps_into"),
    ("e2egen.metrics.fused_numba", "partial_sums_plus_ulps_into"),
    *(("e2egen.runner.interval_passes", name)
      for name in ("_monotone", "_output_side", "_outward", "_product", "_quotient", "_sum", "_width")),
]


@pytest.fixture(scope="module")
def warmed() -> None:
    from e2egen.runner import warmup

    assert warmup.warm() > 0  # every kernel called once per argument type: their signatures are known


@functools.cache
def fresh_compile(dispatcher, signature):
    """The dispatcher's function compiled anew for `signature`, cache off (once per test process: the IR
    and the assembly checks read the same compilation)."""
    import numba

    options = {k: v for k, v in dispatcher.targetoptions.items() if k not in ("cache", "nopython")}
    return numba.njit(signature, **options)(dispatcher.py_func)


def fresh_ir(dispatcher, signature) -> str:
    """The optimised LLVM IR of the dispatcher's function compiled anew for `signature`, cache off."""
    compiled = fresh_compile(dispatcher, signature)
    return compiled.inspect_llvm(compiled.signatures[0])


def fresh_asm(dispatcher, signature) -> str:
    compiled = fresh_compile(dispatcher, signature)
    return compiled.inspect_asm(compiled.signatures[0])


_LABEL = re.compile(r"^(\.?[\w$.]+):")
_JUMP = re.compile(r"^\s+j\w+\s+(\.?[\w$.]+)")
_VECTOR_STACK_ACCESS = re.compile(r"%[yz]mm\d+.*\(%rsp\)|\(%rsp\).*%[yz]mm\d+")


def vector_stack_accesses_in_loops(asm: str) -> int:
    """The most 32- or 64-byte register loads and stores to the stack (spills, reloads) inside one loop of
    x86-64 assembly: the lines from a label to a jump back to it."""
    lines = asm.splitlines()
    labels = {match.group(1): i for i, line in enumerate(lines) if (match := _LABEL.match(line))}
    most = 0
    for end, line in enumerate(lines):
        jump = _JUMP.match(line)
        if jump and labels.get(jump.group(1), end) < end:
            body = lines[labels[jump.group(1)]:end + 1]
            most = max(most, sum(1 for op in body if _VECTOR_STACK_ACCESS.search(op)))
    return most


def aligns_its_stack(asm: str) -> bool:
    return "andq\t$-64, %rsp" in asm


@pytest.mark.parametrize("module, name", VECTORISED, ids=[f"{m.rsplit('.', 1)[1]}.{n}" for m, n in VECTORISED])
def test_the_loop_is_vectorised(module, name, warmed):
    dispatcher = getattr(importlib.import_module(module), name)
    assert dispatcher.signatures, f"the warm-up never called {name}"
    irs = {str(s): fresh_ir(dispatcher, s) for s in dispatcher.signatures}
    scalar = [s for s, ir in irs.items() if "vector.body" not in ir]
    assert not scalar, f"{module}.{name} is not vectorised for {scalar}"
    gathering = [s for s, ir in irs.items() if "masked.gather" in ir]
    assert not gathering, f"{module}.{name} loads its elements by gathers for {gathering}"


x86_64 = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                            reason="reads x86-64 assembly")


@x86_64
@pytest.mark.parametrize("module, name", VECTORISED, ids=[f"{m.rsplit('.', 1)[1]}.{n}" for m, n in VECTORISED])
def test_a_loop_that_spills_vectors_has_its_stack_aligned(module, name, warmed):
    """A kernel whose loop keeps vector registers on the stack calls numba_kernels.align_stack: the ABI
    aligns the stack to 16 bytes only, and a 32- or 64-byte spill at a misaligned place splits a cache
    line on every iteration (a fifth slower, depending on where the process's stack happens to start)."""
    dispatcher = getattr(importlib.import_module(module), name)
    assert dispatcher.signatures, f"the warm-up never called {name}"
    asms = {str(s): fresh_asm(dispatcher, s) for s in dispatcher.signatures}
    unaligned = [s for s, asm in asms.items() if vector_stack_accesses_in_loops(asm) and not aligns_its_stack(asm)]
    assert not unaligned, f"{module}.{name} spills vector registers in its loop on an unaligned stack for {unaligned}"


def _many_sums(x, out, lo, hi):
    """Forty running sums: more vector accumulators than AVX-512's 32 registers, so the loop spills."""
    x_c = x[lo:hi]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = s8 = s9 = 0.0
    t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = t8 = t9 = 0.0
    u0 = u1 = u2 = u3 = u4 = u5 = u6 = u7 = u8 = u9 = 0.0
    v0 = v1 = v2 = v3 = v4 = v5 = v6 = v7 = v8 = v9 = 0.0
    for i in range(hi - lo):
        a = x_c[i]
        s0, s1, s2, s3, s4 = s0 + a, s1 + a * 1.5, s2 + a * 2.5, s3 + a * 3.5, s4 + a * 4.5
        s5, s6, s7, s8, s9 = s5 + a * 5.5, s6 + a * 6.5, s7 + a * 7.5, s8 + a * 8.5, s9 + a * 9.5
        q = a * a
        t0, t1, t2, t3, t4 = t0 + q, t1 + q * 1.5, t2 + q * 2.5, t3 + q * 3.5, t4 + q * 4.5
        t5, t6, t7, t8, t9 = t5 + q * 5.5, t6 + q * 6.5, t7 + q * 7.5, t8 + q * 8.5, t9 + q * 9.5
        m = abs(a)
        u0, u1, u2, u3, u4 = u0 + m, u1 + m * 1.5, u2 + m * 2.5, u3 + m * 3.5, u4 + m * 4.5
        u5, u6, u7, u8, u9 = u5 + m * 5.5, u6 + m * 6.5, u7 + m * 7.5, u8 + m * 8.5, u9 + m * 9.5
        v0, v1, v2, v3, v4 = v0 + max(a, 0.0), v1 + max(a, 1.0), v2 + max(a, 2.0), v3 + max(a, 3.0), v4 + max(a, 4.0)
        v5, v6, v7, v8, v9 = v5 + max(a, 5.0), v6 + max(a, 6.0), v7 + max(a, 7.0), v8 + max(a, 8.0), v9 + max(a, 9.0)
    out[0] = (s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9 + t0 + t1 + t2 + t3 + t4 + t5 + t6 + t7 + t8 + t9
              + u0 + u1 + u2 + u3 + u4 + u5 + u6 + u7 + u8 + u9 + v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9)


@x86_64
def test_the_check_tells_an_unaligned_spill():
    """Forty running sums spill in the loop; without _align_stack the prologue leaves the stack as the ABI
    gives it, with it the prologue aligns it."""
    import numba
    import numpy as np

    from e2egen.metrics.numba_kernels import align_stack as _align_stack

    inner = numba.njit(error_model="numpy", fastmath={"reassoc"})(_many_sums)

    @numba.njit(error_model="numpy")
    def aligned(x, out, lo, hi):
        _align_stack()
        inner(x, out, lo, hi)  # inlined by LLVM: the loop is in aligned's body

    x, out = np.arange(64.0), np.zeros(1)
    for function, expect_aligned in ((inner, False), (aligned, True)):
        function(x, out, 0, 64)
        assert out[0] > 0.0
        asm = function.inspect_asm(function.signatures[0])
        assert vector_stack_accesses_in_loops(asm) > 0, "the forty sums no longer spill: the check shows nothing"
        assert aligns_its_stack(asm) == expect_aligned


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
