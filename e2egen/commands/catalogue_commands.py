"""e2egen validate | gen | list: read the catalogue, expand it, write or show the cases."""
from __future__ import annotations

import sys

from e2egen.commands.arguments import EXIT_OK, catalogue_argument
from e2egen.generator.case_filter import FILTER_AXES, case_filter
from e2egen.generator.cases import expand
from e2egen.generator.loader import load_catalogue
from e2egen.generator.render import render
from e2egen.json_output import emit, json_argument


def register(sub) -> None:
    p = sub.add_parser("validate", help="check the catalogue; print nothing but errors (exit 2) or a summary")
    catalogue_argument(p)
    json_argument(p)
    p.set_defaults(handler=validate)

    p = sub.add_parser("gen", help="generate the pytest suite from the catalogue")
    catalogue_argument(p)
    p.add_argument("--out", default="build/e2e", help="output directory (default: build/e2e)")
    p.add_argument("--seed", type=int, default=None, help="global seed (default: the catalogue's `seed`)")
    p.set_defaults(handler=gen)

    p = sub.add_parser("list", help="list case ids with their axes")
    catalogue_argument(p, positional=False)
    p.add_argument("--filter", "-k", default="", metavar="EXPR",
                   help="space-separated terms, all must match: a glob on the id (e.g. 'resnet50/*/f16/*') or "
                        f"AXIS=V1,V2 with AXIS in {', '.join(FILTER_AXES)} (pr=yes|no); a value no case has is an "
                        "error")
    p.add_argument("--pr", action="store_true", help="only the cases in the PR subset")
    json_argument(p)
    p.set_defaults(handler=list_cases)


def validate(args) -> int:
    catalogue = load_catalogue(args.catalogue)
    cases = expand(catalogue)
    if args.json:
        emit("validate", catalogue=args.catalogue, suites=len(catalogue.suites), cases=len(cases),
             pr_cases=sum(c.pr for c in cases))
        return EXIT_OK
    print(f"{args.catalogue}: ok: {len(catalogue.suites)} suites, {len(cases)} cases, {sum(c.pr for c in cases)} in the PR subset")
    return EXIT_OK


def gen(args) -> int:
    catalogue = load_catalogue(args.catalogue)
    seed = catalogue.seed if args.seed is None else args.seed
    cases = expand(catalogue, seed)
    _warn_unknown_selection(catalogue, cases)
    result = render(catalogue, cases, args.out, seed)
    print(f"{args.out}: {len(cases)} cases ({sum(c.pr for c in cases)} PR) from {args.catalogue}; "
          f"{len(result.written)} files written, {len(result.unchanged)} unchanged, {len(result.deleted)} stale deleted")
    return EXIT_OK


def _warn_unknown_selection(catalogue, cases) -> None:
    ids = {c.id for c in cases}
    stale = [cid for cid in catalogue.pr_selection if cid not in ids]
    if stale:
        print(f"warning: {catalogue.pr_selection_path}: {len(stale)} selected case ids are not in the catalogue any more "
              f"(e.g. {stale[0]}); rerun `e2egen select`", file=sys.stderr)


def list_cases(args) -> int:
    catalogue = load_catalogue(args.catalogue)
    cases = expand(catalogue)
    matches = case_filter(args.filter, cases=cases)
    listed = [case for case in cases if (case.pr or not args.pr) and matches(case)]
    if args.json:
        emit("list", catalogue=args.catalogue, cases=[{"id": case.id, "suite": case.suite, "op": case.op, **case.axes,
                                                      "pr": case.pr, "flops": case.flops}
                                                     for case in listed])
    for case in listed if not args.json else ():
        axes = " ".join(f"{k}={v}" for k, v in case.axes.items())
        print(f"{case.id}\t{axes}\tpr={'yes' if case.pr else 'no'}\tflops={case.flops}")
    shown = len(listed)
    if not shown and (args.filter or args.pr):  # said on stderr, so that `e2egen list ... | wc -l` still reads 0
        asked = " and ".join(part for part in (f"--filter {args.filter!r}" if args.filter else "",
                                               "--pr" if args.pr else "") if part)
        print(f"note: no case of {args.catalogue} ({len(cases)} cases) matches {asked}", file=sys.stderr)
    return EXIT_OK

