"""pytest plugin for generated suites: runs each case and turns its Outcome into pytest's verdict.

Options: --device (cpu|cuda; default CUDA when present), --global-seed (fresh
inputs: re-derives every case's seed, as the nightly does). The Outcome is
stashed on the test item so other plugins (the nightly recorder) can read it.
"""
from __future__ import annotations

from __future__ import annotations

import pytest

# Case execution (and torch) is imported when a case runs, not at collection.
OUTCOME = pytest.StashKey["e2egen.generator.execute.Outcome"]()


def pytest_addoption(parser):
    group = parser.getgroup("e2egen")
    group.addoption("--device", default=None, choices=("cpu", "cuda"), help="device for the kernels (default: CUDA when present, else CPU; env E2E_DEVICE)")
    group.addoption("--global-seed", type=int, default=None, help="derive every case's seed from this global seed instead of the generated one")


def generated_cases(module: dict, rows: list[tuple]) -> list:
    """pytest.params of a generated module: each a case dict (as Case.to_dict) with the case's markers."""
    params = []
    for case_id, seed, settings_name, pr_reason, flops, bytes_needed, reduction_size in rows:
        suite, op, config, direction, dtype, layout, range_name = case_id.split("/")
        settings, config_data = module["SETTINGS"][settings_name], module["CONFIGS"][config]
        lo, hi = module["RANGES"][range_name]
        markers = (["pr"] if pr_reason else []) + [op, dtype, direction, layout] + config_data["markers"]
        case = {
            "id": case_id, "suite": suite, "config": config, "op": op, "direction": direction, "dtype": dtype,
            "layout": layout, "range": range_name, "lo": lo, "hi": hi, "params": config_data["params"], "seed": seed,
            "tolerances": settings["tolerances"], "reference": settings["reference"], "bound": settings["bound"],
            "impl": module["IMPL"], "markers": markers, "pr": bool(pr_reason), "pr_reason": pr_reason,
            "flops": flops, "bytes_needed": bytes_needed, "reduction_size": reduction_size,
            "location": config_data["location"],
        }
        params.append(pytest.param(case, id=case_id, marks=[getattr(pytest.mark, m) for m in markers]))
    return params


@pytest.fixture
def e2e_case(request):
    """Call with a generated case dict: runs it and passes, fails or skips the test."""

    def run(case_data: dict):
        from e2egen.generator.cases import Case, derive_seed
        from e2egen.generator.execute import describe, execute

        case = Case.from_dict(case_data)
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
