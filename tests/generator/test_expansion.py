"""Expansion: counts, excludes, ids, seeds, tolerance resolution, PR marking."""
from __future__ import annotations

from conftest import TINY_CONV, TINY_GEMM, catalogue_text
from e2egen.generator.cases import derive_seed, expand
from e2egen.generator.loader import parse_catalogue
from e2egen.runner.options import BoundModel


def cases_of(text: str, path: str = "configs.toml"):
    return expand(parse_catalogue(text, path))


def test_counts_are_the_product_of_axes():
    cases = cases_of(catalogue_text(TINY_CONV, TINY_GEMM))
    assert len([c for c in cases if c.suite == "tiny"]) == 1 * 2 * 3 * 2 * 1
    assert len([c for c in cases if c.suite == "mm"]) == 1 * 1 * 1 * 2 * 2


def test_ids_are_readable_and_unique():
    cases = cases_of(catalogue_text(TINY_CONV, TINY_GEMM))
    assert "tiny/conv2d/c4/bwd_data/f16/nhwc/r0" in {c.id for c in cases}
    assert "mm/gemm/m8/fwd/f32/tt/r4" in {c.id for c in cases}
    assert len({c.id for c in cases}) == len(cases)


def test_config_exclude_is_a_conjunction():
    text = catalogue_text(TINY_CONV + 'exclude = [{ dtypes = ["f16"], directions = ["bwd_data", "bwd_weight"] }]\n')
    cases = cases_of(text)
    assert len(cases) == 12 - 4
    assert not [c for c in cases if c.dtype == "f16" and c.direction != "fwd"]
    assert [c for c in cases if c.dtype == "f16" and c.direction == "fwd"]


def test_suite_exclude_can_name_configs():
    suite_exclude = 'exclude = [{ configs = ["c4"], layouts = ["nhwc"] }]\n'
    text = catalogue_text(TINY_CONV.replace('ranges = ["r0"]\n', 'ranges = ["r0"]\n' + suite_exclude))
    assert {c.layout for c in cases_of(text)} == {"nchw"}


def test_seeds_derive_from_global_seed_and_id():
    cases = cases_of(catalogue_text(TINY_CONV))
    assert all(c.seed == derive_seed(7, c.id) for c in cases)
    assert len({c.seed for c in cases}) == len(cases)
    again = cases_of(catalogue_text(TINY_CONV))
    assert [c.seed for c in again] == [c.seed for c in cases]
    other = expand(parse_catalogue(catalogue_text(TINY_CONV), "configs.toml"), global_seed=8)
    assert all(a.seed != b.seed for a, b in zip(cases, other))


def test_tolerances_most_specific_wins():
    text = catalogue_text(TINY_CONV.replace('ranges = ["r0"]\n', '''ranges = ["r0"]
tolerances = { max_eps_diff = 50, f16 = { max_eps_diff = 40, rms = 2e-3 } }
''') + '''tolerances.max_eps_diff = 30
tolerances.f32 = { max_eps_diff = 20, max_abs_diff = false, bound_rms = false }
''').replace("[ranges]", "[tolerances]\nrel_l2 = 0.5\nbias_z = 3.0\n[ranges]")
    cases = {c.dtype: c.tolerances for c in cases_of(text) if c.direction == "fwd" and c.layout == "nchw"}
    # e2egen's defaults (bound_ratio 1, bound_rms 0.5, bias_z 6) < global rel_l2, bias_z < dtype tables
    # < suite < suite+dtype < config < config+dtype
    assert cases["f16"] == {"rel_l2": 0.5, "rms": 2e-3, "max_eps_diff": 30, "bound_ratio": 1.0, "bound_rms": 0.5,
                            "bias_z": 3.0}
    # false removed max_abs_diff (the catalogue's f32 table sets it) and bound_rms (a default), for f32 only
    assert cases["f32"] == {"rel_l2": 0.5, "rms": 1e-6, "max_eps_diff": 20, "bound_ratio": 1.0, "bias_z": 3.0}


def test_bound_options_only_when_bound_ratio_is_checked():
    # f16 checks bound_ratio by default (e2egen's default verdict); f32's table turns it off, and bound_rms
    # with it (bound_rms, like bound_ratio, is computed only with a bound), so f32 checks no bound metric.
    text = catalogue_text(TINY_CONV + 'bound = { f16 = { acc = "f16" } }\n').replace(
        "max_abs_diff = 1e-3", "max_abs_diff = 1e-3\nbound_ratio = false\nbound_rms = false")
    cases = cases_of(text)
    f16 = next(c for c in cases if c.dtype == "f16")
    f32 = next(c for c in cases if c.dtype == "f32")
    assert f16.tolerances["bound_ratio"] == 1.0 and not {"bound_ratio", "bound_rms"} & set(f32.tolerances)
    assert f16.bound == BoundModel(lam=5.0, acc="f16", strict=False, c_out=1.0)
    assert f32.bound is None


def test_pr_marking_from_suite_config_and_selection(write_catalogue, tmp_path):
    (tmp_path / "sel.toml").write_text('[[case]]\nid = "mm/gemm/m8/fwd/f32/nn/r4"\nwhy = "lowest headroom"\n')
    text = catalogue_text(TINY_CONV.replace('ranges = ["r0"]\n', 'ranges = ["r0"]\npr = true\n'), TINY_GEMM)
    path = write_catalogue(text.replace("seed = 7", 'seed = 7\npr_selection = "sel.toml"'))
    from e2egen.generator.loader import load_catalogue

    cases = expand(load_catalogue(path))
    pr = {c.id: c.pr_reason for c in cases if c.pr}
    assert pr["mm/gemm/m8/fwd/f32/nn/r4"] == "selection: lowest headroom"
    assert all(pr[c.id] == "suite pr = true" for c in cases if c.suite == "tiny")
    assert len(pr) == 12 + 1
    marked = next(c for c in cases if c.id == "mm/gemm/m8/fwd/f32/nn/r4")
    assert marked.markers[:5] == ("pr", "gemm", "f32", "fwd", "nn")


def test_config_pr_false_overrides_suite():
    text = catalogue_text(TINY_CONV.replace('ranges = ["r0"]\n', 'ranges = ["r0"]\npr = true\n') + "pr = false\n")
    assert not any(c.pr for c in cases_of(text))


def test_flops_and_reduction_size_recorded():
    case = next(c for c in cases_of(catalogue_text(TINY_GEMM)))
    assert case.flops == 2 * 8 * 8 * 16 and case.reduction_size == 16


def test_case_round_trips_through_dict():
    from e2egen.generator.cases import Case

    for case in cases_of(catalogue_text(TINY_CONV, TINY_GEMM)):
        assert Case.from_dict(case.to_dict()) == case


def test_direction_and_dtype_direction_layers():
    extra = """bound = { acc = "bf16", bwd_data = { acc = "f32", lambda = 3.0 }, f16 = { lambda = 4.0, bwd_weight = { acc = "f16" } } }
"""
    text = catalogue_text(TINY_CONV + extra).replace("rms = 1e-6", "rms = 1e-6\nbound_ratio = 1.0").replace("rms = 1e-3", "rms = 1e-3\nbound_ratio = 1.0")
    bound = {(c.dtype, c.direction): c.bound for c in cases_of(text)}
    assert bound[("f32", "fwd")].acc == "bf16"
    assert bound[("f32", "bwd_data")] == BoundModel(lam=3.0, acc="f32", strict=False, c_out=1.0)
    assert bound[("f16", "bwd_data")].lam == 4.0  # dtype is more specific than direction
    assert bound[("f16", "bwd_weight")].acc == "f16" and bound[("f32", "bwd_weight")].acc == "bf16"
