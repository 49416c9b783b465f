//! The documented instruction cost formulas, in engine cycles.
//!
//! Each function is one row of neuroncore.md §2.3 (NKI API "Estimated instruction cost",
//! NeuronCore-v2) or §2.4 (TensorE), with `N` the elements per partition of the main input
//! and `MIN_II` the engine's minimum initiation interval. Newer generations' speed-ups
//! (§1.5 "performance mode") divide the per-element term, never the `MIN_II` floor.
//! They are pure functions so the tests can state each formula once and check the simulator
//! against it.

/// `nc_matmul` (§2.3, §2.4): `max(min(64, N_stationary), N_moving)` for fp8/bf16/fp16,
/// times `fp32_factor` (4) when the operands are fp32.
pub fn matmul(mm_min: u64, n_stationary: u64, n_moving: u64, fp32: bool, fp32_factor: u64) -> u64 {
    let base = n_stationary.min(mm_min).max(n_moving);
    if fp32 {
        base * fp32_factor
    } else {
        base
    }
}

/// A transpose on TensorE — `nc_transpose(engine=tensor)` or `nc_matmul(is_transpose=True)`,
/// both a matmul of the data `[P, F]` (stationary) by an identity `[P, P]` (moving) — costs
/// that matmul (§2.3 nc_transpose's `max(P, min(64, F))` is [`matmul`] with
/// `N_stationary = F`, `N_moving = P`), fp32 included.
pub fn transpose_tensor(
    mm_min: u64,
    partitions: u64,
    free: u64,
    fp32: bool,
    fp32_factor: u64,
) -> u64 {
    matmul(mm_min, free, partitions, fp32, fp32_factor)
}

/// `nc_transpose` on VectorE (§2.3): `max(MIN_II, N)`.
pub fn transpose_vector(min_ii: u64, n: u64) -> u64 {
    min_ii.max(n)
}

/// `activation` (§2.3): `max(MIN_II, N)`, the same with or without scale/bias; with a
/// free-axis reduce (`activation_reduce`) add `MIN_II` for the accumulator read.
pub fn activation(min_ii: u64, n: u64, reduce: bool, speedup: u64) -> u64 {
    min_ii.max(n.div_ceil(speedup)) + if reduce { min_ii } else { 0 }
}

/// `tensor_tensor` (§2.3): `max(MIN_II, N)` when one input is in PSUM and one in SBUF, or
/// when all are bf16 in SBUF with add/multiply/subtract and contiguous; else `max(MIN_II, 2N)`.
pub fn tensor_tensor(min_ii: u64, n: u64, one_pass: bool, speedup: u64) -> u64 {
    let per_elem = if one_pass { n } else { 2 * n };
    min_ii.max(per_elem.div_ceil(speedup))
}

/// `tensor_scalar` (§2.3): `max(MIN_II, N)`; one or two ops cost the same.
pub fn tensor_scalar(min_ii: u64, n: u64, speedup: u64) -> u64 {
    min_ii.max(n.div_ceil(speedup))
}

/// `tensor_reduce` (§2.3): `N/2` if bf16 in and out with add or max, else `N`.
pub fn tensor_reduce(n: u64, bf16_add_or_max: bool) -> u64 {
    if bf16_add_or_max {
        n.div_ceil(2)
    } else {
        n
    }
}

/// `tensor_copy` (§2.3): `max(MIN_II, N)`.
pub fn tensor_copy(min_ii: u64, n: u64, speedup: u64) -> u64 {
    min_ii.max(n.div_ceil(speedup))
}

/// `memset` (§2.3): `max(MIN_II, N/2)` for zero in bf16/fp16, else `max(MIN_II, N)`.
pub fn memset(min_ii: u64, n: u64, zero_16bit: bool) -> u64 {
    if zero_16bit {
        min_ii.max(n.div_ceil(2))
    } else {
        min_ii.max(n)
    }
}

/// `iota` and `affine_select` on GpSimd (§2.3): `GPSIMD_START + N` (GPSIMD_START ≈ 150).
pub fn gpsimd_start_plus_n(start: u64, n: u64) -> u64 {
    start + n
}

/// `bn_stats` (§2.3): `max(MIN_II, N)`.
pub fn bn_stats(min_ii: u64, n: u64) -> u64 {
    min_ii.max(n)
}

/// `bn_aggr` (§2.3): `max(MIN_II, 13 * (N / 3))`.
pub fn bn_aggr(min_ii: u64, n: u64) -> u64 {
    min_ii.max(13 * (n / 3))
}

/// Strided access penalty (§1.8): an inner stride over 16 bytes halves the port bandwidth,
/// "~50% slower instruction". Applied to `N` before the formula, so the `MIN_II` floor stays.
pub fn strided_n(n: u64) -> u64 {
    n + n / 2
}

/// `tensor_scalar_reduce` (§2.3): `max(MIN_II, N) + MIN_II`, the `tensor_scalar` plus
/// reading the accumulator.
pub fn tensor_scalar_reduce(min_ii: u64, n: u64) -> u64 {
    min_ii.max(n) + min_ii
}

/// `scalar_tensor_tensor` (§2.3): `N` when data and operand1 are bf16, op0 is subtract, op1
/// multiply and `N` is even; otherwise `2N` (no `MIN_II` floor is documented).
pub fn scalar_tensor_tensor(n: u64, one_pass: bool) -> u64 {
    if one_pass {
        n
    } else {
        2 * n
    }
}

/// `tensor_tensor_scan` (§2.3): `max(MIN_II, 2N)`.
pub fn tensor_tensor_scan(min_ii: u64, n: u64) -> u64 {
    min_ii.max(2 * n)
}

/// `reciprocal` (§2.3): `max(MIN_II, per_elem · N)`; ScalarE's `per_elem` is 1, VectorE's
/// the chip's `vector.reciprocal_cycles_per_elem` (documented 8, measured about 3: see
/// `Chip`).
pub fn reciprocal(min_ii: u64, n: u64, per_elem: u64) -> u64 {
    min_ii.max(per_elem * n)
}

/// `nc_stream_shuffle` (§2.3; nki.isa.nc_stream_shuffle): `max(MIN_II, N)` on VectorE.
pub fn stream_shuffle(min_ii: u64, n: u64) -> u64 {
    min_ii.max(n)
}

/// `max8` (§2.3; nki.isa.max8, SDK 2.26): `N` VectorE cycles, N the source's elements per
/// partition (no `MIN_II` floor is documented; the instruction reads at least 8).
pub fn max8(n: u64) -> u64 {
    n
}

/// `nc_find_index8` (§2.3; nki.isa.nc_find_index8, SDK 2.26): `N`, N the data's elements
/// per partition.
pub fn find_index8(n: u64) -> u64 {
    n
}

/// `nc_match_replace8` (§2.3): `max(MIN_II, N)`. The reference prints `min(MIN_II, N)`,
/// which would make a 16,384-element instruction cost 64 cycles, less than `max8` on the
/// same data (`N`): read as the usual floor, `max` (neuroncore.md §2.3 says so).
pub fn match_replace8(min_ii: u64, n: u64) -> u64 {
    min_ii.max(n)
}

/// `tensor_copy_predicated` (§2.3): `max(MIN_II, N)` when the source and the predicate are
/// split between SBUF and PSUM, else (both in SBUF) `max(MIN_II, 2N)`.
pub fn tensor_copy_predicated(min_ii: u64, n: u64, split: bool) -> u64 {
    min_ii.max(if split { n } else { 2 * n })
}

/// `range_select` and `select_reduce` (§2.3): `max(MIN_II, N)`, with or without the max
/// reduction.
pub fn select(min_ii: u64, n: u64) -> u64 {
    min_ii.max(n)
}

/// `local_gather` on GpSimd (§2.3; nki.isa.local_gather): `GPSIMD_START + (N · e) / C`
/// with `C = ((28 + t·e) / (t·e)) / min(4 / dtype_size, e)`, `t` = 4, `e` the elements per
/// index (`num_elem_per_idx`) and `dtype_size` the source's bytes per element. `N` is the
/// number of valid indices per GpSimd core (`num_valid_indices`, or its default): the eight
/// cores gather in parallel, so the per-core count is the one the page's formula takes.
/// Substituting `C`, the term is `N · e · min(4 / dtype_size, e) · t·e / (28 + t·e)`, computed
/// exactly in integers and rounded **up** to a whole cycle (assumed: the page does not say
/// how a fraction of a cycle is counted). `4 / dtype_size` is a whole number for every
/// dtype (1, 2 or 4 bytes).
pub fn local_gather(start: u64, num_idx: u64, elems_per_idx: u64, dtype_size: u64) -> u64 {
    const T: u64 = 4;
    let e = elems_per_idx;
    let m = (4 / dtype_size).min(e);
    start + (num_idx * e * m * T * e).div_ceil(28 + T * e)
}
