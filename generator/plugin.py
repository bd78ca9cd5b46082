"""pytest plugin for generated suites: runs each case and turns its Outcome into pytest's verdict.

Options: --e2e-device (cpu|cuda; default CUDA when present), --e2e-global-seed (fresh
inputs: re-derives every case's seed, as the nightly does), --e2e-run-slow (see
below). The Outcome is
stashed on the test item so other plugins (loaded with -p, such as the
nightly sweep's recorder) can read it.

Time limits come from pytest-timeout: `--timeout S` (or its ini key or
$PYTEST_TIMEOUT) limits every case; without one, each case gets its own
limit (the catalogue's `timeout`, else 600 s) as a `timeout` marker. A case
past its limit fails with "timed out after N s" and its repro, and the
session goes on. Without pytest-timeout installed the runner enforces the
case's limit itself.

Cases marked `slow` (the catalogue's `markers = ["slow"]`) are skipped on the
CPU, with a reason naming how to run them, unless --e2e-run-slow is given or the
`-m` expression names `slow`; on CUDA they run. The nightly sweep passes
--e2e-run-slow.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

# Case execution (and torch) is imported when a case runs, not at collection.
OUTCOME = pytest.StashKey["e2egen.generator.execute.Outcome"]()


KERNEL_TIMES = ("warm", "first")


def pytest_addoption(parser):
    group = parser.getgroup("e2egen")
    group.addoption("--e2e-device", default=None, choices=("cpu", "cuda"), help="device for the kernels (default: CUDA when present, else CPU; env E2E_DEVICE)")
    from e2egen.generator.cases import seed_argument

    group.addoption("--e2e-global-seed", type=seed_argument, default=None, help="derive every case's seed from this global seed instead of the generated one")
    group.addoption("--e2e-run-slow", action="store_true", default=False,
                    help="run the cases marked slow on the CPU too (skipped there by default; they always run on CUDA)")
    group.addoption("--e2e-kernel-time", default="warm", choices=KERNEL_TIMES,
                    help="the kernel time a case records: 'warm' (default) repeats a kernel's first call under 1 s "
                         "(once per kernel signature and process) and records the repeat, so JIT compilation is "
                         "not counted; 'first' records the first "
                         "call and repeats nothing (make pr: it judges numerics, and runs about a fifth faster)")


def pytest_configure(config):
    """In every pytest session (the plugin is installed as pytest11 `e2egen`): e2egen's markers only. What a
    generated suite needs of the session is done by its conftest (configure_suite), so that other projects'
    test sessions are left as they are."""
    config.addinivalue_line("markers", "pr: an e2egen case in the PR subset")
    config.addinivalue_line("markers", f"{SLOW_MARKER}: an e2egen case skipped on the CPU unless --e2e-run-slow")


def autoload_disabled() -> bool:
    """Whether pytest loads no installed plugin (PYTEST_DISABLE_PLUGIN_AUTOLOAD): then a generated conftest
    loads this one itself."""
    return bool(os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"))


def configure_suite(config) -> None:
    """Called by a generated suite's conftest when pytest starts: torch's threads shared among xdist workers, the
    end-of-run summary, leftover threads and processes ended, and the device checked once."""
    if config.pluginmanager.has_plugin("e2egen-leftovers"):  # two generated suites in one session
        return
    share_cpu_threads()
    config.pluginmanager.register(LeftoverGuard(), "e2egen-leftovers")
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) writes the summary
        from e2egen.generator.run_summary import Summary

        config.pluginmanager.register(Summary(), "e2egen-summary")
    device = config.getoption("--e2e-device", default=None)
    if device or os.environ.get("E2E_DEVICE"):  # a bad or missing device is one usage error, not a failure per case
        from e2egen.runner.device import DeviceError, check_device

        try:
            check_device(device)  # None: $E2E_DEVICE, named as such in the message
        except DeviceError as err:
            raise pytest.UsageError(str(err)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """Import the runner (torch, metrics) before the first case, not inside it: a case's time limit must not
    pay for (or interrupt) the imports."""
    if session.config.option.collectonly or not any(_case_of(item) is not None for item in session.items):
        return
    from e2egen import metrics, runner

    runner.run, metrics.compare  # noqa: B018  (loads torch, the ops and the metrics: see metrics.lazy)


def pytest_collection_modifyitems(config, items):
    """Each generated case gets its own time limit as a pytest-timeout marker, unless the run gives one."""
    if not _has_pytest_timeout(config) or _run_timeout(config) is not None:
        return
    for item in items:
        case = _case_of(item)
        if case is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(case.time_limit))


def _has_pytest_timeout(config) -> bool:
    return config.pluginmanager.hasplugin("timeout")


def _run_timeout(config) -> float | None:
    """The time limit the run sets for every test (pytest-timeout's --timeout, $PYTEST_TIMEOUT or ini), if any."""
    value = config.getoption("timeout", None)
    if value is None:
        value = os.environ.get("PYTEST_TIMEOUT") or None
    if value is None:
        try:
            value = config.getini("timeout") or None
        except ValueError:  # not registered: pytest-timeout is not loaded
            value = None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None  # pytest-timeout itself reports a bad value


def _case_of(item):
    from e2egen.generator.cases import Case

    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("case") if callspec is not None else None
    return case if isinstance(case, Case) else None


class LeftoverGuard:
    """In every process that runs cases (a plain `pytest build/e2e`, `e2egen run`, a nightly worker): note
    what each case's kernel left running, and at the very end, every report made and record written, end it
    (runner.leftovers) so that a kernel's thread or child cannot keep a finished run alive."""

    def __init__(self) -> None:
        from e2egen.runner.leftovers import Leftovers

        self.leftovers = Leftovers()
        self.session: pytest.Session | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item, nextitem):
        case = _case_of(item)
        self.leftovers.after(case.id if case is not None else item.nodeid)

    def pytest_sessionfinish(self, session):
        self.session = session

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        # session.exitstatus as pytest will return it (later sessionfinish hooks may have changed it)
        self.leftovers.end(int(self.session.exitstatus) if self.session is not None else 0)


# ---- cases marked slow: skipped on the CPU unless asked for

SLOW_MARKER = "slow"
_SLOW_SKIP = pytest.StashKey["str | None"]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A generated case marked slow is skipped here (before its fixtures) when slow_skip_reason says so."""
    if item.get_closest_marker(SLOW_MARKER) is None or _case_of(item) is None:
        return
    config = item.config
    if _SLOW_SKIP not in config.stash:  # decided once per process: the device needs torch, loaded by now
        device = _device_name(config.getoption("--e2e-device", default=None))
        config.stash[_SLOW_SKIP] = slow_skip_reason(device, config.getoption("--e2e-run-slow", default=False),
                                                    config.getoption("markexpr", default="") or "")
    reason = config.stash[_SLOW_SKIP]
    if reason is not None:
        pytest.skip(reason)


def slow_skip_reason(device: str, run_slow: bool, markexpr: str) -> str | None:
    """Why a case marked slow is skipped, or None when it runs: it runs on any device but the CPU, with
    --e2e-run-slow, or when the -m expression names `slow` (`-m slow`, `-m "pr or slow"`)."""
    if device != "cpu" or run_slow or re.search(rf"(?<![\w.]){SLOW_MARKER}(?![\w.])", markexpr):
        return None
    return (f"marked {SLOW_MARKER}: skipped on the CPU by default; run it with --e2e-run-slow (or a -m expression "
            f"naming {SLOW_MARKER}, e.g. -m {SLOW_MARKER}), or on CUDA")


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
    """pytest.params of a generated module: each case (decoded by the codec) with its id and markers.

    A module whose suite names its own kernel (IMPL) puts its catalogue's directory on the import path
    first, as every e2egen command does (runner.kernels), so `impl = "mykern:f"` beside the catalogue imports."""
    from e2egen.generator.codec import decode

    if module["IMPL"]:
        catalogue = resolve_catalogue(module["CATALOGUE"], Path(module["__file__"]).parent)
        if catalogue is not None:
            from e2egen.runner.import_path import import_beside

            import_beside(catalogue)
    return [pytest.param(case, id=case.id, marks=[getattr(pytest.mark, m) for m in case.markers])
            for case in decode(module, module["IMPL"])]


def located_absolutely(case, recorded: str | None, catalogue: str | None):
    """The case with its catalogue line as a report prints it, "/abs/configs.toml:12": generated files name the
    catalogue relative to the suite (`recorded`), which means nothing from pytest's working directory."""
    from dataclasses import replace

    if not recorded or not catalogue or not case.location.startswith(f"{recorded}:"):
        return case
    return replace(case, location=catalogue + case.location[len(recorded):])


def refuse_stale_suite(conftest_file: str | os.PathLike, manifest_name: str = "manifest.json") -> None:
    """Called by the generated conftest when pytest starts: pytest.UsageError (one message, nothing collected)
    when the suite no longer matches its catalogue or PR selection, or its catalogue is gone (sources)."""
    import json

    from e2egen.generator.sources import stale_problem

    manifest_path = Path(conftest_file).parent / manifest_name
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise pytest.UsageError(f"{manifest_path}: the generated suite's manifest cannot be read ({err}); "
                                "regenerate the suite: `make gen`, or `e2egen gen CATALOGUE --out DIR`") from None
    problem = stale_problem(manifest if isinstance(manifest, dict) else {}, manifest_path.parent)
    if problem is not None:
        raise pytest.UsageError(problem)


@pytest.fixture
def e2e_case(request):
    """Call with a generated Case: runs it and passes, fails or skips the test."""

    def run(case):
        from e2egen.generator.cases import derive_seed
        from e2egen.generator.execute import describe, execute, timed_out
        from e2egen.generator.run_summary import PROPERTY, case_facts

        global_seed = request.config.getoption("--e2e-global-seed")
        if global_seed is not None:
            case = case.with_seed(derive_seed(global_seed, case.id))
        device, catalogue = request.config.getoption("--e2e-device"), _catalogue(request)
        case = located_absolutely(case, getattr(request.module, "CATALOGUE", None), catalogue)
        # pytest-timeout limits the case when present; without it, the runner does.
        own_limit = None if _has_pytest_timeout(request.config) else (_run_timeout(request.config) or case.time_limit)
        try:
            outcome = execute(case, device=device, catalogue=catalogue, timeout=own_limit,
                              warm_kernel=request.config.getoption("--e2e-kernel-time") == "warm")
        except pytest.fail.Exception as err:
            seconds = _expired_time_limit(err)
            if seconds is None:
                raise
            outcome = timed_out(case, _device_name(device), catalogue, seconds)
        request.node.stash[OUTCOME] = outcome
        request.node.user_properties.append((PROPERTY, case_facts(outcome)))
        if outcome.status == "skipped":
            pytest.skip(outcome.reason)
        if outcome.status == "failed":
            pytest.fail(describe(outcome), pytrace=False)
        return outcome

    return run


def _expired_time_limit(err: BaseException) -> float | None:
    return expired_time_limit(str(getattr(err, "msg", err)))


def expired_time_limit(text: str) -> float | None:
    """The limit in pytest-timeout's failure ("Timeout (>600.0s) from pytest-timeout."), or None for another text."""
    try:
        from pytest_timeout import PYTEST_FAILURE_MESSAGE
    except ImportError:
        return None
    pattern = re.escape(PYTEST_FAILURE_MESSAGE).replace(re.escape("%s"), "(.+?)")
    match = re.search(pattern, text)
    if match is None:
        return None
    try:
        return float(match.group(1))
    except ValueError:
        return None


def _device_name(option: str | None) -> str:
    try:
        from e2egen import runner

        return runner.select_device(option).type
    except Exception:
        return str(option)


def _catalogue(request) -> str | None:
    """The module's catalogue, as an absolute path (repro lines name it so: they work from anywhere)."""
    return resolve_catalogue(getattr(request.module, "CATALOGUE", None), Path(str(request.module.__file__)).parent)


def resolve_catalogue(catalogue: str | None, suite_dir: str | os.PathLike) -> str | None:
    """A generated suite's catalogue, as manifest.json and the modules record it (relative to the suite's
    directory), as an absolute path."""
    from e2egen.generator.sources import catalogue_of_suite

    path = catalogue_of_suite(catalogue, suite_dir)
    return str(path) if path is not None else None
