"""Bad input is one located message, exit 2 (issue 46): the PR selection file, seeds, line numbers after
Unicode line separators, one message per mistake, message wording, unknown rocMLIR keys."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import REPO, TINY_GEMM, catalogue_text, line_number, problems_of, run_e2egen as main
from e2egen.generator.errors import CatalogueError, unknown
from e2egen.generator.loader import load_catalogue, parse_catalogue
from e2egen.generator.rocmlir import read_rocmlir
from e2egen.generator.toml_lines import key_lines

CASE = "mm/gemm/m8/fwd/f32/nn/r0"  # a case of TINY_GEMM
SEED_LINE = next(line for line in catalogue_text().splitlines() if line.startswith("seed ="))




@pytest.fixture
def with_selection(tmp_path, monkeypatch):
    """Write a catalogue naming ps.toml and ps.toml holding `text`; returns the catalogue's path."""
    monkeypatch.chdir(tmp_path)

    def write(text: str) -> Path:
        catalogue = tmp_path / "configs.toml"
        catalogue.write_text('pr_selection = "ps.toml"\n' + catalogue_text(TINY_GEMM), encoding="utf-8")
        (tmp_path / "ps.toml").write_text(textwrap.dedent(text), encoding="utf-8")
        return catalogue

    return write


# -- 1. the PR selection file ---------------------------------------------------------------------
BAD_SELECTIONS = [
    ("case = 5\n", 1, "case", ["expected [[case]] tables", "an integer (5)"]),
    ('case = "tiny"\n', 1, "case", ["expected [[case]] tables", "a string ('tiny')"]),
    ('[[case]]\nid = "nope/x"\n', 2, "case[0].id", ["'nope/x' is not a case id", "suite/op/config/direction/dtype/layout/range"]),
    (f'[[case]]\nid = "{CASE}"\n\n[[case]]\nid = "{CASE}"\n', 5, "case[1].id", ["selected twice", "ps.toml:2)"]),
    (f'[[case]]\nid = "{CASE}"\nwhy = 5\n', 3, "case[0].why", ["expected a string, got an integer (5)"]),
    (f'[[case]]\nid = "{CASE}"\nextra = 1\n', 3, "case[0].extra", ["unknown key 'extra'", "valid: id, why"]),
    (f'[[case]]\nidd = "{CASE}"\n', 2, "case[0].idd", ["did you mean 'id'?"]),
    ('[[case]]\nwhy = "x"\n', 1, "case[0]", ["missing: expected id"]),
    ("cases = []\n", 1, "cases", ["unknown key 'cases'", "did you mean 'case'?"]),
]


@pytest.mark.parametrize("text, line, key, needles", BAD_SELECTIONS, ids=[b[2] + ":" + b[0][:12] for b in BAD_SELECTIONS])
@pytest.mark.parametrize("command", ["validate", "gen"])
def test_a_bad_selection_file_is_one_located_message(with_selection, text, line, key, needles, command):
    catalogue = with_selection(text)
    status, _, err = main(*([command, str(catalogue)] + (["--out", "suite"] if command == "gen" else [])))
    assert status == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {catalogue.parent / 'ps.toml'}:{line}: {key}: "), err
    for needle in needles:
        assert needle in lines[0], err


def test_what_select_writes_still_validates(with_selection):
    from e2egen.generator.cases import expand
    from e2egen.nightly import pr_select
    from e2egen.nightly.evidence import Evidence

    catalogue = with_selection("")
    cases = expand(load_catalogue(catalogue))
    prices = pr_select.price_from_durations(cases, {}, "cpu")
    selection = pr_select.select(cases, Evidence(runs=(), asked=1, cases={}), prices, 3600.0)
    assert selection.chosen
    text = pr_select.render(selection, budget_text="1h on cpu", catalogue=str(catalogue))
    (catalogue.parent / "ps.toml").write_text(text, encoding="utf-8")
    loaded = load_catalogue(catalogue)
    assert dict(loaded.pr_selection) == {pick.case.id: pick.why for pick in selection.chosen}


# -- 3. line numbers after characters str.splitlines() takes for line ends ------------------------
@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
@pytest.mark.parametrize("where", ["comment", "string"])
def test_unicode_line_separators_do_not_shift_line_numbers(separator, where):
    head = f"# one{separator}two\n" if where == "comment" else f'# x\nfirst = "a{separator}b"\n'
    text = head + catalogue_text(TINY_GEMM).replace('name = "m8"', 'name = "m8"\nkernal = 3')
    messages = problems_of(text)
    expected = text.split("\n").index("kernal = 3") + 1
    assert any(m.startswith(f"configs.toml:{expected}: ") and "kernal" in m for m in messages), messages


def test_key_lines_count_only_lf_and_crlf():
    text = '# a\u2028b\u0085c\r\nx = 1\ny = "\u2029"\nz = 2\n'
    lines = key_lines(text)
    assert lines[("x",)] == 2 and lines[("y",)] == 3 and lines[("z",)] == 4


def test_rocmlir_comments_and_lines_after_a_line_separator():
    text = (REPO / "tests/generator/data/rocmlir/PrGemm.toml").read_text(encoding="utf-8")
    text = "# note\u2028more\n" + text.replace("[[suite.test.exclude]]\n", "[[suite.test.exclude]]\nbogus = 5\n", 1)
    with pytest.raises(CatalogueError) as info:
        read_rocmlir(text, "In.toml")
    expected = text.split("\n").index("bogus = 5") + 1
    assert [str(p).split(": ")[0] for p in info.value.problems] == [f"In.toml:{expected}"]


# -- 4. one rule for seeds ------------------------------------------------------------------------
@pytest.mark.parametrize("value, shown", [(str(2 ** 64), str(2 ** 64)), ("-1", "-1"), ('"3"', "a string ('3')"),
                                          ("true", "a boolean (True)"), ("1.5", "a number (1.5)")])
def test_the_catalogue_seed_follows_the_command_line_rule(value, shown):
    text = catalogue_text(TINY_GEMM).replace(SEED_LINE, f"seed = {value}", 1)
    messages = problems_of(text)
    assert messages == [f"configs.toml:{line_number(text, 'seed =')}: seed: expected an integer in [0, 2**64), got {shown}"]


def test_the_largest_catalogue_seed_loads():
    text = catalogue_text(TINY_GEMM).replace(SEED_LINE, f"seed = {2 ** 64 - 1}", 1)
    assert parse_catalogue(text, "configs.toml").seed == 2 ** 64 - 1


# -- 5. one message for one mistake ---------------------------------------------------------------
@pytest.mark.parametrize("value", ["[1.0, -1.0]", "[1.0, nan]", "[-inf, 1.0]", "[1.0]", '"wide"',
                                   '{ range = [2, 1], data = "integers" }', '{ range = [0, 1], data = "nope" }'])
def test_a_range_defined_but_invalid_is_one_message_not_also_unknown(value):
    text = catalogue_text(TINY_GEMM).replace("r0 = [-1.0, 1.0]", f"r0 = {value}")
    assert f"r0 = {value}" in text
    messages = problems_of(text)
    assert len(messages) == 1 and "ranges.r0" in messages[0], messages
    assert not any("unknown range" in m for m in messages), messages


def test_an_undefined_range_is_still_unknown():
    messages = problems_of(catalogue_text(TINY_GEMM).replace('ranges = ["r0", "r4"]', 'ranges = ["r0", "r9"]'))
    assert len(messages) == 1 and "unknown range 'r9'" in messages[0] and "valid: r0, r4" in messages[0], messages


@pytest.mark.parametrize("value", ["-1", "-5"])
def test_a_gemm_batch_below_its_minimum_is_one_message(value):
    text = catalogue_text(TINY_GEMM).replace('name = "m8"', f'name = "m8"\nbatch = {value}')
    messages = problems_of(text)
    assert len(messages) == 1 and "batch" in messages[0] and "expected an integer >= 1" in messages[0], messages


# -- 9. wording -----------------------------------------------------------------------------------
def test_an_empty_list_is_called_empty():
    messages = problems_of(catalogue_text(TINY_GEMM).replace('dtypes = ["f32"]', "dtypes = []"))
    assert any("suite[0].dtypes: expected a non-empty list of dtypes, got an empty list" in m for m in messages), messages


def test_a_bad_marker_is_named_by_its_index():
    text = catalogue_text(TINY_GEMM).replace('name = "m8"', 'name = "m8"\nmarkers = ["ok", 1]')
    assert problems_of(text) == [f"configs.toml:{line_number(text, 'markers')}: suite[0].config[0].markers[1]: "
                                 "expected a string (a marker name), got an integer (1)"]


def test_valid_choices_are_set_off_from_the_value():
    assert unknown("layout for gemm", "nchw", ["nn", "tt"]) == "unknown layout for gemm 'nchw'; valid: nn, tt"
    assert unknown("dtype", "fp16", ["f32", "f16"]) == "unknown dtype 'fp16'; did you mean 'f16'? valid: f16, f32"
    assert unknown("range", "r0", []) == "unknown range 'r0'; none is defined"


@pytest.mark.parametrize("header", ["[[suite.test.exclude]]", "[[suite.test]]", "[[suite]]", "[[axis]]"])
def test_an_unknown_key_in_any_rocmlir_table_is_reported(tmp_path, monkeypatch, header):
    monkeypatch.chdir(tmp_path)
    text = (REPO / "tests/generator/data/rocmlir/PrGemm.toml").read_text(encoding="utf-8")
    text = text.replace(header + "\n", header + "\nbogus = 5\n", 1)
    Path("In.toml").write_text(text, encoding="utf-8")
    status, _, err = main("import-rocmlir", "In.toml", "-o", "out.toml")
    assert status == 2 and not Path("out.toml").exists(), err
    assert f"In.toml:{text.split(chr(10)).index('bogus = 5') + 1}:" in err
    assert f"unknown {header} key 'bogus'" in err and "Traceback" not in err, err
