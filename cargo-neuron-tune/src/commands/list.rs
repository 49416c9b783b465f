//! `list`: kernels (parameters, spaces, shapes, valid variants) and models.

use crate::cargo::CargoFlags;
use crate::exit::{Exit, Failure};
use crate::output::Event;
use crate::workspace::{Ctx, Workspace};

pub fn run(cargo: &CargoFlags, ctx: &Ctx) -> Result<Exit, Failure> {
    let ws = Workspace::open(cargo, ctx)?;
    let out = &ctx.out;
    for c in &ws.crates {
        out.event(&Event::List {
            package: c.krate.package.clone(),
            kernels: c.list.kernels.clone(),
            models: c.list.models.clone(),
        });
        out.result(format!(
            "{} ({} kernels, {} models)",
            c.krate.package,
            c.list.kernels.len(),
            c.list.models.len()
        ));
        for k in &c.list.kernels {
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
            out.result(format!("  {:<18} {}", k.name, k.doc));
            out.result(format!("  {:<18} space: {}", "", params.join("  ")));
            let size = k.space.len();
            let shapes: Vec<String> = k
                .shapes
                .iter()
                .map(|(n, s)| match k.valid_variants.get(n) {
                    Some(c) if c.exact => format!("{n} {s} ({} of {size} valid)", c.valid),
                    Some(c) => format!("{n} {s} (≈{} of {size} valid, estimated)", c.valid),
                    None => format!("{n} {s}"),
                })
                .collect();
            out.result(format!("  {:<18} shapes: {}", "", shapes.join("; ")));
        }
        for m in &c.list.models {
            out.result(format!("  model {:<12} {}", m.name, m.doc));
        }
    }
    Ok(Exit::Ok)
}
