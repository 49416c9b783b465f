//! Speed of the simulator (issue: "timing ≥ 5 M instructions/s on one core for a GEMM-shaped
//! program; functional bf16 GEMM 1024³ through the builder < 0.5 s").
//!
//! `cargo bench -p neuron-sim` prints criterion's times; the `timing_gemm` group reports
//! throughput in instructions per second (criterion's "elem/s"), for the program in plain
//! loops (program order) and in affine loops (list-scheduled, docs/scheduling.md).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use neuron_sim::{Chip, Dtype, Engine, ExecMode, Hbm, Nc, SimResult};
use std::hint::black_box;

/// A blocked GEMM C[M,N] = AT[K,M].T @ B[K,N]: per (m, n) block of [128 x 512], K/128
/// matmuls accumulate in PSUM; B tiles are loaded once per n column block and reused for
/// every m; A is loaded as one K panel per m block (`PANEL`) or one DMA per [128 x 128] tile.
fn gemm<const PANEL: bool>(nc: &mut Nc, a_t: Hbm, b: Hbm, c: Hbm) -> SimResult<()> {
    let (k, m) = a_t.dims2();
    let n = b.dims2().1;
    let kt = k / 128;
    let a_pool = nc.sbuf_pool("a", 2);
    let b_pool = nc.sbuf_pool("b", 2);
    let o_pool = nc.sbuf_pool("out", 2);
    let psum = nc.psum_pool("acc", 2);
    for ni in 0..n / 512 {
        let bt = nc.tile(b_pool, Dtype::Bf16, &[128, kt, 512])?;
        for ki in 0..kt {
            nc.dma(bt.at(ki), b.slice(&[ki * 128..(ki + 1) * 128, ni * 512..(ni + 1) * 512]))?;
        }
        for mi in 0..m / 128 {
            let at = nc.tile(a_pool, Dtype::Bf16, &[128, kt, 128])?;
            if PANEL {
                // [K, 128] columns of AT viewed as [128 partitions, K/128 tiles, 128].
                nc.dma(at, a_t.cols(mi * 128..(mi + 1) * 128).split(0, 128).swap(0, 1))?;
            } else {
                for ki in 0..kt {
                    let rows = ki * 128..(ki + 1) * 128;
                    nc.dma(at.at(ki), a_t.slice(&[rows, mi * 128..(mi + 1) * 128]))?;
                }
            }
            let acc = nc.tile(psum, Dtype::F32, &[128, 512])?;
            for ki in 0..kt {
                nc.matmul(acc, at.at(ki), bt.at(ki), ki > 0)?;
            }
            let o = nc.tile(o_pool, Dtype::Bf16, &[128, 512])?;
            nc.on(Engine::Scalar).tensor_copy(o, acc)?;
            nc.dma(c.slice(&[mi * 128..(mi + 1) * 128, ni * 512..(ni + 1) * 512]), o)?;
        }
    }
    Ok(())
}

/// The same GEMM with its loops declared independent, as the NKI tutorials write them: the
/// column blocks, the row blocks and the K tiles are `affine_range` loops (the K loop is the
/// PSUM accumulation NKI allows across iterations), so the timing model list-schedules them.
fn gemm_affine<const PANEL: bool>(nc: &mut Nc, a_t: Hbm, b: Hbm, c: Hbm) -> SimResult<()> {
    let (k, m) = a_t.dims2();
    let n = b.dims2().1;
    let kt = k / 128;
    let a_pool = nc.sbuf_pool("a", 2);
    let b_pool = nc.sbuf_pool("b", 2);
    let o_pool = nc.sbuf_pool("out", 2);
    let psum = nc.psum_pool("acc", 2);
    nc.affine_range(0..n / 512, |nc, ni| {
        let bt = nc.tile(b_pool, Dtype::Bf16, &[128, kt, 512])?;
        nc.affine_range(0..kt, |nc, ki| {
            nc.dma(bt.at(ki), b.slice(&[ki * 128..(ki + 1) * 128, ni * 512..(ni + 1) * 512]))
        })?;
        nc.affine_range(0..m / 128, |nc, mi| {
            let at = nc.tile(a_pool, Dtype::Bf16, &[128, kt, 128])?;
            if PANEL {
                nc.dma(at, a_t.cols(mi * 128..(mi + 1) * 128).split(0, 128).swap(0, 1))?;
            } else {
                nc.affine_range(0..kt, |nc, ki| {
                    let rows = ki * 128..(ki + 1) * 128;
                    nc.dma(at.at(ki), a_t.slice(&[rows, mi * 128..(mi + 1) * 128]))
                })?;
            }
            let acc = nc.tile(psum, Dtype::F32, &[128, 512])?;
            nc.affine_range(0..kt, |nc, ki| nc.matmul(acc, at.at(ki), bt.at(ki), ki > 0))?;
            let o = nc.tile(o_pool, Dtype::Bf16, &[128, 512])?;
            nc.on(Engine::Scalar).tensor_copy(o, acc)?;
            nc.dma(c.slice(&[mi * 128..(mi + 1) * 128, ni * 512..(ni + 1) * 512]), o)
        })
    })
}

fn run_gemm<const PANEL: bool>(
    mode: ExecMode,
    m: u64,
    k: u64,
    n: u64,
    data: Option<(&[f32], &[f32])>,
) -> (u64, f64) {
    let mut nc = Nc::new(Chip::trn2(), mode);
    let (a, b) = data.unwrap_or((&[], &[]));
    let a_t = nc.hbm_input("aT", Dtype::Bf16, &[k, m], a).unwrap();
    let bb = nc.hbm_input("b", Dtype::Bf16, &[k, n], b).unwrap();
    let c = nc.hbm("c", Dtype::Bf16, &[m, n]).unwrap();
    gemm::<PANEL>(&mut nc, a_t, bb, c).unwrap();
    let p = nc.profile();
    (p.instruction_count, p.kernel_time_us)
}

fn run_gemm_affine<const PANEL: bool>(m: u64, k: u64, n: u64) -> (u64, f64) {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
    let a_t = nc.hbm_input("aT", Dtype::Bf16, &[k, m], &[]).unwrap();
    let bb = nc.hbm_input("b", Dtype::Bf16, &[k, n], &[]).unwrap();
    let c = nc.hbm("c", Dtype::Bf16, &[m, n]).unwrap();
    gemm_affine::<PANEL>(&mut nc, a_t, bb, c).unwrap();
    let p = nc.profile();
    (p.instruction_count, p.kernel_time_us)
}

fn timing(c: &mut Criterion) {
    // 4096 x 4096 x 4096: 9 K instructions with K-panel loads (1 DMA per 16 matmuls),
    // 17 K with one DMA per [128 x 128] A tile (1 DMA per matmul).
    let mut g = c.benchmark_group("timing_gemm");
    g.sample_size(20);
    let (count, _) = run_gemm::<true>(ExecMode::TIMING, 4096, 4096, 4096, None);
    g.throughput(Throughput::Elements(count));
    g.bench_function("4096^3_panel_loads", |bench| {
        bench.iter(|| black_box(run_gemm::<true>(ExecMode::TIMING, 4096, 4096, 4096, None)))
    });
    // The same program with the timing model off: what the builder (checks, views, program
    // hash, counters) costs on its own, so the report can say how the time splits.
    let builder_only = ExecMode { functional: false, timing: false, trace: false };
    g.bench_function("4096^3_panel_loads_builder_only", |bench| {
        bench.iter(|| black_box(run_gemm::<true>(builder_only, 4096, 4096, 4096, None)))
    });
    let (count, _) = run_gemm::<false>(ExecMode::TIMING, 4096, 4096, 4096, None);
    g.throughput(Throughput::Elements(count));
    g.bench_function("4096^3_tile_loads", |bench| {
        bench.iter(|| black_box(run_gemm::<false>(ExecMode::TIMING, 4096, 4096, 4096, None)))
    });
    // The same programs with affine loops: every instruction goes through the list
    // scheduler's window (docs/scheduling.md).
    let (count, _) = run_gemm_affine::<true>(4096, 4096, 4096);
    g.throughput(Throughput::Elements(count));
    g.bench_function("4096^3_panel_loads_affine", |bench| {
        bench.iter(|| black_box(run_gemm_affine::<true>(4096, 4096, 4096)))
    });
    let (count, _) = run_gemm_affine::<false>(4096, 4096, 4096);
    g.throughput(Throughput::Elements(count));
    g.bench_function("4096^3_tile_loads_affine", |bench| {
        bench.iter(|| black_box(run_gemm_affine::<false>(4096, 4096, 4096)))
    });
    g.finish();
}

fn functional(c: &mut Criterion) {
    let n = 1024u64;
    let a: Vec<f32> = (0..n * n).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 500.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| ((i * 104_729 % 1000) as f32 - 500.0) / 500.0).collect();
    let mut g = c.benchmark_group("functional_gemm");
    g.sample_size(10);
    g.bench_function("bf16_1024x1024x1024", |bench| {
        bench.iter(|| black_box(run_gemm::<true>(ExecMode::FUNCTIONAL, n, n, n, Some((&a, &b)))))
    });
    g.finish();
}

criterion_group!(benches, timing, functional);
criterion_main!(benches);
