"""Evidence with a second library nobody here wrote: ONNX Runtime's CPU kernels (studies/onnxruntime_kernels.py: the
standard ONNX operators a model exports, one node each) judged by e2egen's default verdict beside torch's own, on
the families ONNX has an operator for, with assert_close on the same outputs (studies/kernel_matrix.py), on the
geometries and ranges of the JAX study (studies/third_party_evidence.py). Writes docs/evidence/onnxruntime.md.

    pip install onnxruntime onnx        # not dependencies of e2egen
    .venv/bin/python -m e2egen.studies.onnxruntime_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

from pathlib import Path

from e2egen.studies.onnxruntime_kernels import KERNELS
from e2egen.studies.study_main import study_main
from e2egen.studies.third_party_evidence import library_matrix

MATRIX = library_matrix(
    "A second library nobody here wrote (ONNX Runtime on the CPU): evidence",
    ".venv/bin/python -m e2egen.studies.onnxruntime_evidence", "e2egen.studies.onnxruntime_kernels:", KERNELS,
    # ONNX Runtime's f32 Sigmoid is MLAS's fast logistic: up to 43 ulps off (docs/evidence/onnxruntime.md)
    findings={("sigmoid", "ort_sigmoid"): lambda case, data, dtype: dtype == "f32"},
    closing=("ONNX Runtime's kernels run as a model exported with the standard operators runs them: one node each "
             "(x·x for square; ONNX has no log1p, rsqrt, silu or var operator), at the default graph optimisations, "
             "in the case's dtype. Every bf16 run is declined (its CPU provider has a bf16 kernel for none of these "
             "operators but LayerNormalization, left out here), as is f16 CumSum, which it has no kernel for: a "
             "library's kernel declines what it cannot do. Two findings. "
             "Its f16 Attention rounds the scores Q·Kᵀ·scale to f16 before the softmax: the scores' format probe "
             "measures it and the default require.compute fails it, named (the bound alone failed it at bound_ratio "
             "4–6 on [-4, 4] and passed it on [-1, 1]). Its f32 Sigmoid is MLAS's fast logistic, a rational "
             "approximation: over 100,001 points of [-4, 4] it is up to 43 ulps from the exact result (mean 1.9, "
             "20 % of them beyond 2 ulps; torch's: 1.9 at most), outside the interval e2egen accepts for sigmoid "
             "(bound_ratio 2.6 on [-4, 4]); those runs are counted apart as that finding. A catalogue that accepts "
             "it raises tolerances.bound_ratio for its sigmoid suite."),
)

if __name__ == "__main__":
    raise SystemExit(study_main(MATRIX, Path("docs/evidence/onnxruntime.md")))
