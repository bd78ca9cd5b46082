"""A pytest plugin: the metrics tests with compare()'s torch backend computing its chunks with
metrics/fused_compiled.py (torch.compile) instead of fused_torch's eager kernels.

    PYTHONPATH=tests .venv/bin/python -m pytest -p compiled_torch_path tests/test_metrics_torch_path.py \\
        tests/test_metrics_backend.py tests/test_metrics_compare.py tests/test_metrics_oracle.py

Not loaded by default: compare() does not use the compiled path (README, Performance). The summary says how
many comparisons went through it and whether any fell back to the eager path.
"""
from __future__ import annotations

_routed = None
_calls = 0


def pytest_configure(config):
    global _routed
    from e2egen.metrics import fused_compiled

    compiled_values = fused_compiled._compiled_values

    def counted(*args):
        global _calls
        _calls += 1
        return compiled_values(*args)

    fused_compiled._compiled_values = counted
    _routed = fused_compiled.as_torch_backend()
    _routed.__enter__()


def pytest_unconfigure(config):
    if _routed is not None:
        _routed.__exit__(None, None, None)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from e2egen.metrics import fused_compiled

    failed = fused_compiled._failed
    terminalreporter.write_line(f"compiled metrics path: {_calls} compiled passes; "
                                + (f"fell back to eager: {failed}" if failed else "no fallback to eager"))
