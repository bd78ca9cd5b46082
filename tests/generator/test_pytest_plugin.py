"""e2egen as a regular pytest plugin (issue 44): installed as pytest11 `e2egen`, its options prefixed --e2e- in
their own group, so a project's own `--device` coexists with it; in a session without a generated suite it adds
its options and markers and does nothing else."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import TINY_GEMM, catalogue_text

OWN_CONFTEST = '''
def pytest_addoption(parser):
    parser.addoption("--device", default="own", help="the project's own option")
'''

OWN_TEST = '''
import os


def test_own(request):
    assert request.config.getoption("--device") == "mine"
    assert request.config.pluginmanager.has_plugin("e2egen")  # installed: loaded in every session
    if not os.environ.get("EXPECT_IDLE"):
        return
    # idle without a generated suite: nothing of a suite's session set-up happened
    assert not request.config.pluginmanager.has_plugin("e2egen-leftovers")
    assert not request.config.pluginmanager.has_plugin("e2egen-summary")
    assert os.environ.get("OMP_NUM_THREADS", "") == os.environ.get("EXPECTED_OMP", "")
'''


def _pytest(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "E2EGEN_PROFILES": str(root / "profiles"), **env}
    environment.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=root,
                          capture_output=True, text=True, env=environment, timeout=600)


def test_the_options_are_prefixed_and_grouped():
    result = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, check=True)
    section = result.stdout.split("\ne2egen:\n", 1)[1].split("\n\n", 1)[0]
    options = [line.split()[0].split("=")[0] for line in section.splitlines() if line.lstrip().startswith("--")]
    assert options and all(o.startswith("--e2e-") for o in options), options
    assert "--device" not in result.stdout.replace("--e2e-device", "")


def test_a_projects_own_device_option_coexists_with_a_generated_suite(tmp_path):
    """`pytest tests build/e2e` used to crash: ValueError: option names {'--device'} already added."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # the project's root, as a project has
    (tmp_path / "conftest.py").write_text(OWN_CONFTEST, encoding="utf-8")
    (tmp_path / "test_own.py").write_text(OWN_TEST, encoding="utf-8")
    (tmp_path / "c.toml").write_text(catalogue_text(TINY_GEMM), encoding="utf-8")
    generated = subprocess.run([sys.executable, "-m", "e2egen", "gen", "c.toml", "--out", "build/e2e"], cwd=tmp_path,
                               capture_output=True, text=True)
    assert generated.returncode == 0, generated.stderr
    result = _pytest(tmp_path, "test_own.py", "build/e2e", "--device", "mine", "--e2e-device", "cpu", "-k",
                     "own or nn")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "3 passed" in out and "e2egen summary" in out  # the own test and the two nn cases


def test_a_session_without_a_generated_suite_is_left_alone(tmp_path):
    (tmp_path / "conftest.py").write_text(OWN_CONFTEST, encoding="utf-8")
    (tmp_path / "test_own.py").write_text(OWN_TEST, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "test_own.py",
                             "--device", "mine"], cwd=tmp_path, capture_output=True, text=True,
                            env={**env, "EXPECTED_OMP": "", "EXPECT_IDLE": "1"}, timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out  # under xdist too: no OMP_NUM_THREADS set for another project's workers
    assert "e2egen summary" not in result.stdout


def test_without_plugin_autoload_the_suite_loads_the_plugin_itself(tmp_path):
    (tmp_path / "c.toml").write_text(catalogue_text(TINY_GEMM), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "e2egen", "gen", "c.toml", "--out", "build/e2e"], cwd=tmp_path, check=True,
                   capture_output=True)
    result = _pytest(tmp_path, "build/e2e", "-q", "--e2e-device", "cpu", "-k", "nn",
                     PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout

