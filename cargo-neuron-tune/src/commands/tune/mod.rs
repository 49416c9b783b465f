//! `tune`: search each selected kernel's space at each selected shape for the fastest
//! correct variant, on the simulator.
//!
//! The loop per (kernel, shape): the strategy proposes a batch of [`BATCH`] configurations
//! (its validity oracle is the harness's `validate`); each is traced; a program whose
//! lower bound (from the trace, no simulation) cannot beat the incumbent is pruned; the
//! rest come from the store or are simulated on the pool in parallel; a variant that would
//! become the best is first checked against the CPU reference, and one that fails is
//! invalid. Outcomes are told in proposal order and the batch size does not depend on
//! `--jobs`, so a seed replays exactly at any parallelism. Every evaluation is appended to
//! the run's journal before the next batch; `--resume` replays the journal instead of
//! evaluating again. The winner goes into the crate's tuned database.
//!
//! Files: this one selects the targets and runs them; `journal.rs` is the journal and its
//! meta file; `report.rs` says what each target's
//! search found; `search.rs` is the loop of one target; `evaluate.rs` evaluates proposals (and the Pareto front); `goal.rs` is `--goal`'s
//! rounds, roll-back and the over-fitting check; `reproduce.rs` the failures an exit 4 names,
//! with the commands that reproduce them.

use super::{default_seed, open_store};
use crate::cargo::CargoFlags;
use crate::cli::{GoalOpts, Objective, SearchOpts, Selection};
use crate::convergence::{self as conv, GoalReport, Limit, Round};
use crate::eval::{chip_key, stream, stream_on, unexpected, variant_ref, Next};
use crate::exit::{fail, Exit, Failure};
use crate::output::Event;
use crate::select::{check_patterns, chip_spec, glob, select, Variant};
use crate::store::Store;
use crate::tuned::{TunedDb, TunedRecord, Written};
use crate::worker::Pool;
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::{
    BenchResult, ChipSpec, ErrorKind, KernelInfo, ParamValue, Params, RequestBody, ResponseBody,
    Shape, ShapeRef, Work,
};
use neuron_tune_search::{builtin, Config, Ctx as SearchCtx, Dim, Level, Outcome, Space, Strategy};
use std::collections::HashMap;
use std::time::{Duration, Instant};

mod evaluate;
mod goal;
mod journal;
mod model_check;
mod report;
mod reproduce;
mod search;

use evaluate::*;
use goal::*;
pub use journal::*;
use report::*;
use search::*;

/// Proposals per round, whatever `--jobs` is (so results do not depend on it).
pub const BATCH: usize = 4;

/// Proposals per unit of `--budget`, pruned ones included: the cap that keeps a search whose
/// proposals are nearly all pruned from running on (each still costs a trace).
pub const PROPOSALS_PER_EVALUATION: usize = 4;

/// Whether `proposals` (of which `pruned` were pruned) are within `budget`. The budget
/// counts every proposal that was not pruned (simulated, served from the store, or found
/// invalid): a pruned one cost a trace and its lower bound, not a simulation, so it is
/// not charged, up to [`PROPOSALS_PER_EVALUATION`] × budget proposals in all.
fn within_budget(proposals: usize, pruned: usize, budget: usize) -> bool {
    charged(proposals, pruned) < budget
        && proposals < budget.saturating_mul(PROPOSALS_PER_EVALUATION)
}

/// The proposals charged to `--budget`: all but the pruned ones.
fn charged(proposals: usize, pruned: usize) -> usize {
    proposals - pruned.min(proposals)
}

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
    /// A model's call (`shape_name` is `model@shape`): the crate of the model, whose
    /// package a reproducer's `bench --shape model@shape` selects too.
    model_krate: Option<usize>,
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
    // A chip name or file is checked before anything is built.
    let chip = chip_spec(&s.chip)?;
    let mut ws = Workspace::open(cargo, ctx)?;
    // A damaged tuned database is refused before any search, not when a winner is recorded.
    ws.tuned.get()?;
    let build_s = build_start.elapsed().as_secs_f64();
    let store = open_store(&ws.target_dir, &ctx.out)?;
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
    // A pinned run (`--params`) searches another space: its journal is its own.
    let pins = s.params.as_deref().map_or(String::new(), |p| format!("-pinned-{}", sanitize(p)));
    let strategy_name = opts.proposer.as_ref().map_or(opts.strategy.as_str(), |_| "proposer");
    // So is a Pareto run: it prunes nothing and keeps other figures, so neither run may
    // resume from (or replace) the other's journal.
    let objective = match opts.objective {
        Objective::Time => "",
        Objective::Pareto => "-pareto",
    };
    // Keyed by the problem's dimensions too: a model's calls of one kernel share a label
    // (`qwen3@tiny`) but are different problems, and a named shape whose dimensions were
    // edited is another problem; none may resume from another's evaluations.
    let unnamed_prefix = |t: &Target| {
        let shape = sanitize(&t.shape_name);
        let dims = dims_slug(&t.shape);
        format!(
            "tune-{}-{shape}-{dims}-{}-{strategy_name}{objective}{pins}-",
            t.kernel.name, chip.name
        )
    };
    // And by the package: two packages' kernels of one name are two problems, never one
    // journal (the target dir is shared), and `report -p` goes by the package.
    let packages: Vec<RunPackage> =
        ws.crates.iter().map(|c| RunPackage::of(&ws.root, &c.krate)).collect();
    let journal_prefix = |t: &Target| {
        let unnamed = unnamed_prefix(t);
        format!("tune-{}{}", packages[t.krate].journal_part(), &unnamed["tune-".len()..])
    };
    let out = ctx.out.clone();
    let journals = store.root().join("journals");
    // Journals named before they named their package are resumed too (`adopt_unnamed`).
    let prefixes: Vec<String> =
        targets.iter().flat_map(|t| [journal_prefix(t), unnamed_prefix(t)]).collect();
    let seed = match (opts.seed, opts.resume) {
        // A seed no journal of these targets has (a typo?) starts a new run: said, as
        // without `--seed`.
        (Some(seed), true) => {
            if !prefixes.iter().any(|p| journals.join(format!("{p}{seed}.jsonl")).exists()) {
                let latest = latest_journal_seed(&journals, &prefixes);
                out.note(format!(
                    "warning: --resume --seed {seed}: no journal of these kernels, shapes, chip \
                     and strategy has that seed; starting a new run{}",
                    latest.map_or(String::new(), |s| format!(" (the latest journal has seed {s})"))
                ));
            }
            seed
        }
        (Some(seed), false) => seed,
        // `--resume` without `--seed`: the run of the latest journal of these targets.
        (None, true) => match latest_journal_seed(&journals, &prefixes) {
            Some(seed) => {
                out.status(format!("   Resuming seed {seed} (the latest journal of this run)"));
                seed
            }
            None => {
                let seed = default_seed();
                out.note(format!(
                    "warning: --resume: no journal of these kernels, shapes, chip and \
                         strategy to resume; starting a new run with seed {seed}"
                ));
                seed
            }
        },
        (None, false) => default_seed(),
    };
    out.status(format!(
        "   Tuning {} with {}, {}, {} simulations each",
        conv::count(targets.len(), "kernel shape"),
        opts.proposer
            .as_deref()
            .map_or(format!("strategy `{}`", opts.strategy), |p| format!("proposer `{p}`")),
        super::seed_words(seed, opts.seed.is_none()),
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
        ">faults",
        "params",
    ]);
    let bar = super::bench::progress(&out, (targets.len() * opts.budget) as u64);
    bar.set_prefix("tune");
    let mut missed: Vec<String> = Vec::new();
    // Targets where nothing correct was found to record (exit 4).
    let mut failed: Vec<String> = Vec::new();
    // Targets whose space holds no valid configuration (a configuration error, exit 2).
    let mut empty: Vec<String> = Vec::new();
    // Targets some of whose variants' kernel code failed: their winners are recorded, and
    // the run ends with exit 4, as `bench` does for such variants.
    let mut faults: Vec<String> = Vec::new();
    // Each distinct failure of those targets, with the command that reproduces it.
    let mut reproducers: Vec<String> = Vec::new();
    // Each tuned target's winner (index into `targets`, params, time), for `over_fitted`.
    let mut winners: Vec<(usize, Params, f64)> = Vec::new();
    // What this run recorded for each target it recorded (index into `targets`, params):
    // a shape whose dimensions' record is still its own never runs another's winner.
    let mut written_params: Vec<(usize, Params)> = Vec::new();
    // `--goal`/`--validate`: per target, the models whose winner must not lower their
    // throughput, and the winners of this run (the models use them once recorded).
    // The models the selection holds, for the advice when none calls a target.
    let mut selected_models: Vec<String> =
        ws.crates.iter().flat_map(|c| c.list.models.iter().map(|m| m.name.clone())).collect();
    selected_models.sort();
    selected_models.dedup();
    let users = if goal.validates() {
        bar.suspend(|| model_check::users(&mut ws, &chip, &targets, &out))?
    } else {
        vec![Vec::new(); targets.len()]
    };
    let mut fresh: Vec<(std::path::PathBuf, neuron_tune_protocol::TunedEntry)> = Vec::new();
    let mut written: Vec<Written> = Vec::new();
    // Only the crates with something to tune: a binary is tens of MiB.
    let harness_hashes = (0..ws.crates.len())
        .map(|i| {
            if targets.iter().any(|t| t.krate == i) {
                harness_hash(&ws.crates[i].exe)
            } else {
                Ok(String::new())
            }
        })
        .collect::<Result<Vec<String>, Failure>>()?;
    // The whole run's time, for the one build diagnosis (the build is shared by every target).
    let mut run_spent = conv::Spent { build_s, ..Default::default() };
    // For the closing summary event: evaluations, invalid ones and faults over every target.
    let (mut evaluated, mut invalid, mut kernel_faults) = (0, 0, 0);
    // The targets' loop, in a closure so that a run stopped early (an interruption, or
    // any other failure `?` takes out of a search) still says what it recorded: the
    // tuned-database lines and the table of the targets that finished, below.
    let looped = (|| -> Result<(), Failure> {
        for (ti, t) in targets.iter().enumerate() {
            let (before, rest) = ws.crates.split_at_mut(t.krate);
            let (c, after) = rest.split_first_mut().expect("a target's crate is in the workspace");
            let k = &t.kernel;
            let shape_name = &t.shape_name;
            // The journal is `tune-{key}.jsonl`.
            let key = format!("{}{seed}", &journal_prefix(t)["tune-".len()..]);
            // The crate's tuned database: its record of this target is a known answer.
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
            let recorded = db.find(&k.name, &chip.name, &t.shape).map(|r| r.params.clone());
            let job = Job {
                recorded: recorded.as_ref(),
                kernel: &k.name,
                package: &packages[t.krate],
                shape_name,
                shape: &t.shape,
                chip: &chip,
                store: &store,
                sim_version: &c.list.sim_version,
                harness_hash: &harness_hashes[t.krate],
                seed,
                pinned: s.params.as_deref(),
                opts,
                bar: &bar,
                out: &ctx.out,
                goal,
                key_shapes: &t.key_shapes,
            };
            let mut check = model_check::ModelCheck {
                users: &users[ti],
                kernel: &k.name,
                shape: &t.shape,
                chip: &chip,
                store: &store,
                tuned: ws.tuned.get()?,
                out: &ctx.out,
                fresh: &fresh,
                skipped: Default::default(),
                runs: Default::default(),
                own: t.krate,
                own_sim_version: &c.list.sim_version,
                own_manifest: &c.krate.manifest_path,
            };
            let mut models = |pool: &mut Pool, candidate: &Params, replaced: Option<&Params>| {
                check.run(pool, before, after, candidate, replaced)
            };
            let mut result =
                tune_one(&mut c.pool, &k.space, &k.defaults, &job, &key, ctx, &mut models)?;
            prefer_dominating(&mut c.pool, &job, &mut result)?;
            // The bar counts simulations, `--budget` per target: a target that ended short of
            // its budget (early stop, goal met, space or proposal cap exhausted) hands the rest
            // over, so the bar's position and ETA stay right for the next one.
            bar.inc(opts.budget.saturating_sub(charged(result.evaluations, result.pruned)) as u64);
            if goal.validates() {
                bar.suspend(|| {
                    if users[ti].is_empty() {
                        out.status(unchecked_by_models(&k.name, shape_name, &selected_models));
                    }
                    for why in &check.skipped {
                        out.note(format!("warning: left out of the validation: model {why}"));
                    }
                });
            }
            // Each target is charged its share of the shared build.
            result.build_s = build_s / targets.len() as f64;
            run_spent.check_s += result.check_s;
            run_spent.total_s += result.total_s;
            (evaluated, invalid) = (evaluated + result.evaluations, invalid + result.invalid);
            kernel_faults += result.faults;
            // What the reproducers printed for this target carry of the run.
            let model_package =
                t.model_krate.filter(|&m| m != t.krate).map(|m| packages[m].name.as_str());
            let replay =
                Replay { cargo, package: &packages[t.krate].name, model_package, chip: &s.chip };
            bar.suspend(|| warn_faults(&out, t, &chip.name, &replay, &result));
            if let Some((params, why)) = &result.no_valid {
                // Not even the default is recorded: it is not in the space the user asked for.
                empty.push(format!(
                    "{} at {shape_name}: the kernel's rule refuses every configuration of its \
                 space (e.g. {params}: {why}); nothing searched, nothing recorded (`cargo \
                 neuron-tune list` counts the valid ones)",
                    k.name
                ));
                continue;
            }
            bar.suspend(|| warn_failed_checks(&out, t, &chip.name, &replay, &result));
            reproducers.extend(reproduce::failures(t, &replay, &result));
            // Faults of the kernel (exit 4, the winners still recorded): code that panicked,
            // crashed or hung, and variants — the default too, when another one stands — that
            // failed their correctness check with a failing case.
            let code_faults = result
                .history
                .iter()
                .filter(|e| e.status == "invalid" && conv::is_fault(&e.status, e.error.as_deref()))
                .count();
            let wrong = result.faults - code_faults;
            let default_wrong = result.best.is_some()
                && result
                    .default_check
                    .as_ref()
                    .is_some_and(|f| conv::is_fault("failed_check", Some(&f.journal_error())));
            let mut what = Vec::new();
            if code_faults > 0 {
                what.push(format!(
                    "{} panicked, crashed or hung",
                    conv::count(code_faults, "variant")
                ));
            }
            if wrong > 0 {
                let their = if wrong == 1 { "its" } else { "their" };
                what.push(format!(
                    "{} failed {their} correctness check",
                    conv::count(wrong, "variant")
                ));
            }
            if default_wrong {
                what.push("the default parameters failed their correctness check".into());
            }
            if !what.is_empty() {
                faults.push(format!(
                    "{} at {shape_name}: {} (the journal {} has every one, with its error)",
                    k.name,
                    what.join("; "),
                    result.journal.display()
                ));
            }
            let Some(best) = result.best.clone() else {
                if result.default_fails_check {
                    // Nothing correct to record: the file keeps what it had, and the run fails.
                    failed.push(format!(
                        "{} at {shape_name}: no variant passed its correctness check, the default \
                     included; nothing recorded",
                        k.name
                    ));
                } else if let Some(why) = nothing_valid(t, &chip.name, &result) {
                    // Every variant tried and the default refused: nothing valid to run, as
                    // `bench` says of such variants (exit 2), with the rules that refused them.
                    empty.push(why);
                } else {
                    out.note(format!("note: {} at {shape_name}: no valid variant found", k.name));
                }
                if let Some(g) = &goal.goal {
                    missed.push(format!(
                        "{} at {shape_name}: goal {g} not met: no valid variant found",
                        k.name
                    ));
                }
                continue;
            };
            bar.suspend(|| report(&out, t, &chip, &replay, &result, &best, seed, opts, &mut table));
            if let Some(why) = &result.default_refused {
                // A default the kernel's own rule refuses is what every untuned call (another
                // chip or shape, a model without this record) would run: said, not only a "-"
                // in the table's default column.
                out.note(format!(
                    "warning: {} at {shape_name}: the default parameters {} are not valid here \
                 ({why}); this run's winner is recorded, but elsewhere the default is what \
                 runs: set a valid one (`default = {{ ... }}` in the kernel's configuration)",
                    k.name, t.kernel.defaults
                ));
            }
            winners.push((ti, best.params.clone(), best.time_us));
            // The goal is judged on what the tuned file holds after the run: a kept record,
            // faster than this run's best, stands for the kernel.
            match (&result.goal, &result.record) {
                (Some(g), Some((r, _))) if g.met_by_record => bar.suspend(|| {
                    out.status(format!(
                    "   Goal {} met by the tuned record kept for {} {shape_name}: {} ({:.1} µs; \
                     this run's own best {:.1} µs does not meet it)",
                    g.goal, k.name, r.params, r.time_us, best.time_us
                ))
                }),
                (Some(g), record) if !g.met => {
                    let kept = record.as_ref().map_or(&best, |r| &r.0);
                    let mut why = goal_miss(&k.name, shape_name, g, kept, result.whole_space);
                    if let Some((r, _)) = record {
                        why.push_str(&format!(
                            "\n    (that best is the tuned record kept, {}; this run's own best \
                         takes {:.2} µs)",
                            r.params, best.time_us
                        ));
                    }
                    missed.push(why);
                }
                _ => {}
            }
            let db = dbs[t.krate].as_mut().expect("loaded before the search");
            // The file's record stands when this run found nothing faster (it is refreshed:
            // its time and program as measured today).
            let (best, validated) = match &result.record {
                Some((r, validated)) => {
                    bar.suspend(|| {
                    out.status(format!(
                        "   Kept the recorded {} {shape_name}: {} ({:.1} µs; this run's best {:.1} µs is \
                         not faster)",
                        k.name, r.params, r.time_us, best.time_us
                    ))
                });
                    (r.clone(), validated.clone())
                }
                None => (best, result.validated.clone()),
            };
            let (validated_shapes, validated_models) = validated.unwrap_or_default();
            let record = TunedRecord {
                kernel: k.name.clone(),
                chip: chip.name.clone(),
                shape: shape_name.clone(),
                dims: t.shape.clone(),
                params: best.params.clone(),
                time_us: best.time_us,
                program_hash: best.program_hash.clone(),
                tool_version: env!("CARGO_PKG_VERSION").into(),
                sim_version: c.list.sim_version.clone(),
                validated_shapes,
                validated_models,
            };
            written_params.push((ti, record.params.clone()));
            fresh.push((c.krate.manifest_path.clone(), record.entry(None)));
            let change = db.record(record);
            let before = match written.iter().any(|w| w.path.as_path() == db.path()) {
                true => None,
                false => std::fs::read(db.path()).ok(),
            };
            // Saved after every kernel: an interrupted run keeps the winners it found.
            let path = db.save()?;
            let i = match written.iter().position(|w| w.path == path) {
                Some(i) => i,
                None => {
                    written.push(Written::new(path, before));
                    written.len() - 1
                }
            };
            written[i].count(change);
        }
        Ok(())
    })();
    bar.finish_and_clear();
    for w in &written {
        out.status(w.line());
    }
    if !table.is_empty() {
        out.result("");
        out.table(&table, "  ");
    }
    if let Err(f) = looped {
        if f.exit != Exit::Interrupted {
            return Err(f);
        }
        // What finished is recorded (above); the rest continues from its journal.
        let finished = match written_params.len() {
            0 => String::new(),
            n => format!(
                "the winners of the {} finished are recorded; ",
                conv::count(n, "kernel shape")
            ),
        };
        return Err(fail(
            Exit::Interrupted,
            format!(
                "interrupted: {finished}every evaluation of the search under way is in its \
                 journal; continue with\n  {}",
                crate::interrupt::resume_command(seed)
            ),
        ));
    }
    // Judged once over the run: charged to each target, a cold build made every one "slow".
    if let Some(d) = conv::slow_build(&run_spent, targets.len()) {
        let whom = format!("this run ({})", conv::count(targets.len(), "kernel shape"));
        report::wall_clock_diagnosis(&out, &whom, &d);
        out.event(&Event::RunDiagnosis { diagnosis: d });
    }
    // Per target: the tuned database's record for its dimensions is the one its own search
    // wrote (another target of the same dimensions may have replaced it since).
    let own_record: Vec<bool> = (0..targets.len())
        .map(|ti| {
            let t = &targets[ti];
            let mine = written_params.iter().find(|(i, _)| *i == ti).map(|(_, p)| p);
            let db = dbs[t.krate].as_ref();
            let now = db.and_then(|db| db.find(&t.kernel.name, &chip.name, &t.shape));
            mine.is_some_and(|p| now.is_some_and(|r| r.params == *p))
        })
        .collect();
    over_fitting(&mut ws, &targets, &winners, &own_record, &chip, &out)?;
    out.event(&Event::Summary(crate::output::Summary {
        command: "tune".into(),
        variants: evaluated,
        invalid: Some(invalid),
        faults: Some(kernel_faults),
        failed: Some(failed.len() + faults.len() + empty.len()),
        seed: Some(seed),
        ..Default::default()
    }));
    if !failed.is_empty() || !faults.is_empty() {
        let mut why = failed;
        if !faults.is_empty() {
            why.extend(faults);
            why.push(format!(
                "{}the faults are bugs in kernel code (a failed check: a wrong result, or a \
                 case the kernel could not run)",
                if written.is_empty() { "" } else { "the winners found are recorded; " }
            ));
        }
        if !reproducers.is_empty() {
            why.push("each distinct failure, with the command that reproduces it:".into());
            why.extend(reproducers.iter().map(|r| format!("  {r}")));
        }
        why.extend(empty);
        why.extend(missed);
        Err(fail(Exit::Check, why.join("\n")))
    } else if !empty.is_empty() {
        empty.extend(missed);
        Err(fail(Exit::Config, empty.join("\n")))
    } else if missed.is_empty() {
        Ok(Exit::Ok)
    } else {
        Err(fail(Exit::GoalNotMet, missed.join("\n")))
    }
}

/// xxh3-128 of a harness binary's bytes: what its check verdicts are stored under.
fn harness_hash(exe: &std::path::Path) -> Result<String, Failure> {
    let bytes = std::fs::read(exe)
        .map_err(|e| fail(Exit::Internal, format!("reading {}: {e}", exe.display())))?;
    Ok(crate::seal::checksum_bytes(&bytes))
}

/// The selected kernels at their selected named shapes.
fn kernel_targets(
    ws: &Workspace,
    s: &Selection,
    out: &crate::output::Reporter,
) -> Result<Vec<Target>, Failure> {
    let lists: Vec<&neuron_tune_protocol::ListDoc> = ws.crates.iter().map(|c| &c.list).collect();
    check_patterns(&lists, s, None, out)?;
    let mut out = Vec::new();
    for (i, c) in ws.crates.iter().enumerate() {
        for k in select(&c.list, &Selection { params: None, ..s.clone() }, None, &[])? {
            if crate::select::left_out_by_params(&k.kernel, s) {
                continue;
            }
            // `--params`: those parameters pinned (checked against the kernel's
            // declarations), the rest searched. The default stays the kernel's own, even
            // where the pins exclude it: it is what runs without a tuned record, so every
            // result is measured against it, and a pinned search that finds nothing
            // faster keeps it rather than record a slower variant.
            let mut kernel = k.kernel.clone();
            if s.params.is_some() {
                kernel.space = crate::select::pinned_space(&k.kernel, s.params.as_deref())?;
            }
            for (shape_name, shape) in &k.shapes {
                out.push(Target {
                    krate: i,
                    kernel: kernel.clone(),
                    shape_name: shape_name.clone(),
                    shape: shape.clone(),
                    key_shapes: k.shapes.clone(),
                    model_krate: None,
                });
            }
        }
    }
    Ok(out)
}

/// Every distinct (crate, kernel, shape) the selected models call (with default
/// parameters), each tuned in the crate the model's harness runs it from — the package the
/// call's Rust crate is, else the one of the crates its crate links that defines the
/// kernel, whose database the model reads — labelled `model@shape`. Two linked crates
/// defining it, the call's crate not telling which, are an error
/// ([`crate::model_calls::kernel_owner`]).
fn model_targets(
    ws: &mut Workspace,
    s: &Selection,
    patterns: &[String],
    chip: &ChipSpec,
) -> Result<Vec<Target>, Failure> {
    if s.params.is_some() {
        return Err(fail(
            Exit::Config,
            "--model tunes what the models call: --params does not apply".to_string(),
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
            let (krate, kernel) =
                crate::model_calls::kernel_owner(ws, &m, call.krate.as_deref(), &call.kernel)?;
            if out
                .iter()
                .any(|t| (t.krate, &t.kernel.name, &t.shape) == (krate, &call.kernel, &call.shape))
            {
                continue;
            }
            let shape_name = format!("{}@{}", m.model, m.shape_name);
            out.push(Target {
                krate,
                kernel,
                key_shapes: vec![(shape_name.clone(), call.shape.clone())],
                shape_name,
                shape: call.shape,
                model_krate: Some(m.krate),
            });
        }
    }
    Ok(out)
}

struct Job<'a> {
    /// The package whose kernel it is (its meta file names it; its journal's name starts
    /// with it).
    package: &'a RunPackage,
    /// The parameters the crate's tuned database records for this kernel, chip and shape.
    recorded: Option<&'a Params>,
    kernel: &'a str,
    shape_name: &'a str,
    shape: &'a Shape,
    chip: &'a ChipSpec,
    store: &'a Store,
    /// The simulator version of the crate's harness: results are stored under it.
    sim_version: &'a str,
    /// The content hash of the crate's harness binary: check verdicts are stored under it.
    harness_hash: &'a str,
    seed: u64,
    /// `--params`, as given: the parameters pinned (its meta file records them).
    pinned: Option<&'a str>,
    opts: &'a SearchOpts,
    /// Progress over every evaluation of the run (hidden off a terminal and in JSON mode).
    bar: &'a indicatif::ProgressBar,
    /// Where what kernel code prints goes (`output` events), as `bench` shows it.
    out: &'a crate::output::Reporter,
    goal: &'a GoalOpts,
    key_shapes: &'a [(String, Shape)],
}

#[derive(Clone)]
struct Best {
    params: Params,
    time_us: f64,
    program_hash: String,
}

impl Best {
    /// A measured evaluation as the best.
    fn of(e: &Entry) -> Best {
        Best {
            params: e.params.clone(),
            time_us: e.time_us.unwrap_or(f64::MAX),
            program_hash: e.program_hash.clone().unwrap_or_default(),
        }
    }
}

struct TuneResult {
    best: Option<Best>,
    /// `--objective pareto`: the non-dominated correct variants, fastest first.
    front: Option<Vec<ParetoPoint>>,
    /// No evaluated variant beat the default parameters, so `best` is the default.
    kept_default: bool,
    /// The tuned database's record, re-measured, when it stands rather than `best` (no
    /// slower, and checked), with what it was validated on ([`search::record_to_keep`]).
    record: Option<(Best, Option<Validated>)>,
    default_time: Option<f64>,
    evaluations: usize,
    pruned: usize,
    /// Configurations refused (the kernel's rule, a hardware rule, a failed check, a
    /// validation), and variants whose kernel code panicked, crashed or hung: apart.
    invalid: usize,
    faults: usize,
    best_so_far: Vec<Option<f64>>,
    journal: std::path::PathBuf,
    /// What the journal's meta file says (as last written).
    meta: JournalMeta,
    /// Every evaluation, in order (for the diagnosis).
    history: Vec<Entry>,
    /// The default was the best but failed its correctness check, so it was not kept.
    default_fails_check: bool,
    /// Why the default failed its correctness check, when it did (whether or not a variant
    /// beat it).
    default_check: Option<FailedCheck>,
    /// The default's evaluation was refused (a hardware rule, the kernel's own error): why.
    default_refused: Option<String>,
    /// An external proposer's proposals that the kernel's validity rule refused before
    /// evaluation, with the rule's reason (for the diagnosis; built-in strategies ask the
    /// rule before proposing, so theirs are never proposals).
    refused: Vec<(Params, String)>,
    /// `--goal`: the decision log and how it ended.
    rounds: Vec<Round>,
    goal: Option<GoalReport>,
    /// `--goal`: the key-set shapes and the models (model@shape) the best was validated on
    /// (`None`: not validated).
    validated: Option<Validated>,
    /// Wall time in correctness checks, of the whole search, and of the command's harness
    /// builds (s).
    check_s: f64,
    total_s: f64,
    build_s: f64,
    /// The strategy had nothing more to propose.
    exhausted: bool,
    /// The space's size when the search tried all of it (each configuration evaluated or
    /// refused by the kernel's rule): nothing is left to find.
    whole_space: Option<u64>,
    /// The kernel's rule refused every configuration of the space: one of them and why.
    no_valid: Option<(Params, String)>,
    /// `"early_stop"` or `"time"`: which flag ended the search before its budget.
    stopped_by: Option<&'static str>,
}

/// What a `--goal` winner was validated on: the key-set shapes, and the models (as
/// `model@shape`) that call the kernel there.
type Validated = (Vec<String>, Vec<String>);

/// `--goal`'s check of a candidate against the models using the kernel (the target crate's
/// pool, the candidate, the parameters it would replace): `Ok(Ok(models checked))` or
/// `Ok(Err(why))` ([`model_check::ModelCheck::run`]).
type CheckModels<'a> = dyn FnMut(&mut Pool, &Params, Option<&Params>) -> Result<Result<Vec<String>, String>, Failure>
    + 'a;

/// The search: a built-in strategy, or an external proposer, which also sees the last
/// measured variant's profile summary.
enum Searcher {
    Builtin(Box<dyn Strategy>),
    External(Box<neuron_tune_search::Proposer>),
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

#[cfg(test)]
mod tests {
    use super::{within_budget, PROPOSALS_PER_EVALUATION};

    #[test]
    fn the_budget_charges_unpruned_proposals_and_caps_all_of_them() {
        // 9 of 10 charged: one more may be proposed; 10 charged: none.
        assert!(within_budget(12, 3, 10));
        assert!(!within_budget(13, 3, 10));
        // Pruned proposals are free until the cap of 4 × budget proposals in all.
        let cap = 10 * PROPOSALS_PER_EVALUATION;
        assert!(within_budget(cap - 1, cap - 2, 10));
        assert!(!within_budget(cap, cap - 1, 10));
        // A budget so large that the cap overflows is no cap, not a wrap to a tiny one.
        assert!(within_budget(5, 0, usize::MAX));
    }
}
