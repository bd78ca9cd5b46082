"""The edge-data study (studies/edge_data_evidence.py): its claims hold on one seed."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.usefixtures("fresh_profiles"), pytest.mark.cpu_paths]  # tests/conftest.py


def test_edges_catch_every_planted_bug_and_fail_no_correct_kernel():
    from studies import edge_data_evidence as study

    tallies = study.evaluate(seeds=1)
    for (kernel, data), tally in tallies.items():
        assert tally.runs > 0
        if kernel.correct:
            assert tally.failed == 0, f"false failure: {kernel.op} {kernel.name} on {data} data"
        elif data == "edges":
            assert tally.failed == tally.runs, f"missed on edges: {kernel.op} {kernel.name}"
    # what the catalogue's data never reaches: an i16 accumulator, FNUZ's ±240 read as OCP's NaN
    for name in ("i8_i16_accumulator", "fp8_fnuz_read_as_fn"):
        (kernel,) = [k for k in study.KERNELS if k.name == name]
        assert tallies[(kernel, "catalogue")].failed == 0
    assert "0 false failures" in study.render(tallies, 1, 0.0)
