"""`e2egen select`: pairwise coverage, the time budget, low headroom and failures first, the selection file."""
from __future__ import annotations

import itertools

import pytest

from e2egen.cli import main
from e2egen.generator.loader import parse_catalogue
from e2egen.generator.selection import read_selection
from loop_support import cases_of, fill_store
from e2egen.nightly.pr_select import (DEFAULT_SECONDS_PER_FLOP, PAIR_AXES, format_seconds, parse_budget,
                               price_from_durations)

CATALOGUE = """\
seed = 7
pr_selection = "pr_selection.toml"

[ranges]
r0 = [-1.0, 1.0]
r4 = [1.0, 5.0]

[tolerances.f32]
rms = 1e-6
[tolerances.f16]
rms = 1e-3

[[suite]]
name = "conv"
op = "conv2d"
dtypes = ["f32", "f16"]
layouts = ["nchw", "nhwc"]
ranges = ["r0"]

[[suite.config]]
name = "c4"
n = 1
c = 4
k = 4
hw = [6, 6]
kernel = 3

[[suite.config]]
name = "c8"
n = 1
c = 8
k = 8
hw = [6, 6]
kernel = 1

[[suite]]
name = "mm"
op = "gemm"
dtypes = ["f32", "f16"]
layouts = ["nn", "nt", "tn", "tt"]
ranges = ["r0", "r4"]

[[suite.config]]
name = "m8"
m = 8
n = 8
k = 8

[[suite.config]]
name = "m16"
m = 16
n = 16
k = 16
pr = true
"""
CASES = cases_of(CATALOGUE)
FAILED = "mm/gemm/m8/fwd/f16/nn/r4"  # crashed in the latest run: no metrics, so no margin
LOW = "mm/gemm/m8/fwd/f32/tt/r4"  # rms at 0.9 of its tolerance
MID = "mm/gemm/m8/fwd/f16/tt/r0"  # at 0.5
SPECIAL = (FAILED, LOW, MID)


def ratio(case):
    return {LOW: 0.9, MID: 0.5}.get(case.id, 0.1)


def metrics(case, run):
    return {"rms": ratio(case) * case.tolerances["rms"]}


def extra(case, run):
    # The three special cases cost 1 s, the others 0.5 s: coverage picks the cheaper ones.
    out = {"duration": 1.0 if case.id in SPECIAL else 0.5}
    if case.id == FAILED and run == 1:
        out.update(status="failed", reason="worker crashed")
    return out


@pytest.fixture
def project(tmp_path):
    (tmp_path / "configs.toml").write_text(CATALOGUE, encoding="utf-8")
    fill_store(tmp_path / "e2e.sqlite", CASES, 2, metrics, extra=extra)
    return tmp_path


def select(project, capsys, *args):
    status = main(["select", "-c", str(project / "configs.toml"), "--store", str(project / "e2e.sqlite"), *args])
    out, err = capsys.readouterr()
    selection = project / "pr_selection.toml"
    return status, out, err, (read_selection(selection) if selection.exists() else {})


def pairs(cases):
    return {(a, getattr(c, a), b, getattr(c, b)) for c in cases for a, b in itertools.combinations(PAIR_AXES, 2)}


def test_budgets_parse_and_print():
    assert [parse_budget(t) for t in ("5m", "300s", "300", "1h30m", "1m30s", "2.5m")] == [300, 300, 300, 5400, 90, 150]
    for bad in ("5x", "", "m", "-5m", "-1", "inf"):
        with pytest.raises(Exception, match="expected a time >= 0 like"):
            parse_budget(bad)
    assert [parse_budget(t) for t in ("0", "0s", "0m")] == [0, 0, 0]  # choose nothing beyond the pr = true cases
    assert [format_seconds(s) for s in (300, 90, 5400, 12.5)] == ["5m", "1m30s", "1h30m", "12.5s"]


def test_full_pairwise_coverage_when_the_budget_allows(project, capsys):
    status, out, err, chosen = select(project, capsys, "--budget", "1h")
    assert status == 0, err
    by_id = {c.id: c for c in CASES}
    ran = [c for c in CASES if c.pr] + [by_id[cid] for cid in chosen]
    assert pairs(ran) == pairs(CASES)
    for axis in ("suite", "op", "config", "direction", "dtype", "layout", "range"):
        assert {getattr(c, axis) for c in ran} == {getattr(c, axis) for c in CASES}
    assert "pairs 42/42" in out and "axis values" in out and "not covered" not in out
    # With an hour to spend, every case fits: coverage first, then the rest by headroom.
    assert len(chosen) == len(CASES) - sum(c.pr for c in CASES)


def test_the_budget_is_respected_and_the_shortfall_reported(project, capsys):
    forced = sum(c.pr for c in CASES) * 0.5
    status, out, err, chosen = select(project, capsys, "--budget", f"{forced + 2}s")
    assert status == 0, err
    assert len(chosen) == 4  # 4 x 0.5 s: the cheapest cases that cover most
    assert f"estimated {forced + 2:.1f} s of a {forced + 2:.1f} s budget" in out
    assert "not covered within the budget" in out
    assert all(why.startswith("coverage: ") for why in chosen.values())


def test_failures_then_least_headroom_fill_what_coverage_leaves(project, capsys):
    status, out, err, chosen = select(project, capsys, "--budget", "1h")
    coverage_seconds = sum(0.5 for why in chosen.values() if why.startswith("coverage"))
    assert not set(SPECIAL) & {cid for cid, why in chosen.items() if why.startswith("coverage")}
    forced = sum(c.pr for c in CASES) * 0.5
    # Room for one more case: the recent failure beats the least headroom.
    status, out, err, chosen = select(project, capsys, "--budget", f"{forced + coverage_seconds + 1}s")
    assert status == 0, err
    assert chosen[FAILED].startswith("failed in run2: worker crashed") and LOW not in chosen
    # Room for two: then the case closest to its tolerance, not the one at half of it.
    status, out, err, chosen = select(project, capsys, "--budget", f"{forced + coverage_seconds + 2}s")
    assert FAILED in chosen and chosen[LOW] == "headroom: rms at 0.9 of its tolerance in run2" and MID not in chosen


def test_the_file_is_deterministic_in_catalogue_order_and_read_by_the_generator(project, capsys):
    select(project, capsys, "--budget", "30s")
    first = (project / "pr_selection.toml").read_text(encoding="utf-8")
    select(project, capsys, "--budget", "30s")
    assert (project / "pr_selection.toml").read_text(encoding="utf-8") == first
    assert first.startswith("# Generated by `e2egen select`")
    assert "# budget: 30s on cpu" in first and "# coverage: axis values" in first and "estimated" in first
    chosen = list(read_selection(project / "pr_selection.toml"))
    order = [c.id for c in CASES]
    assert chosen == sorted(chosen, key=order.index)
    catalogue = parse_catalogue(CATALOGUE, str(project / "configs.toml"))
    assert set(catalogue.pr_selection) == set(chosen)


def test_prices_from_durations_else_flops():
    cases = CASES[:4]
    prices = price_from_durations(cases, {}, "cpu")
    assert prices.rate_basis == "default" and prices.recorded == 0
    assert prices.seconds[cases[0].id] == pytest.approx((cases[0].flops + 10_000_000) * DEFAULT_SECONDS_PER_FLOP["cpu"])
    prices = price_from_durations(cases, {cases[0].id: 2.0}, "cpu")
    assert prices.rate_basis == "measured" and prices.seconds[cases[0].id] == 2.0
    rate = 2.0 / (cases[0].flops + 10_000_000)
    assert prices.seconds[cases[1].id] == pytest.approx((cases[1].flops + 10_000_000) * rate)


def test_user_errors_exit_2_with_one_message(project, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["select", "--budget", "5x"])
    assert exit_info.value.code == 2
    assert "expected a time >= 0 like 300s, 5m, 1h30m or a number of seconds, got '5x'" in capsys.readouterr().err
    status = main(["select", "-c", str(project / "configs.toml"), "--store", str(tmp_path / "missing.sqlite")])
    err = capsys.readouterr().err
    assert status == 2 and "no results store here" in err and "Traceback" not in err
