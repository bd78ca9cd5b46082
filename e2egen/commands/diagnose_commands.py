"""e2egen explain CASE_ID | e2egen study STUDY.toml: say why a case's error is what it is; run the seed's study grid."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from e2egen.commands.arguments import EXIT_FAILED, EXIT_OK, catalogue_argument
from e2egen.errors import UsageError
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
            print(render_terms(explanation))
            return EXIT_OK if explanation.passed else EXIT_FAILED
        with progress_bar(explain_stages()) as progress:
            explanation = explain_case(case, device=args.device, search=not args.no_search, progress=progress)
    except (runner.ProblemError, runner.ImplError) as err:  # name the case: the catalogue passed, this run did not
        raise UsageError(str(err), where=case.id) from None
    print(render(explanation, args.catalogue))
    return EXIT_OK if explanation.passed else EXIT_FAILED


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
