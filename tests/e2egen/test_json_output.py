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
