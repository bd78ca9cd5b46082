"""`--json` (issue 44): one JSON document per command, its schema named and versioned, the same facts as the text;
a user error is an error document with exit 2. Fields: docs/reference/json-output.md."""
from __future__ import annotations

import json

import pytest

from conftest import TINY_GEMM, catalogue_text, run_e2egen
from loop_support import COMMENTED, cases_of, fill_store


def _json(*args: str) -> tuple[int, dict]:
    status, out, err = run_e2egen(*args)
    return status, json.loads(out)


@pytest.fixture
def catalogue(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(catalogue_text(TINY_GEMM), encoding="utf-8")
    return str(path)


def test_list_json_holds_the_cases_the_text_lists(catalogue):
    status, document = _json("list", "-c", catalogue, "--json", "--filter", "layout=nn")
    assert status == 0 and document["schema"] == "e2egen.list/1" and document["catalogue"] == catalogue
    _, text, _ = run_e2egen("list", "-c", catalogue, "--filter", "layout=nn")
    assert [case["id"] for case in document["cases"]] == [line.split("\t")[0] for line in text.splitlines()]
    first = document["cases"][0]
    assert set(first) == {"id", "suite", "op", "config", "direction", "dtype", "layout", "range", "pr", "flops"}
    assert first["id"] == "/".join(first[k] for k in ("suite", "op", "config", "direction", "dtype", "layout", "range"))
    assert isinstance(first["pr"], bool) and first["flops"] == 2 * 8 * 8 * 16


def test_validate_json_and_its_error_document(catalogue, tmp_path):
    status, document = _json("validate", catalogue, "--json")
    assert status == 0 and document == {"schema": "e2egen.validate/1", "catalogue": catalogue, "suites": 1,
                                         "cases": 4, "pr_cases": 0}
    bad = tmp_path / "bad.toml"
    bad.write_text(catalogue_text(TINY_GEMM).replace("m = 8", "m = -8"), encoding="utf-8")
    status, document = _json("validate", str(bad), "--json")
    assert status == 2 and document["schema"] == "e2egen.error/1"
    (error,) = document["errors"]
    assert error["file"] == str(bad) and error["key"] == "suite[0].config[0].m" and isinstance(error["line"], int)
    assert "m" in error["message"]


def test_runs_json_holds_each_run_with_its_counts(tmp_path):
    store = tmp_path / "e2e.sqlite"
    fill_store(store, cases_of(COMMENTED), 2, lambda case, run: {"bound_ratio": 0.5, "bound_rms": 0.1})
    status, document = _json("runs", "--store", str(store), "--json")
    assert status == 0 and document["schema"] == "e2egen.runs/1"
    assert sorted(run["run_id"] for run in document["runs"]) == ["run1", "run2"]
    run = document["runs"][0]
    assert {"run_id", "started", "ended", "complete", "global_seed", "planned", "passed", "failed", "skipped",
            "merged_from", "merged_into"} <= set(run)
    assert run["passed"] + run["failed"] + run["skipped"] == len(cases_of(COMMENTED))


def test_run_json_is_the_cases_record_and_report(catalogue):
    status, document = _json("run", "-c", catalogue, "mm/gemm/m8/fwd/f32/nn/r0", "--json")
    assert status == 0 and document["schema"] == "e2egen.run/1"
    record = document["record"]
    assert record["case_id"] == "mm/gemm/m8/fwd/f32/nn/r0" and record["status"] == "passed"
    assert record["metrics"]["bound_ratio"] <= 1 and "[PASSED]" in document["report"]


EXPLAINED = "mm/gemm/m8/fwd/f32/nn/r0"


def test_explain_json_carries_the_facts_the_text_prints(catalogue):
    status, document = _json("explain", EXPLAINED, "-c", catalogue, "--device", "cpu", "--json")
    text_status, text, _ = run_e2egen("explain", EXPLAINED, "-c", catalogue, "--device", "cpu")
    assert status == text_status == 0
    assert document["schema"] == "e2egen.explain/1" and document["case_id"] == EXPLAINED
    assert document["status"] == "passed" and document["passed"] is True and document["analysis"] == "product_sum"
    assert f"verdict: {document['verdict']['summary']}" in text
    assert f"Cause: {document['causes'][0]['headline']}" in text
    assert document["worst"] and all(f"{w['position']} " in text for w in document["worst"])
    assert {"position", "ref", "out", "abs_diff", "eps", "ulp_distance", "subnormal", "terms", "condition"} == set(document["worst"][0])
    arithmetic = document["arithmetic"]
    assert arithmetic["description"] in text and arithmetic["properties"]["accumulator"] == "f32"
    assert [v["label"] for v in document["variants"]][0] == "plain float64" and document["repro"] in text
    json.dumps(document, allow_nan=False)  # plain JSON types only


def test_explain_json_of_a_failing_case_and_of_an_unknown_one(tmp_path):
    strict = tmp_path / "strict.toml"
    strict.write_text(catalogue_text(TINY_GEMM).replace('ranges = ["r0", "r4"]', 'ranges = ["r0", "r4"]\n'
                                                        'tolerances = { max_abs_diff = 1e-15 }'), encoding="utf-8")
    status, document = _json("explain", EXPLAINED, "-c", str(strict), "--device", "cpu", "--json", "--no-search")
    assert status == 1 and document["status"] == "failed" and document["verdict"]["passed"] is False
    assert [f["metric"] for f in document["verdict"]["failures"]] == ["max_abs_diff"]
    status, document = _json("explain", "mm/gemm/m8/fwd/f32/nn/r9", "-c", str(strict), "--json")
    assert status == 2 and document["schema"] == "e2egen.error/1" and "r9" in document["errors"][0]["message"]


def test_arithmetic_json_gives_each_property_with_its_evidence(catalogue, tmp_path):
    status, document = _json("arithmetic", "-c", catalogue, "--device", "cpu", "--out", str(tmp_path / "p"), "--json")
    _, text, _ = run_e2egen("arithmetic", "-c", catalogue, "--device", "cpu", "--out", str(tmp_path / "q"))
    assert status == 0 and document["schema"] == "e2egen.arithmetic/1" and document["not_probed"] == 0
    assert [cell["cell"] for cell in document["cells"]] == ["gemm/fwd/f32/nn", "gemm/fwd/f32/tt"]
    for cell in document["cells"]:
        line = next(line for line in text.splitlines() if line.startswith(cell["cell"] + " "))
        assert line.endswith(cell["description"]) and cell["probed"] is True
        properties = cell["properties"]
        assert properties["accumulator"] == "f32" and properties["acc_bits"] == 24
        assert properties["rounding"] == "nearest-even" and properties["flushes"] is False
        assert set(cell["evidence"]) == {"probed_with", "notes", "unexplained"}
        assert cell["evidence"]["probed_with"].startswith("gemm fwd f32")
    (profile,) = document["profiles"]
    assert profile["cells"] == 2 and profile["path"].startswith(str(tmp_path / "p")) and f"-> {profile['path'].replace('/p/', '/q/')}" in text


def test_arithmetic_json_error_document(catalogue):
    status, document = _json("arithmetic", "-c", catalogue, "--filter", "dtype=f16", "--json")
    assert status == 2 and document["schema"] == "e2egen.error/1" and "f16" in document["errors"][0]["message"]


ATTENTION = """
[[suite]]
name = "att"
op = "attention"
dtypes = ["f32"]
layouts = ["bhsd"]
ranges = ["r0"]

[[suite.config]]
name = "s8"
seq_q = 8
seq_k = 8
head_dim_qk = 16
"""


def test_explain_json_of_a_composed_bound_gives_each_outputs_worst_elements_and_terms(tmp_path):
    path = tmp_path / "att.toml"
    path.write_text(catalogue_text(ATTENTION), encoding="utf-8")
    case_id = "att/attention/s8/fwd/f32/bhsd/r0"
    status, document = _json("explain", case_id, "-c", str(path), "--device", "cpu", "--json")
    _, text, _ = run_e2egen("explain", case_id, "-c", str(path), "--device", "cpu")
    assert status == 0 and document["analysis"] == "terms" and document["status"] == "passed"
    (output,) = document["outputs"]
    assert f"output {output['name']}: passed" in text and output["verdict"]["passed"] is True
    worst = output["worst"][0]
    assert f"at {worst['index']}: ref {worst['ref']:.9g}" in text
    assert {term["source"] for term in worst["terms"]} and abs(sum(t["share"] for t in worst["terms"]) - 1) < 1e-9
    assert all(term["source"] in text for term in worst["terms"])
