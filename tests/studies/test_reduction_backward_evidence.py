"""The reductions' backward evidence (studies/reduction_backward_evidence.py): its claims hold on one seed."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.usefixtures("fresh_profiles"), pytest.mark.cpu_paths]  # tests/conftest.py


def test_no_correct_kernel_fails_and_every_bug_beyond_an_ulp_is_caught():
    from studies import reduction_backward_evidence as evidence
    from e2egen.runner.ops.reductions import kernels

    tallies = evidence.evaluate(seeds=1)
    correct = {(op, name) for op in evidence.OPS for name in ("torch", *kernels.CORRECT_BACKWARD[op])}
    for key, tally in tallies.items():
        assert tally.runs > 0
        if key in correct:
            assert tally.failed == 0, f"false failure: {key}"
        else:
            assert tally.visible > 0 and tally.caught_visible == tally.visible, f"missed: {key} {tally.misses}"
    assert "0 false failures" in evidence.render(tallies, 1, 0.0)
