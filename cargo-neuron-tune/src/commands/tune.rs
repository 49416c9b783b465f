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
use crate::cli::{SearchOpts, Selection};
use crate::eval::{chip_key, unexpected, variant_ref};
use crate::exit::{fail, Exit, Failure};
use crate::output::Event;
use crate::select::{check_patterns, chip_spec, select, Variant};
use crate::store::Store;
use crate::tuned::{TunedDb, TunedRecord};
use crate::worker::Pool;
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::{
    BenchResult, ChipSpec, ErrorInfo, ParamValue, Params, RequestBody, ResponseBody, Shape,
    ShapeRef, TraceResult,
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

/// One journal line: an evaluation and what it gave.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
struct Entry {
    n: usize,
    params: Params,
    /// `measured`, `pruned`, `invalid`, `failed_check`.
    status: String,
    time_us: Option<f64>,
    program_hash: Option<String>,
}

impl Entry {
    fn outcome(&self) -> Outcome {
        match (self.status.as_str(), self.time_us) {
            ("measured" | "pruned", Some(t)) => Outcome::Value(t),
            _ => Outcome::Invalid,
        }
    }
}

pub fn run(
    cargo: &CargoFlags,
    s: &Selection,
    opts: &SearchOpts,
    ctx: &Ctx,
) -> Result<Exit, Failure> {
    let mut ws = Workspace::open(cargo, ctx)?;
    let store = open_store(&ws.target_dir, &ctx.out)?;
    let chip = chip_spec(&s.chip)?;
    check_patterns(&ws.crates.iter().map(|c| &c.list).collect::<Vec<_>>(), s)?;
    let seed = opts.seed.unwrap_or_else(default_seed);
    let out = ctx.out.clone();
    out.status(format!(
        "   Tuning with strategy `{}`, seed {seed} (replay with --seed {seed}), {} evaluations per kernel and shape",
        opts.strategy, opts.budget
    ));
    for c in &mut ws.crates {
        let dir = c.krate.manifest_path.parent().map(std::path::PathBuf::from).unwrap_or_default();
        let mut db = TunedDb::load(&dir)?;
        for k in select(&c.list, &Selection { all_variants: false, params: None, ..s.clone() })? {
            for (shape_name, shape) in &k.shapes {
                let key = format!(
                    "{}-{shape_name}-{}-{}-{seed}",
                    k.kernel.name, chip.name, opts.strategy
                );
                let job = Job {
                    kernel: &k.kernel.name,
                    shape_name,
                    shape,
                    chip: &chip,
                    store: &store,
                    seed,
                    opts,
                };
                let result =
                    tune_one(&mut c.pool, &k.kernel.space, &k.kernel.defaults, &job, &key, ctx)?;
                let Some(best) = result.best.clone() else {
                    out.note(format!(
                        "  {} at {shape_name}: no valid variant found",
                        k.kernel.name
                    ));
                    continue;
                };
                let gain = result.default_time.map(|d| d / best.time_us);
                out.event(&Event::Tune {
                    kernel: k.kernel.name.clone(),
                    shape: Some(shape_name.clone()),
                    chip: Some(chip.name.clone()),
                    best_params: serde_json::to_value(&best.params).expect("params serialize"),
                    best_time: best.time_us,
                    default_time: result.default_time,
                    evaluations: result.evaluations,
                    pruned: result.pruned,
                    invalid: result.invalid,
                    seed,
                    strategy: opts.strategy.clone(),
                    best_so_far: result.best_so_far.clone(),
                    journal: Some(result.journal.clone()),
                });
                out.result(format!(
                    "  {:<16} {:<14} {:>10.1} µs  {}{}",
                    k.kernel.name,
                    shape_name,
                    best.time_us,
                    best.params,
                    gain.map_or(String::new(), |g| format!(
                        "  {g:.2}x the default ({:.1} µs)",
                        result.default_time.unwrap_or(0.0)
                    ))
                ));
                out.result(format!(
                    "  {:<16} {:<14} {} evaluations ({} pruned by the roofline bound, {} invalid); convergence {}",
                    "",
                    "",
                    result.evaluations,
                    result.pruned,
                    result.invalid,
                    super::replay::curve(&result.best_so_far)
                ));
                db.record(TunedRecord {
                    kernel: k.kernel.name.clone(),
                    chip: chip.name.clone(),
                    shape: shape_name.clone(),
                    dims: shape.clone(),
                    params: best.params.clone(),
                    time_us: best.time_us,
                    program_hash: best.program_hash.clone(),
                    tool_version: env!("CARGO_PKG_VERSION").into(),
                    sim_version: neuron_sim::SIM_VERSION.into(),
                });
            }
        }
        let path = db.save()?;
        out.status(format!("   Wrote {}", path.display()));
    }
    Ok(Exit::Ok)
}

struct Job<'a> {
    kernel: &'a str,
    shape_name: &'a str,
    shape: &'a Shape,
    chip: &'a ChipSpec,
    store: &'a Store,
    seed: u64,
    opts: &'a SearchOpts,
}

#[derive(Clone)]
struct Best {
    params: Params,
    time_us: f64,
    program_hash: String,
}

struct TuneResult {
    best: Option<Best>,
    default_time: Option<f64>,
    evaluations: usize,
    pruned: usize,
    invalid: usize,
    best_so_far: Vec<Option<f64>>,
    journal: std::path::PathBuf,
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
    let mut strategy: Box<dyn Strategy> = match &job.opts.proposer {
        Some(cmd) => Box::new(neuron_tune_search::Proposer::new(cmd.clone())),
        None => builtin(&job.opts.strategy, job.seed).ok_or_else(|| {
            fail(
                Exit::Config,
                format!(
                    "--strategy {}: unknown (built in: {})",
                    job.opts.strategy,
                    neuron_tune_search::BUILTIN.join(", ")
                ),
            )
        })?,
    };
    let journal_name = format!("tune-{key}");
    let journal_path = job.store.root().join("journals").join(format!("{journal_name}.jsonl"));
    let replayed: HashMap<usize, Entry> = if job.opts.resume {
        std::fs::read_to_string(&journal_path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Entry>(l).ok())
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
    let default_time = measure(pool, job, defaults)?.map(|b| b.time_us);
    let mut valid_cache: HashMap<Vec<u32>, bool> = HashMap::new();
    let mut best: Option<Best> = None;
    let (mut evaluations, mut pruned, mut invalid) = (0, 0, 0);
    let mut best_so_far = Vec::new();
    let start = Instant::now();
    let mut since_improvement = 0;
    'rounds: loop {
        // Ask a batch; the oracle asks the harness (nothing else is in flight).
        let mut batch = Vec::new();
        while batch.len() < BATCH && evaluations + batch.len() < job.opts.budget {
            // The oracle answers a bool; a worker that broke the protocol meanwhile is kept
            // here and ends the command once the ask returns.
            let mut broken: Option<Failure> = None;
            let mut oracle = |c: &Config| -> bool {
                if let Some(v) = valid_cache.get(&c.0) {
                    return *v;
                }
                let request = RequestBody::Validate {
                    kernel: job.kernel.into(),
                    shape: ShapeRef::Dims(job.shape.clone()),
                    configs: vec![params_of(space, c)],
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
            let asked = strategy.ask(&mut SearchCtx::new(&sspace, &mut oracle));
            if let Some(f) = broken {
                return Err(f);
            }
            match asked {
                Ok(Some(c)) => batch.push(c),
                Ok(None) => break,
                Err(e) => return Err(fail(Exit::Config, format!("the strategy failed: {e}"))),
            }
        }
        if batch.is_empty() {
            break;
        }
        for c in batch {
            let n = evaluations;
            let params = params_of(space, &c);
            let entry = match replayed.get(&n).filter(|e| e.params == params) {
                Some(e) => e.clone(),
                None => {
                    let e = evaluate(pool, job, n, params, best.as_ref().map(|b| b.time_us))?;
                    let line = serde_json::to_value(&e).expect("entries serialize");
                    job.store
                        .append_journal(&journal_name, &line)
                        .map_err(|e| fail(Exit::Internal, format!("writing the journal: {e:#}")))?;
                    e
                }
            };
            evaluations += 1;
            match entry.status.as_str() {
                "pruned" => pruned += 1,
                "invalid" | "failed_check" => invalid += 1,
                _ => {}
            }
            let outcome = entry.outcome();
            strategy.tell(&c, outcome);
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
                break 'rounds;
            }
        }
        if evaluations >= job.opts.budget {
            break;
        }
    }
    Ok(TuneResult {
        best,
        default_time,
        evaluations,
        pruned,
        invalid,
        best_so_far,
        journal: journal_path,
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

/// Trace one parameter set at the job's shape (`Ok(Err)`: the variant cannot run).
fn trace(
    pool: &mut Pool,
    job: &Job,
    params: &Params,
) -> Result<Result<TraceResult, ErrorInfo>, Failure> {
    let done = pool.request(RequestBody::Trace(variant_ref(&variant(job, params), job.chip)))?;
    match done.answer {
        Ok(ResponseBody::Trace(t)) => Ok(Ok(t)),
        Ok(other) => Err(unexpected(&other)),
        Err(e) => Ok(Err(e)),
    }
}

/// The time of a traced program: from the store, else simulated and stored.
fn bench(
    pool: &mut Pool,
    job: &Job,
    params: &Params,
    trace: &TraceResult,
) -> Result<Result<BenchResult, ErrorInfo>, Failure> {
    let key = Store::key(&trace.program_hash, &chip_key(job.chip), "bench");
    if let Some(b) = job.store.get::<BenchResult>("bench", &key) {
        return Ok(Ok(b));
    }
    let done = pool.request(RequestBody::Bench(variant_ref(&variant(job, params), job.chip)))?;
    match done.answer {
        Ok(ResponseBody::Bench(b)) => {
            job.store
                .put("bench", &key, &b)
                .map_err(|e| fail(Exit::Internal, format!("writing the store: {e:#}")))?;
            Ok(Ok(b))
        }
        Ok(other) => Err(unexpected(&other)),
        Err(e) => Ok(Err(e)),
    }
}

/// Trace and bench one parameter set (the default, for the gain).
fn measure(pool: &mut Pool, job: &Job, params: &Params) -> Result<Option<BenchResult>, Failure> {
    let Ok(t) = trace(pool, job, params)? else { return Ok(None) };
    Ok(bench(pool, job, params, &t)?.ok())
}

/// Evaluate proposal `n`: trace, prune, bench, and check a would-be winner.
fn evaluate(
    pool: &mut Pool,
    job: &Job,
    n: usize,
    params: Params,
    incumbent: Option<f64>,
) -> Result<Entry, Failure> {
    let entry = |status: &str, time_us: Option<f64>, hash: Option<String>| Entry {
        n,
        params: params.clone(),
        status: status.into(),
        time_us,
        program_hash: hash,
    };
    let Ok(trace) = trace(pool, job, &params)? else { return Ok(entry("invalid", None, None)) };
    if incumbent.is_some_and(|best| trace.roofline_bound_us >= best) {
        // Provably no better: told to the strategy as its bound (a value no lower than the
        // incumbent), never simulated.
        return Ok(entry("pruned", Some(trace.roofline_bound_us), Some(trace.program_hash)));
    }
    let Ok(b) = bench(pool, job, &params, &trace)? else {
        return Ok(entry("invalid", None, None));
    };
    let hash = Some(trace.program_hash);
    if incumbent.is_none_or(|best| b.time_us < best) && !passes_check(pool, job, &params)? {
        return Ok(entry("failed_check", Some(b.time_us), hash));
    }
    Ok(entry("measured", Some(b.time_us), hash))
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
