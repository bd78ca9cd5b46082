"""e2egen run CASE_ID: rerun one case and print its full metrics report."""
from __future__ import annotations

from e2egen.commands.arguments import EXIT_FAILED, EXIT_OK, catalogue_argument
from e2egen.errors import UsageError
from e2egen.generator.cases import expand
from e2egen.generator.errors import close_match
from e2egen.generator.execute import describe, execute
from e2egen.generator.loader import load_catalogue


def register(sub) -> None:
    p = sub.add_parser("run", help="run one case and print its full metrics report")
    p.add_argument("case_id", help="a case id as printed by `e2egen list`")
    p.add_argument("--seed", type=int, default=None, help="the case's seed (default: derived from the catalogue's seed)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: CUDA when present, else CPU")
    catalogue_argument(p, positional=False)
    p.set_defaults(handler=run_case)


def find_case(catalogue_path: str, case_id: str):
    cases = {c.id: c for c in expand(load_catalogue(catalogue_path))}
    if case_id not in cases:
        raise UsageError(f"{catalogue_path}: no case {case_id!r}{close_match(case_id, cases)} (`e2egen list` shows them all)")
    return cases[case_id]


def run_case(args) -> int:
    case = find_case(args.catalogue, args.case_id)
    if args.seed is not None:
        case = case.with_seed(args.seed)
    outcome = execute(case, device=args.device, catalogue=args.catalogue)
    print(describe(outcome))
    return EXIT_OK if outcome.status != "failed" else EXIT_FAILED
