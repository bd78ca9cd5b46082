"""e2egen: declarative end-to-end numerics tests for compute kernels.

The `e2egen` command (e2egen.cli) sits on top of nightly, generator, runner
and metrics; e2egen.diagnose holds `explain` and `study`. e2egen.errors holds
UserError, the base of every layer's user errors (a leaf: standard library only).
"""
