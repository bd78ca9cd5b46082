"""Evidence with a third library nobody here wrote: OpenVINO's CPU kernels (studies/openvino_kernels.py: the opset
operations its frontends produce) judged by e2egen's default verdict beside torch's own, on the families OpenVINO
has an operation for, with assert_close on the same outputs (studies/kernel_matrix.py), on the geometries and
ranges of the JAX study (studies/third_party_evidence.py). Writes docs/evidence/openvino.md.

    pip install openvino        # not a dependency of e2egen
    .venv/bin/python -m e2egen.studies.openvino_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

from pathlib import Path

from e2egen.studies.openvino_kernels import KERNELS
from e2egen.studies.study_main import study_main
from e2egen.studies.third_party_evidence import library_matrix

MATRIX = library_matrix(
    "A third library nobody here wrote (OpenVINO on the CPU): evidence",
    ".venv/bin/python -m e2egen.studies.openvino_evidence", "e2egen.studies.openvino_kernels:", KERNELS,
    closing=("OpenVINO's kernels run as its frontends write the op: one opset operation each, MVN and the affine step "
             "for layer_norm, x·(mean(x²) + eps)^-½·w for rms_norm (OpenVINO has no log1p, rsqrt, logsumexp or var "
             "operation), compiled for the CPU with the inference precision hint f32, in the case's dtype. Grouped "
             "heads in attention are declined (ScaledDotProductAttention takes as many kv heads as q heads). The "
             "hint matters: OpenVINO's default on a CPU with AVX-512 bf16 is bf16, which runs an f32 model's matmul "
             "on bf16-rounded inputs (64×512 by 512×96 in [-1, 1]: largest error 0.063, against 3.3e-5 with the "
             "hint f32, on the AMD Zen 4 this page was made on); an AVX2 CPU defaults to f32. Where its bf16 "
             "kernels fail, their reasons name the cause: layer_norm and rms_norm round their steps to bf16 (the "
             "norms' compute-format probe), cumsum keeps its running sum in bf16 (the scan probe), attention rounds "
             "its scores to bf16 (the scores' format probe)."),
)

if __name__ == "__main__":
    raise SystemExit(study_main(MATRIX, Path("docs/evidence/openvino.md")))
