//! `build`: trace the selected variants into the store (program hash, size, footprint).

use super::{open_store, report_failure};
use crate::cargo::CargoFlags;
use crate::cli::Selection;
use crate::eval::trace_stream;
use crate::exit::{fail, Exit, Failure};
use crate::output::{Event, Summary};
use crate::select::{check_patterns, chip_spec, select};
use crate::workspace::{Ctx, Workspace};

pub fn run(cargo: &CargoFlags, s: &Selection, ctx: &Ctx) -> Result<Exit, Failure> {
    let mut ws = Workspace::open(cargo, ctx)?;
    let store = open_store(&ws.target_dir, &ctx.out)?;
    let chip = chip_spec(&s.chip)?;
    check_patterns(&ws.crates.iter().map(|c| &c.list).collect::<Vec<_>>(), s, &ctx.out)?;
    let out = &ctx.out;
    let (mut total, mut invalid, mut crashed) = (0, 0, 0);
    for c in &mut ws.crates {
        let selected = select(&c.list, s)?;
        let variants = selected.iter().flat_map(|k| k.variants());
        let mut write_error = None;
        trace_stream(&mut c.pool, variants, &chip, out, &mut |_, v, t| {
            total += 1;
            match t {
                Ok(t) => {
                    let entry = serde_json::json!({"kernel": v.kernel, "shape": v.shape, "params": v.params, "chip": chip.name, "trace": t});
                    if let Err(e) = store.put("variants", &t.program_hash, &entry) {
                        write_error.get_or_insert(e);
                    }
                    out.event(&Event::Build {
                        kernel: v.kernel.clone(),
                        shape: v.shape_name.clone(),
                        params: v.params.clone(),
                        chip: chip.name.clone(),
                        program_hash: t.program_hash.clone(),
                        instruction_count: t.instruction_count,
                        sbuf_bytes_per_partition: t.sbuf_bytes_per_partition,
                    });
                    out.result(format!(
                        "  traced {:<16} {:<14} {:<40} {:>9} instructions  {}",
                        v.kernel,
                        v.shape_name,
                        v.params.to_string(),
                        t.instruction_count,
                        &t.program_hash[..12]
                    ));
                }
                Err(e) => {
                    if report_failure(out, &v, &chip.name, &e) {
                        invalid += 1;
                    } else {
                        crashed += 1;
                    }
                }
            }
        })?;
        if let Some(e) = write_error {
            return Err(fail(Exit::Internal, format!("writing the store: {e:#}")));
        }
    }
    out.flush_invalid();
    out.event(&Event::Summary(Summary {
        command: "build".into(),
        variants: total,
        failed: Some(crashed),
        ..Default::default()
    }));
    Ok(super::variants_exit(out, "build", total - invalid - crashed, invalid, crashed))
}
