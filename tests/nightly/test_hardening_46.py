"""Issue 46: damaged stores are never written, merges say when shards are missing, calibrate survives huge
values, and option values that cannot work are usage errors."""
from __future__ import annotations

import pytest

from e2egen.cli import main
from e2egen.nightly.errors import StoreError
from e2egen.nightly.store import Store
from conftest import catalogue_text, square_gemm_suite
from loop_support import COMMENTED, cases_of, damage_store_page, fill_store
from test_calibrate import calibrate, observed


@pytest.mark.parametrize("value", [1e308, 1.7e308, float("inf")])
def test_calibrate_survives_values_that_overflow(tmp_path, capsys, value):
    def huge(case, run):
        values = observed(case, run)
        if case.dtype == "f16":
            values["rms"] = value
        return values

    status, out, err, catalogue = calibrate(tmp_path, capsys, "--write", "--runs", "2", metrics=huge)
    assert status == 0, err
    assert "Traceback" not in err
    assert "not finite" in out or "non-finite" in out or "too large" in out, out
    assert "inf" not in catalogue.read_text(encoding="utf-8").lower().replace("info", "")



def _shard_file(tmp_path, run_id="shardA", shard=None):
    import json

    from loop_support import record

    cases = cases_of(COMMENTED)[:3]
    header = {"type": "run", "run_id": run_id, "global_seed": 1, "started": "2025-02-01T02:00:00Z", "device": "cpu",
              "selected": len(cases)}
    if shard:
        header["shard"] = shard
    lines = [header, *(record(c, run_id, observed(c, 0)) for c in cases),
             {"type": "run_end", "run_id": run_id, "ended": "2025-02-01T03:00:00Z"}]
    path = tmp_path / f"{run_id}.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("table", ["metrics", "records"])
def test_a_corrupt_store_is_never_written(tmp_path, capsys, table):
    store = tmp_path / "e2e.sqlite"
    fill_store(store, cases_of(COMMENTED), 1, observed)
    damage_store_page(store, table)
    before = store.read_bytes()
    with pytest.raises(StoreError, match="damaged"):
        Store(store)
    status = main(["merge", str(_shard_file(tmp_path)), "--store", str(store)])
    err = capsys.readouterr().err
    assert status == 2 and "the results store is damaged" in err and str(store) in err and "Traceback" not in err
    assert store.read_bytes() == before


def test_a_merge_missing_a_shard_says_so_and_is_not_green(tmp_path, capsys):
    store = tmp_path / "merged.sqlite"
    one, two = _shard_file(tmp_path, "s1", "1/3"), _shard_file(tmp_path, "s2", "2/3")
    status = main(["merge", str(one), str(two), "--store", str(store), "--run-id", "m"])
    out, err = capsys.readouterr()
    assert status == 3, (out, err)
    assert "INCOMPLETE" in out and "3/3 missing" in out
    with Store(store, create=False) as s:
        assert s.run("m").ended is None  # `e2egen runs` lists it as incomplete
    assert main(["report", "m", "--store", str(store), "--out", str(tmp_path / "reports")]) == 0
    capsys.readouterr()
    assert "INCOMPLETE" in (tmp_path / "reports" / "report-m.md").read_text(encoding="utf-8")
    three = _shard_file(tmp_path, "s3", "3/3")
    assert main(["merge", str(one), str(two), str(three), "--store", str(store), "--run-id", "whole"]) == 0
    assert "INCOMPLETE" not in capsys.readouterr().out


def test_a_merge_of_shards_from_different_splits_is_incomplete(tmp_path, capsys):
    """No one split says which cases the whole run holds: 1/2 and 1/3 together used to exit 0."""
    one, other = _shard_file(tmp_path, "s1", "1/2"), _shard_file(tmp_path, "t1", "1/3")
    status = main(["merge", str(one), str(other), "--store", str(tmp_path / "m.sqlite")])
    out, err = capsys.readouterr()
    assert status == 3, (out, err)
    assert "INCOMPLETE" in out and "different splits (1/2, 1/3)" in out


def test_a_merge_of_records_that_lost_a_case_line_is_incomplete(tmp_path, capsys):
    """A damaged case line is skipped with a warning; the run it belongs to planned that case, so the merge is
    not a whole run (it used to report the cases left and exit 0)."""
    path = _shard_file(tmp_path, "torn")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2][:200] + "\n"  # the second case's line, cut
    path.write_text("".join(lines), encoding="utf-8")
    status = main(["merge", str(path), "--store", str(tmp_path / "m.sqlite")])
    out, err = capsys.readouterr()
    assert status == 3, (out, err)
    assert f"{path}:3" in err and "records 2 of the 3 cases its run planned" in out


@pytest.mark.parametrize("command", ["report", "nightly"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "0", "1e999"])
def test_drift_must_be_a_finite_positive_number(tmp_path, monkeypatch, capsys, command, value):
    monkeypatch.chdir(tmp_path)  # nothing here to run or report on, should the option be taken
    with pytest.raises(SystemExit) as info:
        main([command, "--drift", value, "--store", "none.sqlite"])
    assert info.value.code == 2
    assert "--drift" in capsys.readouterr().err


@pytest.mark.parametrize("shard", ["1/1000000000000", "13/13"])
def test_more_shards_than_cases_is_a_clear_usage_error(tmp_path, shard):
    from test_nightly_support import tiny_project

    project = tiny_project(tmp_path)  # 12 cases
    result = project.nightly("--shard", shard, "--workers", "0", "--no-report", "--device", "cpu")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr
    assert f"--shard {shard}: cannot split 12 cases into" in result.stderr and "between 1 and 12" in result.stderr


def test_a_shard_count_too_long_to_read_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["nightly", "--shard", "1/" + "9" * 5000, "--store", "s.sqlite"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --shard 1/999") and "Traceback" not in err


SQUARE_GEMM = square_gemm_suite("tiny")


@pytest.mark.parametrize("option,value", [("--store", "build/e2e/test_tiny.py"), ("--store", "build/e2e/s.sqlite"),
                                          ("--records-dir", "build/e2e/runs")])
def test_a_store_or_records_inside_the_generated_suite_is_refused_before_anything_is_written(
        tmp_path, monkeypatch, capsys, option, value):
    """The store was created inside --out first (a 45 KB SQLite file as test_tiny.py), then refused for
    another reason that said "nothing was written"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(catalogue_text(SQUARE_GEMM), encoding="utf-8")
    args = ["nightly", "-c", "c.toml", "--out", "build/e2e", "--workers", "0", "--seed", "1", "--no-report",
            "--no-progress", option, value]
    if option == "--records-dir":
        args += ["--store", "results/e2e.sqlite"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{option} {value} is inside the generated suite's directory --out build/e2e" in err
    assert not (tmp_path / "build").exists() and not (tmp_path / "results").exists()


def test_a_store_named_through_a_missing_directory_is_still_the_input_it_names(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(catalogue_text(SQUARE_GEMM), encoding="utf-8")
    assert main(["nightly", "-c", "c.toml", "--store", "./sub/../c.toml", "--workers", "0", "--no-report"]) == 2
    assert "overwrite" in capsys.readouterr().err
    assert not (tmp_path / "sub").exists()
