"""e2egen warm: compile numba's kernels into its on-disk cache, unless the cache's stamp says they are there."""
from __future__ import annotations

from e2egen.commands.arguments import EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("warm", help="compile numba's kernels into its cache once (make setup and make pr run it)",
                       description="Compile numba's kernels into its on-disk cache ($NUMBA_CACHE_DIR, else "
                                   "$XDG_CACHE_HOME/e2egen/numba) so that no run pays for compiling them; nothing "
                                   "to do, in about 0.1 s, when the cache's stamp says it holds these kernels for this "
                                   "numba and CPU. Exit 0.")
    p.set_defaults(handler=warm)


def warm(args) -> int:
    from e2egen.runner import numba_cache

    if numba_cache.is_warm():
        print(f"numba cache warm ({numba_cache.cache_directory()})")
        return EXIT_OK
    from e2egen.runner import warmup

    warmup.main()  # stamps the cache when it is done
    return EXIT_OK
