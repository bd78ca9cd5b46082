"""Plug-in gemm kernels that break the kernel contract (issue 46): they change the process's global state, write
into or return their inputs, return sparse tensors or NaN payloads, raise undecodable text, or leave a thread or
a child process behind. Each computes a correct product otherwise (where it returns one)."""
import multiprocessing
import os
import threading
import time

import numpy as np
import torch


def gemm(a, b):
    return torch.matmul(a, b)


# -- global state ---------------------------------------------------------------------------------------------
def gemm_sets_flush_to_zero(a, b):
    torch.set_flush_denormal(True)
    return torch.matmul(a, b)


def gemm_sets_default_dtype(a, b):
    torch.set_default_dtype(torch.float64)
    return torch.matmul(a, b)


def gemm_sets_many(a, b):
    """Computes first, then changes the state (its own product is an f32 one)."""
    out = torch.matmul(a, b)
    torch.use_deterministic_algorithms(True)
    np.seterr(all="raise")
    os.chdir("/")
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # the new API, mixed with the legacy one torch reads
    torch.set_float32_matmul_precision("medium")
    return out


def gemm_sets_meta_device(a, b):
    out = torch.matmul(a, b)
    torch.set_default_device("meta")
    return out


# -- inputs ---------------------------------------------------------------------------------------------------
def gemm_writes_input(a, b):
    out = torch.matmul(a, b)
    a.mul_(3.0)
    return out


def gemm_returns_view(a, b):
    """For a square problem: a view of a, unchanged (no writing)."""
    return a.view(a.shape)


def gemm_returns_sparse(a, b):
    return torch.matmul(a, b).to_sparse()


def gemm_returns_nan_payload(a, b):
    out = torch.matmul(a, b)
    bits = out.view(torch.int32)
    bits[0, 0] = 0x7FC00ABC  # a quiet NaN with a payload
    return out


# -- text -----------------------------------------------------------------------------------------------------
def gemm_raises_undecodable(a, b):
    raise FileNotFoundError("cannot open " + os.fsdecode(b"/tmp/weights-\xff.bin"))


# -- what outlives the case -----------------------------------------------------------------------------------
def gemm_leaves_a_thread(a, b):
    threading.Thread(target=time.sleep, args=(3600,), name="left-by-kernel").start()
    return torch.matmul(a, b)


def _sleep():
    time.sleep(3600)


def gemm_leaves_a_child(a, b):
    multiprocessing.get_context("fork").Process(target=_sleep, name="child-of-kernel").start()
    return torch.matmul(a, b)


def gemm_prints_undecodable(a, b):
    """Its output, captured by pytest, holds lone surrogates; then it returns the wrong shape."""
    import sys
    print("loading " + os.fsdecode(b"/tmp/weights-\xff.bin"))
    print("loading " + os.fsdecode(b"/tmp/weights-\xfe.bin"), file=sys.stderr)
    return torch.matmul(a, b)[:1]


# -- the interpreter and the harness's own functions ------------------------------------------------------------
def gemm_lowers_recursion_limit(a, b):
    """Lowered to a few frames above the kernel's own depth: any deeper Python call of the harness then fails."""
    import sys

    out = torch.matmul(a, b)
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    for limit in range(depth + 4, depth + 200):  # the interpreter's depth also counts some C calls: lowest it takes
        try:
            sys.setrecursionlimit(limit)
            break
        except RecursionError:
            continue
    return out


def gemm_sets_autocast(a, b):
    """Computes in f32 first; every later matmul would come back in bf16."""
    out = torch.matmul(a, b)
    torch.set_autocast_enabled("cpu", True)
    torch.set_autocast_dtype("cpu", torch.bfloat16)
    return out


def gemm_closes_stdout(a, b):
    import sys

    sys.stdout.close()
    sys.stderr.close()
    return torch.matmul(a, b)


def gemm_patches_matmul(a, b):
    """Right itself; then torch.matmul and Tensor.__matmul__ add 1 for everyone after it (the reference too)."""
    original = torch.matmul
    out = original(a, b)
    torch.matmul = lambda x, y, **kw: original(x, y, **kw) + 1.0
    torch.Tensor.__matmul__ = lambda x, y: original(x, y) + 1.0
    return out


def gemm_deletes_harness_modules(a, b):
    import sys

    out = torch.matmul(a, b)
    for name in [n for n in sys.modules if n.startswith("e2egen.metrics")]:
        del sys.modules[name]
    return out


# -- what it raises or returns ------------------------------------------------------------------------------------
class UnprintableError(Exception):
    def __str__(self):
        raise RuntimeError("str() of the exception raised")


class KernelBaseException(BaseException):
    """Not an Exception: `except Exception` does not catch it."""


def gemm_raises_unprintable(a, b):
    raise UnprintableError()


def gemm_raises_ten_megabytes(a, b):
    raise RuntimeError("x" * 10_000_000)


def gemm_raises_base_exception(a, b):
    raise KernelBaseException("not an Exception")


def gemm_raises_generator_exit(a, b):
    raise GeneratorExit("from the kernel")


class PoisonedTensor(torch.Tensor):
    """Any torch function on it raises."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("poisoned __torch_function__")


def gemm_returns_poisoned_subclass(a, b):
    return torch.Tensor._make_subclass(PoisonedTensor, torch.matmul(a, b))


def gemm_forks(a, b):
    """The child comes back from the kernel (or hangs in torch's thread pool, whose threads did not survive)."""
    os.fork()
    return torch.matmul(a, b)


def gemm_under_torch_dynamo(a, b):
    """What torch.compile's first use does to torch's namespace: torch._dynamo loaded, torch.manual_seed wrapped by
    torch itself. Not the kernel's patch."""
    import torch._dynamo

    torch.manual_seed = torch._dynamo.disable(torch.manual_seed)
    return torch.matmul(a, b)
