//! An *estimate* of the dynamic energy of one kernel run, for `tune --objective pareto`.
//!
//! The simulator models time, not power, and AWS publishes no per-operation energy for
//! NeuronCores. So this is a first-order estimate from published per-operation figures
//! (docs/energy.md has the sources and the reasoning): energy = FLOPs the engines executed
//! × energy per bf16 FLOP + bytes moved to or from HBM × energy per HBM byte. It ranks
//! variants by the work and traffic they cause (a tiling that re-loads an operand costs
//! more), which is what a Pareto front over time, SBUF and energy needs; its absolute value
//! is not a measurement and is always labelled an estimate.

use neuron_tune_protocol::BenchResult;

/// pJ per bf16 FLOP: a 16-bit floating-point multiply (1.1 pJ) and add (0.4 pJ) per
/// fused multiply-add of two FLOPs, at 45 nm (Horowitz, ISSCC 2014).
pub const PJ_PER_FLOP: f64 = (1.1 + 0.4) / 2.0;

/// pJ per byte moved to or from HBM: 3.9 pJ/bit for HBM2 (O'Connor et al., MICRO 2017).
pub const PJ_PER_HBM_BYTE: f64 = 3.9 * 8.0;

/// The estimated dynamic energy of one run, in µJ.
pub fn estimate_uj(b: &BenchResult) -> f64 {
    (b.hardware_flops * PJ_PER_FLOP + b.hbm_bytes as f64 * PJ_PER_HBM_BYTE) * 1e-6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_is_flops_and_hbm_traffic_at_their_published_costs() {
        let b: BenchResult = serde_json::from_value(serde_json::json!({
            "cycles": 1, "time_us": 1.0, "kernel_time_us": 1.0, "tflops": 0.0,
            "bottleneck": "", "bottleneck_summary": "", "program_hash": "",
            "instruction_count": 1, "shape": {}, "work": {"flops": 0.0, "bytes": 0.0},
            "hbm_bytes": 1_000_000u64, "hardware_flops": 2e9
        }))
        .unwrap();
        // 2 GFLOP × 0.75 pJ = 1.5 mJ = 1500 µJ; 1 MB × 31.2 pJ = 31.2 µJ.
        assert!((estimate_uj(&b) - (1500.0 + 31.2)).abs() < 1e-9, "{}", estimate_uj(&b));
    }
}
