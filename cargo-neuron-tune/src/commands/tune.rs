//! `tune`: search each selected kernel's space at each selected shape for the fastest
//! correct variant, on the simulator.
//!
//! The loop per (kernel, shape): the strategy proposes a batch of [`BATCH`] configurations
//! (its validity oracle is the harness's `validate`); each is traced; a program whose
//! roofline bound (from the trace, no simulation) cannot beat the incumbent is pruned; the
//! rest come from the store or are simulated on the pool in parallel; a variant that would
//! become the best is first checked against the CPU reference, and one that fails is
//! invalid. Outcomes are told in proposal order and the batch size does not depend on
//! `--jobs`, so a seed replays exactly at any parallelism. Every evaluation is appended to
//! the run's journal before the next batch; `--resume` replays the journal instead of
//! evaluating again. The winner goes into the crate's tuned database.

use super::{default_seed, open_store};
use crate::cargo::CargoFlags;
use crate::cli::{GoalOpts, Objective, SearchOpts, Selection};
use crate::convergence::{self as conv, GoalReport, Limit, Round};
use crate::eval::{chip_key, stream, unexpected, variant_ref, Next};
use crate::exit::{fail, Exit, Failure};
use crate::output::Event;
use crate::select::{check_patterns, chip_spec, glob, select, Variant};
use crate::store::Store;
use crate::tuned::{TunedDb, TunedRecord};
use crate::worker::Pool;
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::{
    BenchResult, ChipSpec, KernelInfo, ParamValue, Params, RequestBody, ResponseBody, Shape,
    ShapeRef,
};
use neuron_tune_search::{builtin, Config, Ctx as SearchCtx, Dim, Level, Outcome, Space, Strategy};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Proposals per round, whatever `--jobs` is (so results do not depend on it).
pub const BATCH: usize = 4;

/// A kernel's protocol space as the search engine's (same dims, same level order).
fn search_space(space: &neuron_tune_protocol::Space) -> Result<Space, Failure> {
    let dims = space
        .0
        .iter()
        .map(|(name, values)| {
            let levels = values
                .iter()
                .map(|v| match v {
                    ParamValue::Int(i) => Level::Int(*i),
                    ParamValue::Bool(b) => Level::Bool(*b),
                    ParamValue::Str(s) => Level::Str(s.clone()),
                })
                .collect();
            Dim::new(name.clone(), levels)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(Exit::Config, e.to_string()))?;
    Space::new(dims).map_err(|e| fail(Exit::Config, e.to_string()))
}

fn params_of(space: &neuron_tune_protocol::Space, c: &Config) -> Params {
    Params(
        space.0.iter().zip(&c.0).map(|((n, vs), &i)| (n.clone(), vs[i as usize].clone())).collect(),
    )
}

/// One journal line: an evaluation and what it gave. The report reads these.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct Entry {
    pub n: usize,
    pub params: Params,
    /// `measured`, `pruned`, `invalid`, `failed_check`.
    pub status: String,
    pub time_us: Option<f64>,
    pub program_hash: Option<String>,
    /// SBUF peak (bytes per partition) and estimated energy (µJ) of a measured variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sbuf_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_uj: Option<f64>,
    /// The profile's verdict on a measured variant: what bounds it and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<String>,
    /// Why an invalid variant was refused (the harness's error), for the diagnosis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a journal's lines are about, written next to it (`<journal>.meta.json`, atomically)
/// once the default is measured and again with the Pareto front at the end: the journal's
/// lines alone do not say which kernel, shape, chip, strategy or seed they belong to, nor
/// what the default gave. `report` reads it; `--resume` does not need it.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct JournalMeta {
    pub kernel: String,
    pub shape: String,
    pub dims: Shape,
    pub chip: ChipSpec,
    /// The strategy's name, or `proposer`.
    pub strategy: String,
    pub seed: u64,
    pub budget: usize,
    /// `time` or `pareto`.
    pub objective: String,
    /// The harness's simulator version: the store keys of the journal's results.
    pub sim_version: String,
    /// The default parameters' evaluation (`n` is meaningless), if they run.
    pub default: Option<Entry>,
    /// `--objective pareto`: the checked front, fastest first (written at the end).
    #[serde(default)]
    pub front: Option<Vec<ParetoPoint>>,
}

/// The meta file of a journal.
pub fn meta_path(journal: &std::path::Path) -> std::path::PathBuf {
    journal.with_extension("meta.json")
}

impl Entry {
    fn outcome(&self) -> Outcome {
        match (self.status.as_str(), self.time_us) {
            ("measured" | "pruned", Some(t)) => Outcome::Value(t),
            _ => Outcome::Invalid,
        }
    }
}

/// One (kernel, shape) to tune: its crate (whose pool serves it and whose tuned database
/// records it), the kernel as listed, and the shape with its label.
struct Target {
    krate: usize,
    kernel: KernelInfo,
    shape_name: String,
    shape: Shape,
    /// The shapes a `--goal` round's winner must be right on: the kernel's selected named
    /// shapes (a model's call: its own shape).
    key_shapes: Vec<(String, Shape)>,
}

pub fn run(
    cargo: &CargoFlags,
    s: &Selection,
    models: &[String],
    opts: &SearchOpts,
    goal: &GoalOpts,
    partition: Option<crate::partition::Partition>,
    ctx: &Ctx,
) -> Result<Exit, Failure> {
    let build_start = Instant::now();
    let mut ws = Workspace::open(cargo, ctx)?;
    let build_s = build_start.elapsed().as_secs_f64();
    let store = open_store(&ws.target_dir, &ctx.out)?;
    let chip = chip_spec(&s.chip)?;
    let mut targets = if models.is_empty() {
        kernel_targets(&ws, s, &ctx.out)?
    } else {
        model_targets(&mut ws, s, models, &chip)?
    };
    // `--partition`: this run's share, by each (kernel, shape)'s name.
    targets.retain(|t| {
        let name = super::bench::item_name(&t.kernel.name, &t.shape_name, &t.shape);
        crate::partition::keeps(partition, &name)
    });
    let seed = opts.seed.unwrap_or_else(default_seed);
    let out = ctx.out.clone();
    out.status(format!(
        "   Tuning {} kernel shapes with strategy `{}`, seed {seed} (replay with --seed {seed}), {} evaluations each",
        targets.len(),
        opts.proposer.as_deref().map_or(opts.strategy.clone(), |p| format!("proposer `{p}`")),
        opts.budget
    ));
    let mut dbs: Vec<Option<TunedDb>> = ws.crates.iter().map(|_| None).collect();
    // One row per tuned (kernel, shape), printed as one table at the end.
    let mut table = crate::output::Table::new(&[
        "kernel",
        "shape",
        ">best µs",
        ">default µs",
        ">speed-up",
        ">evaluations",
        ">pruned",
        ">invalid",
        "params",
    ]);
    let bar = super::bench::progress(&out, (targets.len() * opts.budget) as u64);
    bar.set_prefix("tune");
    let mut missed: Vec<String> = Vec::new();
    // Each tuned target's winner (index into `targets`, params, time), for `over_fitted`.
    let mut winners: Vec<(usize, Params, f64)> = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let c = &mut ws.crates[t.krate];
        let k = &t.kernel;
        let shape_name = &t.shape_name;
        let key = format!(
            "{}-{}-{}-{}-{seed}",
            k.name,
            sanitize(shape_name),
            chip.name,
            opts.proposer.as_ref().map_or(opts.strategy.as_str(), |_| "proposer")
        );
        let job = Job {
            kernel: &k.name,
            shape_name,
            shape: &t.shape,
            chip: &chip,
            store: &store,
            sim_version: &c.list.sim_version,
            seed,
            opts,
            bar: &bar,
            goal,
            key_shapes: &t.key_shapes,
        };
        let mut result = tune_one(&mut c.pool, &k.space, &k.defaults, &job, &key, ctx)?;
        result.build_s = build_s;
        let Some(best) = result.best.clone() else {
            out.note(format!("  {} at {shape_name}: no valid variant found", k.name));
            if let Some(g) = &goal.goal {
                missed.push(format!(
                    "{} at {shape_name}: goal {g} not met: no valid variant found",
                    k.name
                ));
            }
            continue;
        };
        bar.suspend(|| report(&out, t, &chip, &result, &best, seed, opts, &mut table));
        winners.push((ti, best.params.clone(), best.time_us));
        if let Some(g) = result.goal.as_ref().filter(|g| !g.met) {
            missed.push(goal_miss(&k.name, shape_name, g, &best));
        }
        let db = match &mut dbs[t.krate] {
            Some(db) => db,
            slot => {
                let dir = c
                    .krate
                    .manifest_path
                    .parent()
                    .map(std::path::PathBuf::from)
                    .unwrap_or_default();
                slot.insert(TunedDb::load(&dir)?)
            }
        };
        db.record(TunedRecord {
            kernel: k.name.clone(),
            chip: chip.name.clone(),
            shape: shape_name.clone(),
            dims: t.shape.clone(),
            params: best.params.clone(),
            time_us: best.time_us,
            program_hash: best.program_hash.clone(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            sim_version: c.list.sim_version.clone(),
            validated_shapes: result.validated.clone().unwrap_or_default(),
        });
        // Saved after every kernel: an interrupted run keeps the winners it found.
        let path = db.save()?;
        bar.suspend(|| out.status(format!("   Wrote {}", path.display())));
    }
    bar.finish_and_clear();
    if !targets.is_empty() {
        out.result("");
        out.table(&table, "  ");
    }
    over_fitting(&mut ws, &targets, &winners, &chip, &out)?;
    if missed.is_empty() {
        Ok(Exit::Ok)
    } else {
        Err(fail(Exit::GoalNotMet, missed.join("\n")))
    }
}

/// The `over_fitted` rule, once every target is tuned: each winner of a kernel tuned at
/// several shapes is measured at the kernel's other tuned shapes (those its validity rule
/// accepts) and compared with their own winners.
fn over_fitting(
    ws: &mut Workspace,
    targets: &[Target],
    winners: &[(usize, Params, f64)],
    chip: &ChipSpec,
    out: &crate::output::Reporter,
) -> Result<(), Failure> {
    for (ti, params, _) in winners {
        let t = &targets[*ti];
        let mut cross = Vec::new();
        for (oi, _, own_best_us) in winners {
            let o = &targets[*oi];
            if oi == ti || o.krate != t.krate || o.kernel.name != t.kernel.name {
                continue;
            }
            let v = Variant {
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
                    shape: o.shape_name.clone(),
                    time_us: b.time_us,
                    own_best_us: *own_best_us,
                });
            }
        }
        if let Some(d) = conv::over_fitted(params, &cross) {
            out.result(format!("  {} at {}:", t.kernel.name, t.shape_name));
            for line in conv::diagnosis_lines(&d) {
                out.result(format!("    {line}"));
            }
            out.event(&Event::Diagnosis {
                kernel: t.kernel.name.clone(),
                shape: t.shape_name.clone(),
                chip: chip.name.clone(),
                diagnosis: d,
            });
        }
    }
    Ok(())
}

/// The message of a goal not met: how far the run got, and what limits its best.
fn goal_miss(kernel: &str, shape: &str, g: &GoalReport, best: &Best) -> String {
    let mut m = format!(
        "{kernel} at {shape}: goal {} not met after {} round{}: best {:.2} µs{} (the goal needs ≤ {:.2} µs)",
        g.goal,
        g.rounds,
        if g.rounds == 1 { "" } else { "s" },
        best.time_us,
        g.speedup.map_or(String::new(), |s| format!(", {s:.2}x the default")),
        g.target_us
    );
    if let Some(l) = &g.limit {
        // A verdict's summary starts with its kind ("DMA-bound: 80% of …").
        if l.summary.starts_with(&l.kind) {
            m.push_str(&format!("; limited by {}", l.summary));
        } else {
            m.push_str(&format!("; limited by {}: {}", l.kind, l.summary));
        }
        for e in &l.evidence {
            m.push_str(&format!("\n    evidence: {e}"));
        }
        for a in &l.advice {
            m.push_str(&format!("\n    advice: {a}"));
        }
    }
    m
}

/// A shape label as a file-name part.
fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect()
}

/// The selected kernels at their selected named shapes.
fn kernel_targets(
    ws: &Workspace,
    s: &Selection,
    out: &crate::output::Reporter,
) -> Result<Vec<Target>, Failure> {
    check_patterns(&ws.crates.iter().map(|c| &c.list).collect::<Vec<_>>(), s, out)?;
    let mut out = Vec::new();
    for (i, c) in ws.crates.iter().enumerate() {
        for k in select(&c.list, &Selection { all_variants: false, params: None, ..s.clone() })? {
            for (shape_name, shape) in &k.shapes {
                out.push(Target {
                    krate: i,
                    kernel: k.kernel.clone(),
                    shape_name: shape_name.clone(),
                    shape: shape.clone(),
                    key_shapes: k.shapes.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// Every distinct (kernel, shape) the selected models call (with default parameters), each
/// tuned in the crate that lists the kernel, labelled `model@shape`.
fn model_targets(
    ws: &mut Workspace,
    s: &Selection,
    patterns: &[String],
    chip: &ChipSpec,
) -> Result<Vec<Target>, Failure> {
    if s.params.is_some() || s.all_variants {
        return Err(fail(
            Exit::Config,
            "--model tunes what the models call: --params and --all-variants do not apply"
                .to_string(),
        ));
    }
    let lists: Vec<&neuron_tune_protocol::ListDoc> = ws.crates.iter().map(|c| &c.list).collect();
    let models = crate::models::select_models(&lists, patterns, &s.shapes)?;
    let mut out: Vec<Target> = Vec::new();
    for m in models {
        let plan =
            crate::models::plan(&mut ws.crates[m.krate].pool, &m, chip, &Default::default())?
                .map_err(|e| fail(Exit::Check, e))?;
        for call in plan.calls {
            if !s.kernels.is_empty() && !s.kernels.iter().any(|p| glob(p, &call.kernel)) {
                continue;
            }
            if out.iter().any(|t| t.kernel.name == call.kernel && t.shape == call.shape) {
                continue;
            }
            let owner = ws.crates.iter().enumerate().find_map(|(i, c)| {
                c.list.kernels.iter().find(|k| k.name == call.kernel).map(|k| (i, k.clone()))
            });
            let Some((krate, kernel)) = owner else {
                return Err(fail(
                    Exit::Config,
                    format!(
                        "model `{}` calls kernel `{}`, which no selected crate lists (select the \
                         crate that defines it with -p, or drop -p)",
                        m.model, call.kernel
                    ),
                ));
            };
            let shape_name = format!("{}@{}", m.model, m.shape_name);
            out.push(Target {
                krate,
                kernel,
                key_shapes: vec![(shape_name.clone(), call.shape.clone())],
                shape_name,
                shape: call.shape,
            });
        }
    }
    Ok(out)
}

/// The event of one tuned (kernel, shape), its status line, its Pareto front (results)
/// and its row of the final table.
#[allow(clippy::too_many_arguments)]
fn report(
    out: &crate::output::Reporter,
    t: &Target,
    chip: &ChipSpec,
    result: &TuneResult,
    best: &Best,
    seed: u64,
    opts: &SearchOpts,
    table: &mut crate::output::Table,
) {
    let k = &t.kernel;
    let gain = result.default_time.map(|d| d / best.time_us);
    let convergence = conv::analyze(&result.best_so_far, result.pruned, result.invalid);
    let evals: Vec<conv::Eval> = result
        .history
        .iter()
        .map(|e| conv::Eval { params: &e.params, status: &e.status, error: e.error.as_deref() })
        .collect();
    let spent =
        conv::Spent { build_s: result.build_s, check_s: result.check_s, total_s: result.total_s };
    let diagnoses: Vec<conv::Diagnosis> = [
        conv::not_converged(&convergence, result.evaluations, result.exhausted),
        conv::invalid_heavy(&evals),
        conv::slow(&spent),
    ]
    .into_iter()
    .flatten()
    .collect();
    out.event(&Event::Tune {
        kernel: k.name.clone(),
        shape: Some(t.shape_name.clone()),
        chip: Some(chip.name.clone()),
        best_params: serde_json::to_value(&best.params).expect("params serialize"),
        best_time: best.time_us,
        default_time: result.default_time,
        evaluations: result.evaluations,
        pruned: result.pruned,
        invalid: result.invalid,
        seed,
        strategy: opts.proposer.as_ref().map_or(opts.strategy.clone(), |_| "proposer".into()),
        best_so_far: result.best_so_far.clone(),
        journal: Some(result.journal.clone()),
        pareto: result.front.as_ref().map(|f| serde_json::to_value(f).expect("points serialize")),
        convergence: Box::new(convergence.clone()),
        diagnoses: diagnoses.clone(),
        rounds: result.rounds.clone(),
        goal: result.goal.clone(),
    });
    let label = if t.shape_name.contains('@') {
        format!("{} {}", t.shape_name, t.shape)
    } else {
        t.shape_name.clone()
    };
    out.status(format!(
        "   Tuned {} {label}: {:.1} µs after {} evaluations; convergence {}",
        k.name,
        best.time_us,
        result.evaluations,
        super::replay::curve(&result.best_so_far)
    ));
    table.row(vec![
        k.name.clone(),
        label.clone(),
        format!("{:.1}", best.time_us),
        result.default_time.map_or("-".into(), |d| format!("{d:.1}")),
        match gain {
            _ if result.kept_default => "default".into(),
            Some(g) => format!("{g:.2}x"),
            None => "-".into(),
        },
        result.evaluations.to_string(),
        result.pruned.to_string(),
        result.invalid.to_string(),
        best.params.to_string(),
    ]);
    // How the run went, under the kernel's name (its row is in the table at the end).
    out.result(format!("  {} {label}: {}", k.name, conv::describe(&convergence)));
    for r in &result.rounds {
        out.result(format!("    {}", r.line()));
    }
    for d in &diagnoses {
        for line in conv::diagnosis_lines(d) {
            out.result(format!("    {line}"));
        }
    }
    if let Some(front) = &result.front {
        out.result(format!(
            "  Pareto front of {} {}: {} variants no other beats on time, SBUF and estimated energy",
            k.name,
            label,
            front.len()
        ));
        let mut table = crate::output::Table::new(&[
            ">time µs",
            ">SBUF B/partition",
            ">energy µJ (estimate)",
            "params",
        ]);
        for p in front {
            table.row(vec![
                format!("{:.1}", p.time_us),
                p.sbuf_bytes_per_partition.to_string(),
                format!("{:.1}", p.energy_uj_estimate),
                p.params.to_string(),
            ]);
        }
        out.table(&table, "    ");
    }
}

struct Job<'a> {
    kernel: &'a str,
    shape_name: &'a str,
    shape: &'a Shape,
    chip: &'a ChipSpec,
    store: &'a Store,
    /// The simulator version of the crate's harness: results are stored under it.
    sim_version: &'a str,
    seed: u64,
    opts: &'a SearchOpts,
    /// Progress over every evaluation of the run (hidden off a terminal and in JSON mode).
    bar: &'a indicatif::ProgressBar,
    goal: &'a GoalOpts,
    key_shapes: &'a [(String, Shape)],
}

#[derive(Clone)]
struct Best {
    params: Params,
    time_us: f64,
    program_hash: String,
}

struct TuneResult {
    best: Option<Best>,
    /// `--objective pareto`: the non-dominated correct variants, fastest first.
    front: Option<Vec<ParetoPoint>>,
    /// No evaluated variant beat the default parameters, so `best` is the default.
    kept_default: bool,
    default_time: Option<f64>,
    evaluations: usize,
    pruned: usize,
    invalid: usize,
    best_so_far: Vec<Option<f64>>,
    journal: std::path::PathBuf,
    /// Every evaluation, in order (for the diagnosis).
    history: Vec<Entry>,
    /// `--goal`: the decision log and how it ended.
    rounds: Vec<Round>,
    goal: Option<GoalReport>,
    /// `--goal`: the key-set shapes the best was validated on (`None`: not validated).
    validated: Option<Vec<String>>,
    /// Wall time in correctness checks, of the whole search, and of the command's harness
    /// builds (s).
    check_s: f64,
    total_s: f64,
    build_s: f64,
    /// The strategy had nothing more to propose.
    exhausted: bool,
}

fn tune_one(
    pool: &mut Pool,
    space: &neuron_tune_protocol::Space,
    defaults: &Params,
    job: &Job,
    key: &str,
    ctx: &Ctx,
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
    let replayed: HashMap<usize, Entry> = if job.opts.resume {
        let read = crate::store::read_journal(&journal_path)
            .map_err(|e| fail(Exit::Internal, format!("{e:#}")))?;
        // An untrusted line is never used: its evaluation is made again.
        for (line, why) in &read.rejected {
            ctx.out.note(format!(
                "warning: {}:{line}: not used ({why}); that evaluation is made again",
                journal_path.display()
            ));
        }
        read.lines
            .into_iter()
            .filter_map(|l| serde_json::from_value::<Entry>(l).ok())
            .map(|e| (e.n, e))
            .collect()
    } else {
        let _ = std::fs::remove_file(&journal_path);
        HashMap::new()
    };
    if job.opts.resume && !replayed.is_empty() {
        ctx.out.status(format!(
            "   Resuming {} from {} journaled evaluations",
            job.kernel,
            replayed.len()
        ));
    }
    // The default, measured like any proposal (never pruned: there is no incumbent).
    let default = evaluate_batch(pool, job, vec![(usize::MAX, defaults.clone())], None)?
        .remove(&usize::MAX)
        .filter(|e| e.status == "measured");
    let default_time = default.as_ref().and_then(|e| e.time_us);
    let mut meta = JournalMeta {
        kernel: job.kernel.into(),
        shape: job.shape_name.into(),
        dims: job.shape.clone(),
        chip: job.chip.clone(),
        strategy: job
            .opts
            .proposer
            .as_ref()
            .map_or(job.opts.strategy.clone(), |_| "proposer".into()),
        seed: job.seed,
        budget: job.opts.budget,
        objective: format!("{:?}", job.opts.objective).to_lowercase(),
        sim_version: job.sim_version.into(),
        default: default.clone(),
        front: None,
    };
    let write_meta = |meta: &JournalMeta| {
        let text = serde_json::to_string_pretty(meta).expect("meta serializes");
        crate::store::write_atomic(&meta_path(&journal_path), text.as_bytes())
            .map_err(|e| fail(Exit::Internal, format!("writing the journal: {e:#}")))
    };
    write_meta(&meta)?;
    // `--goal`: the time to reach (a speed-up needs the default's time).
    let target = match job.goal.goal {
        None => None,
        Some(g) => Some(g.target_us(default_time).ok_or_else(|| {
            fail(
                Exit::Config,
                format!(
                    "--goal {g}: the default parameters of {} at {} did not measure, so there is \
                     no time to improve on; give a time instead (e.g. --goal 5ms)",
                    job.kernel, job.shape_name
                ),
            )
        })?),
    };
    // Rounds already in the journal (`--resume`): not written twice.
    let journaled_rounds: Vec<usize> = if job.opts.resume {
        crate::store::read_journal(&journal_path)
            .map(|j| j.lines)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|l| serde_json::from_value::<Round>(l).ok())
            .filter(|r| r.line == "round")
            .map(|r| r.round)
            .collect()
    } else {
        Vec::new()
    };
    let mut valid_cache: HashMap<Vec<u32>, bool> = HashMap::new();
    let mut best: Option<Best> = None;
    let (mut evaluations, mut pruned, mut invalid) = (0, 0, 0);
    let mut best_so_far = Vec::new();
    let mut history: Vec<Entry> = Vec::new();
    let mut rounds: Vec<Round> = Vec::new();
    let mut check_s = 0.0;
    // The strategy proposed everything it will (the space is exhausted).
    let mut exhausted = false;
    // `--goal`: winners validated on the key set (with the shapes checked), and rolled back.
    let mut validated: Vec<(Params, Vec<String>)> = Vec::new();
    let mut rejected: Vec<Params> = Vec::new();
    let start = Instant::now();
    let mut since_improvement = 0;
    // The best the goal is judged on: the search's or the default's, whichever is faster.
    let overall = |best: &Option<Best>| -> Option<(f64, Params)> {
        let d = default.as_ref().and_then(|d| Some((d.time_us?, d.params.clone())));
        let b = best.as_ref().map(|b| (b.time_us, b.params.clone()));
        match (b, d) {
            (Some(b), Some(d)) => Some(if d.0 < b.0 { d } else { b }),
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
        while batch.len() < BATCH && evaluations + batch.len() < job.opts.budget {
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
                let request = RequestBody::Validate {
                    kernel: job.kernel.into(),
                    shape: ShapeRef::Dims(job.shape.clone()),
                    configs: vec![params_of(space, c)],
                    chip: job.chip.clone(),
                };
                let ok = match pool.request(request) {
                    Ok(done) => matches!(done.answer, Ok(ResponseBody::Validate { ref verdicts })
                        if verdicts.first().is_some_and(|v| v.is_none())),
                    Err(f) => {
                        broken.get_or_insert(f);
                        false
                    }
                };
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
                    let incumbent = best.as_ref().map(|b| b.time_us);
                    if e.status == "measured"
                        && incumbent.is_none_or(|b| e.time_us.is_some_and(|t| t < b))
                    {
                        let checking = Instant::now();
                        let passed = passes_check(pool, job, &e.params)?;
                        check_s += checking.elapsed().as_secs_f64();
                        if !passed {
                            e.status = "failed_check".into();
                        }
                    }
                    let line = serde_json::to_value(&e).expect("entries serialize");
                    job.store
                        .append_journal(&journal_name, &line)
                        .map_err(|e| fail(Exit::Internal, format!("writing the journal: {e:#}")))?;
                    e
                }
            };
            evaluations += 1;
            job.bar.inc(1);
            proposals += 1;
            history.push(entry.clone());
            match entry.status.as_str() {
                "pruned" => pruned += 1,
                "invalid" | "failed_check" => invalid += 1,
                _ => {}
            }
            let outcome = entry.outcome();
            strategy.get().tell(&c, outcome);
            strategy.saw(&entry);
            let improved = entry.status == "measured"
                && best.as_ref().is_none_or(|b| entry.time_us.unwrap_or(f64::MAX) < b.time_us);
            if improved {
                best = Some(Best {
                    params: entry.params.clone(),
                    time_us: entry.time_us.unwrap_or(f64::MAX),
                    program_hash: entry.program_hash.clone().unwrap_or_default(),
                });
                since_improvement = 0;
            } else {
                since_improvement += 1;
            }
            best_so_far.push(best.as_ref().map(|b| b.time_us));
            if job.opts.early_stop.is_some_and(|w| since_improvement >= w)
                || job.opts.time.is_some_and(|t| start.elapsed() >= Duration::from_secs_f64(t))
            {
                stop = true;
                break;
            }
        }
        // `--goal`: the round's winner must be right on every shape of its key set, or it
        // is rolled back to the round's next best (or the best before the round).
        let mut rolled: Vec<String> = Vec::new();
        let first = history.len() - proposals;
        while target.is_some() {
            let Some(b) = best.clone() else { break };
            if best_before.as_ref().is_some_and(|p| p.params == b.params)
                || validated.iter().any(|(p, _)| *p == b.params)
            {
                break;
            }
            let checking = Instant::now();
            let verdict = validate_on_key_set(pool, job, &b.params)?;
            check_s += checking.elapsed().as_secs_f64();
            match verdict {
                Ok(names) => validated.push((b.params.clone(), names)),
                Err(why) => {
                    rolled.push(format!("{} ({:.2} µs) {why}", b.params, b.time_us));
                    rejected.push(b.params.clone());
                    invalid += 1;
                    best = best_before.clone();
                    for (j, e) in history[first..].iter_mut().enumerate() {
                        if rejected.contains(&e.params) && e.status == "measured" {
                            e.status = "rolled_back".into();
                        }
                        if e.status == "measured"
                            && e.time_us
                                .is_some_and(|t| best.as_ref().is_none_or(|x| t < x.time_us))
                        {
                            best = Some(Best {
                                params: e.params.clone(),
                                time_us: e.time_us.unwrap_or(f64::MAX),
                                program_hash: e.program_hash.clone().unwrap_or_default(),
                            });
                        }
                        best_so_far[first + j] = best.as_ref().map(|x| x.time_us);
                    }
                }
            }
        }
        goal_met = met(&best);
        if target.is_some() {
            let round = decide(
                rounds.len() + 1,
                proposals,
                &history[first..],
                best_before.as_ref(),
                overall(&best),
                goal_met,
                &rolled,
            );
            if !journaled_rounds.contains(&round.round) {
                let line = serde_json::to_value(&round).expect("rounds serialize");
                job.store
                    .append_journal(&journal_name, &line)
                    .map_err(|e| fail(Exit::Internal, format!("writing the journal: {e:#}")))?;
            }
            rounds.push(round);
        }
        if stop || evaluations >= job.opts.budget {
            break 'rounds;
        }
    }
    // The default is a known answer: a search that found nothing faster keeps it.
    let mut kept_default = false;
    if let (Some(d), Some(t)) = (default, default_time) {
        if best.as_ref().is_none_or(|b| t < b.time_us) {
            best = Some(Best {
                params: d.params,
                time_us: t,
                program_hash: d.program_hash.unwrap_or_default(),
            });
            kept_default = true;
        }
    }
    let front = match job.opts.objective {
        Objective::Pareto => Some(pareto(pool, job, &history)?),
        Objective::Time => None,
    };
    if front.is_some() {
        meta.front = front.clone();
        write_meta(&meta)?;
    }
    let goal = match (job.goal.goal, target) {
        (Some(g), Some(target_us)) => Some(GoalReport {
            goal: g.to_string(),
            target_us,
            met: goal_met,
            rounds: rounds.len(),
            speedup: default_time.zip(best.as_ref()).map(|(d, b)| d / b.time_us),
            // What limits the best: its profile's verdict (only asked when it matters).
            limit: match (&best, goal_met) {
                (Some(b), false) => limit_of(pool, job, &b.params)?,
                _ => None,
            },
        }),
        _ => None,
    };
    let validated_best = best
        .as_ref()
        .and_then(|b| validated.iter().find(|(p, _)| *p == b.params))
        .map(|(_, names)| names.clone());
    Ok(TuneResult {
        best,
        front,
        kept_default,
        default_time,
        evaluations,
        pruned,
        invalid,
        best_so_far,
        journal: journal_path,
        validated: validated_best,
        history,
        rounds,
        goal,
        check_s,
        total_s: start.elapsed().as_secs_f64(),
        build_s: 0.0,
        exhausted,
    })
}

/// The decision of one round: a new best is kept; a would-be winner that failed its
/// correctness check is rolled back (the previous best stays); otherwise nothing changed.
fn decide(
    round: usize,
    proposals: usize,
    entries: &[Entry],
    before: Option<&Best>,
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
        .filter(|(t, _)| before.is_none_or(|b| *t < b.time_us))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let previous = before.map_or("the default".to_string(), |b| format!("{:.2} µs", b.time_us));
    let (decision, mut reason) = match new_best {
        Some((t, e)) if !rolled.is_empty() => (
            "rolled_back",
            format!(
                "rolled back {}; the best is now {t:.2} µs {} (was {previous})",
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
            (
                "no_improvement",
                format!(
                    "nothing beat {previous} ({} slower, {} pruned, {} invalid)",
                    counts("measured"),
                    counts("pruned"),
                    counts("invalid")
                ),
            )
        }
    };
    if decision == "kept" && !failed.is_empty() {
        // Would-be winners that failed the property check before the round's decision.
        reason.push_str(&format!("; rolled back {}", failed.join("; ")));
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
/// validity rule accepts? `Ok(the shapes checked)`, or `Err(why)` naming the failing shape.
fn validate_on_key_set(
    pool: &mut Pool,
    job: &Job,
    params: &Params,
) -> Result<Result<Vec<String>, String>, Failure> {
    let (mut names, mut shapes) = (Vec::new(), Vec::new());
    for (name, shape) in job.key_shapes {
        let done = pool.request(RequestBody::Validate {
            kernel: job.kernel.into(),
            shape: ShapeRef::Dims(shape.clone()),
            configs: vec![params.clone()],
            chip: job.chip.clone(),
        })?;
        if matches!(done.answer, Ok(ResponseBody::Validate { ref verdicts })
            if verdicts.first().is_some_and(|v| v.is_none()))
        {
            names.push(name.clone());
            shapes.push(shape.clone());
        }
    }
    let done = pool.request(RequestBody::CheckAt {
        kernel: job.kernel.into(),
        params: params.clone(),
        shapes,
        seed: job.seed,
        chip: job.chip.clone(),
    })?;
    Ok(match done.answer {
        Ok(ResponseBody::Check(r)) if r.passed => Ok(names),
        Ok(ResponseBody::Check(r)) => Err(match r.failure {
            Some(f) => {
                let name = job
                    .key_shapes
                    .iter()
                    .find(|(_, s)| *s == f.shape)
                    .map_or("?", |(n, _)| n.as_str());
                format!("wrong at shape {name} ({}): {}", f.shape, f.message)
            }
            None => "failed on its key set".to_string(),
        }),
        Ok(other) => return Err(unexpected(&other)),
        Err(e) => Err(format!("failed on its key set: {e}")),
    })
}

/// The profile verdict of a variant: what bounds it, and the evidence.
fn limit_of(pool: &mut Pool, job: &Job, params: &Params) -> Result<Option<Limit>, Failure> {
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

/// The job's variant with these parameters.
fn variant(job: &Job, params: &Params) -> Variant {
    Variant {
        kernel: job.kernel.into(),
        shape_name: job.shape_name.into(),
        shape: job.shape.clone(),
        params: params.clone(),
    }
}

/// Evaluate proposals in parallel on the pool: trace each; one whose roofline bound cannot
/// beat `incumbent` is pruned (never simulated); the rest come from the store or are
/// simulated and stored. Statuses are `measured`, `pruned` or `invalid`; the correctness
/// check of a would-be winner is the caller's, in proposal order.
fn evaluate_batch(
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
            }
        };
    let measured = |n: usize, params: &Params, b: &BenchResult, hash: String| Entry {
        sbuf_bytes: Some(b.sbuf_bytes_per_partition),
        energy_uj: Some(crate::energy::estimate_uj(b)),
        bottleneck: Some(format!("{}: {}", b.bottleneck, b.bottleneck_summary)),
        ..entry(n, params, "measured", Some(b.time_us), Some(hash))
    };
    // The program hash is known once traced: `None` while tracing.
    let items = proposals.into_iter().map(|(n, p)| (n, p, None::<String>));
    let first = |(_, p, _): &(usize, Params, Option<String>)| {
        RequestBody::Trace(variant_ref(&variant(job, p), job.chip))
    };
    stream(pool, items, first, |(n, params, hash), answer| {
        let e = match (hash, answer.answer) {
            (_, Err(e)) => {
                Entry { error: Some(e.to_string()), ..entry(n, &params, "invalid", None, None) }
            }
            (None, Ok(ResponseBody::Trace(t))) => {
                if pruning && incumbent.is_some_and(|best| t.roofline_bound_us >= best) {
                    // Provably no better: told to the strategy as its bound (a value no
                    // lower than the incumbent), never simulated.
                    entry(n, &params, "pruned", Some(t.roofline_bound_us), Some(t.program_hash))
                } else {
                    let key = Store::key_for(&t.program_hash, &chip_text, job.sim_version, "bench");
                    match job.store.get::<BenchResult>("bench", &key) {
                        Some(b) => measured(n, &params, &b, t.program_hash),
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

/// The search: a built-in strategy, or an external proposer, which also sees the last
/// measured variant's profile summary.
enum Searcher {
    Builtin(Box<dyn Strategy>),
    External(Box<neuron_tune_search::Proposer>),
}

impl Searcher {
    fn get(&mut self) -> &mut dyn Strategy {
        match self {
            Searcher::Builtin(s) => s.as_mut(),
            Searcher::External(p) => p.as_mut(),
        }
    }

    /// Tell an external proposer about a measured variant (its `last_profile`).
    fn saw(&mut self, e: &Entry) {
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

/// A variant of the Pareto front.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ParetoPoint {
    pub params: Params,
    pub time_us: f64,
    pub sbuf_bytes_per_partition: u64,
    /// An estimate (docs/energy.md), not a measurement.
    pub energy_uj_estimate: f64,
}

/// The Pareto front (time, SBUF, estimated energy) of the measured variants, each checked
/// against the CPU reference: one that fails leaves the front and the front is recomputed.
fn pareto(pool: &mut Pool, job: &Job, history: &[Entry]) -> Result<Vec<ParetoPoint>, Failure> {
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

/// The harness's correctness check of a would-be winner. Not cached across runs: a check
/// depends on the kernel's reference and body, which no key here would capture.
fn passes_check(pool: &mut Pool, job: &Job, params: &Params) -> Result<bool, Failure> {
    let done = pool.request(RequestBody::Check {
        kernel: job.kernel.into(),
        params: params.clone(),
        cases: 8,
        seed: job.seed,
        chip: job.chip.clone(),
        regressions: None,
    })?;
    match done.answer {
        Ok(ResponseBody::Check(r)) => Ok(r.passed),
        Ok(other) => Err(unexpected(&other)),
        Err(_) => Ok(false),
    }
}
