//! `profile`: one variant in full: where the time goes, the bottleneck verdict with its
//! evidence and advice, the top source lines, and optionally a Perfetto trace.

use crate::cargo::CargoFlags;
use crate::eval::{unexpected, variant_ref};
use crate::exit::{fail, Exit, Failure};
use crate::output::{show_output, Event, Reporter};
use crate::select::{chip_spec, parse_params, Variant};
use crate::store::write_atomic;
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::{Params, ProfileSummary, RequestBody, ResponseBody, Shape};
use std::path::Path;

pub struct Args<'a> {
    pub kernel: &'a str,
    pub params: Option<&'a str>,
    /// `--tuned`: the tuned database's parameters for the kernel, chip and shape.
    pub tuned: bool,
    pub shape: Option<&'a str>,
    pub chip: &'a str,
    pub trace: Option<&'a Path>,
}

pub fn run(cargo: &CargoFlags, a: &Args, ctx: &Ctx) -> Result<Exit, Failure> {
    // A chip name or file is checked before anything is built.
    let chip = chip_spec(a.chip)?;
    let mut ws = Workspace::open(cargo, ctx)?;
    let names = ws.kernel_names();
    let out = &ctx.out;
    // A name or a glob, as `--kernel` is elsewhere; a profile is of one kernel.
    let matching: Vec<String> = ws
        .crates
        .iter()
        .flat_map(|c| &c.list.kernels)
        .filter(|k| crate::select::glob(a.kernel, &k.name))
        .map(|k| k.name.clone())
        .collect();
    let name = match matching.as_slice() {
        [one] => one.clone(),
        [] => return Err(fail(Exit::Config, format!("no kernel `{}` (have: {names})", a.kernel))),
        several => {
            return Err(fail(
                Exit::Config,
                format!(
                    "`{}` matches {} kernels ({}): profile takes one",
                    a.kernel,
                    several.len(),
                    several.join(", ")
                ),
            ))
        }
    };
    // `--shape MODEL@SHAPE`: the kernel at the dims the model calls it with there, in the
    // crate the model runs it from; it must be one call (dims after the shape pick one).
    let lists: Vec<&neuron_tune_protocol::ListDoc> = ws.crates.iter().map(|c| &c.list).collect();
    let at_model = match a.shape {
        Some(v) if crate::model_calls::is_model_shape(&lists, v) => {
            let calls =
                crate::model_calls::resolve_one(&mut ws, v, std::slice::from_ref(&name), &chip)?;
            match <[_; 1]>::try_from(calls) {
                Ok([call]) => Some(call),
                Err(calls) => {
                    let labels: Vec<String> =
                        calls.iter().map(|c| format!("`{}`", c.label)).collect();
                    return Err(fail(
                        Exit::Config,
                        format!(
                            "--shape {v}: the model calls `{name}` at {} dims there ({}): \
                             profile takes one; give its dims, as its label does",
                            calls.len(),
                            labels.join(", ")
                        ),
                    ));
                }
            }
        }
        _ => None,
    };
    let index = match &at_model {
        Some(call) => call.krate,
        None => ws
            .crates
            .iter()
            .position(|c| c.list.kernels.iter().any(|k| k.name == name))
            .expect("matched above"),
    };
    let c = &mut ws.crates[index];
    let k = c.list.kernels.iter().find(|k| k.name == name).cloned().expect("listed");
    let mut params = parse_params(&k, a.params)?;
    let (shape_name, shape) = match a.shape {
        Some(_) if at_model.is_some() => {
            let call = at_model.expect("a model's call");
            (call.label, call.shape)
        }
        Some(n) => k.shapes.iter().find(|(s, _)| s == n).cloned().ok_or_else(|| {
            let have: Vec<&str> = k.shapes.iter().map(|(s, _)| s.as_str()).collect();
            fail(
                Exit::Config,
                format!("kernel `{}` has no shape `{n}` (it has: {})", k.name, have.join(", ")),
            )
        })?,
        // The smallest (fewest elements over all dims; ties by name): a profile is a quick
        // look, and the named shapes run from a test size to a whole model's.
        None => {
            let size = |s: &Shape| s.0.values().fold(1u128, |n, &d| n.saturating_mul(d as u128));
            let picked = k
                .shapes
                .iter()
                .min_by(|(an, a), (bn, b)| size(a).cmp(&size(b)).then(an.cmp(bn)))
                .cloned()
                .ok_or_else(|| fail(Exit::Config, format!("kernel `{}` has no shapes", k.name)))?;
            if k.shapes.len() > 1 {
                let names: Vec<&str> = k.shapes.iter().map(|(n, _)| n.as_str()).collect();
                out.status(format!(
                    "   Profiling at `{}`, the smallest of {}'s shapes ({}); --shape picks another",
                    picked.0,
                    k.name,
                    names.join(", ")
                ));
            }
            picked
        }
    };
    // Without --params the default is profiled; say so when the tuned database has a
    // winner for this problem, which is what the models run. A damaged database does not
    // change what is profiled, so profile goes on, but says that it cannot name a winner.
    if a.tuned {
        let dir = c.krate.manifest_path.parent().unwrap_or(Path::new(""));
        let record =
            ws.tuned.get()?.of_dir(dir).and_then(|db| db.find(&k.name, &chip.name, &shape));
        match record {
            Some(r) => {
                params = r.params.clone();
                out.status(format!(
                    "   Profiling {}'s tuned parameters at `{shape_name}` on {} (tuned at {:.2} µs)",
                    k.name, chip.name, r.time_us
                ));
            }
            None => out.note(format!(
                "note: `{}` has no tuned record on {} at shape {shape_name}: profiling its \
                 default ({params})",
                k.name, chip.name
            )),
        }
    } else if a.params.is_none() {
        let left_out = format!(
            "profile runs {}'s default parameters, as without it, but a winner it records at \
             this shape is not named",
            k.name
        );
        // The crate's own database: another package's kernel of the same name is not this one.
        let dir = c.krate.manifest_path.parent().unwrap_or(Path::new(""));
        let recorded = super::tuned_to_mention(&ws.tuned, out, &left_out).and_then(|set| {
            let r = set.of_dir(dir)?.find(&k.name, &chip.name, &shape)?;
            (r.params != params).then(|| r.params.clone())
        });
        if let Some(p) = recorded {
            out.note(format!(
                "note: profiling {}'s default parameters; the tuned database's winner at this \
                 shape is {p} (`--tuned` profiles it)",
                k.name
            ));
        }
    }
    let v = Variant {
        krate: None,
        kernel: k.name.clone(),
        shape_name: shape_name.clone(),
        shape,
        params: params.clone(),
    };
    let done = c.pool.request(RequestBody::Profile {
        variant: variant_ref(&v, &chip),
        trace: a.trace.is_some(),
    })?;
    show_output(out, &v.kernel, &shape_name, &params, &done.output);
    let r = match done.answer {
        Ok(ResponseBody::Bench(r)) => r,
        Ok(other) => return Err(unexpected(&other)),
        // A variant its rules or the hardware's refuse is not one to profile: a usage error,
        // as in `bench`. Kernel code that failed is exit 4.
        Err(e) => {
            let exit = if e.kind.is_invalid_variant() { Exit::Config } else { Exit::Check };
            return Err(fail(exit, format!("{} {params} at {shape_name}: {e}", k.name)));
        }
    };
    let prof = r.profile.clone().unwrap_or_default();
    if let (Some(path), Some(t)) = (a.trace, &r.trace) {
        // As every output file: missing parent directories are made, the file replaced
        // atomically. One under a file or naming a directory was refused (exit 2) when the
        // arguments were parsed (`cli::output_file`), before anything was built or simulated.
        write_atomic(path, t.as_bytes())
            // A file that cannot be written is exit 1, as documented (not a usage error).
            .map_err(|e| fail(Exit::Internal, format!("--trace {}: {e:#}", path.display())))?;
        out.status(format!("   Wrote Perfetto trace {} (open in ui.perfetto.dev)", path.display()));
    }
    out.event(&Event::Profile {
        kernel: k.name.clone(),
        shape: shape_name.clone(),
        params: params.clone(),
        chip: chip.name.clone(),
        cycles: r.cycles,
        time_us: r.time_us,
        tflops: r.tflops,
        bottleneck: r.bottleneck.clone(),
        profile: Box::new(prof.clone()),
        trace: a.trace.map(Path::to_path_buf),
    });
    print_profile(out, &k.name, &shape_name, &params, &prof);
    Ok(Exit::Ok)
}

fn print_profile(out: &Reporter, kernel: &str, shape: &str, p: &Params, prof: &ProfileSummary) {
    // An SPMD launch's figures are summed over its cores and rated against all of them.
    let cores = match prof.physical_cores {
        Some(n) if n > 1 => {
            format!(" ({n} physical cores: work summed over them, rates against {n} × a core's)")
        }
        _ => String::new(),
    };
    out.result(format!("\n  {kernel} {p} at {shape} on {}{cores}", prof.chip));
    out.result(format!(
        "  time {:.1} µs ({:.1} µs kernel + {:.1} µs launch), {} cycles",
        prof.total_time_us,
        prof.kernel_time_us,
        prof.launch_overhead_us,
        prof.neuroncore_cycle_count
    ));
    out.result(format!(
        "  {:.2} TFLOP/s, MFU {:.1}%, HBM {:.0} GB/s (MBU {:.0}%), roofline bound {:.1} µs",
        prof.tflops,
        prof.mfu_estimated_percent,
        prof.hbm_bandwidth_gbps,
        prof.mbu_estimated_percent,
        prof.roofline_bound_us
    ));
    let b = &prof.bottleneck;
    out.result(format!("\n  {}", b.summary));
    for e in &b.evidence {
        out.result(format!("    · {e}"));
    }
    for a in &b.advice {
        out.result(format!("    → {a}"));
    }
    // A line's busy time adds up every engine and DMA queue that ran its instructions, and a
    // transfer is split over queues that run at once: the header says so, or a DMA line
    // busy for more than the kernel's whole time reads as a bug.
    out.result(format!(
        "\n  top source lines by busy time (summed over engines and DMA queues: a DMA line \
         can exceed the {:.1} µs kernel):",
        prof.kernel_time_us
    ));
    out.result(format!("    {:>10}  {:>8}  {:<14} {}", "busy", "count", "instruction", "line"));
    for l in prof.top_lines.iter().take(8) {
        out.result(format!(
            "    {:>7.1} µs  {:>7}×  {:<14} {}",
            l.busy_time_us, l.instruction_count, l.opcode, l.nki_source_location
        ));
    }
}
