//! What a worker answers: the results of tracing, checking, benchmarking and profiling a
//! variant, of evaluating a model, and the `list` document.
//!
//! Field names of [`ProfileSummary`] are those of `neuron-profile`'s summary JSON where one
//! exists, so a simulated and a measured profile can be compared field by field.

use crate::params::{ParamSpec, Params, Shape};
use crate::space::Space;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Useful work of one invocation (for TFLOP/s, MFU and the roofline).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Work {
    pub flops: f64,
    pub bytes: f64,
}

/// How close an output must be to the reference: element-wise
/// `|out - ref| <= atol * max(1, rms(ref)) + rtol * |ref|` (numpy's `allclose` with `atol`
/// scaled by the output's RMS, so a sum that cancels to near zero is judged against the
/// size of its terms rather than its own), and cosine similarity at least `min_cosine`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
    pub min_cosine: f64,
}

impl Tolerance {
    /// fp32 and int32 outputs (the NKI samples' fp32 matmul tolerance, docs/neuroncore.md §5).
    pub const FP32: Tolerance = Tolerance { atol: 1e-4, rtol: 1e-2, min_cosine: 0.9999 };
    /// bf16 and fp16 outputs (the NKI samples' `atol=1e-2, rtol=2e-2`).
    pub const BF16: Tolerance = Tolerance { atol: 1e-2, rtol: 2e-2, min_cosine: 0.999 };
    /// fp8 outputs.
    pub const FP8: Tolerance = Tolerance { atol: 0.1, rtol: 0.15, min_cosine: 0.99 };
}

/// Comparison of outputs with a reference.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    pub mse: f64,
    pub cosine: f64,
    /// Elements outside `atol + rtol * |ref|` (NaN counts as outside).
    pub mismatches: u64,
    pub elements: u64,
    /// The absolute tolerance the comparison used: `atol × max(1, RMS of the reference)`.
    #[serde(default)]
    pub effective_atol: f64,
    /// The element nearest its own bound (or furthest past it). Absent from an older
    /// harness's answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst: Option<WorstElement>,
}

/// The element with the largest `|err| / (effective_atol + rtol·|ref|)`: an error larger
/// than the absolute tolerance can pass through its relative term, and this says by how
/// much it stayed within (or went past) its bound. Every figure is finite (JSON has no
/// infinity: a NaN or infinite error, or a zero bound with an error, is `f64::MAX`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorstElement {
    /// |out − ref| of the element.
    pub abs_err: f64,
    /// |ref| of the element.
    pub abs_ref: f64,
    /// Its bound: `effective_atol + rtol·|ref|`.
    pub allowed: f64,
    /// `abs_err / allowed`: at most 1 where the element passes.
    pub ratio: f64,
}

impl WorstElement {
    /// The worse of two (the larger ratio; the first on a tie), for folding over cases.
    pub fn worse(a: Option<WorstElement>, b: Option<WorstElement>) -> Option<WorstElement> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.ratio > a.ratio { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

/// `x`, or `f64::MAX` for a NaN or an infinity.
fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        f64::MAX
    }
}

impl Metrics {
    /// Compare `out` with `reference` under `tol`.
    pub fn compare(out: &[Vec<f32>], reference: &[Vec<f32>], tol: &Tolerance) -> Metrics {
        Metrics::compare_located(out, reference, tol).0
    }

    /// [`Metrics::compare`], and where its `worst` element is: (output, position in it),
    /// for a message that names the element (the harness's, on a failed check).
    pub fn compare_located(
        out: &[Vec<f32>],
        reference: &[Vec<f32>],
        tol: &Tolerance,
    ) -> (Metrics, Option<(usize, usize)>) {
        let (mut max_abs, mut max_rel, mut se, mut dot, mut n_o, mut n_r) =
            (0f64, 0f64, 0f64, 0f64, 0f64, 0f64);
        let (mut bad, mut n) = (0u64, 0u64);
        let (sq, cnt) = reference
            .iter()
            .flatten()
            .fold((0f64, 0usize), |(s, c), &r| (s + (r as f64).powi(2), c + 1));
        let atol = tol.atol * (sq / cnt.max(1) as f64).sqrt().max(1.0);
        let mut worst: Option<WorstElement> = None;
        let mut worst_at = None;
        for (t, (o, r)) in out.iter().zip(reference).enumerate() {
            for (i, (&a, &b)) in o.iter().zip(r).enumerate() {
                let (a, b) = (a as f64, b as f64);
                let d = (a - b).abs();
                n += 1;
                let allowed = atol + tol.rtol * b.abs();
                if !d.is_finite() || d > allowed {
                    bad += 1;
                }
                let ratio = if !d.is_finite() {
                    f64::MAX
                } else if d == 0.0 {
                    0.0
                } else {
                    finite(d / allowed)
                };
                if worst.is_none_or(|w| ratio > w.ratio) {
                    worst = Some(WorstElement {
                        abs_err: finite(d),
                        abs_ref: finite(b.abs()),
                        allowed: finite(allowed),
                        ratio,
                    });
                    worst_at = Some((t, i));
                }
                let d = if d.is_nan() { f64::INFINITY } else { d };
                max_abs = max_abs.max(d);
                max_rel = max_rel.max(d / b.abs().max(1e-6));
                se += d * d;
                dot += a * b;
                n_o += a * a;
                n_r += b * b;
            }
            if o.len() != r.len() {
                bad += (o.len() as i64 - r.len() as i64).unsigned_abs();
            }
        }
        let cosine = if n_o == 0.0 && n_r == 0.0 { 1.0 } else { dot / (n_o.sqrt() * n_r.sqrt()) };
        let metrics = Metrics {
            max_abs_err: max_abs,
            max_rel_err: max_rel,
            mse: if n > 0 { se / n as f64 } else { 0.0 },
            cosine: if cosine.is_nan() { 0.0 } else { cosine },
            mismatches: bad,
            elements: n,
            effective_atol: atol,
            worst,
        };
        (metrics, worst_at)
    }

    pub fn passes(&self, tol: &Tolerance) -> bool {
        self.mismatches == 0 && self.cosine >= tol.min_cosine
    }
}

/// How a check draws its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    /// Standard normal values.
    Normal,
    /// Exact small values: 0, ±1, ±0.5, ±2 (shrinks to here).
    Edge,
    /// Normal values times 64: large magnitudes.
    Large,
}

impl Distribution {
    /// Every distribution, simplest first (the order proptest shrinks towards).
    pub const ALL: [Distribution; 3] =
        [Distribution::Edge, Distribution::Normal, Distribution::Large];
}

/// The smallest failing case a check found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckFailure {
    pub shape: Shape,
    pub input_seed: u64,
    pub distribution: Distribution,
    pub message: String,
    pub metrics: Option<Metrics>,
    /// When the case broke a hardware rule (the simulator refused the program, whatever the
    /// inputs): the rule (`ViolationKind::name`: `over_capacity`, `psum_bank_overflow`, …),
    /// the instruction that broke it (`nc_matmul`, …) and its source location
    /// (`file:line:col`). Absent otherwise, and from an older harness's answers (optional:
    /// no protocol version of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

impl CheckFailure {
    /// What failed, in words, before the message: a broken hardware rule is the program's,
    /// whatever the inputs (its rule, instruction and shape); any other failure is a case
    /// (its shape, input seed and distribution).
    pub fn heading(&self) -> String {
        match &self.rule {
            Some(rule) => format!(
                "hardware-rule violation (`{rule}`{}) at shape {}: the simulator refused the \
                 program there",
                match (&self.instruction, &self.location) {
                    (Some(i), Some(l)) => format!(", by `{i}` at {l}"),
                    _ => String::new(),
                },
                self.shape
            ),
            None => format!(
                "smallest failing shape {} (input seed {}, {:?} inputs)",
                self.shape, self.input_seed, self.distribution
            ),
        }
    }
}

/// Outcome of a property-based check of one variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub passed: bool,
    pub cases: u32,
    pub seed: u64,
    /// Worst over the cases that ran (the failing case's own when one failed).
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    pub mse: f64,
    pub cosine: f64,
    pub failure: Option<CheckFailure>,
    /// The tolerance the verdict used, and the largest absolute tolerance it allowed
    /// (`atol` scaled by the reference's RMS), so an error that looks large can be read
    /// against what was allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<Tolerance>,
    #[serde(default)]
    pub effective_atol: f64,
    /// The element nearest its own bound over the cases (the failing case's when one
    /// failed); absent from an older harness's answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst: Option<WorstElement>,
}

/// The bottleneck verdict of a profile: the kind, its evidence and what to try.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `Tensor-bound`, `Vector-bound`, `Scalar-bound`, `GpSimd-bound`, `DMA-bound`,
    /// `DMA-latency-bound`, `Latency-bound` or `Launch-bound`.
    pub kind: String,
    pub summary: String,
    pub evidence: Vec<String>,
    pub advice: Vec<String>,
}

/// One engine's activity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineProfile {
    pub engine: String,
    pub active_time_us: f64,
    pub active_time_percent: f64,
    pub busy_cycles: u64,
    pub instruction_count: u64,
}

/// Time of one source line of the kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LineProfile {
    pub nki_source_location: String,
    pub opcode: String,
    pub busy_time_us: f64,
    pub instruction_count: u64,
}

/// The profile of one simulated run (the simulator's `Profile`, field for field).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    pub chip: String,
    /// End to end, including the kernel launch overhead, in seconds (as neuron-profile).
    pub total_time: f64,
    pub total_time_us: f64,
    pub kernel_time_us: f64,
    pub launch_overhead_us: f64,
    pub neuroncore_cycle_count: u64,
    pub instruction_count: u64,
    pub matmul_instruction_count: u64,
    pub tensor_engine_active_time_percent: f64,
    pub vector_engine_active_time_percent: f64,
    pub scalar_engine_active_time_percent: f64,
    pub gpsimd_engine_active_time_percent: f64,
    pub tensor_engine_instruction_count: u64,
    pub vector_engine_instruction_count: u64,
    pub scalar_engine_instruction_count: u64,
    pub gpsimd_engine_instruction_count: u64,
    pub engines: Vec<EngineProfile>,
    pub dma_active_time_percent: f64,
    pub dma_transfer_count: u64,
    pub dma_transfer_average_bytes: f64,
    pub dma_average_bytes_per_partition: f64,
    pub dma_descriptor_count: u64,
    pub hbm_read_bytes: u64,
    pub hbm_write_bytes: u64,
    pub hbm_bandwidth_gbps: f64,
    pub mbu_estimated_percent: f64,
    pub model_flops: f64,
    pub hardware_flops: f64,
    pub transpose_flops: f64,
    pub tflops: f64,
    pub mfu_estimated_percent: f64,
    pub hfu_estimated_percent: f64,
    /// FLOPs per HBM byte; `None` (JSON `null`) when the program moves no HBM bytes.
    pub mm_arithmetic_intensity: Option<f64>,
    pub roofline_bound_us: f64,
    pub roofline_ridge_flop_per_byte: f64,
    pub roofline_side: String,
    pub sbuf_peak_bytes_per_partition: u64,
    pub sbuf_peak_percent: f64,
    pub psum_peak_banks: u64,
    pub critical_path_us: BTreeMap<String, f64>,
    pub top_lines: Vec<LineProfile>,
    pub bottleneck: Verdict,
    pub program_hash: String,
    /// What the list scheduler of affine loops did; only for programs with affine loops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
    /// The physical NeuronCores the kernel ran on, only when more than one (an SPMD launch,
    /// NKI `kernel[2]`): busy times, counts, FLOPs and bytes are then summed over them, and
    /// the activities, MFU, HFU, MBU and the roofline are against that many cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_cores: Option<u32>,
}

/// The list scheduler's work in one run (docs/scheduling.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Scheduling {
    pub affine_loops: u64,
    pub affine_iterations: u64,
    pub list_scheduled_instruction_count: u64,
    pub reordered_instruction_count: u64,
    pub window_iterations: u64,
    pub window_instructions: u64,
}

/// Result of `trace`: the program without simulating it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceResult {
    pub program_hash: String,
    pub instruction_count: u64,
    pub sbuf_bytes_per_partition: u64,
    pub psum_banks: u64,
    pub shape: Shape,
    /// Useful work of the shape (for the roofline bound a search prunes with).
    #[serde(default)]
    pub work: Work,
    /// No schedule of this program can finish sooner (µs, end to end like
    /// [`BenchResult::time_us`]): launch overhead + max(PE FLOPs / peak, HBM bytes / HBM
    /// bandwidth), from the traced program alone.
    #[serde(default)]
    pub roofline_bound_us: f64,
    /// A bound no lower than the roofline's, no schedule of the simulator beating it either
    /// (µs, end to end the same way): launch overhead + the largest of the roofline, the
    /// fixed DMA latency plus the most engine time one queue of one DMA engine is given, and
    /// the most time one compute engine (or NeuronCore-v2 shared port) is given
    /// (`neuron_sim::LowerBound`, argued in `sim/src/timing/bound.rs`). 0 from a harness
    /// that predates it: read it through [`TraceResult::bound_us`].
    #[serde(default)]
    pub lower_bound_us: f64,
}

impl TraceResult {
    /// The tightest bound the harness gave: what `tune` prunes with (µs, end to end).
    pub fn bound_us(&self) -> f64 {
        self.roofline_bound_us.max(self.lower_bound_us)
    }
}

/// Result of `bench` (and, with the profile, of `profile`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// End to end at the chip's profiler base clock (includes launch overhead).
    pub cycles: u64,
    pub time_us: f64,
    pub kernel_time_us: f64,
    pub tflops: f64,
    pub bottleneck: String,
    pub bottleneck_summary: String,
    pub program_hash: String,
    pub instruction_count: u64,
    pub shape: Shape,
    pub work: Work,
    /// SBUF in use at the peak (bytes per partition).
    #[serde(default)]
    pub sbuf_bytes_per_partition: u64,
    /// Bytes read from and written to HBM. Required, so a result stored before it existed
    /// fails to read and is measured again.
    pub hbm_bytes: u64,
    /// FLOPs the engines executed (padding and transposes included), as neuron-profile
    /// counts `hardware_flops`.
    pub hardware_flops: f64,
    /// The physical NeuronCores the kernel ran on, only when more than one (an SPMD launch):
    /// `tflops`, `hbm_bytes` and `hardware_flops` are then summed over them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_cores: Option<u32>,
    /// The full profile (`profile` requests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileSummary>,
    /// The Perfetto trace as JSON text (`profile` with `trace: true` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// Tuned parameters by (crate, kernel, shape), as models use them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tuned(pub Vec<TunedEntry>);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TunedEntry {
    pub kernel: String,
    /// The Rust crate whose kernel of that name the entry is for (`Kernel::rust_crate`).
    /// Absent: any crate's kernel of that name that no entry names the crate of.
    #[serde(rename = "crate", default, skip_serializing_if = "Option::is_none")]
    pub krate: Option<String>,
    pub shape: Shape,
    pub params: Params,
}

impl Tuned {
    /// The parameters of the kernel `kernel` of Rust crate `krate` at `shape`: an entry
    /// naming that crate, else one naming no crate. An entry of another crate's kernel of
    /// the same name never applies.
    pub fn get(&self, krate: Option<&str>, kernel: &str, shape: &Shape) -> Option<&Params> {
        let of = |c: Option<&str>| {
            self.0
                .iter()
                .find(|e| e.krate.as_deref() == c && e.kernel == kernel && &e.shape == shape)
                .map(|e| &e.params)
        };
        krate.and_then(|c| of(Some(c))).or_else(|| of(None))
    }
}

/// Time of one kind of call in a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelTime {
    pub kernel: String,
    /// The Rust crate that defines the kernel (absent from an older harness's answers).
    #[serde(rename = "crate", default, skip_serializing_if = "Option::is_none")]
    pub krate: Option<String>,
    pub shape: Shape,
    pub params: Params,
    pub tuned: bool,
    pub calls: u64,
    /// Simulated time of one call, without launch overhead.
    pub time_us: f64,
    /// calls × (time + launch overhead).
    pub total_us: f64,
    /// The program of one call.
    #[serde(default)]
    pub program_hash: String,
}

/// End-to-end timing of a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelTiming {
    pub model: String,
    pub shape: Shape,
    pub chip: String,
    pub total_us: f64,
    pub launch_overhead_us: f64,
    pub tokens: f64,
    pub tokens_per_s: f64,
    /// Prompts (the model's `prompts` per evaluation) / time.
    #[serde(default)]
    pub prompts_per_s: f64,
    pub kernels: Vec<KernelTime>,
}

/// Functional comparison of a model with its reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelCheck {
    pub model: String,
    pub shape: Shape,
    pub passed: bool,
    pub metrics: Metrics,
}

/// One distinct kernel call of a model: which variant, and how often the model makes it.
/// Two calls are distinct when their crate, kernel, shape or parameters differ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedCall {
    pub kernel: String,
    /// The Rust crate that defines the kernel (`Kernel::rust_crate`: a model may call two
    /// kernels of one name from two crates). Absent from an older harness's answers.
    #[serde(rename = "crate", default, skip_serializing_if = "Option::is_none")]
    pub krate: Option<String>,
    pub shape: Shape,
    pub params: Params,
    /// The parameters came from the tuned table (else they are the kernel's defaults).
    pub tuned: bool,
    pub calls: u64,
}

/// Result of `model_plan`: what a model runs at a shape, before any simulation. End-to-end
/// time = Σ calls × (kernel time + launch overhead); throughput = tokens / time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelPlan {
    pub model: String,
    pub shape: Shape,
    pub chip: String,
    pub tokens: f64,
    /// Prompts per evaluation (one when a harness older than this field does not say).
    #[serde(default = "one_prompt")]
    pub prompts: f64,
    pub launch_overhead_us: f64,
    /// In order of first call.
    pub calls: Vec<PlannedCall>,
}

fn one_prompt() -> f64 {
    1.0
}

/// Result of `model`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelResult {
    pub timing: ModelTiming,
    pub check: Option<ModelCheck>,
}

/// How many configurations of a space are valid for a shape.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidCount {
    pub valid: u64,
    /// `false` when the space was too large to count and `valid` is estimated from a
    /// uniform sample.
    pub exact: bool,
    /// Whether the kernel's default parameters are valid at the shape (on the chip
    /// counted on). Absent from older harnesses' answers: taken as valid.
    #[serde(default = "default_is_valid")]
    pub default_valid: bool,
}

fn default_is_valid() -> bool {
    true
}

/// A kernel as `list` describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelInfo {
    pub name: String,
    pub doc: String,
    pub params: Vec<ParamSpec>,
    pub space: Space,
    pub defaults: Params,
    pub shapes: Vec<(String, Shape)>,
    /// Valid configurations of the space per shape name.
    pub valid_variants: BTreeMap<String, ValidCount>,
}

/// A model as `list` describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub name: String,
    pub doc: String,
    pub shapes: Vec<(String, Shape)>,
}

/// The `list` document: what a harness has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListDoc {
    pub protocol: u32,
    pub harness_version: String,
    /// The simulator version the harness links (`neuron_sim::SIM_VERSION`): results of
    /// harnesses with different versions are never compared or served for each other.
    pub sim_version: String,
    pub crate_name: String,
    pub kernels: Vec<KernelInfo>,
    pub models: Vec<ModelInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_follow_their_definitions() {
        // rms(ref) = sqrt(14/3) ≈ 2.16, so the absolute tolerance is 0.216: 0.5 is outside.
        let tol = Tolerance { atol: 0.1, rtol: 0.0, min_cosine: 0.9 };
        let m = Metrics::compare(&[vec![1.0, 2.0, 3.5]], &[vec![1.0, 2.0, 3.0]], &tol);
        assert_eq!(m.max_abs_err, 0.5);
        assert!((m.max_rel_err - 0.5 / 3.0).abs() < 1e-12);
        assert!((m.mse - 0.25 / 3.0).abs() < 1e-12);
        let cos = (1.0 + 4.0 + 10.5) / ((1.0f64 + 4.0 + 12.25).sqrt() * 14f64.sqrt());
        assert!((m.cosine - cos).abs() < 1e-12);
        assert_eq!(m.mismatches, 1);
        assert!(!m.passes(&tol));
        let ok = Metrics::compare(&[vec![1.0, 2.0, 3.2]], &[vec![1.0, 2.0, 3.0]], &tol);
        assert_eq!(ok.mismatches, 0);
        let nan = Metrics::compare(&[vec![f32::NAN]], &[vec![1.0]], &tol);
        assert_eq!(nan.mismatches, 1);
        // The worst element by its own bound, which the relative term widens: 0.5 off 10 is
        // within 0.071 + 0.1·10 (47 %), nearer its bound than 0.05 off 1 (0.05 / 0.171).
        let rel = Tolerance { atol: 0.01, rtol: 0.1, min_cosine: 0.9 };
        let m = Metrics::compare(&[vec![1.05, 10.5]], &[vec![1.0, 10.0]], &rel);
        let w = m.worst.unwrap();
        let atol = 0.01 * (101f64 / 2.0).sqrt();
        assert!(m.passes(&rel) && m.max_abs_err > m.effective_atol);
        assert_eq!((w.abs_err, w.abs_ref), (0.5, 10.0));
        assert!(
            (w.allowed - (atol + 1.0)).abs() < 1e-12 && (w.ratio - 0.5 / w.allowed).abs() < 1e-12
        );
        // JSON has no infinity: the NaN's element is the worst, at f64::MAX.
        assert_eq!(nan.worst.map(|w| (w.abs_err, w.ratio)), Some((f64::MAX, f64::MAX)));
        assert!(!nan.passes(&tol));
    }

    #[test]
    fn a_check_failure_reads_with_or_without_its_hardware_rule() {
        // An older harness's failure, without the rule: still read, the rule absent.
        let old = r#"{"shape":{"rows":1},"input_seed":3,"distribution":"edge","message":"m","metrics":null}"#;
        let f: CheckFailure = serde_json::from_str(old).unwrap();
        assert_eq!((&f.rule, &f.instruction, &f.location), (&None, &None, &None));
        // Without a rule nothing new is written, so an older tool reads it as before...
        let text = serde_json::to_string(&f).unwrap();
        assert!(!text.contains("rule") && !text.contains("location"), "{text}");
        // ...and with one, the three fields are there (an older tool skips them).
        let f = CheckFailure {
            rule: Some("psum_bank_overflow".into()),
            instruction: Some("nc_matmul".into()),
            location: Some("src/k.rs:70:16".into()),
            ..f
        };
        let text = serde_json::to_string(&f).unwrap();
        assert!(
            text.contains(r#""rule":"psum_bank_overflow","instruction":"nc_matmul","location":"src/k.rs:70:16""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<CheckFailure>(&text).unwrap(), f);
    }

    /// `check` and `tune` head a failure the same way: a broken rule by its rule, its
    /// instruction and the shape (the inputs do not matter to it), a failing case by its
    /// shape, seed and distribution (what replays it).
    #[test]
    fn a_failure_is_headed_by_its_rule_or_by_its_case() {
        let old = r#"{"shape":{"rows":1},"input_seed":3,"distribution":"edge","message":"m","metrics":null}"#;
        let case: CheckFailure = serde_json::from_str(old).unwrap();
        assert_eq!(case.heading(), "smallest failing shape {rows=1} (input seed 3, Edge inputs)");
        let rule = CheckFailure {
            rule: Some("psum_bank_overflow".into()),
            instruction: Some("nc_matmul".into()),
            location: Some("src/k.rs:70:16".into()),
            ..case
        };
        assert_eq!(
            rule.heading(),
            "hardware-rule violation (`psum_bank_overflow`, by `nc_matmul` at src/k.rs:70:16) at \
             shape {rows=1}: the simulator refused the program there"
        );
    }

    #[test]
    fn a_tuned_entry_applies_to_its_crates_kernel_only() {
        let shape = Shape::new(&[("rows", 1)]);
        let entry = |krate: Option<&str>, bufs: i64| TunedEntry {
            kernel: "gemm".into(),
            krate: krate.map(Into::into),
            shape: shape.clone(),
            params: Params::new().with("bufs", bufs),
        };
        let bufs = |t: &Tuned, c: Option<&str>| {
            t.get(c, "gemm", &shape).and_then(|p| p.get("bufs")).cloned()
        };
        let t = Tuned(vec![entry(Some("fast"), 1), entry(Some("slow"), 2)]);
        assert_eq!(bufs(&t, Some("fast")), Some(1.into()));
        assert_eq!(bufs(&t, Some("slow")), Some(2.into()));
        // Another crate's `gemm`, or one of no known crate: neither entry.
        assert_eq!(bufs(&t, Some("other")), None);
        assert_eq!(bufs(&t, None), None);
        // An entry naming no crate: for a kernel no entry names the crate of.
        let t = Tuned(vec![entry(Some("fast"), 1), entry(None, 3)]);
        assert_eq!(bufs(&t, Some("fast")), Some(1.into()));
        assert_eq!((bufs(&t, Some("other")), bufs(&t, None)), (Some(3.into()), Some(3.into())));
        assert_eq!(t.get(Some("fast"), "add", &shape), None);
        // Written without the field (before crates were said): no crate.
        let old: TunedEntry =
            serde_json::from_str(r#"{"kernel":"gemm","shape":{"rows":1},"params":{"bufs":3}}"#)
                .unwrap();
        assert_eq!(old, entry(None, 3));
        let text = serde_json::to_string(&entry(Some("fast"), 1)).unwrap();
        assert!(text.contains(r#""crate":"fast""#), "{text}");
    }
}
