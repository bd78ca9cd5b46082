"""Generating a suite imports no torch: runner and metrics load their public names on first use."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import REPO, TINY_CONV, TINY_GEMM, catalogue_text


def run_python(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=REPO, capture_output=True, text=True)


def test_validate_gen_and_list_do_not_import_torch(write_catalogue, tmp_path):
    path = write_catalogue(catalogue_text(TINY_CONV, TINY_GEMM))
    result = run_python(f"""
        import sys
        import e2egen.generator.loader, e2egen.generator.cases, e2egen.generator.render, e2egen.cli
        from e2egen.commands import *
        from e2egen.cli import main
        assert main(["validate", {str(path)!r}]) == 0
        assert main(["gen", {str(path)!r}, "--out", {str(tmp_path / "out")!r}]) == 0
        assert main(["list", "--catalogue", {str(path)!r}]) == 0
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "numba"))
        assert not loaded, loaded[:5]
    """)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "test_tiny.py").exists()


def test_lazy_public_names_are_the_definitions():
    result = run_python("""
        import sys
        from e2egen import metrics, runner
        from e2egen.metrics import compare
        from e2egen.runner import run
        # metrics.compare and runner.run are submodules too: the package attribute is the function
        assert compare is sys.modules["e2egen.metrics.compare"].compare and metrics.compare is compare
        assert run is sys.modules["e2egen.runner.run"].run and runner.run is run
        assert {"compare", "TOLERANCE_KEYS"} <= set(dir(metrics)) and {"run", "OPS"} <= set(dir(runner))
        assert runner.device.device_name and metrics.fused_numba  # submodules, as before
        for package in (runner, metrics):
            assert all(hasattr(package, name) for name in package.__all__)
        try:
            runner.no_such_name
        except AttributeError as err:
            assert "no_such_name" in str(err)
        else:
            raise AssertionError("e2egen.runner.no_such_name")
    """)
    assert result.returncode == 0, result.stderr
