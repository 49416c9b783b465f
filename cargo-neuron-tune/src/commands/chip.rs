//! `chip`: print a chip description as TOML, so that a user's own chip file starts from a
//! complete, valid one (the format is docs/chip-toml.md) rather than from a blank page.

use crate::exit::{Exit, Failure};
use crate::output::{Event, Reporter};

pub fn run(chip: &str, out: &Reporter) -> Result<Exit, Failure> {
    // Its argument is positional here, not `--chip`.
    let spec = crate::select::chip_spec(chip).map_err(|f| crate::exit::Failure {
        message: f.message.strip_prefix("--chip ").unwrap_or(&f.message).to_string(),
        ..f
    })?;
    // Printed as the simulator reads it (every field, normalised), which also shows what a
    // hand-written file means; `chip_spec` validated it.
    let parsed = crate::select::chip_of(&spec).expect("chip_spec accepted it");
    let toml = parsed.to_toml();
    out.event(&Event::Chip { name: spec.name.clone(), toml: toml.clone() });
    out.result(format!(
        "# Chip `{}` as neuron-sim reads it (docs/chip-toml.md describes every field).\n\
         # To use it as --chip NAME.toml, set name = \"NAME\" (the file's stem).\n{}",
        spec.name,
        toml.trim_end()
    ));
    // What the numbers mean, on stderr so that stdout stays a chip file.
    for line in derived(&parsed) {
        out.status(format!("   {line}"));
    }
    Ok(Exit::Ok)
}

/// The figures a chip's fields add up to, as the simulator uses them.
fn derived(c: &neuron_sim::Chip) -> Vec<String> {
    let peak = c.peak_bf16_flops();
    let hbm = c.memory.hbm_gbps_per_core;
    let dma = f64::from(c.dma.engines) * c.dma.engine_gbps;
    let kib = |b: u64| b as f64 / 1024.0;
    let parts = u64::from(c.memory.partitions);
    vec![
        format!(
            "TensorE peak {:.1} TFLOP/s bf16 (128 × 128 PEs × 2 FLOP × {} GHz), fp32 {}× slower",
            peak / 1e12,
            c.clocks.tensor_ghz,
            c.tensor.fp32_factor
        ),
        format!(
            "HBM {hbm} GB/s per core; DMA {} engines × {} GB/s = {dma:.0} GB/s; ridge point {:.0} FLOP/byte",
            c.dma.engines,
            c.dma.engine_gbps,
            peak / (hbm * 1e9)
        ),
        format!(
            "SBUF {:.0} KiB × {parts} partitions = {:.1} MiB; PSUM {} banks × {:.0} KiB × {parts} \
             partitions = {:.1} MiB",
            kib(c.memory.sbuf_bytes_per_partition),
            kib(c.memory.sbuf_bytes_per_partition * parts) / 1024.0,
            c.memory.psum_banks,
            kib(c.memory.psum_bank_bytes_per_partition),
            kib(c.memory.psum_bank_bytes_per_partition * u64::from(c.memory.psum_banks) * parts)
                / 1024.0
        ),
        format!("launch overhead {:.1} µs per kernel call", c.launch_overhead_ns / 1e3),
    ]
}

#[cfg(test)]
mod tests {
    /// Every field of every built-in chip (as `section.field`) is described in the format's
    /// documentation: adding a field to the simulator without documenting it fails here.
    #[test]
    fn docs_describe_every_chip_field() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/chip-toml.md"),
        )
        .expect("docs/chip-toml.md exists");
        for name in neuron_sim::Chip::BUILTIN {
            let chip = neuron_sim::Chip::builtin(name).unwrap();
            let table: toml::Table = toml::from_str(&chip.to_toml()).unwrap();
            let mut fields = Vec::new();
            for (k, v) in &table {
                match v {
                    toml::Value::Table(t) => fields.extend(t.keys().map(|f| format!("{k}.{f}"))),
                    _ => fields.push(k.clone()),
                }
            }
            assert!(fields.len() > 20, "{fields:?}");
            let missing: Vec<_> =
                fields.iter().filter(|f| !doc.contains(&format!("`{f}`"))).collect();
            assert!(missing.is_empty(), "docs/chip-toml.md does not describe {missing:?}");
        }
    }
}
