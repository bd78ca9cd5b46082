"""Independent float64 implementations of the runner's ops, for its tests.

Written from the definitions, not from the runner: a convolution is a sum
over kernel taps, each tap one einsum over channels of strided slices of the
zero-padded input. Nothing here uses torch's conv, unfold or matmul.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import torch


def pairs(pad):
    """Padding per dim as (begin, end): an int pads both sides alike."""
    return [(p, p) if isinstance(p, int) else tuple(p) for p in pad]


def out_size(size, kernel, stride, pad, dilation):
    return tuple((i + b + e - d * (r - 1) - 1) // s + 1
                 for i, r, s, (b, e), d in zip(size, kernel, stride, pairs(pad), dilation))


def zero_pad(x: torch.Tensor, pad) -> torch.Tensor:
    padded = x.new_zeros((*x.shape[:2], *(i + b + e for i, (b, e) in zip(x.shape[2:], pairs(pad)))))
    padded[(slice(None), slice(None), *(slice(b, b + i) for i, (b, _) in zip(x.shape[2:], pairs(pad))))] = x
    return padded


def _tap_slices(tap, stride, dilation, outs):
    """Positions (in the padded input) that kernel tap `tap` reads for every output."""
    return tuple(slice(t * d, t * d + s * (o - 1) + 1, s) for t, s, d, o in zip(tap, stride, dilation, outs))


def conv_fwd(x, w, stride, pad, dilation, groups):
    n, c = x.shape[:2]
    k, cg = w.shape[:2]
    kernel = tuple(w.shape[2:])
    outs = out_size(x.shape[2:], kernel, stride, pad, dilation)
    xp = zero_pad(x, pad)
    y = x.new_zeros((n, k, *outs))
    kg = k // groups
    for g in range(groups):
        for tap in itertools.product(*map(range, kernel)):
            patch = xp[:, g * cg:(g + 1) * cg][(..., *_tap_slices(tap, stride, dilation, outs))]
            y[:, g * kg:(g + 1) * kg] += torch.einsum("nc...,kc->nk...", patch, w[g * kg:(g + 1) * kg][(..., *tap)])
    return y


def conv_bwd_data(dy, w, input_shape, stride, pad, dilation, groups):
    k, cg = w.shape[:2]
    kernel = tuple(w.shape[2:])
    outs = tuple(dy.shape[2:])
    dxp = dy.new_zeros((input_shape[0], input_shape[1], *(i + b + e for i, (b, e) in zip(input_shape[2:], pairs(pad)))))
    kg = k // groups
    for g in range(groups):
        for tap in itertools.product(*map(range, kernel)):
            where = (slice(None), slice(g * cg, (g + 1) * cg), *_tap_slices(tap, stride, dilation, outs))
            dxp[where] += torch.einsum("nk...,kc->nc...", dy[:, g * kg:(g + 1) * kg], w[g * kg:(g + 1) * kg][(..., *tap)])
    return dxp[(slice(None), slice(None), *(slice(b, b + i) for i, (b, _) in zip(input_shape[2:], pairs(pad))))]


def conv_bwd_weight(x, dy, weight_shape, stride, pad, dilation, groups):
    k, cg = weight_shape[:2]
    kernel = tuple(weight_shape[2:])
    outs = tuple(dy.shape[2:])
    xp = zero_pad(x, pad)
    dw = x.new_zeros(weight_shape)
    kg = k // groups
    for g in range(groups):
        for tap in itertools.product(*map(range, kernel)):
            patch = xp[:, g * cg:(g + 1) * cg][(..., *_tap_slices(tap, stride, dilation, outs))]
            dw[g * kg:(g + 1) * kg][(..., *tap)] = torch.einsum("nk...,nc...->kc", dy[:, g * kg:(g + 1) * kg], patch)
    return dw


def gemm(a, b):
    return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)


def attention_allowed(p, b, i, j):
    """The mask, key by key, from the definitions in runner/ops/attention/params.py."""
    o = (0 if p.align == "top-left" else p.seq_k - p.seq_q) + (p.prefix_offset[b] if p.prefix_offset else 0)
    if p.kv_lengths is not None and j >= p.kv_lengths[b]:
        return False
    if p.causal and j > i + o:
        return False
    if p.window is not None:
        left, right = p.window
        if left >= 0 and j < i + o - left:
            return False
        if right >= 0 and j > i + o + right:
            return False
    return True


def attention(p, tensors):
    """(o, lse) one row at a time: python floats and math.exp, no torch ops on whole tensors."""
    q, k, v = (tensors[n].tolist() for n in ("q", "k", "v"))
    scale_t = tensors["score_scale"].tolist() if p.score_scale else None
    bias_t = tensors["score_bias"].tolist() if p.score_bias else None
    o = torch.zeros(p.batch, p.heads_q, p.seq_q, p.head_dim_v, dtype=torch.float64)
    lse = torch.full((p.batch, p.heads_q, p.seq_q), -math.inf, dtype=torch.float64)
    for b in range(p.batch):
        for h in range(p.heads_q):
            kv = h // (p.heads_q // p.heads_kv)
            for i in range(p.seq_q):
                scores = {}
                for j in range(p.seq_k):
                    if not attention_allowed(p, b, i, j):
                        continue
                    s = sum(x * y for x, y in zip(q[b][h][i], k[b][kv][j])) * p.softmax_scale
                    if scale_t is not None:
                        s *= scale_t[b][h][i][j]
                    if bias_t is not None:
                        s += bias_t[b][h][i][j]
                    scores[j] = s
                if not scores:
                    continue
                m = max(scores.values())
                weights = {j: math.exp(s - m) for j, s in scores.items()}
                total = math.fsum(weights.values())
                for e in range(p.head_dim_v):
                    o[b, h, i, e] = math.fsum(w * v[b][kv][j][e] for j, w in weights.items()) / total
                lse[b, h, i] = m + math.log(total)
    return o, lse


def evaluate(problem, tensors):
    """The problem's op on float64 logical tensors (the primary output)."""
    p = problem.params
    if problem.op == "attention":
        return attention(p, tensors)[0]
    if problem.op == "gemm_gemm":  # the intermediate rounded to the output format, as the op defines it
        from e2egen import metrics

        return gemm(metrics.round_to(gemm(tensors["a"], tensors["b"]), problem.out_dtype), tensors["c"])
    if problem.op == "conv_gemm":
        from e2egen import metrics

        c = p.conv
        y = conv_fwd(tensors["x"], tensors["w"], c.stride, c.pads, c.dilation, 1)
        rows = metrics.round_to(y.permute(0, 2, 3, 1).reshape(-1, c.k), problem.out_dtype)
        return gemm(rows, tensors["c"])
    if problem.op == "gemm":
        return gemm(tensors["a"], tensors["b"])
    geometry = (p.stride, p.pads, p.dilation, p.groups)
    if problem.direction == "fwd":
        return conv_fwd(tensors["x"], tensors["w"], *geometry)
    if problem.direction == "bwd_data":
        return conv_bwd_data(tensors["dy"], tensors["w"], p.x_shape, *geometry)
    return conv_bwd_weight(tensors["x"], tensors["dy"], p.w_shape, *geometry)


# -- scalar products, one output element at a time, in the documented reduction order --------
def products(problem, tensors, index):
    """The products summed into output element `index`, in runner.lowering's order.

    conv fwd (c, r, s, …) with padding taps as zero products; bwd_data
    (k, r', s', …) over the flipped kernel r = R−1−r', with a zero wherever
    the tap meets no dy element (stride gaps, borders); bwd_weight (n, p, q, …);
    gemm (k).
    """
    p = problem.params
    if problem.op == "gemm":
        a, b = tensors["a"], tensors["b"]
        *batch, i, j = index
        return [float(a[(*batch, i, kk)] * b[(*batch, kk, j)]) for kk in range(p.k)]
    cg, kg = p.c // p.groups, p.k // p.groups
    taps = list(itertools.product(*map(range, p.kernel)))
    x = tensors.get("x")
    w = tensors.get("w")
    dy = tensors.get("dy")
    out = p.out_size

    def x_at(n, c, pos):
        if all(0 <= q < s for q, s in zip(pos, p.size)):
            return float(x[(n, c, *pos)])
        return 0.0

    if problem.direction == "fwd":
        n, k, *o = index
        g = k // kg
        return [x_at(n, g * cg + c, [oo * s + r * d - pp for oo, r, s, d, pp in zip(o, tap, p.stride, p.dilation, p.pad)])
                * float(w[(k, c, *tap)]) for c in range(cg) for tap in taps]
    if problem.direction == "bwd_data":
        n, c, *i = index
        g, cc = c // cg, c % cg
        result = []
        for kk in range(kg):
            for flipped in taps:
                tap = [r - 1 - f for r, f in zip(p.kernel, flipped)]
                num = [ii + pp - r * d for ii, pp, r, d in zip(i, p.pad, tap, p.dilation)]
                if all(v % s == 0 and 0 <= v // s < oo for v, s, oo in zip(num, p.stride, out)):
                    o = [v // s for v, s in zip(num, p.stride)]
                    result.append(float(dy[(n, g * kg + kk, *o)]) * float(w[(g * kg + kk, cc, *tap)]))
                else:
                    result.append(0.0)
        return result
    k, c, *tap = index
    g = k // kg
    return [float(dy[(n, k, *o)]) * x_at(n, g * cg + c, [oo * s + r * d - pp for oo, r, s, d, pp in zip(o, tap, p.stride, p.dilation, p.pad)])
            for n in range(p.n) for o in itertools.product(*map(range, out))]


def accumulate_scalar(problem, tensors, chunk):
    """The accumulate-k reference, one element and one product at a time."""
    shape = problem.output_shape
    result = np.zeros(shape)
    for index in itertools.product(*map(range, shape)):
        terms = products(problem, tensors, index)
        running = 0.0
        for start in range(0, len(terms), chunk):
            partial = 0.0
            for term in terms[start:start + chunk]:
                partial += term
            running = float(np.float32(running + partial))
        result[index] = running
    return torch.from_numpy(result)


def brute_force_magnitude(problem, tensors, index):
    """Σ|a_i·b_i| for one output element, summed directly."""
    return math.fsum(abs(v) for v in products(problem, tensors, index))
