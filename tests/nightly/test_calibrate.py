"""`e2egen calibrate`: proposals from synthetic nightly stores, refusal without evidence, minimal --write diffs."""
from __future__ import annotations

import difflib

import pytest

from e2egen.cli import main
from loop_support import COMMENTED, cases_of, fill_store
from e2egen.nightly.calibrate import Position, format_floor, format_number, readable_up

# Observed values (run 1; run 2 sees 1.5x as much): the test's expectations follow from these.
F32_RMS = {"g": 2e-7, "h/r0": 2e-7, "h/r4": 1.6e-6}  # h r4: 2.4e-6 in run 2, above h's 2e-6 (FAILED)
F16_RMS = {"g": 8e-5 / 3, "h": 8e-6}  # max 4e-5 -> x2 -> 1e-4 (g); 1.2e-5 -> 2.4e-5 -> 5e-5 (h)
# Every case also checks e2egen's default verdict (bound_ratio, bound_rms 0.5, bias_z 6: the default scope, as
# COMMENTED sets neither of the last two), and a run records all three: bound_rms max 0.15 -> x2 -> 0.5, the
# default; bias_z max 1.5, under the model's 6, which stays. Neither default changes.
MODEL = {"bound_ratio": 0.3, "bound_rms": 0.1, "bias_z": 1.0}


def observed(case, run):
    scale = 1.0 + 0.5 * run
    key = case.suite if case.suite == "g" else f"h/{case.range}"
    model = {"bound_ratio": MODEL["bound_ratio"], "bound_rms": MODEL["bound_rms"] * scale, "bias_z": MODEL["bias_z"] * scale}
    if case.dtype == "f32":
        return {"rms": F32_RMS[key] * scale, "max_abs_diff": 1e-6, **model}
    rms = F16_RMS[case.suite] * scale
    return {"rms": rms, "max_abs_diff": 1e-4, "overflow": 0, **model}


def calibrate(tmp_path, capsys, *args, text=COMMENTED, metrics=observed, runs=2):
    catalogue = tmp_path / "configs.toml"
    if not catalogue.exists():
        catalogue.write_text(text, encoding="utf-8")
    store = tmp_path / "e2e.sqlite"
    if not store.exists():
        fill_store(store, cases_of(text), runs, metrics)
    status = main(["calibrate", "-c", str(catalogue), "--store", str(store), *args])
    out, err = capsys.readouterr()
    return status, out, err, catalogue


def changed_lines(old: str, new: str) -> tuple[list[str], list[str]]:
    removed, added = [], []
    for line in difflib.ndiff(old.splitlines(), new.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def test_readable_values_round_up_to_1_2_5():
    assert [readable_up(x) for x in (1e-3, 1.01e-3, 2e-3, 2.4e-6, 4.8e-6, 6e-7, 0.0019531, 7, 12)] == \
        pytest.approx([1e-3, 2e-3, 2e-3, 5e-6, 5e-6, 1e-6, 2e-3, 10, 20])
    assert [format_number(x) for x in (2e-4, 5e-6, 0.5, 1.0, 20.0, 1e5)] == ["2e-4", "5e-6", "0.5", "1.0", "20.0", "1e5"]
    assert format_number(20.0, integer=True) == "20"


def test_floors_come_from_the_output_format():
    assert format_floor("max_abs_diff", "f16", 3.0)[0] == pytest.approx(2.0 ** -9)  # one f16 ulp at 3
    assert format_floor("max_abs_diff", "f16", 2.0)[0] == pytest.approx(2.0 ** -10)  # the gap below, as the CTS ulp
    assert format_floor("max_abs_diff", "tf32", 3.0)[0] == pytest.approx(2.0 ** -22)  # tf32 writes f32
    assert format_floor("max_rel_diff", "bf16", 0)[0] == pytest.approx(2.0 ** -7)
    assert format_floor("max_eps_diff", "f32", 0)[0] == 1.0
    assert format_floor("rms", "f16", 1.0)[0] is None  # depends on the data's distribution


def test_proposals_and_flags_from_a_synthetic_store(tmp_path, capsys):
    status, out, err, _ = calibrate(tmp_path, capsys, "--runs", "2")
    assert status == 0, err
    # h's f32 rms (inline suite table): max 2.4e-6 x 2 -> 5e-6, and it failed at 2e-6.
    assert "h: tolerances.f32.rms: 2e-6 -> 5e-6" in out
    row = next(line for line in out.splitlines() if line.startswith("h ") and " f32 " in line and " rms " in line)
    assert "FAILED" in row and "5.00e-06" in row
    # f16 max_abs_diff: 1e-4 x 2 is below one f16 ulp at |ref| 3 (2^-9): the floor, 2e-3, wins; 0.5 was loose.
    assert "tolerances.f16.max_abs_diff: 0.5 -> 2e-3" in out
    row = next(line for line in out.splitlines() if line.startswith("g ") and "max_abs_diff" in line)
    assert "FLOOR" in row and "LOOSE" in row
    # f16 rms: g needs 1e-4, h 5e-5: the default takes g's value, h is within the band (10x): no override.
    assert "tolerances.f16.rms: 1e-3 -> 1e-4" in out
    # bound_ratio: observed 0.3, the ceiling 1.0 stays; g's f32 rms 3e-7 x 2 -> 1e-6 = current.
    # e2egen's defaults (bound_rms, bias_z) govern every case from the default scope, and are kept (MODEL).
    changes = "".join(line for line in out.splitlines() if "->" in line)
    assert not [m for m in ("bound_ratio", "bound_rms", "bias_z", "e2egen default") if m in changes]
    # level, cases, current, observed, proposed, headroom, new headroom; kept (no "*"), no flag
    for metric, cells in (("bound_rms", "e2egen default: tolerances 4/4 0.5 0.15 0.5 0.3 0.3"),
                          ("bias_z", "e2egen default: tolerances 4/4 6 1.5 6 0.25 0.25")):
        row = next(line for line in out.splitlines() if line.startswith("h ") and " f16 " in line and f" {metric} " in line)
        assert " ".join(row.split()[3:]) == cells, row
    assert "3 tolerances change, 0 overrides added" in out
    assert "not calibrated" not in out  # every (case, metric) pair, the defaults' too, has its evidence


def test_a_group_far_below_the_default_gets_its_own_override(tmp_path, capsys):
    def metrics(case, run):
        values = observed(case, run)
        if case.dtype == "f16":
            values["rms"] = 4e-4 if (case.suite, case.config) != ("h", "b") else 1e-5
        return values

    status, out, err, catalogue = calibrate(tmp_path, capsys, "--runs", "2", "--write", metrics=metrics)
    assert status == 0, err
    # g and h/c need 1e-3 (the default stays); h/b needs 2e-5: more than 10x tighter -> an override at
    # the narrowest level that holds only h/b's f16 cases (config + dtype.direction), inside its inline table.
    assert "h/b: tolerances.f16.fwd.rms: new -> 2e-5" in out
    removed, added = changed_lines(COMMENTED, catalogue.read_text(encoding="utf-8"))
    assert removed == ["max_abs_diff = 0.5", "tolerances = { f32 = { rms = 2e-6 } }   # inline, suite level",
                       "tolerances.f16 = { bound_ratio = 1.0 }  # dotted, config level"]
    assert added == ["max_abs_diff = 2e-3", "tolerances = { f32 = { rms = 5e-6 } }   # inline, suite level",
                     "tolerances.f16 = { bound_ratio = 1.0, fwd = { rms = 2e-5 } }  # dotted, config level"]


def test_write_round_trips_a_commented_catalogue_with_a_minimal_diff(tmp_path, capsys):
    status, out, err, catalogue = calibrate(tmp_path, capsys, "--runs", "2", "--write")
    assert status == 0, err
    new = catalogue.read_text(encoding="utf-8")
    removed, added = changed_lines(COMMENTED, new)
    assert removed == ["rms   = 1e-3        # f16 default", "max_abs_diff = 0.5",
                       "tolerances = { f32 = { rms = 2e-6 } }   # inline, suite level"]
    assert added == ["rms   = 1e-4        # f16 default", "max_abs_diff = 2e-3",
                     "tolerances = { f32 = { rms = 5e-6 } }   # inline, suite level"]
    assert [l for l in COMMENTED.splitlines() if "#" in l and l not in removed] == \
        [l for l in new.splitlines() if "#" in l and l not in added]
    # The written catalogue resolves as planned, and calibrating it again changes nothing.
    resolved = {c.id: dict(c.tolerances) for c in cases_of(new)}
    assert resolved["h/gemm/b/fwd/f32/nn/r4"]["rms"] == 5e-6 and resolved["g/gemm/a/fwd/f16/tt/r0"]["rms"] == 1e-4
    status, out, _, _ = calibrate(tmp_path, capsys, "--runs", "2", "--write")
    assert status == 0 and "0 tolerances change, 0 overrides added" in out and "nothing to change" in out
    assert catalogue.read_text(encoding="utf-8") == new


def test_a_default_recalibrated_is_written_into_the_catalogue_top_level_table(tmp_path, capsys):
    def metrics(case, run):  # every case's bound_rms far below e2egen's default 0.5: max 0.03 -> x2 -> 0.1
        return {**observed(case, run), "bound_rms": 0.02 * (1.0 + 0.5 * run)}

    status, out, err, catalogue = calibrate(tmp_path, capsys, "--runs", "2", "--write", metrics=metrics)
    assert status == 0, err
    # The default governs all 12 cases, each with evidence: it takes the value they need. COMMENTED has no
    # top-level [tolerances] table of its own: the change adds one, where a default is overridden.
    assert "e2egen default: tolerances.bound_rms: 0.5 -> 0.1" in out
    assert "4 tolerances change, 0 overrides added" in out
    new = catalogue.read_text(encoding="utf-8")
    removed, added = changed_lines(COMMENTED, new)
    assert removed == ["rms   = 1e-3        # f16 default", "max_abs_diff = 0.5",
                       "tolerances = { f32 = { rms = 2e-6 } }   # inline, suite level"]
    assert added == ["[tolerances]", "bound_rms = 0.1", "", "rms   = 1e-4        # f16 default", "max_abs_diff = 2e-3",
                     "tolerances = { f32 = { rms = 5e-6 } }   # inline, suite level"]
    assert new.index("bound_rms = 0.1") < new.index("[tolerances.f32]")  # the top-level table, not f32's
    resolved = cases_of(new)
    assert len(resolved) == 12 and all(c.tolerances["bound_rms"] == 0.1 and c.tolerances["bias_z"] == 6.0
                                       for c in resolved)
    # Calibrating again finds the catalogue's own entry (no longer the default) at the value: nothing to change.
    status, out, _, _ = calibrate(tmp_path, capsys, "--runs", "2", "--write", metrics=metrics)
    assert status == 0 and "0 tolerances change, 0 overrides added" in out and "nothing to change" in out
    rows = [line.split() for line in out.splitlines() if " bound_rms " in line]
    # one row per (suite, dtype): the level is now the catalogue's own tolerances.bound_rms, at 0.1, kept
    assert sorted(tuple(row[:3] + row[3:8]) for row in rows) == sorted(
        (suite, dtype, "bound_rms", "tolerances", cases, "0.1", "0.03", "0.1")
        for suite, cases in (("g", "2/2"), ("h", "4/4")) for dtype in ("f32", "f16")), rows
    assert catalogue.read_text(encoding="utf-8") == new


def test_new_suite_override_is_one_added_line(tmp_path, capsys):
    def metrics(case, run):  # suite h never ran; g's f16 rms is far below the default
        if case.suite == "h":
            return None
        return {**observed(case, run), **({"rms": 1e-5} if case.dtype == "f16" else {})}

    status, out, err, catalogue = calibrate(tmp_path, capsys, "--runs", "2", "--write", metrics=metrics)
    assert status == 0, err
    removed, added = changed_lines(COMMENTED, catalogue.read_text(encoding="utf-8"))
    # The defaults govern h too, which never ran: they are kept; g gets overrides in its own table.
    assert removed == []
    assert added == ["tolerances.f16.rms = 2e-5", "tolerances.f16.max_abs_diff = 2e-3"]
    # h's 8 cases never ran: 4 f32 x (rms, bound_ratio) + 4 f16 x (rms, max_abs_diff, bound_ratio), and every
    # one also checks the defaults bound_rms and bias_z: 8 + 12 + 8 x 2 = 36 pairs.
    assert "EVIDENCE 0/4: not in these runs" in out and "not in these runs: 36" in out
    assert "e2egen default" not in "".join(line for line in out.splitlines() if "->" in line)  # h keeps them
    text = catalogue.read_text(encoding="utf-8")
    assert text.index("tolerances.f16.rms = 2e-5") < text.index('name = "a"')  # in g's table, before its configs


def test_too_little_evidence_is_reported_not_guessed(tmp_path, capsys):
    status, out, err, catalogue = calibrate(tmp_path, capsys, "--runs", "3")
    assert status == 0, err
    assert "asked for 3, the store has 2" in out
    assert "0 tolerances change, 0 overrides added" in out
    # 12 cases: 6 f32 x (rms, bound_ratio) + 6 f16 x (rms, max_abs_diff, bound_ratio) = 30, and each case's
    # defaults bound_rms and bias_z (12 x 2 = 24): 54, all recorded in only 2 of the 3 runs asked for.
    assert "not calibrated: 54 of 54 (case, metric) pairs (2 of 3 runs: 54)" in out


def test_a_case_that_needs_more_but_lacks_evidence_nearby_is_reported(tmp_path, capsys):
    def metrics(case, run):
        if case.id == "g/gemm/a/fwd/f16/tt/r0" and run == 1:
            return None  # ran once of twice
        values = observed(case, run)
        if case.id == "g/gemm/a/fwd/f16/nn/r0":
            values["rms"] = 2e-3  # over 1e-3; every override that could hold it would also hold the tt case
        return values

    status, out, err, _ = calibrate(tmp_path, capsys, "--runs", "2", metrics=metrics)
    assert status == 0, err
    assert "g/gemm/a/fwd/f16/nn/r0 rms: observed 0.002, needs 5e-3, keeps 1e-3" in out
    assert "1 of 2 runs" in out


def test_run_ids_and_user_errors(tmp_path, capsys):
    status, out, err, _ = calibrate(tmp_path, capsys, "run1")
    assert status == 0 and "runs: run1 (seed 1" in out
    status, out, err, _ = calibrate(tmp_path, capsys, "nope")
    assert status == 2 and "unknown run id 'nope'" in err and "Traceback" not in err
    status = main(["calibrate", "-c", str(tmp_path / "configs.toml"), "--store", str(tmp_path / "none.sqlite")])
    err = capsys.readouterr().err
    assert status == 2 and "no results store here" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["calibrate", "--runs", "0"])
    assert exit_info.value.code == 2


def test_positions_match_the_resolution_order():
    case = cases_of(COMMENTED)[0]
    assert Position(("catalogue",), "f32").rank < Position(("catalogue",), "f32.fwd").rank \
        < Position(("suite", "g"), "").rank < Position(("suite", "g"), "fwd").rank < Position(("suite", "g"), "f32").rank
    assert Position(("suite", "g"), "f32").matches(case) and not Position(("suite", "h"), "f32").matches(case)
    assert Position(("config", "g", "a"), "f32.fwd").label("rms") == "g/a: tolerances.f32.fwd.rms"


def test_write_adds_an_override_to_a_table_written_in_pieces():
    """[tolerances.f16] and [tolerances.f16.bwd_data] apart in the file: tomlkit gives a proxy with no append."""
    from e2egen.generator.cases import expand
    from e2egen.generator.layers import Source
    from e2egen.generator.loader import parse_catalogue
    from e2egen.nightly.calibrate import Change, apply_changes
    from conftest import TINY_CONV, catalogue_text

    text = catalogue_text(TINY_CONV) + "\n[tolerances.f16.bwd_data]\nrms = 2e-3\n"
    catalogue = parse_catalogue(text, "configs.toml")
    change = Change(Source(("catalogue",), "f16.bwd_weight"), "rms", None, 5e-3)
    written = apply_changes(text, catalogue, [change])
    rms = {(c.dtype, c.direction): c.tolerances["rms"] for c in expand(parse_catalogue(written, "configs.toml"))}
    assert rms[("f16", "bwd_weight")] == 5e-3 and rms[("f16", "bwd_data")] == 2e-3 and rms[("f16", "fwd")] == 1e-3
    assert written.startswith(text.split("[tolerances.f16]")[0])  # everything before the edit is kept byte for byte


def test_an_integer_output_s_own_exactness_is_not_calibrated(tmp_path):
    """A catalogue of one's own with an i8 gemm and no tolerances.i8: its cases are exact by the op's own default
    (max_abs_diff = 0), which no catalogue table holds; calibrate once died on it with a KeyError."""
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import parse_catalogue
    from e2egen.nightly.calibrate import calibrate
    from e2egen.nightly.evidence import Evidence

    catalogue = parse_catalogue("""
seed = 1
[ranges]
ints = { range = [-128, 127], data = "integers" }
[[suite]]
name = "mine"
op = "gemm"
dtypes = ["i8"]
layouts = ["nn"]
ranges = ["ints"]
[[suite.config]]
name = "small"
m = 8
n = 8
k = 16
""")
    cases = expand(catalogue)
    assert cases[0].tolerances == {"max_abs_diff": 0}
    result = calibrate(catalogue, cases, Evidence(runs=(), asked=1, cases={}))
    assert not result.changes and not result.states
