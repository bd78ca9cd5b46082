"""pytest plugin for sweeps: which cases run, where their reference runs, which GPU a worker uses.

Loaded with the recorder (nightly.recorder lists it in pytest_plugins), so a
run with `-p e2egen.nightly.recorder` has these options; all are inactive
unless given.

    --e2e-select-cases FILE      run only the case ids listed in FILE (a shard)
    --e2e-deselect-cases FILE    deselect the listed case ids (those a resumed run already recorded)
    --e2e-reference-device cpu|device
                             run every case's float64 reference there, overriding the catalogue
                             (the nightly puts it on the GPU: orders of magnitude faster for big shapes)

GPU pinning: when $E2E_WORKER_GPUS lists GPUs (e.g. "0,1,2,3"), xdist worker
gwN sets CUDA_VISIBLE_DEVICES to the (N mod count)-th of them, so each worker
owns one GPU and its kernels never compete with another worker's.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import replace

import pytest

from e2egen.generator.cases import Case
from e2egen.nightly.case_filter import CASE_FILTER, CaseFilter, case_data, read_case_ids

WORKER_GPUS_ENV = "E2E_WORKER_GPUS"


def pytest_addoption(parser):
    group = parser.getgroup("e2egen nightly")
    group.addoption("--e2e-select-cases", metavar="FILE", default=None, help="run only the case ids listed in FILE, one per line")
    group.addoption("--e2e-deselect-cases", metavar="FILE", default=None, help="deselect the case ids listed in FILE, one per line")
    group.addoption("--e2e-reference-device", choices=("cpu", "device"), default=None,
                    help="run every case's float64 reference on the CPU or on the kernel's device, overriding the catalogue")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    pin_worker_gpu()
    selected = config.getoption("--e2e-select-cases")
    deselected = config.getoption("--e2e-deselect-cases")
    config.stash[CASE_FILTER] = CaseFilter(
        selected=read_case_ids(selected) if selected else None,
        deselected=read_case_ids(deselected) if deselected else frozenset(),
    )


def pin_worker_gpu() -> str | None:
    """In xdist worker gwN with $E2E_WORKER_GPUS set: CUDA_VISIBLE_DEVICES = the worker's GPU. Returns it."""
    gpus = [g.strip() for g in os.environ.get(WORKER_GPUS_ENV, "").split(",") if g.strip()]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not gpus or not worker.startswith("gw"):
        return None
    gpu = gpus[int(worker[2:]) % len(gpus)]
    import torch

    # CUDA reads CUDA_VISIBLE_DEVICES once, when it initialises: nothing before
    # this hook may touch the GPU (the runner and metrics initialise CUDA lazily).
    if torch.cuda.is_initialized() and os.environ.get("CUDA_VISIBLE_DEVICES") != gpu:
        warnings.warn(f"{worker}: CUDA was initialised before the worker could be pinned to GPU {gpu}; "
                      "it may share a GPU with another worker")
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    return gpu


def pytest_collection_modifyitems(config, items):
    case_filter = config.stash.get(CASE_FILTER, None)
    if case_filter is None or (case_filter.selected is None and not case_filter.deselected):
        return
    kept, dropped = [], []
    for item in items:
        case = case_data(item)
        (kept if case is None or case_filter.allows(str(case["id"])) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    where = item.config.getoption("--e2e-reference-device")
    funcargs = getattr(item, "funcargs", None)
    case = funcargs.get("case") if funcargs else None
    if where and isinstance(case, Case):
        # The test body reads its case from funcargs; the Outcome (and so the
        # record) carries the reference the case really ran with.
        funcargs["case"] = replace(case, reference=replace(case.reference, device=where))
