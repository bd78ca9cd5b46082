"""Attention's parameters: shapes, scale, masks, extra score tensors and input shaping.

Masks, for query row i and key column j of batch b (all conditions must hold):

    kv_lengths      j < L[b]                      (L: valid keys per batch, a KV cache's fill)
    causal          j <= i + o[b]
    window (l, r)   i + o[b] - l <= j <= i + o[b] + r   (-1: that side unbounded)
    look_back W     j >= max(0, P[b] - W)         (P[b]: batch b's last valid key, L[b] - 1, else seq_k - 1;
                                                   rocMLIR's sliding window: the same for every query row)

o[b] = a + prefix_offset[b], where the alignment a is 0 for "top-left" (rocMLIR,
torch's is_causal: query i sees keys 0..i) and seq_k - seq_q for
"bottom-right" (FlashAttention: the last query sees every key), and
prefix_offset[b] says how many positions of batch b's key sequence precede
query 0 (rocMLIR's -prefix_offset). A row with no allowed key is "fully
masked": its output is 0 and its log-sum-exp -inf.

quantized (dtype i8 only): rocMLIR's quantized attention (docs/concepts/lowbit-attention.md). Q and K are i8,
V f16; two more inputs of shape (1, 1, 1, 1), quant_bias (i8) and quant_scale (f16), are drawn from
the case's range like every input unless the parameter of that name fixes their value. Its scale is
1 (quant_scale plays that part).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from e2egen.metrics.formats import float_format
from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import Shape, is_int, require_int

Alignment = Literal["top-left", "bottom-right"]
ALIGNMENTS: tuple[Alignment, ...] = ("top-left", "bottom-right")
SIZE_KEYS = ("batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim_qk", "head_dim_v")
UNBOUNDED = -1


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ProblemError(key, value, f"expected true or false, got {type(value).__name__} {value!r}")
    return value


def _number(key: str, value: Any, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProblemError(key, value, f"expected a finite number, got {type(value).__name__} {value!r}")
    if positive and value <= 0:
        raise ProblemError(key, value, f"must be positive, got {value!r}")
    return float(value)


def per_batch(key: str, value: Any, batch: int, minimum: int) -> tuple[int, ...] | None:
    """None, one int for every batch, or a list of `batch` ints -> a tuple of `batch` ints."""
    if value is None:
        return None
    if is_int(value):
        return (require_int(key, value, minimum),) * batch
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) != batch:
            raise ProblemError(key, list(value), f"expected one integer or a list of batch = {batch} integers, got {len(value)}")
        return tuple(require_int(key, item, minimum) for item in value)
    raise ProblemError(key, value, f"expected an integer or a list of {batch} integers, got {type(value).__name__} {value!r}")


def window_pair(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if (isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) == 2
            and all(is_int(v) and v >= UNBOUNDED for v in value)):
        pair = (int(value[0]), int(value[1]))
        return None if pair == (UNBOUNDED, UNBOUNDED) else pair
    raise ProblemError("window", value, "expected [left, right]: two integers >= 0, or -1 for an unbounded side")


@dataclass(frozen=True)
class AttentionParams:
    seq_q: int
    seq_k: int
    head_dim_qk: int
    head_dim_v: int
    batch: int = 1
    heads_q: int = 1
    heads_kv: int = 1
    scale: float | None = None  # None: 1/sqrt(head_dim_qk)
    score_scale: bool = False  # a (batch, heads_q, seq_q, seq_k) tensor multiplied into the scores
    score_bias: bool = False  # a tensor of the same shape added to them
    causal: bool = False
    align: Alignment = "top-left"
    window: tuple[int, int] | None = None
    kv_lengths: tuple[int, ...] | None = None
    prefix_offset: tuple[int, ...] | None = None
    look_back: int | None = None  # rocMLIR's sliding window (-sliding_window_look_back); see the mask table
    return_lse: bool = False
    q_gain: float = 1.0  # inputs: q's drawn values times this (peaky softmax)
    score_offset: float = 0.0  # inputs: every score shifted by about this much (tests the max subtraction)
    quantized: bool = False  # rocMLIR's i8 attention: i8 Q, K; quant_bias (i8) and quant_scale (f16) inputs
    quant_bias: int | None = None  # its value (an i8); None: drawn from the case's range
    quant_scale: float | None = None  # its value (exact in f16); None: drawn from the case's range

    def __post_init__(self) -> None:
        for key in ("seq_q", "seq_k", "head_dim_qk", "head_dim_v", "batch", "heads_q", "heads_kv"):
            require_int(key, getattr(self, key), 1)
        if self.heads_q % self.heads_kv:
            raise ProblemError("heads_kv", self.heads_kv,
                               f"heads_q = {self.heads_q} must be a multiple of heads_kv (each kv head serves heads_q / heads_kv q heads)")
        if self.align not in ALIGNMENTS:
            raise ProblemError.unknown("align", self.align, ALIGNMENTS)
        if self.kv_lengths is not None and max(self.kv_lengths) > self.seq_k:
            raise ProblemError("kv_lengths", list(self.kv_lengths), f"a valid length is at most seq_k = {self.seq_k}")
        if self.scale == 0.0:
            raise ProblemError("scale", self.scale, "must be nonzero (every score would be 0); omit it for 1/sqrt(head_dim_qk)")
        if self.score_offset and self.score_offset < 0:
            raise ProblemError("score_offset", self.score_offset, "must be >= 0 (it is built as q0·k0 > 0)")
        self._check_quantized()

    def _check_quantized(self) -> None:
        if not self.quantized:
            for key in ("quant_bias", "quant_scale"):
                if getattr(self, key) is not None:
                    raise ProblemError(key, getattr(self, key), "belongs to quantized attention: set quantized = true (dtype i8)")
            return
        if self.scale not in (None, 1.0):
            raise ProblemError("scale", self.scale, "quantized attention has no scale of its own (quant_scale multiplies "
                                                    "the scores): omit it")
        for key in ("q_gain", "score_offset"):
            if getattr(self, key) != OPTIONAL_PARAMS[key]:
                raise ProblemError(key, getattr(self, key), "shapes real-valued q and k; quantized attention's are i8")
        if self.quant_bias is not None and not -128 <= self.quant_bias <= 127:
            raise ProblemError("quant_bias", self.quant_bias, "must be an i8 value, -128 to 127")
        if self.quant_scale is not None:
            fmt = float_format("f16")  # no torch: the f16 grid from the format's bits
            exponent = max(math.frexp(abs(self.quant_scale))[1] - 1, fmt.emin) if self.quant_scale else 0
            step = math.ldexp(1.0, exponent - fmt.mantissa_bits)
            if abs(self.quant_scale) > fmt.max or self.quant_scale != round(self.quant_scale / step) * step:
                raise ProblemError("quant_scale", self.quant_scale, "must be a value of f16 (e.g. 0.015625 = 2^-6)")

    @property
    def group(self) -> int:
        """q heads per kv head."""
        return self.heads_q // self.heads_kv

    @property
    def softmax_scale(self) -> float:
        if self.scale is None:
            return 1.0 if self.quantized else 1.0 / math.sqrt(self.head_dim_qk)
        return self.scale

    @property
    def masked(self) -> bool:
        return self.causal or self.window is not None or self.kv_lengths is not None or self.look_back is not None

    def last_valid_keys(self) -> tuple[int, ...]:
        """P[b]: the last key batch b may attend to (its kv_length - 1, else seq_k - 1)."""
        lengths = self.kv_lengths or (self.seq_k,) * self.batch
        return tuple(length - 1 for length in lengths)

    def offsets(self) -> tuple[int, ...]:
        """o[b]: where query 0 sits among batch b's keys."""
        base = 0 if self.align == "top-left" else self.seq_k - self.seq_q
        return tuple(base + (self.prefix_offset[b] if self.prefix_offset else 0) for b in range(self.batch))

    def shapes(self) -> dict[str, Shape]:
        b, hq, hkv = self.batch, self.heads_q, self.heads_kv
        shapes = {"q": (b, hq, self.seq_q, self.head_dim_qk), "k": (b, hkv, self.seq_k, self.head_dim_qk),
                  "v": (b, hkv, self.seq_k, self.head_dim_v)}
        if self.quantized:  # rocMLIR's order: q, k, v, quant bias, quant scale, then the score tensors
            shapes["quant_bias"] = shapes["quant_scale"] = (1, 1, 1, 1)
        if self.score_scale:
            shapes["score_scale"] = (b, hq, self.seq_q, self.seq_k)
        if self.score_bias:
            shapes["score_bias"] = (b, hq, self.seq_q, self.seq_k)
        return shapes

    @property
    def out_shape(self) -> Shape:
        return (self.batch, self.heads_q, self.seq_q, self.head_dim_v)

    @property
    def lse_shape(self) -> Shape:
        return (self.batch, self.heads_q, self.seq_q)

    def to_catalogue(self) -> dict[str, Any]:
        shown = {key: getattr(self, key) for key in SIZE_KEYS}
        for key, default in OPTIONAL_PARAMS.items():
            value = getattr(self, key)
            if key not in SIZE_KEYS and value != default:
                shown[key] = list(value) if isinstance(value, tuple) else value
        return shown

    def geometry(self) -> str:
        """Sizes and mask options in one token (b2-hq8-hkv2-sq1-sk2048-d128-dv128-causal-br-kv2048x17x1000...)."""
        parts = [f"b{self.batch}", f"hq{self.heads_q}", f"hkv{self.heads_kv}", f"sq{self.seq_q}", f"sk{self.seq_k}",
                 f"d{self.head_dim_qk}", f"dv{self.head_dim_v}"]
        if self.scale is not None:
            parts.append(f"scale{self.scale:g}")
        if self.causal:
            parts.append("causal")
        if self.masked and self.align != "top-left":
            parts.append("br")
        if self.window is not None:
            parts.append("w{}x{}".format(*self.window))
        if self.look_back is not None:
            parts.append(f"lb{self.look_back}")
        for key, values in (("kv", self.kv_lengths), ("pre", self.prefix_offset)):
            if values is not None:
                parts.append(key + "x".join(map(str, values)))
        parts += [name for name, on in (("lse", self.return_lse), ("ss", self.score_scale), ("sb", self.score_bias),
                                        ("quant", self.quantized)) if on]
        return "-".join(parts)

    def describe(self) -> str:
        text = (f"b={self.batch} hq={self.heads_q} hkv={self.heads_kv} sq={self.seq_q} sk={self.seq_k} "
                f"d={self.head_dim_qk}" + (f" dv={self.head_dim_v}" if self.head_dim_v != self.head_dim_qk else ""))
        options = {k: v for k, v in self.to_catalogue().items() if k not in SIZE_KEYS}
        return text + "".join(f" {k}={v}" for k, v in options.items())


def build_params(raw: dict[str, Any]) -> AttentionParams:
    """The catalogue's table (defaults filled in) -> AttentionParams."""
    batch = require_int("batch", raw["batch"], 1)
    heads_q = require_int("heads_q", raw["heads_q"], 1)
    head_dim_qk = require_int("head_dim_qk", raw["head_dim_qk"], 1)
    return AttentionParams(
        seq_q=require_int("seq_q", raw["seq_q"], 1), seq_k=require_int("seq_k", raw["seq_k"], 1),
        head_dim_qk=head_dim_qk,
        head_dim_v=head_dim_qk if raw["head_dim_v"] is None else require_int("head_dim_v", raw["head_dim_v"], 1),
        batch=batch, heads_q=heads_q,
        heads_kv=heads_q if raw["heads_kv"] is None else require_int("heads_kv", raw["heads_kv"], 1),
        scale=None if raw["scale"] is None else _number("scale", raw["scale"]),
        score_scale=_bool("score_scale", raw["score_scale"]), score_bias=_bool("score_bias", raw["score_bias"]),
        causal=_bool("causal", raw["causal"]), align=raw["align"], window=window_pair(raw["window"]),
        kv_lengths=per_batch("kv_lengths", raw["kv_lengths"], batch, 0),
        prefix_offset=per_batch("prefix_offset", raw["prefix_offset"], batch, 0),
        look_back=None if raw["look_back"] is None else require_int("look_back", raw["look_back"], 0),
        return_lse=_bool("return_lse", raw["return_lse"]),
        q_gain=_number("q_gain", raw["q_gain"], positive=True), score_offset=_number("score_offset", raw["score_offset"]),
        quantized=_bool("quantized", raw["quantized"]),
        quant_bias=None if raw["quant_bias"] is None else require_int("quant_bias", raw["quant_bias"], -128),
        quant_scale=None if raw["quant_scale"] is None else _number("quant_scale", raw["quant_scale"]))


OPTIONAL_PARAMS = {"batch": 1, "heads_q": 1, "heads_kv": None, "head_dim_v": None, "scale": None,
                   "score_scale": False, "score_bias": False, "causal": False, "align": "top-left", "window": None,
                   "kv_lengths": None, "prefix_offset": None, "look_back": None, "return_lse": False, "q_gain": 1.0, "score_offset": 0.0,
                   "quantized": False, "quant_bias": None, "quant_scale": None}


# -- chunks of query rows and blocks of keys (runner/ops/attention/chunks.py) --------------------------
CHUNK_SCORES = 1 << 22  # score elements per chunk of the reference and the bound (32 MiB per float64 tensor)


KEY_INPUTS = ("k", "v")  # (batch, heads_kv, seq_k, ...): one row per key, widened block by block where keys are blocked


def elements_per_key(params: AttentionParams) -> int:
    """What one key adds to a block, in elements: its row of K or V, or one query row's score, whichever is more."""
    return params.batch * max(params.heads_kv * max(params.head_dim_qk, params.head_dim_v), params.heads_q)


def key_block_size(params: AttentionParams) -> int:
    """Keys per block of the reference and the bound: every key, unless K or V in float64 would hold more than
    CHUNK_SCORES elements; then as many as keep a block of K and of V, and one query row's scores over it,
    within CHUNK_SCORES. Quantized cases take every key (their score chain is built whole: QuantizedScores)."""
    per_key = elements_per_key(params)
    if params.quantized or per_key * params.seq_k <= CHUNK_SCORES:
        return params.seq_k
    return max(1, CHUNK_SCORES // per_key)


def key_blocks(params: AttentionParams) -> list[tuple[int, int]]:
    """The [start, stop) keys of each block (key_block_size)."""
    size = key_block_size(params)
    return [(start, min(start + size, params.seq_k)) for start in range(0, params.seq_k, size)]


def blocks_keys(params: AttentionParams) -> bool:
    """Whether the reference and the bound stream over blocks of keys, K and V widened to float64 block by block."""
    return key_block_size(params) < params.seq_k


def query_chunks(params: AttentionParams) -> list[tuple[int, int]]:
    """The [start, stop) query rows of each chunk: one chunk when the (batch, heads_q, seq_q, keys) scores of a
    block of keys fit CHUNK_SCORES, else as many rows per chunk as fit (at least one)."""
    rows = max(1, CHUNK_SCORES // (params.batch * params.heads_q * key_block_size(params)))
    return [(start, min(start + rows, params.seq_q)) for start in range(0, params.seq_q, rows)]


def chunk_rows(params: AttentionParams) -> int:
    """Query rows in the largest chunk: what the reference and the bound hold score-sized tensors of at once."""
    start, stop = query_chunks(params)[0]
    return stop - start
