//! `list`: kernels (parameters, spaces, shapes, valid variants) and models.

use crate::cargo::CargoFlags;
use crate::eval::trace_stream;
use crate::exit::{Exit, Failure};
use crate::output::Event;
use crate::output::{sgr, Reporter, Table, TunedStatus};
use crate::select::{glob, Variant};
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::{ChipSpec, ValidCount};

/// The tuned records of the crate's kernels, each traced again to see whether its program
/// is still the one that was tuned.
fn tuned_status(
    ws: &mut Workspace,
    ci: usize,
    out: &Reporter,
) -> Result<Vec<TunedStatus>, Failure> {
    let c = &ws.crates[ci];
    // The crate's own database: another package's kernel of the same name is not this one.
    let dir = c.krate.manifest_path.parent().unwrap_or(std::path::Path::new(""));
    let mut status: Vec<TunedStatus> = ws
        .tuned
        .get()?
        .of_dir(dir)
        .map_or(&[][..], |db| db.records())
        .iter()
        .filter(|r| c.list.kernels.iter().any(|k| k.name == r.kernel))
        .map(|r| TunedStatus { record: r.clone(), stale: None })
        .collect();
    let pool = &mut ws.crates[ci].pool;
    for chip in neuron_sim::Chip::BUILTIN {
        let idx: Vec<usize> =
            (0..status.len()).filter(|&i| status[i].record.chip == *chip).collect();
        let variants: Vec<Variant> = idx
            .iter()
            .map(|&i| {
                let r = &status[i].record;
                Variant {
                    krate: None,
                    kernel: r.kernel.clone(),
                    shape_name: r.shape.clone(),
                    shape: r.dims.clone(),
                    params: r.params.clone(),
                }
            })
            .collect();
        let spec = ChipSpec::builtin(chip);
        trace_stream(pool, variants.into_iter(), &spec, out, &mut |j, _, t| {
            let s = &mut status[idx[j]];
            s.stale = Some(t.map_or(true, |t| t.program_hash != s.record.program_hash));
        })?;
    }
    Ok(status)
}

pub fn run(cargo: &CargoFlags, patterns: &[String], ctx: &Ctx) -> Result<Exit, Failure> {
    let mut ws = Workspace::open(cargo, ctx)?;
    let out = ctx.out.clone();
    let out = &out;
    let selected = |name: &str| patterns.is_empty() || patterns.iter().any(|p| glob(p, name));
    let lists: Vec<&neuron_tune_protocol::ListDoc> = ws.crates.iter().map(|c| &c.list).collect();
    let by_name = crate::cli::Selection { kernels: patterns.to_vec(), ..Default::default() };
    crate::select::check_names(&lists, &by_name, None, out)?;
    for ci in 0..ws.crates.len() {
        let mut tuned = tuned_status(&mut ws, ci, out)?;
        tuned.retain(|t| selected(&t.record.kernel));
        let c = &ws.crates[ci];
        let kernels: Vec<_> =
            c.list.kernels.iter().filter(|k| selected(&k.name)).cloned().collect();
        if kernels.is_empty() && !patterns.is_empty() {
            continue;
        }
        out.event(&Event::List {
            package: c.krate.package.clone(),
            kernels: kernels.clone(),
            models: c.list.models.clone(),
            tuned: tuned.clone(),
        });
        // With --kernel, how many of the crate's kernels are shown.
        let shown = match kernels.len() {
            n if n == c.list.kernels.len() => crate::convergence::count(n, "kernel"),
            n => format!("{n} of {} kernels", c.list.kernels.len()),
        };
        out.result(format!(
            "{} ({shown}, {})",
            c.krate.package,
            crate::convergence::count(c.list.models.len(), "model")
        ));
        // The name column fits the longest name, so the lines under it stay aligned.
        let w = kernels.iter().map(|k| k.name.chars().count()).max().unwrap_or(0).max(7);
        for k in &kernels {
            let params: Vec<String> = k
                .space
                .0
                .iter()
                .map(|(n, v)| {
                    format!(
                        "{n}∈{{{}}}",
                        v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
                    )
                })
                .collect();
            out.result(format!("  {:<w$}  {}", k.name, k.doc));
            out.result(format!("  {:<w$}  space: {}", "", params.join("  ")));
            out.result(format!("  {:<w$}  default: {}", "", k.defaults));
            let size = k.space.len();
            let shapes: Vec<String> = k
                .shapes
                .iter()
                .map(|(n, s)| shape_line(n, &s.to_string(), k.valid_variants.get(n), size))
                .collect();
            out.result(format!("  {:<w$}  shapes: {}", "", shapes.join("; ")));
        }
        if !tuned.is_empty() {
            out.result(format!("\n  tuned ({}):", crate::tuned::FILE_NAME));
            let mut t = Table::new(&["kernel", "chip", "shape", ">time µs", "params", "status"]);
            for s in &tuned {
                let r = &s.record;
                t.row(vec![
                    r.kernel.clone(),
                    r.chip.clone(),
                    if r.shape.contains('@') {
                        format!("{} {}", r.shape, r.dims)
                    } else {
                        r.shape.clone()
                    },
                    format!("{:.1}", r.time_us),
                    r.params.to_string(),
                    match s.stale {
                        Some(true) => "stale: the kernel changed since; tune it again",
                        None => "not checked: chip is not built in",
                        Some(false) => "current",
                    }
                    .into(),
                ]);
                if s.stale == Some(true) {
                    t.paint_last(5, sgr::YELLOW);
                }
            }
            out.table(&t, "  ");
        }
        if !c.list.models.is_empty() {
            out.result("");
            let mut t = Table::new(&["model", "shapes", "description"]);
            for m in &c.list.models {
                let shapes: Vec<&str> = m.shapes.iter().map(|(n, _)| n.as_str()).collect();
                t.row(vec![m.name.clone(), shapes.join(", "), m.doc.clone()]);
            }
            out.table(&t, "  ");
        }
    }
    Ok(Exit::Ok)
}

/// A named shape as `list` shows it: its dims and how many configurations of the space
/// (`size`) are valid there, and whether the default is not (`tune` warns about that too,
/// but only when asked to tune there).
fn shape_line(name: &str, dims: &str, count: Option<&ValidCount>, size: u64) -> String {
    let Some(c) = count else { return format!("{name} {dims}") };
    let valid = match c.exact {
        true => format!("{} of {size} valid", c.valid),
        false => format!("≈{} of {size} valid, estimated", c.valid),
    };
    let default = if c.default_valid { "" } else { "; the default is not" };
    format!("{name} {dims} ({valid}{default})")
}

#[cfg(test)]
mod tests {
    use super::shape_line;
    use neuron_tune_protocol::ValidCount;

    #[test]
    fn a_shape_says_how_many_variants_are_valid_and_when_the_default_is_not() {
        let count = |valid, exact, default_valid| ValidCount { valid, exact, default_valid };
        let line = |c: Option<ValidCount>| shape_line("small", "{n=4}", c.as_ref(), 2);
        assert_eq!(line(None), "small {n=4}");
        assert_eq!(line(Some(count(2, true, true))), "small {n=4} (2 of 2 valid)");
        assert_eq!(
            line(Some(count(1, true, false))),
            "small {n=4} (1 of 2 valid; the default is not)"
        );
        assert_eq!(
            line(Some(count(1, false, false))),
            "small {n=4} (≈1 of 2 valid, estimated; the default is not)"
        );
    }
}
