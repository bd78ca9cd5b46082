"""The fused comparison in numba: one vectorised pass over ref and out, on every core.

Speed comes from letting LLVM vectorise the inner loop (_reduce_chunk),
which needs a body without branches or index bookkeeping:

* an element is "compared" when two integer compares on the bit patterns say
  ref is within ±max and out is finite; every metric is computed for every
  lane and masked with selects;
* maxima of non-negative floats are kept as maxima of their bit patterns
  (same order, and integer max vectorises where float max does not);
* powers of two (the value of out, 1/ulp) are assembled from bits, and the
  ulp distance is a difference of ordered bit patterns;
* the histogram is kept as cumulative counts (rel >= edge), packed three to
  an int64 so that the accumulators fit in registers.

The fast pass does not know *where* each maximum is, nor why an element was
not compared. Afterwards:

* chunks that had a non-compared element get a scalar pass (_count_specials)
  that sorts them into nan_mismatch, inf_mismatch and overflow, with the
  first of each; in ordinary data that is no chunk at all;
* for the chunk holding each global maximum, _locate re-runs the same
  element function and finds the first element that produced the value.

Out is read as its raw bits (int8/16/32 view), so bf16 and fp8 need no
conversion pass. The rules are in compare.py's docstring; fused_torch.py
applies the same ones and tests check that the two agree.

Public: partials (the comparison's pass, its options in one
options.CompareOptions) and the bound's ulp passes that ulp_terms.py calls
(scaled_plus_ulps_into, add_ulps_into, partial_sums_plus_ulps_into: here,
beside _scaled_plus_ulp, for numba's cache). What every numba kernel of the
project shares (AVAILABLE, the bit casts, align_stack) is numba_kernels.py's;
whether a numba pass runs at all is backend.numba_path's one rule.
"""
from __future__ import annotations

import functools

import numpy as np

from e2egen.metrics import partials as P
from e2egen.metrics import threads
from e2egen.metrics.formats import Format
from e2egen.metrics.names import HISTOGRAM_EDGES
from e2egen.metrics.numba_kernels import AVAILABLE
from e2egen.metrics.options import BAD_BOUND_MESSAGE, CompareOptions

if AVAILABLE:  # numba is optional; compare() takes the torch path without it
    import numba

    from e2egen.metrics.numba_kernels import align_stack as _align_stack
    from e2egen.metrics.numba_kernels import as_float64 as _float
    from e2egen.metrics.numba_kernels import as_int64 as _bits

# The maxima _locate can find, by position in its targets.
ABS, REL, REL_OLD, EPS, BOUND, ULP = range(6)
BAD_BOUNDS = ULP  # the kernel's per-chunk column of bound elements that are negative or NaN
# Each maximum's float column (ABS..BOUND) and index column (ABS..ULP), by position.
_FLOAT_COLUMNS = (P.F_ABS, P.F_REL, P.F_REL_OLD, P.F_EPS, P.F_BOUND)
_INDEX_COLUMNS = (P.I_IDX_ABS, P.I_IDX_REL, P.I_IDX_REL_OLD, P.I_IDX_EPS, P.I_IDX_BOUND, P.I_IDX_ULP)

_E1, _E2, _E3, _E4, _E5, _E6, _E7 = HISTOGRAM_EDGES
_F64_MAGNITUDE = (1 << 63) - 1
_F64_MANTISSA = (1 << 52) - 1
_F64_INF_BITS = 0x7FF << 52


def _float_bits_of(value: float) -> int:
    return int(np.float64(value).view(np.int64))


if AVAILABLE:
    @numba.njit(inline="always", error_model="numpy")
    def _ulp_exponent(magnitude, emin, emax):
        """The exponent of ulp_T at a float64 of these bits without the sign: its binade's, the one below
        at a power of two, clamped to [emin, emax] (rounding.ulp_exponent). Integer arithmetic only."""
        biased = magnitude >> 52
        power_of_two = ((magnitude & _F64_MANTISSA) == 0) & (biased > 0)
        return min(max(max(biased, 1) - 1023 - np.int64(power_of_two), emin), emax)

    def _classify(x, raw_out, max_pattern, bits, has_inf, max_bits, limit_bits):
        """(nan_mismatch, inf_mismatch, overflow) of one element (rules: compare.py)."""
        rb = _bits(x)
        rmag = rb & _F64_MAGNITUDE
        rsign = rb >> 63  # 0 or -1
        ref_nan = rmag > _F64_INF_BITS
        beyond = (rmag > max_bits) and not ref_nan
        ob = np.int64(raw_out) & ((1 << bits) - 1)
        osign = ob >> (bits - 1)  # 0 or 1
        op = ob & ((1 << (bits - 1)) - 1)
        out_nonfinite = op > max_pattern
        out_nan = (op > max_pattern + 1) if has_inf else out_nonfinite
        out_inf = out_nonfinite and not out_nan
        same_sign = (rsign + osign) == 0  # -1 + 1 or 0 + 0
        out_is_max = op == max_pattern
        if has_inf:
            acceptable = same_sign and (out_inf or (out_is_max and rmag < limit_bits))
        else:
            acceptable = out_nan or (same_sign and out_is_max)
        wrong_overflow = beyond and not acceptable
        in_range = not ref_nan and not beyond
        nan_mismatch = (ref_nan and not out_nan) or (in_range and out_nan) or (wrong_overflow and out_nan)
        inf_mismatch = (in_range and out_inf) or (wrong_overflow and not out_nan)
        overflow = beyond and rmag != _F64_INF_BITS
        return nan_mismatch, inf_mismatch, overflow

    _classify = numba.njit(inline="always", error_model="numpy")(_classify)

    # AVX2 has no packed conversion between int64 and float64 (AVX-512DQ's vcvtqq2pd, vcvttpd2qq): LLVM
    # converts those lane by lane. Below 2^52 both go through 2^52's bits instead, which vectorise on AVX2
    # and give the same values: an integer n below 2^52 is the float with 2^52's exponent and n as its
    # significand, less 2^52; y in [0, 2^52) plus 2^52 is rounded by the addition to the nearest integer,
    # ties to even, which its significand then holds (as np.rint(y)). Bit casts, not float arithmetic, on the
    # way back, so `reassoc` cannot fold the addition away.
    _TWO_52 = 2.0 ** 52
    _TWO_52_BITS = 0x4330000000000000

    def _small_to_float(n):
        """float(n) for 0 <= n < 2^52."""
        return _float(n | _TWO_52_BITS) - _TWO_52

    _small_to_float = numba.njit(inline="always", error_model="numpy")(_small_to_float)

    def _rint_small(y):
        """int(rint(y)), ties to even, for 0 <= y < 2^52."""
        return _bits(y + _TWO_52) - _TWO_52_BITS

    _rint_small = numba.njit(inline="always", error_model="numpy")(_rint_small)

    def _measure(x, raw_out, bound_value, ftz, rel_floor_bits, m, bias, emin, emax, bits, max_pattern,
                 max_bits, min_normal_bits, mode):
        """What one element contributes to the maxima, sums and histogram (zeros unless compared)."""
        rb = _bits(x)
        rmag = rb & _F64_MAGNITUDE
        rsign = rb >> 63  # 0 or -1
        biased = rmag >> 52
        ob = np.int64(raw_out) & ((1 << bits) - 1)
        osign = ob >> (bits - 1)  # 0 or 1
        op = ob & ((1 << (bits - 1)) - 1)
        # ref finite within ±max (NaN's bits are above max's) and out finite
        compared = (rmag <= max_bits) & (op <= max_pattern)
        ftz_allowed = ftz & compared & (op == 0) & (rmag != 0) & (rmag < min_normal_bits)
        measured = compared & (not ftz_allowed)
        nonzero_ref = compared & (rmag != 0)

        # out's value: integer significand times 2**(exponent - bias - m)
        exponent_field = op >> m
        significand = (op & ((1 << m) - 1)) | (min(exponent_field, 1) << m)
        scale = _float((max(exponent_field, 1) - bias - m + 1023) << 52)
        o = _small_to_float(significand) * scale
        o = -o if osign else o
        xs = x if compared else 0.0
        os = o if compared else 0.0
        d = abs(xs - os) if measured else 0.0
        ax = abs(xs)
        rel = d / ax if nonzero_ref else 0.0

        exponent = max(biased, 1) - 1023
        # 1/ulp_T(x): at a power of two the gap below
        ulp_exp = _ulp_exponent(rmag, emin, emax)
        inverse_ulp = _float((m - ulp_exp + 1023) << 52)
        eps = d * inverse_ulp
        # round_T(x) as a pattern: |x| in units of T's quantum at x (an exact
        # scaling), rounded to the nearest even integer by the hardware; in the
        # normal range that count includes the implicit bit, and a carry moves
        # into the exponent field (rounding.rounded_pattern does it with shifts)
        quantum_exp = max(exponent, emin)
        in_quanta = ax * _float((m - quantum_exp + 1023) << 52)
        quanta = _rint_small(in_quanta)
        rounded = ((quantum_exp - emin) << m) + quanta
        # the deviation from the result rounded as the kernel rounds (partials.py), in ulps: in quanta
        # of T at x, nearest-even (0), toward zero (1), up (2) or down (3), back to a value exactly
        if mode == 0:
            kept = np.rint(in_quanta)
        elif mode == 1 or (mode == 2 and rsign) or (mode == 3 and not rsign):
            kept = np.floor(in_quanta)
        else:
            kept = np.ceil(in_quanta)
        expected = kept * _float((quantum_exp - m + 1023) << 52)
        expected = -expected if rsign else expected
        u1 = ((os - expected) * inverse_ulp) if measured else 0.0
        u2 = 0.0 if rmag == 0 else (-u1 if rsign else u1)
        # ordered patterns: negate by sign (two's complement without a branch)
        ulp_distance = abs(((rounded ^ rsign) - rsign) - ((op ^ -osign) + osign)) if measured else 0
        ratio = 0.0
        if bound_value >= 0.0:  # callers pass -1 when there is no bound
            ratio = d / abs(bound_value) if d != 0.0 else 0.0  # a -0 bound is 0: +inf where d > 0
        rel_old_ok = compared & (rmag > rel_floor_bits)
        return compared, ftz_allowed, nonzero_ref, rel_old_ok, d, rel, eps, ulp_distance, ratio, ax, abs(os), u1, u2

    _measure = numba.njit(inline="always", error_model="numpy")(_measure)

    @numba.njit(error_model="numpy", fastmath=False)
    def _scaled_plus_ulp(term, x, widening, scale, count, m, emin, emax):
        """(term · widening) · scale + count · ulp_T(x), NaN where x is NaN: one element of a bound that
        metrics.ulp_terms forms, here so that the comparison can form it inside its own pass. Compiled on
        its own without _reduce_chunk's reassoc flag, which would be free to form widening · scale first
        and change the last bit: fastmath=False is explicit because numba otherwise inherits the first
        caller's fastmath and reuses that compilation for every caller. LLVM still inlines it into the
        vectorised loop, flags kept per instruction. Two roundings, as the unfused torch ops."""
        magnitude = _bits(x) & _F64_MAGNITUDE
        gap = _float((_ulp_exponent(magnitude, emin, emax) - m + 1023) << 52)
        return (np.float64(term) * widening) * scale + count * (x if magnitude > _F64_INF_BITS else gap)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def scaled_plus_ulps_into(total, terms, widening, scale, ref, lo, hi, count, m, emin, emax):
        """total = (terms · widening) · scale + count · ulp_T(ref) over [lo, hi), for metrics.ulp_terms
        (terms may be total itself; f32 terms are widened to float64 first, exactly). Here, in the file of
        _scaled_plus_ulp, because numba's cache of a function notices changes to its own file only.
        Branch-free, so that LLVM vectorises it; slices from 0 (see _reduce_chunk)."""
        _align_stack()
        total_c, terms_c, ref_c = total[lo:hi], terms[lo:hi], ref[lo:hi]
        for i in range(hi - lo):
            total_c[i] = _scaled_plus_ulp(terms_c[i], ref_c[i], widening, scale, count, m, emin, emax)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def add_ulps_into(total, ref, lo, hi, count, m, emin, emax):
        """total += count · ulp_T(ref) over [lo, hi), in place: scaled_plus_ulps_into with terms = total,
        widening = scale = 1 (the same value: x·1 = x), on one array. Given total as both its output and
        its terms, scaled_plus_ulps_into runs LLVM's scalar fallback, 3.5× the time of this pass
        (benchmarks/bench_bound_passes.py): the vectorised loop is guarded by a check that the arrays it
        writes and reads do not overlap. Branch-free, slices from 0 (see _reduce_chunk)."""
        _align_stack()
        total_c, ref_c = total[lo:hi], ref[lo:hi]
        for i in range(hi - lo):
            total_c[i] = _scaled_plus_ulp(total_c[i], ref_c[i], 1.0, 1.0, count, m, emin, emax)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def partial_sums_plus_ulps_into(out, running, absolute, stored, unit, constant, terms, alpha, ref, lo, hi,
                                    count, m, emin, emax):
        """out = (unit·(running + absolute where stored) + constant) + (terms·alpha + count·ulp_T(ref)) over
        [lo, hi): a conv bound on a kernel's partial sums (runner.bound.SumOfBounds) in one pass. Here for
        the reason scaled_plus_ulps_into is; branch-free (`stored` is the same for every element)."""
        _align_stack()
        out_c, running_c, absolute_c = out[lo:hi], running[lo:hi], absolute[lo:hi]
        terms_c, ref_c = terms[lo:hi], ref[lo:hi]
        for i in range(hi - lo):
            accumulated = running_c[i] + (absolute_c[i] if stored else 0.0)
            out_c[i] = (accumulated * unit + constant) + _scaled_plus_ulp(terms_c[i], ref_c[i], alpha, 1.0, count,
                                                                         m, emin, emax)

    def _bound_at(bound_c, i, x, recipe):
        """Element i's bound: -1 without one (bound_c None), bound_c[i], or formed from its terms
        bound_c[i] by the recipe (widening, scale, count, m, emin, emax) of ulp_terms.ScaledPlusUlps."""
        if bound_c is None:
            return -1.0
        if recipe is None:
            return np.float64(bound_c[i])
        widening, scale, count, m, emin, emax = recipe
        return _scaled_plus_ulp(bound_c[i], x, widening, scale, count, m, emin, emax)

    _bound_at = numba.njit(inline="always", error_model="numpy")(_bound_at)

    def _reduce_chunk(ref, out_bits, bound, recipe, lo, hi, ftz, rel_floor_bits, m, bias, emin, emax, bits,
                      max_pattern, max_bits, min_normal_bits, mode):
        """The vectorised pass: maxima (as float bits), sums and packed counts of ref[lo:hi]."""
        _align_stack()
        best_abs = best_rel = best_eps = best_bound = best_ulp = max_ref = max_out = 0
        best_rel_old = -1
        sum_sq_diff = sum_sq_ref = sum_sq_bound = sum_s = sum_sq_s = sum_t = sum_sq_t = 0.0
        # Twelve counters in four int64 registers, 21 bits each (chunks are
        # shorter than 2**21): fewer live accumulators, no spills.
        counts_a = counts_b = counts_c = counts_d = 0
        # Slices indexed from 0: numba's indexing then needs no negative-index
        # fix-up, which would otherwise turn every load into a gather.
        ref_c = ref[lo:hi]
        out_c = out_bits[lo:hi]
        bound_c = None if bound is None else bound[lo:hi]
        for i in range(hi - lo):
            x = ref_c[i]
            b = _bound_at(bound_c, i, x, recipe)
            (compared, ftz_allowed, nonzero_ref, rel_old_ok, d, rel, eps, ulp_distance, ratio, ax, ao,
             u1, u2) = _measure(x, out_c[i], b, ftz, rel_floor_bits, m, bias, emin, emax, bits, max_pattern,
                                max_bits, min_normal_bits, mode)
            # the bound's own check (>= 0, not NaN), here rather than in a pass of its own
            counts_d += 0 if bound_c is None or b >= 0.0 else (1 << 42)
            # Lanes not compared hold zeros, which cannot raise a maximum; a
            # chunk without compared elements is told apart by its counts.
            best_abs = max(best_abs, _bits(d))
            best_rel = max(best_rel, _bits(rel))
            best_rel_old = max(best_rel_old, _bits(rel) if rel_old_ok else -1)
            best_eps = max(best_eps, _bits(eps))
            best_bound = max(best_bound, _bits(ratio))
            best_ulp = max(best_ulp, ulp_distance)
            max_ref = max(max_ref, _bits(ax))
            max_out = max(max_out, _bits(ao))
            sum_sq_diff += d * d
            sum_sq_ref += ax * ax
            sum_sq_bound += ratio * ratio
            sum_s += u1
            sum_sq_s += u1 * u1
            sum_t += u2
            sum_sq_t += u2 * u2
            # One masked add per count; rel is 0 where ref is 0 or not compared.
            counts_a += 0 if compared else 1
            counts_a += (1 << 21) if ftz_allowed else 0
            counts_a += (1 << 42) if nonzero_ref else 0
            counts_b += 1 if rel > 0.0 else 0
            counts_b += (1 << 21) if rel >= _E1 else 0
            counts_b += (1 << 42) if rel >= _E2 else 0
            counts_c += 1 if rel >= _E3 else 0
            counts_c += (1 << 21) if rel >= _E4 else 0
            counts_c += (1 << 42) if rel >= _E5 else 0
            counts_d += 1 if rel >= _E6 else 0
            counts_d += (1 << 21) if rel >= _E7 else 0
        return (best_abs, best_rel, best_rel_old, best_eps, best_bound, best_ulp, max_ref, max_out,
                sum_sq_diff, sum_sq_ref, counts_a, counts_b, counts_c, counts_d,
                sum_sq_bound, sum_s, sum_sq_s, sum_t, sum_sq_t)

    # reassoc lets the float sums vectorise; every other float op here is
    # a single correctly rounded operation, so it changes nothing else.
    _reduce_chunk = numba.njit(error_model="numpy", fastmath={"reassoc"}, cache=True, nogil=True)(_reduce_chunk)

    @numba.njit(cache=True, error_model="numpy", nogil=True)
    def _count_specials(ref, out_bits, lo, hi, max_pattern, bits, has_inf, max_bits, limit_bits):
        """Counts and first indices of nan_mismatch, inf_mismatch, overflow in ref[lo:hi] (a scalar pass,
        run only over chunks whose fast pass saw a non-compared element)."""
        n_nan = n_inf = n_over = 0
        first_nan = first_inf = first_over = -1
        for i in range(lo, hi):
            nan_mismatch, inf_mismatch, overflow = _classify(ref[i], out_bits[i], max_pattern, bits, has_inf,
                                                                max_bits, limit_bits)
            if nan_mismatch:
                n_nan += 1
                if first_nan < 0:
                    first_nan = i
            if inf_mismatch:
                n_inf += 1
                if first_inf < 0:
                    first_inf = i
            if overflow:
                n_over += 1
                if first_over < 0:
                    first_over = i
        return n_nan, first_nan, n_inf, first_inf, n_over, first_over

    def _field(packed, k):
        return (packed >> (21 * k)) & ((1 << 21) - 1)

    _field = numba.njit(inline="always")(_field)

    @numba.njit(cache=True, error_model="numpy", nogil=True)
    def _kernel(ref, out_bits, bound, recipe, chunk, first_chunk, end_chunk, ftz, rel_floor_bits, m, bias, emin,
                emax, bits, max_pattern, has_inf, max_bits, limit_bits, min_normal_bits, mode, maxima_bits, floats,
                ints):
        """Rows first_chunk .. end_chunk - 1 of the per-chunk tables (one thread's share)."""
        n = ref.shape[0]
        for c in range(first_chunk, end_chunk):
            lo = c * chunk
            hi = min(lo + chunk, n)
            r = _reduce_chunk(ref, out_bits, bound, recipe, lo, hi, ftz, rel_floor_bits, m, bias, emin, emax, bits,
                              max_pattern, max_bits, min_normal_bits, mode)
            floats[c, P.F_MAX_ABS_REF] = _float(r[6])
            floats[c, P.F_MAX_ABS_OUT] = _float(r[7])
            floats[c, P.F_SUM_SQ_DIFF] = r[8]
            floats[c, P.F_SUM_SQ_REF] = r[9]
            floats[c, P.F_SUM_SQ_BOUND] = r[14]
            floats[c, P.F_SUM_S] = r[15]
            floats[c, P.F_SUM_SQ_S] = r[16]
            floats[c, P.F_SUM_T] = r[17]
            floats[c, P.F_SUM_SQ_T] = r[18]
            not_compared = _field(r[10], 0)
            ints[c, P.I_FTZ] = _field(r[10], 1)
            maxima_bits[c, BAD_BOUNDS] = _field(r[13], 2)
            nonzero = _field(r[10], 2)
            compared = (hi - lo) - not_compared
            ints[c, P.I_COMPARED] = compared
            # float bits; -1: no element to take the maximum over
            maxima_bits[c, ABS] = r[0] if compared else -1
            maxima_bits[c, REL] = r[1] if nonzero else -1
            maxima_bits[c, REL_OLD] = r[2]
            maxima_bits[c, EPS] = r[3] if compared else -1
            maxima_bits[c, BOUND] = r[4] if compared else -1
            ints[c, P.I_ULP] = r[5] if compared else -1
            at_least = (_field(r[11], 0), _field(r[11], 1), _field(r[11], 2), _field(r[12], 0),
                        _field(r[12], 1), _field(r[12], 2), _field(r[13], 0), _field(r[13], 1))
            ints[c, P.I_HIST + 0] = nonzero - at_least[0]  # the buckets are differences of "rel >= edge"
            for k in range(7):
                ints[c, P.I_HIST + 1 + k] = at_least[k] - at_least[k + 1]
            ints[c, P.I_HIST + 8] = at_least[7]
            ints[c, P.I_HIST + P.HIST_REF_ZERO] = compared - nonzero
            specials = (0, -1, 0, -1, 0, -1)
            if not_compared > 0:
                specials = _count_specials(ref, out_bits, lo, hi, max_pattern, bits, has_inf, max_bits, limit_bits)
            ints[c, P.I_NAN] = specials[0]
            ints[c, P.I_FIRST_NAN] = specials[1]
            ints[c, P.I_INF] = specials[2]
            ints[c, P.I_FIRST_INF] = specials[3]
            ints[c, P.I_OVER] = specials[4]
            ints[c, P.I_FIRST_OVER] = specials[5]

    @numba.njit(cache=True, error_model="numpy", nogil=True)
    def _locate(ref, out_bits, bound, recipe, lo, hi, targets, ftz, rel_floor_bits, m, bias, emin, emax, bits,
                max_pattern, max_bits, min_normal_bits, mode):
        """First index in [lo, hi) reaching each maximum in targets (by ABS..ULP; -1: not wanted, and no
        element matches -1: every value here is >= 0). One branch-free pass keeping the least matching
        position per target, so that it vectorises like _reduce_chunk; a scalar loop that stops at the
        last find scanned half a chunk at several times the cost."""
        _align_stack()
        n = hi - lo
        first_abs = first_rel = first_rel_old = first_eps = first_bound = first_ulp = n
        ref_c, out_c = ref[lo:hi], out_bits[lo:hi]  # slices from 0 (see _reduce_chunk)
        bound_c = None if bound is None else bound[lo:hi]
        t_abs, t_rel, t_rel_old = targets[ABS], targets[REL], targets[REL_OLD]
        t_eps, t_bound, t_ulp = targets[EPS], targets[BOUND], targets[ULP]
        for i in range(n):
            x = ref_c[i]
            b = _bound_at(bound_c, i, x, recipe)
            (compared, ftz_allowed, nonzero_ref, rel_old_ok, d, rel, eps, ulp_distance, ratio, ax, ao,
             u1, u2) = _measure(x, out_c[i], b, ftz, rel_floor_bits, m, bias, emin, emax, bits, max_pattern,
                                max_bits, min_normal_bits, mode)
            first_abs = min(first_abs, i if compared and _bits(d) == t_abs else n)
            first_rel = min(first_rel, i if nonzero_ref and _bits(rel) == t_rel else n)
            first_rel_old = min(first_rel_old, i if rel_old_ok and _bits(rel) == t_rel_old else n)
            first_eps = min(first_eps, i if compared and _bits(eps) == t_eps else n)
            first_bound = min(first_bound, i if compared and _bits(ratio) == t_bound else n)
            first_ulp = min(first_ulp, i if compared and ulp_distance == t_ulp else n)
        found = np.full(targets.shape[0], -1, np.int64)
        for k, first in enumerate((first_abs, first_rel, first_rel_old, first_eps, first_bound, first_ulp)):
            if first < n and targets[k] >= 0:
                found[k] = lo + first
        return found

    @numba.njit(cache=True, error_model="numpy", nogil=True)
    def _maxima(maxima_bits, floats, ints, has_bound):
        """After the chunks' passes: the maxima's bits back to floats (-1 stays "no element"), and each
        maximum's value (bits for the floats; -1: no element) with the first chunk that reaches it (-1: none).
        None where a bound element was negative or NaN. Small, so that it compiles in a moment; _locate
        is called from Python (inlined here, LLVM would optimise its body a second time)."""
        n_chunks = maxima_bits.shape[0]
        values = np.full(ULP + 1, -1, np.int64)
        chunks = np.full(ULP + 1, -1, np.int64)
        for c in range(n_chunks):
            if has_bound and maxima_bits[c, BAD_BOUNDS] != 0:
                return None
            for k in range(BOUND + 1):
                floats[c, _FLOAT_COLUMNS[k]] = _float(maxima_bits[c, k]) if maxima_bits[c, k] >= 0 else -1.0
            if not has_bound:
                floats[c, P.F_BOUND] = -1.0
                floats[c, P.F_SUM_SQ_BOUND] = 0.0
            for k in range(ULP + 1):
                value = ints[c, P.I_ULP] if k == ULP else maxima_bits[c, k]
                if value > values[k] and (has_bound or k != BOUND):
                    values[k], chunks[k] = value, c
        return values, chunks


@functools.lru_cache(maxsize=256)
def _format_args(fmt: Format, ftz: bool, rel_floor: float, mode: int) -> dict:
    """The kernels' format arguments (the same few formats and settings come again and again)."""
    return dict(ftz=bool(ftz), rel_floor_bits=_float_bits_of(rel_floor), m=fmt.mantissa_bits, bias=fmt.bias,
                emin=fmt.emin, emax=fmt.emax, bits=fmt.bits, max_pattern=fmt.max_pattern, has_inf=fmt.has_inf,
                max_bits=_float_bits_of(fmt.max), limit_bits=_float_bits_of(fmt.overflow_limit),
                min_normal_bits=_float_bits_of(fmt.min_normal), mode=int(mode))


_SPECIALS_ONLY = ("has_inf", "limit_bits")  # read by _count_specials (inside _kernel) alone


@functools.lru_cache(maxsize=256)
def _pass_args(fmt: Format, ftz: bool, rel_floor: float, mode: int) -> dict:
    """The format arguments of one chunk's passes, _reduce_chunk's and _locate's."""
    return {k: v for k, v in _format_args(fmt, ftz, rel_floor, mode).items() if k not in _SPECIALS_ONLY}


# 21-bit packed counters (see _reduce_chunk) cap a chunk's length.
MAX_CHUNK = (1 << 21) - 1
# Below this many elements per thread a second thread costs more in the hand-off than it saves (measured:
# 64K f16 elements 0.56 ms on one thread, 0.72 ms on two; 256K 1.22 ms against 1.0 ms).
MIN_ELEMENTS_PER_THREAD = 1 << 17


def partials(ref: np.ndarray, out_bits: np.ndarray, bound: np.ndarray | None, options: CompareOptions,
             recipe: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-chunk rows (see partials.py) for flat contiguous ref (float64) and out's bits. bound: the
    bound's values (float64), or with a recipe (ulp_terms.ScaledPlusUlps.recipe) the terms it is formed
    from, element by element, inside the pass."""
    if not AVAILABLE:
        raise RuntimeError("numba is not installed; use the torch backend")
    fmt, ftz, rel_floor, mode = options.fmt, options.ftz, options.rel_floor, options.mode
    chunk = min(options.chunk, MAX_CHUNK)
    n_chunks = -(-ref.shape[0] // chunk)
    floats = np.full((n_chunks, P.N_FLOAT), -1.0)
    ints = np.full((n_chunks, P.N_INT), -1, np.int64)
    maxima_bits = np.empty((n_chunks, BAD_BOUNDS + 1), np.int64)
    args = _format_args(fmt, ftz, rel_floor, mode)
    # one contiguous share of the chunks per thread (see threads.py)
    shares = threads.thread_count(min(n_chunks, max(1, ref.shape[0] // MIN_ELEMENTS_PER_THREAD)))
    edges = [n_chunks * k // shares for k in range(shares + 1)]
    threads.run(lambda k: _kernel(ref, out_bits, bound, recipe, chunk, edges[k], edges[k + 1],
                                  maxima_bits=maxima_bits, floats=floats, ints=ints, **args),
                range(shares))
    located = _maxima(maxima_bits, floats, ints, bound is not None)
    if located is None:
        raise ValueError(BAD_BOUND_MESSAGE)
    values, chunks = (array.tolist() for array in located)
    locate_args = _pass_args(fmt, ftz, rel_floor, mode)
    for c in sorted(set(chunks) - {-1}):  # one pass per chunk, for every maximum it holds
        targets = np.array([v if held == c else -1 for v, held in zip(values, chunks)], np.int64)
        found = _locate(ref, out_bits, bound, recipe, c * chunk, min((c + 1) * chunk, ref.shape[0]), targets,
                        **locate_args).tolist()
        for k, held in enumerate(chunks):
            if held == c:
                if found[k] < 0:  # _reduce_chunk and _locate computed different values: a bug here
                    raise RuntimeError(f"metrics: could not locate a maximum in chunk {c}, the chunk that holds it")
                ints[c, _INDEX_COLUMNS[k]] = found[k]
    return floats, ints
