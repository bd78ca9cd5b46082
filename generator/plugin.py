"""pytest plugin for generated suites: runs each case and turns its Outcome into pytest's verdict.

Options: --device (cpu|cuda; default CUDA when present), --global-seed (fresh
inputs: re-derives every case's seed, as the nightly does). The Outcome is
stashed on the test item so other plugins (loaded with -p, such as the
nightly sweep's recorder) can read it.
"""
from __future__ import annotations

import os
import sys

import pytest

# Case execution (and torch) is imported when a case runs, not at collection.
OUTCOME = pytest.StashKey["e2egen.generator.execute.Outcome"]()


def pytest_addoption(parser):
    group = parser.getgroup("e2egen")
    group.addoption("--device", default=None, choices=("cpu", "cuda"), help="device for the kernels (default: CUDA when present, else CPU; env E2E_DEVICE)")
    group.addoption("--global-seed", type=int, default=None, help="derive every case's seed from this global seed instead of the generated one")


def pytest_configure(config):
    share_cpu_threads()


def share_cpu_threads() -> None:
    """Under pytest-xdist, give each worker its share of the CPU's cores for torch's intra-op threads.

    Every worker would otherwise start torch with one thread per core, and N
    workers on N cores oversubscribe the CPU (`make pr` at -n 2 on 2 cores was
    slower than -n 0). An OMP_NUM_THREADS the user set wins.
    """
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers or "OMP_NUM_THREADS" in os.environ:
        return
    threads = max(1, (os.cpu_count() or 1) // max(1, int(workers)))
    os.environ["OMP_NUM_THREADS"] = str(threads)  # read by torch when it is imported, at the first case
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def generated_cases(module: dict) -> list:
    """pytest.params of a generated module: each case (decoded by the codec) with its id and markers."""
    from e2egen.generator.codec import decode

    return [pytest.param(case, id=case.id, marks=[getattr(pytest.mark, m) for m in case.markers])
            for case in decode(module, module["IMPL"])]


@pytest.fixture
def e2e_case(request):
    """Call with a generated Case: runs it and passes, fails or skips the test."""

    def run(case):
        from e2egen.generator.cases import derive_seed
        from e2egen.generator.execute import describe, execute

        global_seed = request.config.getoption("--global-seed")
        if global_seed is not None:
            case = case.with_seed(derive_seed(global_seed, case.id))
        outcome = execute(case, device=request.config.getoption("--device"), catalogue=_catalogue(request))
        request.node.stash[OUTCOME] = outcome
        if outcome.status == "skipped":
            pytest.skip(outcome.reason)
        if outcome.status == "failed":
            pytest.fail(describe(outcome), pytrace=False)
        return outcome

    return run


def _catalogue(request) -> str | None:
    return getattr(request.module, "CATALOGUE", None)
