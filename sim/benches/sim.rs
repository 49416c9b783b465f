//! Speed of the simulator (issue: "timing ≥ 5 M instructions/s on one core for a GEMM-shaped
//! program; functional bf16 GEMM 1024³ through the builder < 0.5 s").
//!
//! `cargo bench -p neuron-sim` prints criterion's times; the `timing_gemm` group reports
//! throughput in instructions per second (criterion's "elem/s"), for the program in plain
//! loops (program order) and in affine loops (list-scheduled, docs/scheduling.md).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
mod gemm;

use gemm::run_gemm;
use neuron_sim::ExecMode;
use std::hint::black_box;

fn timing(c: &mut Criterion) {
    // 4096 x 4096 x 4096: 9 K instructions with K-panel loads (1 DMA per 16 matmuls),
    // 17 K with one DMA per [128 x 128] A tile (1 DMA per matmul).
    let mut g = c.benchmark_group("timing_gemm");
    g.sample_size(20);
    let (count, _) = run_gemm::<true, false>(ExecMode::TIMING, 4096, 4096, 4096, None);
    g.throughput(Throughput::Elements(count));
    g.bench_function("4096^3_panel_loads", |bench| {
        bench.iter(|| black_box(run_gemm::<true, false>(ExecMode::TIMING, 4096, 4096, 4096, None)))
    });
    // The same program with the timing model off: what the builder (checks, views, program
    // hash, counters) costs on its own, so the report can say how the time splits.
    let builder_only = ExecMode { functional: false, timing: false, trace: false };
    g.bench_function("4096^3_panel_loads_builder_only", |bench| {
        bench.iter(|| black_box(run_gemm::<true, false>(builder_only, 4096, 4096, 4096, None)))
    });
    let (count, _) = run_gemm::<false, false>(ExecMode::TIMING, 4096, 4096, 4096, None);
    g.throughput(Throughput::Elements(count));
    g.bench_function("4096^3_tile_loads", |bench| {
        bench.iter(|| black_box(run_gemm::<false, false>(ExecMode::TIMING, 4096, 4096, 4096, None)))
    });
    // The same programs with affine loops: every instruction goes through the list
    // scheduler's window (docs/scheduling.md).
    let (count, _) = run_gemm::<true, true>(ExecMode::TIMING, 4096, 4096, 4096, None);
    g.throughput(Throughput::Elements(count));
    g.bench_function("4096^3_panel_loads_affine", |bench| {
        bench.iter(|| black_box(run_gemm::<true, true>(ExecMode::TIMING, 4096, 4096, 4096, None)))
    });
    let (count, _) = run_gemm::<false, true>(ExecMode::TIMING, 4096, 4096, 4096, None);
    g.throughput(Throughput::Elements(count));
    g.bench_function("4096^3_tile_loads_affine", |bench| {
        bench.iter(|| black_box(run_gemm::<false, true>(ExecMode::TIMING, 4096, 4096, 4096, None)))
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
        bench.iter(|| {
            black_box(run_gemm::<true, false>(ExecMode::FUNCTIONAL, n, n, n, Some((&a, &b))))
        })
    });
    g.finish();
}

criterion_group!(benches, timing, functional);
criterion_main!(benches);
