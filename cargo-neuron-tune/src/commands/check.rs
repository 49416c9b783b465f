//! `check`: property-based correctness of the selected parameter sets against the CPU
//! references (the harness decides; this only reports).

use super::{default_seed, report_failure, seed_words};
use crate::cargo::CargoFlags;
use crate::cli::Selection;
use crate::eval::{stream, unexpected, Next};
use crate::exit::{fail, Exit, Failure};
use crate::output::{measured, show_output, Event, Summary};
use crate::select::{chip_spec, Variant};
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::{CheckReport, RequestBody, ResponseBody};

pub fn run(
    cargo: &CargoFlags,
    s: &Selection,
    cases: u32,
    seed: Option<u64>,
    ctx: &Ctx,
) -> Result<Exit, Failure> {
    // A chip name or file is checked before anything is built.
    let chip = chip_spec(&s.chip)?;
    let mut ws = Workspace::open(cargo, ctx)?;
    let at_models = crate::model_calls::checked_selection(&mut ws, s, &chip, &ctx.out)?;
    let out = &ctx.out;
    let chosen_by_tool = seed.is_none();
    let seed = seed.unwrap_or_else(default_seed);
    // Without `--shape` a check draws `cases` small random shapes per parameter set; with
    // it, each named shape is one seeded case at its full size (`tune --goal`'s check).
    let at_named = !s.shapes.is_empty();
    let what = if at_named {
        "one case per variant at each named shape (full size)".to_string()
    } else {
        format!("{cases} cases per variant at random small shapes")
    };
    out.status(format!("   Checking {what}, {}", seed_words(seed, chosen_by_tool)));
    if at_named && cases != crate::cli::DEFAULT_CHECK_CASES {
        out.note(format!(
            "note: --cases {cases} does not apply with --shape (one seeded case per variant at \
             each named shape); it sets how many random small shapes a check without --shape \
             draws"
        ));
    }
    let regress = ws.target_dir.join("neuron-tune").join("regressions");
    std::fs::create_dir_all(&regress)
        .map_err(|e| fail(Exit::Internal, format!("{}: {e}", regress.display())))?;
    // Variants their rules refuse are not checked (as `bench` skips them): not failures.
    let (mut failed, mut total, mut invalid) = (0, 0, 0);
    for (i, c) in ws.crates.iter_mut().enumerate() {
        let selected = super::select_in_crate(&ws.tuned, s, (i, c), &chip.name, &at_models)?;
        crate::select::note_untuned(&selected, &chip.name, out);
        let sets: Vec<Variant> = if at_named {
            selected.iter().flat_map(|k| k.variants()).collect()
        } else {
            selected
                .iter()
                .flat_map(|k| {
                    k.params.iter().map(move |p| Variant {
                        krate: None,
                        kernel: k.kernel.name.clone(),
                        shape_name: "(small shapes)".into(),
                        shape: Default::default(),
                        params: p,
                    })
                })
                .collect()
        };
        // Lines are printed as checks finish, so the columns are sized up front.
        let widths = Widths {
            kernel: sets.iter().map(|v| v.kernel.len()).max().unwrap_or(0),
            shape: if at_named {
                sets.iter().map(|v| v.shape_name.len()).max().unwrap_or(0)
            } else {
                0
            },
            params: sets.iter().map(|v| v.params.to_string().len()).max().unwrap_or(0),
        };
        let request = |v: &Variant| match at_named {
            true => RequestBody::CheckAt {
                kernel: v.kernel.clone(),
                params: v.params.clone(),
                shapes: vec![v.shape.clone()],
                seed,
                chip: chip.clone(),
            },
            false => RequestBody::Check {
                kernel: v.kernel.clone(),
                params: v.params.clone(),
                cases,
                seed,
                chip: chip.clone(),
                regressions: Some(regress.join(format!(
                    "{}-{}.txt",
                    v.kernel,
                    short_hash(&v.params.to_string())
                ))),
            },
        };
        stream(&mut c.pool, sets.into_iter(), request, |v, done| {
            show_output(out, &v.kernel, &v.shape_name, &v.params, &done.output);
            total += 1;
            match done.answer {
                Ok(ResponseBody::Check(r)) => {
                    failed += usize::from(!r.passed);
                    report(ctx, &v, &chip.name, &r, &widths);
                }
                Ok(other) => return Err(unexpected(&other)),
                Err(e) => {
                    if report_failure(out, &v, &chip.name, &e) {
                        invalid += 1;
                    } else {
                        failed += 1;
                    }
                }
            }
            Ok(Next::Done)
        })?;
    }
    out.flush_invalid();
    if total > 0 && invalid == total {
        return Err(fail(
            Exit::Config,
            format!(
                "no valid variant to check: the kernels' rules refuse every one selected ({}; see \
                 above; --params names the parameters, `cargo neuron-tune list` their spaces)",
                crate::convergence::count(total, "variant")
            ),
        ));
    }
    out.event(&Event::Summary(Summary {
        command: "check".into(),
        variants: total,
        failed: Some(failed),
        seed: Some(seed),
        ..Default::default()
    }));
    let of_total = crate::convergence::count(total, "variant");
    let skipped = match invalid {
        0 => String::new(),
        n => format!(" ({n} invalid, not checked)"),
    };
    out.status(format!("   {} of {of_total} passed{skipped}", total - failed - invalid));
    Ok(if failed > 0 { Exit::Check } else { Exit::Ok })
}

/// Column widths of a crate's check lines (`shape` 0: no shape column, the random small
/// shapes are checked).
struct Widths {
    kernel: usize,
    shape: usize,
    params: usize,
}

impl Widths {
    /// The kernel column, and the shape column when checking at named shapes.
    fn variant(&self, v: &Variant) -> String {
        match self.shape {
            0 => format!("{:<kw$}", v.kernel, kw = self.kernel),
            sw => format!("{:<kw$}  {:<sw$}", v.kernel, v.shape_name, kw = self.kernel),
        }
    }
}

fn report(ctx: &Ctx, v: &Variant, chip: &str, r: &CheckReport, w: &Widths) {
    let out = &ctx.out;
    out.event(&Event::Check {
        kernel: v.kernel.clone(),
        shape: (w.shape > 0).then(|| v.shape_name.clone()),
        params: v.params.clone(),
        chip: chip.to_string(),
        passed: r.passed,
        cases: r.cases,
        max_abs_err: measured(r.max_abs_err),
        max_rel_err: measured(r.max_rel_err),
        mse: measured(r.mse),
        // A NaN or an infinity in the outputs (or none compared) makes the cosine NaN too,
        // which the harness sends as 0.
        cosine: measured(r.max_abs_err).map(|_| r.cosine),
        seed: r.seed,
        failure: r.failure.clone().map(Into::into),
        tolerance: r.tolerance,
        effective_atol: r.effective_atol,
        worst: r.worst.map(Into::into),
    });
    if r.passed {
        out.result(format!(
            "  ok     {}  {:<pw$}  cases {:>3}  max abs err {:.2e}  cosine {:.6}  {}{}",
            w.variant(v),
            v.params.to_string(),
            r.cases,
            r.max_abs_err,
            r.cosine,
            r.worst.map_or(String::new(), |e| format!("{}  ", nearest(&e))),
            allowed(r),
            pw = w.params,
        ));
        return;
    }
    // A failure is the check's result: on stdout with the passes (exit 4 says it failed).
    let f = r.failure.as_ref().expect("a failed check has a failure");
    out.result(format!(
        "  FAILED {}  {:<pw$}  after {} (seed {})",
        w.variant(v),
        v.params.to_string(),
        crate::convergence::count(r.cases as usize, "case"),
        r.seed,
        pw = w.params,
    ));
    out.result(format!("         {}", f.heading()));
    // The message states the failing case's own bound (a panic's or a crash's, what
    // happened), a line each; the errors over all cases follow when outputs were compared
    // at all.
    for line in f.message.lines() {
        out.result(format!("         {line}"));
    }
    if let Some(max_abs_err) = measured(r.max_abs_err) {
        out.result(format!(
            "         over all cases: max abs err {max_abs_err:.3e}  max rel err {:.3e}  MSE {:.3e}  cosine {:.6}",
            r.max_rel_err, r.mse, r.cosine
        ));
    }
}

/// The element nearest its own bound, which the line's largest error need not be (the
/// relative term lets a large error at a large |ref| through), with its own bound (its
/// case's absolute tolerance, which the `allowed` part's largest one need not be): "worst at
/// 41 % of its bound (err 7.01e-2 of 1.71e-1 allowed at |ref| 8.22e0)".
fn nearest(e: &neuron_tune_protocol::WorstElement) -> String {
    let pct = e.ratio * 100.0;
    let pct = match pct {
        p if p == 0.0 || p >= 1.0 => format!("{p:.0}"),
        p => format!("{p:.2}"),
    };
    format!(
        "worst at {pct} % of its bound (err {:.2e} of {:.2e} allowed at |ref| {:.2e})",
        e.abs_err, e.allowed, e.abs_ref
    )
}

/// What the verdict allowed: |err| ≤ atol·max(1, RMS(ref)) + rtol·|ref| and a cosine floor.
fn allowed(r: &CheckReport) -> String {
    match r.tolerance {
        Some(t) => format!(
            "(allowed: |err| ≤ {:.2e} + {:.0e}·|ref|, cosine ≥ {}; atol {:.0e} × max(1, RMS of the reference))",
            r.effective_atol, t.rtol, t.min_cosine, t.atol
        ),
        None => String::new(),
    }
}

fn short_hash(s: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(s.as_bytes()))
}
