//! Evaluating proposals on the harness: trace, prune against the incumbent, the store or the
//! simulator; the correctness check of a would-be winner; the checked Pareto front.

use super::*;

/// The job's variant with these parameters.
pub(super) fn variant(job: &Job, params: &Params) -> Variant {
    Variant {
        krate: None,
        kernel: job.kernel.into(),
        shape_name: job.shape_name.into(),
        shape: job.shape.clone(),
        params: params.clone(),
    }
}

/// The kernel's validity rule on `configs` at `shape` (on the job's chip): a verdict per
/// configuration (`None`: accepted, else why not), or the harness's error; a worker that
/// broke the protocol is the `Failure`.
pub(super) fn verdicts(
    pool: &mut Pool,
    job: &Job,
    shape: &Shape,
    configs: Vec<Params>,
) -> Result<Result<Vec<Option<String>>, neuron_tune_protocol::ErrorInfo>, Failure> {
    let done = pool.request(RequestBody::Validate {
        kernel: job.kernel.into(),
        shape: ShapeRef::Dims(shape.clone()),
        configs,
        chip: job.chip.clone(),
    })?;
    match done.answer {
        Ok(ResponseBody::Validate { verdicts }) => Ok(Ok(verdicts)),
        Ok(other) => Err(unexpected(&other)),
        Err(e) => Ok(Err(e)),
    }
}

/// How many configurations, spread over the space, [`useful_work`] asks the validity rule
/// about when the defaults do not trace, and how many of the accepted ones it traces.
const WORK_CANDIDATES: u128 = 256;
const WORK_TRACES: usize = 4;

/// The useful work the kernel declares at the job's shape, what a throughput goal is
/// converted with. It depends on the shape alone, but only a trace reports it: of the
/// defaults, or, where they do not trace (invalid at this shape), of one of
/// [`WORK_CANDIDATES`] configurations spread evenly over the space's index order (the first
/// [`WORK_TRACES`] the validity rule accepts are tried).
pub(super) fn useful_work(
    pool: &mut Pool,
    job: &Job,
    space: &neuron_tune_protocol::Space,
    defaults: &Params,
) -> Result<Work, Failure> {
    let trace = |pool: &mut Pool, p: &Params| -> Result<Result<Work, String>, Failure> {
        let done = pool.request(RequestBody::Trace(variant_ref(&variant(job, p), job.chip)))?;
        match done.answer {
            Ok(ResponseBody::Trace(t)) => Ok(Ok(t.work)),
            Ok(other) => Err(unexpected(&other)),
            Err(e) => Ok(Err(e.to_string())),
        }
    };
    let why = match trace(pool, defaults)? {
        Ok(w) => return Ok(w),
        Err(why) => why,
    };
    let sspace = search_space(space)?;
    // Spread over the whole space: in index order the first ones differ in the last
    // dimensions only.
    let n = sspace.len();
    let count = n.min(WORK_CANDIDATES);
    let configs: Vec<Params> =
        (0..count).map(|i| params_of(space, &sspace.config(i * n / count))).collect();
    let verdicts = match verdicts(pool, job, job.shape, configs.clone())? {
        Ok(verdicts) => verdicts,
        Err(e) => {
            return Err(fail(
                Exit::Config,
                format!(
                    "--goal: {} at {}: the validity rule failed: {e}",
                    job.kernel, job.shape_name
                ),
            ))
        }
    };
    let accepted = configs.iter().zip(&verdicts).filter(|(_, v)| v.is_none()).map(|(p, _)| p);
    for p in accepted.take(WORK_TRACES) {
        if let Ok(w) = trace(pool, p)? {
            return Ok(w);
        }
    }
    Err(fail(
        Exit::Config,
        format!(
            "--goal: {} at {}: its useful work is read from a trace, and neither its default \
             parameters ({why}) nor any of {count} configurations spread over its space (the \
             first {WORK_TRACES} its rule accepts) trace at this shape; give a time instead \
             (e.g. --goal 5ms)",
            job.kernel, job.shape_name
        ),
    ))
}

/// Evaluate proposals in parallel on the pool: trace each; one whose lower bound
/// (`TraceResult::bound_us`) cannot beat `incumbent` is pruned (never simulated); the rest
/// come from the store or are simulated and stored. Statuses are `measured`, `pruned` or
/// `invalid`; the correctness check of a would-be winner is the caller's, in proposal order.
pub(super) fn evaluate_batch(
    pool: &mut Pool,
    job: &Job,
    proposals: Vec<(usize, Params)>,
    incumbent: Option<f64>,
) -> Result<HashMap<usize, Entry>, Failure> {
    let chip_text = chip_key(job.chip);
    // A variant slower than the incumbent may still be on the Pareto front.
    let pruning = job.opts.objective == Objective::Time;
    let mut entries = HashMap::new();
    let entry =
        |n: usize, params: &Params, status: &str, time_us: Option<f64>, hash: Option<String>| {
            Entry {
                n,
                params: params.clone(),
                status: status.into(),
                time_us,
                program_hash: hash,
                sbuf_bytes: None,
                energy_uj: None,
                bottleneck: None,
                error: None,
                check: None,
            }
        };
    let measured = |n: usize, params: &Params, b: &BenchResult, hash: String| Entry {
        sbuf_bytes: Some(b.sbuf_bytes_per_partition),
        energy_uj: Some(crate::energy::estimate_uj(b)),
        bottleneck: Some(super::goal::verdict(&b.bottleneck, &b.bottleneck_summary)),
        ..entry(n, params, "measured", Some(b.time_us), Some(hash))
    };
    // The program hash is known once traced: `None` while tracing.
    let items = proposals.into_iter().map(|(n, p)| (n, p, None::<String>));
    let first = |(_, p, _): &(usize, Params, Option<String>)| {
        RequestBody::Trace(variant_ref(&variant(job, p), job.chip))
    };
    stream(pool, items, first, |(n, params, hash), answer| {
        // What the kernel printed while traced or simulated reaches the user, as in `bench`.
        job.bar.suspend(|| {
            crate::output::show_output(job.out, job.kernel, job.shape_name, &params, &answer.output)
        });
        let e = match (hash, answer.answer) {
            (_, Err(e)) => {
                Entry { error: Some(e.to_string()), ..entry(n, &params, "invalid", None, None) }
            }
            (None, Ok(ResponseBody::Trace(t))) => {
                if pruning && incumbent.is_some_and(|best| t.bound_us() >= best) {
                    // Provably no better: told to the strategy as its bound (a value no
                    // lower than the incumbent), never simulated.
                    entry(n, &params, "pruned", Some(t.bound_us()), Some(t.program_hash))
                } else {
                    let key = Store::key_for(&t.program_hash, &chip_text, job.sim_version, "bench");
                    match job.store.get::<BenchResult>("bench", &key) {
                        Some(b) => {
                            let b = crate::eval::served(b, &t);
                            measured(n, &params, &b, t.program_hash)
                        }
                        None => {
                            let bench =
                                RequestBody::Bench(variant_ref(&variant(job, &params), job.chip));
                            return Ok(Next::Then(bench, (n, params, Some(t.program_hash))));
                        }
                    }
                }
            }
            (Some(hash), Ok(ResponseBody::Bench(b))) => {
                let key = Store::key_for(&hash, &chip_text, job.sim_version, "bench");
                job.store
                    .put("bench", &key, &b)
                    .map_err(|e| fail(Exit::Internal, format!("writing the store: {e:#}")))?;
                measured(n, &params, &b, hash)
            }
            (_, Ok(other)) => return Err(unexpected(&other)),
        };
        entries.insert(n, e);
        Ok(Next::Done)
    })?;
    Ok(entries)
}

/// The Pareto front (time, SBUF, estimated energy) of the measured variants, each checked
/// against the CPU reference: one that fails leaves the front and the front is recomputed.
pub(super) fn pareto(
    pool: &mut Pool,
    job: &Job,
    history: &[Entry],
) -> Result<Vec<ParetoPoint>, Failure> {
    let mut points: Vec<ParetoPoint> = history
        .iter()
        .filter(|e| e.status == "measured")
        .filter_map(|e| {
            Some(ParetoPoint {
                params: e.params.clone(),
                time_us: e.time_us?,
                sbuf_bytes_per_partition: e.sbuf_bytes?,
                energy_uj_estimate: e.energy_uj?,
            })
        })
        .collect();
    let mut checked: Vec<Params> = Vec::new();
    loop {
        let objectives: Vec<Vec<f64>> = points
            .iter()
            .map(|p| vec![p.time_us, p.sbuf_bytes_per_partition as f64, p.energy_uj_estimate])
            .collect();
        let front = neuron_tune_search::pareto::pareto_front(&objectives);
        let mut failed = None;
        for &i in &front {
            if checked.contains(&points[i].params) {
                continue;
            }
            if passes_check(pool, job, &points[i].params)? {
                checked.push(points[i].params.clone());
            } else {
                failed = Some(i);
                break;
            }
        }
        match failed {
            Some(i) => {
                let bad = points[i].params.clone();
                points.retain(|p| p.params != bad);
            }
            None => {
                let mut out: Vec<ParetoPoint> =
                    front.into_iter().map(|i| points[i].clone()).collect();
                out.sort_by(|a, b| a.time_us.total_cmp(&b.time_us));
                // The same variant evaluated twice (a strategy may repeat) is one point.
                out.dedup_by(|a, b| a.params == b.params);
                return Ok(out);
            }
        }
    }
}

/// The property check of a would-be winner is [`CHECK_PARTS`] requests of
/// [`CHECK_CASES_PER_PART`] cases, part `i` with seed `--seed + i`: the same cases whatever
/// `--jobs`, run in parallel on the pool's workers, which the search leaves idle while it
/// waits for the check. `check --params P --cases 2 --seed S+i` at the run's chip replays
/// part `i`, after any failures an earlier `check` saved for it (tune saves and replays
/// none).
const CHECK_PARTS: u64 = 4;
/// Cases per part: [`CHECK_PARTS`] × this = 8 cases per check.
pub(super) const CHECK_CASES_PER_PART: u32 = 2;

/// Whether a would-be winner passes the harness's correctness check ([`check_variant`]).
pub(super) fn passes_check(pool: &mut Pool, job: &Job, params: &Params) -> Result<bool, Failure> {
    Ok(check_variant(pool, job, params)?.is_ok())
}

/// The harness's correctness check of a would-be winner: `Ok(())`, or why it failed (the
/// first failing part's seed and shrunk case). Its verdict is stored under the harness
/// binary's content hash (which captures the kernel's body, its reference and its case
/// strategy), the parameters, the chip and the seeds, so a rerun of the same build does
/// not check the same variant again; `--recheck` checks regardless. A verdict with a part
/// that did not answer (a crash, a timeout) is not stored: it may not be the kernel's.
pub(super) fn check_variant(
    pool: &mut Pool,
    job: &Job,
    params: &Params,
) -> Result<Result<(), FailedCheck>, Failure> {
    // (Keyed apart from the verdicts stored before they kept their failing case.)
    let what = format!(
        "check\0{}\0{}\0{CHECK_PARTS}x{CHECK_CASES_PER_PART}\0{}\0case",
        job.kernel, params, job.seed
    );
    let key = Store::key_for(job.harness_hash, &chip_key(job.chip), job.sim_version, &what);
    if !job.goal.recheck {
        if let Some(verdict) = job.store.get::<Option<FailedCheck>>("checks", &key) {
            return Ok(verdict.map_or(Ok(()), Err));
        }
    }
    let request = |part: &u64| RequestBody::Check {
        kernel: job.kernel.into(),
        params: params.clone(),
        cases: CHECK_CASES_PER_PART,
        seed: job.seed.wrapping_add(*part),
        chip: job.chip.clone(),
        regressions: None,
    };
    // Per part, in order: `None` passed, else why not (the first failing part is said, so
    // the verdict does not depend on which part finished first).
    let mut parts: Vec<Option<FailedCheck>> = vec![None; CHECK_PARTS as usize];
    let mut answered = true;
    // Each part to the same job slot in every check (its seed draws the same cases for
    // most variants, whose inputs and references that slot's worker remembers).
    let pinned = |part: &u64| (request(part), Some(*part as usize));
    stream_on(pool, 0..CHECK_PARTS, pinned, |part, done| {
        let seed = job.seed.wrapping_add(part);
        parts[part as usize] = match done.answer {
            Ok(ResponseBody::Check(r)) if r.passed => None,
            Ok(ResponseBody::Check(r)) => Some(FailedCheck { seed, case: r.failure, error: None }),
            Ok(other) => return Err(unexpected(&other)),
            Err(e) => {
                answered = false;
                Some(FailedCheck { seed, case: None, error: Some(e.to_string()) })
            }
        };
        Ok(Next::Done)
    })?;
    let verdict = parts.into_iter().flatten().next();
    if answered {
        job.store
            .put("checks", &key, &verdict)
            .map_err(|e| fail(Exit::Internal, format!("writing the store: {e:#}")))?;
    }
    Ok(verdict.map_or(Ok(()), Err))
}

/// `--objective pareto`: the variant the file is to keep — the run's best, the default
/// kept on a tie, or the tuned record kept — gives way to a variant of the Pareto front
/// exactly as fast that dominates it (no more SBUF nor estimated energy, less of one; of
/// several, the least SBUF, then energy). Time alone ties them, and keeping the first
/// found (or the record) kept a variant the front itself shows to be worse. The front's
/// points are checked against the reference already. Pareto runs only: a time-objective
/// run never checks the variants that tie its best, and its ties keep the default and the
/// record, as the README promises. Not under `--goal`/`--validate` either, whose winner
/// stands as it was validated.
pub(super) fn prefer_dominating(
    pool: &mut Pool,
    job: &Job,
    result: &mut TuneResult,
) -> Result<(), Failure> {
    let (Some(front), false) = (&result.front, job.goal.validates()) else { return Ok(()) };
    let Some(kept) = result.record.as_ref().map(|(r, _)| r).or(result.best.as_ref()) else {
        return Ok(());
    };
    let tied = || front.iter().filter(|p| p.time_us == kept.time_us && p.params != kept.params);
    if front.iter().any(|p| p.params == kept.params) || tied().next().is_none() {
        return Ok(());
    }
    // Its SBUF and energy: from the run's evaluations, else measured (a record the run did
    // not propose: measured again moments ago, so the store serves it).
    let of_run = |params: &Params| {
        result.history.iter().find(|e| e.status == "measured" && e.params == *params).cloned()
    };
    let measured = match of_run(&kept.params) {
        Some(e) => Some(e),
        None => {
            evaluate_batch(pool, job, vec![(Entry::NOT_A_PROPOSAL, kept.params.clone())], None)?
                .remove(&Entry::NOT_A_PROPOSAL)
                .filter(|e| e.status == "measured")
        }
    };
    let Some((sbuf, energy)) = measured.and_then(|e| e.sbuf_bytes.zip(e.energy_uj)) else {
        return Ok(());
    };
    let better = tied()
        .filter(|p| p.sbuf_bytes_per_partition <= sbuf && p.energy_uj_estimate <= energy)
        .filter(|p| p.sbuf_bytes_per_partition < sbuf || p.energy_uj_estimate < energy)
        .min_by(|a, b| {
            let by_sbuf = a.sbuf_bytes_per_partition.cmp(&b.sbuf_bytes_per_partition);
            by_sbuf.then(a.energy_uj_estimate.total_cmp(&b.energy_uj_estimate))
        });
    let Some(p) = better else { return Ok(()) };
    let program_hash = of_run(&p.params).and_then(|e| e.program_hash).unwrap_or_default();
    result.best = Some(Best { params: p.params.clone(), time_us: p.time_us, program_hash });
    result.record = None;
    result.kept_default = false;
    result.validated = None;
    Ok(())
}
