"""Convert a rocMLIR e2e catalogue (ROCm/rocMLIR mlir/test/e2e/*.toml) into an e2egen catalogue.

rocMLIR's format: each `[[suite.test]]` `config` string of rocmlir-gen flags is
crossed with every value of every `[[axis]]` (each value prefixed with the
axis' `prefix`); `prefix` and `suffix` wrap the command line; a test's
`[[suite.test.exclude]]` entries together name ONE conjunction (a combination
is excluded when, for every entry, its value on that axis is among the
entry's values). The converter works in three steps:

1. read:  the file into frozen `Roc*` records, with lines for messages; a
   file that is not such a catalogue is a CatalogueError (exit 2).
2. model: every (test, axis combination) is resolved the way rocMLIR would
   build its command line (config flags, then axis flags, then the suffix's
   flags before the first `|`) into one e2egen case key (op, direction,
   dtype, layout), so excludes keep rocMLIR's meaning exactly; each config's
   set of kept case keys is then written back as suite axes plus config
   excludes (see `cover_with_excludes`).
3. emit:  a tomlkit document with comments, plus the report: every rocMLIR
   item that has no equivalent here, never silently dropped.

Mapping:
- `--operation` conv2d | conv2d_bwd_data | conv2d_bwd_weight (and the older
  conv, conv_bwd_data, conv_bwd_weight) -> op conv2d, direction fwd |
  bwd_data | bwd_weight; gemm, attention, gemm_gemm, conv_gemm -> the op of
  that name, direction fwd. No --operation: rocmlir-gen's default, conv2d
  fwd. A rocMLIR suite whose tests use two ops becomes two suites.
- `-t`: f32, f16, bf16 as they are (default f32). i8 attention is rocMLIR's
  quantized attention (rocmlir-gen's AttentionQuantizedArgIndex types: i8 Q,
  K and quant bias, f16 V, quant scale, score scale and bias, output): dtype
  i8 with `quantized = true` (docs/concepts/lowbit-attention.md), its f16 output
  judged as f16's (rms, the bound; the suite's thresholds apply, since
  rocMLIR verifies it as f16). 8-bit types, for conv fwd
  and gemm (rocmlir-gen's typeFromString, its -t callback and main()): i8 ->
  i8 (i32 output, judged exactly: rocMLIR's mcpuVerifyInt reads no
  threshold); f8E4M3FN f8E5M2 f8E4M3FNUZ f8E5M2FNUZ -> f8e4m3fn f8e5m2
  f8e4m3fnuz f8e5m2fnuz (f32 output); fp8 / bf8 are the chip's formats (OCP
  on gfx950/gfx12, FNUZ on gfx942; the catalogues' chip is %arch): OCP
  unless convert(fp8=...) or --force-f8-types says otherwise. -t A_B types
  gemm's A and B, but a conv's filter and input: e2egen's pair "X_Y" gives
  the first input (A, x) X, so a conv's pair is swapped. f4E2M1FN -> f4e2m1
  (f32 output; gemm and scaled gemm only). -out_dtype of an fp8/fp4 gemm:
  f32 (the default), bf16, f16 -> out_dtype (bf16/f16 outputs get that
  format's rms and no relDiff, as rocMLIR's verifier). Other -out_dtypes
  than these or the dtype's output, 8-bit backward convs (rocmlir-gen types a
  conv's tensors by role: its dy would be i32/f32 and its result 8-bit),
  fp8 attention (rocmlir-gen would type every tensor fp8, its output too),
  8-bit gemm_gemm and conv_gemm, f8E8M0FNU
  as an element type are reported and left out, of the axes and of the
  excludes alike. A case e2egen's runner refuses is left out with the
  runner's reason.
- scaled gemm (--operation gemm with --scaledGemm; rocmlir-gen's
  getGemmTypes, createGpuGemmKernel, createCpuGemmKernelWithMlir) -> op
  scaled_gemm, scaling mx: C = Σ_k A[m,k]·scaleA[m,k/blk]·B[k,n]·scaleB[k/blk,n].
  -quantBlockSize (default 32) -> block; -scale_a_dtype / -scale_b_dtype
  (default f8E8M0FNU) f8E8M0FNU -> e8m0, f32 -> f32, others left out.
  Layout: A's and B's letters as gemm's, then, when the scales are not
  stored as by default, two more: scaleA is stored (m, ⌈k/blk⌉), (⌈k/blk⌉, m)
  with --transScaleA ("t"); scaleB (n, ⌈k/blk⌉), i.e. scale_b transposed
  ("t"), or (⌈k/blk⌉, n) with --transScaleB ("n"). -rand none (all ones,
  scales 1) -> pattern "ones". Without --scaledGemm the scale flags are
  ignored (reported). rocmlir-gen fills the scales like any input, while
  scaled_gemm quantizes real data: reported.
- conv layouts: `-fil_layout -in_layout -out_layout` gkcyx/ngchw/ngkhw (or
  kcyx/nchw/nkhw) -> nchw; gkyxc/nhwgc/nhwgk (or kyxc/nhwc/nhwk) -> nhwc;
  any other orders -> e2egen's layout string "input-filter-output"
  (runner/ops/product_sum/conv_layouts.py, e.g. nhwc-yxck-nhwk, nghwc-gkyxc-hwkgn; an
  output spelled with c gets k). rocMLIR's digits 0 1 2 are h w d (y x z):
  a -fil_layout with three of them is a 3-d conv, -in_d -fil_d -out_d
  -conv_stride_d -dilation_d -padding_d(_l/_r) its depth (absent: 1); with
  depth 1 it is the 2-d conv (nc012 -> nc01), else op conv3d with the layout in
  letters (nc012 -> nchwd); depth flags on a 2-d layout are reported ignored. gemm layouts: the first
  letter is A, the second B, `t` when `--transA` / `--transB` is true;
  gemm's --transC (its output's storage order) is merged and reported.
- conv shape: -batchsize -in_channels -out_channels -in_h -in_w -fil_h -fil_w
  -dilation_h/_w -conv_stride_h/_w -padding_h/_w (or _l/_r) -groupsize, and
  the MIOpen-driver short forms -n -c -k -H -W -y -x -l -j -u -v -q -g (not
  -p: see below). in/out_channels are totals over the groups, as in torch.
  Padding as rocmlir-gen's correctConvParameters(): -padding_h sets both
  sides when -padding_h_l and _r are 0 (absent); equal sides give `pad = [h, w]`,
  unequal ones (rocMLIR's -padding_h_l=2 -padding_h_r=1) begin/end pairs
  `pad = [[2, 1], [w_l, w_r]]`, named `p2_1x..`. gemm shape: -m -n -k, -g (or
  -groupsize) the batch; g = 1 is a plain 2-d gemm (no `batch` key).
- gemm_gemm (rocmlir-gen's getGemmElementwiseGemmTypes and its CPU reference
  createCpuGemmElementwiseGemmKernelWithMlir: A (g, m, k), B (g, k, n), C
  (g, n, gemmO), out = R_T(A·B)·C (g, m, gemmO), the first product stored in
  the element type): -m -n -k -gemmO -> m, n, k, o; -g the batch (g = 1: no
  `batch` key). Layouts: three letters A, B, C, `t` for --transA / --transB
  / --transC (each operand stored transposed). --transO (the output stored
  (gemmO, m)) is merged and reported.
- conv_gemm (getConvElementwiseGemmTypes, createCpuConvElementwiseGemmKernel-
  WithMlir: the forward conv's output (n, ho, wo, k) in the element type,
  viewed as (n·ho·wo, k), times C (k, gemmO); one group): the conv flags as
  above plus -gemmO -> o; -groupsize other than 1 is reported and skipped.
  Layouts: the conv family from -fil_layout -in_layout (gkcyx/ngchw -> nchw,
  gkyxc/nhwgc -> nhwc; the conv output stays inside the kernel, so
  -out_layout means nothing to it), then C's letter, `t` for --transC:
  "nchw-n", "nchw-t", "nhwc-n", "nhwc-t". --transO merged and reported.
- -p (rocmlir-gen's "populate default values", not MIOpen's pad_h): its
  populateDefaults() runs after the command line is read and sets the op's
  default problem over whatever sizes were given (DEFAULT_PROBLEMS: conv
  n128 c8 k128 32x32 3x3, stride/dilation 1, pad 0, one group; conv_gemm the
  same and gemmO 769; gemm g1 m1024 k769 n512; gemm_gemm the same and gemmO
  769; attention g1 seq 1024/1024, 1/1 heads, head dims 32/32). Sizes it
  replaces are reported as ignored; -p=false changes nothing.
- attention (rocmlir-gen's CPU reference: S = Q·Kᵀ, times the
  --with-attn-scale tensor, plus the --with-attn-bias tensor, masks, softmax
  over the keys, ·V; no implicit 1/sqrt(d)): -seq_len_q -seq_len_k
  -head_dim_qk -head_dim_v -> seq_q, seq_k, head_dim_qk, head_dim_v (the last
  only when it differs); -g -> batch; -num_heads_q -num_heads_kv -> heads_q,
  heads_kv (q head h uses kv head h // (heads_q / heads_kv), as rocMLIR
  broadcasts K and V); always scale = 1.0; --with-attn-scale /
  --with-attn-bias -> score_scale / score_bias; -causal -> causal with align
  "top-left" (rocMLIR masks key j > query i whatever seq_q and seq_k are);
  -prefix_offset=a,b,.. (one per batch; key j > i + offset masked, implies
  causal) -> causal, prefix_offset; -current_seq_len=a,b,.. and its newer
  name -last_valid_kv_index (one per batch: the inclusive index of the last
  valid key, keys j > P masked) -> kv_lengths = P + 1; -return_lse ->
  return_lse. A value the same for every batch is written as one int.
  Layouts: rocMLIR's tensors are (g * heads, seq, dim), batch outer, so
  "bhsd", plus "-qt" for --transQ, "-kt" when --transK is false (rocMLIR's
  default K is stored head_dim x seq_k) and "-vt" for --transV. --transO
  (the output's storage order), -split_kv (flash decoding: the host
  recombines the split results, same result), --perf_config,
  --schedule_version and --reverse_grid are merged. The sliding window
  -sliding_window_look_back W (older name -sliding_window_size) -> look_back = W: rocmlir-gen's CPU verifier
  masks the keys before max(0, P - W), P the batch's last valid key, for every query row. The legacy
  -seq_len/-num_heads form, which today's rocmlir-gen no longer accepts, is reported and skipped.
- verdicts: every imported case carries rocMLIR's verdict, emulated (top-level `verifier = { kind = "rocmlir" }`,
  metrics/rocmlir_verifier.py: rocmlir-gen's legacy comparator, its gates, defaults and reference rounding),
  beside e2egen's own default verdict; `decides` (import-rocmlir --verdict) says which fails the case. The
  thresholds -RMS_threshold, -absDiff_threshold, -relDiff_threshold -> verifier.rms, .abs_diff, .rel_diff:
  from the suffix at suite level, from a config string at config level, next to `-t DTYPE` in an axis value
  in that dtype's sub-table. What rocMLIR does per output format (relDiff off for f16/bf16, i32 exact) is
  the verifier's own rule.
- suite name: `<directory>-<suite name>`; a directory starting with "Pr" is
  one of rocMLIR's PR-CI catalogues, so the suite gets `pr = true`. Inputs
  use range r0 = [-1, 1]: rocMLIR's random data range differs per type.
- config names come from the shape (`n64-c128-k128-28x28-f3x3-p1`,
  `n64-c64-k64-4x4-f2x2-s2-p2_1x2_0`, `b3-m1024-n1024-k769`, `m64-n64-k64-o64`,
  `n2-c32-k32-28x28-f3x3-p1-o64`, `b3-hq4-hkv2-sq1-sk384-d64-scale-bias-causal-kv18x2x33-lse`);
  a config with the same shape as an earlier one (it differed only in
  dropped flags, e.g. --reverse_grid) gets `-2`, `-3`.
- reported as not imported: unknown flags (the config is still imported when
  its shape is complete), flags with no equivalent (--reverse_grid,
  --perf_config, gemm's --transC=true, --transO=true, -split_kv, -rand...),
  axes with no equivalent (schedule_version, transO: their values are
  merged, each case runs once), excludes
  that no longer exclude anything. Reported as ignored: flags and lit
  substitutions that do not change what is computed (--arch, %pv...).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Mapping, NamedTuple

import tomlkit

from e2egen.generator.errors import CatalogueError, Location, Problem, unknown
from e2egen.generator.rocmlir_data import DATA_FLAGS, DataRange, resolve_data
from e2egen.generator.toml_lines import key_lines, line_of, source_lines
from e2egen.generator.toml_reader import parse_toml
from e2egen.runner.dtypes import FLOAT4, FLOAT8, FLOAT8_PAIRS, INTEGER_DTYPES
from e2egen.runner.ops import OPS

DEFAULT_DATA = DataRange.of(-5, 4, "integers")  # rocmlir-gen's seeded default (-rand 1, -rand_type int)

OPERATIONS = {  # rocmlir-gen --operation -> (op, direction)
    "conv2d": ("conv2d", "fwd"), "conv": ("conv2d", "fwd"),
    "conv2d_bwd_data": ("conv2d", "bwd_data"), "conv_bwd_data": ("conv2d", "bwd_data"),
    "conv2d_bwd_weight": ("conv2d", "bwd_weight"), "conv_bwd_weight": ("conv2d", "bwd_weight"),
    "gemm": ("gemm", "fwd"),
    "attention": ("attention", "fwd"),
    "gemm_gemm": ("gemm_gemm", "fwd"),
    "conv_gemm": ("conv_gemm", "fwd"),
}
DEFAULT_OPERATION = "conv2d"
WIDE_DTYPES = ("f32", "f16", "bf16")  # -t values that are e2egen dtypes as they are
DTYPES = (*WIDE_DTYPES, *FLOAT8, *FLOAT8_PAIRS, *FLOAT4, *INTEGER_DTYPES)  # e2egen's (runner.dtypes'), in order
DEFAULT_DTYPE = "f32"
# rocmlir-gen's typeFromString names of the fp8 formats -> e2egen's
EXPLICIT_F8 = {"f8E4M3FN": "f8e4m3fn", "f8E5M2": "f8e5m2", "f8E4M3FNUZ": "f8e4m3fnuz", "f8E5M2FNUZ": "f8e5m2fnuz"}
EXPLICIT_F4 = {"f4E2M1FN": "f4e2m1"}  # rocmlir-gen's -t callback: f4E2M1FN writes f32, as the fp8 names do
# rocmlir-gen's fp8 / bf8: the chip's formats (main(): amdgpu::hasOcpFp8 -> OCP, else FNUZ; older rocmlir-gen:
# FNUZ always; --force-f8-types=ocp|fnuz|nanoo overrides where it exists). The catalogues' chip is %arch.
ARCH_F8 = {"fp8": {"ocp": "f8e4m3fn", "fnuz": "f8e4m3fnuz"}, "bf8": {"ocp": "f8e5m2", "fnuz": "f8e5m2fnuz"}}
F8_FAMILIES = {"ocp": ("ocp",), "fnuz": ("fnuz",), "both": ("ocp", "fnuz")}  # import-rocmlir --fp8 choices
DEFAULT_F8 = "ocp"
FORCE_F8 = {"ocp": "ocp", "fnuz": "fnuz", "nanoo": "fnuz"}  # --force-f8-types values (arch: the chip decides)
LOW_BIT_OPS = ("conv2d", "gemm", "scaled_gemm")  # the ops whose i8 / fp8 / fp4 cases e2egen runs
FP4_OPS = ("gemm", "scaled_gemm")  # the ops with e2egen's fp4 dtype
UNSUPPORTED_DTYPES = {  # typeFromString names e2egen has no dtype for
    "f8E8M0FNU": "E8M0 (f8E8M0FNU, a block-scale format) is not supported yet",
    "i32": "i32 inputs are not supported",
}
# op attention: rocmlir-gen special-cases i8 only (quantized attention); any other 8-bit -t types every tensor
# with it, the output, score scale and bias included, which e2egen's fp8 attention (f32 output) does not model
ATTENTION_LOW_BIT = "rocmlir-gen types every tensor of a non-i8 8-bit attention with it, its output too; e2egen's fp8 attention writes f32"
# Quantized attention's f16 output: no bound_rms or bias_z in e2egen's verdict: on rocMLIR's -5..4 data most rows
# are one-hot, and P's rounding to f16 then leans every such row one way, far inside the bound (configs.toml,
# lowbit-attention). rocMLIR's verifier judges it as any f16 output.
QUANTIZED_ATTENTION_TOLERANCES = {"bound_rms": False, "bias_z": False}
CONV_LAYOUTS = {  # (filter, input, output) with the group letter removed -> layout
    ("kcyx", "nchw", "nkhw"): "nchw",
    ("kyxc", "nhwc", "nhwk"): "nhwc",
}
CONV_LAYOUT_NAMES = {"nchw": ("gkcyx", "ngchw", "ngkhw"), "nhwc": ("gkyxc", "nhwgc", "nhwgk")}  # for messages
DEFAULT_CONV_LAYOUT = ("gkcyx", "ngchw", "ngkhw")
LAYOUT_FLAGS = ("fil_layout", "in_layout", "out_layout")
# -out_dtype and its aliases: read with -t (the output e2egen gives the dtype: f32 for fp8, i32 for i8)
OUT_DTYPE_FLAGS = ("out_dtype", "out_datatype", "c_dtype", "to", "tc")
TRANSPOSE_FLAGS = ("transA", "transB")
GEMM_GEMM_TRANSPOSE_FLAGS = ("transA", "transB", "transC")
ATTENTION_TRANSPOSE_FLAGS = {"transQ": "q", "transK": "k", "transV": "v"}  # flag -> the tensor it stores transposed
# rocmlir-gen's scaled gemm, C = (A ⊙ scaleA)·(B ⊙ scaleB) with one scale per -quantBlockSize elements along K: its
# flags are read only with --scaledGemm (getGemmTypes, createGpuGemmKernel, createCpuGemmKernelWithMlir)
SCALE_TRANSPOSE_FLAGS = ("transScaleA", "transScaleB")
SCALED_GEMM_FLAGS = ("scaledGemm", "scale_a_dtype", "scale_b_dtype", "quantBlockSize", *SCALE_TRANSPOSE_FLAGS)
QUANT_BLOCK_SIZE = 32  # rocmlir-gen's -quantBlockSize default (OCP MX's block, scaled_gemm's mx default too)
SCALE_TYPES = {"f8E8M0FNU": "e8m0", "f32": "f32", "fp32": "f32"}  # -scale_a/b_dtype (typeFromString) -> e2egen's
DEFAULT_SCALE_TYPE = "f8E8M0FNU"  # rocmlir-gen's -scale_a_dtype / -scale_b_dtype default
# -out_dtype of an fp8 / fp4 gemm (typeFromString names) -> gemm's and scaled_gemm's out_dtype ("": f32, the default)
LOW_BIT_OUT_TYPES = {"f32": "", "fp32": "", "f16": "f16", "fp16": "f16", "bf16": "bf16"}
# Flags that pick the case's op, direction, dtype or layout (an axis of ours).
CASE_FLAGS = ("operation", "t", "force-f8-types", *OUT_DTYPE_FLAGS, *LAYOUT_FLAGS, *GEMM_GEMM_TRANSPOSE_FLAGS,
              *ATTENTION_TRANSPOSE_FLAGS, *SCALED_GEMM_FLAGS)
LAYOUT_FLAGS_OF = {  # op -> the case flags that make its layout (the others mean nothing to it, or are merged)
    "conv2d": LAYOUT_FLAGS, "conv3d": LAYOUT_FLAGS, "gemm": TRANSPOSE_FLAGS, "attention": tuple(ATTENTION_TRANSPOSE_FLAGS),
    "gemm_gemm": GEMM_GEMM_TRANSPOSE_FLAGS, "conv_gemm": ("fil_layout", "in_layout", "transC"),
    "scaled_gemm": (*TRANSPOSE_FLAGS, *SCALE_TRANSPOSE_FLAGS),
}

# rocmlir-gen's thresholds -> the [verifier] keys of rocMLIR's emulated verifier (metrics/rocmlir_verifier.py)
TOLERANCE_FLAGS = {"RMS_threshold": "rms", "relDiff_threshold": "rel_diff", "absDiff_threshold": "abs_diff"}
# import-rocmlir --verdict: which verdict fails an imported case (runner.options.VERDICT_CHOICES)
VERDICTS = {"both": "both", "rocmlir": "verifier", "e2egen": "e2egen"}
DEFAULT_VERDICT = "both"

CONV_SHAPE_FLAGS = {  # rocmlir-gen flag or MIOpen-driver short form -> rocmlir-gen flag
    **{f: f for f in ("batchsize", "in_channels", "out_channels", "in_h", "in_w", "fil_h", "fil_w",
                      "dilation_h", "dilation_w", "conv_stride_h", "conv_stride_w", "padding_h", "padding_w",
                      "padding_h_l", "padding_h_r", "padding_w_l", "padding_w_r", "groupsize", "out_h", "out_w")},
    "n": "batchsize", "c": "in_channels", "k": "out_channels", "H": "in_h", "W": "in_w", "y": "fil_h", "x": "fil_w",
    "l": "dilation_h", "j": "dilation_w", "u": "conv_stride_h", "v": "conv_stride_w", "q": "padding_w",
    "g": "groupsize",
}  # no -p: MIOpen's pad_h, but rocmlir-gen's "populate default values" (POPULATE_FLAG)
CONV_GEMM_SHAPE_FLAGS = {**CONV_SHAPE_FLAGS, "gemmO": "gemmO"}
# rocmlir-gen's depth: read only when the filter layout has three spatial dims (digits 0 1 2, 2 the depth)
DEPTH_FLAGS = ("in_d", "fil_d", "out_d", "dilation_d", "conv_stride_d", "padding_d", "padding_d_l", "padding_d_r")
GEMM_SHAPE_FLAGS = {"m": "m", "n": "n", "k": "k", "g": "batch", "groupsize": "batch"}
GEMM_GEMM_SHAPE_FLAGS = {**GEMM_SHAPE_FLAGS, "gemmO": "o"}
# rocmlir-gen's -p ("populate default values"): populateDefaults() sets these sizes, whatever the command
# line gave, after correctConvParameters(); conv_gemm counts as a conv there and also gets -gemmO 769.
POPULATE_FLAG = "p"
CONV_DEFAULT_PROBLEM = {
    "groupsize": 1, "batchsize": 128, "in_channels": 8, "out_channels": 128, "in_h": 32, "in_w": 32, "fil_h": 3,
    "fil_w": 3, "dilation_h": 1, "dilation_w": 1, "conv_stride_h": 1, "conv_stride_w": 1, "padding_h_l": 0,
    "padding_h_r": 0, "padding_w_l": 0, "padding_w_r": 0,
}
DEFAULT_PROBLEMS = {  # op -> rocmlir-gen flag -> the value -p gives it
    "conv2d": CONV_DEFAULT_PROBLEM,
    "conv_gemm": {**CONV_DEFAULT_PROBLEM, "gemmO": 769},
    "gemm": {"groupsize": 1, "m": 1024, "k": 769, "n": 512},
    "scaled_gemm": {"groupsize": 1, "m": 1024, "k": 769, "n": 512},  # a gemm to populateDefaults()
    "gemm_gemm": {"groupsize": 1, "m": 1024, "k": 769, "n": 512, "gemmO": 769},
    "attention": {"groupsize": 1, "seq_len_q": 1024, "seq_len_k": 1024, "num_heads_q": 1, "num_heads_kv": 1,
                  "head_dim_qk": 32, "head_dim_v": 32},
}
ATTENTION_SIZE_FLAGS = {  # rocmlir-gen flag -> e2egen attention parameter (positive integers)
    "seq_len_q": "seq_q", "seq_len_k": "seq_k", "head_dim_qk": "head_dim_qk", "head_dim_v": "head_dim_v",
    "num_heads_q": "heads_q", "num_heads_kv": "heads_kv", "g": "batch", "groupsize": "batch",
}
ATTENTION_SWITCH_FLAGS = {  # rocmlir-gen switch -> e2egen attention parameter (true or false)
    "with-attn-scale": "score_scale", "with-attn-bias": "score_bias", "causal": "causal", "return_lse": "return_lse",
}
ATTENTION_LIST_FLAGS = ("current_seq_len", "last_valid_kv_index", "prefix_offset")  # one integer per batch
# rocmlir-gen's sliding window under its two names (the older one beside -current_seq_len): look_back W masks the
# keys before max(0, P - W), P the batch's last valid key, for every query row; W <= 0 is no window
ATTENTION_WINDOW_FLAGS = ("sliding_window_size", "sliding_window_look_back")
ATTENTION_LEGACY_FLAGS = ("seq_len", "num_heads")  # rocmlir-gen's first attention interface
ATTENTION_FLAGS = (*ATTENTION_SIZE_FLAGS, *ATTENTION_SWITCH_FLAGS, *ATTENTION_LIST_FLAGS, *ATTENTION_WINDOW_FLAGS,
                   *ATTENTION_LEGACY_FLAGS)
SHAPE_FLAGS = {  # op -> the flags its shape reads (-p included: it sets them)
    "conv2d": (*CONV_SHAPE_FLAGS, POPULATE_FLAG), "gemm": (*GEMM_SHAPE_FLAGS, POPULATE_FLAG),
    "attention": (*ATTENTION_FLAGS, POPULATE_FLAG), "gemm_gemm": (*GEMM_GEMM_SHAPE_FLAGS, POPULATE_FLAG),
    "conv_gemm": (*CONV_GEMM_SHAPE_FLAGS, POPULATE_FLAG), "conv3d": (*CONV_SHAPE_FLAGS, *DEPTH_FLAGS, POPULATE_FLAG),
    "scaled_gemm": (*GEMM_SHAPE_FLAGS, POPULATE_FLAG),
}

# Flags that do not change what is computed: reported as ignored, with why.
IGNORED_FLAGS = {
    **{f: "a depth; rocmlir-gen reads it only with a 3-d layout (digits 0 1 2 in -fil_layout)" for f in DEPTH_FLAGS},
    "arch": "the target GPU; e2egen runs on torch's device",
    "num_cu": "the target GPU's size",
    "pv": "rocMLIR's CPU validation; e2egen always validates against a float64 reference",
    "pv_with_gpu": "rocMLIR's GPU validation; e2egen always validates against a float64 reference",
    "pv_with_cpp": "rocMLIR's CPU validation; e2egen always validates against a float64 reference",
    "pv_with_mlir": "rocMLIR's CPU validation; e2egen always validates against a float64 reference",
    "mfma": "whether the GPU kernel uses MFMA instructions; e2egen's kernel under test is torch's",
    "wmma": "whether the GPU kernel uses WMMA instructions; e2egen's kernel under test is torch's",
}
# rocmlir-gen's cl::opt<bool> options: a following word is never their value (`-pv %random_data`)
BOOLEAN_FLAGS = ("pv", "pv_with_gpu", "pv_with_cpp", "pv_with_mlir", "pv-strict", "pv-f64", "p", "transA", "transB",
                 "transC", "transO", "transQ", "transK", "transV", "causal", "return_lse", "with-attn-scale",
                 "with-attn-bias", "reverse_grid", "host-harness", "ph", "scaledGemm", *SCALE_TRANSPOSE_FLAGS)
LOW_BIT_FLAGS = (*SCALED_GEMM_FLAGS, *OUT_DTYPE_FLAGS)
LIT_SUBSTITUTION_NOTES = {
    "%random_data": "rocMLIR's seeded random inputs (-rand 1); imported as the range its -rand_type gives",
    "%constrained_range_random_data": "rocMLIR's seeded random inputs, a range its lit configuration may narrow "
                                      "(no catalogue says how); imported as the range its -rand flags give",
    "%constrained_float_range_random_data": "rocMLIR's seeded random inputs, read as -rand 1 -rand_type float "
                                            "-rand_min -1 -rand_max 1 (reals in [-1, 1]) as GemmElementwiseGemmF16SplitK"
                                            ".toml's own comment says (\"symmetric [-1, 1] random data\"): rocMLIR's "
                                            "CMake value for it is not in the sources read",
}
# Flags that change the kernel or its data but have no equivalent here.
NO_EQUIVALENT = {
    "reverse_grid": "a kernel scheduling variant; e2egen's kernel under test is torch's",
    "schedule_version": "a kernel scheduling variant; e2egen's kernel under test is torch's",
    "perf_config": "a kernel tuning choice; e2egen's kernel under test is torch's",
    "transC": "gemm's output storage order (gemm_gemm's and conv_gemm's --transC is their C input's, a layout); "
              "e2egen compares the output as a logical tensor",
    "transO": "the output's storage order; e2egen compares the output as a logical tensor",
    "split_kv": "flash decoding, a kernel variant: rocMLIR recombines the split results on the host, "
                "the same attention; e2egen's kernel under test is torch's",
}
AXIS_NAMES = ("directions", "dtypes", "layouts")  # the order of CaseKey's fields


class CaseKey(NamedTuple):
    direction: str
    dtype: str
    layout: str


# ---------------------------------------------------------------- read


@dataclass(frozen=True)
class Source:
    """Where a flag came from: a line and words for messages ("axis 'data type'")."""

    line: int | None
    what: str


@dataclass(frozen=True)
class Flag:
    """One rocmlir-gen option: `-name=value`, `--name value` or a bare `--switch` (value None)."""

    name: str
    value: str | None
    text: str
    source: Source


@dataclass(frozen=True)
class RocAxis:
    name: str
    values: tuple[str, ...]
    prefix: str
    line: int | None
    when: object = None  # a `when` key: generateE2ETest.py does not read it (the axis applies everywhere)

    def flags(self, value: str) -> tuple[Flag, ...]:
        return parse_flags(self.prefix + value, Source(self.line, f"axis {self.name!r}"))[0]


@dataclass(frozen=True)
class RocExclude:
    axis: str
    values: tuple[str, ...]
    line: int | None


@dataclass(frozen=True)
class RocTest:
    number: int  # 1-based, as rocMLIR numbers its generated files
    config: str
    excludes: tuple[RocExclude, ...]
    line: int | None
    comments: tuple[str, ...]


@dataclass(frozen=True)
class RocSuite:
    name: str
    tests: tuple[RocTest, ...]
    line: int | None


@dataclass(frozen=True)
class RocCatalogue:
    path: str
    directory: str
    prefix: str
    suffix: str
    axes: tuple[RocAxis, ...]
    suites: tuple[RocSuite, ...]
    lines: Mapping[tuple, int] = field(repr=False)

    def line(self, *key_path) -> int | None:
        return line_of(self.lines, key_path)


def parse_flags(text: str, source: Source) -> tuple[tuple[Flag, ...], tuple[str, ...]]:
    """rocmlir-gen options of `text`, and the words that are no option (lit substitutions like %pv).

    `-name value` takes the next word as its value unless that word is itself
    an option; so `--reverse_grid -groupsize=1` is a switch then an option.
    """
    words = text.split()
    flags, others = [], []
    i = 0
    while i < len(words):
        word = words[i]
        if not _is_option(word):
            others.append(word)
            i += 1
            continue
        name, eq, value = word.lstrip("-").partition("=")
        text_of_flag = word
        if not eq and i + 1 < len(words) and _is_value_of(name, words[i + 1]):
            value, text_of_flag = words[i + 1], f"{word} {words[i + 1]}"
            i += 1
        flags.append(Flag(name, value if (eq or value) else None, text_of_flag, source))
        i += 1
    return tuple(flags), tuple(others)


def _is_option(word: str) -> bool:
    return word.startswith("-") and not re.fullmatch(r"-[0-9.]+(e-?[0-9]+)?", word)


def _is_value_of(flag_name: str, word: str) -> bool:
    """Whether `word` is the value of the option before it: not an option, nor a lit
    substitution (`%pv`), except as the value of an ignored flag (`--arch %arch`)."""
    if flag_name in BOOLEAN_FLAGS:
        return False
    return not _is_option(word) and (not word.startswith("%") or flag_name in IGNORED_FLAGS)


def read_rocmlir_file(path: str | Path) -> RocCatalogue:
    """Read and check a rocMLIR e2e catalogue; CatalogueError (one clear message) when it is none."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogueError([Problem(Location(str(path)), "", "no such file")])
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise CatalogueError([Problem(Location(str(path)), "", f"cannot read the file: {reason}")])
    return read_rocmlir(text, str(path))


def read_rocmlir(text: str, path: str = "<rocmlir>") -> RocCatalogue:
    data = parse_toml(text, path)
    lines = key_lines(text)
    problems: list[Problem] = []

    def problem(key_path: tuple, message: str) -> None:
        key = ".".join(f"{p}" if isinstance(p, str) else f"[{p}]" for p in key_path).replace(".[", "[")
        problems.append(Problem(Location(path, line_of(lines, key_path)), key, message))

    _check_is_rocmlir(data, problem)
    if problems:
        raise CatalogueError(problems)
    _unknown_keys(data, (), problem)
    axes_data = data.get("axis", [])
    if not isinstance(axes_data, list):
        problem(("axis",), "expected [[axis]] tables")
        axes_data = []
    axes = tuple(_read_axis(a, ("axis", i), problem, lines) for i, a in enumerate(axes_data))
    suites = tuple(_read_suite(s, ("suite", i), problem, lines, text) for i, s in enumerate(data["suite"]))
    for key in ("directory", "prefix", "suffix"):
        if key in data and not isinstance(data[key], str):
            problem((key,), f"expected a string, got {type(data[key]).__name__}")
    if problems:
        raise CatalogueError(problems)
    return RocCatalogue(
        path=path, directory=data.get("directory", ""), prefix=data.get("prefix", ""), suffix=data.get("suffix", ""),
        axes=axes, suites=suites, lines=lines,
    )


def _check_is_rocmlir(data: dict, problem) -> None:
    suites = data.get("suite")
    expected = "a rocMLIR e2e catalogue has [[suite]] tables of [[suite.test]] with `config` strings (and directory, prefix, suffix, [[axis]])"
    if not isinstance(suites, list) or not suites or not all(isinstance(s, dict) for s in suites):
        problem((), f"not a rocMLIR e2e catalogue: {expected}")
    elif any("op" in s or "config" in s for s in suites):
        problem(("suite",), f"not a rocMLIR e2e catalogue (its suites have `op`/[[suite.config]]: it looks like an e2egen catalogue already): {expected}")
    elif not any(isinstance(s.get("test"), list) for s in suites):
        problem(("suite",), f"not a rocMLIR e2e catalogue: no [[suite.test]]; {expected}")


# The keys each table of a rocMLIR e2e catalogue has (what generateE2ETest.py reads), by the table's key path
# less its indices: ("suite", "test") is a [[suite.test]].
ROCMLIR_KEYS: dict[tuple, tuple[str, ...]] = {
    (): ("directory", "prefix", "suffix", "axis", "suite"),
    ("axis",): ("name", "values", "prefix", "when"),
    ("suite",): ("name", "test"),
    ("suite", "test"): ("config", "exclude"),
    ("suite", "test", "exclude"): ("name", "values"),
}


def _unknown_keys(table: dict, key_path: tuple, problem) -> None:
    """Every key of `table` that its kind of rocMLIR table does not have: one problem each, with the valid keys."""
    kind = tuple(p for p in key_path if isinstance(p, str))
    valid = ROCMLIR_KEYS[kind]
    header = f"[[{'.'.join(kind)}]]" if kind else "top-level"
    for key in table:
        if key not in valid:
            problem(key_path + (key,), unknown(f"{header} key", key, valid))


def _strings(value, key_path: tuple, problem) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problem(key_path, "expected a list of strings")
        return ()
    return tuple(value)


def _read_axis(data, key_path: tuple, problem, lines) -> RocAxis:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        problem(key_path, "an [[axis]] needs a `name` string and a `values` list")
        return RocAxis("?", (), "", line_of(lines, key_path))
    _unknown_keys(data, key_path, problem)
    prefix = data.get("prefix", "")
    if not isinstance(prefix, str):
        problem(key_path + ("prefix",), "expected a string")
        prefix = ""
    return RocAxis(data["name"], _strings(data.get("values"), key_path + ("values",), problem), prefix,
                   line_of(lines, key_path), data.get("when"))


def _read_suite(data: dict, key_path: tuple, problem, lines, text: str) -> RocSuite:
    _unknown_keys(data, key_path, problem)
    name = data.get("name")
    if not isinstance(name, str):
        problem(key_path + ("name",), "a [[suite]] needs a `name` string")
        name = "?"
    tests_data = data.get("test", [])
    if not isinstance(tests_data, list):
        problem(key_path + ("test",), "expected [[suite.test]] tables")
        tests_data = []
    tests = []
    for i, test in enumerate(tests_data):
        test_path = key_path + ("test", i)
        if not isinstance(test, dict) or not isinstance(test.get("config"), str):
            problem(test_path, "a [[suite.test]] needs a `config` string")
            continue
        _unknown_keys(test, test_path, problem)
        excludes_data = test.get("exclude", [])
        if not isinstance(excludes_data, list):
            problem(test_path + ("exclude",), "expected [[suite.test.exclude]] tables")
            excludes_data = []
        excludes = tuple(_read_exclude(e, test_path + ("exclude", j), problem, lines) for j, e in enumerate(excludes_data))
        comment_lines = [line_of(lines, test_path)] + [e.line for e in excludes]
        tests.append(RocTest(i + 1, test["config"], excludes, line_of(lines, test_path), _comments_above(text, comment_lines)))
    return RocSuite(name, tuple(tests), line_of(lines, key_path))


def _read_exclude(data, key_path: tuple, problem, lines) -> RocExclude:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        problem(key_path, "a [[suite.test.exclude]] needs a `name` string (an axis) and a `values` list")
        return RocExclude("?", (), line_of(lines, key_path))
    _unknown_keys(data, key_path, problem)
    return RocExclude(data["name"], _strings(data.get("values"), key_path + ("values",), problem), line_of(lines, key_path))


def _comments_above(text: str, header_lines: Iterable[int | None]) -> tuple[str, ...]:
    """The comment lines right above each header line: rocMLIR's notes on a test ("reverse grid test")."""
    source = source_lines(text)
    comments = []
    for header in header_lines:
        if not header:
            continue
        block = []
        i = header - 2
        while i >= 0 and source[i].lstrip().startswith("#") and not source[i].lstrip().startswith("#["):
            block.insert(0, source[i].lstrip().lstrip("#").strip())
            i -= 1
        comments.extend(c for c in block if c)
    return tuple(comments)


# ---------------------------------------------------------------- model


NOT_IMPORTED, IGNORED, RENAMED = "not imported", "ignored", "renamed"  # kinds of report items, in report order


@dataclass(frozen=True)
class Note:
    """One report item: a rocMLIR item not imported, ignored (it changes nothing computed) or renamed."""

    line: int | None
    subject: str
    message: str
    kind: str = NOT_IMPORTED

    def render(self, path: str) -> str:
        where = f"{path}:{self.line}" if self.line else path
        return f"{where}: {self.subject}: {self.message}"


class Notes:
    """The report without repeats (every combination resolves the same flags), by kind, then by line."""

    def __init__(self) -> None:
        self._notes: dict[Note, None] = {}
        self.last: Note | None = None  # the latest item added (repeats included): why a case was left out

    def add(self, line: int | None, subject: str, message: str, kind: str = NOT_IMPORTED) -> None:
        self.last = Note(line, subject, message, kind)
        self._notes.setdefault(self.last, None)

    def __iter__(self) -> Iterator[Note]:
        kinds = (NOT_IMPORTED, IGNORED, RENAMED)
        return iter(sorted(self._notes, key=lambda n: (kinds.index(n.kind), n.line or 0)))


@dataclass(frozen=True)
class ImportedConfig:
    rocmlir_test: RocTest
    op: str
    params: tuple[tuple[str, object], ...]
    kept: frozenset[CaseKey]
    order: tuple[CaseKey, ...]  # every key its combinations produced, in rocMLIR's order (for axis order)
    tolerances: tuple[tuple[str, float], ...]
    dropped: tuple[str, ...]  # flags not imported, for naming and comments
    data: DataRange = DEFAULT_DATA  # the distribution rocmlir-gen draws this config's inputs from


@dataclass(frozen=True)
class NamedConfig:
    """An imported config under its unique name, with the excludes that keep rocMLIR's cases."""

    name: str
    config: ImportedConfig
    excludes: tuple[dict[str, list[str]], ...]


@dataclass(frozen=True)
class ImportedSuite:
    name: str
    op: str
    rocmlir_suite: RocSuite
    axes: Mapping[str, tuple[str, ...]]
    tolerances: tuple[tuple[str, float], ...]
    pr: bool
    configs: tuple[NamedConfig, ...]
    dtype_tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # from axis values (`f16 -RMS_threshold=..`)

    @property
    def data_ranges(self) -> tuple[DataRange, ...]:
        return tuple(dict.fromkeys(named.config.data for named in self.configs))


@dataclass(frozen=True)
class RocCase:
    """One case rocMLIR runs (a test and a combination of axis values it does not exclude), and whether this
    catalogue expresses it; `reason` says why not (the report's item, shortened to a category)."""

    test: int
    expressed: bool
    reason: str | None = None


@dataclass(frozen=True)
class Conversion:
    source_name: str
    rocmlir: RocCatalogue
    suites: tuple[ImportedSuite, ...]
    notes: tuple[Note, ...]
    cases: tuple[RocCase, ...] = ()
    decides: str = "both"  # the catalogue's verifier.decides (runner.options.VERDICT_CHOICES)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(d for d in DTYPES if any(d in s.axes["dtypes"] for s in self.suites))

    def to_toml(self) -> str:
        return emit(self)

    def notes_of(self, kind: str) -> tuple[Note, ...]:
        return tuple(n for n in self.notes if n.kind == kind)

    def report(self, path: str | None = None) -> list[str]:
        """The report, one line per item: "not imported: FILE:LINE: subject: what and why"."""
        return [f"{n.kind}: {n.render(path or self.source_name)}" for n in self.notes]


def convert(rocmlir: RocCatalogue, fp8: str = DEFAULT_F8, verdict: str = DEFAULT_VERDICT) -> Conversion:
    """The e2egen catalogue of a rocMLIR one. `fp8`: what rocMLIR's fp8/bf8 (the chip's formats) become when no
    --force-f8-types says: "ocp" (e4m3fn/e5m2: gfx950, gfx12), "fnuz" (gfx942 and older rocmlir-gen), "both".
    `verdict`: which verdict fails an imported case (VERDICTS): "both" (default: either failing), "rocmlir"
    (rocMLIR's emulated verifier alone) or "e2egen" (e2egen's own alone); the other is reported beside it."""
    if fp8 not in F8_FAMILIES:
        raise ValueError(f"fp8={fp8!r}: one of {', '.join(F8_FAMILIES)}")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict={verdict!r}: one of {', '.join(VERDICTS)}")
    notes = Notes()
    prefix_flags, suffix_flags = _wrapper_flags(rocmlir, notes)
    axis_case_flags, dtype_tolerances = _classify_axes(rocmlir, notes)
    suite_tolerances = _tolerances(suffix_flags, Notes())  # malformed ones were reported with the suffix
    suites, cases = [], []
    for suite in rocmlir.suites:
        configs = [c for test in suite.tests
                   for c in _import_test(rocmlir, test, prefix_flags, suffix_flags, axis_case_flags, notes, cases, fp8)]
        if not configs:
            notes.add(suite.line, f"suite {suite.name!r}", "nothing in it could be imported; no suite written")
        # one suite per op, and quantized attention (i8) in a suite of its own: its configs say quantized = true,
        # which no other dtype takes
        groups = tuple(dict.fromkeys((c.op, _quantized(c)) for c in configs))
        ops = tuple(dict.fromkeys(op for op, _ in groups))
        for op, quantized in groups:
            name = suite_name(rocmlir, suite, op if len(ops) > 1 else None)
            if quantized and (op, False) in groups:
                name += "-quantized"
            suites.append(_build_suite(rocmlir, suite, name, op, [c for c in configs if (c.op, _quantized(c)) == (op, quantized)],
                                       suite_tolerances, dtype_tolerances, notes))
    return Conversion(Path(rocmlir.path).name, rocmlir, tuple(suites), tuple(notes), tuple(cases), VERDICTS[verdict])


def _quantized(config: ImportedConfig) -> bool:
    return bool(dict(config.params).get("quantized"))


def _wrapper_words(rocmlir: RocCatalogue) -> tuple[str, ...]:
    """The lit substitutions of prefix and suffix (%random_data says rocMLIR's CI seeds the data)."""
    prefix = parse_flags(rocmlir.prefix.strip().partition(" ")[2], Source(None, "prefix"))[1]
    return prefix + parse_flags(rocmlir.suffix.split("|", 1)[0], Source(None, "suffix"))[1]


def _wrapper_flags(rocmlir: RocCatalogue, notes: Notes) -> tuple[tuple[Flag, ...], tuple[Flag, ...]]:
    """Flags of `prefix` (after the tool) and of `suffix` (before the first pipe: the rest runs the kernel)."""
    tool, _, prefix_rest = rocmlir.prefix.strip().partition(" ")
    if tool and tool != "rocmlir-gen":
        notes.add(rocmlir.line("prefix"), "prefix", f"tool {tool!r} is not rocmlir-gen; its flags are read as rocmlir-gen's")
    prefix_flags, prefix_words = parse_flags(prefix_rest, Source(rocmlir.line("prefix"), "prefix"))
    suffix_flags, suffix_words = parse_flags(rocmlir.suffix.split("|", 1)[0], Source(rocmlir.line("suffix"), "suffix"))
    for words, flags, key in ((prefix_words, prefix_flags, "prefix"), (suffix_words, suffix_flags, "suffix")):
        _note_words(words, rocmlir.line(key), key, notes)
        _note_wrapper_flags(flags, key, notes)
    return prefix_flags, suffix_flags


def _note_words(words: Iterable[str], line: int | None, subject: str, notes: Notes) -> None:
    for word in words:
        if word in LIT_SUBSTITUTION_NOTES:
            notes.add(line, subject, f"lit substitution {word}: {LIT_SUBSTITUTION_NOTES[word]}", kind=IGNORED)
        elif word.startswith("%"):
            notes.add(line, subject, f"lit substitution {word}: a setting of rocMLIR's test runner", kind=IGNORED)
        else:
            notes.add(line, subject, f"word {word!r} is no rocmlir-gen option; dropped")


def _classify_axes(rocmlir: RocCatalogue, notes: Notes):
    """Per axis and value, the flags that pick a case axis of ours; per dtype, thresholds an axis value sets
    with it (`-t f16 -RMS_threshold=0.0007`); report the rest once per axis.

    An axis whose values set only flags with no equivalent (schedule_version)
    is merged: every one of our cases stands for all of its values. The -rand flags an axis value sets are kept
    with its case flags: they give its cases their data (_import_test).
    """
    kept: dict[str, dict[str, tuple[Flag, ...]]] = {}
    dtype_tolerances: dict[str, dict[str, float]] = {}
    for axis in rocmlir.axes:
        if axis.when is not None:
            notes.add(axis.line, f"axis {axis.name!r}", f"`when = {axis.when!r}`: rocMLIR's generateE2ETest.py does "
                                                        "not read `when`, so the axis applies to every combination, "
                                                        "as here", kind=IGNORED)
        kept[axis.name] = {}
        dropped: dict[str, list[str]] = {}
        for value in axis.values:
            flags = axis.flags(value)
            kept[axis.name][value] = tuple(f for f in flags if f.name in CASE_FLAGS or f.name in DATA_FLAGS)
            _axis_value_tolerances(axis, flags, dtype_tolerances, notes)
            for f in flags:
                if f.name not in CASE_FLAGS and f.name not in TOLERANCE_FLAGS and f.name not in DATA_FLAGS:
                    dropped.setdefault(f.name, []).append(f.value or "true")
        for name, values in dropped.items():
            why = NO_EQUIVALENT.get(name, "an axis of ours is only an op, direction, dtype or layout")
            merged = "its values are merged: each case runs once" if len(kept[axis.name]) and not any(kept[axis.name].values()) else "ignored"
            notes.add(axis.line, f"axis {axis.name!r}", f"--{name} {', '.join(values)} has no equivalent in e2egen ({why}); {merged}")
    return kept, dtype_tolerances


def _axis_value_tolerances(axis: RocAxis, flags: tuple[Flag, ...], dtype_tolerances: dict, notes: Notes) -> None:
    """Thresholds set next to `-t DTYPE` in an axis value hold for that dtype (relDiff for f32 only)."""
    tolerances = dict(_tolerances(flags, notes))
    if not tolerances:
        return
    dtype = next((f.value for f in flags if f.name == "t"), None)
    text = " ".join(f.text for f in flags if f.name in TOLERANCE_FLAGS)
    if dtype == "i8":
        notes.add(axis.line, f"axis {axis.name!r}", f"{text} for i8: rocMLIR's integer verification is exact and "
                                                    "reads no threshold; i8 is judged exactly here too", kind=IGNORED)
        return
    if dtype not in WIDE_DTYPES:
        why = ("it sets no data type" if dtype is None else f"data type {dtype!r} is left out or, for fp8, "
               "becomes a dtype that depends on the op")
        notes.add(axis.line, f"axis {axis.name!r}", f"{text} dropped: {why}, so the threshold is tied to no dtype here")
        return
    if dtype != "f32" and tolerances.pop("rel_diff", None) is not None:
        notes.add(axis.line, f"axis {axis.name!r}", f"-relDiff_threshold for {dtype}: rocMLIR's verifier switches "
                                                    "relDiff off for f16/bf16 outputs, so it is not imported", kind=IGNORED)
    dtype_tolerances.setdefault(dtype, {}).update(tolerances)


def _import_test(rocmlir, test: RocTest, prefix_flags, suffix_flags, axis_case_flags, notes: Notes,
                 cases: list[RocCase], fp8: str = DEFAULT_F8) -> list[ImportedConfig]:
    """One config per op (and per set of case parameters, see `case_params`) this test's combinations produce
    (normally one); every case rocMLIR runs goes to `cases`, expressed or not and why."""
    where = Source(test.line, f"test {test.number} config")
    config_flags, words = parse_flags(test.config, where)
    _note_words(words, test.line, where.what, notes)
    fixed = (*prefix_flags, *config_flags)
    _check_excludes(rocmlir, test, notes)
    Variant = tuple  # (op, case parameters, an axis value's -rand flags): one config each
    kept: dict[Variant, set[CaseKey]] = {}
    order: dict[Variant, dict[CaseKey, None]] = {}
    excluded_keys: dict[Variant, set[CaseKey]] = {}
    pending: dict[Variant, list[tuple[CaseKey, ...]]] = {}  # each rocMLIR case's keys, waiting for the shape
    matched_exclude = False
    for combination in _combinations(rocmlir):
        if _never_generated(combination):
            continue
        excluded = _is_excluded(test, combination)
        matched_exclude |= excluded
        flags = _merge(fixed, [f for axis, value in combination for f in axis_case_flags[axis.name][value]], suffix_flags, notes)
        notes.last = None
        resolved = resolve_case(flags, notes, fp8)
        extra = None if resolved is None else case_params(*resolved, flags, notes)
        if extra is None:
            if not excluded:
                cases.append(RocCase(test.number, False, reason_of(notes.last)))
            continue
        op, keys = resolved
        # an axis value's -rand flags (`-rand_type float`) give its cases their own data: a config of their own
        axis_data = tuple(f for axis, value in combination for f in axis_case_flags[axis.name][value] if f.name in DATA_FLAGS)
        variant = (op, extra, axis_data)
        for key in keys:  # one, or one per fp8 family (--fp8 both)
            order.setdefault(variant, {})[key] = None
            (excluded_keys if excluded else kept).setdefault(variant, set()).add(key)
        if not excluded:
            pending.setdefault(variant, []).append(keys)
    _note_exclude_effect(test, matched_exclude, excluded_keys, kept, notes)
    configs = []
    all_fixed = (*fixed, *suffix_flags)
    for variant in order:
        op, extra, axis_data = variant
        waiting = pending.get(variant, [])
        notes.last = None
        shape = resolve_shape(op, all_fixed, notes)
        if shape is None:
            cases.extend(RocCase(test.number, False, reason_of(notes.last)) for _ in waiting)
            continue
        if not kept.get(variant):
            notes.add(test.line, where.what, f"every {op} combination of this test is excluded or unsupported; nothing imported")
            continue
        data, data_params = _case_data(rocmlir, op, extra, (*fixed, *axis_data, *suffix_flags), words, notes, where)
        data = _exact_integers(data, sorted({key.dtype for key in kept[variant]}), notes, where, quiet=bool(data_params))
        params = shape + extra + data_params
        rejected = _runner_rejects(op, params, kept[variant], data, notes, where)
        for keys in waiting:
            refused = [rejected[key] for key in keys if key in rejected]
            cases.append(RocCase(test.number, len(refused) < len(keys), refused[0] if len(refused) == len(keys) else None))
        runs = frozenset(key for key in kept[variant] if key not in rejected)
        if not runs:
            continue
        dropped = _note_other_flags(op, config_flags, notes)
        tolerances = _tolerances(config_flags, notes)  # an f16/bf16 out_dtype: the verifier knows its defaults
        configs.append(ImportedConfig(test, op, params, runs, tuple(order[variant]), tolerances, dropped, data))
    return configs


def case_params(op: str, keys: tuple[CaseKey, ...], flags: Mapping[str, Flag],
                notes: Notes) -> tuple[tuple[str, object], ...] | None:
    """The parameters a case's flags set besides its shape (they may differ between axis values, so a test can
    need a config per set): gemm's and scaled_gemm's out_dtype (-out_dtype bf16/f16 of an fp8/fp4 gemm; f32 is
    the default) and scaled_gemm's block (-quantBlockSize, 32 by default as in rocmlir-gen), scale_a_dtype and
    scale_b_dtype (-scale_a_dtype / -scale_b_dtype: f8E8M0FNU, rocmlir-gen's default, is e8m0, scaled_gemm's MX
    default; f32 is f32). None (reported) when one has no equivalent. Without --scaledGemm rocmlir-gen reads
    none of the scale flags: they are reported as ignored."""
    params: list[tuple[str, object]] = []
    if op != "scaled_gemm":
        for name in SCALED_GEMM_FLAGS[1:]:
            flag = flags.get(name)
            if flag is not None:
                notes.add(flag.source.line, flag.source.what, f"{flag.text}: rocmlir-gen reads it for a scaled gemm "
                                                              "(--scaledGemm) only", kind=IGNORED)
    else:
        block = flags.get("quantBlockSize")
        size = QUANT_BLOCK_SIZE if block is None else _integer(block.value)
        if not size:
            notes.add(block.source.line, block.source.what, f"{block.text}: expected a positive integer; left out")
            return None
        if size != QUANT_BLOCK_SIZE:
            params.append(("block", size))
        for name in ("scale_a_dtype", "scale_b_dtype"):
            flag = flags.get(name)
            value = (flag.value or "") if flag else DEFAULT_SCALE_TYPE
            if value not in SCALE_TYPES:
                notes.add(flag.source.line, flag.source.what, f"scale type {value!r} ({flag.text}) left out: "
                                                              "e2egen's scales are e8m0 (f8E8M0FNU) or f32")
                return None
            if SCALE_TYPES[value] != "e8m0":
                params.append((name, SCALE_TYPES[value]))
    if op == "attention" and keys[0].dtype in INTEGER_DTYPES:
        params.append(("quantized", True))  # rocMLIR's quantized attention: its quant bias and scale drawn as it draws them
    out = next((flags[name] for name in OUT_DTYPE_FLAGS if name in flags), None)
    low_bit_float = keys[0].dtype not in (*WIDE_DTYPES, *INTEGER_DTYPES)
    if out is not None and op in ("gemm", "scaled_gemm") and low_bit_float and LOW_BIT_OUT_TYPES[out.value or ""]:
        params.append(("out_dtype", LOW_BIT_OUT_TYPES[out.value or ""]))  # resolve_dtypes checked the value
    return tuple(params)


SCALED_GEMM_ONES = ('imported as scaled_gemm\'s pattern "ones": A = B = 1 and every block\'s scale a power of two in '
                    "2^-2..2^2, whose result must come back exact, as rocMLIR's all-ones case (scales 1) must")


def _case_data(rocmlir: RocCatalogue, op: str, extra: tuple, flags: tuple[Flag, ...], words: tuple[str, ...],
               notes: Notes, where: Source) -> tuple[DataRange, tuple[tuple[str, object], ...]]:
    """The config's data range and the parameters its data set: a scaled gemm's `-rand none` becomes scaled_gemm's
    structured pattern "ones" (runner/ops/scaled_gemm/scaling.py). rocmlir-gen fills a scaled gemm's scaleA and scaleB like any
    input; scaled_gemm computes its scales from the data (real MX quantization): reported."""
    if op != "scaled_gemm":
        return _config_data(rocmlir, op, flags, words, notes), ()
    data = _config_data(rocmlir, op, flags, words, notes, ones_as=SCALED_GEMM_ONES)
    rand = {f.name: f for f in flags}.get("rand")
    if rand is not None and rand.value == "none":
        return data, (("pattern", "ones"),)
    notes.add(where.line, where.what, "rocmlir-gen fills scaleA and scaleB like A and B, each value on its own, stored "
                                      "with arith.truncf to the scale type; e2egen's scaled_gemm quantizes real data "
                                      "instead: each block's scale from its largest magnitude, the elements rounded "
                                      "to their format with saturation")
    if "f32" in dict(extra).values():
        notes.add(where.line, where.what, "f32 scales: rocMLIR's GPU kernel converts them to E8M0 (arith.truncf in "
                                          "createGpuGemmKernel) while its CPU reference multiplies by the f32 values, "
                                          "so its f32-scale catalogues use -rand none; e2egen's f32 scales are amax / "
                                          "the element format's largest value (no power of two) and are read exactly")
    return data, ()


def _exact_integers(data: DataRange, dtypes: Iterable[str], notes: Notes, where: Source, quiet: bool = False) -> DataRange:
    """Integer data narrowed to the integers every dtype's input formats hold exactly. rocmlir-gen stores its
    integers with arith.truncf, which rounds the others (-5 becomes -4 in f4E2M1FN, whose integers are exact up
    to 4); e2egen's integer data must be exact. Reported unless `quiet` (a structured pattern draws no data)."""
    if data.data != "integers":
        return data
    from e2egen.metrics.formats import get_format
    from e2egen.runner.dtypes import operand_formats

    formats = {fmt for dtype in dtypes for fmt in operand_formats(dtype) if not get_format(fmt).is_integer}
    bound = min((2 ** (get_format(fmt).mantissa_bits + 1) for fmt in formats), default=None)
    if bound is None or max(abs(data.lo), abs(data.hi)) <= bound or max(data.lo, -bound) >= min(data.hi, bound):
        return data
    narrowed = DataRange.of(max(data.lo, -bound), min(data.hi, bound), "integers", data.random)
    if not quiet:
        notes.add(where.line, where.what, f"{data.describe()} in {', '.join(sorted(formats))}: integers beyond ±{bound} are "
                                          "not exact there (rocmlir-gen's arith.truncf rounds them when it stores the "
                                          f"inputs); imported as {narrowed.describe()}", kind=IGNORED)
    return narrowed


def _runner_rejects(op: str, params: tuple[tuple[str, object], ...], keys: Iterable[CaseKey], data: DataRange,
                    notes: Notes, where: Source) -> dict[CaseKey, str]:
    """The case keys whose problem e2egen's runner refuses, each with its summary reason; reported."""
    from e2egen import runner

    rejected = {}
    for key in sorted(keys):
        try:
            runner.make_problem(op, key.direction, key.dtype, key.layout, dict(params), (data.lo, data.hi), 0, data.input_data)
        except runner.ProblemError as err:
            notes.add(where.line, where.what, f"data type {key.dtype!r} left out of {op} {key.layout}: {err.message}")
            rejected[key] = f"data type {key.dtype}: {err.message.split(';')[0]}"
    return rejected


def _config_data(rocmlir: RocCatalogue, op: str, flags: tuple[Flag, ...], words: tuple[str, ...], notes: Notes,
                 ones_as: str | None = None) -> DataRange:
    """The data of the config's command line (prefix, config, axis values, suffix: -rand flags and %random_data)."""
    by_name = {f.name: f for f in flags}

    def note(flag, message: str, not_expressed: bool) -> None:
        source = flag.source if flag is not None else Source(rocmlir.line("suffix"), "suffix")
        notes.add(source.line, source.what, message, kind=NOT_IMPORTED if not_expressed else IGNORED)

    return resolve_data(by_name, (*words, *_wrapper_words(rocmlir)), note, ones_as, op)


# Why a rocMLIR case is not expressed, from the report item that left it out: a category per kind of item.
REASON_PATTERNS = (
    (re.compile(r"data type '(\w+)' left out for ([\w ]+):"),
     lambda m: f"data type {_dtype_family(m.group(1))} ({m.group(2)})"),
    (re.compile(r"data type '(\w+)' left out"), lambda m: f"data type {_dtype_family(m.group(1))}"),
    (re.compile(r"output type '(\w+)'"), lambda m: f"output type {m.group(1)} (-out_dtype)"),
    (re.compile(r"scale type '(\w+)' \(-(scale_[ab]_dtype)"), lambda m: f"scale type {m.group(1)} (-{m.group(2)})"),
    (re.compile(r"conv layout .*(group dim|no equivalent|3-d)"), lambda m: "conv layout not expressible"),
    (re.compile(r"conv layout"), lambda m: "conv layout not expressible"),
    (re.compile(r"sliding window"), lambda m: "attention sliding window"),
    (re.compile(r"first attention interface"), lambda m: "legacy attention flags (-seq_len, -num_heads)"),
    (re.compile(r"operation '(\w+)'"), lambda m: f"operation {m.group(1)}"),
    (re.compile(r"incomplete (\w+) shape"), lambda m: f"incomplete {m.group(1)} shape"),
    (re.compile(r"one group"), lambda m: "grouped conv_gemm"),
)


def _dtype_family(dtype: str) -> str:
    if dtype.startswith(("fp8", "bf8", "f8")):
        return "f8E8M0FNU" if dtype == "f8E8M0FNU" else "fp8/bf8"
    return dtype


def reason_of(note: Note | None) -> str:
    """A short category for the summary (the report has the full item)."""
    if note is None:
        return "not expressed (see the report)"
    for pattern, category in REASON_PATTERNS:
        match = pattern.search(note.message)
        if match:
            return category(match)
    return note.message.split(";")[0]


def _combinations(rocmlir: RocCatalogue) -> Iterator[tuple[tuple[RocAxis, str], ...]]:
    """rocMLIR's product of axis values, first axis slowest."""
    return itertools.product(*[[(axis, v) for v in axis.values] for axis in rocmlir.axes])


def _never_generated(combination) -> bool:
    """generateE2ETest.py's positional special case: no test file at all for a combination whose third axis
    option contains "i8" and whose first contains "conv_bwd_data" (i8 is for forward convs only)."""
    options = [axis.prefix + value for axis, value in combination]
    return len(options) >= 3 and "i8" in options[2] and "conv_bwd_data" in options[0]


def _is_excluded(test: RocTest, combination) -> bool:
    """rocMLIR's rule: excluded when every exclude entry's axis has one of the entry's values."""
    if not test.excludes:
        return False
    values = {axis.name: value for axis, value in combination}
    return all(values.get(e.axis) in e.values for e in test.excludes)


def _check_excludes(rocmlir: RocCatalogue, test: RocTest, notes: Notes) -> None:
    axes = {a.name: a for a in rocmlir.axes}
    for e in test.excludes:
        if e.axis not in axes:
            notes.add(e.line, f"test {test.number} exclude", f"names {e.axis!r}, which is no [[axis]] ({', '.join(axes) or 'none'}); rocMLIR never matches it, so this exclude excludes nothing")
        elif not set(e.values) & set(axes[e.axis].values):
            notes.add(e.line, f"test {test.number} exclude", f"none of {list(e.values)} is a value of axis {e.axis!r}; this exclude excludes nothing")


def _note_exclude_effect(test: RocTest, matched: bool, excluded_keys, kept, notes: Notes) -> None:
    """Say when an exclude lost its meaning: it only named left-out values, or only some values of a merged axis."""
    if not matched:
        return
    where, line = f"test {test.number} exclude", test.excludes[0].line
    excluded = [(op, k) for op, keys in excluded_keys.items() for k in keys]
    still_run = [(op, k) for op, k in excluded if k in kept.get(op, ())]
    if not excluded:
        notes.add(line, where, "everything it excludes is left out here anyway (unsupported values); nothing left to exclude, dropped")
    elif len(still_run) == len(excluded):
        notes.add(line, where, "rocMLIR still runs what it excludes under other values of a merged axis, so those cases stay; dropped")
    elif still_run:
        notes.add(line, where, "part of what it excludes still runs under other values of a merged axis; that part stays")


def _merge(fixed: Iterable[Flag], axis_flags: Iterable[Flag], suffix_flags: Iterable[Flag], notes: Notes) -> dict[str, Flag]:
    """The command line rocMLIR builds (prefix, config, axis values, suffix) as name -> flag."""
    merged: dict[str, Flag] = {}
    for flag in (*fixed, *axis_flags, *suffix_flags):
        earlier = merged.get(flag.name)
        if earlier is not None and earlier.value != flag.value:
            notes.add(flag.source.line, flag.source.what, f"{flag.text} repeats {earlier.text} ({earlier.source.what}); rocmlir-gen rejects a repeated option; {flag.text} used")
        merged[flag.name] = flag
    return merged


def resolve_case(flags: Mapping[str, Flag], notes: Notes, fp8: str = DEFAULT_F8) -> tuple[str, tuple[CaseKey, ...]] | None:
    """(op, case keys) of one rocMLIR command line, or None (reported) when it has no equivalent. One key, or one per
    fp8 family when rocMLIR's fp8/bf8 are imported as both (`fp8="both"`)."""
    operation = flags.get("operation")
    name = operation.value if operation else DEFAULT_OPERATION
    if name not in OPERATIONS:
        notes.add(operation.source.line, operation.source.what, f"operation {name!r} has no equivalent in e2egen (supported: {', '.join(OPERATIONS)}); left out")
        return None
    op, direction = OPERATIONS[name]
    op = _scaled_gemm_op(op, flags, notes)
    if op is None:
        return None
    dtypes = resolve_dtypes(flags, op, direction, notes, fp8)
    layout = _LAYOUT_RESOLVERS[op](flags, notes) if dtypes is not None else None
    if dtypes is None or layout is None:
        return None
    op = "conv3d" if op == "conv2d" and is_conv3d_layout(layout) else op
    _note_layout_flags_of_other_ops(op, flags, notes)
    return op, tuple(CaseKey(direction, dtype, layout) for dtype in dtypes)


def _scaled_gemm_op(op: str, flags: Mapping[str, Flag], notes: Notes) -> str | None:
    """"scaled_gemm" for a gemm with --scaledGemm (rocmlir-gen's cl::opt<bool>, default false), else `op`; None
    (reported) when the switch is malformed. Other operations do not read it."""
    flag = flags.get("scaledGemm")
    scaled = _boolean(flag)
    if scaled is None:
        notes.add(flag.source.line, flag.source.what, f"{flag.text}: expected true or false; left out")
        return None
    if scaled and op != "gemm":
        notes.add(flag.source.line, flag.source.what, f"{flag.text}: rocmlir-gen reads it for --operation gemm only",
                  kind=IGNORED)
    return "scaled_gemm" if scaled and op == "gemm" else op


def resolve_dtypes(flags: Mapping[str, Flag], op: str, direction: str, notes: Notes,
                   fp8: str = DEFAULT_F8) -> tuple[str, ...] | None:
    """e2egen's dtypes for rocmlir-gen's -t (with -out_dtype and --force-f8-types), or None (reported).

    rocmlir-gen's -t A_B gives the filter (gemm: A) type A and the input (gemm: B) type B, and sets the output
    type: i32 for i8, f32 for fp8/bf8/f8*/f4 names, else the type itself; -out_dtype overrides it. fp8 and bf8
    are the chip's formats (`fp8`: which e2egen dtype they become when --force-f8-types does not say).
    """
    flag = flags.get("t")
    value = (flag.value or "") if flag else DEFAULT_DTYPE
    source = flag.source if flag else Source(None, "command line")

    def leave_out(why: str, subject: str = "") -> None:
        notes.add(source.line, source.what, f"data type {value!r} left out{subject}: {why}")

    if op == "scaled_gemm" and (value in WIDE_DTYPES or value == "i8"):
        leave_out("e2egen's scaled_gemm takes fp8 and fp4 elements", " for scaled gemm")
        return None
    if value in WIDE_DTYPES:
        dtypes, output = (value,), value
    elif op == "attention":  # rocMLIR's i8 attention is its quantized attention; f16 output (case_params)
        if value != "i8":
            leave_out(ATTENTION_LOW_BIT, " for attention")
            return None
        dtypes, output = ("i8",), "f16"
    else:
        if value == "i8":
            dtypes, output = ("i8",), "i32"
        elif value in EXPLICIT_F4:
            dtypes, output = (EXPLICIT_F4[value],), "f32"
        else:
            dtypes = _float8_dtypes(value, op, flags, leave_out, fp8)
            if dtypes is None:
                return None
            output = "f32"
        if op not in LOW_BIT_OPS:
            leave_out("e2egen's i8 and fp8 dtypes are for conv and gemm", f" for {op}")
            return None
        if dtypes[0] in FLOAT4 and op not in FP4_OPS:
            leave_out(f"e2egen's fp4 dtype is for {' and '.join(FP4_OPS)}", f" for {op}")
            return None
        if op == "conv2d" and direction != "fwd":
            leave_out("rocmlir-gen types a conv's tensors by role (filter, input, output), the output i32 or f32, "
                      f"so a backward conv would read an {output} dy and write an 8-bit result, and its CPU reference "
                      "(createCPUConvWithMLIR) asserts a forward conv for i8: rocMLIR cannot verify this case either "
                      "(its generateE2ETest.py skips i8 conv_bwd_data only, and misses the conv2d_ spelling)",
                      f" for conv {direction}")
            return None
    out = next((flags[name] for name in OUT_DTYPE_FLAGS if name in flags), None)
    chooses = op in ("gemm", "scaled_gemm") and output == "f32" and value not in WIDE_DTYPES  # fp8/fp4: out_dtype
    if out is not None and chooses and (out.value or "") not in LOW_BIT_OUT_TYPES:
        notes.add(out.source.line, out.source.what, f"output type {out.value!r} ({out.text}) left out: e2egen's "
                                                    f"{value} {op} writes f32, bf16 or f16 (its out_dtype)")
        return None
    if out is not None and not chooses and (out.value or "") not in (output, "fp32" if output == "f32" else output):
        notes.add(out.source.line, out.source.what, f"output type {out.value!r} ({out.text}) left out: e2egen's "
                                                    f"{value} cases write {output}; no other output type yet")
        return None
    return dtypes


def _float8_dtypes(value: str, op: str, flags: Mapping[str, Flag], leave_out, fp8: str) -> tuple[str, ...] | None:
    """The fp8 dtypes of -t VALUE (fp8, bf8, f8E4M3FN.., or A_B of them), or None (reported)."""
    parts = value.split("_", 1) if "_" in value else [value, value]
    for part in parts:
        if part not in ARCH_F8 and part not in EXPLICIT_F8:
            known = part in UNSUPPORTED_DTYPES or part in WIDE_DTYPES or part == "i8" or part in EXPLICIT_F4
            leave_out(UNSUPPORTED_DTYPES.get(part) or (f"mixed types ({part} with another) are not supported"
                      if known else f"unknown data type (supported: {', '.join((*WIDE_DTYPES, 'i8', *ARCH_F8, *EXPLICIT_F8))})"))
            return None
    force = flags.get("force-f8-types")
    families = F8_FAMILIES[fp8]
    if force is not None and force.value != "arch":
        if force.value not in FORCE_F8:
            leave_out(f"{force.text}: rocmlir-gen knows arch, ocp, fnuz and nanoo")
            return None
        families = (FORCE_F8[force.value],)
    dtypes, missing = [], []
    for family in families:
        filter_fmt, input_fmt = (EXPLICIT_F8.get(p) or ARCH_F8[p][family] for p in parts)
        # e2egen's pair "A_B": the op's first input (gemm's A, a conv's x) takes A. rocMLIR's first type is
        # gemm's A but a conv's filter.
        first, second = (filter_fmt, input_fmt) if op != "conv2d" else (input_fmt, filter_fmt)
        dtype = first if first == second else f"{first}_{second}"
        (dtypes if dtype in DTYPES else missing).append(dtype)
    if not dtypes:
        leave_out(f"e2egen has no pair {missing[0]} (its pairs: {', '.join(FLOAT8_PAIRS)})")
        return None
    return tuple(dict.fromkeys(dtypes))


def _note_layout_flags_of_other_ops(op: str, flags: Mapping[str, Flag], notes: Notes) -> None:
    """Case flags this op's layout does not read: gemm's --transC (its output's storage order) is merged;
    -out_layout means nothing to conv_gemm (its conv output stays inside the kernel); others are unused."""
    for name in (*LAYOUT_FLAGS, *GEMM_GEMM_TRANSPOSE_FLAGS, *ATTENTION_TRANSPOSE_FLAGS):
        flag = flags.get(name)
        if flag is None or name in LAYOUT_FLAGS_OF[op] or (name not in LAYOUT_FLAGS and not _boolean(flag)):
            continue
        if name == "transC" and op in ("gemm", "scaled_gemm"):
            notes.add(flag.source.line, flag.source.what, f"{flag.text} dropped: {NO_EQUIVALENT['transC']}; "
                                                          "merged with --transC=false")
        elif name == "out_layout" and op == "conv_gemm":
            notes.add(flag.source.line, flag.source.what, f"{flag.text}: conv_gemm has no conv output tensor (its "
                                                          "conv result stays inside the kernel)", kind=IGNORED)
        else:
            notes.add(flag.source.line, flag.source.what, f"{flag.text}: not a flag of {op} (rocmlir-gen ignores it)",
                      kind=IGNORED)


def _resolve_conv_layout(flags: Mapping[str, Flag], notes: Notes, tensors: int = 3) -> str | None:
    """nchw or nhwc from -fil_layout -in_layout -out_layout (the first `tensors` of them), or None (reported)."""
    given = [flags.get(name) for name in LAYOUT_FLAGS[:tensors]]
    names = tuple((f.value or "") if f else default for f, default in zip(given, DEFAULT_CONV_LAYOUT))
    layouts = {key[:tensors]: layout for key, layout in CONV_LAYOUTS.items()}
    layout = layouts.get(tuple(n.lower().replace("g", "") for n in names))
    if layout == "nhwc" and tensors == 3 and "g" not in names[1].lower() and _groups(flags) > 1:
        return _grouped_nhwc(names, flags, given, notes)
    if layout is None and tensors == 3:  # any other orders: e2egen's layout string input-filter-output
        layout = _conv_layout_string(names, flags, given, notes)
        if layout is not None or any(f is not None and f.source is not None for f in given):
            return layout
    if layout is None:
        source = next(f.source for f in given if f)
        text = " ".join(f"-{n}={v}" for n, v in zip(LAYOUT_FLAGS, names))
        families = ", ".join(f"{layout}: {'/'.join(names[:tensors])}" for layout, names in CONV_LAYOUT_NAMES.items())
        notes.add(source.line, source.what, f"conv layout {text} has no equivalent (e2egen has {families}); left out")
    return layout


def _groups(flags: Mapping[str, Flag]) -> int:
    flag = flags.get("groupsize", flags.get("g"))
    return (_integer(flag.value) or 1) if flag is not None else 1


def _grouped_nhwc(names: tuple[str, ...], flags: Mapping[str, Flag], given, notes: Notes) -> str | None:
    """A grouped conv whose -in_layout is spelled nhwc, without g. rocmlir-gen adds the group dim itself, and
    where changed between versions: older ones (correctConvParameters) before c, nhwgc, which is e2egen's nhwc;
    today's (addGToLayout: "always add 'g' after 'n'") after n, nghwc. These catalogues need today's rocmlir-gen
    (their -last_valid_kv_index and -sliding_window_look_back flags exist only there), so g goes after n."""
    filter_order, input_order, output_order = (n.lower() for n in names)
    with_g = ("g" + filter_order if "g" not in filter_order else filter_order,
              *(order if "g" in order else order[0] + "g" + order[1:] for order in (input_order, output_order)))
    layout = _conv_layout_string(with_g, flags, given, notes)
    if layout is None:
        return None
    source = next(f.source for f in given if f)
    notes.add(source.line, source.what, f"-in_layout={input_order} of a grouped conv: today's rocmlir-gen puts g after "
                                        f"n (addGToLayout), older ones before c (nhwgc); imported as {layout}, as the "
                                        "rocmlir-gen these catalogues need", kind=RENAMED)
    return layout


def _conv_layout_string(names: tuple[str, ...], flags: Mapping[str, Flag], given, notes: Notes) -> str | None:
    """rocMLIR's (filter, input, output) orders as e2egen's "input-filter-output" (runner/ops/product_sum/conv_layouts.py;
    rocMLIR may spell the output's channels c), or None with the reason reported.

    rocMLIR's digits are its spatial dims in flag order: 0 h (y), 1 w (x), 2 d (z), the depth last
    (rocmlir-gen's correctConvParameters renames h w / y x to 0 1; a filter layout with three spatial dims makes
    a 3-d conv). A 3-d layout whose depth is 1 (no -in_d, -fil_d or depth padding) is that 2-d conv, the depth
    dropped: e2egen's 2-d digits 0 1 are h w too. One with a depth is a conv3d, in letters, since e2egen's 3-d
    digits count from d (d h w)."""
    filter_order, input_order, output_order = (n.lower() for n in names)
    if "k" not in output_order:
        output_order = output_order.replace("c", "k")
    source = next(f.source for f in given if f)
    orders = (input_order, filter_order, output_order)
    spatial_dims = 3 if "2" in filter_order else 2
    if spatial_dims == 3 and _depth_is_one(flags):
        orders, spatial_dims = tuple(order.replace("2", "") for order in orders), 2
    elif spatial_dims == 3:
        orders = tuple(order.translate(str.maketrans("012", "yxz" if role == "filter" else "hwd"))
                       for role, order in zip(("input", "filter", "output"), orders))
    layout = "-".join(orders)
    problem = OPS[f"conv{spatial_dims}d"].layout_problem(layout)
    if problem is None:
        return layout
    notes.add(source.line, source.what, f"conv layout {layout}: {problem}; left out")
    return None


def _depth_is_one(flags: Mapping[str, Flag]) -> bool:
    """Whether a 3-d rocMLIR conv has depth 1 everywhere: input and filter depth 1 (rocmlir-gen's default when
    absent, and what -p sets) and no depth padding, so that its output depth is 1 too."""
    if _boolean(flags.get(POPULATE_FLAG)):
        return True
    sizes = {name: _integer(flags[name].value) if name in flags else None for name in DEPTH_FLAGS}
    return (sizes["in_d"] or 1) <= 1 and (sizes["fil_d"] or 1) <= 1 and not any(
        sizes[name] for name in ("padding_d", "padding_d_l", "padding_d_r"))


def is_conv3d_layout(layout: str) -> bool:
    """Whether a conv layout string has three spatial dims (what the importer writes for a 3-d rocMLIR conv)."""
    return "-" in layout and len(layout.split("-")[1].replace("g", "")) == 5


def _conv3d_name(params: Mapping[str, object]) -> str:
    """`n2-c8-k8-4x6x6-f3x3x3-s1x2x2-p1_0x1x1`: as config_name's conv names, one more dim (d h w)."""
    def dims(values) -> str:
        return "x".join("_".join(map(str, v)) if isinstance(v, list) else str(v) for v in values)

    parts = [f"n{params['n']}", f"c{params['c']}", f"k{params['k']}", dims(params["dhw"]), "f" + dims(params["kernel"])]
    parts += [f"{letter}{dims(params[key])}" for key, letter in (("stride", "s"), ("pad", "p"), ("dilation", "d"))
              if key in params]
    if "groups" in params:
        parts.append(f"g{params['groups']}")
    return "-".join(parts)


def _resolve_conv_gemm_layout(flags: Mapping[str, Flag], notes: Notes) -> str | None:
    """The conv's layout family from -fil_layout -in_layout (rocmlir-gen's conv_gemm has no conv output
    tensor), then C's letter: "t" when --transC stores C (k, o) transposed."""
    conv = _resolve_conv_layout(flags, notes, tensors=2)
    letters = _transpose_letters(flags, ("transC",), notes)
    return None if conv is None or letters is None else f"{conv}-{letters}"


def _resolve_gemm_layout(flags: Mapping[str, Flag], notes: Notes) -> str | None:
    return _transpose_letters(flags, TRANSPOSE_FLAGS, notes)


def _resolve_scaled_gemm_layout(flags: Mapping[str, Flag], notes: Notes) -> str | None:
    """A's and B's letters as gemm's, then, unless they lie as by default, the scales' (scaled_gemm's four-letter
    layouts). rocmlir-gen's getGemmTypes stores scaleA (m, ⌈k/blk⌉), or (⌈k/blk⌉, m) with --transScaleA, and scaleB
    (n, ⌈k/blk⌉), or (⌈k/blk⌉, n) with --transScaleB; scaled_gemm's logical scales are scale_a (m, ⌈k/blk⌉) and
    scale_b (⌈k/blk⌉, n), so --transScaleA stores scale_a transposed ("t") and --transScaleB scale_b as it is
    ("n"): the default is "nt", K contiguous in both, which the two-letter layouts mean."""
    operands = _transpose_letters(flags, TRANSPOSE_FLAGS, notes)
    scales = _transpose_letters(flags, SCALE_TRANSPOSE_FLAGS, notes)
    if operands is None or scales is None:
        return None
    scales = scales[0] + {"n": "t", "t": "n"}[scales[1]]
    return operands if scales == "nt" else operands + scales


def _resolve_gemm_gemm_layout(flags: Mapping[str, Flag], notes: Notes) -> str | None:
    """A's, B's and C's letters (rocmlir-gen's getGemmElementwiseGemmTypes: A (m, k), B (k, n), C (n, gemmO),
    each stored transposed with its --trans flag); --transO, the output's storage order, is merged."""
    return _transpose_letters(flags, GEMM_GEMM_TRANSPOSE_FLAGS, notes)


def _transpose_letters(flags: Mapping[str, Flag], names: Iterable[str], notes: Notes) -> str | None:
    """One letter per flag: "t" when true, "n" when false or absent; None (reported) when malformed."""
    letters = ""
    for name in names:
        flag = flags.get(name)
        value = _boolean(flag)
        if value is None:
            notes.add(flag.source.line, flag.source.what, f"{flag.text}: expected true or false; left out")
            return None
        letters += "t" if value else "n"
    return letters


def _resolve_attention_layout(flags: Mapping[str, Flag], notes: Notes) -> str | None:
    """rocMLIR's tensors are (g * heads, seq, dim) with the batch outer: "bhsd". --transQ, --transV store
    Q, V as (dim, seq); K is stored (dim, seq) unless --transK (rocmlir-gen's getAttentionTypes)."""
    layout = "bhsd"
    for name, tensor in ATTENTION_TRANSPOSE_FLAGS.items():
        flag = flags.get(name)
        value = _boolean(flag)
        if value is None:
            notes.add(flag.source.line, flag.source.what, f"{flag.text}: expected true or false; left out")
            return None
        if value != (tensor == "k"):
            layout += f"-{tensor}t"
    return layout


_LAYOUT_RESOLVERS = {
    "conv2d": _resolve_conv_layout, "gemm": _resolve_gemm_layout, "attention": _resolve_attention_layout,
    "gemm_gemm": _resolve_gemm_gemm_layout, "conv_gemm": _resolve_conv_gemm_layout,
    "scaled_gemm": _resolve_scaled_gemm_layout,
}


def _boolean(flag: Flag | None) -> bool | None:
    if flag is None:
        return False
    return {"true": True, "1": True, None: True, "false": False, "0": False}.get(flag.value.lower() if flag.value else None)


SHAPE_TABLES = {"conv2d": CONV_SHAPE_FLAGS, "conv3d": {**CONV_SHAPE_FLAGS, **{f: f for f in DEPTH_FLAGS}},
                "conv_gemm": CONV_GEMM_SHAPE_FLAGS, "gemm": GEMM_SHAPE_FLAGS,
                "gemm_gemm": GEMM_GEMM_SHAPE_FLAGS, "scaled_gemm": GEMM_SHAPE_FLAGS}


def resolve_shape(op: str, flags: Iterable[Flag], notes: Notes) -> tuple[tuple[str, object], ...] | None:
    """The config's shape parameters, or None (reported) when they are incomplete or not expressible."""
    flags = _populate_defaults(op, tuple(flags), notes)
    if flags is None:
        return None
    if op == "attention":
        return _attention_params(flags, notes)
    table = SHAPE_TABLES[op]
    values: dict[str, int] = {}
    first = None
    for flag in flags:
        if flag.name not in table:
            continue
        first = first or flag.source
        number = _integer(flag.value)
        if number is None:
            notes.add(flag.source.line, flag.source.what, f"{flag.text}: expected a non-negative integer; config skipped")
            return None
        values[table[flag.name]] = number
    return _PARAMS_OF[op](values, first, notes)


def _populate_defaults(op: str, flags: tuple[Flag, ...], notes: Notes) -> tuple[Flag, ...] | None:
    """The flags with rocmlir-gen's -p applied: its populateDefaults() gives the op's default problem
    (DEFAULT_PROBLEMS), replacing any size the command line gave; -p=false changes nothing."""
    populate = next((f for f in reversed(flags) if f.name == POPULATE_FLAG), None)
    rest = tuple(f for f in flags if f.name != POPULATE_FLAG)
    if populate is None:
        return rest
    value = _boolean(populate)
    if value is None:
        notes.add(populate.source.line, populate.source.what, f"{populate.text}: expected true or false; config skipped")
        return None
    if not value:
        return rest
    defaults = DEFAULT_PROBLEMS[op]
    conv = op in ("conv2d", "conv_gemm")

    def canonical(name: str) -> str:
        name = CONV_SHAPE_FLAGS.get(name, name) if conv else ("groupsize" if name == "g" else name)
        return {"padding_h": "padding_h_l", "padding_w": "padding_w_l"}.get(name, name) if conv else name

    replaced = [f for f in rest if canonical(f.name) in defaults]
    if replaced:
        notes.add(populate.source.line, populate.source.what,
                  f"{populate.text} (populate default values): rocmlir-gen replaces {' '.join(f.text for f in replaced)} "
                  f"by its default {op} problem", kind=IGNORED)
    given = tuple(Flag(name, str(number), f"-{name}={number}", populate.source) for name, number in defaults.items())
    return tuple(f for f in rest if f not in replaced) + given


def _integer(text: str | None) -> int | None:
    return int(text) if text is not None and re.fullmatch(r"[0-9]+", text) else None


def _conv_params(v: dict[str, int], source: Source | None, notes: Notes, dims: str = "hw"):
    """conv2d's (dims "hw") or conv3d's (dims "dhw") parameters from rocmlir-gen's flags. rocMLIR's 3-d
    spatial dims are h w d (digits 0 1 2), e2egen's d h w; an absent depth is 1, as rocmlir-gen makes it."""
    line, what = (source.line, source.what) if source else (None, "config")
    required = ("batchsize", "in_channels", "out_channels", "in_h", "in_w", "fil_h", "fil_w")
    missing = [f"-{name}" for name in required if name not in v]
    if missing:
        notes.add(line, what, f"incomplete conv{len(dims)}d shape: no {', '.join(missing)}; config skipped")
        return None
    pairs = []
    for dim in dims:  # rocmlir-gen's correctConvParameters(): -padding_h sets _l and _r when both are 0
        low, high, both = (v.get(f"padding_{dim}{side}", 0) for side in ("_l", "_r", ""))
        if both > 0 and low == high == 0:
            low = high = both
        elif both > 0 and (low, high) != (both, both):
            notes.add(line, what, f"-padding_{dim}={both} with -padding_{dim}_l={low} -padding_{dim}_r={high}: "
                                  f"rocmlir-gen complains and uses the _l/_r values", kind=IGNORED)
        pairs.append([low, high])
    pads = [low for low, _ in pairs] if all(low == high for low, high in pairs) else pairs

    def size(prefix: str, dim: str) -> int:
        return max(v.get(f"{prefix}_d", 1), 1) if dim == "d" else v[f"{prefix}_{dim}"]

    params: dict[str, object] = {
        "n": v["batchsize"], "c": v["in_channels"], "k": v["out_channels"],
        dims: [size("in", dim) for dim in dims], "kernel": [size("fil", dim) for dim in dims],
    }
    ones = [1] * len(dims)
    optional = {
        "stride": ([v.get(f"conv_stride_{dim}", 1) for dim in dims], ones),
        "pad": (pads, [0] * len(dims)),
        "dilation": ([v.get(f"dilation_{dim}", 1) for dim in dims], ones),
        "groups": (v.get("groupsize", 1), 1),
    }
    params.update({key: value for key, (value, default) in optional.items() if value != default})
    if not _output_size_matches(v, params, dims, line, what, notes):
        return None
    return tuple(params.items())


def _conv3d_params(v: dict[str, int], source: Source | None, notes: Notes):
    return _conv_params(v, source, notes, "dhw")


def _output_size_matches(v: dict[str, int], params: dict, dims: str, line, what, notes: Notes) -> bool:
    """rocmlir-gen accepts -out_h/-out_w (and -out_d); they must agree with the rest, since e2egen derives them."""
    ones = [1] * len(dims)
    stride, pad, dilation = (params.get(k, d) for k, d in (("stride", ones), ("pad", [0] * len(dims)), ("dilation", ones)))
    pairs = [p if isinstance(p, list) else [p, p] for p in pad]
    for i, dim in enumerate(dims):
        if f"out_{dim}" not in v:
            continue
        size = (params[dims][i] + sum(pairs[i]) - dilation[i] * (params["kernel"][i] - 1) - 1) // stride[i] + 1
        if v[f"out_{dim}"] != size:
            notes.add(line, what, f"-out_{dim}={v[f'out_{dim}']} disagrees with the other sizes (they give {size}); config skipped")
            return False
    return True


def _conv_gemm_params(v: dict[str, int], source: Source | None, notes: Notes):
    """conv2d's parameters (rocmlir-gen's conv flags) plus o = -gemmO: C is (k, gemmO), the output
    (n * ho * wo, gemmO) (getConvElementwiseGemmTypes); one group only."""
    line, what = (source.line, source.what) if source else (None, "config")
    if "gemmO" not in v:
        notes.add(line, what, "incomplete conv_gemm shape: no -gemmO; config skipped")
        return None
    if v.get("groupsize", 1) != 1:
        notes.add(line, what, f"-groupsize={v['groupsize']}: rocmlir-gen's conv_gemm has one group (C is (1, k, gemmO), "
                              "its reference no grouped conv); config skipped")
        return None
    conv = _conv_params(v, source, notes)
    return None if conv is None else conv + (("o", v["gemmO"]),)


def _gemm_params(v: dict[str, int], source: Source | None, notes: Notes, op: str = "gemm", extra: tuple = ()):
    line, what = (source.line, source.what) if source else (None, "config")
    names = {"m": "m", "n": "n", "k": "k", **{key: "gemmO" for key in extra}}
    missing = [f"-{flag}" for key, flag in names.items() if key not in v]
    if missing:
        notes.add(line, what, f"incomplete {op} shape: no {', '.join(missing)}; config skipped")
        return None
    batch = v.get("batch", 1)  # g = 1 is a plain product, as rocmlir-gen's (1, m, k) tensors are
    return ((("batch", batch),) if batch != 1 else ()) + tuple((key, v[key]) for key in names)


def _gemm_gemm_params(v: dict[str, int], source: Source | None, notes: Notes):
    """m, n, k, o = -m -n -k -gemmO: A (m, k), B (k, n), C (n, gemmO), out (m, gemmO) (getGemmElementwiseGemmTypes)."""
    return _gemm_params(v, source, notes, op="gemm_gemm", extra=("o",))


_PARAMS_OF = {"conv2d": _conv_params, "conv3d": _conv3d_params, "conv_gemm": _conv_gemm_params, "gemm": _gemm_params,
              "gemm_gemm": _gemm_gemm_params, "scaled_gemm": _gemm_params}


def _attention_params(flags: Iterable[Flag], notes: Notes):
    """Attention's parameters with rocmlir-gen's meaning (see the module docstring), or None (reported)."""
    given: dict[str, Flag] = {}
    for flag in flags:
        if flag.name in ATTENTION_FLAGS:
            given[flag.name] = flag
    first = next(iter(given.values()), None)
    line, what = (first.source.line, first.source.what) if first else (None, "config")

    def skip(flag: Flag | None, message: str) -> None:
        where = flag.source if flag else Source(line, what)
        notes.add(where.line, where.what, f"{message}; config skipped")

    legacy = [given[name] for name in ATTENTION_LEGACY_FLAGS if name in given]
    if legacy:
        skip(legacy[0], f"{' '.join(f.text for f in legacy)}: rocmlir-gen's first attention interface (Q, K, V all "
                        "seq_len x num_heads, and a seq_len x seq_len fourth input), which today's rocmlir-gen no "
                        "longer has: it rejects these flags, so rocMLIR cannot run this case either")
        return None
    sizes: dict[str, int] = {}
    for name, key in ATTENTION_SIZE_FLAGS.items():
        flag = given.get(name)
        if flag is not None:
            number = _integer(flag.value)
            if not number:
                skip(flag, f"{flag.text}: expected a positive integer")
                return None
            sizes[key] = number
    missing = [f"-{name}" for name in ("seq_len_q", "seq_len_k", "head_dim_qk", "head_dim_v")
               if ATTENTION_SIZE_FLAGS[name] not in sizes]
    if missing:
        skip(None, f"incomplete attention shape: no {', '.join(missing)}")
        return None
    batch, heads_q, heads_kv = sizes.get("batch", 1), sizes.get("heads_q", 1), sizes.get("heads_kv", 1)
    if heads_q % heads_kv:
        skip(given.get("num_heads_kv"), f"-num_heads_q {heads_q} is no multiple of -num_heads_kv {heads_kv}")
        return None
    switches: dict[str, bool] = {}
    for name, key in ATTENTION_SWITCH_FLAGS.items():
        value = _boolean(given.get(name))
        if value is None:
            skip(given[name], f"{given[name].text}: expected true or false")
            return None
        switches[key] = value
    windows = [given[name] for name in ATTENTION_WINDOW_FLAGS if name in given]
    if len(windows) > 1:
        skip(windows[1], "-sliding_window_size and -sliding_window_look_back are one flag under two names; both given")
        return None
    look_back = None
    if windows:
        value = _integer(windows[0].value) if not (windows[0].value or "").startswith("-") else 0
        if value is None:
            skip(windows[0], f"{windows[0].text}: expected an integer")
            return None
        look_back = value or None  # rocmlir-gen's window is on only when > 0 (its tuning key omits it otherwise)
    per_batch: dict[str, tuple[int, ...]] = {}
    for name in ATTENTION_LIST_FLAGS:
        flag = given.get(name)
        if flag is None:
            continue
        values = tuple(_integer(v) for v in (flag.value or "").split(","))
        if any(v is None for v in values):
            skip(flag, f"{flag.text}: expected non-negative integers separated by commas")
            return None
        if len(values) != batch:
            skip(flag, f"{flag.text}: {len(values)} values for -g {batch} (rocmlir-gen takes one per batch)")
            return None
        per_batch[name] = values
    if "current_seq_len" in per_batch and "last_valid_kv_index" in per_batch:
        skip(given["last_valid_kv_index"], "-current_seq_len and -last_valid_kv_index are one flag under two names; "
                                           "both given")
        return None
    last_valid = per_batch.get("current_seq_len", per_batch.get("last_valid_kv_index"))
    if last_valid is not None and max(last_valid) >= sizes["seq_k"]:
        flag = given.get("current_seq_len", given.get("last_valid_kv_index"))
        skip(flag, f"{flag.text}: the last valid key index must be below -seq_len_k {sizes['seq_k']}")
        return None

    params: dict[str, object] = {}
    if batch != 1:
        params["batch"] = batch
    if heads_q != 1:
        params["heads_q"] = heads_q
    if heads_kv != heads_q:
        params["heads_kv"] = heads_kv
    params.update(seq_q=sizes["seq_q"], seq_k=sizes["seq_k"], head_dim_qk=sizes["head_dim_qk"])
    if sizes["head_dim_v"] != sizes["head_dim_qk"]:
        params["head_dim_v"] = sizes["head_dim_v"]
    params["scale"] = 1.0  # rocMLIR scales the scores only by the --with-attn-scale tensor
    if look_back is not None:  # keys before max(0, last valid key - W) masked, for every query row
        params["look_back"] = look_back
    for key in ("score_scale", "score_bias"):
        if switches[key]:
            params[key] = True
    if switches["causal"] or "prefix_offset" in per_batch:  # a prefix offset implies causal in rocmlir-gen
        params.update(causal=True, align="top-left")
    if "prefix_offset" in per_batch:
        params["prefix_offset"] = _one_or_list(per_batch["prefix_offset"])
    if last_valid is not None:
        params["kv_lengths"] = _one_or_list(tuple(p + 1 for p in last_valid))  # an inclusive index -> a length
    if switches["return_lse"]:
        params["return_lse"] = True
    return tuple(params.items())


def _one_or_list(values: tuple[int, ...]) -> int | list[int]:
    """A per-batch value: one int when every batch has the same."""
    return values[0] if len(set(values)) == 1 else list(values)


def _tolerances(flags: Iterable[Flag], notes: Notes) -> tuple[tuple[str, float], ...]:
    tolerances = {}
    for flag in flags:
        if flag.name not in TOLERANCE_FLAGS:
            continue
        try:
            value = float(flag.value or "")
        except ValueError:
            notes.add(flag.source.line, flag.source.what, f"{flag.text}: expected a number; dropped")
            continue
        tolerances[TOLERANCE_FLAGS[flag.name]] = value
    return tuple(tolerances.items())


def _note_other_flags(op: str, flags: Iterable[Flag], notes: Notes) -> tuple[str, ...]:
    """Report a config's flags that are neither shape, case axis nor tolerance; return those dropped."""
    shape = SHAPE_FLAGS[op]
    dropped = []
    for flag in flags:
        if flag.name in shape or flag.name in CASE_FLAGS or flag.name in TOLERANCE_FLAGS or flag.name in DATA_FLAGS:
            continue
        if flag.name in IGNORED_FLAGS:
            notes.add(flag.source.line, flag.source.what, f"{flag.text}: {IGNORED_FLAGS[flag.name]}", kind=IGNORED)
            continue
        if flag.name in ("transC", "transO") and not _boolean(flag):
            continue  # the default: nothing lost
        why = NO_EQUIVALENT.get(flag.name, "unknown rocmlir-gen flag")
        notes.add(flag.source.line, flag.source.what, f"{flag.text} dropped: {why}; the config is imported without it")
        dropped.append(flag.text)
    return tuple(dropped)


def _build_suite(rocmlir: RocCatalogue, suite: RocSuite, name: str, op: str, configs: list[ImportedConfig],
                 tolerances: tuple[tuple[str, float], ...], dtype_tolerances: Mapping[str, Mapping[str, float]],
                 notes: Notes) -> ImportedSuite:
    axes = _suite_axes(configs)
    named: dict[str, NamedConfig] = {}
    for config in configs:
        shape_name = config_name(op, dict(config.params))
        unique = _unique_name(shape_name, named)
        if unique != shape_name:
            first = named[shape_name].config.rocmlir_test
            differs = f" (it differs only in dropped flags: {' '.join(config.dropped)})" if config.dropped else ""
            notes.add(config.rocmlir_test.line, f"test {config.rocmlir_test.number} config",
                      f"same shape as test {first.number}{differs}; named {unique!r}", kind=RENAMED)
        named[unique] = NamedConfig(unique, config, tuple(cover_with_excludes(axes, config.kept)))
    return ImportedSuite(
        name=name, op=op, rocmlir_suite=suite, axes=axes, tolerances=tolerances,
        pr=rocmlir.directory.startswith("Pr"), configs=tuple(named.values()),
        dtype_tolerances={d: dict(t) for d, t in dtype_tolerances.items() if d in axes["dtypes"]},
    )


def _suite_axes(configs: list[ImportedConfig]) -> dict[str, tuple[str, ...]]:
    """Each axis: the values some config keeps, in the order rocMLIR's combinations first produce them."""
    axes = {}
    for i, axis in enumerate(AXIS_NAMES):
        kept = {key[i] for config in configs for key in config.kept}
        axes[axis] = tuple(dict.fromkeys(key[i] for config in configs for key in config.order if key[i] in kept))
    return axes


def _note_wrapper_flags(flags: Iterable[Flag], subject: str, notes: Notes) -> None:
    """Report the prefix's and suffix's flags that are neither case axis, shape nor tolerance."""
    for flag in flags:
        if (flag.name in CASE_FLAGS or flag.name in TOLERANCE_FLAGS or flag.name in DATA_FLAGS
                or flag.name in LOW_BIT_FLAGS or any(flag.name in s for s in SHAPE_FLAGS.values())):
            continue  # read elsewhere (low-bit flags leave their cases out, reported there)
        if flag.name in IGNORED_FLAGS:
            notes.add(flag.source.line, subject, f"{flag.text}: {IGNORED_FLAGS[flag.name]}", kind=IGNORED)
        else:
            notes.add(flag.source.line, subject, f"{flag.text} dropped: {NO_EQUIVALENT.get(flag.name, 'unknown rocmlir-gen flag')}")
    _tolerances(flags, notes)  # reports malformed thresholds once


def cover_with_excludes(axes: Mapping[str, tuple[str, ...]], kept: frozenset[CaseKey]) -> list[dict[str, list[str]]]:
    """Config excludes (each a conjunction of axes) that leave exactly `kept` of the suite's axis product.

    First the axis values this config never runs (one exclude per axis), then
    what is left as one conjunction when it is one (rocMLIR's excludes always
    are); otherwise one exclude per (direction, dtype), exact but longer.
    """
    excludes = []
    left = [key for key in itertools.product(*(axes[a] for a in AXIS_NAMES)) if CaseKey(*key) not in kept]
    for i, axis in enumerate(AXIS_NAMES):
        unused = [v for v in axes[axis] if all(k[i] != v for k in kept)]
        if unused:
            excludes.append({axis: unused})
            left = [k for k in left if k[i] not in unused]
    if not left:
        return excludes
    box = [[v for v in axes[a] if any(k[i] == v for k in left)] for i, a in enumerate(AXIS_NAMES)]
    if not any(CaseKey(*k) in kept for k in itertools.product(*box)):
        excludes.append({a: values for a, values in zip(AXIS_NAMES, box) if len(values) < len(axes[a])})
        return excludes
    by_pair: dict[tuple[str, str], list[str]] = {}
    for direction, dtype, layout in left:
        by_pair.setdefault((direction, dtype), []).append(layout)
    excludes.extend({"directions": [d], "dtypes": [t], "layouts": layouts} for (d, t), layouts in by_pair.items())
    return excludes


# ---------------------------------------------------------------- names


def suite_name(rocmlir: RocCatalogue, suite: RocSuite, op: str | None) -> str:
    directory = rocmlir.directory.strip("/").split("/")[-1] or Path(rocmlir.path).stem
    return _safe_name("-".join(p for p in (directory, suite.name, op) if p))


def _safe_name(text: str) -> str:
    """A name the catalogue accepts: [A-Za-z0-9][A-Za-z0-9_.+-]*."""
    name = re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).lstrip("_.+-")
    return name or "rocmlir"


# Parameters a case's flags set besides its shape, in config names: `m1-n1000-k2048-saf32-sbf32-ones`
CASE_PARAM_NAMES = {"block": "blk", "scale_a_dtype": "sa", "scale_b_dtype": "sb", "out_dtype": "out", "pattern": ""}


def config_name(op: str, params: Mapping[str, object]) -> str:
    """`n64-c128-k128-28x28-f3x3-p1`, `n2-c8-k8-6x6-f3x3-p1_0x0_2-o16`, `b3-m1024-n1024-k769`, `m64-n64-k64-o64`."""
    if op == "attention":
        return _attention_name(params)
    if op == "conv3d":
        return _conv3d_name(params)
    if op in ("gemm", "gemm_gemm", "scaled_gemm"):
        keys = ("batch", "m", "n", "k", "o")
        parts = [f"{'b' if key == 'batch' else key}{params[key]}" for key in keys if key in params]
        return "-".join(parts + [f"{short}{params[key]}" for key, short in CASE_PARAM_NAMES.items() if key in params])
    parts = [f"n{params['n']}", f"c{params['c']}", f"k{params['k']}", _pair(params["hw"]), "f" + _pair(params["kernel"])]
    for key, letter in (("stride", "s"), ("pad", "p"), ("dilation", "d")):
        if key in params:
            h, w = ("_".join(map(str, v)) if isinstance(v, list) else v for v in params[key])  # asymmetric: begin_end
            parts.append(f"{letter}{h}" if h == w else f"{letter}{h}x{w}")
    if "groups" in params:
        parts.append(f"g{params['groups']}")
    if "o" in params:
        parts.append(f"o{params['o']}")
    return "-".join(parts)


def _attention_name(params: Mapping[str, object]) -> str:
    """`b3-hq4-hkv2-sq1-sk384-d64-scale-bias-causal-pre18x5x16-kv18x2x33-lb64-lse`: every parameter rocMLIR set."""
    parts = [f"{letters}{params[key]}" for key, letters in (("batch", "b"), ("heads_q", "hq"), ("heads_kv", "hkv"))
             if key in params]
    parts += [f"sq{params['seq_q']}", f"sk{params['seq_k']}", f"d{params['head_dim_qk']}"]
    if "head_dim_v" in params:
        parts.append(f"dv{params['head_dim_v']}")
    parts += [word for key, word in (("score_scale", "scale"), ("score_bias", "bias"), ("causal", "causal"))
              if params.get(key)]
    for key, letters in (("prefix_offset", "pre"), ("kv_lengths", "kv")):
        if key in params:
            value = params[key]
            parts.append(letters + "x".join(map(str, value if isinstance(value, list) else [value])))
    if "look_back" in params:
        parts.append(f"lb{params['look_back']}")
    if params.get("return_lse"):
        parts.append("lse")
    if params.get("quantized"):
        parts.append("quant")
    return "-".join(parts)


def _pair(values) -> str:
    return f"{values[0]}x{values[1]}"


def _unique_name(name: str, taken: Mapping[str, object]) -> str:
    if name not in taken:
        return name
    return next(f"{name}-{i}" for i in itertools.count(2) if f"{name}-{i}" not in taken)


# ---------------------------------------------------------------- emit


def emit(conversion: Conversion) -> str:
    """The e2egen catalogue as TOML text: deterministic (same input, same bytes)."""
    doc = tomlkit.document()
    for line in _header(conversion):
        doc.add(tomlkit.comment(line) if line else tomlkit.nl())
    doc.add(tomlkit.nl())
    doc["seed"] = 0
    doc["ranges"] = _ranges_table(conversion)
    doc["verifier"] = _inline({"kind": "rocmlir", "decides": conversion.decides})
    doc["verifier"].comment("rocMLIR's verdict, emulated (docs/how-to/import-rocmlir.md), beside e2egen's own")
    if "i8" in conversion.dtypes and _quantized_only(conversion):  # quantized attention's f16 output
        doc["tolerances"] = _tolerances_table()
    suites = tomlkit.aot()
    for suite in conversion.suites:
        suites.append(_suite_table(conversion, suite))
    doc["suite"] = suites
    return tomlkit.dumps(doc)


def _header(conversion: Conversion) -> list[str]:
    name = conversion.source_name
    lines = [f"e2egen catalogue converted from rocMLIR's e2e catalogue {name} by:", f"  e2egen import-rocmlir {name}"]
    titles = {
        NOT_IMPORTED: "Not imported ({}): rocMLIR items with no equivalent here:",
        IGNORED: "Ignored ({}): they do not change what is computed:",
        RENAMED: "Renamed ({}):",
    }
    for kind, title in titles.items():
        notes = conversion.notes_of(kind)
        if notes:
            lines += ["", title.format(len(notes))] + [f"  {n.render(name)}" for n in notes]
    return lines


def _ranges_table(conversion: Conversion):
    table = tomlkit.table()
    table.add(tomlkit.comment("rocmlir-gen's seeded inputs: -rand_type int draws the integers -5..4 (its "
                              "thresholds assume them: f32 results are often exact), -rand_type float reals in "
                              "[-rand_min, -rand_max]; without -rand its fixed pattern (\"pattern\": 0.5, -1, 0.75; "
                              "1, -1, 2 for integers; 1, -4, 0.5, 1.5 for fp4), with -rand none all ones, with "
                              "-rand_side one tensor random (`random`) and the others 1 (0.1 beside reals)"))
    for data in dict.fromkeys(d for suite in conversion.suites for d in suite.data_ranges):
        value = data.to_catalogue()
        table[data.name] = _inline(value) if isinstance(value, dict) else value
    return table


def _per_dtype(thresholds: dict, dtype_thresholds: Mapping[str, Mapping[str, float]] = {}) -> dict:
    """A [verifier] table of rocMLIR's thresholds: this level's, and those an axis value sets with its dtype
    (`f16 -RMS_threshold=0.0007`) in that dtype's sub-table. What rocMLIR's verifier does per output format
    (relDiff off for f16/bf16, integers exact) is the emulated verifier's own rule."""
    return {**thresholds, **{dtype: _inline(values) for dtype, values in dtype_thresholds.items() if values}}


def _tolerances_table():
    """e2egen's verdict on quantized attention's i8 cases (an f16 output), where every i8 suite is attention."""
    table = tomlkit.table(is_super_table=True)
    sub = tomlkit.table()
    sub.update(QUANTIZED_ATTENTION_TOLERANCES)
    table["i8"] = sub
    return table


def _quantized_only(conversion: Conversion) -> bool:
    """Whether every suite with i8 cases is an attention suite (rocMLIR's quantized attention)."""
    return all(suite.op == "attention" for suite in conversion.suites if "i8" in suite.axes["dtypes"])


def _suite_table(conversion: Conversion, suite: ImportedSuite):
    table = tomlkit.table()
    table.add(tomlkit.comment(f"rocMLIR suite {suite.rocmlir_suite.name!r} ({conversion.source_name}:{suite.rocmlir_suite.line})"))
    table["name"] = suite.name
    table["op"] = suite.op
    table["dtypes"] = list(suite.axes["dtypes"])
    table["directions"] = list(suite.axes["directions"])
    table["layouts"] = list(suite.axes["layouts"])
    ranges = suite.data_ranges
    table.add("ranges", tomlkit.item([d.name for d in ranges]).comment(
        "rocmlir-gen's seeded inputs: " + "; ".join(d.describe() for d in ranges)))
    if suite.pr:
        table.add("pr", tomlkit.item(True).comment(f"{conversion.rocmlir.directory}: a Pr* directory is one of rocMLIR's PR-CI catalogues"))
    if suite.op == "attention" and "i8" in suite.axes["dtypes"] and not _quantized_only(conversion):
        table.add("tolerances", _inline({"i8": _inline(QUANTIZED_ATTENTION_TOLERANCES)}).comment(
            "e2egen's verdict on quantized attention's f16 output"))
    if suite.tolerances or suite.dtype_tolerances:
        flags = ", ".join(f"-{flag}" for flag, key in TOLERANCE_FLAGS.items() if key in dict(suite.tolerances))
        sources = [f"the suffix's {flags}" if flags else "", "axis values' per-dtype thresholds" if suite.dtype_tolerances else ""]
        table.add("verifier", _inline(_per_dtype(dict(suite.tolerances), suite.dtype_tolerances)).comment(
            f"rocMLIR's thresholds, from {' and '.join(s for s in sources if s)}"))
    configs = tomlkit.aot()
    for named in suite.configs:
        configs.append(_config_table(conversion, named, ranges, suite.axes["dtypes"]))
    table["config"] = configs
    return table


def _config_table(conversion: Conversion, named: NamedConfig, suite_ranges: tuple[DataRange, ...],
                  suite_dtypes: tuple[str, ...] = ()):
    config, test = named.config, named.config.rocmlir_test
    table = tomlkit.table()
    table.add(tomlkit.comment(f"rocMLIR test {test.number} ({conversion.source_name}:{test.line}): {test.config}"))
    for comment in test.comments:
        table.add(tomlkit.comment(f"rocMLIR: {comment}"))
    if config.dropped:
        table.add(tomlkit.comment(f"not imported: {' '.join(config.dropped)} (see the notes at the top)"))
    table["name"] = named.name
    for key, value in config.params:
        table[key] = value
    if config.tolerances:
        table.add("verifier", _inline(_per_dtype(dict(config.tolerances))).comment(
            "rocMLIR's thresholds, from the config"))
    excludes = list(named.excludes)
    other_ranges = [d.name for d in suite_ranges if d != config.data]
    if other_ranges:  # this config's inputs come from one range only
        excludes.append({"ranges": other_ranges})
    if excludes:
        array = tomlkit.array()
        for exclude in excludes:
            array.append(_inline(exclude))
        table.add("exclude", array.comment("rocMLIR's excludes and the values this test never runs"))
    return table


def _inline(mapping: Mapping):
    table = tomlkit.inline_table()
    table.update(mapping)
    return table


def convert_file(path: str | Path, fp8: str = DEFAULT_F8, verdict: str = DEFAULT_VERDICT) -> Conversion:
    """Read, check and convert a rocMLIR e2e catalogue file (`fp8`, `verdict`: see `convert`)."""
    return convert(read_rocmlir_file(path), fp8, verdict)
