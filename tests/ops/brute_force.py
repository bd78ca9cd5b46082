"""Each registered op evaluated from its definition, element by element in Python floats (math.fsum sums exactly
rounded), for the conformance test: independent of the runner's references, which run torch's float64 kernels.

`brute_force(problem, inputs64)` -> {output name: float64 tensor}. An op added to the registry adds its
definition here (docs/how-to/add-an-op.md); the conformance test fails for an op without one.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

import runner_naive
from e2egen import metrics


def _gelu(x: float) -> float:
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def _gelu_tanh(x: float) -> float:
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


ELEMENTWISE: dict[str, Callable[..., float]] = {
    "exp": math.exp, "log": math.log, "log1p": math.log1p, "tanh": math.tanh, "sigmoid": _sigmoid, "silu": lambda x: x * _sigmoid(x),
    "gelu": _gelu, "gelu_tanh": _gelu_tanh, "rsqrt": lambda x: 1 / math.sqrt(x), "sqrt": math.sqrt,
    "square": lambda x: x * x, "relu": lambda x: max(x, 0.0), "div": lambda x, y: x / y, "pow": math.pow,
}


def _rows(t: torch.Tensor, axes: tuple[int, ...]) -> tuple[torch.Tensor, tuple[int, ...]]:
    """t with `axes` moved last and flattened into one: (rows, reduced); and the kept dims' shape."""
    kept = [d for d in range(t.dim()) if d not in axes]
    moved = t.permute(*kept, *axes)
    kept_shape = tuple(t.shape[d] for d in kept)
    return moved.reshape(math.prod(kept_shape), -1), kept_shape


def _reduction(kind: str, p, x: torch.Tensor) -> torch.Tensor:
    rows, kept_shape = _rows(x, p.axes)
    out = []
    for row in rows.tolist():
        if kind == "sum":
            out.append(math.fsum(row))
        elif kind == "mean":
            out.append(math.fsum(row) / len(row))
        elif kind == "max":
            out.append(max(row))
        else:
            mean = math.fsum(row) / len(row)
            out.append(math.fsum((v - mean) ** 2 for v in row) / (len(row) - p.correction))
    return torch.tensor(out, dtype=torch.float64).reshape(kept_shape)


def _cumsum(p, x: torch.Tensor) -> torch.Tensor:
    rows, kept_shape = _rows(x, (p.axis,))
    prefixes = [[math.fsum(row[:i + 1]) for i in range(len(row))] for row in rows.tolist()]
    moved = torch.tensor(prefixes, dtype=torch.float64).reshape(*kept_shape, x.shape[p.axis])
    return moved.movedim(-1, p.axis)


def _softmax(log: bool, p, x: torch.Tensor) -> torch.Tensor:
    axis = p.axis % x.dim()
    rows, kept_shape = _rows(x, (axis,))
    out = []
    for row in rows.tolist():
        top = max(row)
        total = math.fsum(math.exp(v - top) for v in row)
        out.append([v - top - math.log(total) if log else math.exp(v - top) / total for v in row])
    moved = torch.tensor(out, dtype=torch.float64).reshape(*kept_shape, x.shape[axis])
    return moved.movedim(-1, axis)


def _logsumexp(p, x: torch.Tensor) -> torch.Tensor:
    rows, kept_shape = _rows(x, (p.axis % x.dim(),))
    values = []
    for row in rows.tolist():
        top = max(row)
        values.append(top + math.log(math.fsum(math.exp(v - top) for v in row)))
    return torch.tensor(values, dtype=torch.float64).reshape(kept_shape)


def _norm(centered: bool, p, tensors) -> torch.Tensor:
    x = tensors["x"]
    axes = tuple(range(x.dim() - p.normalized_dims, x.dim()))
    rows, kept_shape = _rows(x, axes)
    weight = tensors["weight"].reshape(-1).tolist() if "weight" in tensors else None
    bias = tensors["bias"].reshape(-1).tolist() if "bias" in tensors else None
    out = []
    for row in rows.tolist():
        mean = math.fsum(row) / len(row) if centered else 0.0
        scale = 1 / math.sqrt(math.fsum((v - mean) ** 2 for v in row) / len(row) + p.eps)
        values = [(v - mean) * scale for v in row]
        if weight is not None:
            values = [v * w for v, w in zip(values, weight)]
        if bias is not None:
            values = [v + b for v, b in zip(values, bias)]
        out.append(values)
    return torch.tensor(out, dtype=torch.float64).reshape(x.shape)


def _channel_norm(p, tensors) -> torch.Tensor:
    """group_norm (p.groups) or batch_norm (groups None) element by element: each element's set of peers (its
    sample's channels of its group, or its channel across the batch) normalised with fsum statistics."""
    x = tensors["x"]
    n, c = x.shape[:2]
    values = x.reshape(n, c, -1).tolist()
    weight = tensors["weight"].tolist() if "weight" in tensors else [1.0] * c
    bias = tensors["bias"].tolist() if "bias" in tensors else [0.0] * c
    per_group = c // p.groups if p.groups is not None else None

    def peers(sample: int, channel: int) -> list[float]:
        if per_group is None:
            return [v for s in range(n) for v in values[s][channel]]
        first = channel // per_group * per_group
        return [v for ch in range(first, first + per_group) for v in values[sample][ch]]

    out = []
    for sample in range(n):
        for channel in range(c):
            group = peers(sample, channel)
            mean = math.fsum(group) / len(group)
            scale = 1 / math.sqrt(math.fsum((v - mean) ** 2 for v in group) / len(group) + p.eps)
            out.append([(v - mean) * scale * weight[channel] + bias[channel] for v in values[sample][channel]])
    return torch.tensor(out, dtype=torch.float64).reshape(x.shape)


def _elementwise(name: str, tensors) -> torch.Tensor:
    function = ELEMENTWISE[name]
    args = [t.reshape(-1).tolist() for t in tensors.values()]
    values = [function(*point) for point in zip(*args)]
    return torch.tensor(values, dtype=torch.float64).reshape(next(iter(tensors.values())).shape)


def _gemm_gemm(problem, tensors) -> torch.Tensor:
    """R_T(f(scale·A·B))·C: the intermediate stepped, then rounded to the output format, as the op defines it."""
    p = problem.params
    product = runner_naive.gemm(tensors["a"], tensors["b"]) * p.scale
    if p.between != "identity":
        product = _elementwise(p.between, {"x": product})
    return runner_naive.gemm(metrics.round_to(product, problem.out_dtype), tensors["c"])


def _scaled_gemm(problem, tensors) -> torch.Tensor:
    a, b = problem.numerics.dequantized(problem.params, tensors)  # the op's inputs are element · scale
    return runner_naive.gemm(a, b)


def brute_force(problem, tensors) -> dict[str, torch.Tensor]:
    """The problem's outputs from the float64 inputs `tensors` (those brute force covers; at least the primary)."""
    op, p, direction = problem.op, problem.params, problem.direction
    name = problem.primary_output
    if op == "attention":
        o, lse = runner_naive.attention(p, tensors)
        return {"o": o, **({"lse": lse} if "lse" in problem.output_names else {})}
    if op == "gemm_gemm":
        return {name: _gemm_gemm(problem, tensors)}
    if op in ("gemm", "conv_gemm") or op.startswith("conv"):
        return {name: runner_naive.evaluate(problem, tensors)}
    if op == "scaled_gemm":
        return {name: _scaled_gemm(problem, tensors)}
    if op in ELEMENTWISE:
        return {name: _elementwise(op, tensors)}
    if op in ("sum", "mean", "max", "var"):
        return {name: _reduction(op, p, tensors["x"])}
    if op == "cumsum":
        return {name: _cumsum(p, tensors["x"])}
    if op in ("softmax", "log_softmax") and direction == "fwd":
        return {name: _softmax(op == "log_softmax", p, tensors["x"])}
    if op == "logsumexp" and direction == "fwd":
        return {name: _logsumexp(p, tensors["x"])}
    if op in ("layer_norm", "rms_norm") and direction == "fwd":
        return {name: _norm(op == "layer_norm", p, tensors)}
    if op in ("group_norm", "batch_norm") and direction == "fwd":
        return {name: _channel_norm(p, tensors)}
    raise AssertionError(f"no brute-force definition of {op} {direction}: add one to tests/ops/brute_force.py")

