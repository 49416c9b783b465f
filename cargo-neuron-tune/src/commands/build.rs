//! `build`: trace the selected variants into the store (program hash, size, footprint).
//!
//! Traces finish in any order; the table on stdout is in grid order (kernel, shape, then
//! the space's order), as `bench`'s, so two runs print the same lines. Events stream as
//! each trace finishes.

use super::bench::FailedVariant;
use super::{open_store, report_failure};
use crate::cargo::CargoFlags;
use crate::cli::Selection;
use crate::eval::trace_stream;
use crate::exit::{fail, Exit, Failure};
use crate::output::{Event, Reporter, Summary, Table};
use crate::select::{chip_spec, Variant};
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::TraceResult;

pub fn run(cargo: &CargoFlags, s: &Selection, ctx: &Ctx) -> Result<Exit, Failure> {
    // A chip name or file is checked before anything is built.
    let chip = chip_spec(&s.chip)?;
    let mut ws = Workspace::open(cargo, ctx)?;
    let store = open_store(&ws.target_dir, &ctx.out)?;
    let at_models = crate::model_calls::checked_selection(&mut ws, s, &chip, &ctx.out)?;
    let out = &ctx.out;
    let (mut total, mut invalid) = (0, 0);
    // Every variant traced, and those whose kernel code panicked, crashed or hung (rows of
    // the table too, as in `bench`), by their place in the grid.
    let mut rows: Vec<(usize, Row)> = Vec::new();
    let mut offset = 0;
    for (i, c) in ws.crates.iter_mut().enumerate() {
        let selected = super::select_in_crate(&ws.tuned, s, (i, c), &chip.name, &at_models)?;
        crate::select::note_untuned(&selected, &chip.name, out);
        let variants = selected.iter().flat_map(|k| k.variants());
        let mut write_error = None;
        let mut n = 0;
        trace_stream(&mut c.pool, variants, &chip, out, &mut |index, v, t| {
            total += 1;
            n += 1;
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
                    rows.push((offset + index, Row::Traced(v, t)));
                }
                Err(e) => {
                    if report_failure(out, &v, &chip.name, &e) {
                        invalid += 1;
                    } else {
                        rows.push((offset + index, Row::Failed(FailedVariant::new(v, &e))));
                    }
                }
            }
        })?;
        if let Some(e) = write_error {
            return Err(fail(Exit::Internal, format!("writing the store: {e:#}")));
        }
        offset += n;
    }
    rows.sort_by_key(|r| r.0);
    let crashed = rows.iter().filter(|(_, r)| matches!(r, Row::Failed(_))).count();
    print_table(out, &rows);
    out.flush_invalid();
    out.event(&Event::Summary(Summary {
        command: "build".into(),
        variants: total,
        failed: Some(crashed),
        ..Default::default()
    }));
    let built = total - invalid - crashed;
    let crashed_words = match crashed {
        0 => String::new(),
        n => format!(", {n} crashed or hung"),
    };
    out.status(format!(
        "   {} built, {invalid} invalid{crashed_words}",
        crate::convergence::count(built, "variant")
    ));
    Ok(super::variants_exit(out, "build", built, invalid, crashed))
}

/// A line of the table: a variant traced, or one whose kernel code failed.
enum Row {
    Traced(Variant, TraceResult),
    Failed(FailedVariant),
}

/// The table on stdout, in grid order: each variant's program size, SBUF footprint (KiB
/// per partition, the peak of its pools) and program hash; a failed one with its status.
fn print_table(out: &Reporter, rows: &[(usize, Row)]) {
    if rows.is_empty() {
        return;
    }
    let mut t = Table::new(&[
        "kernel",
        "shape",
        "params",
        ">instructions",
        ">SBUF KiB/partition",
        "program hash",
    ]);
    for (_, row) in rows {
        t.row(match row {
            Row::Traced(v, trace) => vec![
                v.kernel.clone(),
                v.shape_name.clone(),
                v.params.to_string(),
                trace.instruction_count.to_string(),
                format!("{:.1}", trace.sbuf_bytes_per_partition as f64 / 1024.0),
                trace.program_hash[..12.min(trace.program_hash.len())].to_string(),
            ],
            Row::Failed(f) => vec![
                f.variant.kernel.clone(),
                f.variant.shape_name.clone(),
                f.variant.params.to_string(),
                "-".into(),
                "-".into(),
                f.kind.clone(),
            ],
        });
    }
    out.table(&t, "  ");
}
