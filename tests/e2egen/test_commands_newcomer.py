"""A newcomer's first hour (issue 19): repro lines that work as printed, --version, filters that take what
`list` prints and refuse typos, explain's progress, select --budget 0, a catalogue given to `study`, the
numba notice for pip users, the sample study from a wheel, the CI templates and the sample-report script."""
from __future__ import annotations

import io
import os
import re
import shlex
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO, TINY_CONV, TINY_GEMM, catalogue_text, run_cli
from e2egen.cli import main
from e2egen.commands.diagnose_commands import progress_bar, sample_study
from e2egen.generator.case_filter import FILTER_AXES, FilterError, case_filter
from e2egen.generator.selection import read_selection
from e2egen.invocation import _command
from loop_support import cases_of, fill_store

CATALOGUE = catalogue_text(TINY_CONV, TINY_GEMM.replace("k = 16", "k = 16\npr = true"))
CASES = cases_of(CATALOGUE)


# -- repro lines: the e2egen of the running interpreter ------------------------------------------------

def fake_environment(root: Path, with_script: bool) -> Path:
    """root/bin/python (a stand-in interpreter path) and, with_script, an executable root/bin/e2egen."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text("")
    if with_script:
        script = bin_dir / "e2egen"
        script.write_text("#!/bin/sh\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_the_command_is_bare_only_where_path_finds_this_environments_e2egen(tmp_path):
    bin_dir = fake_environment(tmp_path / "venv", with_script=True)
    other = fake_environment(tmp_path / "other", with_script=True)
    python = str(bin_dir / "python")
    assert _command(python, f"{bin_dir}{os.pathsep}/usr/bin") == "e2egen"  # activated
    assert _command(python, "/usr/bin") == str(bin_dir / "e2egen")  # not activated: the script's path
    assert _command(python, f"{other}{os.pathsep}{bin_dir}") == str(bin_dir / "e2egen")  # PATH finds another one


def test_without_a_script_the_command_is_this_interpreter_with_dash_m(tmp_path):
    bin_dir = fake_environment(tmp_path / "my env", with_script=False)
    assert _command(str(bin_dir / "python"), "/usr/bin") == f"{shlex.quote(str(bin_dir / 'python'))} -m e2egen"


def test_the_printed_repro_reruns_the_case_from_a_shell_without_the_environment(tmp_path):
    path = tmp_path / "cat.toml"
    path.write_text(CATALOGUE)
    case_id = "mm/gemm/m8/fwd/f32/tt/r4"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no activated environment: a bare e2egen is not found
    first = run_cli("run", case_id, "-c", str(path), "--device", "cpu", "--seed", "11", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    [repro] = [line.removeprefix("repro: ") for line in first.stdout.splitlines() if line.startswith("repro: ")]
    assert not repro.startswith("e2egen ")
    again = subprocess.run(repro, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{case_id}  [PASSED]  seed=11" in again.stdout


def test_version():
    from importlib.metadata import version

    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"e2egen {version('e2egen')}"


# -- filters: what `list` prints is what --filter takes; a typo is an error --------------------------------

def list_ids(path: Path, *args: str) -> tuple[int, list[str], str]:
    result = run_cli("list", "-c", str(path), *args)
    return result.returncode, [line.split("\t")[0] for line in result.stdout.splitlines()], result.stderr


def test_list_takes_the_pr_spelling_it_prints(tmp_path):
    path = tmp_path / "cat.toml"
    path.write_text(CATALOGUE)
    status, everything, _ = list_ids(path)
    result = run_cli("list", "-c", str(path))
    printed = dict(re.search(r"^(\S+)\t.*\tpr=(yes|no)\t", line).groups() for line in result.stdout.splitlines())
    assert status == 0 and set(printed.values()) == {"yes", "no"}
    for spelling in ("yes", "no"):
        status, ids, _ = list_ids(path, "--filter", f"pr={spelling}")
        assert status == 0 and ids == [cid for cid in everything if printed[cid] == spelling]
    assert list_ids(path, "--filter", "pr=yes")[1] == list_ids(path, "--pr")[1] == list_ids(path, "-k", "pr=true")[1]


@pytest.mark.parametrize("term,bad,near", [
    ("op=gem", "'gem'", "did you mean 'gemm'?"),
    ("dtype=fp16", "'fp16'", "did you mean 'f16'?"),
    ("layout=nchw,nwhc", "'nwhc'", "did you mean 'nhwc'?"),
    ("pr=y", "'y'", "valid: false, no, true, yes"),
    ("dtypes=f16", "axis 'dtypes'", "did you mean 'dtype'?"),
])
def test_a_typo_in_a_filter_is_a_user_error_with_a_suggestion(tmp_path, term, bad, near):
    path = tmp_path / "cat.toml"
    path.write_text(CATALOGUE)
    status, ids, err = list_ids(path, "--filter", f"tiny/* {term}")
    assert status == 2 and ids == [] and "Traceback" not in err
    assert err.startswith("error: --filter: unknown ") and bad in err and near in err


def test_a_glob_that_matches_nothing_says_so_and_exits_0(tmp_path):
    path = tmp_path / "cat.toml"
    path.write_text(CATALOGUE)
    status, ids, err = list_ids(path, "--filter", "resnet50/*")
    assert status == 0 and ids == [] and "no case of" in err and "matches --filter 'resnet50/*'" in err


@settings(max_examples=40, deadline=None)
@given(axis=st.sampled_from([a for a in FILTER_AXES if a != "pr"]), data=st.data())
def test_an_axis_filter_keeps_exactly_the_cases_with_those_values(axis, data):
    present = sorted({str(getattr(c, axis)) for c in CASES})
    wanted = data.draw(st.lists(st.sampled_from(present), min_size=1, unique=True))
    keep = case_filter(f"{axis}={','.join(wanted)}", cases=CASES)
    assert [c.id for c in CASES if keep(c)] == [c.id for c in CASES if str(getattr(c, axis)) in wanted]


@settings(max_examples=40, deadline=None)
@given(value=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8),
       axis=st.sampled_from([a for a in FILTER_AXES if a != "pr"]))
def test_a_value_no_case_has_is_refused_naming_the_values_there_are(value, axis):
    present = sorted({str(getattr(c, axis)) for c in CASES})
    if value in present:
        return
    with pytest.raises(FilterError) as info:
        case_filter(f"{axis}={value}", cases=CASES)
    assert info.value.value == value and list(info.value.choices) == present
    assert f"valid: {', '.join(present)}" in str(info.value)


def test_nightly_and_arithmetic_refuse_a_bad_filter_value_before_running_anything(tmp_path):
    path = tmp_path / "cat.toml"
    path.write_text(CATALOGUE)
    store = tmp_path / "store.sqlite"
    for command in (["nightly", "--store", str(store), "--out", str(tmp_path / "suite")], ["arithmetic"]):
        result = run_cli(*command, "-c", str(path), "--filter", "dtype=fp16")
        assert result.returncode == 2, (command, result.stdout + result.stderr)
        assert "error: --filter: unknown dtype 'fp16'; did you mean 'f16'?" in result.stderr
    assert not store.exists() and not (tmp_path / "suite").exists()


def test_a_study_filter_value_no_case_has_names_the_study_key(tmp_path):
    (tmp_path / "cat.toml").write_text(CATALOGUE)
    study = tmp_path / "study.toml"
    study.write_text(textwrap.dedent("""\
        catalogue = "cat.toml"
        [ranges]
        r0 = [-1.0, 1.0]
        [cases]
        filter = "op=gem"
    """))
    result = run_cli("study", str(study))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{study}:5: cases.filter: unknown op 'gem'; did you mean 'gemm'?" in result.stderr


# -- explain: progress ------------------------------------------------------------------------------------

class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_explain_reports_its_stages_in_order():
    from e2egen.diagnose.explain import STAGES, explain_case

    case = next(c for c in CASES if c.id == "mm/gemm/m8/fwd/f32/nn/r0")
    heard: list[str] = []
    explanation = explain_case(case, device="cpu", progress=heard.append)
    assert heard[0] == "kernel run" and len(set(heard)) == len(heard)
    assert heard == [s for s in STAGES if s in heard]  # in STAGES' order
    assert set(heard) == set(explanation.timings)  # every stage that ran was announced, and only those


def test_explain_terms_reports_its_stages():
    from e2egen.diagnose.explain_terms import STAGES, explain_terms

    attention = cases_of(catalogue_text(textwrap.dedent("""
        [[suite]]
        name = "attn"
        op = "attention"
        dtypes = ["f32"]
        layouts = ["bhsd"]
        ranges = ["r0"]
        [[suite.config]]
        name = "s8"
        seq_q = 8
        seq_k = 8
        head_dim_qk = 8
    """)))[0]
    heard: list[str] = []
    explain_terms(attention, device="cpu", progress=heard.append)
    assert heard == list(STAGES)


def test_the_progress_bar_draws_on_a_terminal_and_stays_out_of_logs():
    stages = ("kernel run", "other ranges")
    terminal, log = Terminal(), io.StringIO()
    for stream in (terminal, log):
        with progress_bar(stages, stream=stream) as start:
            for stage in stages:
                start(stage)
    assert "explain: step 1/2: kernel run" in terminal.getvalue()
    assert "explain: step 2/2: other ranges" in terminal.getvalue()
    assert log.getvalue() == ""


# -- select --budget 0 ------------------------------------------------------------------------------------

def test_select_budget_0_chooses_nothing_beyond_the_pr_cases(tmp_path, capsys):
    (tmp_path / "configs.toml").write_text(CATALOGUE)
    fill_store(tmp_path / "e2e.sqlite", CASES, 1, lambda case, run: {"rms": 0.5 * case.tolerances["rms"]})
    status = main(["select", "-c", str(tmp_path / "configs.toml"), "--store", str(tmp_path / "e2e.sqlite"),
                   "--budget", "0", "--out", str(tmp_path / "selection.toml")])
    out = capsys.readouterr().out
    forced = sum(c.pr for c in CASES)
    assert status == 0 and forced and read_selection(tmp_path / "selection.toml") == {}
    assert f"the PR subset is the {forced} cases with pr = true in the catalogue" in out


# -- study: a catalogue given where a study goes; the sample it points at ------------------------------------

def test_study_given_a_catalogue_says_it_is_one(tmp_path):
    path = tmp_path / "configs.toml"
    path.write_text(CATALOGUE)
    result = run_cli("study", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert "this file is a catalogue (it has [[suite]] tables), not a study" in line
    assert re.match(rf"error: {re.escape(str(path))}:\d+: suite: ", line) and "title" not in line


def test_study_help_names_a_sample_that_exists():
    result = run_cli("study", "--help", env={**os.environ, "COLUMNS": "1000"})  # argparse does not wrap the path
    assert result.returncode == 0 and Path(sample_study()).is_file()
    assert sample_study() in result.stdout


def test_from_a_wheel_the_sample_study_and_version_are_there(tmp_path):
    from test_namespace import build_wheel, run

    wheel = build_wheel(tmp_path)
    site = tmp_path / "site"
    result = run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", str(site), str(wheel),
                  "-q"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    helped = run([sys.executable, "-m", "e2egen", "study", "--help"], cwd=cwd, PYTHONPATH=str(site), COLUMNS="1000")
    named = re.search(r"a sample: (\S+seed003\.toml)", helped.stdout)  # COLUMNS: argparse does not wrap it
    assert helped.returncode == 0 and named, helped.stdout + helped.stderr
    assert Path(named.group(1)).is_file() and Path(named.group(1)).is_relative_to(site)
    version = run([sys.executable, "-m", "e2egen", "--version"], cwd=cwd, PYTHONPATH=str(site))
    assert version.stdout.strip() == "e2egen " + wheel.name.split("-")[1]


# -- numba: pip users are told once ------------------------------------------------------------------------

WITHOUT_NUMBA = "import sys; sys.modules['numba'] = None  # as if not installed\n"


def python(script: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "E2E_METRICS_BACKEND"}
    return subprocess.run([sys.executable, "-c", WITHOUT_NUMBA + textwrap.dedent(script)], cwd=REPO,
                          env={**environment, **env}, capture_output=True, text=True)


def test_without_numba_the_command_says_so_once_as_a_note(tmp_path):
    path = tmp_path / "cat.toml"
    path.write_text(CATALOGUE)
    script = f"""
        from e2egen.cli import main
        from e2egen import metrics
        import torch
        sys.exit(main(["run", "mm/gemm/m8/fwd/f32/nn/r0", "-c", {str(path)!r}, "--device", "cpu"])
                 or main(["run", "mm/gemm/m8/fwd/f32/tt/r4", "-c", {str(path)!r}, "--device", "cpu"]))
    """
    result = python(script)
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "numba" in line]
    assert len(notes) == 1 and notes[0].startswith("note: numba is not installed"), result.stderr
    assert "pip install numba" in notes[0] and "E2E_METRICS_BACKEND=torch" in notes[0]
    assert "[torch]" in result.stdout  # the path it said it takes
    chosen = python(script, E2E_METRICS_BACKEND="torch")
    assert chosen.returncode == 0 and "numba" not in chosen.stderr, chosen.stderr


def test_without_numba_a_generated_suite_lists_the_notice_once(tmp_path):
    path = tmp_path / "cat.toml"
    path.write_text(CATALOGUE)
    assert run_cli("gen", str(path), "--out", str(tmp_path / "suite")).returncode == 0
    result = python(f"""
        import pytest
        sys.exit(pytest.main([{str(tmp_path / 'suite')!r}, "-q", "-p", "no:cacheprovider", "-n", "0", "-k", "gemm",
                              "--e2e-device", "cpu"]))
    """)
    assert result.returncode == 0, result.stdout[-3000:]
    assert result.stdout.count("Notice: numba is not installed") == 1, result.stdout[-3000:]
    assert "1 warning" in result.stdout


# -- CI templates and the sample-report script --------------------------------------------------------------

def test_ci_templates_install_the_cpu_torch_before_every_make_setup():
    for name in ("pr.yml", "nightly.yml"):
        text = (REPO / ".github" / "workflows" / name).read_text()
        script = "\n".join(line for line in text.splitlines() if not line.strip().startswith("#"))
        *before_each_setup, _ = script.split("make setup")
        assert before_each_setup, name
        for part in before_each_setup:  # each job: the CPU build goes into .venv before `make setup` runs
            assert 'pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu' in part, name
        assert re.search(r"#.*GPU runner", text), name  # a comment says how GPU runners differ


@pytest.mark.skipif(not Path("/bin/bash").exists(), reason="needs bash")
def test_make_sample_without_a_browser_stops_first_and_changes_no_tracked_file(tmp_path):
    script = REPO / "docs" / "sample-report" / "make_sample.sh"
    tracked = {p: p.read_bytes() for p in (REPO / "docs" / "sample-report").iterdir() if p.is_file()}
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    for tool in ("dirname", "mktemp", "cp", "sed", "awk", "ls", "mv"):  # what the script runs, but no browser
        for where in ("/usr/bin", "/bin"):
            if Path(where, tool).exists():
                (empty_bin / tool).symlink_to(Path(where, tool))
                break
    env = {"PATH": str(empty_bin), "HOME": str(tmp_path)}
    result = subprocess.run(["/bin/bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "needs headless Chromium or Chrome" in result.stderr and "CHROMIUM=" in result.stderr, result.stderr
    assert {p: p.read_bytes() for p in tracked} == tracked
