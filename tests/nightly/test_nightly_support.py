"""Helpers shared by the nightly tests (no tests here): tiny catalogues with plug-in kernels, the CLI, synthetic records."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

from conftest import REPO, TINY_CONV, TINY_GEMM, catalogue_text, run_cli
from e2egen.metrics.names import HISTOGRAM_BUCKETS
from e2egen.generator.case_id import CaseIdParts
from e2egen.nightly.records import CaseRecord

KERNELS = '''
"""Plug-in kernels for the nightly tests."""
import os
import time

import torch


def gemm_abort_transposed(a, b):
    """Kills its process when A is stored transposed: a crash the sweep must survive."""
    if not a.is_contiguous():
        os.abort()
    return torch.matmul(a, b)


def gemm_slow(a, b):
    """A correct gemm that takes its time, so that a test can kill a run halfway."""
    time.sleep(0.3)
    return torch.matmul(a, b)
'''

# 8 slow gemm cases: 4 layouts x 2 ranges.
SLOW_GEMM = TINY_GEMM.replace('op = "gemm"', 'op = "gemm"\nimpl = "nightly_test_kernels:gemm_slow"').replace(
    'layouts = ["nn", "tt"]', 'layouts = ["nn", "nt", "tn", "tt"]')
CRASHING_GEMM = TINY_GEMM.replace('op = "gemm"', 'op = "gemm"\nimpl = "nightly_test_kernels:gemm_abort_transposed"')


class Project:
    """A catalogue in a temporary directory, and `e2egen` run there as a user would."""

    def __init__(self, root: Path, *parts: str):
        self.root = root
        (root / "nightly_test_kernels.py").write_text(textwrap.dedent(KERNELS), encoding="utf-8")
        (root / "configs.toml").write_text(catalogue_text(*parts), encoding="utf-8")
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(root)])}

    def e2egen(self, *args: str):
        return run_cli(*args, cwd=self.root, env=self.env)

    def nightly(self, *args: str, store: str = "results/e2e.sqlite"):
        return self.e2egen("nightly", "--out", "build/e2e", "--store", store, "--no-progress", *args)

    def command(self, *args: str, store: str = "results/e2e.sqlite") -> list[str]:
        import sys

        return [sys.executable, "-m", "e2egen", "nightly", "--out", "build/e2e", "--store", store, "--no-progress", *args]


def tiny_project(root: Path, *extra: str) -> Project:
    return Project(root, TINY_CONV, *extra)


def synthetic_record(run_id: str, case_id: str, *, dtype: str = "f16", range_: str = "r0", direction: str = "fwd",
                     layout: str = "nchw", status: str = "passed", metrics: dict | None = None,
                     tolerances: dict | None = None, histogram: dict | None = None, reason: str = "",
                     reference: dict | None = None, duration: float = 0.1, device: str = "cpu") -> CaseRecord:
    suite, op = case_id.split("/")[:2]
    return CaseRecord(
        run_id=run_id, case_id=case_id, status=status, phase="call", reason=reason if status == "failed" else "",
        skip_reason=reason if status == "skipped" else "",
        parts=CaseIdParts(suite=suite, op=op, config="c", direction=direction, dtype=dtype, layout=layout, range=range_),
        params={"m": 8}, seed=1, global_seed=1, device=device,
        versions={"torch": "2.x", "cuda": None, "cudnn": None}, tolerances=tolerances or {"rms": 1e-3},
        reference=reference or {"device": "cpu", "ftz": False, "accumulate": 0, "round_output": False},
        metrics=metrics or {}, histogram=histogram, duration=duration, repro=f"e2egen run {case_id} --seed 1",
        timings={"inputs": 0.01, "kernel": 0.02, "reference": 0.03, "compare": 0.01},
    )


def histogram(**counts: int) -> dict:
    """A histogram dict with every bucket; keyword names: b0 .. b9 for the buckets in order."""
    return {bucket: counts.get(f"b{i}", 0) for i, bucket in enumerate(HISTOGRAM_BUCKETS)}
