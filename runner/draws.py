"""Uniform draws for a problem's inputs, on every core, independent of how many cores there are.

torch.rand draws from one Mersenne Twister state, so on one core: 4.4 ns per element here (200 ms for the
45M values of a 16x11008x4096 gemm), and no faster on a 16-core GPU host. Here each value is a pure
function of (seed, stream, index), so any split of the index range gives the same values:

    x_i = SplitMix64's output for the counter key(seed, stream) + (i + 1)·γ

SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; the
generator of java.util.SplittableRandom, which passes TestU01's BigCrush) is exactly this: a counter
stepped by the odd constant γ, put through a 64-bit finaliser. Its top 53 bits give u in [0, 1); the
value lo + (hi - lo)·u is computed in float64 and rounded once to the draw dtype (f32 or float64), so
it lies in [lo, hi]. Each input tensor of a problem is its own stream (key from the seed and the
input's position), so the values do not depend on layout, device or thread count.

numba fills chunks on metrics.threads' pool; without numba, numpy computes the same values (tests check
the two bit for bit).
"""
from __future__ import annotations

import numpy as np
import torch

from e2egen.metrics import threads

from e2egen.metrics.numba_kernels import AVAILABLE  # re-exported: whether this module's kernels exist

if AVAILABLE:
    import numba
_MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15  # SplitMix64's counter step (2^64 / golden ratio, odd)
_MIX_1, _MIX_2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_STREAM_STEP = 0xD1B54A32D192ED03  # an odd multiplier that spreads stream numbers apart before mixing
_UNIT = 2.0 ** -53
_CHUNK = 1 << 20  # elements per task
DRAW_DTYPES = (torch.float32, torch.float64)


def _mix(z: int) -> int:
    """SplitMix64's finaliser on a Python int (the same steps as the kernels)."""
    z = ((z ^ (z >> 30)) * _MIX_1) & _MASK
    z = ((z ^ (z >> 27)) * _MIX_2) & _MASK
    return z ^ (z >> 31)


def stream_key(seed: int, stream: int) -> int:
    """The counter origin of stream `stream` under `seed` (both taken modulo 2^64)."""
    return _mix((_mix(seed & _MASK) + (stream * _STREAM_STEP)) & _MASK)


if AVAILABLE:
    from e2egen.metrics.numba_kernels import align_stack as _align_stack

    _GAMMA_U, _MIX_1_U, _MIX_2_U = np.uint64(GAMMA), np.uint64(_MIX_1), np.uint64(_MIX_2)
    _S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _fill(out, start, stop, key, lo, width):
        _align_stack()
        # slices from 0 and a signed conversion of the 53 bits: the loop vectorises (AVX-512: 0.4 ns/value)
        chunk = out[start:stop]
        origin = key + np.uint64(start + 1) * _GAMMA_U
        for i in range(stop - start):
            z = origin + np.uint64(i) * _GAMMA_U
            z = (z ^ (z >> _S30)) * _MIX_1_U
            z = (z ^ (z >> _S27)) * _MIX_2_U
            z = z ^ (z >> _S31)
            chunk[i] = lo + width * (np.float64(np.int64(z >> _S11)) * _UNIT)  # two roundings: no FMA without fastmath


def _fill_numpy(out: np.ndarray, start: int, stop: int, key: int, lo: float, width: float) -> None:
    z = np.uint64(key) + np.arange(start + 1, stop + 1, dtype=np.uint64) * np.uint64(GAMMA)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX_1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX_2)
    z = z ^ (z >> np.uint64(31))
    units = (z >> np.uint64(11)).astype(np.float64) * _UNIT
    out[start:stop] = lo + width * units


def uniform(shape, lo: float, hi: float, seed: int, stream: int, dtype: torch.dtype = torch.float64,
            use_numba: bool | None = None) -> torch.Tensor:
    """A contiguous CPU tensor of `shape` in `dtype` (f32 or float64), uniform over [lo, hi]."""
    if dtype not in DRAW_DTYPES:
        raise ValueError(f"draws are f32 or float64, not {dtype}")
    out = torch.empty(shape, dtype=dtype)
    flat = out.view(-1).numpy()
    key, lo, width = stream_key(seed, stream), float(lo), float(hi) - float(lo)
    n = flat.shape[0]
    if AVAILABLE if use_numba is None else use_numba:
        key_u = np.uint64(key)
        threads.run(lambda start: _fill(flat, start, min(start + _CHUNK, n), key_u, lo, width), range(0, n, _CHUNK))
    else:
        for start in range(0, n, _CHUNK):
            _fill_numpy(flat, start, min(start + _CHUNK, n), key, lo, width)
    return out


__all__ = ["AVAILABLE", "GAMMA", "stream_key", "uniform"]
