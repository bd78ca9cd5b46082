"""A newcomer's project, end to end: a catalogue with its own kernel module beside it, used from other directories;
a generated suite that knows when it is stale; gen that never replaces a file it did not write (issue 19)."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import HANG_LIMIT, REPO

KERNELS = '''
import torch


def scaled_gemm(a, b):
    """A correct gemm: f32 products, f32 accumulation, as torch's."""
    return torch.matmul(a, b)


def gemm_off_by_one_percent(a, b):
    return torch.matmul(a, b) * 1.01
'''

CATALOGUE = '''
seed = 3
[ranges]
r0 = [-1.0, 1.0]
[tolerances.f32]
rms = 1e-6

[[suite]]
name = "mine"
op = "gemm"
impl = "mykern:scaled_gemm"
dtypes = ["f32"]
layouts = ["nn", "tt"]
ranges = ["r0"]
pr = true

[[suite.config]]
name = "m8"
m = 8
n = 8
k = 16

[[suite]]
name = "buggy"
op = "gemm"
impl = "mykern:gemm_off_by_one_percent"
dtypes = ["f32"]
layouts = ["nn"]
ranges = ["r0"]

[[suite.config]]
name = "m8"
m = 8
n = 8
k = 16
'''

GOOD_CASE = "mine/gemm/m8/fwd/f32/nn/r0"
BAD_CASE = "buggy/gemm/m8/fwd/f32/nn/r0"
TIMEOUT = HANG_LIMIT


def e2egen_words() -> list[str]:
    """The e2egen a user types: the installed script beside this interpreter (python -m e2egen would put the
    working directory on sys.path, which is not what a user's shell does)."""
    script = Path(sys.executable).parent / "e2egen"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "e2egen"]


def clean_env() -> dict[str, str]:
    """No PYTHONPATH: the kernel must be found by the catalogue's-directory rule alone."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_TIMEOUT", "PYTEST_ADDOPTS")}
    return env


def e2egen(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*e2egen_words(), *args], cwd=cwd, env=env or clean_env(), capture_output=True, text=True,
                          timeout=TIMEOUT)


def pytest_suite(cwd: Path, suite: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider", *args],
                          cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT)


def shell(line: str, cwd: Path) -> subprocess.CompletedProcess:
    """A printed command line, run as a user pastes it into a shell."""
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT)


def text(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


def repro_line(output: str, case_id: str) -> str:
    lines = [line.strip().removeprefix("repro: ") for line in output.splitlines()
             if line.strip().startswith("repro: ") and f" run {case_id} " in line]
    assert lines, output
    return lines[0]


class Newcomer:
    """proj/ holds cat.toml and mykern.py; commands run from elsewhere/, repros from third/."""

    def __init__(self, root: Path):
        self.project, self.elsewhere, self.third = root / "proj", root / "elsewhere", root / "third"
        for directory in (self.project, self.elsewhere, self.third):
            directory.mkdir()
        (self.project / "mykern.py").write_text(textwrap.dedent(KERNELS), encoding="utf-8")
        self.catalogue = self.project / "cat.toml"
        self.catalogue.write_text(textwrap.dedent(CATALOGUE), encoding="utf-8")
        self.suite = self.project / "build" / "e2e"
        self.relative_catalogue = os.path.relpath(self.catalogue, self.elsewhere)  # ../proj/cat.toml
        self.relative_suite = os.path.relpath(self.suite, self.elsewhere)

    def gen(self) -> subprocess.CompletedProcess:
        result = e2egen(self.elsewhere, "gen", self.relative_catalogue, "--out", self.relative_suite)
        assert result.returncode == 0, text(result)
        return result


@pytest.fixture
def newcomer(tmp_path) -> Newcomer:
    return Newcomer(tmp_path)


# -- your own kernel ----------------------------------------------------------------------------------------------

def test_own_kernel_beside_the_catalogue_works_from_any_directory(newcomer):
    validated = e2egen(newcomer.elsewhere, "validate", newcomer.relative_catalogue)
    assert validated.returncode == 0, text(validated)
    assert "ok: 2 suites, 3 cases" in validated.stdout

    newcomer.gen()
    ran = e2egen(newcomer.elsewhere, "run", GOOD_CASE, "--catalogue", newcomer.relative_catalogue, "--device", "cpu")
    assert ran.returncode == 0, text(ran)
    assert "[PASSED]" in ran.stdout
    repro = repro_line(ran.stdout, GOOD_CASE)
    assert f"--catalogue {newcomer.catalogue}" in repro  # absolute: relative to no directory
    again = shell(repro, newcomer.third)
    assert again.returncode == 0, text(again)
    assert "[PASSED]" in again.stdout and "No module named" not in text(again)

    # pytest on the generated suite, from a third directory, without PYTHONPATH: the same rule
    suite = pytest_suite(newcomer.third, newcomer.suite, "--e2e-device", "cpu")
    assert suite.returncode == 1, text(suite)
    assert "1 failed, 2 passed" in suite.stdout and "No module named" not in text(suite)
    assert f"catalogue: {newcomer.catalogue}:" in suite.stdout  # the catalogue's line, wherever pytest ran
    rerun = shell(repro_line(suite.stdout, BAD_CASE), newcomer.elsewhere)
    assert rerun.returncode == 1 and "[FAILED: " in rerun.stdout, text(rerun)


def test_nightly_from_another_directory_imports_the_kernel_and_its_repro_reproduces(newcomer):
    newcomer.gen()
    store = newcomer.elsewhere / "results" / "e2e.sqlite"
    swept = e2egen(newcomer.elsewhere, "nightly", "--catalogue", newcomer.relative_catalogue, "--out",
                   newcomer.relative_suite, "--store", str(store), "--workers", "0", "--seed", "1",
                   "--no-progress", "--no-report", "--device", "cpu")
    assert swept.returncode == 1, text(swept)  # the buggy kernel fails; the good one passes
    assert "3 cases: 2 passed, 1 failed, 0 skipped" in swept.stdout, text(swept)
    assert "No module named" not in text(swept)
    repro = repro_line(swept.stdout, BAD_CASE)
    rerun = shell(repro, newcomer.third)
    assert rerun.returncode == 1, text(rerun)  # the same failure, not an import error (which exits 2)
    assert "[FAILED: " in rerun.stdout and "rms" in rerun.stdout


def test_a_missing_kernel_module_says_where_it_was_looked_for(newcomer):
    newcomer.catalogue.write_text(newcomer.catalogue.read_text(encoding="utf-8").replace(
        "mykern:scaled_gemm", "notthere:scaled_gemm"), encoding="utf-8")
    result = e2egen(newcomer.elsewhere, "validate", newcomer.relative_catalogue)
    assert result.returncode == 2, text(result)
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "notthere" in line]
    assert f"{newcomer.relative_catalogue}:" in line and "suite[0].impl" in line
    assert f"the catalogue's directory {newcomer.project}" in line and "the installed packages" in line


def test_pythonpath_still_finds_a_kernel_kept_elsewhere(newcomer):
    kernels = newcomer.third / "kernels_dir"
    kernels.mkdir()
    (newcomer.project / "mykern.py").rename(kernels / "mykern.py")
    result = e2egen(newcomer.elsewhere, "validate", newcomer.relative_catalogue,
                    env={**clean_env(), "PYTHONPATH": str(kernels)})
    assert result.returncode == 0, text(result)
    missing = e2egen(newcomer.elsewhere, "validate", newcomer.relative_catalogue)
    assert missing.returncode == 2 and "cannot import module 'mykern'" in missing.stderr, text(missing)


# -- stale suites -------------------------------------------------------------------------------------------------

def test_a_suite_refuses_to_run_after_its_catalogue_changed(newcomer):
    newcomer.gen()
    newcomer.catalogue.write_text(newcomer.catalogue.read_text(encoding="utf-8").replace("rms = 1e-6", "rms = 1e-9"),
                                  encoding="utf-8")
    result = pytest_suite(newcomer.third, newcomer.suite, "--e2e-device", "cpu")
    assert result.returncode == 4, text(result)  # pytest's usage error: nothing collected, nothing run
    assert "passed" not in result.stdout and "Traceback" not in text(result)
    (message,) = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert "stale" in message and str(newcomer.catalogue) in message
    assert "`make gen`" in message and f"e2egen gen {newcomer.catalogue} --out {newcomer.suite}" in message

    newcomer.gen()  # what the message says to do
    fixed = pytest_suite(newcomer.third, newcomer.suite, "--e2e-device", "cpu", "--collect-only")
    assert fixed.returncode == 0 and "3 tests collected" in fixed.stdout, text(fixed)


def test_a_suite_refuses_to_run_after_its_pr_selection_changed(newcomer):
    selection = newcomer.project / "selection.toml"
    selection.write_text(f'[[case]]\nid = "{BAD_CASE}"\nwhy = "a test"\n', encoding="utf-8")
    newcomer.catalogue.write_text('pr_selection = "selection.toml"\n' + newcomer.catalogue.read_text(encoding="utf-8"),
                                  encoding="utf-8")
    newcomer.gen()
    assert pytest_suite(newcomer.third, newcomer.suite, "--collect-only", "-m", "pr").returncode == 0
    selection.write_text(f'[[case]]\nid = "{GOOD_CASE}"\nwhy = "changed"\n', encoding="utf-8")
    result = pytest_suite(newcomer.third, newcomer.suite, "--collect-only")
    assert result.returncode == 4, text(result)
    assert f"the PR selection {selection}" in result.stderr and "stale" in result.stderr


def test_a_suite_whose_catalogue_was_moved_says_so(newcomer):
    newcomer.gen()
    newcomer.catalogue.rename(newcomer.project / "renamed.toml")
    result = pytest_suite(newcomer.third, newcomer.suite, "--collect-only")
    assert result.returncode == 4, text(result)
    assert f"the catalogue {newcomer.catalogue}, which is not there any more (moved or deleted)" in result.stderr
    assert f"--out {newcomer.suite}" in result.stderr


def test_a_suite_moved_with_its_catalogue_still_runs(newcomer, tmp_path):
    newcomer.gen()
    moved = tmp_path / "moved"
    shutil.move(str(newcomer.project), str(moved))
    result = pytest_suite(newcomer.third, moved / "build" / "e2e", "--e2e-device", "cpu", "-k", "mine")
    assert result.returncode == 0, text(result)
    assert "2 passed" in result.stdout


def test_nightly_no_gen_refuses_a_stale_suite(newcomer):
    newcomer.gen()
    newcomer.catalogue.write_text(newcomer.catalogue.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    result = e2egen(newcomer.elsewhere, "nightly", "--catalogue", newcomer.relative_catalogue, "--out",
                    newcomer.relative_suite, "--store", str(newcomer.elsewhere / "s.sqlite"), "--no-gen",
                    "--no-progress", "--no-report", "--workers", "0")
    assert result.returncode == 2, text(result)
    assert "stale" in result.stderr and "leave out --no-gen" in result.stderr and "Traceback" not in result.stderr


def test_gen_output_does_not_depend_on_the_working_directory(newcomer):
    newcomer.gen()
    first = {p.name: p.read_bytes() for p in newcomer.suite.iterdir()}
    again = e2egen(newcomer.third, "gen", str(newcomer.catalogue), "--out", str(newcomer.suite))
    assert again.returncode == 0 and "0 files written" in again.stdout, text(again)
    assert {p.name: p.read_bytes() for p in newcomer.suite.iterdir()} == first
    manifest = json.loads((newcomer.suite / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["catalogue"] == "../../cat.toml"  # relative to the suite itself


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_gen_follows_the_catalogue_it_is_given(newcomer, tmp_path):
    newcomer.gen()
    other = newcomer.project / "other.toml"
    other.write_text(newcomer.catalogue.read_text(encoding="utf-8").replace('name = "buggy"', 'name = "other"'),
                     encoding="utf-8")
    os.utime(other, (1_000_000_000, 1_000_000_000))  # older than the suite's manifest.json
    venv = tmp_path / "venv"  # a set-up stamp of its own: the test must never run `make setup`
    venv.mkdir()
    (venv / ".installed").touch()
    command = ["make", "-C", str(REPO), "gen", f"VENV={venv}", f"E2EGEN={shlex.join(e2egen_words())}",
               f"CATALOGUE={other}", f"OUT={newcomer.suite}"]
    result = subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, text(result)
    assert "Nothing to be done" not in result.stdout
    manifest = json.loads((newcomer.suite / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["catalogue"] == "../../other.toml"
    assert (newcomer.suite / "test_other.py").exists() and not (newcomer.suite / "test_buggy.py").exists()


# -- gen never replaces what it did not write ----------------------------------------------------------------------

@pytest.mark.parametrize("name, content", [
    ("conftest.py", "import pytest  # my fixtures\n"),
    ("pytest.ini", "[pytest]\naddopts = -x\n"),
    ("manifest.json", '{"mine": true}\n'),
    ("test_mine.py", "def test_mine():\n    pass\n"),  # the name a suite module of suite "mine" would take
])
def test_gen_refuses_to_replace_a_hand_written_file(newcomer, tmp_path, name, content):
    out = tmp_path / "handwritten"
    out.mkdir()
    (out / name).write_text(content, encoding="utf-8")
    result = e2egen(newcomer.elsewhere, "gen", newcomer.relative_catalogue, "--out", str(out))
    assert result.returncode == 2, text(result)
    assert str(out / name) in result.stderr and "not generated by e2egen" in result.stderr
    assert "Traceback" not in result.stderr
    assert (out / name).read_text(encoding="utf-8") == content
    assert sorted(p.name for p in out.iterdir()) == [name]  # nothing else written either


def test_gen_replaces_its_own_files(newcomer):
    newcomer.gen()
    conftest = newcomer.suite / "conftest.py"
    edited = conftest.read_text(encoding="utf-8") + "# an edit gen will undo: the file says DO NOT EDIT\n"
    conftest.write_text(edited, encoding="utf-8")
    result = newcomer.gen()
    assert "1 files written" in result.stdout
    assert conftest.read_text(encoding="utf-8") != edited


# -- the staleness rule, as a property ----------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(catalogue=st.binary(min_size=1, max_size=200), selection=st.one_of(st.none(), st.binary(max_size=200)),
       edit=st.sampled_from(["none", "catalogue", "selection", "remove catalogue"]), position=st.integers(0, 10_000))
def test_a_suite_is_stale_exactly_when_a_source_changed(tmp_path_factory, catalogue, selection, edit, position):
    from e2egen.generator.sources import path_from_suite, source_digests, stale_problem

    root = tmp_path_factory.mktemp("sources")
    cat, sel, suite = root / "c.toml", root / "sel.toml", root / "out" / "e2e"
    suite.mkdir(parents=True)
    cat.write_bytes(catalogue)
    if selection is not None:
        sel.write_bytes(selection)
    manifest = {"catalogue": path_from_suite(cat, suite), "pr_selection": "sel.toml",
                "sources": source_digests(cat, "sel.toml")}
    assert stale_problem(manifest, suite) is None
    if edit == "catalogue":
        data = bytearray(catalogue)
        data[position % len(data)] ^= 1
        cat.write_bytes(bytes(data))
    elif edit == "selection":  # written where there was none, or one byte more
        sel.write_bytes((selection or b"") + b"#")
    elif edit == "remove catalogue":
        cat.unlink()
    problem = stale_problem(manifest, suite)
    if edit == "none":
        assert problem is None
    else:
        assert problem is not None and str(cat) in problem


def test_collecting_a_suite_with_its_own_kernel_imports_no_torch(newcomer):
    """The import rule is applied at collection without importing the kernel (or torch): collection stays fast."""
    newcomer.gen()
    script = textwrap.dedent(f"""
        import sys
        import pytest
        status = pytest.main([{str(newcomer.suite)!r}, "--collect-only", "-q", "-p", "no:cacheprovider"])
        print("collected:", int(status), "torch:", "torch" in sys.modules, "mykern:", "mykern" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=newcomer.third, env=clean_env(), capture_output=True,
                            text=True, timeout=TIMEOUT)
    assert "collected: 0 torch: False mykern: False" in result.stdout, text(result)
