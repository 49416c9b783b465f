//! Runs the benchmark GEMM (`benches/gemm/mod.rs`) once, for counting the simulator's CPU
//! instructions with callgrind, which unlike wall time is deterministic (docs/scheduling.md §3):
//!
//! ```text
//! cargo build --profile bench -p neuron-sim --example gemm_once
//! valgrind --tool=callgrind target/release/examples/gemm_once affine panel 4096
//! ```
//!
//! Arguments: `plain` or `affine` (the loops), `panel` or `tile` (one K-panel DMA per row
//! block, or one DMA per A tile), and the size (M = K = N, a multiple of 512).

#[path = "../benches/gemm/mod.rs"]
mod gemm;

use gemm::run_gemm;
use neuron_sim::ExecMode;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: gemm_once <plain|affine> <panel|tile> <size, a multiple of 512>";
    let [form, load, size] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Some(n) = size.parse::<u64>().ok().filter(|n| *n > 0 && n % 512 == 0) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (count, us) = match (form.as_str(), load.as_str()) {
        ("plain", "panel") => run_gemm::<true, false>(ExecMode::TIMING, n, n, n, None),
        ("plain", "tile") => run_gemm::<false, false>(ExecMode::TIMING, n, n, n, None),
        ("affine", "panel") => run_gemm::<true, true>(ExecMode::TIMING, n, n, n, None),
        ("affine", "tile") => run_gemm::<false, true>(ExecMode::TIMING, n, n, n, None),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    println!("{form} {load} {n}^3: {count} instructions, {us:.3} us");
}
