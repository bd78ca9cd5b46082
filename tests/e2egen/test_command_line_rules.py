"""Rules every command shares (issue 46): an OSError about a path is one line (exit 2); numeric options read only
plain ASCII numbers; two outputs of one command are never one file; repro lines quote undecodable file names."""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY_GEMM, catalogue_text, run_e2egen as main
from e2egen import cli
from e2egen.commands.arguments import OPTION_RULES

LONG = "x" * 300  # longer than any file system's NAME_MAX




@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs.toml").write_text(catalogue_text(TINY_GEMM), encoding="utf-8")
    (tmp_path / "In.toml").write_text((Path(__file__).parents[1] / "generator/data/rocmlir/PrGemm.toml").read_text())


# -- 2. a file name too long ----------------------------------------------------------------------
TOO_LONG = [
    ["validate", LONG + ".toml"],
    ["list", "-c", LONG],
    ["calibrate", "-c", LONG],
    ["gen", "configs.toml", "--out", LONG],
    ["runs", "--store", LONG],
    ["report", "--store", LONG],
    ["report", "--out", LONG],
    ["select", "--out", LONG],
    ["import-rocmlir", "In.toml", "-o", LONG],
    ["merge", "--store", LONG, "a.sqlite"],
    ["nightly", "--no-report", "--store", LONG],
    ["explain", "mm/gemm/m8/fwd/f32/nn/r0", "-c", LONG],
]


@pytest.mark.parametrize("argv", TOO_LONG, ids=lambda a: " ".join(a)[:40])
def test_a_file_name_too_long_is_one_line_naming_it(argv):
    status, _, err = main(*argv)
    assert status == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:") or "error:" in line]
    assert len(lines) == 1 and LONG in lines[0] and "file name too long" in lines[0], err


def test_an_oserror_without_a_path_is_still_a_fault(monkeypatch):
    """Only errors about a path the user gave are user errors; any other OSError keeps its traceback."""
    def boom(args):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_running(boom))
    with pytest.raises(OSError):
        cli.main(["x"])


def _parser_running(handler):
    parser = argparse.ArgumentParser()
    parser.add_argument("x")
    parser.set_defaults(handler=handler)
    return parser


# -- 6. numbers as users write them ---------------------------------------------------------------
def numeric_options() -> list[tuple[str, str]]:
    """(command, option) for every option of every subcommand whose type reads a number: found from the parser,
    so that an option added later is covered too."""
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found = []
    for command, subparser in sub.choices.items():
        for action in subparser._actions:
            if not action.option_strings or action.type is None:
                continue
            for sample in ("10", "2"):
                try:
                    value = action.type(sample)
                except (argparse.ArgumentTypeError, ValueError, TypeError):
                    continue
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    found.append((command, action.option_strings[-1]))
                    break
    return found


NUMERIC = numeric_options()


def test_the_numeric_options_are_found():
    assert {("nightly", "--workers"), ("select", "--budget"), ("run", "--seed"), ("calibrate", "--margin"),
            ("report", "--top"), ("nightly", "--drift")} <= set(NUMERIC)


@pytest.mark.parametrize("value", ["1_0", "\u0663", " 3", "3 ", "\uff13", "1\n", "0x10", "", "٣.5"])
@pytest.mark.parametrize("command, option", NUMERIC, ids=[f"{c} {o}" for c, o in NUMERIC])
def test_a_number_not_written_plainly_is_a_usage_error(command, option, value):
    status, _, err = main(command, option, value)
    assert status == 2 and "Traceback" not in err, err
    assert f"argument {option}: " in err and repr(value) in err, err


@pytest.mark.parametrize("command, option", NUMERIC, ids=[f"{c} {o}" for c, o in NUMERIC])
def test_plain_numbers_still_read(command, option):
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    (action,) = [a for a in sub.choices[command]._actions if option in a.option_strings]
    assert action.type("10") == 10 and action.type("+10") == 10


def test_type_int_and_float_become_the_plain_readers():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    p = sub.add_parser("x")
    p.add_argument("--n", type=int)
    p.add_argument("--f", type=float)
    from e2egen.commands.arguments import apply_option_rules

    apply_option_rules(sub)
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        parser.parse_args(["x", "--n", "1_0"])
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        parser.parse_args(["x", "--f", "1_0.5"])
    assert parser.parse_args(["x", "--n", "-3", "--f", "1e-3"]).n == -3


def test_a_budget_of_minus_zero_reads_as_zero():
    from e2egen.commands.arguments import plain_number
    from e2egen.nightly.pr_select import parse_budget

    value = plain_number(parse_budget)("-0")
    assert value == 0 and str(value) == "0.0"


# -- 8. two outputs of one command ----------------------------------------------------------------
def two_output_commands() -> list[tuple[str, str, str]]:
    """(command, file option, another output option) for every command with two or more outputs."""
    found = []
    for command, rules in OPTION_RULES.items():
        outputs = [(o, t.output_kind) for o, t in rules.items() if getattr(t, "output_kind", None)]
        for option, kind in outputs:
            if kind == "file":
                found += [(command, option, other) for other, _ in outputs if other != option]
    return found


@pytest.mark.parametrize("spelling", ["o5.toml", "./o5.toml", "link.toml"])
@pytest.mark.parametrize("command, option, other", two_output_commands(), ids=lambda x: str(x))
def test_two_outputs_naming_one_file_are_a_usage_error(tmp_path, command, option, other, spelling):
    (tmp_path / "link.toml").symlink_to(tmp_path / "o5.toml")  # dangling until something writes o5.toml
    sources = ["In.toml"] if command == "import-rocmlir" else []
    status, _, err = main(command, *sources, option, "o5.toml", other, spelling)
    assert status == 2 and "Traceback" not in err, err
    assert f"{option} o5.toml" in err and f"{other} {spelling}" in err and "are the same file" in err, err
    assert not (tmp_path / "o5.toml").exists()


@pytest.mark.parametrize("how", ["hard link", "symbolic link"])
def test_an_existing_file_under_two_names_is_one_output(tmp_path, how):
    (tmp_path / "o5.toml").write_text("keep\n")
    (os.link if how == "hard link" else os.symlink)(tmp_path / "o5.toml", tmp_path / "other.toml")
    status, _, err = main("import-rocmlir", "In.toml", "-o", "o5.toml", "--summary-md", "other.toml")
    assert status == 2 and "--out o5.toml and --summary-md other.toml are the same file" in err, err
    assert (tmp_path / "o5.toml").read_text() == "keep\n"


def test_import_rocmlir_summary_onto_the_catalogue_is_refused(tmp_path):
    status, _, err = main("import-rocmlir", "In.toml", "-o", "o5.toml", "--summary", "o5.toml")
    assert status == 2 and "--out o5.toml and --summary o5.toml are the same file" in err, err
    assert not (tmp_path / "o5.toml").exists()


# -- 7. repro lines name undecodable file names by their bytes --------------------------------------
@pytest.mark.skipif(sys.platform == "win32" or shutil.which("bash") is None, reason="needs bash and bytes file names")
def test_a_repro_names_an_undecodable_catalogue_by_its_real_bytes(tmp_path):
    from e2egen.generator.cases import expand
    from e2egen.generator.execute import Outcome, repro_command
    from e2egen.generator.loader import load_catalogue

    raw = os.fsencode(tmp_path) + b"/bad\xff it's.toml"
    try:
        with open(raw, "wb") as handle:
            handle.write(catalogue_text(TINY_GEMM).encode())
    except OSError:
        pytest.skip("the file system refuses a name that is not UTF-8")
    name = os.fsdecode(raw)
    case = expand(load_catalogue(name))[0]
    repro = Outcome(case, "failed", "r", "cpu", repro_command(case, "cpu", name)).repro  # after safe_text
    quoted = repro.split(" --catalogue ", 1)[1]
    assert "\\udcff" not in repro and quoted.startswith("$'"), repro
    printed = subprocess.run(["bash", "-c", f"printf %s {quoted}"], capture_output=True, check=True).stdout
    assert printed == raw


def test_plain_names_keep_shlex_quoting():
    from e2egen.invocation import shell_quote

    assert shell_quote("/a/configs.toml") == "/a/configs.toml"
    assert shell_quote("a b'c") == "'a b'\"'\"'c'"
