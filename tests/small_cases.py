"""The PR subset's smallest case of every op, and of every direction of an f16 convolution (their bounds take
the per-tap and per-sample partial sums): a cheap run through every op's inputs, reference, bound and
comparison, for checks that watch what the tool's own code does (tests/test_numba_aliasing.py)."""
from __future__ import annotations

import functools
from pathlib import Path

CATALOGUE = Path(__file__).resolve().parents[1] / "configs.toml"


@functools.cache
def smallest_cases() -> tuple:
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import load_catalogue

    smallest: dict[tuple, object] = {}
    for case in expand(load_catalogue(str(CATALOGUE))):
        if not case.pr:
            continue
        key = (case.op, case.direction) if case.op.startswith("conv") and case.dtype == "f16" else (case.op,)
        if key not in smallest or (case.bytes_needed, case.id) < (smallest[key].bytes_needed, smallest[key].id):
            smallest[key] = case
    return tuple(smallest[key] for key in sorted(smallest))
