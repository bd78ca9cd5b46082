"""The ONNX Runtime study (studies/onnxruntime_evidence.py) on one seed, where onnxruntime and onnx are installed
(they are not dependencies of e2egen): ONNX Runtime's kernels pass beside torch's, or fail naming a default
requirement they do not meet (its f16 Attention rounds the scores to f16), and declined runs are not judged."""
from __future__ import annotations

import pytest
import torch

from tests.studies.library_checks import judge_first_cases

pytestmark = [pytest.mark.usefixtures("fresh_profiles"), pytest.mark.cpu_paths]  # tests/conftest.py


def test_every_onnxruntime_failure_names_its_cause_and_bf16_is_declined():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from studies import onnxruntime_evidence as study

    tallies = judge_first_cases(study.MATRIX, ("exp", "softmax", "layer_norm", "gemm", "attention"))
    attention = tallies[("attention", "ort_attention")]
    assert attention.failures and all("computes its math in f16" in failure for failure in attention.failures)
    assert all(" bf16 " in run for tally in tallies.values() for run in tally.declined)
    assert tallies[("exp", "ort_exp")].declined


def test_an_onnxruntime_kernel_runs_the_operator_on_the_case_s_dtype():
    pytest.importorskip("onnxruntime")
    from studies.onnxruntime_kernels import ort_exp, ort_softmax

    x = torch.linspace(-3, 3, 64, dtype=torch.float16)[::2]  # strided: the values travel
    assert ort_exp(x).dtype == torch.float16
    assert torch.allclose(ort_softmax(x.reshape(4, 8), dim=1).float().sum(dim=1), torch.ones(4), atol=1e-2)
