"""The row-sum probe of softmax, log_softmax and logsumexp (runner/ops/normalization/row_sum_probe.py): a running
row sum in f16/bf16 is measured and breaks the default require.acc; torch's kernels and correct kernels of other
orders keep f32; a row sum that leaves an element out is a finding no rounding explains, in every dtype."""
from __future__ import annotations

import pytest
import torch

from e2egen.api import judge
from e2egen.runner import make_problem
from e2egen.runner.arithmetic.lookup import probe_problem
from e2egen.runner.kernels import case_kernel
from e2egen.runner.ops.normalization import kernels
from e2egen.runner.ops.normalization.row_sum_probe import LONG_ROW, probe_row_sum, row_problem

pytestmark = pytest.mark.cpu_paths  # torch's kernels run ATen's AVX2 or AVX-512 code
IMPL = "e2egen.runner.ops.normalization.kernels:"
CORRECT = {"softmax": ("torch", "softmax_sequential", "softmax_online", "softmax_blocked_exp2"),
           "log_softmax": ("torch", "log_softmax_online", "log_softmax_stored_like_torch_cpu"),
           "logsumexp": ("torch", "logsumexp_sequential")}
RUNNING_SUM_IN_INPUT_FORMAT = {"log_softmax": "log_softmax_sum_in_input_format",
                               "logsumexp": "logsumexp_sum_in_input_format"}
DROPS_LAST = {"softmax": "softmax_drops_last", "logsumexp": "logsumexp_drops_last"}


def _probe(op: str, dtype: str, name: str, layout: str = "contiguous"):
    problem = probe_problem(make_problem(op, "fwd", dtype, layout, {"shape": [4, 1024]}, (-1.0, 1.0), 1))
    kernel = case_kernel(problem, None if name == "torch" else IMPL + name)
    return problem.numerics.probe_arithmetic(problem, kernel, torch.device("cpu"), name)


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("op", list(CORRECT))
def test_torch_and_correct_orders_keep_an_f32_row_sum(op, dtype, layout):
    for name in CORRECT[op]:
        found = _probe(op, dtype, name, layout)
        assert found.acc_bits == 24 and not found.unexplained, (name, found.notes, found.unexplained)
        assert not [note for note in found.notes if note.startswith("row sum")], (name, found.notes)


@pytest.mark.parametrize("dtype, bits", [("f16", 11), ("bf16", 8)])
@pytest.mark.parametrize("op", list(RUNNING_SUM_IN_INPUT_FORMAT))
def test_a_running_sum_in_the_input_format_is_measured_and_breaks_the_accumulator_requirement(op, dtype, bits):
    found = _probe(op, dtype, RUNNING_SUM_IN_INPUT_FORMAT[op])
    assert found.acc_bits == bits
    assert any(note.startswith(f"row sum over {LONG_ROW} elements: 2 + 8190·2^-{bits + 9} came back 2")
               for note in found.notes), found.notes
    outcome = judge(IMPL + RUNNING_SUM_IN_INPUT_FORMAT[op], op, {"shape": [4, 1024]}, dtype, data_range=(-1.0, 1.0),
                    seed=1)
    assert not outcome.passed and "require.acc" in outcome.reason, outcome.reason


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("op", list(DROPS_LAST))
def test_a_row_sum_leaving_an_element_out_is_a_finding_no_rounding_explains(op, dtype):
    """The last element of each row left out of l: on drawn f32 rows its effect is within the bound (one weight of
    16,384); the probe's row gives that element weight 1, and l comes back 1 + ... instead of 2 + ..."""
    found = _probe(op, dtype, DROPS_LAST[op])
    assert len(found.unexplained) == 1 and "an element left out" in found.unexplained[0], found.unexplained
    assert not judge(IMPL + DROPS_LAST[op], op, {"shape": [2, 16384]}, dtype, data_range=(-1.0, 1.0), seed=1).passed


def test_a_kernel_declining_long_rows_is_not_measured_and_says_so():
    problem = probe_problem(make_problem("logsumexp", "fwd", "f16", "contiguous", {"shape": [4, 1024]}, (-1.0, 1.0), 1))

    def short_rows_only(x, *, dim):
        if x.shape[dim] > 1024:
            raise NotImplementedError("rows over 1024 are not supported")
        return kernels.logsumexp_sum_in_input_format(x, dim=dim)

    reading = probe_row_sum(problem, short_rows_only, torch.device("cpu"), "short rows only")
    assert reading.bits is None and not reading.unexplained
    assert reading.notes[0].startswith(f"row sum over {LONG_ROW} elements not probed:"), reading.notes


@pytest.mark.parametrize("shape, axis, layout", [([4, 1024], 1, "strided"), ([2, 8, 3, 3], 1, "channels_last"),
                                                 ([5, 7, 9], 0, "contiguous")])
def test_the_probe_row_keeps_the_case_s_rank_axis_and_layout(shape, axis, layout):
    problem = make_problem("softmax", "fwd", "bf16", layout, {"shape": shape, "axis": axis, "offset": 10.0},
                           (-1.0, 1.0), 1)
    row = row_problem(problem)
    assert row.params.shape == tuple(LONG_ROW if dim == axis else 1 for dim in range(len(shape)))
    assert (row.layout, row.params.axis, row.params.offset) == (layout, axis, 0.0)
