//! What the functional model computes, against results worked out by hand or by a naive
//! loop written here (neuroncore.md §2.1–2.4 semantics).

use neuron_sim::{Act, ActArgs, Affine, Alu, Chip, Cmp, Dtype, Engine, ExecMode, Hbm, Nc, Scalar};

fn nc() -> Nc {
    Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL)
}

/// Deterministic small values with a fractional part that survives fp32.
fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            (((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 20) % 17) as f32 / 4.0
                - 2.0
        })
        .collect()
}

fn out(nc: &Nc, t: Hbm) -> Vec<f32> {
    nc.read_hbm(t).unwrap().to_vec()
}

#[test]
fn matmul_is_stationary_transposed_times_moving_accumulated_over_k_tiles() {
    // C[M,N] = A[M,K] @ B[K,N] with K = 256 split into two K tiles of 128 accumulating in PSUM.
    let (m, k, n) = (64usize, 256usize, 96usize);
    let at = data(k * m, 1); // A^T, [K, M]
    let b = data(k * n, 2); // [K, N]
    let mut nc = nc();
    let at_h = nc.hbm_input("aT", Dtype::F32, &[k as u64, m as u64], &at).unwrap();
    let b_h = nc.hbm_input("b", Dtype::F32, &[k as u64, n as u64], &b).unwrap();
    let c_h = nc.hbm("c", Dtype::F32, &[m as u64, n as u64]).unwrap();
    let sb = nc.sbuf_pool("sb", 2);
    let ps = nc.psum_pool("ps", 1);
    let acc = nc.tile(ps, Dtype::F32, &[m as u64, n as u64]).unwrap();
    for kt in 0..2u64 {
        let a_t = nc.tile(sb, Dtype::F32, &[128, m as u64]).unwrap();
        let b_t = nc.tile(sb, Dtype::F32, &[128, n as u64]).unwrap();
        nc.dma(a_t, at_h.rows(kt * 128..kt * 128 + 128)).unwrap();
        nc.dma(b_t, b_h.rows(kt * 128..kt * 128 + 128)).unwrap();
        nc.matmul(acc, a_t, b_t, kt > 0).unwrap();
    }
    let o = nc.tile(sb, Dtype::F32, &[m as u64, n as u64]).unwrap();
    nc.tensor_copy(o, acc).unwrap();
    nc.dma(c_h, o).unwrap();
    let c = out(&nc, c_h);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|kk| at[kk * m + i] as f64 * b[kk * n + j] as f64).sum();
            assert!(
                (c[i * n + j] as f64 - want).abs() < 1e-3,
                "c[{i},{j}] = {} want {want}",
                c[i * n + j]
            );
        }
    }
}

#[test]
fn matmul_start_overwrites_what_the_bank_held() {
    let mut nc = nc();
    let sb = nc.sbuf_pool("sb", 1);
    let ps = nc.psum_pool("ps", 1);
    let one = nc.tile(sb, Dtype::F32, &[1, 1]).unwrap();
    nc.memset(one, 2.0).unwrap();
    let acc = nc.tile(ps, Dtype::F32, &[1, 1]).unwrap();
    nc.matmul(acc, one, one, false).unwrap(); // 4
    nc.matmul(acc, one, one, true).unwrap(); // 8
    nc.matmul(acc, one, one, false).unwrap(); // restart: 4
    let o = nc.tile(sb, Dtype::F32, &[1, 1]).unwrap();
    nc.tensor_copy(o, acc).unwrap();
    let h = nc.hbm("o", Dtype::F32, &[1, 1]).unwrap();
    nc.dma(h, o).unwrap();
    assert_eq!(out(&nc, h), [4.0]);
}

#[test]
fn activation_applies_scale_bias_function_and_reduce() {
    // y = exp(x * s + b), reduce = Σ_j y; scale as an immediate and as a [P,1] column.
    let (p, f) = (4u64, 3u64);
    let x: Vec<f32> = vec![0.0, 0.5, -1.0, 1.0, 2.0, 0.25, -0.5, 0.0, 1.5, 0.1, 0.2, 0.3];
    let bias = [0.1f32, -0.2, 0.0, 0.3];
    let col = [1.0f32, 0.5, 2.0, -1.0];
    for column_scale in [false, true] {
        let mut nc = nc();
        let xh = nc.hbm_input("x", Dtype::F32, &[p, f], &x).unwrap();
        let bh = nc.hbm_input("b", Dtype::F32, &[p, 1], &bias).unwrap();
        let sh = nc.hbm_input("s", Dtype::F32, &[p, 1], &col).unwrap();
        let yh = nc.hbm("y", Dtype::F32, &[p, f]).unwrap();
        let rh = nc.hbm("r", Dtype::F32, &[p, 1]).unwrap();
        let sb = nc.sbuf_pool("sb", 1);
        let (xt, bt, st) = (
            nc.tile(sb, Dtype::F32, &[p, f]).unwrap(),
            nc.tile(sb, Dtype::F32, &[p, 1]).unwrap(),
            nc.tile(sb, Dtype::F32, &[p, 1]).unwrap(),
        );
        let (yt, rt) =
            (nc.tile(sb, Dtype::F32, &[p, f]).unwrap(), nc.tile(sb, Dtype::F32, &[p, 1]).unwrap());
        nc.dma(xt, xh).unwrap();
        nc.dma(bt, bh).unwrap();
        nc.dma(st, sh).unwrap();
        let scale: Scalar = if column_scale { st.into() } else { 3.0.into() };
        nc.activation(yt, xt, Act::Exp, ActArgs::default().scale(scale).bias(bt).reduce(rt))
            .unwrap();
        nc.dma(yh, yt).unwrap();
        nc.dma(rh, rt).unwrap();
        let (y, r) = (out(&nc, yh), out(&nc, rh));
        for i in 0..p as usize {
            let s = if column_scale { col[i] } else { 3.0 };
            let mut sum = 0.0f64;
            for j in 0..f as usize {
                let want = ((x[i * 3 + j] * s + bias[i]) as f64).exp();
                sum += want;
                assert!((y[i * 3 + j] as f64 - want).abs() < 1e-5 * want.max(1.0), "y[{i},{j}]");
            }
            assert!(
                (r[i] as f64 - sum).abs() < 1e-4 * sum.max(1.0),
                "reduce row {i}: {} vs {sum}",
                r[i]
            );
        }
    }
}

#[test]
fn tensor_reduce_adds_maxes_and_negates_along_the_last_free_dim() {
    let x = [1.0f32, -4.0, 2.5, 0.5, 3.0, 3.0, -1.0, -2.0];
    let mut nc = nc();
    let xh = nc.hbm_input("x", Dtype::F32, &[2, 4], &x).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let xt = nc.tile(sb, Dtype::F32, &[2, 4]).unwrap();
    nc.dma(xt, xh).unwrap();
    let mut results = Vec::new();
    for (op, neg) in [(Alu::Add, false), (Alu::Max, false), (Alu::Max, true), (Alu::Min, false)] {
        let r = nc.tile_named(sb, &format!("{op:?}{neg}"), Dtype::F32, &[2, 1]).unwrap();
        nc.tensor_reduce(r, xt, op, neg).unwrap();
        let h = nc.hbm(&format!("r{op:?}{neg}"), Dtype::F32, &[2, 1]).unwrap();
        nc.dma(h, r).unwrap();
        results.push(out(&nc, h));
    }
    assert_eq!(results[0], [0.0, 3.0]); // 1 - 4 + 2.5 + 0.5; 3 + 3 - 1 - 2
    assert_eq!(results[1], [2.5, 3.0]);
    assert_eq!(results[2], [-2.5, -3.0]);
    assert_eq!(results[3], [-4.0, -2.0]);
}

#[test]
fn both_transposes_swap_partitions_and_free() {
    let (p, f) = (8u64, 5u64);
    let x: Vec<f32> = (0..p * f).map(|i| i as f32).collect();
    for engine in [Engine::Tensor, Engine::Vector] {
        let mut nc = nc();
        let xh = nc.hbm_input("x", Dtype::Bf16, &[p, f], &x).unwrap();
        let yh = nc.hbm("y", Dtype::Bf16, &[f, p]).unwrap();
        let sb = nc.sbuf_pool("sb", 1);
        let ps = nc.psum_pool("ps", 1);
        let xt = nc.tile(sb, Dtype::Bf16, &[p, f]).unwrap();
        nc.dma(xt, xh).unwrap();
        let yt = if engine == Engine::Tensor {
            nc.tile(ps, Dtype::Bf16, &[f, p]).unwrap()
        } else {
            nc.tile(sb, Dtype::Bf16, &[f, p]).unwrap()
        };
        nc.on(engine).transpose(yt, xt).unwrap();
        let ot = nc.tile(sb, Dtype::Bf16, &[f, p]).unwrap();
        nc.tensor_copy(ot, yt).unwrap();
        nc.dma(yh, ot).unwrap();
        let y = out(&nc, yh);
        for i in 0..p {
            for j in 0..f {
                assert_eq!(
                    y[(j * p + i) as usize],
                    x[(i * f + j) as usize],
                    "{engine}: y[{j},{i}]"
                );
            }
        }
    }
}

#[test]
fn writes_round_to_bf16_nearest_even() {
    // 1 + 2^-8 is a tie between bf16 1.0 and 1 + 2^-7: RNE picks 1.0 (even mantissa);
    // 1 + 3·2^-8 ties between 1 + 2^-7 (odd) and 1 + 2^-6 (even): RNE picks 1 + 2^-6.
    let x = [1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), -(1.0 + 2f32.powi(-8))];
    let mut nc = nc();
    let xh = nc.hbm_input("x", Dtype::F32, &[1, 3], &x).unwrap();
    let yh = nc.hbm("y", Dtype::F32, &[1, 3]).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let xt = nc.tile(sb, Dtype::F32, &[1, 3]).unwrap();
    let bt = nc.tile(sb, Dtype::Bf16, &[1, 3]).unwrap();
    nc.dma(xt, xh).unwrap();
    nc.tensor_copy(bt, xt).unwrap(); // fp32 → bf16 on write
    nc.dma(yh, bt).unwrap();
    assert_eq!(out(&nc, yh), [1.0, 1.0 + 2f32.powi(-6), -1.0]);
    // And arithmetic happens in fp32 before the one rounding: (1 + 2^-8) * 2 in bf16 is 2.0.
    let mut nc = self::nc();
    let xh = nc.hbm_input("x", Dtype::F32, &[1, 1], &x[..1]).unwrap();
    let yh = nc.hbm("y", Dtype::Bf16, &[1, 1]).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let xt = nc.tile(sb, Dtype::F32, &[1, 1]).unwrap();
    let bt = nc.tile(sb, Dtype::Bf16, &[1, 1]).unwrap();
    nc.dma(xt, xh).unwrap();
    nc.tensor_scalar(bt, xt, (Alu::Multiply, 2.0.into()), Some((Alu::Add, 2f32.powi(-7).into())))
        .unwrap();
    nc.dma(yh, bt).unwrap();
    // fp32: 2 + 2^-7 + 2^-7 = 2 + 2^-6, exactly a bf16 value (step 2^-6 at 2).
    assert_eq!(out(&nc, yh), [2.0 + 2f32.powi(-6)]);
}

#[test]
fn causal_mask_via_affine_select_keeps_keys_up_to_the_query() {
    // Scores [q, k] for a query block starting at q0 = 4 and key block at k0 = 2:
    // keep where (q0 + p) - (k0 + j) >= 0, else -inf.
    let (q0, k0, p, f) = (4i64, 2i64, 4u64, 8u64);
    let mut nc = nc();
    let sb = nc.sbuf_pool("sb", 1);
    let s = nc.tile(sb, Dtype::F32, &[p, f]).unwrap();
    nc.memset(s, 1.0).unwrap();
    nc.affine_select(s, s, Affine::new2(q0 - k0, 1, -1), Cmp::Ge, f32::NEG_INFINITY).unwrap();
    let h = nc.hbm("s", Dtype::F32, &[p, f]).unwrap();
    nc.dma(h, s).unwrap();
    let v = out(&nc, h);
    for i in 0..p as i64 {
        for j in 0..f as i64 {
            let want = if q0 + i >= k0 + j { 1.0 } else { f32::NEG_INFINITY };
            assert_eq!(v[(i * f as i64 + j) as usize], want, "q={} k={}", q0 + i, k0 + j);
        }
    }
}

#[test]
fn iota_writes_the_affine_index() {
    let mut nc = nc();
    let sb = nc.sbuf_pool("sb", 1);
    let t = nc.tile(sb, Dtype::I32, &[3, 4]).unwrap();
    nc.iota(t, Affine::new2(10, 100, 2)).unwrap();
    let h = nc.hbm("i", Dtype::I32, &[3, 4]).unwrap();
    nc.dma(h, t).unwrap();
    let want: Vec<f32> =
        (0..3).flat_map(|p| (0..4).map(move |j| (10 + 100 * p + 2 * j) as f32)).collect();
    assert_eq!(out(&nc, h), want);
}

#[test]
fn dma_follows_strided_access_patterns_both_ways() {
    // x is [4, 6]; load its transpose (strided reads), columns 2..5 of it, and a broadcast
    // row; store back through a strided pattern.
    let x: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let mut nc = nc();
    let xh = nc.hbm_input("x", Dtype::F32, &[4, 6], &x).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let t = nc.tile(sb, Dtype::F32, &[6, 4]).unwrap();
    nc.dma(t, xh.view().t()).unwrap(); // t[j, i] = x[i, j]
    let c = nc.tile(sb, Dtype::F32, &[4, 3]).unwrap();
    nc.dma(c, xh.cols(2..5)).unwrap();
    let bcast = nc.tile(sb, Dtype::F32, &[3, 6]).unwrap();
    nc.dma(bcast, xh.view().index(0, 1).broadcast(3)).unwrap(); // row 1 on 3 partitions
    let split = nc.tile(sb, Dtype::F32, &[4, 2, 3]).unwrap();
    nc.dma(split, xh.view().split(1, 3)).unwrap();
    // Store t (= x^T) back transposed into y: y == x.
    let yh = nc.hbm("y", Dtype::F32, &[4, 6]).unwrap();
    nc.dma(yh.view().t(), t).unwrap();
    let (th, ch, bh, sh) = (
        nc.hbm("t", Dtype::F32, &[6, 4]).unwrap(),
        nc.hbm("c", Dtype::F32, &[4, 3]).unwrap(),
        nc.hbm("b", Dtype::F32, &[3, 6]).unwrap(),
        nc.hbm("s", Dtype::F32, &[4, 6]).unwrap(),
    );
    nc.dma(th, t).unwrap();
    nc.dma(ch, c).unwrap();
    nc.dma(bh, bcast).unwrap();
    nc.dma(sh.view().split(1, 3), split).unwrap();
    let tv = out(&nc, th);
    for i in 0..4 {
        for j in 0..6 {
            assert_eq!(tv[j * 4 + i], x[i * 6 + j]);
        }
    }
    assert_eq!(out(&nc, ch), [2., 3., 4., 8., 9., 10., 14., 15., 16., 20., 21., 22.]);
    assert_eq!(out(&nc, bh), [6., 7., 8., 9., 10., 11.].repeat(3));
    assert_eq!(out(&nc, yh), x);
    assert_eq!(out(&nc, sh), x);
}

#[test]
fn fresh_hbm_and_dma_casts() {
    let mut nc = nc();
    let y = nc.hbm("y", Dtype::F32, &[2, 2]).unwrap();
    assert!(out(&nc, y).iter().all(|v| v.is_nan()), "fresh memory is NaN");
    // A DMA casts through fp32: fp32 3.14159 into a bf16 tile is bf16(3.14159) = 3.140625.
    let x = nc.hbm_input("x", Dtype::F32, &[1, 1], &[std::f32::consts::PI]).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let t = nc.tile(sb, Dtype::Bf16, &[1, 1]).unwrap();
    nc.dma(t, x).unwrap();
    nc.dma(y.slice(&[0..1, 0..1]), t).unwrap();
    assert_eq!(out(&nc, y)[0], 3.140625);
}

#[test]
fn tensor_tensor_ops_and_bn_statistics() {
    let a = [1.0f32, 2.0, 3.0, 4.0];
    let b = [4.0f32, 3.0, 2.0, 1.0];
    let mut nc = nc();
    let ah = nc.hbm_input("a", Dtype::F32, &[1, 4], &a).unwrap();
    let bh = nc.hbm_input("b", Dtype::F32, &[1, 4], &b).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let (at, bt) =
        (nc.tile(sb, Dtype::F32, &[1, 4]).unwrap(), nc.tile(sb, Dtype::F32, &[1, 4]).unwrap());
    nc.dma(at, ah).unwrap();
    nc.dma(bt, bh).unwrap();
    let mut got = Vec::new();
    for op in [Alu::Subtract, Alu::Max, Alu::Divide, Alu::IsGt] {
        let d = nc.tile_named(sb, &format!("{op:?}"), Dtype::F32, &[1, 4]).unwrap();
        nc.tensor_tensor(d, at, bt, op).unwrap();
        let h = nc.hbm(&format!("{op:?}"), Dtype::F32, &[1, 4]).unwrap();
        nc.dma(h, d).unwrap();
        got.push(out(&nc, h));
    }
    assert_eq!(got[0], [-3.0, -1.0, 1.0, 3.0]);
    assert_eq!(got[1], [4.0, 3.0, 3.0, 4.0]);
    assert_eq!(got[2], [0.25, 2.0 / 3.0, 1.5, 4.0]);
    assert_eq!(got[3], [0.0, 0.0, 1.0, 1.0]);
    // bn_stats on [1,2,3,4]: even elements {1,3}: n=2, mean 2, var 1; odd {2,4}: 2, 3, 1.
    // bn_aggr: mean 2.5, population variance 1.25.
    let st = nc.tile(sb, Dtype::F32, &[1, 6]).unwrap();
    let ag = nc.tile(sb, Dtype::F32, &[1, 2]).unwrap();
    nc.bn_stats(st, at).unwrap();
    nc.bn_aggr(ag, st).unwrap();
    let (sh, gh) =
        (nc.hbm("st", Dtype::F32, &[1, 6]).unwrap(), nc.hbm("ag", Dtype::F32, &[1, 2]).unwrap());
    nc.dma(sh, st).unwrap();
    nc.dma(gh, ag).unwrap();
    assert_eq!(out(&nc, sh), [2.0, 2.0, 1.0, 2.0, 3.0, 1.0]);
    assert_eq!(out(&nc, gh), [2.5, 1.25]);
}

/// A `[p, f]` f32 input in SBUF, loaded from `vals`.
fn load(nc: &mut Nc, name: &str, p: u64, f: u64, vals: &[f32]) -> neuron_sim::Tile {
    let h = nc.hbm_input(name, Dtype::F32, &[p, f], vals).unwrap();
    let pool = nc.sbuf_pool(&format!("in_{name}"), 1);
    let t = nc.tile(pool, Dtype::F32, &[p, f]).unwrap();
    nc.dma(t, h).unwrap();
    t
}

/// The values of an SBUF tile, through HBM.
fn fetch(nc: &mut Nc, name: &str, t: neuron_sim::Tile, p: u64, f: u64) -> Vec<f32> {
    let h = nc.hbm(name, Dtype::F32, &[p, f]).unwrap();
    nc.dma(h, t).unwrap();
    out(nc, h)
}

#[test]
fn tensor_scalar_reduce_applies_the_op_then_reduces_each_partition() {
    // dst = x op0 s (s an immediate or a [P,1] column); reduce_res[p] = fold of dst's row.
    let (p, f) = (4u64, 6u64);
    let x = data((p * f) as usize, 7);
    let col = [1.5f32, -0.5, 2.0, 0.25];
    for (op0, rop, column) in [
        (Alu::Multiply, Alu::Add, true),
        (Alu::Subtract, Alu::Max, false),
        (Alu::Add, Alu::Min, true),
        (Alu::Multiply, Alu::Multiply, false),
    ] {
        let mut nc = nc();
        let xt = load(&mut nc, "x", p, f, &x);
        let ct = load(&mut nc, "c", p, 1, &col);
        let sb = nc.sbuf_pool("out", 1);
        let (yt, rt) =
            (nc.tile(sb, Dtype::F32, &[p, f]).unwrap(), nc.tile(sb, Dtype::F32, &[p, 1]).unwrap());
        let s: Scalar = if column { ct.into() } else { 0.75.into() };
        nc.tensor_scalar_reduce(yt, xt, (op0, s), rop, rt).unwrap();
        let (y, r) = (fetch(&mut nc, "y", yt, p, f), fetch(&mut nc, "r", rt, p, 1));
        for i in 0..p as usize {
            let s = if column { col[i] } else { 0.75 };
            let row: Vec<f32> = (0..f as usize)
                .map(|j| match op0 {
                    Alu::Multiply => x[i * 6 + j] * s,
                    Alu::Subtract => x[i * 6 + j] - s,
                    _ => x[i * 6 + j] + s,
                })
                .collect();
            let want = match rop {
                Alu::Add => row.iter().sum(),
                Alu::Max => row.iter().cloned().fold(f32::NEG_INFINITY, f32::max),
                Alu::Min => row.iter().cloned().fold(f32::INFINITY, f32::min),
                _ => row.iter().product::<f32>(),
            };
            assert_eq!(&y[i * 6..(i + 1) * 6], &row[..], "{op0:?} row {i}");
            assert_eq!(r[i], want, "{op0:?}/{rop:?} reduce of row {i}");
        }
    }
}

#[test]
fn scalar_tensor_tensor_is_data_op0_scalar_then_op1_in1() {
    let (p, f) = (4u64, 5u64);
    let (x, y) = (data((p * f) as usize, 1), data((p * f) as usize, 2));
    let col = [2.0f32, -1.0, 0.5, 3.0];
    for column in [false, true] {
        let mut nc = nc();
        let (xt, yt, ct) = (
            load(&mut nc, "x", p, f, &x),
            load(&mut nc, "y", p, f, &y),
            load(&mut nc, "c", p, 1, &col),
        );
        let sb = nc.sbuf_pool("out", 1);
        let dt = nc.tile(sb, Dtype::F32, &[p, f]).unwrap();
        let s: Scalar = if column { ct.into() } else { 0.5.into() };
        nc.scalar_tensor_tensor(dt, xt, (Alu::Subtract, s), Alu::Multiply, yt).unwrap();
        let got = fetch(&mut nc, "d", dt, p, f);
        for i in 0..(p * f) as usize {
            let s = if column { col[i / 5] } else { 0.5 };
            assert_eq!(got[i], (x[i] - s) * y[i], "element {i}");
        }
    }
}

#[test]
fn tensor_tensor_scan_runs_the_recurrence_along_each_partition() {
    // r[i] = (d0[i] op0 r[i-1]) op1 d1[i], r[-1] = initial: a linear recurrence with
    // multiply/add, a running max with max/max; initial an immediate and a [P,1] column.
    let (p, f) = (3u64, 7u64);
    let (a, b) = (data((p * f) as usize, 3), data((p * f) as usize, 4));
    let init = [0.5f32, -1.0, 2.0];
    for (op0, op1, column) in [
        (Alu::Multiply, Alu::Add, false),
        (Alu::Multiply, Alu::Add, true),
        (Alu::Max, Alu::Max, true),
    ] {
        let mut nc = nc();
        let (at, bt, it) = (
            load(&mut nc, "a", p, f, &a),
            load(&mut nc, "b", p, f, &b),
            load(&mut nc, "i", p, 1, &init),
        );
        let sb = nc.sbuf_pool("out", 1);
        let dt = nc.tile(sb, Dtype::F32, &[p, f]).unwrap();
        let s: Scalar = if column { it.into() } else { 1.25.into() };
        nc.tensor_tensor_scan(dt, at, bt, s, op0, op1).unwrap();
        let got = fetch(&mut nc, "d", dt, p, f);
        for (i, &init) in init.iter().enumerate() {
            let mut r = if column { init } else { 1.25 };
            for j in 0..f as usize {
                let k = i * 7 + j;
                r = if op0 == Alu::Multiply { a[k] * r + b[k] } else { a[k].max(r).max(b[k]) };
                assert_eq!(got[k], r, "{op0:?}/{op1:?} [{i},{j}]");
            }
        }
    }
}

#[test]
fn reciprocal_is_one_over_x_on_both_engines_rounded_on_write() {
    let (p, f) = (2u64, 4u64);
    let x = [2.0f32, -4.0, 0.3, 3.0, 7.0, -0.1, 1.0, 0.0];
    for engine in [Engine::Vector, Engine::Scalar] {
        let mut nc = nc();
        let xt = load(&mut nc, "x", p, f, &x);
        let sb = nc.sbuf_pool("out", 1);
        let (dt, bt) =
            (nc.tile(sb, Dtype::F32, &[p, f]).unwrap(), nc.tile(sb, Dtype::Bf16, &[p, f]).unwrap());
        nc.on(engine).reciprocal(dt, xt).unwrap();
        nc.on(engine).reciprocal(bt, xt).unwrap();
        let got = fetch(&mut nc, "d", dt, p, f);
        let h = nc.hbm("b", Dtype::Bf16, &[p, f]).unwrap();
        nc.dma(h, bt).unwrap();
        let got16 = out(&nc, h);
        for i in 0..x.len() {
            assert_eq!(got[i], 1.0 / x[i], "{engine} element {i}");
            assert_eq!(got16[i], Dtype::Bf16.round(1.0 / x[i]), "{engine} bf16 element {i}");
        }
    }
}

#[test]
fn matmul_transpose_mode_moves_data_through_an_identity_bit_exactly() {
    // nc_matmul(is_transpose=True): dst[F, P] = data[P, F]ᵀ in data's dtype, bit-exact (NaN
    // and Inf included on NeuronCore-v3+, neuroncore.md §1.4).
    let (p, f) = (48u64, 20u64);
    let mut x = data((p * f) as usize, 5);
    x[7] = f32::INFINITY;
    x[100] = -0.0;
    let eye: Vec<f32> =
        (0..p * p).map(|k| if k / p == k % p { 1.0 } else { 0.0 }).collect::<Vec<_>>();
    for dt in [Dtype::F32, Dtype::Bf16] {
        let mut nc = nc();
        let xh = nc.hbm_input("x", dt, &[p, f], &x).unwrap();
        let eh = nc.hbm_input("eye", dt, &[p, p], &eye).unwrap();
        let oh = nc.hbm("o", dt, &[f, p]).unwrap();
        let sb = nc.sbuf_pool("sb", 1);
        let ps = nc.psum_pool("ps", 1);
        let (xt, et) = (nc.tile(sb, dt, &[p, f]).unwrap(), nc.tile(sb, dt, &[p, p]).unwrap());
        nc.dma(xt, xh).unwrap();
        nc.dma(et, eh).unwrap();
        let tp = nc.tile(ps, dt, &[f, p]).unwrap();
        nc.matmul_transpose(tp, xt, et).unwrap();
        let o = nc.tile(sb, dt, &[f, p]).unwrap();
        nc.tensor_copy(o, tp).unwrap();
        nc.dma(oh, o).unwrap();
        let got = out(&nc, oh);
        for i in 0..p as usize {
            for j in 0..f as usize {
                let want = dt.round(x[i * f as usize + j]);
                let g = got[j * p as usize + i];
                assert_eq!(g.to_bits(), want.to_bits(), "{dt} dst[{j}][{i}] = {g}, want {want}");
            }
        }
    }
}

#[test]
fn matmul_transpose_mode_refuses_a_moving_tensor_that_is_not_an_identity() {
    let p = 4u64;
    let mut nc = nc();
    let x = load(&mut nc, "x", p, 3, &data(12, 1));
    let not_eye = load(&mut nc, "m", p, p, &[1.0; 16]);
    let ps = nc.psum_pool("ps", 1);
    let tp = nc.tile(ps, Dtype::F32, &[3, p]).unwrap();
    let e = nc.matmul_transpose(tp, x, not_eye).unwrap_err();
    assert_eq!(e.instruction, "nc_matmul");
    assert!(e.to_string().contains("identity moving tensor; moving[0][1] is 1"), "{e}");
}

#[test]
fn stream_shuffle_copies_partitions_within_each_quadrant_by_the_mask() {
    // dst partition q*32+i = src partition q*32+mask[i]; 255 leaves dst's partition as it was.
    let (p, f) = (64u64, 3u64);
    let x = data((p * f) as usize, 9);
    let mut mask = [0u8; 32];
    for (i, m) in mask.iter_mut().enumerate() {
        *m = if i % 5 == 4 { neuron_sim::SHUFFLE_KEEP } else { ((i * 7) % 32) as u8 };
    }
    let mut nc = nc();
    let xt = load(&mut nc, "x", p, f, &x);
    let sb = nc.sbuf_pool("out", 1);
    let yt = nc.tile(sb, Dtype::F32, &[p, f]).unwrap();
    nc.memset(yt, -9.0).unwrap();
    nc.stream_shuffle(yt, xt, mask).unwrap();
    let y = fetch(&mut nc, "y", yt, p, f);
    for d in 0..p as usize {
        let (q, i) = (d / 32, d % 32);
        for j in 0..f as usize {
            let want = match mask[i] {
                neuron_sim::SHUFFLE_KEEP => -9.0,
                m => x[(q * 32 + m as usize) * f as usize + j],
            };
            assert_eq!(y[d * f as usize + j], want, "dst partition {d}, element {j}");
        }
    }
}

#[test]
fn partition_broadcast_copies_the_first_partition_to_every_partition() {
    for parts in [128u64, 100, 7] {
        let f = 5u64;
        let x = data(f as usize, 3);
        let mut nc = nc();
        let xt = load(&mut nc, "x", 1, f, &x);
        let sb = nc.sbuf_pool("out", 1);
        let yt = nc.tile(sb, Dtype::F32, &[parts, f]).unwrap();
        nc.partition_broadcast(yt, xt).unwrap();
        let y = fetch(&mut nc, "y", yt, parts, f);
        for d in 0..parts as usize {
            assert_eq!(&y[d * f as usize..(d + 1) * f as usize], &x[..], "partition {d}");
        }
    }
}

#[test]
fn activation_reduces_with_add_and_refuses_other_reduce_ops() {
    // reduce_res[p] = Σ_j f(x[p, j] * scale) (reduce_op = add, the only one ScalarE has);
    // max/min are the kernel's error, naming the instruction and its line (SDK 2.33
    // nki.isa.activation: "reduce_op must be nl.add").
    let (p, f) = (3u64, 4u64);
    let x = data((p * f) as usize, 4);
    let mut nc = nc();
    let xt = load(&mut nc, "x", p, f, &x);
    let sb = nc.sbuf_pool("out", 1);
    let (yt, rt) =
        (nc.tile(sb, Dtype::F32, &[p, f]).unwrap(), nc.tile(sb, Dtype::F32, &[p, 1]).unwrap());
    let args = ActArgs::default().scale(0.5).reduce_with(Alu::Add, rt);
    nc.activation(yt, xt, Act::Square, args).unwrap();
    let r = fetch(&mut nc, "r", rt, p, 1);
    for i in 0..p as usize {
        let want: f32 = (0..f as usize).map(|j| (x[i * 4 + j] * 0.5) * (x[i * 4 + j] * 0.5)).sum();
        assert_eq!(r[i], want, "partition {i}");
    }
    for op in [Alu::Max, Alu::Min, Alu::Multiply, Alu::AbsMax] {
        let args = ActArgs::default().reduce_with(op, rt);
        let line = line!() + 1;
        let e = nc.activation(yt, xt, Act::Exp, args).unwrap_err();
        assert_eq!((e.instruction, e.loc.line), ("activation", line));
        assert_eq!(e.kind.name(), "reduce_op_not_allowed", "{op:?}");
        assert!(e.to_string().contains(&format!("cannot reduce with {op:?}")), "{e}");
    }
}

#[test]
fn activate2_applies_the_tensor_scalar_stage_then_the_function_then_the_reduce() {
    // dst = func((x op0 imm0) op1 imm1), reversed operands on request; reduce_res[p] = fold
    // of dst's row with add, max, min or absmax (nki.isa.activate2, NeuronCore-v4).
    use neuron_sim::Act2Args;
    let (p, f) = (4u64, 6u64);
    let x = data((p * f) as usize, 11);
    let col = [1.5f32, -0.5, 2.0, 0.25];
    let cases = [
        (Alu::Multiply, Alu::Add, false, Alu::Max),
        (Alu::Multiply, Alu::Subtract, true, Alu::Min),
        (Alu::Subtract, Alu::Bypass, true, Alu::AbsMax),
        (Alu::Add, Alu::Bypass, false, Alu::Add),
        (Alu::Bypass, Alu::Bypass, false, Alu::Max),
    ];
    for (op0, op1, reverse, rop) in cases {
        let mut nc = Nc::new(Chip::trn3(), ExecMode::FUNCTIONAL);
        let xt = load(&mut nc, "x", p, f, &x);
        let ct = load(&mut nc, "c", p, 1, &col);
        let sb = nc.sbuf_pool("out", 1);
        let (yt, rt) =
            (nc.tile(sb, Dtype::F32, &[p, f]).unwrap(), nc.tile(sb, Dtype::F32, &[p, 1]).unwrap());
        let args = Act2Args::default()
            .ops((op0, ct.into()), (op1, 0.75.into()))
            .reverse(reverse, reverse)
            .reduce_with(rop, rt);
        nc.activate2(yt, xt, Act::Tanh, args).unwrap();
        let (y, r) = (fetch(&mut nc, "y", yt, p, f), fetch(&mut nc, "r", rt, p, 1));
        let stage = |op: Alu, a: f32, imm: f32| match (op, reverse) {
            (Alu::Bypass, _) => a,
            (Alu::Multiply, _) => a * imm,
            (Alu::Add, _) => a + imm,
            (Alu::Subtract, false) => a - imm,
            (Alu::Subtract, true) => imm - a,
            _ => unreachable!(),
        };
        for i in 0..p as usize {
            let row: Vec<f32> = (0..f as usize)
                .map(|j| stage(op1, stage(op0, x[i * 6 + j], col[i]), 0.75).tanh())
                .collect();
            let want = match rop {
                Alu::Add => row.iter().sum(),
                Alu::Max => row.iter().cloned().fold(f32::NEG_INFINITY, f32::max),
                Alu::Min => row.iter().cloned().fold(f32::INFINITY, f32::min),
                _ => row.iter().fold(0.0f32, |m, v| m.max(v.abs())),
            };
            assert_eq!(&y[i * 6..(i + 1) * 6], &row[..], "{op0:?}/{op1:?} row {i}");
            assert_eq!(r[i], want, "{rop:?} reduce of row {i}");
        }
    }
}

#[test]
fn activate2_is_refused_before_neuroncore_v4_and_with_other_ops() {
    use neuron_sim::Act2Args;
    let mut nc = nc(); // trn2: NeuronCore-v3
    let xt = load(&mut nc, "x", 2, 2, &[1.0; 4]);
    let e = nc.activate2(xt, xt, Act::Exp, Act2Args::default()).unwrap_err();
    assert!(e.to_string().contains("activate2 is a NeuronCore-v4 instruction"), "{e}");
    let mut nc = Nc::new(Chip::trn3(), ExecMode::FUNCTIONAL);
    let xt = load(&mut nc, "x", 2, 2, &[1.0; 4]);
    let sb = nc.sbuf_pool("r", 1);
    let rt = nc.tile(sb, Dtype::F32, &[2, 1]).unwrap();
    let pair = Act2Args::default().ops((Alu::Add, 1.0.into()), (Alu::Add, 1.0.into()));
    let e = nc.activate2(xt, xt, Act::Exp, pair).unwrap_err();
    assert!(e.to_string().contains("not (Add, Add)"), "{e}");
    let mul = Act2Args::default().reduce_with(Alu::Multiply, rt);
    let e = nc.activate2(xt, xt, Act::Exp, mul).unwrap_err();
    assert_eq!(e.kind.name(), "reduce_op_not_allowed", "{e}");
}

#[test]
fn the_new_instructions_appear_in_the_trace_under_their_names() {
    let mut nc = Nc::new(Chip::trn3(), ExecMode::TRACE);
    let (sb, ps) = (nc.sbuf_pool("sb", 1), nc.psum_pool("ps", 1));
    let x = nc.tile(sb, Dtype::Bf16, &[32, 32]).unwrap();
    let y = nc.tile(sb, Dtype::Bf16, &[32, 32]).unwrap();
    let t = nc.tile(ps, Dtype::Bf16, &[32, 32]).unwrap();
    nc.memset(x, 1.0).unwrap();
    nc.matmul_transpose(t, x, x).unwrap(); // timing only: values are not checked
    nc.stream_shuffle(y, x, [0; 32]).unwrap();
    nc.activate2(y, x, Act::Exp, neuron_sim::Act2Args::default()).unwrap();
    let trace = nc.trace_json().unwrap();
    let names: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["memset", "nc_matmul(is_transpose)", "nc_stream_shuffle", "activate2"]);
}

#[test]
fn softplus_is_finite_wherever_its_value_is() {
    // ln(1 + e^x) is about x for large x: 89 and 100 are well inside fp32, though e^89 is
    // not. Reference in f64.
    let x = [-100.0f32, -20.0, -1.0, 0.0, 1.0, 20.0, 89.0, 100.0];
    let mut nc = nc();
    let xh = nc.hbm_input("x", Dtype::F32, &[1, 8], &x).unwrap();
    let yh = nc.hbm("y", Dtype::F32, &[1, 8]).unwrap();
    let sb = nc.sbuf_pool("sb", 1);
    let t = nc.tile(sb, Dtype::F32, &[1, 8]).unwrap();
    nc.dma(t, xh).unwrap();
    nc.activation(t, t, Act::Softplus, ActArgs::default()).unwrap();
    nc.dma(yh, t).unwrap();
    for (v, y) in x.iter().zip(out(&nc, yh)) {
        let want = (*v as f64).exp().ln_1p();
        let want = if want.is_finite() { want } else { *v as f64 };
        assert!((y as f64 - want).abs() <= 1e-6 * want.abs().max(1e-30), "softplus({v}) = {y}");
    }
}
