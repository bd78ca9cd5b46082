"""e2egen explain CASE_ID | e2egen study STUDY.toml: say why a case's error is what it is; run the seed's study grid."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from e2egen.commands.arguments import EXIT_FAILED, EXIT_OK, catalogue_argument
from e2egen.errors import UsageError
from e2egen.json_output import arithmetic_findings, emit, json_argument
from e2egen.runner.leftovers import ends_what_kernels_leave


def register(sub) -> None:
    p = sub.add_parser(
        "explain", help="rerun one case under reference variants and other ranges, and name the likely cause of its error",
        description="Rerun one case: metrics under each reference variant (plain, ftz, accumulate = k, round_output, "
                    "device) and accumulator model, the kernel at r4 [1, 5] and at a narrower range, an exact-arithmetic "
                    "probe; print the tables, the worst elements, the likely cause and the remedy. Exit 0 when the "
                    "case passes, 1 when it fails, 2 for a user error. On a terminal a progress bar on stderr names the "
                    "step it is at (a big case takes a minute).")
    p.add_argument("case_id", help="a case id as printed by `e2egen list`")
    p.add_argument("--seed", type=int, default=None, help="the case's seed (default: derived from the catalogue's seed)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: CUDA when present, else CPU")
    p.add_argument("--no-search", action="store_true", help="skip the accumulator-model search (faster on big cases)")
    catalogue_argument(p, positional=False)
    json_argument(p)
    p.set_defaults(handler=explain)

    p = sub.add_parser(
        "study", help="run a study grid (cases x ranges x reference variants x validation methods) and write the seed's tables",
        description="Run STUDY.toml's grid and write study.md, study.html and results.json to --out.")
    p.add_argument("study", metavar="STUDY.toml",
                   help=f"the study description, not a catalogue (a sample: {sample_study()}; its `catalogue` key "
                        "names the catalogue it studies, relative to the study file)")
    p.add_argument("--out", default=None, help="output directory (default: build/studies/<study file stem>)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: CUDA when present, else CPU")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(handler=study)


@ends_what_kernels_leave
def explain(args) -> int:
    from e2egen import runner
    from e2egen.commands.run_command import find_case
    from e2egen.diagnose.explain import explain_case
    from e2egen.diagnose.report import render

    case = find_case(args.catalogue, args.case_id)
    if args.seed is not None:
        if args.seed < 0:
            raise UsageError(f"--seed: expected an integer >= 0, got {args.seed}")
        case = case.with_seed(args.seed)
    try:
        if not isinstance(runner.OPS[case.op], runner.ProductSumOp):  # a composed bound: explain its terms
            from e2egen.diagnose.explain_terms import explain_terms, render_terms

            with progress_bar(explain_terms_stages()) as progress:
                explanation = explain_terms(case, device=args.device, progress=progress)
            if args.json:
                emit("explain", **terms_explanation_fields(explanation, args.catalogue))
            else:
                print(render_terms(explanation))
            return EXIT_OK if explanation.passed else EXIT_FAILED
        with progress_bar(explain_stages()) as progress:
            explanation = explain_case(case, device=args.device, search=not args.no_search, progress=progress)
    except (runner.ProblemError, runner.ImplError) as err:  # name the case: the catalogue passed, this run did not
        raise UsageError(str(err), where=case.id) from None
    if args.json:
        emit("explain", **explanation_fields(explanation, args.catalogue))
    else:
        print(render(explanation, args.catalogue))
    return EXIT_OK if explanation.passed else EXIT_FAILED


# -- `explain --json`: the e2egen.explain/1 document (docs/reference/json-output.md) ---------------------------
def _status(passed: bool, skipped: str) -> str:
    return "skipped" if skipped else ("passed" if passed else "failed")


def _verdict_fields(verdict) -> dict | None:
    if verdict is None:
        return None
    return {"passed": bool(verdict.passed), "summary": verdict.summary,
            "failures": [{"metric": f.metric, "value": f.value, "tolerance": f.tolerance, "ratio": f.ratio,
                          "reason": f.reason} for f in verdict.failures]}


def _case_fields(case, catalogue: str) -> dict:
    return {"case_id": case.id, "seed": case.seed, "catalogue": catalogue, "tolerances": dict(case.tolerances)}


def _comparison_metrics(comparison) -> dict | None:
    from e2egen.diagnose.report import VARIANT_COLUMNS

    if comparison is None:
        return None
    return {name: float(getattr(comparison, name)) for name in VARIANT_COLUMNS}


def _arithmetic_fields(measured) -> dict | None:
    """The kernel's arithmetic as the probes found it: explain's and `e2egen arithmetic`'s one form."""
    if measured is None:
        return None
    return {"cell": str(measured.cell), "origin": measured.origin, "measured": measured.measured,
            **arithmetic_findings(measured.arithmetic)}


def explanation_fields(ex, catalogue: str) -> dict:
    """An Explanation (a product-sum op's) as plain JSON types: the facts render() prints."""
    from e2egen.generator.execute import repro_command

    fields = {**_case_fields(ex.case, catalogue), "analysis": "product_sum", "device": ex.device, "kernel": ex.impl,
              "status": _status(ex.passed, ex.skipped), "passed": ex.passed, "skipped": ex.skipped or None,
              "kernel_failure": ex.kernel_failure or None,
              "problem": ex.problem.describe() if ex.problem is not None else None,
              "reduction_size": ex.problem.reduction_size if ex.problem is not None else None,
              "verdict": _verdict_fields(ex.verdict) if not (ex.skipped or ex.kernel_failure) else None,
              "requirements_broken": [v.message for v in ex.violations],
              "accepted_deviations": [{"message": v.message, "accepted_by": entry.describe()} for v, entry in ex.accepted],
              "causes": [{"cause": f.cause, "headline": f.headline, "confidence": f.confidence,
                          "evidence": list(f.evidence), "remedy": list(f.remedy)} for f in ex.findings],
              "arithmetic": _arithmetic_fields(ex.arithmetic),
              "variants": [], "accumulator_models": None, "other_seeds": None, "ranges": [], "worst": [],
              "probe": None, "timings": {}, "repro": repro_command(ex.case, ex.device, catalogue)}
    if ex.skipped:
        return fields
    rows = ([ex.case_row] if ex.case_row else []) + ex.rows
    if ex.search is not None and ex.search.full is not None:
        rows.append(ex.search.full)
    fields["variants"] = [{"key": r.key, "label": r.label, "computed": r.computed,
                           "passed": bool(r.verdict.passed) if r.verdict is not None else None,
                           "metrics": _comparison_metrics(r.comparison), "not_reproduced": r.miss,
                           "bound_ratio_output_accumulator": r.low_acc_ratio, "bound_ratio_measured": r.measured_ratio,
                           "note": r.note or None} for r in rows]
    search = ex.search
    fields["accumulator_models"] = None if search is None else {
        "tried": search.tried, "sample": search.sample, "elements": search.elements,
        "best": [{"model": model.describe(), "max_eps_diff": eps, "bound_ratio": ratio, "not_reproduced": miss}
                 for model, eps, ratio, miss in search.ranked[:3]]}
    fields["other_seeds"] = None if ex.rms_margin is None else {
        "rms": [{"seed": seed, "rms": rms} for seed, rms in ex.rms_margin.seeds],
        "suggested_rms": ex.rms_margin.suggested, "not_run": list(ex.rms_margin.notes)}
    fields["probe"] = ex.probe.describe() if ex.probe is not None else None
    fields["timings"] = dict(ex.timings)
    fields["ranges"] = [{"role": r.role, "label": r.label, "lo": r.lo, "hi": r.hi,
                         "passed": bool(r.verdict.passed) if r.verdict is not None else None,
                         "metrics": _comparison_metrics(r.comparison), "note": r.note or None} for r in ex.ranges]
    fields["worst"] = [{"position": w.position, "ref": w.ref, "out": w.out, "abs_diff": w.abs_diff, "eps": w.eps,
                        "ulp_distance": w.ulp_distance, "subnormal": w.subnormal, "terms": w.terms,
                        "condition": w.condition} for w in ex.worst]
    return fields


def terms_explanation_fields(ex, catalogue: str) -> dict:
    """A TermsExplanation (an op whose bound is composed of named terms) as plain JSON types."""
    outputs = []
    for output in ex.outputs:
        worst = []
        for element in output.worst:
            total = sum(t.value for t in element.terms) or 1.0  # as render_terms: a share of the bound's terms
            worst.append({"index": list(element.position), "ref": element.ref, "out": element.out,
                          "bound": element.bound, "ratio": element.ratio,
                          "terms": [{"source": t.source, "value": t.value, "share": t.value / total}
                                    for t in sorted(element.terms, key=lambda t: -t.value)]})
        outputs.append({"name": output.name, "verdict": _verdict_fields(output.verdict), "worst": worst})
    return {**_case_fields(ex.case, catalogue), "analysis": "terms", "device": ex.device, "kernel": ex.impl,
            "status": _status(ex.passed, ex.skipped), "passed": ex.passed, "skipped": ex.skipped or None,
            "kernel_failure": ex.kernel_failure or None, "arithmetic_description": ex.arithmetic or None,
            "requirements_broken": list(ex.broken),
            "accepted_deviations": [_accepted_deviation(text) for text in ex.accepted], "outputs": outputs}


def _accepted_deviation(text: str) -> dict:
    message, _, reason = text.partition(" — ")  # explain_terms joins the violation and its [[accept]] reason so
    return {"message": message, "accepted_by": reason or None}


def explain_stages() -> tuple[str, ...]:
    from e2egen.diagnose.explain import STAGES

    return STAGES


def explain_terms_stages() -> tuple[str, ...]:
    from e2egen.diagnose.explain_terms import STAGES

    return STAGES


@contextmanager
def progress_bar(stages: Sequence[str], stream=None) -> Iterator[Callable[[str], None]]:
    """A progress bar on `stream` (stderr) through `stages`, told each stage's name as it starts; tqdm draws it
    on a terminal only (disable=None), so that logs and pipes get the report alone."""
    from tqdm import tqdm

    # No elapsed time in the bar: it is redrawn only when a stage starts, and a frozen clock looks like a hang.
    with tqdm(total=len(stages), file=stream or sys.stderr, disable=None, leave=False, desc="starting",
              bar_format="explain: step {n}/{total}: {desc} ...") as bar:
        def start(stage: str) -> None:
            bar.n = stages.index(stage) + 1
            bar.set_description_str(stage)  # redraws

        yield start


def sample_study() -> str:
    """Where the sample study (seed 003's grid) is installed, from a wheel as from a source checkout."""
    from importlib.resources import files

    return str(files("e2egen.studies").joinpath("seed003.toml"))


@ends_what_kernels_leave
def study(args) -> int:
    from pathlib import Path

    from e2egen.diagnose.study import run_study, write_study
    from e2egen.diagnose.study_config import load_study

    config = load_study(args.study)
    out = Path(args.out) if args.out else Path("build/studies") / Path(args.study).stem
    result = run_study(config, device=args.device, progress=None if args.quiet else print)
    files = write_study(result, out)
    print(f"study {config.title!r}: {len(result.records)} runs ({result.skipped_count} skipped) in {result.seconds:.0f} s")
    for path in files:
        print(f"  {path}")
    return EXIT_OK
