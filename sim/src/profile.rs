//! The profile of a run: where the time went and why, in numbers a kernel engineer can act on.
//!
//! Field names follow `neuron-profile`'s summary JSON where one exists (neuroncore.md §5
//! [SCHEMA]: `total_time`, `neuroncore_cycle_count`, `<engine>_engine_active_time_percent`,
//! `mfu_estimated_percent`, …) so a simulated and a measured profile can be diffed; fields
//! without a counterpart say their unit in their name.

use crate::isa::Engine;
use crate::nc::Nc;
use crate::timing::{
    CAT_DMA, CAT_DMA_FIXED, CAT_HBM, CAT_LATENCY, CAT_PORT, CAT_QUEUE, CRIT_CATEGORIES,
    WINDOW_INSTRUCTIONS, WINDOW_ITERATIONS,
};
use crate::Chip;
use serde::Serialize;
use std::collections::BTreeMap;

/// What limits the kernel, with the numbers that show it and what to do about it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// `Tensor-bound`, `Vector-bound`, `Scalar-bound`, `GpSimd-bound`, `DMA-bound`,
    /// `DMA-latency-bound`, `Latency-bound` or `Launch-bound`.
    pub kind: String,
    /// One line: the kind and its strongest evidence.
    pub summary: String,
    pub evidence: Vec<String>,
    pub advice: Vec<String>,
}

/// One engine's activity.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineProfile {
    pub engine: String,
    pub active_time_us: f64,
    pub active_time_percent: f64,
    pub busy_cycles: u64,
    pub instruction_count: u64,
}

/// Time of one source line of the kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LineProfile {
    pub nki_source_location: String,
    pub opcode: String,
    pub busy_time_us: f64,
    pub instruction_count: u64,
}

/// What the list scheduler of affine loops did (docs/scheduling.md); in a profile only when
/// the program has an `affine_range` loop.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scheduling {
    /// `affine_range` loops run (each nested loop counted every time it runs).
    pub affine_loops: u64,
    pub affine_iterations: u64,
    /// Instructions issued inside affine loops, placed by the list scheduler.
    pub list_scheduled_instruction_count: u64,
    /// Of those, the ones that started on their engine after an instruction issued later had
    /// (the scheduled order differs from program order there; the trace shows each
    /// instruction's issue number and loop index).
    pub reordered_instruction_count: u64,
    /// The scheduler's window: iterations and instructions it holds at most.
    pub window_iterations: u64,
    pub window_instructions: u64,
}

/// The summary of one run (see the module docs for naming).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    pub chip: String,
    /// End to end, including the kernel launch overhead, in seconds (as neuron-profile).
    pub total_time: f64,
    pub total_time_us: f64,
    /// The kernel's own span, from the first instruction's start to the last one's end.
    pub kernel_time_us: f64,
    pub launch_overhead_us: f64,
    /// `total_time` at the chip's profiler base clock.
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
    /// Mean over the DMA queues of the fraction of the kernel time each was moving data.
    pub dma_active_time_percent: f64,
    pub dma_transfer_count: u64,
    /// Bytes per `dma_copy` instruction.
    pub dma_transfer_average_bytes: f64,
    pub dma_average_bytes_per_partition: f64,
    pub dma_descriptor_count: u64,
    pub hbm_read_bytes: u64,
    pub hbm_write_bytes: u64,
    pub hbm_bandwidth_gbps: f64,
    pub mbu_estimated_percent: f64,
    /// Useful FLOPs (matmul 2·K·M·N unless the caller set the kernel's own count).
    pub model_flops: f64,
    /// PE FLOPs as neuron-profile counts them: fp32 matmuls twice, plus `transpose_flops`
    /// (calibration.md §1.1).
    pub hardware_flops: f64,
    pub transpose_flops: f64,
    pub tflops: f64,
    pub mfu_estimated_percent: f64,
    pub hfu_estimated_percent: f64,
    /// FLOPs per HBM byte.
    pub mm_arithmetic_intensity: f64,
    /// max(FLOPs / peak, HBM bytes / bandwidth): no schedule can beat it.
    pub roofline_bound_us: f64,
    /// FLOP per HBM byte at which the PE array and HBM are equally limiting (peak / bandwidth).
    pub roofline_ridge_flop_per_byte: f64,
    /// `compute` or `memory`: which side of the roofline the kernel's intensity puts it.
    pub roofline_side: String,
    pub sbuf_peak_bytes_per_partition: u64,
    pub sbuf_peak_percent: f64,
    pub psum_peak_banks: u64,
    /// The critical path's time by category (µs); sums to `kernel_time_us`.
    pub critical_path_us: BTreeMap<String, f64>,
    /// The kernel's source lines by busy time, most first (at most 10).
    pub top_lines: Vec<LineProfile>,
    pub bottleneck: Verdict,
    pub program_hash: String,
    /// Only for programs with affine loops (absent from the JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
    /// The physical NeuronCores the kernel ran on: the most programs of an
    /// [`Nc::spmd`](crate::Nc::spmd) launch, 1 without one (absent from the JSON then).
    /// Busy times, instruction counts, FLOPs and bytes are summed over them; the
    /// `*_active_time_percent` shares, MFU, HFU, MBU and the roofline are against this many
    /// cores' time, peak and bandwidth.
    #[serde(skip_serializing_if = "one_core")]
    pub physical_cores: u32,
}

fn one_core(cores: &u32) -> bool {
    *cores == 1
}

impl Profile {
    /// Replace the useful-work FLOPs (the kernel's own count) and recompute MFU and TFLOP/s;
    /// `peak` is one core's ([`Chip::peak_bf16_flops`]), multiplied here by the
    /// [`Profile::physical_cores`].
    pub fn set_model_flops(&mut self, flops: f64, peak: f64) {
        self.model_flops = flops;
        let peak = peak * self.physical_cores as f64;
        let t = self.kernel_time_us * 1e-6;
        self.tflops = if t > 0.0 { flops / t / 1e12 } else { 0.0 };
        self.mfu_estimated_percent = if t > 0.0 { 100.0 * flops / (t * peak) } else { 0.0 };
    }
}

/// Lower bounds of the kernel time (`Profile::kernel_time_us`, no launch overhead), from the
/// program alone: each holds for any program, timing on or off (a trace has them). The
/// argument for each is in `sim/src/timing/bound.rs`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LowerBound {
    /// The classic roofline, [`Profile::roofline_bound_us`]: max(hardware FLOPs / PE peak,
    /// HBM bytes / per-core HBM bandwidth).
    pub roofline_us: f64,
    /// The DMA fixed latency plus the most engine time one queue of one DMA engine is given:
    /// per chunk, its descriptors at `descriptor_ns` and its bytes at `engine_gbps` (at the
    /// chunk's share of it, `DmaChunk::rate_permille`, for a DMA transpose; docs/dma.md
    /// §1–3; 0 without DMA).
    pub dma_queue_us: f64,
    /// The most time one compute engine (or a NeuronCore-v2 shared port) is given: its
    /// instructions' costs, fixed cycles included, one after another.
    pub engine_us: f64,
}

impl LowerBound {
    /// The largest of the three: no run of the program ends sooner.
    pub fn us(&self) -> f64 {
        self.roofline_us.max(self.dma_queue_us).max(self.engine_us)
    }
}

impl Nc {
    /// Sum each serial resource's work for [`Nc::lower_bound`] with the timing model on
    /// too (it always is without): to compare the bound with the simulated time. Call it
    /// before issuing anything.
    pub fn count_lower_bound_work(&mut self) {
        self.count_serial = true;
    }

    /// Lower bounds of the kernel time of everything issued so far ([`LowerBound`]). The
    /// engine and DMA queue terms are counted in a run without the timing model (`tune`'s
    /// trace) or after [`Nc::count_lower_bound_work`]; otherwise they are 0 and the bound is
    /// the roofline's, which is still a lower bound.
    pub fn lower_bound(&self) -> LowerBound {
        LowerBound {
            roofline_us: self.roofline_us(),
            dma_queue_us: self.stats.serial.dma_ps() as f64 / 1e6,
            engine_us: self.stats.serial.compute_ps() as f64 / 1e6,
        }
    }

    /// max(hardware FLOPs / PE peak, HBM bytes / per-core HBM bandwidth), in µs, the peak
    /// and bandwidth of every core an [`Nc::spmd`] launch used (at any time, no more run).
    fn roofline_us(&self) -> f64 {
        let (st, chip) = (&self.stats, &self.chip);
        let cores = self.spmd.cores as f64;
        let hbm_bytes = (st.hbm_read_bytes + st.hbm_write_bytes) as f64;
        let compute_us = st.hardware_flops / (chip.peak_bf16_flops() * cores) * 1e6;
        let memory_us = hbm_bytes / (chip.memory.hbm_gbps_per_core * 1e9 * cores) * 1e6;
        compute_us.max(memory_us)
    }

    /// The profile of everything issued so far. Requires the timing model; in a
    /// functional-only run times are zero and the verdict says so.
    pub fn profile(&mut self) -> Profile {
        let chip = self.chip.clone();
        let hash = self.program_hash();
        let st = &self.stats;
        let (kernel_ps, mut tracks, crit) = match &self.timing {
            Some(t) => (t.end, t.tracks.clone(), t.end_crit),
            None => (0, vec![Default::default(); 4 + chip.dma.engines as usize], [0; 10]),
        };
        // Busy times and counts summed over the physical cores of spmd launches; a share of
        // the time is of every core's (`cores` × the kernel time).
        for (track, sum) in tracks.iter_mut().zip(&self.spmd.tracks) {
            track.busy_ps += sum.busy_ps;
            track.busy_cycles += sum.busy_cycles;
            track.count += sum.count;
        }
        let cores = self.spmd.cores as f64;
        let kernel_us = kernel_ps as f64 / 1e6;
        let launch_us = chip.launch_overhead_ns / 1e3;
        let total_us = kernel_us + launch_us;
        let core_ps = kernel_ps as f64 * cores;
        let pct = |ps: u64| if kernel_ps > 0 { 100.0 * ps as f64 / core_ps } else { 0.0 };
        let engines: Vec<EngineProfile> = Engine::ALL
            .iter()
            .map(|e| {
                let t = &tracks[e.index()];
                EngineProfile {
                    engine: e.name().to_string(),
                    active_time_us: t.busy_ps as f64 / 1e6,
                    active_time_percent: pct(t.busy_ps),
                    busy_cycles: t.busy_cycles,
                    instruction_count: t.count,
                }
            })
            .collect();
        let dma_busy: u64 = tracks[4..].iter().map(|t| t.busy_ps).sum();
        let dma_pct = pct(dma_busy) / (tracks.len() - 4).max(1) as f64;
        let kernel_s = kernel_us * 1e-6;
        let hbm_bytes = (st.hbm_read_bytes + st.hbm_write_bytes) as f64;
        let bw = if kernel_s > 0.0 { hbm_bytes / kernel_s / 1e9 } else { 0.0 };
        let mbu = 100.0 * bw / (chip.memory.hbm_gbps_per_core * cores);
        let peak = chip.peak_bf16_flops() * cores;
        let per_s = |x: f64| if kernel_s > 0.0 { x / kernel_s } else { 0.0 };
        let intensity = if hbm_bytes > 0.0 { st.matmul_flops / hbm_bytes } else { f64::INFINITY };
        let ridge = peak / (chip.memory.hbm_gbps_per_core * cores * 1e9);
        let mut crit_map = BTreeMap::new();
        for (i, name) in CRIT_CATEGORIES.iter().enumerate() {
            crit_map.insert(name.to_string(), crit[i] as f64 / 1e3);
        }
        let mut lines: Vec<_> = st.lines.clone();
        lines.sort_by(|a, b| b.busy_ps.cmp(&a.busy_ps).then(a.loc.cmp(&b.loc)));
        let top_lines = lines
            .iter()
            .take(10)
            .map(|l| LineProfile {
                nki_source_location: format!("{}:{}", l.loc.file, l.loc.line),
                opcode: l.opcode.to_string(),
                busy_time_us: l.busy_ps as f64 / 1e6,
                instruction_count: l.count,
            })
            .collect();
        let avg_bpp = if st.dma_transfers > 0 {
            st.dma_bytes_per_partition_sum / st.dma_transfers as f64
        } else {
            0.0
        };
        let mut p = Profile {
            chip: chip.name.clone(),
            total_time: total_us * 1e-6,
            total_time_us: total_us,
            kernel_time_us: kernel_us,
            launch_overhead_us: launch_us,
            neuroncore_cycle_count: (total_us * 1e3 * chip.clocks.base_ghz).round() as u64,
            instruction_count: st.instructions,
            matmul_instruction_count: st.matmuls,
            tensor_engine_active_time_percent: engines[0].active_time_percent,
            vector_engine_active_time_percent: engines[1].active_time_percent,
            scalar_engine_active_time_percent: engines[2].active_time_percent,
            gpsimd_engine_active_time_percent: engines[3].active_time_percent,
            tensor_engine_instruction_count: engines[0].instruction_count,
            vector_engine_instruction_count: engines[1].instruction_count,
            scalar_engine_instruction_count: engines[2].instruction_count,
            gpsimd_engine_instruction_count: engines[3].instruction_count,
            engines,
            dma_active_time_percent: dma_pct,
            dma_transfer_count: st.dma_transfers,
            dma_transfer_average_bytes: if st.dma_transfers > 0 {
                st.dma_bytes as f64 / st.dma_transfers as f64
            } else {
                0.0
            },
            dma_average_bytes_per_partition: avg_bpp,
            dma_descriptor_count: st.dma_descriptors,
            hbm_read_bytes: st.hbm_read_bytes,
            hbm_write_bytes: st.hbm_write_bytes,
            hbm_bandwidth_gbps: bw,
            mbu_estimated_percent: mbu,
            model_flops: st.matmul_flops,
            hardware_flops: st.hardware_flops,
            transpose_flops: st.transpose_flops,
            tflops: per_s(st.matmul_flops) / 1e12,
            mfu_estimated_percent: 100.0 * per_s(st.matmul_flops) / peak,
            hfu_estimated_percent: 100.0 * per_s(st.hardware_flops) / peak,
            mm_arithmetic_intensity: intensity,
            roofline_bound_us: self.roofline_us(),
            roofline_ridge_flop_per_byte: ridge,
            roofline_side: if intensity >= ridge { "compute" } else { "memory" }.to_string(),
            sbuf_peak_bytes_per_partition: self.sbuf_reserved,
            sbuf_peak_percent: 100.0 * self.sbuf_reserved as f64
                / chip.memory.sbuf_bytes_per_partition as f64,
            psum_peak_banks: self.psum_reserved_banks,
            critical_path_us: crit_map,
            top_lines,
            bottleneck: Verdict {
                kind: String::new(),
                summary: String::new(),
                evidence: vec![],
                advice: vec![],
            },
            program_hash: hash,
            scheduling: (self.loops.loops > 0).then(|| {
                let mut counters =
                    self.timing.as_ref().map(|t| t.window.counters).unwrap_or_default();
                counters.scheduled += self.spmd.sched.scheduled;
                counters.reordered += self.spmd.sched.reordered;
                Scheduling {
                    affine_loops: self.loops.loops,
                    affine_iterations: self.loops.iterations,
                    list_scheduled_instruction_count: counters.scheduled,
                    reordered_instruction_count: counters.reordered,
                    window_iterations: WINDOW_ITERATIONS as u64,
                    window_instructions: WINDOW_INSTRUCTIONS as u64,
                }
            }),
            physical_cores: self.spmd.cores,
        };
        let short_runs = ShortRuns {
            bytes: self.stats.dma_short_run_bytes,
            total: self.stats.dma_bytes,
            run_bytes_weighted: self.stats.dma_short_run_weighted,
        };
        p.bottleneck = verdict(&p, &crit, self.timing.is_some(), &chip, short_runs);
        p
    }
}

/// What to do about a TensorE-bound kernel: only the remedies this program leaves open
/// (fp32 operands, part-filled matmuls, transposes on the PE array), each with its share.
/// At verdict time `model_flops` is still the matmuls' own 2·K·M·N sum, so what
/// `hardware_flops` holds beyond it and the transposes is the fp32 matmuls' second count.
fn tensor_advice(p: &Profile, chip: &Chip) -> String {
    let mut open = Vec::new();
    let fp32 = p.hardware_flops - p.transpose_flops - p.model_flops;
    if p.model_flops > 0.0 && fp32 > 0.5 {
        open.push(format!(
            "use bf16 operands ({:.0}% of the matmul FLOPs are fp32, {}x slower on the PE array)",
            100.0 * fp32 / p.model_flops,
            chip.tensor.fp32_factor
        ));
    }
    let t = &chip.tensor;
    let full =
        2.0 * chip.memory.partitions as f64 * t.stationary_fmax as f64 * t.moving_fmax as f64;
    // A matmul of moving N = 128 does a quarter of a full one's work in a quarter of its
    // cycles (cost max(min(64, N_stationary), N_moving), §2.3): only a PE array that does
    // little work while busy is worth filling, so the advice needs both.
    let busy_efficiency = match p.tensor_engine_active_time_percent {
        a if a > 0.0 => p.mfu_estimated_percent / a,
        _ => 0.0,
    };
    if p.matmul_instruction_count > 0 && busy_efficiency < 0.75 {
        let fill = p.model_flops / p.matmul_instruction_count as f64 / full;
        if fill < 0.75 {
            open.push(format!(
                "fill the PE array (a matmul averages {:.0}% of a full one: K {} × stationary {} × moving N {})",
                100.0 * fill,
                chip.memory.partitions,
                t.stationary_fmax,
                t.moving_fmax
            ));
        }
    }
    if p.transpose_flops > 0.0 && p.hardware_flops > 0.0 {
        open.push(format!(
            "take transposes off the PE array ({:.0}% of its FLOPs): load the operand transposed by DMA or in the layout the matmul reads",
            100.0 * p.transpose_flops / p.hardware_flops
        ));
    }
    let mfu = p.mfu_estimated_percent;
    if open.is_empty() {
        format!(
            "TensorE is the limit at {mfu:.0}% MFU with full bf16 matmuls and no transposes: do less matmul work, or hide the rest under it"
        )
    } else {
        format!("TensorE is the limit at {mfu:.0}% MFU: {}", open.join("; "))
    }
}

/// The bytes the DMAs moved in contiguous runs (descriptors) shorter than 2 KiB, the size
/// below which the per-descriptor cost dominates (§1.7 [DMABW]), out of all bytes moved,
/// and the sum of each such run's size times its bytes (for their byte-weighted mean run).
struct ShortRuns {
    bytes: u64,
    total: u64,
    run_bytes_weighted: f64,
}

/// Decide the bottleneck from the critical path (which work the end time waited for) and
/// back it with utilization numbers. Two shares are thresholds a reader should know: "load
/// larger tiles" when a quarter or more of the bytes move in runs under 2 KiB, and the
/// start-latency advice of a DMA-bound kernel when a quarter or more of its critical path
/// is DMA fixed cost (each a cause that is then no minor part of the time).
fn verdict(p: &Profile, crit: &[u32; 10], timed: bool, chip: &Chip, short: ShortRuns) -> Verdict {
    if !timed || p.kernel_time_us == 0.0 {
        return Verdict {
            kind: "Unknown".into(),
            summary: "no timing: the run did not use the timing model".into(),
            evidence: vec![],
            advice: vec!["run with the timing model to get a verdict".into()],
        };
    }
    let total: u64 = crit.iter().map(|&c| c as u64).sum::<u64>().max(1);
    let share = |i: usize| 100.0 * crit[i] as f64 / total as f64;
    // Waiting is charged to what was waited for: a busy DMA queue and HBM bandwidth to the
    // DMA side, a NeuronCore-v2 shared port to VectorE (the engine in both shared ports).
    let dma_share = share(CAT_DMA) + share(CAT_QUEUE) + share(CAT_HBM);
    let engine_share = |i: usize| share(i) + if i == 1 { share(CAT_PORT) } else { 0.0 };
    let mut best = (0usize, engine_share(0));
    for i in 1..4 {
        if engine_share(i) > best.1 {
            best = (i, engine_share(i));
        }
    }
    let engine_names = ["Tensor", "Vector", "Scalar", "GpSimd"];
    // Short runs matter in proportion to the bytes they move: a column of indices loaded
    // beside 2 KiB rows is many small descriptors but few bytes, and is not what the
    // transfers are made of (a mean per transfer or per descriptor would say it is).
    let short_share = if short.total > 0 { short.bytes as f64 / short.total as f64 } else { 0.0 };
    let short_run =
        if short.bytes > 0 { short.run_bytes_weighted / short.bytes as f64 } else { 0.0 };
    let mut evidence = vec![format!(
        "critical path: {}",
        CRIT_CATEGORIES
            .iter()
            .enumerate()
            .filter(|(i, _)| crit[*i] > 0)
            .map(|(i, n)| format!("{n} {:.0}%", share(i)))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    evidence.push(format!(
        "engines active: Tensor {:.0}%, Vector {:.0}%, Scalar {:.0}%, GpSimd {:.0}%; DMA queues {:.0}%",
        p.tensor_engine_active_time_percent,
        p.vector_engine_active_time_percent,
        p.scalar_engine_active_time_percent,
        p.gpsimd_engine_active_time_percent,
        p.dma_active_time_percent
    ));
    evidence.push(format!(
        "HBM {:.0} GB/s ({:.0}% of peak); {:.1} TFLOP/s ({:.0}% MFU); roofline bound {:.1} µs vs {:.1} µs achieved",
        p.hbm_bandwidth_gbps, p.mbu_estimated_percent, p.tflops, p.mfu_estimated_percent, p.roofline_bound_us, p.kernel_time_us
    ));
    if crit[CAT_PORT] > 0 {
        evidence.push(format!(
            "{:.0}% of the critical path waits for a shared SBUF/PSUM port (NeuronCore-v2, §1.8), charged to VectorE",
            share(CAT_PORT)
        ));
    }
    let mut advice = Vec::new();
    let small = short_share >= 0.25;
    let (kind, summary) = if p.launch_overhead_us > 2.0 * p.kernel_time_us {
        advice.push("the kernel is shorter than its launch: fuse it with its neighbours or batch more work per launch".into());
        (
            "Launch-bound".to_string(),
            format!(
                "Launch-bound: the kernel runs {:.1} µs but its launch costs {:.1} µs",
                p.kernel_time_us, p.launch_overhead_us
            ),
        )
    } else if dma_share >= best.1
        && dma_share >= share(CAT_DMA_FIXED)
        && dma_share >= share(CAT_LATENCY)
    {
        let mut s = if share(CAT_HBM) > share(CAT_DMA) + share(CAT_QUEUE) {
            format!(
                "DMA-bound: waiting for HBM bandwidth ({:.0}% of the critical path), HBM at {:.0}% of peak",
                share(CAT_HBM),
                p.mbu_estimated_percent
            )
        } else {
            format!(
                "DMA-bound: DMA queues transferring {:.0}% and busy with other transfers {:.0}% of the critical path (HBM at {:.0}% of peak)",
                share(CAT_DMA),
                share(CAT_QUEUE),
                p.mbu_estimated_percent
            )
        };
        if small {
            s.push_str(&format!(
                "; {:.0}% of the bytes move in contiguous runs of {short_run:.0} B on average, below the 2 KiB the hardware needs",
                100.0 * short_share
            ));
            advice.push(format!(
                "load larger tiles: runs of {short_run:.0} B pay the per-descriptor cost on every run; aim for contiguous runs of ≥ 2 KiB per partition (more free-axis elements per transfer, or a layout whose rows are contiguous)"
            ));
        }
        // Start latency on the critical path as well: transfers wait for each other's fixed
        // cost (a chain of dependent DMAs, or too few in flight).
        if share(CAT_DMA_FIXED) >= 25.0 {
            advice.push(format!(
                "{:.0}% of the critical path is DMA start latency ({:.1} µs per transfer, §1.7): keep more transfers in flight (raise bufs, issue loads a tile earlier) or hoist small dependent loads out of the loop",
                share(CAT_DMA_FIXED),
                chip.dma.fixed_ns / 1e3
            ));
        }
        if p.roofline_side == "memory" && p.matmul_instruction_count == 0 {
            // No matmul to feed: reuse cannot help, only moving fewer bytes.
            advice.push("no matmul here: the time is the bytes moved, so move fewer — fuse this kernel with the one before or after it (one pass over the data), keep intermediates in SBUF, or load and store a narrower dtype".into());
        } else if p.roofline_side == "memory" {
            advice.push(format!(
                "arithmetic intensity is {:.0} FLOP/B, under the {:.0} the PE array needs: reuse loaded tiles across more output blocks (block M/N) so each byte feeds more matmuls",
                p.mm_arithmetic_intensity, p.roofline_ridge_flop_per_byte
            ));
        } else {
            advice.push("the data moved is more than the math needs: check for reloads of the same tile inside inner loops".into());
        }
        ("DMA-bound".to_string(), s)
    } else if share(CAT_DMA_FIXED) >= best.1 && share(CAT_DMA_FIXED) >= share(CAT_LATENCY) {
        advice.push("each DMA pays ~µs of fixed latency on the critical path: raise bufs so the next loads start while this tile computes, and move more data per DMA".into());
        (
            "DMA-latency-bound".to_string(),
            format!(
            "DMA-latency-bound: {:.0}% of the critical path is DMA fixed cost over {} transfers",
            share(CAT_DMA_FIXED), p.dma_transfer_count
        ),
        )
    } else if share(CAT_LATENCY) > best.1 {
        advice.push("instructions wait for the results of the one before: interleave independent tiles (raise bufs) so engines pipeline".into());
        (
            "Latency-bound".to_string(),
            format!(
            "Latency-bound: {:.0}% of the critical path is dependency latency between instructions",
            share(CAT_LATENCY)
        ),
        )
    } else {
        let e = engine_names[best.0];
        let active = [
            p.tensor_engine_active_time_percent,
            p.vector_engine_active_time_percent,
            p.scalar_engine_active_time_percent,
            p.gpsimd_engine_active_time_percent,
        ][best.0];
        match best.0 {
            0 => advice.push(tensor_advice(p, chip)),
            1 => advice.push("VectorE is the limit: fuse element-wise ops (tensor_scalar with two ops), use bf16 SBUF operands for performance mode, or move work to ScalarE (activation with scale/bias) or GpSimd".into()),
            2 => advice.push("ScalarE is the limit: fold scale, bias and reduce into one activation, or move copies and tensor_scalar to VectorE".into()),
            _ => advice.push("GpSimd is the limit: it is the slowest engine; move element-wise work to VectorE and keep GpSimd for masks and iota".into()),
        }
        (
            format!("{e}-bound"),
            format!(
                "{e}-bound: {e}E active {active:.0}% of the time, {:.0}% of the critical path",
                best.1
            ),
        )
    };
    Verdict { kind, summary, evidence, advice }
}
