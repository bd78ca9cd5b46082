"""One user-error base class: every layer's user errors are UserErrors, and the CLI reports them all alike
(`error: ...` lines on stderr, exit status 2, no traceback). The commands never import the CLI."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY_GEMM, catalogue_text

from e2egen.cli import main
from e2egen.commands import run_command
from e2egen.errors import UsageError, UserError, closest
from e2egen.generator.case_filter import FilterError, case_filter
from e2egen.generator.errors import CatalogueError, Location, Problem, close_match, unknown
from e2egen.nightly.errors import NightlyError
from e2egen.nightly.store import UnknownRun
from e2egen.runner.errors import ImplError, ProblemError

GEMM_ID = "mm/gemm/m8/fwd/f32/nn/r0"


# -- the classes -------------------------------------------------------------------------------
def test_every_user_error_class_is_a_user_error():
    for cls in (CatalogueError, ProblemError, ImplError, NightlyError, UnknownRun, UsageError, FilterError):
        assert issubclass(cls, UserError), cls
    assert issubclass(ProblemError, ValueError) and issubclass(ImplError, ValueError)


def test_user_error_is_one_line_with_the_parts_it_has():
    err = UserError("expected a number", where="configs.toml:3", key="suite[0].n", value="x", choices=["a", "b"])
    assert str(err) == "configs.toml:3: suite[0].n: expected a number" and err.lines() == [str(err)]
    assert (err.value, err.choices) == ("x", ("a", "b"))
    assert str(UserError("just this")) == "just this" and str(UsageError("bad", key="--seed")) == "--seed: bad"


def test_subclasses_keep_their_constructors_and_texts():
    problem = ProblemError("k", 3, "must be >= 4", choices=[4, 5])
    assert (problem.key, problem.value, problem.message, problem.choices) == ("k", 3, "must be >= 4", (4, 5))
    assert str(problem) == "k: must be >= 4" and problem.lines() == ["k: must be >= 4"]
    impl = ImplError("pkg:fn", "cannot import module 'pkg'")
    assert (impl.impl, impl.message) == ("pkg:fn", "cannot import module 'pkg'")
    assert str(impl) == "impl 'pkg:fn': cannot import module 'pkg'"
    assert str(NightlyError("--shard: bad")) == "--shard: bad"
    assert str(UsageError("no case 'x'")) == "no case 'x'"


def test_catalogue_error_prints_one_line_per_problem():
    problems = [Problem(Location("c.toml", 3), "suite[0].op", "unknown op 'gem'"), Problem(Location("c.toml"), "", "bad")]
    err = CatalogueError(problems)
    assert err.lines() == ["c.toml:3: suite[0].op: unknown op 'gem'", "c.toml: bad"]
    assert str(err) == "\n".join(err.lines()) and err.problems == tuple(problems)
    one = CatalogueError(problems[:1])
    assert str(one) == "c.toml:3: suite[0].op: unknown op 'gem'" and (one.where, one.key) == ("c.toml:3", "suite[0].op")


def test_one_did_you_mean_keeps_both_message_styles():
    assert closest("fp16", ["f16", "f32"]) == "f16" and closest("zzz", ["f16"]) is None
    assert close_match("fp16", ["f16", "f32"]) == "; did you mean 'f16'?" and close_match("zzz", ["f16"]) == ""
    assert unknown("dtype", "fp16", ["f32", "f16"]) == "unknown dtype 'fp16'; did you mean 'f16'? valid: f16, f32"
    err = ProblemError.unknown("dtype", "fp16", ["f32", "f16"])
    assert err.message == "unknown dtype 'fp16' (did you mean 'f16'?); valid: f32, f16" and err.choices == ("f32", "f16")


def test_case_filter_is_a_catalogue_rule_with_a_user_error():
    with pytest.raises(FilterError) as info:
        case_filter("dtyp=f16")
    assert str(info.value) == ("--filter: unknown axis 'dtyp'; did you mean 'dtype'? valid: config, direction, "
                               "dtype, layout, op, pr, range, suite")
    assert info.value.value == "dtyp" and "dtype" in info.value.choices
    with pytest.raises(FilterError, match=r"^cases\.filter: unknown axis"):
        case_filter("x=1", key="cases.filter")


# -- the CLI: every user error is `error: ...`, exit 2, no traceback -----------------------------
def cli(capsys, *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, err


@pytest.fixture
def catalogue(write_catalogue) -> str:
    return str(write_catalogue(catalogue_text(TINY_GEMM)))


def test_unknown_case_id_is_a_usage_error(capsys, catalogue):
    status, err = cli(capsys, "run", "mm/gemm/m8/fwd/f32/nn/r5", "-c", catalogue)
    assert status == 2
    assert err.startswith(f"error: {catalogue}: no case 'mm/gemm/m8/fwd/f32/nn/r5'; did you mean 'mm/gemm/m8/fwd/f32/nn/r")


def test_malformed_toml_is_a_catalogue_error(capsys, write_catalogue):
    path = write_catalogue(catalogue_text(TINY_GEMM) + "\nbroken = [1, 2\n")
    status, err = cli(capsys, "validate", str(path))
    assert status == 2 and err.startswith(f"error: {path}:") and "invalid TOML" in err


def test_every_catalogue_problem_gets_its_own_error_line(capsys, write_catalogue):
    path = write_catalogue(catalogue_text(TINY_GEMM.replace('"f32"', '"fp16"').replace('"nn"', '"nx"')))
    status, err = cli(capsys, "validate", str(path))
    lines = err.splitlines()
    assert status == 2 and len(lines) >= 2 and all(line.startswith(f"error: {path}:") for line in lines)
    assert any("'fp16'" in line for line in lines) and any("'nx'" in line for line in lines)


def test_bad_filter_is_a_user_error(capsys, catalogue):
    status, err = cli(capsys, "list", "-c", catalogue, "--filter", "dtyp=f32")
    assert status == 2 and err.startswith("error: --filter: unknown axis 'dtyp'; did you mean 'dtype'? valid: config")


def test_store_errors_are_nightly_errors_reported_as_they_are(capsys, tmp_path, catalogue):
    not_a_store = tmp_path / "notes.sqlite"
    not_a_store.write_text("these are notes, not a database\n" * 100)
    status, err = cli(capsys, "runs", "--store", str(not_a_store))
    assert status == 2 and err.startswith(f"error: {not_a_store}: not a results store")
    missing = tmp_path / "missing.sqlite"
    for argv in (["runs"], ["report"], ["calibrate", "-c", catalogue], ["select", "-c", catalogue]):
        status, err = cli(capsys, *argv, "--store", str(missing))
        assert status == 2 and err == f"error: {missing}: no results store here (run `e2egen nightly`, or give --store)\n", argv
    assert not missing.exists()


def test_bad_shard_is_a_nightly_error(capsys, tmp_path, catalogue):
    status, err = cli(capsys, "nightly", "-c", catalogue, "--store", str(tmp_path / "s.sqlite"), "--shard", "3/2")
    assert status == 2 and err.startswith("error: --shard 3/2: I must be between 1 and N")
    status, err = cli(capsys, "merge", "nothing-here", "--store", str(tmp_path / "s.sqlite"))
    assert status == 2 and err.startswith("error: merge: 'nothing-here' is neither a records file")


def test_problem_error_in_explain_names_the_case(capsys, catalogue, monkeypatch):
    from e2egen import runner

    def refusing(*args, **kwargs):  # the catalogue passed; this run's problem does not
        raise ProblemError("seed", 2**64, "expected an integer in [0, 2**64)")

    monkeypatch.setattr(runner, "run", refusing)
    status, err = cli(capsys, "explain", GEMM_ID, "-c", catalogue, "--device", "cpu")
    assert status == 2 and err.startswith(f"error: {GEMM_ID}: seed: expected an integer in [0, 2**64)")


def test_an_out_of_range_seed_is_refused_by_the_command_line(capsys, catalogue):
    with pytest.raises(SystemExit) as info:
        main(["explain", GEMM_ID, "-c", catalogue, "--seed", str(2**64), "--device", "cpu"])
    assert info.value.code == 2 and "--seed: expected an integer in [0, 2**64)" in capsys.readouterr().err


@pytest.mark.parametrize("error, line", [
    (ProblemError.unknown("dtype", "fp16", ["f16", "f32"]),
     "error: dtype: unknown dtype 'fp16' (did you mean 'f16'?); valid: f16, f32"),
    (ImplError("nowhere:fn", "cannot import module 'nowhere'"), "error: impl 'nowhere:fn': cannot import module 'nowhere'"),
    (NightlyError("--budget: expected a time"), "error: --budget: expected a time"),
    (CatalogueError([Problem(Location("a.toml", 1), "x", "bad"), Problem(Location("a.toml", 2), "", "worse")]),
     "error: a.toml:1: x: bad\nerror: a.toml:2: worse"),
])
def test_any_user_error_raised_in_a_handler_exits_2(capsys, monkeypatch, error, line):
    def raising(*args, **kwargs):
        raise error

    monkeypatch.setattr(run_command, "find_case", raising)
    status, err = cli(capsys, "run", GEMM_ID)
    assert status == 2 and err == line + "\n"


# -- the import structure ----------------------------------------------------------------------
def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package
                package = ".".join(("e2egen", *path.relative_to(REPO / "e2egen").parent.parts))
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_no_command_imports_the_cli():
    modules = sorted((REPO / "e2egen" / "commands").glob("*.py"))
    assert len(modules) >= 7
    for path in modules:
        imports = imported_modules(path)
        assert not any(name == "e2egen.cli" or name.startswith("e2egen.cli.") for name in imports), path.name


def test_the_errors_module_is_a_leaf():
    imports = imported_modules(REPO / "e2egen" / "errors.py")
    assert imports, "expected some standard-library imports"
    for name in imports:
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names or name == "__future__.annotations", name
