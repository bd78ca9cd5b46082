"""Kernels that misbehave (issue 18): hang, end their process, raise KeyboardInterrupt or SystemExit, or decline.

Each case is a failure (or, for a decline, a skip) with its reason and repro; the run goes on with the next
case and says so in its exit status. The faulty kernels are written into each test's tmp_path, with a
catalogue named faulty.toml (not the default), so every repro must name it by its absolute path.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import HANG_LIMIT, REPO, catalogue_text, wait_until
from e2egen.invocation import e2egen_command

KERNELS = '''
"""Faulty plug-in kernels: each misbehaves only when A is stored transposed (layout tt), so that the nn case
of the same suite shows the run going on."""
import os
import signal
import time

import torch

from e2egen.runner import KernelDeclined


def _transposed(a):
    return not a.is_contiguous()


def gemm_hangs(a, b):
    if _transposed(a):
        time.sleep(3600)
    return torch.matmul(a, b)


def gemm_stuck(a, b):
    """Stuck where no Python signal handler runs, as a kernel waiting in C or on the device would be."""
    if _transposed(a):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)
    return torch.matmul(a, b)


def gemm_exits(a, b):
    if _transposed(a):
        os._exit(1)
    return torch.matmul(a, b)


def gemm_declines(a, b):
    if _transposed(a):
        raise KernelDeclined("no transposed A")
    return torch.matmul(a, b)


def gemm_interrupts(a, b):
    if _transposed(a):
        raise KeyboardInterrupt
    return torch.matmul(a, b)


def gemm_kills_pytest(a, b):
    """Kills the xdist controller, its parent: the whole pytest dies while this case runs."""
    if _transposed(a):
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)
    return torch.matmul(a, b)


def gemm_system_exit(a, b):
    raise SystemExit(3)


def gemm_slow(a, b):
    """Slow enough that a Ctrl-C lands while cases are left (the arithmetic probes call it too)."""
    time.sleep(0.1)
    return torch.matmul(a, b)


def gemm_ctrl_c(a, b):
    """A real Ctrl-C arriving while the kernel runs."""
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    return torch.matmul(a, b)
'''

# Time limits. Only a case that must time out gets a short one, as a catalogue `timeout` on its own suite (the
# kernels misbehave only on layout tt, so such a suite holds tt alone); every case that must pass, skip or crash
# keeps the default limit (600 s), which no loaded machine reaches. A `--timeout` on the command line would
# limit every case of the run, those that must pass included: only runs whose every case must time out give one.
HANG_CASE_LIMIT = 3  # seconds: a hanging kernel's case; its kernel sleeps an hour


def gemm_suite(name: str, kernel: str, layouts: tuple[str, ...] = ("nn", "tt"), ranges: tuple[str, ...] = ("r0",),
               timeout: float | None = None) -> str:
    limit = f"timeout = {timeout}\n" if timeout is not None else ""
    return f'''
[[suite]]
name = "{name}"
op = "gemm"
impl = "faulty_kernels:{kernel}"
dtypes = ["f32"]
layouts = {json.dumps(list(layouts))}
ranges = {json.dumps(list(ranges))}
{limit}
[[suite.config]]
name = "m8"
m = 8
n = 8
k = 16
'''


class Project:
    """faulty.toml and faulty_kernels.py in a temporary directory; e2egen run there as a user would."""

    def __init__(self, root: Path, *suites: str):
        self.root = root
        (root / "faulty_kernels.py").write_text(textwrap.dedent(KERNELS), encoding="utf-8")
        self.catalogue = root / "faulty.toml"
        self.catalogue.write_text(catalogue_text(*suites), encoding="utf-8")
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(root)])}
        self.env.pop("PYTEST_TIMEOUT", None)

    def command(self, *args: str, sigalrm_blocked: bool = False) -> list[str]:
        if sigalrm_blocked:
            return [sys.executable, "-c", SIGALRM_BLOCKED, *args]
        return [sys.executable, "-m", "e2egen", *args]

    def e2egen(self, *args: str, sigalrm_blocked: bool = False) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*args, sigalrm_blocked=sigalrm_blocked), cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=HANG_LIMIT)

    def nightly_args(self, *args: str) -> tuple[str, ...]:
        return ("nightly", "-c", "faulty.toml", "--out", "build/e2e", "--store", "results/e2e.sqlite",
                "--no-progress", "--no-report", "--seed", "1", *args)

    def nightly(self, *args: str, sigalrm_blocked: bool = False) -> subprocess.CompletedProcess:
        return self.e2egen(*self.nightly_args(*args), sigalrm_blocked=sigalrm_blocked)

    def records(self) -> dict[str, dict]:
        (path,) = (self.root / "results/runs").glob("*.jsonl")
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        cases = [o for o in lines if o.get("type") == "case"]
        assert len(cases) == len({o["case_id"] for o in cases}), "a case recorded twice"
        return {o["case_id"]: o for o in cases}

    def run_id(self) -> str:
        (path,) = (self.root / "results/runs").glob("*.jsonl")
        return path.stem

    def pytest_starts(self) -> int:
        """How many pytest processes the run's sweeps started (each is logged as a "$ ... -m pytest ..." line)."""
        (path,) = (self.root / "results/runs").glob("*.log")
        lines = path.read_text(encoding="utf-8").splitlines()
        return sum(line.startswith("$ ") and " -m pytest " in line for line in lines)


# `python -m e2egen ARGS` with SIGALRM blocked before anything runs: every thread of the process, and of the
# processes it starts (a sweep's pytest), inherits the mask, so no Python signal handler ever runs and no time
# limit can interrupt the case, as for a kernel stuck in C or on the device. The kernel itself blocks SIGALRM only
# once it is called, which a loaded machine may reach after a short limit has expired; blocked from the start,
# the case can end only by the hard limit (the limit plus its grace), however slow the machine.
SIGALRM_BLOCKED = ("import runpy, signal; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM}); "
                   "runpy.run_module('e2egen', run_name='__main__', alter_sys=True)")


def output(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


# -- in-process nightly: hangs, a kernel that ends the process, a decline; a kernel stuck in C -------------------
@pytest.fixture(scope="module")
def in_process_sweep(tmp_path_factory):
    """One in-process (--workers 0) sweep over hangs, exits and declines, then a --resume of it. Only the hanging
    kernel's case has a short limit (suite hangs, tt alone); its nn case, suite hangs-next, runs after it."""
    root = tmp_path_factory.mktemp("in_process")
    project = Project(root, gemm_suite("hangs", "gemm_hangs", ("tt",), timeout=HANG_CASE_LIMIT),
                      gemm_suite("hangs-next", "gemm_hangs", ("nn",)), gemm_suite("exits", "gemm_exits"),
                      gemm_suite("declines", "gemm_declines"))
    first = project.nightly("--workers", "0")
    records = project.records()
    started = project.pytest_starts()
    resumed = project.nightly("--workers", "0", "--resume", project.run_id())
    return project, first, records, resumed, project.pytest_starts() - started


def test_a_hanging_kernel_fails_its_case_after_the_time_limit_and_the_sweep_goes_on(in_process_sweep):
    project, first, records, _, _ = in_process_sweep
    assert first.returncode == 1, output(first)
    hung = records["hangs/gemm/m8/fwd/f32/tt/r0"]
    assert hung["status"] == "failed" and hung["reason"] == "timed out after 3 s", hung
    assert hung["duration"] > 2.5  # it ran until its limit
    assert records["hangs-next/gemm/m8/fwd/f32/nn/r0"]["status"] == "passed"  # the next case ran
    assert "FAILED hangs/gemm/m8/fwd/f32/tt/r0: timed out after 3 s" in first.stdout


def test_a_kernel_stuck_outside_python_is_killed_after_its_limit_and_the_rest_runs(tmp_path):
    # A sweep of its own, with SIGALRM blocked from the start (SIGALRM_BLOCKED): pytest-timeout can never
    # interrupt the stuck case, however slow the machine; only the sweep's hard limit ends it. The case after it
    # (suite stuck-next, the default limit) runs in a fresh pytest.
    project = Project(tmp_path, gemm_suite("stuck", "gemm_stuck", ("tt",), timeout=HANG_CASE_LIMIT),
                      gemm_suite("stuck-next", "gemm_stuck", ("nn",)))
    result = project.nightly("--workers", "0", sigalrm_blocked=True)
    assert result.returncode == 1, output(result)
    records = project.records()
    stuck = records["stuck/gemm/m8/fwd/f32/tt/r0"]
    assert stuck["status"] == "failed" and stuck["phase"] == "timeout", stuck
    assert stuck["reason"].startswith("timed out after 3 s (the kernel did not give control back; "
                                      "the test process was killed 3 s later)"), stuck
    assert records["stuck-next/gemm/m8/fwd/f32/nn/r0"]["status"] == "passed", records
    assert project.pytest_starts() == 2, output(result)  # the killed pytest, then a fresh one for the rest


def test_nightly_timeout_limits_every_case_over_the_catalogues_limit(tmp_path):
    # --timeout limits every case of the run, so this run holds only a case that must time out.
    project = Project(tmp_path, gemm_suite("hangs", "gemm_hangs", ("tt",), timeout=60))
    result = project.nightly("--workers", "0", "--timeout", "2")
    assert result.returncode == 1, output(result)
    (hung,) = project.records().values()
    # pytest-timeout's "timed out after 2 s", or, should a loaded machine not record that within the sweep's
    # grace, the sweep's own report of the same limit: either way --timeout's limit, not the catalogue's 60 s.
    assert hung["status"] == "failed" and hung["reason"].startswith("timed out after 2 s"), hung


def test_in_process_a_kernel_that_ends_the_process_fails_its_case_and_the_rest_runs(in_process_sweep):
    project, first, records, _, _ = in_process_sweep
    died = records["exits/gemm/m8/fwd/f32/tt/r0"]
    assert died["status"] == "failed" and died["phase"] == "crash", died
    assert died["reason"].startswith("the process died: exit status 1 while running this case"), died
    assert records["exits/gemm/m8/fwd/f32/nn/r0"]["status"] == "passed"
    # Every case has its own outcome: none was left "not run", none skipped without a reason.
    assert len(records) == 6
    assert not [r for r in records.values() if r["phase"] == "not-run"]
    assert all(r["reason"] or r["skip_reason"] for r in records.values() if r["status"] != "passed")
    assert "6 cases: 3 passed, 2 failed, 1 skipped" in first.stdout, first.stdout  # hangs, exits; declines


def test_a_kernel_that_declines_is_a_skip_with_its_reason(in_process_sweep):
    project, first, records, _, _ = in_process_sweep
    declined = records["declines/gemm/m8/fwd/f32/tt/r0"]
    assert declined["status"] == "skipped", declined
    assert declined["skip_reason"] == "kernel faulty_kernels:gemm_declines declined: no transposed A"
    assert records["declines/gemm/m8/fwd/f32/nn/r0"]["status"] == "passed"
    assert "SKIPPED 1 case: kernel faulty_kernels:gemm_declines declined: no transposed A" in first.stdout


def test_every_repro_names_the_catalogue_by_its_absolute_path(in_process_sweep):
    project, _, records, _, _ = in_process_sweep
    for case_id, record in records.items():
        assert record["repro"].startswith(f"{e2egen_command()} run {case_id} --seed {record['seed']}"), record["repro"]
        assert record["repro"].endswith(f"--catalogue {project.catalogue}"), record["repro"]


def test_resume_does_not_run_a_timed_out_case_again(in_process_sweep):
    project, _, records, resumed, pytest_started = in_process_sweep
    assert resumed.returncode == 1, output(resumed)  # the run still holds its failures
    assert "resuming: 6 cases already recorded" in resumed.stdout
    assert project.records() == records  # nothing ran again, nothing recorded twice
    assert pytest_started == 0  # nothing left to run: the resume started no pytest at all


# -- xdist: a kernel's KeyboardInterrupt, a pytest that dies --------------------------------------------------
def test_under_xdist_a_kernels_keyboard_interrupt_fails_its_case_and_the_sweep_goes_on(tmp_path):
    project = Project(tmp_path, gemm_suite("interrupts", "gemm_interrupts", ("tt", "nn")))
    result = project.nightly("--workers", "1")  # xdist, one worker: the interrupt would end it and the session
    assert result.returncode == 1, output(result)
    records = project.records()
    assert len(records) == 2
    for case_id, record in records.items():
        if "/tt/" in case_id:
            assert record["status"] == "failed" and record["phase"] == "call", record
            assert record["reason"] == ("kernel failed: kernel faulty_kernels:gemm_interrupts raised KeyboardInterrupt "
                                        "(a kernel must not raise it; a real Ctrl-C still stops the run)"), record
        else:
            assert record["status"] == "passed", record


def test_not_run_reasons_name_the_crash_and_quote_no_other_case(tmp_path):
    # gemm_kills_pytest kills the whole pytest (its xdist controller) whenever it runs.
    project = Project(tmp_path, gemm_suite("kills", "gemm_kills_pytest"), gemm_suite("fine", "gemm_hangs", ("nn",)))
    result = project.nightly("--workers", "1")
    assert result.returncode == 1, output(result)
    records = project.records()
    assert records["fine/gemm/m8/fwd/f32/nn/r0"]["status"] == "passed"
    assert records["kills/gemm/m8/fwd/f32/nn/r0"]["status"] == "passed"
    killer = records["kills/gemm/m8/fwd/f32/tt/r0"]
    assert killer["status"] == "failed" and killer["phase"] == "not-run", killer
    assert killer["reason"].startswith("not run: the pytest process died (killed by SIGKILL) while this case was running"), killer
    assert "e2egen run" not in killer["reason"] and "repro" not in killer["reason"]  # nothing quoted from the log


def test_a_real_ctrl_c_stops_the_sweep_and_resume_finishes_it(tmp_path):
    project = Project(tmp_path, gemm_suite("slow", "gemm_slow", ("nn", "nt", "tn", "tt"), ("r0", "r4")))
    sweep = subprocess.Popen(project.command(*project.nightly_args("--workers", "1")), cwd=tmp_path, env=project.env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    runs = tmp_path / "results/runs"
    try:
        # The Ctrl-C lands once a case is recorded, however long the sweep took to get there.
        recorded = wait_until(lambda: runs.exists() and list(runs.glob("*.jsonl")) and len(project.records()) >= 1,
                              process=sweep)
        assert recorded and sweep.poll() is None, f"no case recorded while the sweep ran (exit {sweep.poll()})"
        os.killpg(sweep.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        text, _ = sweep.communicate(timeout=HANG_LIMIT)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.communicate()
    assert sweep.returncode == 130, text
    assert f"continue with `e2egen nightly --resume {project.run_id()}`" in text
    time.sleep(0.5)
    interrupted = project.records()
    assert 1 <= len(interrupted) < 8, interrupted.keys()
    assert all(r["status"] == "passed" for r in interrupted.values()), interrupted  # the Ctrl-C blamed no kernel

    resumed = project.nightly("--workers", "1", "--resume", project.run_id())
    assert resumed.returncode == 0, output(resumed)
    records = project.records()
    assert len(records) == 8 and all(r["status"] == "passed" for r in records.values())


def test_a_sigint_while_the_kernel_runs_is_a_real_interrupt_a_raised_one_is_the_kernels_failure():
    import torch

    from e2egen.runner import KernelFailure, make_problem
    from e2egen.runner.kernels import call_kernel

    problem = make_problem("gemm", "fwd", "f32", "nn", {"m": 2, "n": 2, "k": 2}, (-1.0, 1.0), 0)
    tensors = {"a": torch.ones(2, 2), "b": torch.ones(2, 2)}

    def raises(a, b):
        raise KeyboardInterrupt

    def signalled(a, b):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
        return a @ b

    with pytest.raises(KernelFailure, match="raised KeyboardInterrupt"):
        call_kernel(problem, raises, tensors, torch.device("cpu"), label="k")
    with pytest.raises(KeyboardInterrupt):
        call_kernel(problem, signalled, tensors, torch.device("cpu"), label="k")


# -- e2egen run ----------------------------------------------------------------------------------------------
@pytest.fixture
def run_project(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))  # faulty_kernels, for the runs in this process
    return Project(tmp_path, gemm_suite("exit3", "gemm_system_exit", ("nn",)), gemm_suite("hangs", "gemm_hangs", ("tt",)),
                   gemm_suite("declines", "gemm_declines", ("tt",)), gemm_suite("stuck", "gemm_stuck", ("tt",)))


def e2egen_run(project: Project, capsys, *args: str) -> tuple[int, str]:
    """`e2egen run` in this process (fast: torch is loaded once); (exit status, stdout)."""
    from e2egen.cli import main

    status = main(["run", *args, "-c", str(project.catalogue), "--device", "cpu"])
    return status, capsys.readouterr().out


def test_run_of_a_kernel_raising_system_exit_prints_the_failure_and_exits_1(run_project, capsys):
    status, out = e2egen_run(run_project, capsys, "exit3/gemm/m8/fwd/f32/nn/r0")
    assert status == 1, out
    assert "exit3/gemm/m8/fwd/f32/nn/r0  [FAILED: the kernel failed]" in out
    assert "reason: kernel failed: kernel faulty_kernels:gemm_system_exit raised SystemExit(3)" in out
    assert f"--device cpu --catalogue {run_project.catalogue}" in out  # absolute: runnable from anywhere


def test_run_times_out_a_hanging_kernel(run_project, capsys):
    status, out = e2egen_run(run_project, capsys, "hangs/gemm/m8/fwd/f32/tt/r0", "--timeout", "1")
    assert status == 1, out
    assert "[FAILED: timed out]" in out and "reason: timed out after 1 s" in out
    assert f"repro: {e2egen_command()} run hangs/gemm/m8/fwd/f32/tt/r0 --seed " in out
    assert f"--catalogue {run_project.catalogue}" in out


def test_run_of_a_declining_kernel_is_a_skip(run_project, capsys):
    status, out = e2egen_run(run_project, capsys, "declines/gemm/m8/fwd/f32/tt/r0")
    assert status == 0, out
    assert "[SKIPPED]" in out
    assert "reason: kernel faulty_kernels:gemm_declines declined: no transposed A" in out


def test_run_ends_a_kernel_stuck_outside_python_after_the_limit_and_grace(run_project):
    # SIGALRM blocked from the start (SIGALRM_BLOCKED): the 1 s limit cannot interrupt the case even if it expires
    # before a loaded machine reaches the kernel; only the hard limit (1 s + the 3 s grace) ends the process.
    result = run_project.e2egen("run", "stuck/gemm/m8/fwd/f32/tt/r0", "-c", "faulty.toml", "--timeout", "1",
                                sigalrm_blocked=True)
    assert result.returncode == 1, output(result)
    assert "reason: timed out after 1 s" in result.stdout and "the process was ended" in result.stdout
    assert f"--catalogue {run_project.catalogue}" in result.stdout


@pytest.mark.parametrize("bad", ["0", "-1", "inf", "nan", "soon"])
def test_run_and_nightly_refuse_a_bad_timeout(bad, tmp_path, capsys):
    from e2egen.cli import main

    for argv in (["run", "x/gemm/m/fwd/f32/nn/r0", f"--timeout={bad}"], ["nightly", f"--timeout={bad}", "--store", str(tmp_path / "s")]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2, argv
        assert f"argument --timeout: expected a number > 0, got {bad!r}" in capsys.readouterr().err


# -- the generated pytest suite ----------------------------------------------------------------------------
def test_generated_suite_times_out_a_hanging_case_with_its_repro_and_declines_skip(tmp_path):
    # The catalogue limits the hanging case alone (its `timeout`, a pytest-timeout marker); the others keep the
    # default 600 s. A --timeout would limit every case: on a loaded machine a passing case then ran into it, and
    # where its alarm went off in pytest's reporting between two phases of the test, pytest-timeout's exception
    # escaped as an INTERNALERROR that ended the session.
    project = Project(tmp_path, gemm_suite("hangs", "gemm_hangs", ("tt",), timeout=2),
                      gemm_suite("hangs-next", "gemm_hangs", ("nn",)), gemm_suite("declines", "gemm_declines"))
    assert project.e2egen("gen", "faulty.toml", "--out", "build/e2e").returncode == 0
    result = subprocess.run([sys.executable, "-m", "pytest", "build/e2e", "-p", "no:cacheprovider", "-q", "-rs",
                             "--e2e-device", "cpu"],
                            cwd=tmp_path, env=project.env, capture_output=True, text=True, timeout=HANG_LIMIT)
    text = output(result)
    assert result.returncode == 1, text
    assert "1 failed, 2 passed, 1 skipped" in text
    assert "reason: timed out after 2 s" in text
    assert f"repro: {e2egen_command()} run hangs/gemm/m8/fwd/f32/tt/r0 --seed " in text
    assert f"--device cpu --catalogue {project.catalogue}" in text
    assert "kernel faulty_kernels:gemm_declines declined: no transposed A" in text


def test_generated_cases_get_their_time_limit_as_a_pytest_timeout_marker(tmp_path):
    project = Project(tmp_path, gemm_suite("hangs", "gemm_hangs"))
    assert project.e2egen("gen", "faulty.toml", "--out", "build/e2e").returncode == 0
    probe = tmp_path / "show_limits.py"
    probe.write_text(textwrap.dedent('''
        def pytest_collection_finish(session):
            for item in session.items:
                marker = item.get_closest_marker("timeout")
                print("LIMIT", item.name, marker.args if marker else None)
    '''), encoding="utf-8")
    env = {**project.env, "PYTHONPATH": project.env["PYTHONPATH"] + os.pathsep + str(tmp_path)}
    default = subprocess.run([sys.executable, "-m", "pytest", "build/e2e", "-p", "show_limits", "--collect-only", "-q"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_LIMIT)
    assert default.stdout.count("LIMIT") == 2 and default.stdout.count("(600.0,)") == 2, output(default)
    given = subprocess.run([sys.executable, "-m", "pytest", "build/e2e", "-p", "show_limits", "--collect-only", "-q",
                            "--timeout", "7"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=HANG_LIMIT)
    assert given.stdout.count("LIMIT") == 2 and "(600.0,)" not in given.stdout, output(given)  # --timeout wins


# -- the catalogue's `timeout` -------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [600, 1.5, 86400])
def test_timeout_values_accepted(value):
    from e2egen.generator.schema import timeout_problem

    assert timeout_problem(value) is None


@pytest.mark.parametrize("value", [0, -1, 0.0, math.inf, math.nan, "600", True, [600]])
def test_timeout_values_refused_with_the_valid_range(value):
    from e2egen.generator.schema import timeout_problem

    problem = timeout_problem(value)
    assert problem is not None and "a number of seconds > 0 (finite)" in problem, problem


def test_the_most_specific_timeout_wins_and_the_default_is_600():
    from e2egen.generator.cases import DEFAULT_TIMEOUT, Case, expand
    from e2egen.generator.loader import parse_catalogue

    catalogue = parse_catalogue(catalogue_text(gemm_suite("a", "gemm_hangs"), gemm_suite("b", "gemm_hangs")).replace(
        'impl = "faulty_kernels:gemm_hangs"\n', ""))
    assert DEFAULT_TIMEOUT == 600 and {c.time_limit for c in expand(catalogue)} == {600}
    a, b = catalogue.suites
    a = replace(a, timeout=30.0, configs=(replace(a.configs[0], timeout=5.0),))
    b = replace(b, timeout=30.0)
    cases = expand(replace(catalogue, timeout=100.0, suites=(a, b)))
    assert {c.suite: c.timeout for c in cases} == {"a": 5.0, "b": 30.0}
    only_top = expand(replace(catalogue, timeout=100.0))
    assert {c.time_limit for c in only_top} == {100.0}
    assert all(Case.from_dict(c.to_dict()) == c for c in cases)  # the manifest keeps it


def test_catalogue_timeout_is_read_and_checked_at_every_level(tmp_path):
    from e2egen.generator.cases import expand
    from e2egen.generator.errors import CatalogueError
    from e2egen.generator.loader import parse_catalogue

    suite = gemm_suite("a", "x").replace('impl = "faulty_kernels:x"\n', "")
    text = "timeout = 100\n" + catalogue_text(suite.replace('ranges = ["r0"]', 'ranges = ["r0"]\ntimeout = 30')
                                               .replace("k = 16", "k = 16\ntimeout = 5"))
    assert {c.timeout for c in expand(parse_catalogue(text, "faulty.toml"))} == {5.0}
    bad = text.replace("timeout = 5", "timeout = 0")
    with pytest.raises(CatalogueError) as info:
        parse_catalogue(bad, "faulty.toml")
    (problem,) = [str(p) for p in info.value.problems]
    line = next(i for i, text_line in enumerate(bad.splitlines(), 1) if text_line == "timeout = 0")
    assert problem.startswith(f"faulty.toml:{line}: suite[0].config[0].timeout") and "> 0" in problem, problem
