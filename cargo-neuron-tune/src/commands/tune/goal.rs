//! `--goal`'s side of the loop: what a round decides (kept, rolled back, no improvement),
//! the validation of a round's winner on its key set, what limits the best, and the
//! over-fitting check across a kernel's shapes.

use super::*;

/// The `over_fitted` rule, once every target is tuned: each winner of a kernel tuned at
/// several shapes is measured at the kernel's other tuned shapes (those its validity rule
/// accepts) that have no tuned record of their own (`own_record`, per target) and compared
/// with their own winners. A shape with its own record runs its own winner, never this
/// one: comparing there would be a false alarm (and a simulation spent on it).
pub(super) fn over_fitting(
    ws: &mut Workspace,
    targets: &[Target],
    winners: &[(usize, Params, f64)],
    own_record: &[bool],
    chip: &ChipSpec,
    out: &crate::output::Reporter,
) -> Result<(), Failure> {
    for (ti, params, _) in winners {
        let t = &targets[*ti];
        // A kept default is not a winner tuning chose: nothing of it was fitted.
        if *params == t.kernel.defaults {
            continue;
        }
        let mut cross = Vec::new();
        for (oi, _, own_best_us) in winners {
            let o = &targets[*oi];
            if oi == ti || o.krate != t.krate || o.kernel.name != t.kernel.name {
                continue;
            }
            if own_record[*oi] {
                continue;
            }
            let v = Variant {
                krate: None,
                kernel: t.kernel.name.clone(),
                shape_name: o.shape_name.clone(),
                shape: o.shape.clone(),
                params: params.clone(),
            };
            let pool = &mut ws.crates[t.krate].pool;
            // Not valid there (or failing there): not comparable, so no evidence.
            if let Ok(ResponseBody::Bench(b)) =
                pool.request(RequestBody::Bench(variant_ref(&v, chip)))?.answer
            {
                cross.push(conv::CrossShape {
                    shape: target_label(o),
                    time_us: b.time_us,
                    own_best_us: *own_best_us,
                    own_record: false,
                });
            }
        }
        if let Some(d) = conv::over_fitted(params, &cross) {
            out.result(format!("  {} at {}:", t.kernel.name, target_label(t)));
            for line in conv::diagnosis_lines(&d) {
                out.result(format!("    {line}"));
            }
            out.event(&Event::Diagnosis {
                kernel: t.kernel.name.clone(),
                shape: t.shape_name.clone(),
                dims: t.shape.clone(),
                chip: chip.name.clone(),
                diagnosis: d,
            });
        }
    }
    Ok(())
}

/// A target's shape as people read it: its name, and for a model's call (`model@shape`,
/// shared by the model's calls of one kernel) its dimensions too.
pub(super) fn target_label(t: &Target) -> String {
    if t.shape_name.contains('@') {
        format!("{} {}", t.shape_name, t.shape)
    } else {
        t.shape_name.clone()
    }
}

/// The status line of a `--goal`/`--validate` target that no selected model calls: its
/// winners are checked on shapes only. Advice to select more crates only where no model is
/// selected at all (`selected_models`, sorted); where some are, they are named, since
/// selecting more crates would not change what they call.
pub(super) fn unchecked_by_models(kernel: &str, shape: &str, selected_models: &[String]) -> String {
    let why = match selected_models {
        [] => "select the models' crates, e.g. --workspace, to check them".into(),
        names => format!("the selected models ({}) do not call it at these dims", names.join(", ")),
    };
    format!(
        "   No selected model calls {kernel} at {shape}: its winners are checked on shapes only \
         ({why})"
    )
}

/// The message of a goal not met: how far the run got, whether the search tried its whole
/// space (`whole_space`, its size: then more rounds or budget cannot help), and what limits
/// its best.
pub(super) fn goal_miss(
    kernel: &str,
    shape: &str,
    g: &GoalReport,
    best: &Best,
    whole_space: Option<u64>,
) -> String {
    // A throughput goal: the rate reached, from the same work (the rate scales as 1 / time).
    let reached = match g.goal_rate {
        // Per reported time, launch overhead included, as the goal is judged (a profile's
        // rates are per kernel time, so they read higher).
        Some((rate, unit)) => format!(
            ", {:.1} {unit} of declared work per call time (launch included)",
            rate * g.target_us / best.time_us
        ),
        None => String::new(),
    };
    let mut m = format!(
        "{kernel} at {shape}: goal {} not met after {}: best {:.2} µs{reached}{} (the goal needs ≤ {:.2} µs)",
        g.goal,
        conv::count(g.rounds, "round"),
        best.time_us,
        g.speedup.map_or(String::new(), |s| format!(", {s:.2}x the default")),
        g.target_us
    );
    if let Some(n) = whole_space {
        m.push_str(&format!(
            "; the whole space ({}) was searched, so more rounds or a larger budget cannot \
             help: the kernel itself has to change",
            conv::count(n as usize, "variant")
        ));
    }
    if let Some(l) = &g.limit {
        m.push_str(&format!("; limited by {}", verdict(&l.kind, &l.summary)));
        for e in &l.evidence {
            m.push_str(&format!("\n    evidence: {e}"));
        }
        for a in &l.advice {
            m.push_str(&format!("\n    advice: {a}"));
        }
    }
    m
}

/// A verdict as one line: its summary, which starts with its kind ("DMA-bound: 80% of …"),
/// else kind and summary.
pub(super) fn verdict(kind: &str, summary: &str) -> String {
    if summary.starts_with(kind) {
        summary.to_string()
    } else {
        format!("{kind}: {summary}")
    }
}

/// The best a round must beat: its time, and whether it is the default's.
pub(super) type Standing = Option<(f64, bool)>;

/// The decision of one round: a new best is kept; a would-be winner that failed its
/// correctness check is rolled back (the previous best stays); otherwise nothing changed.
/// `before` is the best before the round, the default included: a proposal slower than
/// the default is no new best, whatever the search found before.
pub(super) fn decide(
    round: usize,
    proposals: usize,
    entries: &[Entry],
    before: Standing,
    after: Option<(f64, Params)>,
    goal_met: bool,
    rolled: &[String],
) -> Round {
    let mut failed: Vec<String> = entries
        .iter()
        .filter(|e| e.status == "failed_check")
        .map(|e| {
            format!(
                "{} ({}) failed its correctness check",
                e.params,
                e.time_us.map_or(String::new(), |t| format!("{t:.2} µs"))
            )
        })
        .collect();
    failed.extend(rolled.iter().cloned());
    let new_best = entries
        .iter()
        .filter(|e| e.status == "measured")
        .filter_map(|e| Some((e.time_us?, e)))
        .filter(|(t, _)| before.is_none_or(|(b, _)| *t < b))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let previous = match before {
        Some((t, true)) => format!("the default's {t:.2} µs"),
        Some((t, false)) => format!("{t:.2} µs"),
        None => "nothing valid".to_string(),
    };
    let (decision, mut reason) = match new_best {
        Some((t, e)) if !rolled.is_empty() => (
            "rolled_back",
            format!(
                "{}; the best is now {t:.2} µs {} (was {previous})",
                failed.join("; "),
                e.params
            ),
        ),
        Some((t, e)) => ("kept", format!("new best {t:.2} µs {} (was {previous})", e.params)),
        None if !failed.is_empty() => {
            ("rolled_back", format!("{}; the best stays {previous}", failed.join("; ")))
        }
        None => {
            let counts = |s: &str| entries.iter().filter(|e| e.status == s).count();
            // Kernel code that failed is journaled `invalid`, but is a fault, not a refused
            // configuration: said apart, when there are any.
            let faults = entries
                .iter()
                .filter(|e| e.status == "invalid" && conv::is_fault(&e.status, e.error.as_deref()))
                .count();
            (
                "no_improvement",
                format!(
                    "nothing beat {previous} ({} no faster, {} pruned, {} invalid{})",
                    counts("measured"),
                    counts("pruned"),
                    counts("invalid") - faults,
                    if faults > 0 {
                        format!(", {}", conv::count(faults, "fault"))
                    } else {
                        String::new()
                    }
                ),
            )
        }
    };
    if decision == "kept" && !failed.is_empty() {
        // Would-be winners that failed the property check before the round's decision.
        reason.push_str(&format!("; rolled back: {}", failed.join("; ")));
    }
    Round {
        line: "round".into(),
        round,
        proposals,
        best_time_us: after.as_ref().map(|a| a.0),
        best_params: after.map(|a| a.1),
        decision: decision.into(),
        reason,
        goal_met,
    }
}

/// `--goal`'s validation of a round's winner: right on every shape of its key set that its
/// validity rule accepts? `Ok(the shapes checked)`, or `Err(why)` naming the first failing
/// shape in the key set's order. Each shape is one full-size functional run, so the shapes
/// are checked in parallel on the pool's workers.
pub(super) fn validate_on_key_set(
    pool: &mut Pool,
    job: &Job,
    params: &Params,
) -> Result<Result<Vec<String>, String>, Failure> {
    let mut accepted = Vec::new();
    for (name, shape) in job.key_shapes {
        let rule = verdicts(pool, job, shape, vec![params.clone()])?;
        if rule.is_ok_and(|v| v.first().is_some_and(|v| v.is_none())) {
            accepted.push((name, shape));
        }
    }
    let request = |i: &usize| RequestBody::CheckAt {
        kernel: job.kernel.into(),
        params: params.clone(),
        shapes: vec![accepted[*i].1.clone()],
        seed: job.seed,
        chip: job.chip.clone(),
    };
    // Per shape, in the key set's order: `None` right, else why not.
    let mut wrong: Vec<Option<String>> = vec![None; accepted.len()];
    // Shapes where the variant breaks a hardware rule (SBUF too small…): invalid there, as
    // where its validity rule refuses it, so left out of the key set like those, not wrong.
    let mut refused = vec![false; accepted.len()];
    stream(pool, 0..accepted.len(), request, |i, done| {
        let (name, shape) = accepted[i];
        if let Err(e) = &done.answer {
            if matches!(e.kind, ErrorKind::Invalid | ErrorKind::SimViolation { .. }) {
                refused[i] = true;
                return Ok(Next::Done);
            }
        }
        wrong[i] = match done.answer {
            Ok(ResponseBody::Check(r)) if r.passed => None,
            Ok(ResponseBody::Check(r)) => Some(match r.failure {
                Some(f) => format!("wrong at shape {name} ({shape}): {}", f.message),
                None => format!("failed at shape {name} ({shape})"),
            }),
            Ok(other) => return Err(unexpected(&other)),
            Err(e) => Some(format!("failed at shape {name} ({shape}): {e}")),
        };
        Ok(Next::Done)
    })?;
    Ok(match wrong.into_iter().flatten().next() {
        Some(why) => Err(why),
        None => Ok(accepted
            .into_iter()
            .zip(refused)
            .filter(|(_, refused)| !refused)
            .map(|((name, _), _)| name.clone())
            .collect()),
    })
}

/// The profile verdict of a variant: what bounds it, and the evidence.
pub(super) fn limit_of(
    pool: &mut Pool,
    job: &Job,
    params: &Params,
) -> Result<Option<Limit>, Failure> {
    let done = pool.request(RequestBody::Profile {
        variant: variant_ref(&variant(job, params), job.chip),
        trace: false,
    })?;
    Ok(match done.answer {
        Ok(ResponseBody::Bench(b)) => b.profile.map(|p| Limit {
            kind: p.bottleneck.kind,
            summary: p.bottleneck.summary,
            evidence: p.bottleneck.evidence,
            advice: p.bottleneck.advice,
        }),
        Ok(other) => return Err(unexpected(&other)),
        Err(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_line_names_its_kind_once() {
        // The simulator's summaries start with their kind; others get it in front.
        let s = "Vector-bound: VectorE active 48% of the time";
        assert_eq!(verdict("Vector-bound", s), s);
        assert_eq!(verdict("Unknown", "no timing"), "Unknown: no timing");
    }

    #[test]
    fn a_target_no_model_calls_gets_advice_that_fits_the_selection() {
        // No model selected at all: selecting the models' crates is the way to check it.
        let none = unchecked_by_models("gemm", "small", &[]);
        assert_eq!(
            none,
            "   No selected model calls gemm at small: its winners are checked on shapes only \
             (select the models' crates, e.g. --workspace, to check them)"
        );
        // Models selected, none calling it: they are named, and selecting more is no advice.
        let some = unchecked_by_models("gemm", "small", &["llama".into(), "qwen3".into()]);
        assert_eq!(
            some,
            "   No selected model calls gemm at small: its winners are checked on shapes only \
             (the selected models (llama, qwen3) do not call it at these dims)"
        );
        let one = unchecked_by_models("gemm", "small", &["qwen3".into()]);
        assert!(
            one.ends_with("(the selected models (qwen3) do not call it at these dims)"),
            "{one}"
        );
    }

    fn measured(n: usize, bufs: i64, t: f64) -> Entry {
        Entry {
            n,
            params: Params::new().with("bufs", bufs),
            status: "measured".into(),
            time_us: Some(t),
            program_hash: None,
            sbuf_bytes: None,
            energy_uj: None,
            bottleneck: None,
            error: None,
            check: None,
        }
    }

    #[test]
    fn a_round_is_judged_against_the_default_too() {
        // The default takes 10 µs and the search has nothing yet: 12 and 11 are no new best
        // (they are slower than the default), 9 is.
        let slower = [measured(0, 1, 12.0), measured(1, 2, 11.0)];
        let r = decide(1, 2, &slower, Some((10.0, true)), Some((10.0, Params::new())), false, &[]);
        assert_eq!(r.decision, "no_improvement");
        assert_eq!(
            r.reason,
            "nothing beat the default's 10.00 µs (2 no faster, 0 pruned, 0 invalid)"
        );
        let faster = [measured(2, 3, 9.0), measured(3, 4, 12.0)];
        let r = decide(2, 2, &faster, Some((10.0, true)), Some((9.0, Params::new())), false, &[]);
        assert_eq!(r.decision, "kept");
        assert_eq!(r.reason, "new best 9.00 µs bufs=3 (was the default's 10.00 µs)");
        // Against the search's own best, which beat the default.
        let r = decide(3, 1, &[measured(4, 5, 8.5)], Some((9.0, false)), None, false, &[]);
        assert_eq!(r.reason, "new best 8.50 µs bufs=5 (was 9.00 µs)");
    }
}
