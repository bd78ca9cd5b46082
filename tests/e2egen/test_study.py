"""`e2egen study`: the grid runs, the tables have the seed's rows and columns, and their numbers are
the records' own aggregates (recomputed here); a bad STUDY.toml is exit 2 with file:line."""
from __future__ import annotations

import json
import math
import textwrap

import pytest

from e2egen.cli import main

STUDY = """
title = "tiny study"
rule = { max_eps_diff = 1.0 }
metrics = ["max_eps_diff", "max_abs_diff", "rms"]

[ranges]
r0 = [-1.0, 1.0]
r4 = [1.0, 5.0]
r5 = [5.0, 10.0]

[[case]]
name = "conv"
op = "conv2d"
direction = "bwd_data"
dtype = "f16"
layout = "nhwc"
params = { n = 1, c = 8, k = 16, hw = 6, kernel = 3, pad = 1 }

[[case]]
name = "long"
op = "gemm"
dtype = "f16"
layout = "nn"
params = { m = 4, n = 4, k = 1500 }

[[variant]]
name = "original"
[[variant]]
name = "accumulate 4"
accumulate = 4
[[variant]]
name = "ftz"
ftz = true

[[validation]]
name = "cpu"
[[validation]]
name = "device"
reference = "device"
[[validation]]
name = "im2col"
kernel = "im2col"
[[validation]]
name = "torch vs im2col"
reference = "im2col"
"""


@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    path = root / "tiny.toml"
    path.write_text(textwrap.dedent(STUDY), encoding="utf-8")
    assert main(["study", str(path), "--out", str(root / "out"), "--device", "cpu", "--quiet"]) == 0
    data = json.loads((root / "out" / "results.json").read_text(encoding="utf-8"))
    markdown = (root / "out" / "study.md").read_text(encoding="utf-8")
    html = (root / "out" / "study.html").read_text(encoding="utf-8")
    return data, markdown, html


def _section(markdown: str, title: str) -> list[list[str]]:
    """The rows of the Markdown table under `## title` (header included), as cells."""
    lines = markdown.split(f"## {title}", 1)[1].splitlines()
    end = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    rows = [line for line in lines[:end] if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split(" | ")] for row in rows if not row.startswith("|---") and "---" not in row]


def _seed_format(value):
    if value is None:
        return "–"
    if value == 0:
        return "0"
    return f"{value:,.2f}" if 1e-2 <= abs(value) < 1e6 else f"{value:.2E}"


def test_grid_records(study_run):
    data, _, _ = study_run
    records = data["records"]
    assert len(records) == 2 * 3 * 4 * 3  # cases x ranges x validations x variants
    device = [r for r in records if r["validation"] == "device"]
    assert device and all(r["status"] == "skipped" and "no accelerator" in r["reason"] for r in device)
    kernel_ref = [r for r in records if r["validation"] == "torch vs im2col"]
    assert {r["status"] for r in kernel_ref if r["variant"] != "original"} == {"skipped"}
    for r in records:
        if r["status"] == "ok":  # the rule, re-judged from the record's own numbers
            values = r["values"]
            expected = (values.get("max_eps_diff", 0) <= 1 and values["overflow"] == 0 and values["inf_mismatch"] == 0
                        and values["nan_mismatch"] == 0)
            assert r["passed"] == expected
    # the long gemm overflows at r5 (1500 products >= 25 each): every element, so no maximum at all
    over = [r for r in records if r["status"] == "ok" and r["range"] == "r5" and r["case"].startswith("study/gemm")
            and r["validation"] in ("cpu", "im2col")]
    assert over and all(r["values"]["overflow"] == 16 and "max_eps_diff" not in r["values"] and not r["passed"] for r in over)


def test_by_range_table_matches_independent_aggregates(study_run):
    data, markdown, _ = study_run
    rows = _section(markdown, "Metrics by input range")
    assert rows[0] == ["", "r0 [-1, 1]", "r4 [1, 5]", "r5 [5, 10]"]
    labels = [r[0] for r in rows[1:]]
    assert labels == ["max_eps_diff ave", "max_eps_diff max", "max_abs_diff ave", "max_abs_diff max", "rms ave", "rms max",
                      "pass rate", "runs", "runs with overflow"]
    table = {r[0]: r[1:] for r in rows[1:]}
    for i, rng in enumerate(["r0", "r4", "r5"]):
        chosen = [r for r in data["records"] if r["status"] == "ok" and r["validation"] == "cpu"
                  and r["variant"] == "original" and r["range"] == rng]
        assert table["runs"][i] == str(len(chosen)) == "2"
        for metric in ("max_eps_diff", "max_abs_diff", "rms"):
            values = [r["values"][metric] for r in chosen if metric in r["values"]]
            ave = sum(values) / len(values) if values else None
            assert table[f"{metric} ave"][i] == _seed_format(ave)
            assert table[f"{metric} max"][i] == _seed_format(max(values) if values else None)
        rate = sum(r["passed"] for r in chosen) / len(chosen)
        assert table["pass rate"][i] == f"{100 * rate:.2f}%"
        assert table["runs with overflow"][i] == str(sum(1 for r in chosen if r["values"]["overflow"]))


def test_variant_validation_and_histogram_tables(study_run):
    data, markdown, html = study_run
    variants = _section(markdown, "Pass rate by reference variant and range")
    assert variants[0] == ["reference variant", "r0", "r4", "r5", "all"]
    assert [r[0] for r in variants[1:4]] == ["original", "accumulate 4", "ftz"]
    for row, name in zip(variants[1:4], ["original", "accumulate 4", "ftz"]):
        chosen = [r for r in data["records"] if r["status"] == "ok" and r["validation"] == "cpu" and r["variant"] == name]
        assert row[-1] == f"{100 * sum(r['passed'] for r in chosen) / len(chosen):.2f}%"

    validation = _section(markdown, "Validation methods")
    assert validation[0] == ["", "cpu", "device", "im2col", "torch vs im2col"]
    table = {r[0]: r[1:] for r in validation[1:]}
    assert table["runs"] == ["6", "0", "6", "6"] and table["max_eps_diff ave"][1] == "–"
    im2col = [r["values"]["max_eps_diff"] for r in data["records"] if r["validation"] == "im2col" and r["variant"] == "original"
              and "max_eps_diff" in r["values"]]
    assert table["max_eps_diff max"][2] == _seed_format(max(im2col))
    assert "Not run: device: no accelerator" in markdown

    worst = [r for r in data["records"] if r["status"] == "ok" and r["validation"] == "cpu" and r["variant"] == "original"
             and "max_eps_diff" in r["values"]]
    top = max(worst, key=lambda r: r["values"]["max_eps_diff"])
    hist = _section(markdown, f"Histogram of the worst run: {top['case']} {top['range']}")
    assert hist[0] == ["\\|ref − out\\| / \\|ref\\|", "original", "accumulate 4", "ftz"]
    assert [r[0] for r in hist[1:11]] == ["0", "(0,1e-6)", "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)", "[1e-3,1e-2)",
                                          "[1e-2,0.1)", "[0.1,1)", ">=1", "ref == 0"]
    counts = top["histogram"]
    total = sum(counts.values())
    assert hist[1][1] == f"{counts['0']}({100 * counts['0'] / total:.6f}%)"
    summed = _section(markdown, "Histogram of all runs")
    assert len(summed) == 11 and summed[0][1:] == ["original", "accumulate 4", "ftz"]
    assert "<table>" in html and "Validation methods" in html and not math.isnan(data["seconds"])


BAD_STUDIES = {
    "unknown top key": ("rnages = {}\n[[case]]\nname='a'\nop='gemm'\ndtype='f16'\nlayout='nn'\nparams={m=1,n=1,k=1}\n",
                        ["tiny.toml:1: rnages: unknown key 'rnages'; did you mean 'ranges'?"]),
    "bad rule, variant key and kernel": (
        "rule = { max_eps_dif = 1 }\n[ranges]\nr0 = [1.0, -1.0]\n"
        "[[case]]\nname='a'\nop='gemm'\ndtype='f16'\nlayout='nn'\nparams={m=1,n=1,k=1}\n"
        "[[variant]]\nname = 'v'\naccumulte = 4\n[[validation]]\nname = 'x'\nkernel = 'im2cl'\n",
        ["tiny.toml:1: rule.max_eps_dif: unknown metric 'max_eps_dif'; did you mean 'max_eps_diff'?",
         "tiny.toml:3: ranges.r0: range [1, -1] is empty",
         "tiny.toml:12: variant[0].accumulte: unknown variant key 'accumulte'; did you mean 'accumulate'?",
         "tiny.toml:15: validation[0].kernel: unknown kernel 'im2cl'; did you mean 'im2col'?"]),
    "bad case": ("[ranges]\nr0 = [-1.0, 1.0]\n[[case]]\nname='a'\nop='gemm'\ndtype='fp16'\nlayout='nn'\nparams={m=1,n=1,kk=1}\n",
                 ["tiny.toml:6: case[0].dtype: study/gemm/a/fwd/fp16/nn: unknown dtype 'fp16' (did you mean 'f16'?)"]),
    "no case": ("[ranges]\nr0 = [-1.0, 1.0]\n", ["the study selects no case"]),
    "invalid toml": ("[ranges\n", ["tiny.toml:1: invalid TOML"]),
}


@pytest.mark.parametrize("name", list(BAD_STUDIES))
def test_bad_study_is_exit_2_with_file_and_line(name, tmp_path, capsys):
    text, expected = BAD_STUDIES[name]
    path = tmp_path / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["study", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for part in expected:
        assert part in err, (part, err)
    assert not (tmp_path / "out").exists()
