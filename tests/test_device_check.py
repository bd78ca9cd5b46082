"""benchmarks/device_check.py: the one command a lent GPU machine runs. Everything here runs without a GPU:
the refusal, the plan (--dry-run), the parsing of the steps' outputs (real lines, copied from runs), and the
step machinery (budgets, timeouts, the table) on small Python commands in place of the real steps."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HANG_LIMIT

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "device_check.py"
NO_CUDA_LINE = re.compile(r"device-check: no CUDA device here \(torch \S+, CUDA build: [^)]+\); nothing to check")


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("device_check_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def script(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=HANG_LIMIT,
                          cwd=REPO, env=env)


def environment(**changes: str | None) -> dict:
    env = {**os.environ}
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


# ---- the command line


def test_the_script_loads_as_a_module_without_running(check):
    assert callable(check.main) and check.STEPS == ("tests", "probes", "pr", "bench")


def test_it_answers_help():
    done = script("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:") and "--dry-run" in done.stdout and "--steps" in done.stdout


def test_without_cuda_it_refuses_in_one_line():
    # an empty CUDA_VISIBLE_DEVICES hides any GPU, so this holds on a GPU machine too
    done = script(env=environment(CUDA_VISIBLE_DEVICES=""))
    assert done.returncode == 2
    assert NO_CUDA_LINE.fullmatch(done.stderr.strip()), done.stderr
    assert done.stdout == ""


def test_the_dry_run_prints_every_step_with_its_command_and_budget(tmp_path):
    done = script("--dry-run", "--out", str(tmp_path / "check"))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for step, budget in [("tests", 100), ("probes", 150), ("pr", 180), ("bench", 45)]:
        assert re.search(rf"^{step} +budget {budget} s, log .*{step}\.log$", text, flags=re.MULTILINE), step
    assert "-m pytest tests/runner/test_runner_device.py" in text
    assert "-m e2egen arithmetic --catalogue configs.toml --device cuda --filter pr=yes" in text
    assert "build/e2e -m pr -n 0 -q --e2e-device cuda --e2e-kernel-time first" in text
    assert "benchmarks/bench_metrics.py --device cuda -n 4194304" in text
    assert f"E2EGEN_PROFILES={tmp_path / 'check' / 'profiles'}" in text  # the probes' cells, read by the pr step
    assert not (tmp_path / "check").exists()  # a plan writes nothing


def test_the_dry_run_keeps_to_the_steps_and_budgets_asked_for():
    done = script("--dry-run", "--steps", "bench,pr", "--pr-budget", "300")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^pr +budget 300 s", done.stdout, flags=re.MULTILINE)
    assert re.search(r"^tests +skipped \(not in --steps\)", done.stdout, flags=re.MULTILINE)
    assert "arithmetic" not in done.stdout


def test_bad_steps_are_a_usage_error():
    done = script("--dry-run", "--steps", "tests,gpu")
    assert done.returncode == 2
    assert "--steps" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("args", [["--steps", ""], ["--steps", "all"], ["--pr-budget", "0"], ["--tests-budget", "x"]])
def test_other_bad_arguments_exit_2(check, args):
    with pytest.raises(SystemExit) as info:
        check.parse_args(args)
    assert info.value.code == 2


def test_the_default_budgets_fit_a_ten_minute_command(check):
    worst_case = sum(check.BUDGETS_S.values()) + len(check.STEPS) * check.GRACE_S
    assert worst_case <= check.TOTAL_BUDGET_S < 9.5 * 60


def test_the_output_goes_under_the_harness_out_when_set(check, monkeypatch, tmp_path):
    monkeypatch.setenv("OUT", str(tmp_path))
    assert check.output_dir(check.parse_args([])) == tmp_path / "device-check"
    assert check.output_dir(check.parse_args(["--out", str(tmp_path / "x")])) == tmp_path / "x"
    monkeypatch.delenv("OUT")
    assert check.output_dir(check.parse_args([])) == REPO / "build" / "device-check"


def test_the_tests_step_takes_the_files_that_ask_for_cuda(check, tmp_path):
    (tmp_path / "test_device.py").write_text(f"import torch\nON_GPU = {check.CUDA_TESTS_NEEDLE}\n")
    (tmp_path / "test_plain.py").write_text("def test_x():\n    pass\n")
    assert [p.name for p in check.cuda_dependent_test_files(tmp_path)] == ["test_device.py"]
    found = check.cuda_dependent_test_files()
    assert REPO / "tests" / "runner" / "test_runner_device.py" in found
    assert Path(__file__) not in found  # this file names the rule without matching it


# ---- figures from the steps' outputs (lines copied from real runs)


@pytest.mark.parametrize("output, counts", [
    ("....s..\n465 passed, 50 skipped in 202.78s (0:03:22)\n", "465 passed, 50 skipped"),
    ("torch CPU paths: ATen AVX512, oneDNN for bf16+f16\n12 passed, 1785 deselected in 8.59s\n",
     "12 passed, 1785 deselected"),
    ("======= 2 failed, 10 passed, 3 warnings in 4.01s =======\n", "2 failed, 10 passed, 3 warnings"),
    (".....................s.........\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!! KeyboardInterrupt !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
     "(to show a full traceback on KeyboardInterrupt use --full-trace)\n30 passed, 1 skipped in 13.83s\n",
     "30 passed, 1 skipped"),
    ("\nno tests ran in 0.00s\nERROR: file or directory not found: build/nope\n", "no tests ran"),
    ("Fatal Python error: Segmentation fault\n", None),
])
def test_pytest_counts(check, output, counts):
    assert check.pytest_counts(output) == counts


PROBES = """\
gemm/fwd/f32/nn                                0.2 s  products see the inputs as given; accumulates in f32; rounds nearest-even
gemm/fwd/f32/nn/batched                        0.3 s  products see the inputs as given; accumulates in f32; rounds nearest-even
                                                        note: the batch runs as one kernel
conv2d/bwd_weight/bf16/nhwc/k3x3-large-reduction-over-the-batch 12.4 s  accumulates in f32
gemm/fwd/tf32/nn  not probed: tf32 needs a GPU of compute capability 8.0 or later
CHANGED gemm/fwd/f32/nn: accumulator f32 -> f16
profile of torch on cpu (cpu_capability AVX512, onednn bf16+f16, probes 1, torch 2.13.0): 8 cells -> /tmp/p/cpu.toml
"""


def test_probed_cells(check):
    assert check.probed_cells(PROBES) == (3, 1)
    assert check.figures_of("probes", PROBES) == "3 cells probed, 1 not probed"


PR_OUTPUT = """\
............................................................................ [100%]
================================ e2egen summary ================================
12 cases: 11 passed, 1 failed
torch CPU paths: ATen AVX512, oneDNN for bf16+f16
failed: 1 bound exceeded
  resnet50/conv2d/c1/fwd/f16/nchw/r0: bound exceeded
12 passed, 1785 deselected in 8.59s
"""


def test_the_e2egen_summary(check):
    assert check.e2egen_summary(PR_OUTPUT) == ["12 cases: 11 passed, 1 failed",
                                               "torch CPU paths: ATen AVX512, oneDNN for bf16+f16",
                                               "failed: 1 bound exceeded", "  resnet50/conv2d/c1/fwd/f16/nchw/r0: bound exceeded"]
    assert check.e2egen_summary("12 passed in 1.00s\n") == []
    assert check.figures_of("pr", PR_OUTPUT) == "12 passed, 1785 deselected; e2egen: 12 cases: 11 passed, 1 failed"


BENCH = """\
200000 elements, f16 out vs float64 ref, device cpu, torch 2.13.0+cpu, 2 torch threads, load average 5.22
floor: ref+out, chunked                0.24 ms  (IQR 0.24-0.51)               ref+out, chunked     1.00                      466.33
torch.testing.assert_close           113.95 ms  (IQR 110.01-116.22)                    ref+out     4.75                        1.00
compare [numba] + unformed bound       1.68 ms  (IQR 1.36-1.70)              ref+out+f32 terms     0.05                       68.02      1.19
compare [torch]                       12.25 ms  (IQR 12.05-12.71)             ref+out, chunked    50.13                        9.30      2.19
compare [torch] + bound               13.58 ms  (IQR 13.28-14.30)       ref+out+bound, chunked    39.11                        8.39      9.67
"""


def test_compare_timings(check):
    assert check.compare_timings(BENCH) == [("compare [numba] + unformed bound", 1.68), ("compare [torch]", 12.25),
                                            ("compare [torch] + bound", 13.58)]
    assert check.figures_of("bench", BENCH).startswith("compare [numba] + unformed bound 1.68 ms; [torch] 12.25 ms")
    assert check.figures_of("bench", "Traceback ...") == "no compare rows"


# ---- the step machinery, on small commands


def python_step(check, tmp_path, name: str, code: str, budget_s: float = HANG_LIMIT):
    return check.Step(name, [sys.executable, "-c", code], budget_s, tmp_path / f"{name}.log")


def test_steps_pass_fail_time_out_and_are_reported(check, tmp_path):
    summary = "\\n".join(PR_OUTPUT.splitlines())
    steps = [python_step(check, tmp_path, "tests", "print('3 passed in 0.01s')"),
             python_step(check, tmp_path, "probes", f"import time; time.sleep({4 * HANG_LIMIT})", budget_s=1),
             python_step(check, tmp_path, "pr", f"print('{summary}'); raise SystemExit(1)"),
             python_step(check, tmp_path, "bench", "print('never')")]
    results = check.run_all(steps, ("tests", "probes", "pr"), total_s=4 * HANG_LIMIT)
    assert [(r.step, r.status) for r in results] == [("tests", "passed"), ("probes", "timed out"), ("pr", "failed"),
                                                    ("bench", "skipped")]
    assert (tmp_path / "probes.log").read_text().startswith("$ ")  # the log names the command it ran
    assert results[0].figures == "3 passed" and not results[3].asked_for
    text = check.report(results, "a test device", tmp_path)
    assert "---- probes timed out: last lines of" in text and "---- pr: e2egen summary" in text
    table = text[text.index("==== device-check summary"):].splitlines()
    assert table[1].split() == ["step", "status", "seconds", "figures", "log"]
    assert re.match(r"pr +failed +\d+\.\d +12 passed, 1785 deselected; e2egen: 12 cases: 11 passed, 1 failed +\S+pr\.log$",
                    table[4])


def test_a_step_left_too_little_of_the_total_is_skipped(check, tmp_path):
    steps = [python_step(check, tmp_path, "tests", "print('ran')")]
    (result,) = check.run_all(steps, ("tests",), total_s=check.GRACE_S + check.MIN_STEP_S - 1)
    assert result.status == "skipped" and result.asked_for and "no time left" in result.figures
    assert not (tmp_path / "tests.log").exists()
