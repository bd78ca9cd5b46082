"""The pieces every numba kernel of the project shares: whether numba is here, bit casts, the stack's alignment.

The comparison's pass (fused_numba.py), rounding_numba.py and the runner's passes (input draws and
narrowing, the bounds' scans and interval passes) are written with these:

* AVAILABLE: numba (and llvmlite) import. Whether a numba pass *runs* for some tensors is one rule,
  metrics.backend.numba_path; this says only whether the kernels can be defined at all.
* as_int64(x) / as_float64(i), as_int32(x) / as_float32(i): a float's bits as the integer of the same
  width, and back (no-ops for the CPU; LLVM vectorises them, where numpy views in a loop would not be).
* align_stack(): called first in every per-element kernel (see its docstring).

They are intrinsics, inlined into each caller when it compiles: numba's cache of a kernel notices
changes to the kernel's own file only, so a change here must be followed by clearing the caches
(`make setup` warms them again).
"""
from __future__ import annotations

try:
    import numba
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic
except ImportError:  # numba is optional; every pass has its torch definition
    numba = None

__all__ = ["AVAILABLE", "align_stack", "as_float32", "as_float64", "as_int32", "as_int64"]

AVAILABLE = numba is not None

if AVAILABLE:
    def _bitcast(name: str, source, target, target_ir):
        """A numba intrinsic reading a value's bits as another type of the same width (a no-op for the CPU)."""
        def typer(typingctx, x):
            def codegen(context, builder, signature, args):
                return builder.bitcast(args[0], target_ir)
            return target(source), codegen
        typer.__name__ = typer.__qualname__ = name
        return intrinsic(typer)

    as_int64 = _bitcast("as_int64", types.float64, types.int64, ir.IntType(64))  # a float64's bits
    as_float64 = _bitcast("as_float64", types.int64, types.float64, ir.DoubleType())  # the float64 of these bits
    as_int32 = _bitcast("as_int32", types.float32, types.int32, ir.IntType(32))  # a float32's bits
    as_float32 = _bitcast("as_float32", types.int32, types.float32, ir.FloatType())  # the float32 of these bits

    @intrinsic
    def align_stack(typingctx):
        """Called first in every per-element kernel: its prologue aligns the stack to 64 bytes. Where a loop
        keeps more values than the CPU has vector registers (the comparison's with AVX-512, most kernels with
        AVX2's 16), LLVM spills them with unaligned moves and does not realign the stack for them; the ABI
        aligns it to 16 bytes only, so where ASLR and the environment's size had put the stack decided
        whether every spill and reload split a cache line: the same kernel on the same data ran a fifth to
        a third slower in three processes of four (tests/test_numba_vectorised.py checks the prologue).
        When LLVM inlines the kernel, the caller takes the alignment on. nounwind is true of every njit
        function (errors are return codes) and is there because llvmlite prints a function's attributes
        only when it has a named one."""
        def codegen(context, builder, signature, args):
            builder.function.attributes.alignstack = 64
            builder.function.attributes.add("nounwind")
            return context.get_dummy_value()
        return types.none(), codegen
