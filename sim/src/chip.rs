//! Chip descriptions: every number the simulator uses, as data.
//!
//! The three built-in chips carry the facts of `docs/neuroncore.md`; each field names the
//! section it comes from. Fields marked *fitted* are the few free constants of the timing
//! model, set so the calibration kernels land on the public measurements of §4.3 (see
//! the calibration suite, `fixtures/calibration`). A chip can also be read from TOML with exactly these fields,
//! to model a variant (another clock, a recalibrated constant); an unknown or missing field
//! is an error.

use serde::{Deserialize, Serialize};

/// One NeuronCore generation's parameters (one core; the simulator models one core).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chip {
    /// Short name: `trn1`, `trn2`, `trn3`, or the TOML file's own.
    pub name: String,
    /// NeuronCore version: 2 (Trn1/Inf2), 3 (Trn2), 4 (Trn3). Selects the generation's rules.
    pub neuroncore_version: u8,
    pub clocks: Clocks,
    pub memory: Memory,
    pub tensor: TensorEngine,
    pub vector: ComputeEngine,
    pub scalar: ComputeEngine,
    pub gpsimd: GpSimdEngine,
    pub dma: Dma,
    /// Fixed cost of launching a kernel, added to its end-to-end time (and per kernel
    /// invocation of a model). *fitted*: the trn2 vector-add ladder of §4.3 (a single
    /// [128 x 200] tile takes 15 µs end to end, ≈2.4 µs of it DMA and add).
    pub launch_overhead_ns: f64,
}

/// Engine clocks in GHz (neuroncore.md §1.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clocks {
    /// The profiler's base clock for `neuroncore_cycle_count` (§1.3, \[SCHEMA\]).
    pub base_ghz: f64,
    pub tensor_ghz: f64,
    pub vector_ghz: f64,
    pub scalar_ghz: f64,
    pub gpsimd_ghz: f64,
}

/// On-chip memory geometry (neuroncore.md §1.6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    pub partitions: u32,
    pub sbuf_bytes_per_partition: u64,
    pub psum_banks: u32,
    pub psum_bank_bytes_per_partition: u64,
    /// Largest free size, in elements, of a Vector/Scalar operand in SBUF (§2.1: 64K).
    pub max_free_elems_sbuf: u64,
    /// Largest free size, in elements, of a Vector/Scalar operand in PSUM (§2.1: 4K).
    pub max_free_elems_psum: u64,
    /// Shared HBM bandwidth of one core, bytes per ns (= GB/s / 1000 × 1000 … i.e. GB/s).
    pub hbm_gbps_per_core: f64,
}

/// TensorE (PE array) parameters (neuroncore.md §1.4, §2.3 `nc_matmul`, §2.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorEngine {
    /// MM_INIT_LATENCY: floor of a matmul's initiation interval in cycles (§2.4: 64).
    pub mm_min_cycles: u64,
    /// fp32 matmul costs this many times the bf16 time (§1.4, §2.3: 4).
    pub fp32_factor: u64,
    /// Largest stationary free size M (§2.1: 128).
    pub stationary_fmax: u64,
    /// Largest moving free size N (§2.1: 512 on v2/v3; 4096 fp32 on v4).
    pub moving_fmax: u64,
    /// Cycles from a TensorE result to its consumer (assumed: MM_INIT_LATENCY, §2.4).
    pub latency_cycles: u64,
}

/// VectorE or ScalarE parameters (neuroncore.md §2.3, §1.5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeEngine {
    /// MIN_II, the minimum initiation interval in cycles (§2.3: ≈64).
    pub min_ii_cycles: u64,
    /// Fixed cycles every instruction pays on top of its §2.3 formula: starting a tensor
    /// access costs about 60 cycles (§1.8 \[A1\]). The measured ScalarE busy time per PSUM
    /// eviction of the NKIBench matmul and bmm (calibration.md §1.7, §1.8: N + 53 to N + 62
    /// cycles) agrees.
    pub fixed_cycles: u64,
    /// Extra cycles before a dependent instruction can use the result: VectorE "+~100"
    /// (§2.3 "Other documented facts"), ScalarE 264 − 64 − 60 = 140 (§2.3, \[PERF\] 189 ns
    /// between back-to-back dependent one-element instructions at 1.4 GHz, less MIN_II and
    /// the fixed cost).
    pub latency_cycles: u64,
    /// VectorE `reciprocal` cycles per element. §2.3 documents `max(MIN_II, 8N)` ("about 8x
    /// slower than ScalarE") \[SHARED\], but the NKIBench silu and swiglu (calibration.md §1.4,
    /// §1.9) leave VectorE only 2.5N and 3.1N per fp32 [128 x 512] reciprocal beside their
    /// multiplies: *fitted* over the calibration suite at 3 (docs/calibration-results.md).
    /// Unused on ScalarE (its reciprocal is `max(MIN_II, N)`).
    pub reciprocal_cycles_per_elem: u64,
    /// Speed-up of bf16/fp16 SBUF-only copies and tensor_scalar ("performance mode"):
    /// 1 on v2; VectorE 4x on v3/v4 (§1.5); ScalarE 2x on v4 (§1.5).
    pub perf_mode_16bit: u64,
}

/// GpSimdE parameters (neuroncore.md §2.3 `iota`, `affine_select`, `local_gather`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpSimdEngine {
    pub min_ii_cycles: u64,
    /// GPSIMD_START, the fixed start of iota/affine_select/local_gather (§2.3: ≈150).
    pub start_cycles: u64,
    /// Extra cycles before a dependent instruction sees the result (assumed like VectorE).
    pub latency_cycles: u64,
}

/// DMA parameters (neuroncore.md §1.7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dma {
    /// DMA engines (queues) per core (§1.7: 16 on v2–v4).
    pub engines: u32,
    /// A transfer uses one engine per this many partitions, up to all engines
    /// (§1.7: "with 128 partitions each engine usually owns 8 partitions").
    pub partitions_per_engine: u32,
    /// Streaming rate of one engine in bytes/ns: the practical peak per engine of §1.7
    /// \[DMABW\] (TRN1 17, TRN2 23, TRN3 33 B/ns), what an engine moves with large descriptors;
    /// the theoretical rate (27.2 / 38.4 GB/s \[DMAOV\]) is never reached.
    pub engine_gbps: f64,
    /// *fitted* Latency from a DMA's trigger to its first byte (trigger, descriptor fetch,
    /// completion semaphore; §1.7 \[DMABW\] "~1,300 ns semaphore-to-start"), paid per
    /// transfer but overlapped with other transfers on the same queue.
    pub fixed_ns: f64,
    /// *fitted* Cost per DMA descriptor (one contiguous run of bytes) on its engine
    /// (§1.7 "overhead exists per buffer and per transfer"). This is what makes small
    /// per-partition transfers inefficient: efficiency = b / (b + descriptor_ns × rate).
    /// trn2's 16 ns gives 73 % at 1 KiB and 92 % at 4 KiB (the §4.3 descriptor-size curve,
    /// 259 → 354 GB/s); trn1's 4 ns is fitted over the calibration suite
    /// (docs/calibration-results.md).
    pub descriptor_ns: f64,
    /// Largest bytes per descriptor; a longer contiguous run is split.
    pub max_descriptor_bytes: u64,
}

impl Chip {
    /// A built-in chip by name.
    pub fn builtin(name: &str) -> Option<Chip> {
        match name {
            "trn1" => Some(Chip::trn1()),
            "trn2" => Some(Chip::trn2()),
            "trn3" => Some(Chip::trn3()),
            _ => None,
        }
    }

    /// Names of the built-in chips.
    pub const BUILTIN: [&'static str; 3] = ["trn1", "trn2", "trn3"];

    /// Trn1 / Inf2: NeuronCore-v2.
    pub fn trn1() -> Chip {
        Chip {
            name: "trn1".into(),
            neuroncore_version: 2,
            clocks: Clocks {
                base_ghz: 1.4,    // §1.3 profiler base clock Trn1 [SCHEMA]
                tensor_ghz: 2.8,  // §1.3 NC-v2 Tensor [A1]
                vector_ghz: 1.12, // §1.3 NC-v2 Vector [A1]
                scalar_ghz: 1.4,  // §1.3 NC-v2 Scalar [A1]
                gpsimd_ghz: 1.4,  // §1.3 NC-v2 GpSimd [A1]
            },
            memory: Memory {
                partitions: 128,                   // §1.6, §7
                sbuf_bytes_per_partition: 196_608, // §1.6: 24 MiB = 128 x 192 KiB [A1]
                psum_banks: 8,                     // §1.6: 8 banks x 2 KiB [A1]
                psum_bank_bytes_per_partition: 2048,
                max_free_elems_sbuf: 65_536, // §2.1 [A1]
                max_free_elems_psum: 4_096,  // §2.1 [A1]
                hbm_gbps_per_core: 410.0,    // §7 (derived: 820 GB/s per chip / 2 cores)
            },
            tensor: TensorEngine {
                mm_min_cycles: 64,    // §2.4 MM_INIT_LATENCY
                fp32_factor: 4,       // §1.4, §2.3
                stationary_fmax: 128, // §2.1
                moving_fmax: 512,     // §2.1 (v2/v3)
                latency_cycles: 64,   // assumed = MM_INIT_LATENCY (§2.4)
            },
            vector: ComputeEngine {
                min_ii_cycles: 64,             // §2.3 MIN_II
                fixed_cycles: 60,              // §1.8 access start [A1]
                reciprocal_cycles_per_elem: 3, // fitted (docs/calibration-results.md)
                latency_cycles: 100,           // §2.3 "+~100 if dependent" [A1]
                perf_mode_16bit: 1,            // v2 has no performance mode (§1.5)
            },
            scalar: ComputeEngine {
                min_ii_cycles: 64,             // §2.3 MIN_II
                fixed_cycles: 60,              // §1.8 access start [A1]
                reciprocal_cycles_per_elem: 1, // unused: ScalarE's reciprocal is N (§2.3)
                latency_cycles: 140, // §2.3: dependent every 264 cycles = 64 + 60 + 140 [PERF]
                perf_mode_16bit: 1,
            },
            gpsimd: GpSimdEngine {
                min_ii_cycles: 64,   // §2.3 MIN_II
                start_cycles: 150,   // §2.3 GPSIMD_START
                latency_cycles: 100, // assumed like VectorE (§2.3)
            },
            dma: Dma {
                engines: 16,              // §1.7 [DMAOV]
                partitions_per_engine: 8, // §1.7 [DMAOV]
                engine_gbps: 17.0,        // §1.7 practical peak per engine, TRN1 [DMABW]
                fixed_ns: 1300.0,         // §1.7 [DMABW] ~1,300 ns semaphore-to-start
                descriptor_ns: 4.0,       // fitted over the calibration suite
                max_descriptor_bytes: 65_536,
            },
            launch_overhead_ns: 11_000.0, // fitted on trn2 (§4.3); assumed equal on trn1
        }
    }

    /// Trn2: NeuronCore-v3.
    pub fn trn2() -> Chip {
        Chip {
            name: "trn2".into(),
            neuroncore_version: 3,
            clocks: Clocks {
                base_ghz: 1.2,    // §1.3 profiler base clock Trn2 [SCHEMA]
                tensor_ghz: 2.4,  // §1.3 NC-v3 Tensor [A2]
                vector_ghz: 0.96, // §1.3 NC-v3 Vector [A2]
                scalar_ghz: 1.2,  // §1.3 NC-v3 Scalar [A2]
                gpsimd_ghz: 1.2,  // §1.3 NC-v3 GpSimd [A2]
            },
            memory: Memory {
                partitions: 128,
                sbuf_bytes_per_partition: 229_376, // §1.6: 28 MiB = 128 x 224 KiB [A2]
                psum_banks: 8,                     // §1.6 "same layout" [A2]
                psum_bank_bytes_per_partition: 2048,
                max_free_elems_sbuf: 65_536,
                max_free_elems_psum: 4_096,
                hbm_gbps_per_core: 362.0, // §7: 2.9 TB/s / 8 physical cores (LNC=1)
            },
            tensor: TensorEngine {
                mm_min_cycles: 64, // §7: "assume same formula (uncertain)"
                fp32_factor: 4,
                stationary_fmax: 128,
                moving_fmax: 512,
                latency_cycles: 64,
            },
            vector: ComputeEngine {
                min_ii_cycles: 64,
                fixed_cycles: 60, // §1.8 (NC-v2 figure; none published for v3)
                reciprocal_cycles_per_elem: 3, // the trn1 fit, assumed
                latency_cycles: 100,
                perf_mode_16bit: 4, // §1.5 NC-v3 VectorE performance mode 4x
            },
            scalar: ComputeEngine {
                min_ii_cycles: 64,
                fixed_cycles: 60,
                reciprocal_cycles_per_elem: 1,
                latency_cycles: 140,
                perf_mode_16bit: 1,
            },
            gpsimd: GpSimdEngine { min_ii_cycles: 64, start_cycles: 150, latency_cycles: 100 },
            dma: Dma {
                engines: 16,
                partitions_per_engine: 8,
                engine_gbps: 23.0, // §1.7 practical peak per engine, TRN2 [DMABW, DMAOV]
                fixed_ns: 1300.0,  // §1.7 [DMABW]; matches the §4.3 vector-add ladder
                descriptor_ns: 16.0, // fitted over the calibration suite
                max_descriptor_bytes: 65_536,
            },
            launch_overhead_ns: 11_000.0, // fitted, §4.3 [128 x 200] vector add
        }
    }

    /// Trn3: NeuronCore-v4. Few v4 costs are published; where a number is missing the v3
    /// one is used and the field says so.
    pub fn trn3() -> Chip {
        let mut c = Chip::trn2();
        c.name = "trn3".into();
        c.neuroncore_version = 4;
        c.clocks = Clocks {
            base_ghz: 1.2,   // assumed = Trn2 (§1.3 gives no Trn3 base clock)
            tensor_ghz: 2.4, // §1.3 NC-v4 Tensor [A3]
            vector_ghz: 1.2, // §1.3 NC-v4 Vector [A3]
            scalar_ghz: 1.2, // §1.3 NC-v4 Scalar [A3]
            gpsimd_ghz: 1.2, // §1.3 NC-v4 GpSimd [A3]
        };
        c.memory.sbuf_bytes_per_partition = 262_144; // §1.6: 32 MiB = 128 x 256 KiB (derived)
        c.memory.hbm_gbps_per_core = 612.0; // derived: 4.9 TB/s (§1.1 [HW-trn3]) / 8 cores
        c.tensor.moving_fmax = 4096; // §2.1: v4 N up to 4096 (fp32 dst) = all 8 banks
        c.scalar.perf_mode_16bit = 2; // §1.5: NC-v4 ScalarE up to 2x for bf16/fp16
        c.dma.engine_gbps = 33.0; // §1.7 practical peak per engine, TRN3 [DMABW]
        c
    }

    /// Parse a chip from TOML text with exactly the fields of [`Chip`].
    pub fn from_toml(text: &str) -> Result<Chip, ChipError> {
        let chip: Chip = toml::from_str(text).map_err(|e| ChipError::Parse(e.to_string()))?;
        chip.validate()?;
        Ok(chip)
    }

    /// The chip as TOML (round-trips through [`Chip::from_toml`]).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a Chip always serializes")
    }

    /// Reject values the model cannot run with (zero clocks, no engines, …).
    pub fn validate(&self) -> Result<(), ChipError> {
        // The timing model counts whole picoseconds in 64 bits: a clock far above any
        // NeuronCore's (1.4–2.8 GHz) rounds its cycle to nothing, one far below overflows a
        // long run; the same for bandwidths. The bounds leave every plausible what-if open.
        let ranged = [
            ("clocks.base_ghz", self.clocks.base_ghz, 0.01, 100.0),
            ("clocks.tensor_ghz", self.clocks.tensor_ghz, 0.01, 100.0),
            ("clocks.vector_ghz", self.clocks.vector_ghz, 0.01, 100.0),
            ("clocks.scalar_ghz", self.clocks.scalar_ghz, 0.01, 100.0),
            ("clocks.gpsimd_ghz", self.clocks.gpsimd_ghz, 0.01, 100.0),
            ("memory.hbm_gbps_per_core", self.memory.hbm_gbps_per_core, 0.1, 1e5),
            ("dma.engine_gbps", self.dma.engine_gbps, 0.1, 1e5),
        ];
        for (field, v, lo, hi) in ranged {
            if !(v.is_finite() && v > 0.0) {
                return Err(ChipError::Invalid(format!("{field} must be > 0, got {v}")));
            }
            if !(lo..=hi).contains(&v) {
                return Err(ChipError::Invalid(format!(
                    "{field} must be between {lo} and {hi}, got {v}"
                )));
            }
        }
        let non_negative = [
            ("dma.fixed_ns", self.dma.fixed_ns),
            ("dma.descriptor_ns", self.dma.descriptor_ns),
            ("launch_overhead_ns", self.launch_overhead_ns),
        ];
        for (field, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ChipError::Invalid(format!("{field} must be >= 0, got {v}")));
            }
        }
        let counts = [
            ("memory.partitions", self.memory.partitions as u64),
            ("memory.psum_banks", self.memory.psum_banks as u64),
            ("memory.sbuf_bytes_per_partition", self.memory.sbuf_bytes_per_partition),
            ("memory.psum_bank_bytes_per_partition", self.memory.psum_bank_bytes_per_partition),
            ("memory.max_free_elems_sbuf", self.memory.max_free_elems_sbuf),
            ("memory.max_free_elems_psum", self.memory.max_free_elems_psum),
            ("tensor.stationary_fmax", self.tensor.stationary_fmax),
            ("tensor.moving_fmax", self.tensor.moving_fmax),
            ("dma.engines", self.dma.engines as u64),
            ("dma.partitions_per_engine", self.dma.partitions_per_engine as u64),
            ("dma.max_descriptor_bytes", self.dma.max_descriptor_bytes),
            ("tensor.fp32_factor", self.tensor.fp32_factor),
            ("vector.perf_mode_16bit", self.vector.perf_mode_16bit),
            ("scalar.perf_mode_16bit", self.scalar.perf_mode_16bit),
            ("vector.reciprocal_cycles_per_elem", self.vector.reciprocal_cycles_per_elem),
        ];
        for (field, v) in counts {
            if v == 0 {
                return Err(ChipError::Invalid(format!("{field} must be at least 1")));
            }
        }
        if self.dma.engines > 64 {
            return Err(ChipError::Invalid(format!(
                "dma.engines must be at most 64 (the timing model tracks DMA engines in a 64-bit \
                 mask; NeuronCores have 16, §1.7), got {}",
                self.dma.engines
            )));
        }
        if self.memory.partitions > 128 {
            return Err(ChipError::Invalid(format!(
                "memory.partitions must be at most 128 (the partition rules of §1.8), got {}",
                self.memory.partitions
            )));
        }
        if !(2..=4).contains(&self.neuroncore_version) {
            return Err(ChipError::Invalid(format!(
                "neuroncore_version must be 2, 3 or 4, got {}",
                self.neuroncore_version
            )));
        }
        Ok(())
    }

    /// Peak dense bf16 FLOP/s of the PE array: 128 x 128 PEs x 2 FLOP x clock (§1.4 derived).
    pub fn peak_bf16_flops(&self) -> f64 {
        128.0 * 128.0 * 2.0 * self.clocks.tensor_ghz * 1e9
    }

    /// Whether the chip's DMA transpose (`Nc::dma_transpose`) can be simulated: its rate is
    /// published from NeuronCore-v3 (Trn2) on; NeuronCore-v2's is only "much lower
    /// bandwidth" (docs/neuroncore.md §1.7, §2.5). Kernels choose their transpose path by it.
    pub fn has_dma_transpose(&self) -> bool {
        self.neuroncore_version >= 3
    }

    /// The most programs an [`Nc::spmd`](crate::Nc::spmd) launch may run: the physical
    /// NeuronCores of one logical core. NKI supports an LNC degree of 1 or 2 on Trn2 and
    /// Trn3, and trn1 supports only LNC=1 (neuroncore.md §2.1 [LNC, LNCK]); the built-in
    /// chips run at their default, LNC=2 from NeuronCore-v3 on.
    pub fn max_programs(&self) -> u32 {
        if self.neuroncore_version >= 3 {
            2
        } else {
            1
        }
    }

    /// Effective DMA efficiency for transfers of `bytes_per_descriptor`: the fraction of
    /// an engine's streaming rate left after the per-descriptor cost.
    pub fn dma_efficiency(&self, bytes_per_descriptor: u64) -> f64 {
        let b = bytes_per_descriptor as f64;
        b / (b + self.dma.descriptor_ns * self.dma.engine_gbps)
    }
}

/// A chip description that could not be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ChipError {
    #[error("invalid chip TOML: {0}")]
    Parse(String),
    #[error("invalid chip: {0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_chips_round_trip_through_toml() {
        for name in Chip::BUILTIN {
            let chip = Chip::builtin(name).unwrap();
            chip.validate().unwrap();
            assert_eq!(Chip::from_toml(&chip.to_toml()).unwrap(), chip, "{name}");
        }
    }

    #[test]
    fn unknown_field_is_an_error() {
        let mut text = Chip::trn2().to_toml();
        text = text.replace("[clocks]", "[clocks]\nturbo_ghz = 9.0");
        let err = Chip::from_toml(&text).unwrap_err().to_string();
        assert!(err.contains("unknown field `turbo_ghz`"), "{err}");
    }

    #[test]
    fn missing_field_and_bad_value_are_errors() {
        let text = Chip::trn2().to_toml().replace("launch_overhead_ns = 11000.0\n", "");
        let err = Chip::from_toml(&text).unwrap_err().to_string();
        assert!(err.contains("missing field `launch_overhead_ns`"), "{err}");
        let text = Chip::trn2().to_toml().replace("tensor_ghz = 2.4", "tensor_ghz = 0.0");
        let err = Chip::from_toml(&text).unwrap_err().to_string();
        assert!(err.contains("clocks.tensor_ghz must be > 0"), "{err}");
        let text = Chip::trn2().to_toml().replace("engines = 16", "engines = 65");
        assert_ne!(text, Chip::trn2().to_toml(), "the TOML spells `engines = 16`");
        let err = Chip::from_toml(&text).unwrap_err().to_string();
        assert!(err.contains("dma.engines must be at most 64") && err.contains("got 65"), "{err}");
    }

    /// Every size and count the builder divides by or allocates from must be at least 1,
    /// and clocks and bandwidths within what the picosecond timing model can count (a
    /// zero PSUM bank size panicked a kernel; a 1e-300 GHz TensorE made a GEMM faster).
    #[test]
    fn sizes_of_zero_and_unrunnable_clocks_are_refused_naming_the_field() {
        let trn2 = Chip::trn2().to_toml();
        for (line, field) in [
            ("psum_bank_bytes_per_partition = 2048", "memory.psum_bank_bytes_per_partition"),
            ("sbuf_bytes_per_partition = 229376", "memory.sbuf_bytes_per_partition"),
            ("max_free_elems_sbuf = 65536", "memory.max_free_elems_sbuf"),
            ("max_free_elems_psum = 4096", "memory.max_free_elems_psum"),
            ("stationary_fmax = 128", "tensor.stationary_fmax"),
            ("moving_fmax = 512", "tensor.moving_fmax"),
        ] {
            let key = line.split(" = ").next().unwrap();
            assert!(trn2.contains(line), "trn2's TOML spells `{line}`");
            let text = trn2.replace(line, &format!("{key} = 0"));
            let err = Chip::from_toml(&text).unwrap_err().to_string();
            assert!(err.contains(&format!("{field} must be at least 1")), "{err}");
        }
        for (value, ok) in
            [("1e-300", false), ("0.001", false), ("0.01", true), ("100.0", true), ("1e9", false)]
        {
            let text = trn2.replace("tensor_ghz = 2.4", &format!("tensor_ghz = {value}"));
            match Chip::from_toml(&text) {
                Ok(_) => assert!(ok, "{value} accepted"),
                Err(e) => {
                    assert!(!ok, "{value}: {e}");
                    assert!(e
                        .to_string()
                        .contains("clocks.tensor_ghz must be between 0.01 and 100"));
                }
            }
        }
        let text = trn2.replace("engine_gbps = 23.0", "engine_gbps = 1e-9");
        assert_ne!(text, trn2, "trn2's TOML spells `engine_gbps = 23.0`");
        assert!(Chip::from_toml(&text).unwrap_err().to_string().contains("dma.engine_gbps"));
    }

    #[test]
    fn peak_matches_documented_per_core_tflops() {
        // §1.4: NC-v2 ≈ 92 TFLOPS bf16, NC-v3 79.
        assert!((Chip::trn1().peak_bf16_flops() / 1e12 - 91.75).abs() < 0.1);
        assert!((Chip::trn2().peak_bf16_flops() / 1e12 - 78.6).abs() < 0.1);
    }
}
