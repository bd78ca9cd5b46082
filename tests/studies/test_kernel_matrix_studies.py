"""The kernel-matrix studies (studies/kernel_matrix.py) of the reductions' backward, of group_norm and batch_norm
(forward and backward), of fp8 outputs, of element-wise backward, of logsumexp's backward and of the row
normalisations' forward: their claims hold on one seed."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.usefixtures("fresh_profiles"), pytest.mark.cpu_paths]  # tests/conftest.py


@pytest.mark.parametrize("study", ["reduction_backward_evidence", "channel_norm_evidence", "fp8_output_evidence",
                                   "pointwise_backward_evidence", "channel_norm_backward_evidence",
                                   "logsumexp_backward_evidence"])
def test_no_correct_kernel_fails_and_every_bug_beyond_an_ulp_is_caught(study):
    import importlib

    from studies import kernel_matrix

    matrix = importlib.import_module(f"studies.{study}").MATRIX
    tallies = kernel_matrix.evaluate(matrix, seeds=1)
    for (op, name), tally in tallies.items():
        assert tally.runs > 0
        if kernel_matrix.is_correct(matrix, op, name):
            assert tally.failed == 0, f"false failure: {op} {name}"
        else:  # beyond an ulp, but within what a correct kernel may do there: the cases the study names
            allowed = matrix.within_correct_error.get(name)
            missed = [miss for miss in tally.misses if allowed is None or allowed not in miss]
            assert tally.visible > 0 and not missed, f"missed: {op} {name} {missed}"
    assert "0 false failures" in kernel_matrix.render(matrix, tallies, 1, 0.0)


def test_the_row_norm_study_has_no_false_failure_and_catches_a_dropped_element_of_layer_norm_s_rows():
    """The forward row normalisations' study (studies/row_norm_evidence.py) on one seed: no correct kernel fails;
    the last element left out of layer_norm's sums fails every run, the long rows' included (the mean's walk), as
    do the f16 reductions, and softmax's and logsumexp's dropped element and running sums in the input format (the
    row-sum probe); its page names what it misses."""
    from studies import kernel_matrix, row_norm_evidence

    matrix = row_norm_evidence.MATRIX
    tallies = kernel_matrix.evaluate(matrix, seeds=1)
    for (op, name), tally in tallies.items():
        assert tally.runs > 0, (op, name)
        if kernel_matrix.is_correct(matrix, op, name):
            assert tally.failed == 0, f"false failure: {op} {name} {tally.failures}"
    for op, name in (("layer_norm", "layer_norm_drops_last"), ("layer_norm", "layer_norm_f16_reduction"),
                     ("softmax", "softmax_drops_last"), ("logsumexp", "logsumexp_drops_last"),
                     ("logsumexp", "logsumexp_sum_in_input_format"), ("log_softmax", "log_softmax_sum_in_input_format")):
        tally = tallies[(op, name)]
        assert tally.failed == tally.runs, (name, tally.misses)
    assert not [miss for miss in tallies[("layer_norm", "layer_norm_unbiased")].misses if "mean 1000" not in miss]
    assert "Bugs beyond an ulp that passed" in kernel_matrix.render(matrix, tallies, 1, 0.0)
