"""The OpenVINO study (studies/openvino_evidence.py) on one seed, where openvino is installed (it is not a dependency
of e2egen): OpenVINO's kernels pass beside torch's, or fail naming a default requirement they do not meet (its bf16
layer_norm and rms_norm round their steps to bf16, its bf16 cumsum runs in bf16), and bf16 travels bit for bit."""
from __future__ import annotations

import pytest
import torch

from tests.studies.library_checks import judge_first_cases

pytestmark = [pytest.mark.usefixtures("fresh_profiles"), pytest.mark.cpu_paths]  # tests/conftest.py


def test_tensors_reach_openvino_and_come_back_bit_for_bit():
    pytest.importorskip("openvino")
    from studies.openvino_kernels import ov_relu

    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        values = torch.linspace(0.25, 3, 257).to(dtype)[::2]  # relu is the identity on them
        back = ov_relu(values)
        assert back.dtype == dtype and torch.equal(back.float(), values.float())


def test_every_openvino_failure_names_its_cause():
    pytest.importorskip("openvino")
    from studies import openvino_evidence as study

    tallies = judge_first_cases(study.MATRIX, ("exp", "layer_norm", "rms_norm", "cumsum", "gemm"))
    assert any("computes its math in bf16" in failure for failure in tallies[("layer_norm", "ov_layer_norm")].failures)
