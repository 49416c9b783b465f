//! The subcommands, one file each; [`run`] dispatches and maps failures to exit codes.

mod analyze;
mod baseline;
mod bench;
mod build;
mod check;
mod chip;
mod edits;
mod gate;
pub mod init;
mod list;
pub mod merge;
pub mod new;
mod profile;
mod replay;
pub mod tune;

use crate::cli::{BaselineAction, Cli, Command};
use crate::exit::{Exit, Failure};
use crate::output::{Event, Reporter};
use crate::workspace::Ctx;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Entry point of the binary: run the command, report a failure, exit with its code.
pub fn run(cli: Cli) -> ExitCode {
    crate::interrupt::install();
    let out = Arc::new(Reporter::from_flags(&cli.global));
    let workers = cli.command.workers();
    let jobs =
        workers.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let ctx = Ctx { out: out.clone(), jobs, timeout: Duration::from_secs(workers.timeout) };
    match dispatch(&cli, &ctx) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(f) => {
            out.event(&Event::Error {
                code: f.exit.code(),
                message: f.message.clone(),
                diagnostics: f.diagnostics,
            });
            eprintln!("error: {}", f.message);
            ExitCode::from(f.exit.code())
        }
    }
}

fn dispatch(cli: &Cli, ctx: &Ctx) -> Result<Exit, Failure> {
    match &cli.command {
        Command::List { cargo, kernels, .. } => list::run(cargo, kernels, ctx),
        Command::Build { cargo, select, grid, .. } => build::run(cargo, &grid.apply(select), ctx),
        Command::Check { cargo, select, grid, cases, seed, .. } => {
            check::run(cargo, &grid.apply(select), *cases, *seed, ctx)
        }
        Command::Bench { cargo, select, grid, force, models, parts, .. } if !models.is_empty() => {
            let select = &grid.apply(select);
            if parts.results.is_some() {
                return Err(crate::exit::fail(
                    Exit::Config,
                    "--results with --model: use `cargo neuron-tune gate --results`".to_string(),
                ));
            }
            bench::run_models(cargo, select, models, *force, parts.partition, ctx)
        }
        Command::Bench { cargo, select, grid, force, parts, .. } => {
            bench::run(cargo, &grid.apply(select), *force, parts, ctx)
        }
        Command::Profile {
            cargo, kernel, kernel_flag, params, tuned, shape, chip, trace, ..
        } => profile::run(
            cargo,
            &profile::Args {
                kernel: kernel.as_deref().or(kernel_flag.as_deref()).expect("clap requires one"),
                params: params.as_deref(),
                tuned: *tuned,
                shape: shape.as_deref(),
                chip,
                trace: trace.as_deref(),
            },
            ctx,
        ),
        Command::Tune { all_variants: true, .. } => Err(crate::exit::fail(
            Exit::Config,
            "--all-variants is `bench`'s grid; `tune` searches the space (pin parameters with \
             --params, e.g. --params bufs=2)"
                .to_string(),
        )),
        Command::Tune { cargo, select, search, goal, models, parts, .. } => match &parts.results {
            None => tune::run(cargo, select, models, search, goal, parts.partition, ctx),
            Some(path) => {
                // The run's results are the tuned records it added or changed, and how it
                // ended when a check failed or the goal was not met (it recorded winners
                // all the same, which `merge` must see); other failures write nothing.
                let before = merge::tuned_snapshot(cargo)?;
                let ended = tune::run(cargo, select, models, search, goal, parts.partition, ctx);
                let failure = match &ended {
                    Err(f) if matches!(f.exit, Exit::Check | Exit::GoalNotMet) => {
                        Some((f.exit.code(), f.message.clone()))
                    }
                    Err(_) => return ended,
                    Ok(_) => None,
                };
                let records =
                    merge::tuned_snapshot(cargo)?.into_iter().filter(|r| !before.contains(r));
                let results = merge::Results::Tune {
                    partition: parts.partition,
                    run: format!(
                        "{}; models {}; {}; goal {:?}",
                        select.describe(),
                        if models.is_empty() { "none".into() } else { models.join(",") },
                        search.describe(),
                        goal.goal
                    ),
                    records: records.collect(),
                    failure,
                };
                merge::write_results(path, &results)?;
                ctx.out.status(format!("   Wrote {}", path.display()));
                ended
            }
        },
        Command::Gate { cargo, gate, parts, .. } => gate::run(cargo, gate, parts, ctx),
        Command::Baseline { action } => match action {
            BaselineAction::Save { cargo, baseline, models, shapes, chip, .. } => {
                baseline::save(cargo, baseline.as_deref(), models, shapes, chip, ctx)
            }
            BaselineAction::Show { cargo, baseline } => {
                baseline::show(cargo, baseline.as_deref(), &ctx.out)
            }
        },
        Command::Merge { cargo, files, markdown, junit, results } => {
            merge::run(cargo, files, markdown.as_deref(), junit.as_deref(), results.as_deref(), ctx)
        }
        Command::Report { cargo, out, open, kernels, chip, .. } => crate::report::run(
            cargo,
            &crate::report::Args {
                out: out.as_deref(),
                open: *open,
                kernels,
                chip: chip.as_deref(),
            },
            ctx,
        ),
        Command::Chip { chip } => chip::run(chip, &ctx.out),
        Command::Analyze { files } => analyze::run(files, &ctx.out),
        Command::Replay { cache, search } => replay::run_replay(cache, search, &ctx.out),
        Command::New { name, template, manifest_path } => {
            new::new_kernel(name, *template, manifest_path.as_deref(), &ctx.out)
        }
        Command::Init { manifest_path, path, git, rev } => {
            let source = init::source(path.as_deref(), git.as_deref(), rev.as_deref())?;
            init::init(manifest_path.as_deref(), &source, &ctx.out)
        }
    }
}

/// "; stopped by …" when `--early-stop` or `--time` ended a search before its budget (see
/// `Event::Tune::stopped_by`), else nothing.
pub(crate) fn stop_note(stopped_by: Option<&str>, opts: &crate::cli::SearchOpts) -> String {
    match stopped_by {
        Some("early_stop") => format!(
            "; stopped by --early-stop: no improvement in the last {}",
            crate::convergence::count(opts.early_stop.unwrap_or(0), "evaluation")
        ),
        Some(_) => format!("; stopped by --time {} s", opts.time.unwrap_or(0.0)),
        None => String::new(),
    }
}

/// The tuned databases, for a command that only *mentions* them and does its work the same
/// without them (`profile` names the tuned winner beside the default it profiles; kernel
/// `bench` measures the parameters selected, and only says the file is damaged). A
/// damaged one is never ignored silently: a warning on stderr (in JSON mode too) gives the
/// refusal — the file, where and what is wrong, what to do — and what the command leaves
/// out, and the command goes on. The commands that *apply* tuned parameters or report the
/// databases (`tune`, `list`, `bench --model`, `gate`, `baseline save`, `report`, `merge`)
/// refuse a damaged one instead, exit 2 (`ws.tuned.get()?`): with defaults in place of
/// the tuned parameters their figures would be wrong; so do `check`, `build`, `bench` and
/// `profile` with `--tuned` ([`tuned_db`]). Without it `check` and `build` never read them.
pub(crate) fn tuned_to_mention<'a>(
    tuned: &'a crate::workspace::Tuned,
    out: &Reporter,
    left_out: &str,
) -> Option<&'a crate::models::TunedSet> {
    match tuned.get() {
        Ok(set) => Some(set),
        Err(f) => {
            out.note(format!("warning: {}\n  Ignored: {left_out}", f.message));
            None
        }
    }
}

/// `--tuned`: the tuned database of crate `c` (`None` without one; a damaged one is an
/// error, as in every command that applies it). Without `--tuned`, `None`.
pub(crate) fn tuned_db<'a>(
    tuned: &'a crate::workspace::Tuned,
    s: &crate::cli::Selection,
    c: &crate::workspace::Crate,
) -> Result<Option<&'a crate::tuned::TunedDb>, Failure> {
    if !s.tuned {
        return Ok(None);
    }
    let dir = c.krate.manifest_path.parent().unwrap_or(std::path::Path::new(""));
    Ok(tuned.get()?.of_dir(dir))
}

/// What `build`, `check` and `bench` run of crate `i`: its kernels at the selected named
/// shapes, at the model calls of `--shape MODEL@SHAPE` it owns, and with `--tuned`, each
/// shape's recorded parameters ([`tuned_db`]).
pub(crate) fn select_in_crate(
    tuned: &crate::workspace::Tuned,
    s: &crate::cli::Selection,
    (i, c): (usize, &crate::workspace::Crate),
    chip: &str,
    at_models: &crate::model_calls::ModelShapes,
) -> Result<Vec<crate::select::KernelSelection>, Failure> {
    let db = tuned_db(tuned, s, c)?.map(|db| (db, chip));
    crate::select::select(&c.list, s, db, &at_models.of_crate(i))
}

/// Open the variant store, saying so when another run holds its lock.
pub(crate) fn open_store(
    target: &std::path::Path,
    out: &Reporter,
) -> Result<crate::store::Store, Failure> {
    let store = crate::store::Store::open(target, |lock, holder| {
        let who = if holder.is_empty() {
            "another cargo neuron-tune run".into()
        } else {
            holder.to_string()
        };
        out.note(format!("    Blocking waiting for {who} (lock {})", lock.display()))
    })
    // A store that cannot be created or locked (a read-only target directory) is a file
    // that could not be written, exit 1, as a failed write into the store is.
    .map_err(|e| Failure::new(Exit::Internal, format!("{e:#}")))?;
    out.verbose(format!("   Variant store {}", store.root().display()));
    Ok(store)
}

/// The exit code of a command that ran variants (`build`, `bench`): kernel code that
/// panicked, crashed or hung is exit 4; nothing run because every variant asked for
/// (typically one, by `--params`) is outside what the kernel accepts is the request's
/// error (2), said on stderr.
pub(crate) fn variants_exit(
    out: &Reporter,
    verb: &str,
    ran: usize,
    invalid: usize,
    crashed: usize,
) -> Exit {
    if crashed > 0 {
        Exit::Check
    } else if ran == 0 && invalid > 0 {
        out.note(format!(
            "error: no valid variant to {verb}: the {} asked for {} invalid (why is above)",
            crate::convergence::count(invalid, "variant"),
            if invalid == 1 { "is" } else { "are" }
        ));
        Exit::Config
    } else {
        Exit::Ok
    }
}

/// Report a variant that could not run: invalid ones are collected (shown as a count),
/// others printed at once. Returns whether it was invalid (refused by a rule, not run)
/// rather than a fault of its kernel code: the callers count the two apart.
fn report_failure(
    out: &Reporter,
    v: &crate::select::Variant,
    chip: &str,
    e: &neuron_tune_protocol::ErrorInfo,
) -> bool {
    let failed = bench::FailedVariant::new(v.clone(), e);
    out.event(&failed.event(chip));
    let (kind, message) = (failed.kind.as_str(), &failed.message);
    let line = format!("  {kind:<8} {} {} at {}: {message}", v.kernel, v.params, v.shape_name);
    let invalid = kind == "invalid";
    if invalid {
        out.invalid(line);
    } else {
        // A panic in a kernel's body usually repeats in every variant: once, then a count.
        out.once(&format!("{kind}: {message}"), line);
    }
    invalid
}

/// A seed from the clock, for commands run without `--seed` (always printed).
fn default_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// How a status line names the run's seed: with how to replay it when the tool chose it,
/// bare when the user gave it (they already know the flag).
fn seed_words(seed: u64, chosen_by_tool: bool) -> String {
    if chosen_by_tool {
        format!("seed {seed} (replay with --seed {seed})")
    } else {
        format!("seed {seed}")
    }
}
