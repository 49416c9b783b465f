//! The search loop of one (kernel, shape): batches of proposals, evaluated in parallel,
//! told in proposal order, journaled, resumed; rounds and their decisions under `--goal`.

use super::*;

pub(super) fn tune_one(
    pool: &mut Pool,
    space: &neuron_tune_protocol::Space,
    defaults: &Params,
    job: &Job,
    key: &str,
    ctx: &Ctx,
    models: &mut CheckModels,
) -> Result<TuneResult, Failure> {
    let sspace = search_space(space)?;
    let mut strategy = match &job.opts.proposer {
        Some(cmd) => {
            let mut p = neuron_tune_search::Proposer::new(cmd.clone());
            // One run of the program per batch.
            p.batch = BATCH;
            Searcher::External(Box::new(p))
        }
        None => Searcher::Builtin(builtin(&job.opts.strategy, job.seed).ok_or_else(|| {
            fail(
                Exit::Config,
                format!(
                    "--strategy {}: unknown (built in: {})",
                    job.opts.strategy,
                    neuron_tune_search::BUILTIN.join(", ")
                ),
            )
        })?),
    };
    let journal_name = format!("tune-{key}");
    let journal_path = job.store.root().join("journals").join(format!("{journal_name}.jsonl"));
    // A run journaled before journals named their package continues under its new name.
    if let (true, Some(unnamed)) = (job.opts.resume, key.strip_prefix(&job.package.journal_part()))
    {
        let legacy = journal_path.with_file_name(format!("tune-{unnamed}.jsonl"));
        if adopt_unnamed(&journal_path, &legacy, job.harness_hash) {
            ctx.out.note(format!(
                "note: {}: journaled before journals named their package; resumed as {}",
                legacy.display(),
                journal_path.display()
            ));
        }
    }
    // A journal is resumed only by a run of its own problem (its name says which; the meta
    // file is checked in case a file was renamed or copied).
    let meta = if job.opts.resume { read_meta_checked(&journal_path) } else { Ok(None) };
    // Why the journal is not resumed, if it is not (the run then starts afresh and replaces
    // it): another problem's journal, one whose meta cannot be read, or one measured by
    // another build of the kernel crate or simulator, whose times may not be this build's
    // (the kernel was edited since; unchanged programs' results are still in the store).
    let strategy_name =
        job.opts.proposer.as_ref().map_or(job.opts.strategy.clone(), |_| "proposer".into());
    let objective = format!("{:?}", job.opts.objective).to_lowercase();
    let refused = match &meta {
        Err(why) => Some(format!(
            "{}: not used ({why}); its journal is not resumed",
            meta_path(&journal_path).display()
        )),
        // The whole chip, not its name: a chip TOML edited since is another chip.
        Ok(Some(m))
            if m.kernel != job.kernel
                || m.package.as_ref().is_some_and(|p| p != job.package)
                || m.dims != *job.shape
                || m.chip != *job.chip
                || m.strategy != strategy_name
                || m.seed != job.seed
                || m.objective != objective =>
        {
            Some(format!(
                "{}: a journal of another kernel, shape, chip (or chip file content), \
                 strategy, seed, objective or package; not resumed",
                journal_path.display()
            ))
        }
        Ok(Some(m))
            if m.sim_version != job.sim_version
                || m.harness_hash.as_deref().is_some_and(|h| h != job.harness_hash) =>
        {
            Some(format!(
                "{}: written by another build of the kernel crate or the simulator (its times \
                 may be stale); not resumed, and variants whose program did not change come \
                 from the store",
                journal_path.display()
            ))
        }
        Ok(_) => None,
    };
    if let Some(why) = &refused {
        ctx.out.note(format!("warning: {why} (this run starts afresh and replaces it)"));
    }
    let resumes = job.opts.resume && refused.is_none();
    let journaled = if resumes {
        let read = crate::store::read_journal(&journal_path)
            .map_err(|e| fail(Exit::Internal, format!("{e:#}")))?;
        // An untrusted line is never used: its evaluation is made again.
        for (line, why) in &read.rejected {
            ctx.out.note(format!(
                "warning: {}:{line}: not used ({why}); that evaluation is made again",
                journal_path.display()
            ));
        }
        // Set aside, so that the next resume (and `report`) does not warn about them again.
        if !read.rejected.is_empty() {
            let numbers: Vec<usize> = read.rejected.iter().map(|(n, _)| *n).collect();
            let aside = crate::store::set_aside_journal_lines(&journal_path, &numbers)
                .map_err(|e| fail(Exit::Internal, format!("{e:#}")))?;
            ctx.out.note(format!(
                "note: moved {} to {}",
                crate::convergence::count(numbers.len(), "unusable line"),
                aside.display()
            ));
        }
        JournalLines::of(read.lines)
    } else {
        // Replaced, but only once the run is sure to go ahead (below): a run refused
        // before its first evaluation (an unreachable `--goal`) leaves the old one alone.
        JournalLines::default()
    };
    let replayed: HashMap<usize, Entry> =
        journaled.entries.iter().map(|e| (e.n, e.clone())).collect();
    let append = |line: &serde_json::Value| {
        job.store
            .append_journal(&journal_name, line)
            .map_err(|e| fail(Exit::Internal, format!("writing the journal: {e:#}")))
    };
    if job.opts.resume && !replayed.is_empty() {
        // A smaller budget than the journal holds replays only the start of it (a seed's
        // proposals are the same whatever the budget): the result is that shorter run's,
        // not the journal's best, which is said.
        // (`--budget` counts simulations: pruned proposals and the default are not charged.)
        let simulated = replayed
            .values()
            .filter(|e| e.n != Entry::NOT_A_PROPOSAL && e.status != "pruned")
            .count();
        let shorter = match job.opts.budget {
            b if b < simulated => format!(
                "; --budget {b} replays only their start, so the result is that of a \
                 {b}-evaluation run (--budget {simulated} or more continues the journal)"
            ),
            _ => String::new(),
        };
        ctx.out.status(format!(
            "   Resuming {} from {} journaled evaluation{}{shorter}",
            job.kernel,
            replayed.len(),
            if replayed.len() == 1 { "" } else { "s" },
        ));
    }
    // The default, measured like any proposal (never pruned: there is no incumbent).
    let default = evaluate_batch(pool, job, vec![(Entry::NOT_A_PROPOSAL, defaults.clone())], None)?
        .remove(&Entry::NOT_A_PROPOSAL);
    // Why a rule refused it, if one did: said when nothing else is valid either.
    let default_refused = default
        .as_ref()
        .filter(|e| conv::is_invalid(&e.status, e.error.as_deref()))
        .map(|e| e.error.clone().unwrap_or_default());
    let default = default.filter(|e| e.status == "measured");
    let default_time = default.as_ref().and_then(|e| e.time_us);
    let mut meta = JournalMeta {
        kernel: job.kernel.into(),
        package: Some(job.package.clone()),
        shape: job.shape_name.into(),
        dims: job.shape.clone(),
        chip: job.chip.clone(),
        strategy: strategy_name,
        seed: job.seed,
        budget: job.opts.budget,
        objective,
        pinned: job.pinned.map(String::from),
        sim_version: job.sim_version.into(),
        harness_hash: Some(job.harness_hash.into()),
        default: default.clone(),
        default_refused: default_refused.clone(),
        front: None,
        validated: Some(job.goal.validates()),
        diagnoses: Vec::new(),
        whole_space: None,
    };
    // A resumed run validates as the journal's run did, or its roll-backs would not match.
    // The flag stays set once any run of the journal validated (its lines stay).
    if job.opts.resume {
        let old = read_meta(&journal_path).and_then(|m| m.validated);
        if let (Some(old), Some(new)) = (old, meta.validated) {
            if old != new {
                let how = |v: bool| if v { "with" } else { "without" };
                ctx.out.note(format!(
                    "warning: {}: written {} validation (--goal or --validate), resumed {}: \
                     its journaled roll-backs and this run's may disagree; resume with the \
                     same flags",
                    journal_path.display(),
                    how(old),
                    how(new)
                ));
            }
            meta.validated = Some(old || new);
        }
    }
    // `--goal`: the time to reach (a speed-up needs the default's time, a throughput the
    // shape's useful work).
    let target = match job.goal.goal {
        None => None,
        Some(g) => {
            let work =
                if g.needs_work() { Some(useful_work(pool, job, space, defaults)?) } else { None };
            Some(g.target_us(default_time, work).ok_or_else(|| {
                let why = if g.needs_work() {
                    "the kernel declares no such work at this shape (its `work`), so no time \
                     follows from the rate"
                } else {
                    "the default parameters did not measure, so there is no time to improve on"
                };
                fail(
                    Exit::Config,
                    format!(
                        "--goal {g} for {} at {}: {why}; give a time instead (e.g. --goal 5ms)",
                        job.kernel, job.shape_name
                    ),
                )
            })?)
        }
    };
    // A time no variant can reach: every call pays the chip's launch overhead (reported
    // times include it), so a goal below it is refused before any round is spent on it.
    if let (Some(t), Some(g)) = (target, job.goal.goal) {
        let chip = crate::select::chip_of(job.chip);
        let launch_us = chip.map_or(0.0, |c| c.launch_overhead_ns / 1e3);
        if t <= launch_us {
            return Err(fail(
                Exit::Config,
                format!(
                    "--goal {g} for {} at {}: it needs ≤ {t:.2} µs per call, but every call on \
                     {} pays its {launch_us:.1} µs launch overhead; no variant can meet it",
                    job.kernel, job.shape_name, job.chip.name
                ),
            ));
        }
    }
    // The run goes ahead: its journal starts afresh (unless resumed) under its meta.
    if !resumes {
        let _ = std::fs::remove_file(&journal_path);
    }
    write_meta(&journal_path, &meta)?;
    // Rounds and roll-backs already in the journal (`--resume`): not written twice.
    let journaled_rounds: Vec<usize> = journaled.rounds.iter().map(|r| r.round).collect();
    // (n, params): a resumed proposer may evaluate other params under a journaled n.
    let journaled_rollbacks: Vec<(u64, serde_json::Value)> =
        journaled.rolled_back.iter().map(|r| (r.n, r.params.clone())).collect();
    let mut valid_cache: HashMap<Vec<u32>, bool> = HashMap::new();
    // Every configuration proposed: with those the rule refused, whether the search tried
    // the whole space.
    let mut proposed: std::collections::HashSet<Vec<u32>> = Default::default();
    // An external proposer's proposals go through the oracle one by one: those it refuses
    // are proposals that were invalid (a built-in strategy's oracle calls are not).
    let external = matches!(strategy, Searcher::External(_));
    let mut refused: Vec<(Params, String)> = Vec::new();
    // The first configuration the kernel's rule refused, with its reason: what to say when
    // it refused every one.
    let mut first_refusal: Option<(Params, String)> = None;
    let mut best: Option<Best> = None;
    let (mut evaluations, mut pruned) = (0, 0);
    let mut best_so_far = Vec::new();
    let mut history: Vec<Entry> = Vec::new();
    let mut rounds: Vec<Round> = Vec::new();
    let mut check_s = 0.0;
    // The run's wall time starts before the default's check: `check_s` is part of it.
    let start = Instant::now();
    // The default, checked first: when it is correct, a variant slower than it can never
    // win (the default is kept on a tie), so only variants faster than both it and the
    // search's best are would-be winners worth a correctness check. A default that fails
    // its check gates nothing: then the search's best must be checked to stand.
    let default_check = match default.as_ref().filter(|d| d.time_us.is_some()) {
        Some(d) => {
            let checking = Instant::now();
            let checked = check_variant(pool, job, &d.params)?;
            check_s += checking.elapsed().as_secs_f64();
            Some(checked)
        }
        None => None,
    };
    let default_passes = default_check.as_ref().map(Result::is_ok);
    // Why the default failed its check, said whether or not a variant beats it.
    let default_check = default_check.and_then(Result::err);
    let check_gate = default_time.filter(|_| default_passes == Some(true));
    // The strategy proposed everything it will (the space is exhausted).
    let mut exhausted = false;
    // Which of `--early-stop` and `--time` ended the search, if one did.
    let mut stopped_by: Option<&'static str> = None;
    // `--goal` or `--validate`: each new best is validated on the key set and the models
    // using the kernel before it stands.
    let validating = job.goal.validates();
    // The winners validated, with the shapes and models they were checked on, and those
    // rolled back, with why: a rolled-back variant proposed again stays rolled back, and
    // one the journal rolled back (`--resume`) is not validated again.
    let mut validated: Vec<(Params, Validated)> = Vec::new();
    let mut rejected: Vec<(Params, String)> = Vec::new();
    for r in &journaled.rolled_back {
        let params = serde_json::from_value::<Params>(r.params.clone()).ok();
        if let (Some(p), Some(why)) = (params, &r.why) {
            if !rejected.iter().any(|(q, _)| *q == p) {
                rejected.push((p, why.clone()));
            }
        }
    }
    // A rolled-back evaluation's journal line (once: `--resume` replays the journaled ones):
    // `reason` for the log, `why` (the validation's own words) for a resumed run.
    let journal_rollback = |e: &Entry, reason: &str, why: &str| {
        let key = (e.n as u64, serde_json::to_value(&e.params).expect("params serialize"));
        if journaled_rollbacks.contains(&key) {
            return Ok(());
        }
        append(&serde_json::json!({
            "line": "rolled_back", "n": e.n, "params": e.params, "reason": reason, "why": why,
        }))
        .map(|_| ())
    };
    let mut since_improvement = 0;
    // The best the goal is judged on: the search's or the default's, whichever is faster.
    let overall = |best: &Option<Best>| -> Option<(f64, Params)> {
        let d = default.as_ref().and_then(|d| Some((d.time_us?, d.params.clone())));
        let b = best.as_ref().map(|b| (b.time_us, b.params.clone()));
        match (b, d) {
            (Some(b), Some(d)) => Some(if d.0 <= b.0 { d } else { b }),
            (b, d) => b.or(d),
        }
    };
    let met = |best: &Option<Best>| {
        target.is_some_and(|t| overall(best).is_some_and(|(time, _)| time <= t))
    };
    let mut goal_met = met(&best);
    'rounds: while !goal_met && job.goal.max_rounds.is_none_or(|m| rounds.len() < m) {
        // Ask a batch; the oracle asks the harness (nothing else is in flight).
        let mut batch = Vec::new();
        while batch.len() < BATCH
            && within_budget(evaluations + batch.len(), pruned, job.opts.budget)
        {
            // The oracle answers a bool; a worker that broke the protocol meanwhile is kept
            // here and ends the command once the ask returns.
            let mut broken: Option<Failure> = None;
            let mut oracle = |c: &Config| -> bool {
                // After a failure (a broken worker, or Ctrl-C with the request abandoned in
                // flight) ask nothing more: the pool has an answer outstanding.
                if broken.is_some() {
                    return false;
                }
                if let Some(v) = valid_cache.get(&c.0) {
                    return *v;
                }
                // (valid, the rule's refusal): a failed request is not valid, but not the
                // rule's doing either.
                let (ok, refusal) = match verdicts(pool, job, job.shape, vec![params_of(space, c)])
                {
                    Ok(Ok(v)) => match v.first() {
                        Some(None) => (true, None),
                        Some(Some(why)) => (false, Some(why.clone())),
                        None => (false, None),
                    },
                    Ok(Err(_)) => (false, None),
                    Err(f) => {
                        broken.get_or_insert(f);
                        return false;
                    }
                };
                if let Some(why) = &refusal {
                    first_refusal.get_or_insert_with(|| (params_of(space, c), why.clone()));
                }
                if let Some(why) = refusal.filter(|_| external) {
                    refused.push((params_of(space, c), why));
                }
                valid_cache.insert(c.0.clone(), ok);
                ok
            };
            let asked = strategy.get().ask(&mut SearchCtx::new(&sspace, &mut oracle));
            if let Some(f) = broken {
                return Err(f);
            }
            match asked {
                Ok(Some(c)) => batch.push(c),
                Ok(None) => {
                    exhausted = true;
                    break;
                }
                Err(e) => return Err(fail(Exit::Config, format!("the strategy failed: {e}"))),
            }
        }
        if batch.is_empty() {
            break;
        }
        proposed.extend(batch.iter().map(|c| c.0.clone()));
        // Evaluate the batch's new proposals in parallel (pruned against the incumbent of
        // the batch's start, so the outcome does not depend on completion order), then
        // decide winners in proposal order.
        let params: Vec<Params> = batch.iter().map(|c| params_of(space, c)).collect();
        let fresh: Vec<(usize, Params)> = params
            .iter()
            .enumerate()
            .map(|(i, p)| (evaluations + i, p.clone()))
            .filter(|(n, p)| replayed.get(n).is_none_or(|e| &e.params != p))
            .collect();
        let mut measured = evaluate_batch(pool, job, fresh, best.as_ref().map(|b| b.time_us))?;
        let best_before = best.clone();
        let mut proposals = 0;
        let mut stop = false;
        for (i, c) in batch.into_iter().enumerate() {
            let n = evaluations;
            let entry = match replayed.get(&n).filter(|e| e.params == params[i]) {
                Some(e) => e.clone(),
                None => {
                    let mut e = measured.remove(&n).expect("every fresh proposal is evaluated");
                    let incumbent = match (best.as_ref().map(|b| b.time_us), check_gate) {
                        (Some(b), Some(d)) => Some(b.min(d)),
                        (b, d) => b.or(d),
                    };
                    if e.status == "measured"
                        && incumbent.is_none_or(|b| e.time_us.is_some_and(|t| t < b))
                    {
                        let checking = Instant::now();
                        let checked = check_variant(pool, job, &e.params)?;
                        check_s += checking.elapsed().as_secs_f64();
                        // Journaled with its failing case: a fault of the kernel, said
                        // with the command that replays it (`report::warn_failed_checks`).
                        if let Err(f) = checked {
                            e.status = "failed_check".into();
                            e.error = Some(f.journal_error());
                            e.check = Some(f);
                        }
                    }
                    append(&serde_json::to_value(&e).expect("entries serialize"))?;
                    e
                }
            };
            evaluations += 1;
            if entry.status != "pruned" {
                job.bar.inc(1);
            }
            proposals += 1;
            if entry.status == "pruned" {
                pruned += 1;
            }
            // The strategy hears what it would have without validation.
            strategy.get().tell(&c, entry.outcome());
            strategy.saw(&entry);
            history.push(entry.clone());
            let improved = entry.status == "measured"
                && best.as_ref().is_none_or(|b| entry.time_us.unwrap_or(f64::MAX) < b.time_us);
            if improved {
                best = Some(Best::of(&entry));
                since_improvement = 0;
            } else {
                since_improvement += 1;
            }
            best_so_far.push(best.as_ref().map(|b| b.time_us));
            if job.opts.early_stop.is_some_and(|w| since_improvement >= w) {
                stop = true;
                stopped_by = Some("early_stop");
                break;
            }
            // `--time`: the batch under way finishes, as the help says; its proposals are
            // evaluated already, and dropping them would lose what was measured.
            if job.opts.time.is_some_and(|t| start.elapsed() >= Duration::from_secs_f64(t)) {
                stop = true;
                stopped_by = stopped_by.or(Some("time"));
            }
        }
        // `--goal`/`--validate`: the round's winner must be right on every shape of its key
        // set and slow no model using the kernel, or it is rolled back to the round's next
        // best (or the best before the round); the journal says which evaluation was, the
        // decision log why.
        let mut rolled: Vec<String> = Vec::new();
        let first = history.len() - proposals;
        while let Some(b) = best.clone().filter(|_| validating) {
            if best_before.as_ref().is_some_and(|p| p.params == b.params)
                || validated.iter().any(|(p, _)| *p == b.params)
            {
                break;
            }
            let checking = Instant::now();
            let verdict = match rejected.iter().find(|(p, _)| *p == b.params) {
                Some((_, why)) => Err(why.clone()),
                None => match validate_on_key_set(pool, job, &b.params)? {
                    // The parameters it would replace in this run's outcome: the best before
                    // the round, else the default. (Not a tuned record the models use today:
                    // a run's best slower than that record never replaces it — the record is
                    // kept — so holding each early best against it rolled every one back.)
                    Ok(shapes) => {
                        let replaced = best_before.as_ref().map_or(defaults, |p| &p.params);
                        models(pool, &b.params, Some(replaced))?.map(|models| (shapes, models))
                    }
                    Err(why) => Err(why),
                },
            };
            check_s += checking.elapsed().as_secs_f64();
            match verdict {
                Ok(names) => validated.push((b.params.clone(), names)),
                Err(why) => {
                    let reason = format!("{} ({:.2} µs) {why}", b.params, b.time_us);
                    if !rejected.iter().any(|(p, _)| *p == b.params) {
                        rejected.push((b.params.clone(), why.clone()));
                    }
                    // Every evaluation of a rejected variant in the round (a strategy may
                    // propose one again), so none of them is the round's best below.
                    for e in history[first..].iter_mut().filter(|e| {
                        e.status == "measured" && rejected.iter().any(|(p, _)| *p == e.params)
                    }) {
                        e.status = "rolled_back".into();
                        journal_rollback(e, &reason, &why)?;
                    }
                    rolled.push(reason);
                    // The round's best so far again, without it.
                    best = best_before.clone();
                    for (j, e) in history[first..].iter().enumerate() {
                        if e.status == "measured"
                            && e.time_us
                                .is_some_and(|t| best.as_ref().is_none_or(|x| t < x.time_us))
                        {
                            best = Some(Best::of(e));
                        }
                        best_so_far[first + j] = best.as_ref().map(|x| x.time_us);
                    }
                }
            }
        }
        if !rolled.is_empty() {
            // A rolled-back winner was no improvement: `--early-stop` counts from the best
            // that stands.
            let now = best_so_far.last().copied().flatten();
            let since = best_so_far.iter().rev().take_while(|b| **b == now).count();
            since_improvement = if now.is_some() { since - 1 } else { since };
            if job.opts.early_stop.is_some_and(|w| since_improvement >= w) {
                stop = true;
                stopped_by = stopped_by.or(Some("early_stop"));
            }
        }
        goal_met = met(&best);
        if target.is_some() {
            // The standing best before the round: the search's or the default's.
            let standing = match (best_before.as_ref().map(|b| b.time_us), default_time) {
                (Some(b), Some(d)) if d <= b => Some((d, true)),
                (Some(b), _) => Some((b, false)),
                (None, d) => d.map(|d| (d, true)),
            };
            let round = decide(
                rounds.len() + 1,
                proposals,
                &history[first..],
                standing,
                overall(&best),
                goal_met,
                &rolled,
            );
            if !journaled_rounds.contains(&round.round) {
                append(&serde_json::to_value(&round).expect("rounds serialize"))?;
            }
            rounds.push(round);
        }
        if stop || !within_budget(evaluations, pruned, job.opts.budget) {
            break 'rounds;
        }
    }
    // The default is a known answer: a search that found nothing faster keeps it (a tie
    // too, as the README promises) — if it passes its check, as every winner must: a
    // default that fails it is never recorded, and the search's best (checked) stands.
    let mut kept_default = false;
    let mut default_fails_check = false;
    if let (Some(d), Some(t)) = (default, default_time) {
        if best.as_ref().is_none_or(|b| t <= b.time_us) {
            if default_passes == Some(true) {
                best = Some(Best::of(&d));
                kept_default = true;
            } else {
                default_fails_check = true;
            }
        }
    }
    let record = match &best {
        Some(b) => record_to_keep(pool, job, b)?,
        None => None,
    };
    let front = match job.opts.objective {
        Objective::Pareto => Some(pareto(pool, job, &history)?),
        Objective::Time => None,
    };
    if front.is_some() {
        meta.front = front.clone();
        write_meta(&journal_path, &meta)?;
    }
    // A kept record is no slower than the run's best: the goal is judged on what the
    // tuned file will hold.
    let met_by_record =
        !goal_met && record.as_ref().zip(target).is_some_and(|((r, _), t)| r.time_us <= t);
    let kept_best = record.as_ref().map(|(r, _)| r).or(best.as_ref());
    let goal = match (job.goal.goal, target) {
        (Some(g), Some(target_us)) => Some(GoalReport {
            goal: g.to_string(),
            target_us,
            met: goal_met || met_by_record,
            met_by_record,
            rounds: rounds.len(),
            speedup: default_time.zip(kept_best).map(|(d, b)| d / b.time_us),
            goal_rate: g.rate(),
            // What limits the best: its profile's verdict (only asked when it matters).
            limit: match (kept_best, goal_met || met_by_record) {
                (Some(b), false) => limit_of(pool, job, &b.params)?,
                _ => None,
            },
        }),
        _ => None,
    };
    // Counted from the evaluations as they stand, as `report` counts them from the journal:
    // refused configurations apart from faults of the kernel code.
    let count = |f: fn(&str, Option<&str>) -> bool| {
        history.iter().filter(|e| f(&e.status, e.error.as_deref())).count()
    };
    let (invalid, faults) = (count(conv::is_invalid), count(conv::is_fault));
    // The whole space tried: each configuration proposed or refused by the kernel's rule
    // (a search stopped by its budget right at the end of the space counts too).
    let refused_by_rule = valid_cache.iter().filter(|(_, valid)| !**valid).map(|(c, _)| c);
    let covered: std::collections::HashSet<&Vec<u32>> =
        proposed.iter().chain(refused_by_rule).collect();
    let whole_space = (covered.len() as u128 == sspace.len()).then(|| sspace.len() as u64);
    let validated_best = best
        .as_ref()
        .and_then(|b| validated.iter().find(|(p, _)| *p == b.params))
        .map(|(_, names)| names.clone());
    // For `report`: the figures `tune` prints of a run that searched the whole space.
    meta.whole_space = whole_space;
    Ok(TuneResult {
        best,
        front,
        kept_default,
        default_fails_check,
        default_check,
        default_refused,
        record,
        default_time,
        evaluations,
        pruned,
        invalid,
        faults,
        best_so_far,
        journal: journal_path,
        meta,
        validated: validated_best,
        history,
        refused,
        rounds,
        goal,
        check_s,
        total_s: start.elapsed().as_secs_f64(),
        build_s: 0.0,
        // Nothing evaluated and nothing the rule accepted: the space holds no valid
        // configuration at this shape (as `list` counts it).
        no_valid: (exhausted && evaluations == 0 && !valid_cache.values().any(|&v| v))
            .then_some(first_refusal)
            .flatten(),
        exhausted,
        whole_space,
        stopped_by,
    })
}

/// The tuned database's record of this kernel, chip and shape, when it should stand rather
/// than the run's `best`: measured again (today's code may differ from the record's), no
/// slower (a tie keeps it: no churn) and passing its check (and with `--goal` or
/// `--validate` its key set; the models use it already). A short or unlucky run then never
/// replaces a better record with a worse one. The run's own result is not changed by it, so
/// a search's outcome never depends on the file.
fn record_to_keep(
    pool: &mut Pool,
    job: &Job,
    best: &Best,
) -> Result<Option<(Best, Option<Validated>)>, Failure> {
    let Some(r) = job.recorded.filter(|r| **r != best.params) else { return Ok(None) };
    let e = evaluate_batch(pool, job, vec![(Entry::NOT_A_PROPOSAL, r.clone())], None)?
        .remove(&Entry::NOT_A_PROPOSAL);
    let Some(e) = e.filter(|e| e.status == "measured") else { return Ok(None) };
    if e.time_us.is_none_or(|t| t > best.time_us) {
        return Ok(None);
    }
    // (A record of the defaults never gets here: the run's best is then the default, or
    // faster than it.)
    if !passes_check(pool, job, &e.params)? {
        return Ok(None);
    }
    let validated = match job.goal.validates() {
        false => None,
        true => match validate_on_key_set(pool, job, &e.params)? {
            Ok(shapes) => Some((shapes, Vec::new())),
            Err(_) => return Ok(None),
        },
    };
    Ok(Some((Best::of(&e), validated)))
}

impl Searcher {
    pub(super) fn get(&mut self) -> &mut dyn Strategy {
        match self {
            Searcher::Builtin(s) => s.as_mut(),
            Searcher::External(p) => p.as_mut(),
        }
    }

    /// Tell an external proposer about a measured variant (its `last_profile`).
    pub(super) fn saw(&mut self, e: &Entry) {
        if let (Searcher::External(p), "measured") = (self, e.status.as_str()) {
            p.set_last_profile(serde_json::json!({
                "params": e.params,
                "time_us": e.time_us,
                "bottleneck": e.bottleneck,
                "sbuf_bytes_per_partition": e.sbuf_bytes,
                "energy_uj_estimate": e.energy_uj,
            }));
        }
    }
}
