"""Evidence for the error-bound verdict (docs/evidence/error-bound.md).

Runs correct kernels (torch's own and four reordered summations) and
deliberately wrong ones (runner/ops/product_sum/kernels.py) on shapes of the shipped
catalogue, over seeds and the ranges r0 r1 r4 r5 in f32, f16 and bf16,
through the runner (runner.run with impl="e2egen.runner.ops.product_sum.kernels:NAME") and
metrics.compare, and judges every run with the bound (bound_ratio <= 1) and
with the peers' rules:

    assert_close   torch.testing.assert_close(out, ref, check_dtype=False): the
                   defaults of out's dtype (f32 rtol 1.3e-6, f16 1e-3, bf16 1.6e-2; atol 1e-5)
    rms<=1e-3      rocMLIR's RMS rule (the project's `rms` metric)
    allclose 1e-2  KernelBench: torch.allclose(out, ref, atol=1e-2, rtol=1e-2)
    FlagGems       gems_assert_close: assert_close(out, ref.to(dtype), atol=1e-4·K,
                   rtol=RESOLUTION[dtype] (f32 1.3e-6, f16 1e-3, bf16 0.016)), K the reduction size
    eps<=1         the seed's maxEpsilonDiff <= 1 (`max_eps_diff`)

Every rule also fails a run with a NaN or inf where the reference is finite.
A run whose exact result overflows the output format (metrics' `overflow`
count) is reported as "overflow" and left out of every rate.

The bound's model: the default (lambda 5, acc f32, sqrt(K)) for every plug-in
kernel; torch's own kernel is judged under the model the shipped catalogue
declares for its cell (acc = "f16" for f16 bwd_data / bwd_weight: torch's CPU
kernels round partial sums to f16 there).

    .venv/bin/python -m e2egen.studies.bound_evidence            # the docs' table (~10 min on 2 cores)
    .venv/bin/python -m e2egen.studies.bound_evidence --quick    # 1-2 minutes
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python studies/bound_evidence.py` as well as `-m`
    sys.path.insert(0, str(REPO))

from e2egen import metrics  # noqa: E402
from e2egen import runner  # noqa: E402
from e2egen.files import write_text_atomically  # noqa: E402
from e2egen.generator import layers  # noqa: E402
from e2egen.generator.cases import derive_seed  # noqa: E402
from e2egen.generator.loader import load_catalogue  # noqa: E402
from e2egen.runner.bound import ProductSumError, effective_arithmetic  # noqa: E402
from e2egen.runner.dtypes import storage_dtype  # noqa: E402
from e2egen.runner.ops.product_sum import kernels as alternates  # noqa: E402

KERNELS_MODULE = "e2egen.runner.ops.product_sum.kernels"
CORRECT = ("torch", *alternates.CORRECT)
WRONG = alternates.WRONG
RANGES = ("r0", "r1", "r4", "r5")
DTYPES = ("f32", "f16", "bf16")
LAMBDAS = (0.5, 1, 2, 3, 5, 10, 20, 50, 100, 1000)
DEFAULT_LAMBDA = 5.0
RULES = ("bound", "bound strict", "assert_close", "rms<=1e-3", "allclose 1e-2", "FlagGems", "eps<=1")
RULE_NOTES = {
    "bound": "bound_ratio <= 1 (lambda 5, sqrt(K), the catalogue's model)",
    "bound strict": "the same with g(K) = K and lambda 1 (the deterministic worst case)",
    "assert_close": "torch.testing.assert_close defaults of the output dtype",
    "rms<=1e-3": "rocMLIR: rms <= 1e-3",
    "allclose 1e-2": "KernelBench: allclose atol = rtol = 1e-2",
    "FlagGems": "FlagGems: atol 1e-4*K, rtol per dtype, against ref.to(dtype)",
    "eps<=1": "seed: max_eps_diff <= 1",
}
ASSERT_CLOSE = {"f32": (1.3e-6, 1e-5), "f16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5)}  # (rtol, atol)
FLAGGEMS_RTOL = {"f32": 1.3e-6, "f16": 1e-3, "bf16": 0.016}
TIGHTNESS_SAMPLE = 4096

# (suite, config, directions, parameter overrides): shapes of configs.toml, small enough for 2 CPU cores.
FULL = (
    ("resnet50", "stem-7x7-s2", ("bwd_weight",), {}),
    ("resnet50", "stem-7x7-s2", ("fwd", "bwd_data"), {"hw": [56, 56]}),
    ("resnet50", "l4-3x3-512", ("fwd", "bwd_data"), {"n": 1}),
    ("grouped", "mbv2-dw-3x3-144-s2", None, {"n": 1}),
    ("grouped", "asym-5x3-s2x1", None, {}),
    ("conv1d-3d", "wav2vec-k3-s2-512", ("fwd", "bwd_data"), {"n": 1}),
    ("conv1d-3d", "wav2vec-k3-s2-512", ("bwd_weight",), {"n": 1, "c": 128, "k": 128}),
    ("video", "c3d-3x3x3-64", None, {"c": 32, "k": 32, "dhw": [4, 14, 14]}),
    ("bert", "attn-scores-b48-128x128x64", None, {"batch": 4}),
    ("bert", "qkv-512x768x768", None, {"m": 128}),
    ("llm", "decode-ffn-down-16x4096x11008", None, {"n": 256}),
)
QUICK = (
    ("resnet50", "l4-3x3-512", ("fwd", "bwd_data"), {"n": 1, "c": 128, "k": 128}),
    ("grouped", "mbv2-dw-3x3-144-s2", ("bwd_weight",), {"n": 1}),
    ("conv1d-3d", "wav2vec-k3-s2-512", ("fwd",), {"n": 1, "c": 128, "k": 128}),
    ("bert", "attn-scores-b48-128x128x64", None, {"batch": 2}),
)


@dataclass
class Record:
    case: str
    direction: str
    dtype: str
    range: str
    kernel: str
    kind: str  # "correct" | "wrong"
    acc: str  # the format the bound's accumulation follows (measured, or the dtype's assumed one)
    status: str = "ok"  # "ok" | "overflow" | "kernel failed"
    accumulation: str = ""  # the measured arithmetic's accumulation in words (measured runs only)
    reason: str = ""
    bound_ratio: float = math.nan
    by_lambda: tuple[float, ...] = ()
    default_ratio: float = math.nan  # bound_ratio under the default model (lambda 5, acc f32)
    declared_ratio: float = math.nan  # ... under the model the catalogue declares for the cell
    max_ulp: int = 0  # metrics' max_ulp_diff
    acc_used: float = 0.0  # max over elements of (|ref − out| − ulp/2)⁺ / (lam·g(K)·u_acc·Σ|a·b|)
    reduction: int = 0
    fails: dict[str, bool] = field(default_factory=dict)
    tightness: np.ndarray | None = None


# -- the shapes ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    label: str
    op: str
    direction: str
    params: dict
    layouts: tuple[str, ...]
    model: dict  # the catalogue's BoundModel per dtype


def shapes(catalogue, selection) -> list[Shape]:
    suites = {s.name: s for s in catalogue.suites}
    found = []
    for suite_name, config_name, directions, overrides in selection:
        suite = suites[suite_name]
        config = next(c for c in suite.configs if c.name == config_name)
        params = {**config.params, **overrides}
        changed = ", ".join(f"{k}={v}" for k, v in overrides.items())
        for direction in directions or suite.directions:
            models = {dtype: runner.BoundModel.from_catalogue(
                          layers.merge((catalogue.bound, suite.bound, config.bound), dtype, direction))
                      for dtype in DTYPES}
            label = f"{suite_name}/{config_name}" + (f" ({changed})" if changed else "")
            found.append(Shape(label, suite.op, direction, params, tuple(suite.layouts), models))
    return found


def bound_model(shape: Shape, dtype: str, kernel: str) -> runner.BoundModel:
    """torch: the catalogue's model for the cell; a plug-in kernel: the default model."""
    if kernel != "torch":
        return runner.BoundModel(lam=DEFAULT_LAMBDA)
    return shape.model[dtype]


# -- one run -------------------------------------------------------------------------------
def _max_ratio(diff: torch.Tensor, bound: torch.Tensor, mismatch: bool) -> float:
    if mismatch:
        return math.inf
    ratio = torch.where(diff == 0, torch.zeros_like(diff), diff / bound.abs())  # a -0 bound is 0, as compare reads it
    return float(ratio.max()) if ratio.numel() else 0.0


def judge(record: Record, result, comparison, problem, model: runner.BoundModel, declared: runner.BoundModel) -> None:
    ref, dtype, reduction = result.ref, result.out_dtype, problem.reduction_size
    out = result.out.to(torch.float64).reshape(ref.shape).cpu()
    mismatch = comparison.nan_mismatch + comparison.inf_mismatch > 0
    fmax = metrics.get_format(dtype).max
    compared = torch.isfinite(ref) & (ref.abs() <= fmax) & torch.isfinite(out)
    diff = (out - ref).abs()[compared]
    ulp = metrics.ulp(ref, dtype)[compared]
    error_bound = result.primary.error_bound  # the runner's bound, evaluated under other models below

    def under(m: runner.BoundModel) -> torch.Tensor:
        return error_bound.evaluate(m, ref)[compared]

    record.reduction = reduction
    record.bound_ratio = comparison.bound_ratio
    record.max_ulp = comparison.max_ulp_diff
    accumulation = error_bound.part(ProductSumError).evaluate(model)[compared]
    beyond_rounding = (diff - ulp / 2).clamp(min=0)
    used = torch.where(beyond_rounding == 0, torch.zeros_like(diff), beyond_rounding / accumulation)
    record.acc_used = math.inf if mismatch else (float(used.max()) if used.numel() else 0.0)
    record.by_lambda = tuple(_max_ratio(diff, under(dataclasses.replace(model, lam=float(lam))), mismatch)
                             for lam in LAMBDAS)
    default = runner.BoundModel(lam=DEFAULT_LAMBDA)
    record.default_ratio = _max_ratio(diff, under(default), mismatch)
    record.declared_ratio = _max_ratio(diff, under(declared), mismatch)
    strict = _max_ratio(diff, under(dataclasses.replace(model, lam=1.0, strict=True)), mismatch)
    rtol, atol = ASSERT_CLOSE[dtype]
    ref_t = ref.to(storage_dtype(dtype)).to(torch.float64)  # FlagGems compares with ref.to(dtype)
    record.fails = {
        "bound": mismatch or comparison.bound_ratio > 1,
        "bound strict": strict > 1,
        "assert_close": not bool(torch.isclose(out, ref, rtol=rtol, atol=atol).all()),
        "rms<=1e-3": mismatch or not comparison.rms <= 1e-3,
        "allclose 1e-2": not torch.allclose(out, ref, rtol=1e-2, atol=1e-2),
        "FlagGems": not bool(torch.isclose(out, ref_t, rtol=FLAGGEMS_RTOL[dtype], atol=1e-4 * reduction).all()),
        "eps<=1": mismatch or comparison.max_eps_diff > 1,
    }
    if record.kind == "correct":
        bound = result.bound[compared]
        full = torch.where(diff == 0, torch.zeros_like(diff), diff / bound.abs())
        step = max(1, full.numel() // TIGHTNESS_SAMPLE)
        record.tightness = full[::step].numpy().copy()


def run_one(shape: Shape, dtype: str, range_name: str, lo_hi, seed_index: int, global_seed: int,
            kernel: str, kind: str) -> Record:
    case = f"{shape.label} {shape.direction} {dtype} {range_name} #{seed_index}"
    layout = shape.layouts[seed_index % len(shape.layouts)]
    seed = derive_seed(global_seed, f"bound-evidence/{shape.label}/{shape.direction}/{dtype}/{range_name}/{seed_index}")
    problem = runner.make_problem(shape.op, shape.direction, dtype, layout, shape.params, lo_hi, seed)
    model = bound_model(shape, dtype, kernel)
    declared = bound_model(shape, dtype, "torch")
    # the accumulator the bound follows: the measured one (set below) or, for a plug-in, the dtype's assumed one
    record = Record(case, shape.direction, dtype, range_name, kernel, kind, effective_arithmetic(model, dtype).acc_name)
    impl = None if kernel == "torch" else f"{KERNELS_MODULE}:{kernel}"
    try:
        # torch is judged under its measured arithmetic (the shipped profile); a plug-in under the default
        # model, so a wrong kernel's own arithmetic cannot excuse it
        result = runner.run(problem, impl=impl, device="cpu", bound=model, measure=kernel == "torch")
    except runner.KernelFailure as failure:
        record.status, record.reason = "kernel failed", failure.reason
        return record
    comparison = metrics.compare(result.ref, result.out, dtype=result.out_dtype, bound=result.bound)
    if comparison.overflow:
        record.status = "overflow"
        return record
    if result.arithmetic is not None:
        model = model.with_arithmetic(result.arithmetic.arithmetic)
        declared = declared.with_arithmetic(result.arithmetic.arithmetic)
        record.acc = result.arithmetic.arithmetic.acc_name  # the format the partial sums are added in
        record.accumulation = result.arithmetic.arithmetic.describe_accumulation()
    judge(record, result, comparison, problem, model, declared)
    return record


def collect(selection, seeds: int, ranges, dtypes, catalogue_path: Path, progress=None) -> list[Record]:
    catalogue = load_catalogue(catalogue_path)
    records = []
    for shape in shapes(catalogue, selection):
        for dtype in dtypes:
            for range_name in ranges:
                for seed_index in range(seeds):
                    for kernel in (*CORRECT, *WRONG):
                        if kernel in alternates.CONV_ONLY and shape.op == "gemm":
                            continue
                        kind = "correct" if kernel in CORRECT else "wrong"
                        records.append(run_one(shape, dtype, range_name, catalogue.ranges[range_name], seed_index,
                                               catalogue.seed, kernel, kind))
                if progress:
                    progress(f"{shape.label} {shape.direction} {dtype} {range_name}")
    return records


# -- the report ----------------------------------------------------------------------------
def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}% ({part}/{whole})" if whole else "–"


def _rates(records, rule):
    correct = [r for r in records if r.kind == "correct" and r.status == "ok"]
    wrong = [r for r in records if r.kind == "wrong" and r.status == "ok"]
    false_fail = sum(r.fails[rule] for r in correct)
    caught = sum(r.fails[rule] for r in wrong)
    return false_fail, len(correct), caught, len(wrong)


def report(records: list[Record], command: str, seconds: float, shape_list: list[Shape], seeds: int,
           ranges, dtypes) -> str:
    lines = ["<!-- generated by studies/bound_evidence.py -->", f"Command: `{command}` ({seconds / 60:.1f} min, "
             f"{len(records)} runs, torch {torch.__version__}, CPU).", ""]
    lines += ["Shapes (from configs.toml; overrides in parentheses keep the CPU run short):", ""]
    seen = []
    for s in shape_list:
        if s.label not in seen:
            seen.append(s.label)
    lines += [f"- {label}: " + ", ".join(s.direction for s in shape_list if s.label == label) for label in seen]
    lines += ["", f"dtypes {', '.join(dtypes)}; ranges {', '.join(ranges)}; {seeds} seed(s) each; layouts alternate "
              "with the seed.", ""]

    ok = [r for r in records if r.status == "ok"]
    overflow = [r for r in records if r.status == "overflow"]
    failed = [r for r in records if r.status == "kernel failed"]
    lines += [f"Runs judged: {len(ok)}; overflow (left out): {len(overflow)}"
              + (f" ({_overflow_summary(overflow)})" if overflow else "")
              + f"; kernel failures: {len(failed)}.", ""]
    for r in failed[:5]:
        lines.append(f"- kernel failed: {r.kernel} on {r.case}: {r.reason}")

    # Table 1: the rules.
    lines += ["### Rules: false failures on correct kernels, wrong runs caught", ""]
    lines += ["False failures: correct runs the rule fails (of the correct runs); caught: wrong runs it fails "
              "(of the wrong runs). Per dtype, then all.", ""]
    head = ("| rule | " + " | ".join(f"false fail. {d}" for d in dtypes) + " | false failures | "
            + " | ".join(f"caught {d}" for d in dtypes) + " | caught |")
    lines += [head, "|" + " --- |" * (3 + 2 * len(dtypes))]
    for rule in RULES:
        ff, nc, caught, nw = _rates(records, rule)
        per_dtype = [_rates([r for r in records if r.dtype == d], rule) for d in dtypes]
        lines.append(f"| {rule} | " + " | ".join(f"{100 * f / n:.0f}%" if n else "–" for f, n, _, _ in per_dtype)
                     + f" | **{_pct(ff, nc)}** | " + " | ".join(f"{100 * c / w:.0f}%" if w else "–" for _, _, c, w in per_dtype)
                     + f" | **{_pct(caught, nw)}** |")
    lines += [""] + [f"- {rule}: {note}" for rule, note in RULE_NOTES.items()] + [""]

    # Table 2: false failures per correct kernel.
    lines += ["### False failures per correct kernel", "", "| kernel | runs | " + " | ".join(RULES) + " |",
              "|" + " --- |" * (2 + len(RULES))]
    for kernel in CORRECT:
        sub = [r for r in ok if r.kernel == kernel]
        lines.append(f"| {kernel} | {len(sub)} | " + " | ".join(str(sum(r.fails[rule] for r in sub)) for rule in RULES) + " |")
    lines.append("")

    # Table 3: catches per wrong kernel.
    lines += ["### Wrong runs caught, per wrong kernel", "", "| kernel | runs | " + " | ".join(RULES) + " |",
              "|" + " --- |" * (2 + len(RULES))]
    for kernel in WRONG:
        sub = [r for r in ok if r.kernel == kernel]
        if not sub:
            continue
        lines.append(f"| {kernel} | {len(sub)} | "
                     + " | ".join(f"{100 * sum(r.fails[rule] for r in sub) / len(sub):.0f}%" for rule in RULES) + " |")
    lines.append("")

    # Table 4: lambda.
    correct = [r for r in ok if r.kind == "correct"]
    wrong = [r for r in ok if r.kind == "wrong"]
    kernels = [k for k in WRONG if any(r.kernel == k for r in wrong)]
    lines += ["### lambda: the largest bound_ratio of a correct run, and the wrong runs caught", "",
              "Each run's bound_ratio recomputed with B = lambda·g(K)·u_acc·Σ|a·b| + c_out·ulp (its cell's acc).", "",
              "| lambda | max ratio, correct | false failures | wrong caught | " + " | ".join(kernels) + " |",
              "|" + " --- |" * (4 + len(kernels))]
    for i, lam in enumerate(LAMBDAS):
        cmax = max((r.by_lambda[i] for r in correct), default=math.nan)
        ff = sum(r.by_lambda[i] > 1 for r in correct)
        caught = sum(r.by_lambda[i] > 1 for r in wrong)
        per_kernel = []
        for k in kernels:
            sub = [r for r in wrong if r.kernel == k]
            per_kernel.append(f"{100 * sum(r.by_lambda[i] > 1 for r in sub) / len(sub):.0f}%")
        mark = " (default)" if lam == DEFAULT_LAMBDA else ""
        lines.append(f"| {lam:g}{mark} | {cmax:.3g} | {ff}/{len(correct)} | {_pct(caught, len(wrong))} | "
                     + " | ".join(per_kernel) + " |")
    lines.append("")
    lines += ["Wrong runs the bound misses (lambda 5), per kernel (distance to the correctly rounded result: "
              "max_ulp_diff):", ""]
    for kernel in kernels:
        sub = [r for r in wrong if r.kernel == kernel]
        low = min(sub, key=lambda r: r.bound_ratio)
        missed = [r for r in sub if not r.fails["bound"]]
        most = max((r.max_ulp for r in missed), default=0)
        ulps = f", within {most:g} ulp of the correctly rounded result" if missed and most <= 16 else ""
        lines.append(f"- {kernel}: missed {len(missed)}/{len(sub)}" + (f" ({_where(missed)}{ulps})" if missed else "")
                     + f"; smallest ratio {low.bound_ratio:.3g} ({low.case})")
    lines.append("")

    # Table 5: headroom.
    lines += ["### Headroom: largest bound_ratio of a correct kernel (lambda 5)", "",
              "max, torch / reordered: bound_ratio; acc. term used: the largest (|ref − out| − ulp/2)⁺ / "
              "(lambda·g(K)·u_acc·Σ|a·b|), i.e. how much of the accumulation term a correct kernel needed "
              "beyond the output's own rounding.", "",
              "| dtype | direction | max, torch | max, reordered | acc. term used | where (the larger ratio) | K range |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for dtype in dtypes:
        for direction in ("fwd", "bwd_data", "bwd_weight"):
            sub = [r for r in correct if r.dtype == dtype and r.direction == direction]
            if not sub:
                continue
            top = max(sub, key=lambda r: r.bound_ratio)
            t = max((r.bound_ratio for r in sub if r.kernel == "torch"), default=math.nan)
            o = max((r.bound_ratio for r in sub if r.kernel != "torch"), default=math.nan)
            acc = {r.acc for r in sub if r.kernel == "torch"}
            note = f" (torch judged with acc={'/'.join(sorted(acc))})" if acc != {"f32"} else ""
            ks = [r.reduction for r in sub]
            used = max(r.acc_used for r in sub)
            lines.append(f"| {dtype} | {direction} | {t:.3g}{note} | {o:.3g} | {used:.3g} | {top.kernel}, {top.case} "
                         f"| {min(ks)}–{max(ks)} |")
    lines.append("")
    # cells whose declared model is not the default one (torch is judged with the declared model)
    cells = sorted({(r.dtype, r.direction) for r in ok if r.kernel == "torch" and r.declared_ratio != r.default_ratio})
    if cells:
        inside = [r for r in ok if (r.dtype, r.direction) in cells]
        torch_runs = [r for r in inside if r.kernel == "torch"]
        wrong_in = [r for r in inside if r.kind == "wrong"]
        plug_correct = [r for r in inside if r.kind == "correct" and r.kernel != "torch"]
        names = ", ".join(f"{d} {di}" for d, di in cells)
        lines += [f"Cells with a declared model ({names}: acc = {'/'.join(sorted({r.acc for r in torch_runs}))}):", ""]
        for d, di in cells:
            runs = [r for r in torch_runs if (r.dtype, r.direction) == (d, di)]
            top = max(runs, key=lambda r: r.default_ratio)
            lines.append(f"- torch, {d} {di}, {len(runs)} runs: largest bound_ratio "
                         f"{max(r.declared_ratio for r in runs):.3g} under the declared model; under the default model "
                         f"{sum(r.default_ratio > 1 for r in runs)} would fail, up to {top.default_ratio:.3g} ({top.case}).")
        lines += [
                  f"- reordered f32-accumulating kernels, {len(plug_correct)} runs: largest bound_ratio "
                  f"{max((r.default_ratio for r in plug_correct), default=math.nan):.3g} (default model).",
                  f"- wrong kernels, {len(wrong_in)} runs: caught {sum(r.default_ratio > 1 for r in wrong_in)} under "
                  f"the default model, {sum(r.declared_ratio > 1 for r in wrong_in)} under the declared one "
                  f"(acc_lowp: {sum(r.declared_ratio > 1 for r in wrong_in if r.kernel == 'acc_lowp')}/"
                  f"{sum(r.kernel == 'acc_lowp' for r in wrong_in)}).", ""]

    # Table 6: tightness.
    lines += ["### Tightness: |ref − out| / B over elements of correct runs (sampled, pooled)", "",
              "| dtype | kernels | median | p90 | p99 | max | elements |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for dtype in dtypes:
        for label, group, acc in (("torch", ("torch",), "f32"), ("torch, partials added in f16", ("torch",), "f16"),
                                  ("reordered", alternates.CORRECT, "f32")):
            samples = [r.tightness for r in correct if r.dtype == dtype and r.kernel in group and r.acc == acc
                       and r.tightness is not None]
            if not samples:
                continue
            pooled = np.concatenate(samples)
            q = np.quantile(pooled, [0.5, 0.9, 0.99])
            lines.append(f"| {dtype} | {label} | {q[0]:.3g} | {q[1]:.3g} | {q[2]:.3g} | {pooled.max():.3g} | {pooled.size} |")
    lines.append("")
    return "\n".join(lines)


def _where(records) -> str:
    counts = defaultdict(int)
    for r in records:
        counts[f"{r.dtype} {r.direction} {r.range}"] += 1
    return ", ".join(f"{k} ×{v}" for k, v in sorted(counts.items()))


def _overflow_summary(records) -> str:
    counts = defaultdict(int)
    for r in records:
        counts[f"{r.dtype} {r.range}"] += 1
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller shapes, 1 seed (1-2 minutes)")
    parser.add_argument("--seeds", type=int, help="seeds per cell (default 2; 1 with --quick)")
    parser.add_argument("--ranges", nargs="+", choices=RANGES, default=list(RANGES))
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    parser.add_argument("--catalogue", type=Path, default=REPO / "configs.toml")
    parser.add_argument("--out", type=Path, help="write the Markdown here (default: stdout)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a shared 2-core machine more threads ran 4x slower)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    selection = QUICK if args.quick else FULL
    seeds = args.seeds or (1 if args.quick else 2)
    progress = (lambda text: print(f"[{time.perf_counter() - started:6.1f}s] {text}", file=sys.stderr)) if args.verbose else None
    started = time.perf_counter()
    records = collect(selection, seeds, args.ranges, args.dtypes, args.catalogue, progress)
    seconds = time.perf_counter() - started
    shown = [a for a in (sys.argv[1:] if argv is None else argv) if a not in ("-v", "--verbose")]
    if "--out" in shown:
        del shown[shown.index("--out"):shown.index("--out") + 2]
    command = " ".join([".venv/bin/python -m e2egen.studies.bound_evidence", *shown])
    text = report(records, command, seconds, shapes(load_catalogue(args.catalogue), selection), seeds,
                  args.ranges, args.dtypes)
    if args.out:
        write_text_atomically(args.out, text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
