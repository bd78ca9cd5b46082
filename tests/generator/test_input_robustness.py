"""Input that must be a message (exit 2), never a traceback; values a catalogue must not slip through; what the
generator writes stays inert whatever the catalogue holds; the Markdown report shows case data as text.

Most commands run in-process (`cli.main`, fast); what needs a real process boundary (a broken pipe, pytest
collecting a generated suite) runs in a subprocess.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, TINY_GEMM, catalogue_text, line_number, problems_of, run_e2egen as main
from e2egen.generator.loader import parse_catalogue

CASE = "mm/gemm/m8/fwd/f32/nn/r0"  # a case of TINY_GEMM




def usage_error(status: int, err: str, *needles: str) -> None:
    assert status == 2, err
    assert "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """Commands run in-process from tmp_path: a default output (build/e2e, results/) never lands in the checkout."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def gemm_catalogue(tmp_path) -> Path:
    path = tmp_path / "configs.toml"
    path.write_text(catalogue_text(TINY_GEMM), encoding="utf-8")
    return path


# -- the catalogue file itself ------------------------------------------------------------------
def test_catalogue_bytes_that_are_not_utf8_name_the_file_and_line(tmp_path):
    text = catalogue_text(TINY_GEMM).encode()
    line = text[:text.index(b'name = "m8"')].count(b"\n") + 1
    path = tmp_path / "latin1.toml"
    path.write_bytes(text.replace(b'name = "m8"', b'name = "m\xe98"'))
    status, _, err = main("validate", str(path))
    usage_error(status, err, f"{path}:{line}:", "not UTF-8", "0xe9")


def test_a_utf8_byte_order_mark_is_accepted_and_lines_still_count(tmp_path):
    text = catalogue_text(TINY_GEMM)
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    status, out, err = main("validate", str(path))
    assert status == 0 and "ok: 1 suites" in out, err
    bad = "\ufeff" + text.replace("k = 16", "kk = 16")
    (problem,) = problems_of(bad)
    assert problem.startswith(f"configs.toml:{line_number(text, 'k = 16')}:"), problem


def test_arrays_nested_deeper_than_the_reader_goes_are_a_message_at_their_line(tmp_path):
    text = catalogue_text(TINY_GEMM) + "\n[extra]\nx = " + "[" * 3000 + "]" * 3000 + "\n"
    path = tmp_path / "deep.toml"
    path.write_text(text, encoding="utf-8")
    status, _, err = main("validate", str(path))
    usage_error(status, err, f"{path}:{line_number(text, 'x = [[')}:", "nested too deeply")


NESTINGS = {  # where a deeply nested value can sit: each is one message at its line, never a RecursionError
    "inline tables in an unknown table": lambda d: "\n[extra]\nx = " + "{a = " * d + "1" + "}" * d + "\n",
    "arrays of inline tables": lambda d: "\n[extra]\nx = " + "[{a = " * d + "1" + "}]" * d + "\n",
    "a shape parameter": lambda d: None,
    "dotted keys": lambda d: "\n" + ".".join(["a"] * d) + " = 1\n",
    "a table header": lambda d: "\n[" + ".".join(["a"] * d) + "]\n",
}


@pytest.mark.parametrize("depth", [60, 400, 5000])
@pytest.mark.parametrize("where", NESTINGS)
def test_values_nested_deeply_anywhere_are_one_message_with_a_line(where, depth):
    text = catalogue_text(TINY_GEMM)
    tail = NESTINGS[where](depth)
    if tail is None:  # in a config: an inline table, then an array, as the value of k
        text = text.replace("k = 16", "k = " + "{a = " * depth + "[" * depth + "1" + "]" * depth + "}" * depth)
    else:
        text += tail
    problems = problems_of(text)
    assert problems and all(p.startswith("configs.toml") for p in problems), problems
    assert all(len(p) < 2000 for p in problems), [len(p) for p in problems]


def test_a_catalogue_that_is_a_directory(tmp_path):
    status, _, err = main("validate", str(tmp_path))
    usage_error(status, err, str(tmp_path), "is a directory")


@pytest.mark.parametrize("kind", ["directory", "binary"])
def test_a_pr_selection_that_is_a_directory_or_binary_names_the_file(tmp_path, kind):
    selection = tmp_path / "selection.toml"
    if kind == "directory":
        selection.mkdir()
    else:
        selection.write_bytes(bytes(range(256)) * 4)
    path = tmp_path / "configs.toml"
    path.write_text('pr_selection = "selection.toml"\n' + catalogue_text(TINY_GEMM), encoding="utf-8")
    status, _, err = main("validate", str(path))
    usage_error(status, err, "selection.toml", "PR selection file",
                "is a directory" if kind == "directory" else "not UTF-8")


# -- names ---------------------------------------------------------------------------------------
def test_a_suite_name_too_long_for_a_file_name_is_refused_at_validation(tmp_path):
    name = "s" * 300
    path = tmp_path / "configs.toml"
    path.write_text(catalogue_text(TINY_GEMM.replace('name = "mm"', f'name = "{name}"')), encoding="utf-8")
    status, _, err = main("validate", str(path))
    usage_error(status, err, "suite[0].name", "at most 100 characters", "has 300")
    status, _, err = main("gen", str(path), "--out", str(tmp_path / "out"))
    usage_error(status, err, "at most 100 characters")
    assert not (tmp_path / "out").exists()
    parse_catalogue(catalogue_text(TINY_GEMM.replace('name = "mm"', f'name = "{"s" * 100}"')))


def test_suites_whose_modules_differ_only_in_case_are_refused():
    text = catalogue_text(TINY_GEMM, TINY_GEMM.replace('name = "mm"', 'name = "MM"'))
    assert any("would share the test module" in p for p in problems_of(text))


# -- output paths --------------------------------------------------------------------------------
def _unwritable_directory(tmp_path: Path) -> Path:
    """A directory no file can be created in: read-only for a user; for root (who ignores modes), /sys."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    for candidate in (locked, Path("/sys")):
        try:
            handle, name = tempfile.mkstemp(dir=candidate)
        except OSError:
            return candidate
        os.close(handle)
        os.unlink(name)
    pytest.skip("no unwritable directory on this machine")


OUTPUT_OPTIONS = [  # (command line before the path, the option, directory or file); every other output in tmp_path
    (["gen", "configs.toml", "--out"], "--out", "directory"),
    (["nightly", "--no-report", "--out", "suite", "--records-dir", "runs", "--store"], "--store", "file"),
    (["nightly", "--no-report", "--out", "suite", "--store", "s.sqlite", "--records-dir"], "--records-dir", "directory"),
    (["report", "--store", "s.sqlite", "--out"], "--out", "directory"),
    (["select", "--store", "s.sqlite", "--out"], "--out", "file"),
]


@pytest.mark.parametrize("where", ["wrong kind", "under a file", "unwritable"])
@pytest.mark.parametrize("command, option, kind", OUTPUT_OPTIONS, ids=[" ".join(c[0]) for c in OUTPUT_OPTIONS])
def test_output_paths_are_checked_before_anything_runs(gemm_catalogue, tmp_path, where, command, option, kind):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    if where == "wrong kind":
        path, needle = (a_file, "is a file, not a directory") if kind == "directory" else (tmp_path, "is a directory, not a file")
    elif where == "under a file":
        path, needle = a_file / "below", f"{a_file} is a file, not a directory"
    else:
        path, needle = _unwritable_directory(tmp_path) / "out", "no file can be created in"
    status, _, err = main(*command, str(path))
    usage_error(status, err, f"argument {option}:", needle)
    assert a_file.read_text() == "x"
    assert not (tmp_path / "suite").exists() and not (tmp_path / "s.sqlite").exists()


# -- seeds ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-1", str(2 ** 64), "seven"])
@pytest.mark.parametrize("command", [["run", CASE, "-c", "configs.toml"], ["explain", CASE, "-c", "configs.toml"],
                                     ["gen", "configs.toml", "--out", "suite"],
                                     ["nightly", "-c", "configs.toml", "--out", "suite", "--store", "s.sqlite", "--no-report"]],
                         ids=lambda c: c[0])
def test_one_rule_for_seeds_everywhere(gemm_catalogue, tmp_path, command, value):
    status, _, err = main(*command, "--seed", value)
    usage_error(status, err, "argument --seed:", "an integer in [0, 2**64)", repr(value))
    assert not (tmp_path / "suite").exists() and not (tmp_path / "s.sqlite").exists()


def test_the_largest_seed_runs(gemm_catalogue):
    status, out, err = main("run", CASE, "-c", str(gemm_catalogue), "--device", "cpu", "--seed", str(2 ** 64 - 1))
    assert status == 0 and f"seed={2 ** 64 - 1}" in out, out + err


# -- devices -------------------------------------------------------------------------------------
def test_an_unknown_e2e_device_names_the_variable_and_the_choices(gemm_catalogue, monkeypatch):
    monkeypatch.setenv("E2E_DEVICE", "gpu")
    status, _, err = main("run", CASE, "-c", str(gemm_catalogue))
    usage_error(status, err, "$E2E_DEVICE: unknown device 'gpu'; valid: cpu, cuda, cuda:N")


@pytest.fixture
def no_cuda(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("E2E_ALLOW_MISSING_DEVICE", raising=False)
    monkeypatch.delenv("E2E_DEVICE", raising=False)


@pytest.mark.parametrize("how", ["option", "variable"])
def test_a_device_asked_for_and_missing_is_an_error_unless_skipping_is_allowed(gemm_catalogue, no_cuda, monkeypatch, how):
    args = ["run", CASE, "-c", str(gemm_catalogue)] + (["--device", "cuda"] if how == "option" else [])
    if how == "variable":
        monkeypatch.setenv("E2E_DEVICE", "cuda")
    status, out, err = main(*args)
    usage_error(status, err, "device 'cuda' requested but CUDA is not available", "E2E_ALLOW_MISSING_DEVICE=1")
    assert "[SKIPPED]" not in out
    monkeypatch.setenv("E2E_ALLOW_MISSING_DEVICE", "1")
    status, out, err = main(*args)
    assert status == 0 and "[SKIPPED]" in out and "CUDA is not available" in out, out + err


def test_the_default_device_is_never_an_error(gemm_catalogue, no_cuda):
    status, out, err = main("run", CASE, "-c", str(gemm_catalogue))
    assert status == 0 and "device=cpu" in out, out + err


def _plugin_checks_the_device() -> bool:
    return "check_device" in (REPO / "generator" / "plugin.py").read_text(encoding="utf-8")


def test_under_pytest_a_bad_device_or_seed_is_one_usage_error(gemm_catalogue, tmp_path):
    out = tmp_path / "suite"
    assert main("gen", str(gemm_catalogue), "--out", str(out))[0] == 0
    env = {**os.environ, "E2E_DEVICE": "gpu"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)],
                            cwd=tmp_path, capture_output=True, text=True, env=env)
    text = result.stdout + result.stderr
    assert result.returncode == 4 and "E2E_DEVICE" in text and "Traceback" not in text, text
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out), "--e2e-global-seed", "-1"],
                            cwd=tmp_path, capture_output=True, text=True)
    text = result.stdout + result.stderr
    assert result.returncode == 4 and "--e2e-global-seed" in text and "[0, 2**64)" in text, text


# -- broken pipe ----------------------------------------------------------------------------------
def test_output_cut_short_by_its_reader_is_no_traceback():
    command = f"set -o pipefail; {sys.executable} -m e2egen list -c configs.toml | head -1"
    result = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True)
    assert result.stdout.count("\n") == 1
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr and "Exception" not in result.stderr, result.stderr
    assert result.returncode == 141


# -- what gen writes ------------------------------------------------------------------------------
def test_a_catalogue_name_with_a_line_break_and_code_cannot_run_code_at_collection(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    # Each line is valid both as Python and in pytest.ini: written raw into the headers, the second would run.
    name = "cat\n[__name__]\nx= open('PWNED', 'w').close()\n#.toml"
    path = work / name
    path.write_text(catalogue_text(TINY_GEMM.replace('name = "mm"', 'name = "mm"\ndescription = """x\n"""')), encoding="utf-8")
    out = work / "suite"
    status, _, err = main("gen", str(path), "--out", str(out))
    assert status == 0, err
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(out)],
                            cwd=work, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_case[mm/gemm/m8/fwd/f32/nn/r0]" in result.stdout
    assert not (work / "PWNED").exists() and not (out / "PWNED").exists()
    for generated in ("conftest.py", "pytest.ini", "test_mm.py"):
        text = (out / generated).read_text(encoding="utf-8")
        header = text.splitlines()[0]
        assert header.startswith('# GENERATED by e2egen from "') and "PWNED" in header, header
        assert "\nx= open(" not in text


def test_generated_literals_round_trip_and_refuse_other_objects():
    import ast
    import math

    from e2egen.generator.render import comment_text, python_literal

    value = {"a\n'\"": [1, 2.5, float("inf"), -float("inf"), None, True, ("x",), {"k": "\u2028\\"}]}
    text = python_literal(value)
    assert "\n" not in text
    back = eval(text, {"__builtins__": {"float": float}})  # noqa: S307: the literal we wrote
    assert back["a\n'\""][:2] == [1, 2.5] and math.isinf(back["a\n'\""][2]) and back["a\n'\""][4:] == [None, True, ("x",), {"k": "\u2028\\"}]
    assert ast.literal_eval(python_literal({"x": [1, "y"]})) == {"x": [1, "y"]}
    with pytest.raises(TypeError):
        python_literal({"x": object()})
    comment = comment_text('a"""\nb\r\u2028c')
    assert "\n" not in comment and "\r" not in comment and '"""' not in comment and "\u2028" not in comment


# -- the Markdown report --------------------------------------------------------------------------
def test_markdown_shows_html_from_case_data_as_text():
    from e2egen.nightly.report.markdown import _text, table

    script, image = "<script>alert(1)</script>", '<img src=x onerror="alert(2)">'
    lines = table(["case", "reason", "repro"],
                  [[f"s/{script}", f"kernel raised: {image} | and\nmore", f"`e2egen run 'x`y{script}'`"]])
    row = lines[2]
    assert "<script>" not in row.replace(f"`e2egen run 'x`y{script}'``", "") and "<img" not in row
    assert "&lt;script>" in row and "&lt;img src=x onerror" in row
    assert "``e2egen run 'x`y<script>alert(1)</script>'``" in row  # a code span: shown verbatim, not closed early
    assert "\\| and more" in row and row.count("\n") == 0
    assert _text("a & b <b>") == "a &amp; b &lt;b>"


# -- catalogue values -----------------------------------------------------------------------------
@pytest.mark.parametrize("marker", ["xfail", "skip", "skipif", "usefixtures", "parametrize", "filterwarnings", "timeout", "pr"])
def test_markers_that_change_how_pytest_runs_a_case_are_refused(marker):
    text = catalogue_text(TINY_GEMM.replace('op = "gemm"', f'op = "gemm"\nmarkers = ["slow", "{marker}"]'))
    (problem,) = problems_of(text)
    assert f"suite[0].markers[1]: '{marker}' is" in problem and "catalogue markers only label cases" in problem
    assert problem.startswith(f"configs.toml:{line_number(text, 'markers =')}:")


def test_an_impl_module_that_exits_on_import_is_an_impl_error(tmp_path, monkeypatch):
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\ndef gemm(a, b):\n    return a @ b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "configs.toml"
    path.write_text(catalogue_text(TINY_GEMM.replace('op = "gemm"', 'op = "gemm"\nimpl = "exits_on_import:gemm"')))
    for command in (["validate", str(path)], ["gen", str(path), "--out", str(tmp_path / "out")]):
        status, out, err = main(*command)
        usage_error(status, err, "suite[0].impl", "exits_on_import", "sys.exit(0)")
        assert "ok" not in out


def test_gemm_batch_0_is_refused_and_batch_1_is_batched():
    from e2egen.generator.cases import expand

    text = catalogue_text(TINY_GEMM.replace("k = 16", "k = 16\nbatch = 0"))
    (problem,) = problems_of(text)
    assert problem == (f"configs.toml:{line_number(text, 'batch = 0')}: suite[0].config[0].batch: expected an integer >= 1, "
                       "got 0; batch counts the matrices; leave it out for a plain 2-d gemm")
    case = expand(parse_catalogue(catalogue_text(TINY_GEMM.replace("k = 16", "k = 16\nbatch = 1"))))[0]
    assert case.problem().input_shapes["a"] == (1, 8, 16)


def test_a_description_must_be_a_string():
    text = catalogue_text(TINY_GEMM.replace('op = "gemm"', 'op = "gemm"\ndescription = 5'))
    (problem,) = problems_of(text)
    assert problem == f"configs.toml:{line_number(text, 'description')}: suite[0].description: expected a string, got an integer (5)"
    parse_catalogue(catalogue_text(TINY_GEMM.replace('op = "gemm"', 'op = "gemm"\ndescription = "square gemms"')))


def test_a_suite_excluded_down_to_no_case_is_an_error_naming_it(gemm_catalogue):
    text = catalogue_text(TINY_GEMM.replace('ranges = ["r0", "r4"]', 'ranges = ["r0", "r4"]\nexclude = [{ layouts = ["nn", "tt"] }]'))
    (problem,) = problems_of(text)
    assert problem.startswith(f"configs.toml:{line_number(text, 'exclude =')}: suite[0].exclude: suite 'mm' has no case left")
    config_only = TINY_GEMM + 'exclude = [{ ranges = ["r0", "r4"] }]\n'
    assert "suite 'mm' has no case left" in problems_of(catalogue_text(config_only))[0]
    partly = TINY_GEMM.replace('ranges = ["r0", "r4"]', 'ranges = ["r0", "r4"]\nexclude = [{ layouts = ["nn"] }]')
    parse_catalogue(catalogue_text(partly))


def test_lines_count_real_headers_not_header_like_lines_in_strings():
    description = textwrap.dedent('''
        description = """
        [[suite]]
        name = "not-a-suite" # a quote \\"""
        [[suite.config]]
        kk = 1
        """
        markers = ["a#b", 'c[[d']''')
    suite = TINY_GEMM.replace('op = "gemm"', 'op = "gemm"' + description) + textwrap.dedent("""
        [[suite.config]]
        name = "m16"
        m = 16
        n = 16
        kk = 16
        """)
    text = catalogue_text(suite)
    problems = [p for p in problems_of(text) if "kk" in p]
    assert len(problems) == 1 and problems[0].startswith(f"configs.toml:{line_number(text, 'kk = 16')}: suite[0].config[1].kk"), problems
    bad_op = catalogue_text(TINY_GEMM.replace('name = "mm"', 'name = "mm"\ndescription = """\n[[suite]]\n"""')
                            .replace('op = "gemm"', 'op = "gemmm"'))
    (problem,) = problems_of(bad_op)
    assert problem.startswith(f"configs.toml:{line_number(bad_op, 'op = ')}: suite[0].op"), problem
