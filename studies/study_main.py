"""The command line of a kernel-matrix study (studies/kernel_matrix.py): --seeds, --out; writes the page, prints it."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from e2egen.files import write_text_atomically
from e2egen.studies.kernel_matrix import Matrix, evaluate, render


def study_main(matrix: Matrix, out: Path, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=matrix.title)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    text = render(matrix, evaluate(matrix, args.seeds), args.seeds, time.perf_counter() - started)
    write_text_atomically(args.out, text)
    print(text)
    return 0
