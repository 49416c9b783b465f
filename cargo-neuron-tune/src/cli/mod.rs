//! Command-line interface: the flags and subcommands, as clap derives.
//!
//! `cargo neuron-tune …` and `cargo-neuron-tune neuron-tune …` (how cargo runs a subcommand)
//! and plain `cargo-neuron-tune …` all parse to the same [`Cli`].
//!
//! The doc comments here are clap's `--help` text, read in a terminal: `<target-dir>` there
//! is a placeholder, not an HTML tag.
#![allow(rustdoc::invalid_html_tags)]

use crate::cargo::CargoFlags;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

mod goal;
mod help;
pub use goal::{parse_goal, Goal};

/// Tune NeuronCore kernels on a simulator: every variant (kernel × params × shape × chip) is a
/// build artifact that is traced, checked against a CPU reference and benchmarked.
#[derive(Debug, Parser)]
#[command(name = "cargo-neuron-tune", bin_name = "cargo neuron-tune", version, after_help = crate::exit::Exit::help_table())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub global: GlobalOpts,
}

/// How the tool speaks, as cargo's own global flags do: each also reaches the `cargo
/// build` of the harnesses (cargo's `--color`, `-q`, `-v`), never a result.
#[derive(Debug, Args, Clone)]
pub struct GlobalOpts {
    /// `human` (results on stdout, progress and status on stderr) or `json` (one JSON event
    /// per line on stdout, nothing else there).
    #[arg(long, value_enum, default_value_t = MessageFormat::Human, global = true)]
    pub message_format: MessageFormat,
    /// When to colour the result tables (passed to cargo's build of the harnesses too).
    /// JSON output is never coloured.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto,
          global = true)]
    pub color: ColorWhen,
    /// No status or progress lines on stderr (`Building …`, progress bars, `Wrote …`),
    /// and cargo builds the harnesses with `-q`; results, warnings, errors (cargo's compile
    /// errors too) and what a failed variant says are still printed.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Say more: the cargo command each harness build runs, the binary the workers run and
    /// the variant store; passed to cargo's build as `-v` (`-vv`: cargo's very verbose,
    /// build scripts' output included).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

/// `--color`: cargo's values, with cargo's meaning (the flag beats the environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorWhen {
    /// Colour when stdout is a terminal (not `TERM=dumb`), unless `NO_COLOR` is set; colour
    /// into a file or pipe too when `CLICOLOR_FORCE` is set (not `0`); cargo decides for its
    /// own output.
    #[default]
    Auto,
    /// Always colour, whatever the environment or where stdout goes.
    Always,
    /// Never colour, whatever the environment.
    Never,
}

impl ColorWhen {
    /// The value as cargo spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ColorWhen::Auto => "auto",
            ColorWhen::Always => "always",
            ColorWhen::Never => "never",
        }
    }
}

/// The harness workers, for the commands that run kernel code (not `chip`, `analyze`,
/// `replay`, `init`, `new`, `merge`, `baseline show`).
#[derive(Debug, Args, Clone, Copy)]
pub struct WorkerOpts {
    /// Parallel harness workers, each simulating one variant at a time (default: the number
    /// of CPUs). Unlike cargo's `-j`, not the build's jobs: `--build-jobs` sets those.
    #[arg(short = 'j', long, value_name = "N", value_parser = positive::<usize>,
          allow_negative_numbers = true)]
    pub jobs: Option<usize>,
    /// Seconds a worker may take to start, and again to answer one request. A worker that
    /// hangs past it (or crashes) is killed and the request retried once on a fresh worker
    /// before the variant is reported as failed, so a hung variant is reported after about
    /// twice this. A worker that fails to start twice stops the command (exit 4).
    #[arg(long, value_name = "SECS", default_value_t = WorkerOpts::DEFAULT_TIMEOUT,
          value_parser = positive::<u64>, allow_negative_numbers = true)]
    pub timeout: u64,
}

impl WorkerOpts {
    pub const DEFAULT_TIMEOUT: u64 = 120;
}

impl Default for WorkerOpts {
    fn default() -> Self {
        WorkerOpts { jobs: None, timeout: Self::DEFAULT_TIMEOUT }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MessageFormat {
    Human,
    Json,
}

/// `tune`'s `--shape`, in place of [`Selection`]'s: `tune` takes no `MODEL@SHAPE`.
const TUNE_SHAPE_HELP: &str = "Named shape (tuning key) to tune at; repeatable. Default: every \
     shape of the kernel. With `--model`, the model's shape: `--model MODEL --shape SHAPE` \
     tunes each kernel at the dims MODEL calls it with at SHAPE (not `--shape MODEL@SHAPE`, \
     which `build`, `check`, `bench` and `profile` take)";

/// Which variants to work on.
#[derive(Debug, Args, Clone, Default)]
pub struct Selection {
    /// Kernel name or glob (`gemm`, `attention_*`); repeatable. Default: all kernels.
    #[arg(long = "kernel", short = 'k', value_name = "NAME")]
    pub kernels: Vec<String>,
    /// Named shape (tuning key) to use; repeatable. Default: every shape of the kernel.
    /// `MODEL@SHAPE`: each kernel at the dims model MODEL calls
    /// it with at its shape SHAPE, what `tune --model MODEL --shape SHAPE` tunes (the model's
    /// package selected too); a kernel it calls at several dims there runs at each, labelled
    /// `MODEL@SHAPE{DIM=N,..}`, and that label as `--shape` selects the one call.
    #[arg(long = "shape", value_name = "NAME")]
    pub shapes: Vec<String>,
    /// Parameter values `k=v,k=v`; unnamed parameters take the kernel's default (`tune`:
    /// the named ones are pinned, the rest searched, and results are still measured against
    /// the kernel's own defaults). Default: the kernel's defaults.
    #[arg(long, value_name = "K=V,...")]
    pub params: Option<String>,
    /// Chip: `trn1`, `trn2`, `trn3`, or a chip TOML file.
    #[arg(long, default_value = "trn2", value_name = "CHIP")]
    pub chip: String,
    /// Every variant of the kernel's search space instead of its default parameters: set
    /// from [`Grid`] by the commands that walk a grid (`build`, `check`, `bench`).
    #[arg(skip)]
    pub all_variants: bool,
    /// Each shape's parameters from the crate's tuned database (`--tuned`, from [`Grid`]).
    #[arg(skip)]
    pub tuned: bool,
}

impl Selection {
    /// What is selected, as a results file records it (the partitions of one run agree).
    pub fn describe(&self) -> String {
        let list = |v: &[String]| if v.is_empty() { "all".to_string() } else { v.join(",") };
        format!(
            "chip {}, kernels {}, shapes {}, params {}{}",
            self.chip,
            list(&self.kernels),
            list(&self.shapes),
            self.params.as_deref().unwrap_or("default"),
            match (self.all_variants, self.tuned) {
                (true, _) => ", all variants",
                (_, true) => ", tuned",
                _ => "",
            }
        )
    }
}

impl SearchOpts {
    /// The flags that decide what a search finds (not `--resume`, `--time`, which only
    /// decide how far it got).
    pub fn describe(&self) -> String {
        format!(
            "{}, budget {}, seed {}, objective {:?}",
            self.proposer
                .as_ref()
                .map_or(format!("strategy {}", self.strategy), |p| format!("proposer {p}")),
            self.budget,
            self.seed.map_or("chosen".to_string(), |s| s.to_string()),
            self.objective
        )
    }
}

/// `--all-variants` and `--tuned`, for the commands that walk a grid (`tune` searches the
/// space instead).
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct Grid {
    /// Run every variant of the kernel's search space instead of its default parameters
    /// (with `--params`, those parameters pinned).
    #[arg(long)]
    pub all_variants: bool,
    /// Run, at each shape, the parameters the crate's `neuron-tune.tuned.toml` records for
    /// the kernel, chip and shape: what the models run. A shape without a record runs the
    /// kernel's default (said in a note). After changing a kernel, `check --tuned --shape
    /// NAME` checks its tuned winners at full size
    #[arg(long, conflicts_with_all = ["all_variants", "params"])]
    pub tuned: bool,
}

impl Grid {
    /// The selection with these grid flags.
    pub fn apply(self, s: &Selection) -> Selection {
        Selection { all_variants: self.all_variants, tuned: self.tuned, ..s.clone() }
    }
}

/// `replay`'s `--budget`: the search flags are `tune`'s, whose text speaks of simulations.
const REPLAY_BUDGET_HELP: &str = "Evaluations: configurations looked up in the landscape \
    (those it records as failed count, as invalid ones)";
/// `replay`'s `--time`.
const REPLAY_TIME_HELP: &str = "Stop proposing after this many seconds [default: no limit]";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List kernels (parameters, spaces, shapes) and models of the selected crates.
    List {
        #[command(flatten)]
        cargo: CargoFlags,
        #[command(flatten)]
        workers: WorkerOpts,
        /// Kernel name or glob (`gemm`, `attention_*`); repeatable. Default: all kernels.
        #[arg(long = "kernel", short = 'k', value_name = "NAME")]
        kernels: Vec<String>,
    },
    /// Trace variants into the variant store (program hash, instruction count, footprint).
    Build {
        #[command(flatten)]
        cargo: CargoFlags,
        #[command(flatten)]
        workers: WorkerOpts,
        #[command(flatten)]
        select: Selection,
        #[command(flatten)]
        grid: Grid,
    },
    /// Check variants against the CPU reference with property-based tests (functional model):
    /// `--cases` random small shapes and inputs per parameter set, shrunk to the smallest
    /// failing case. With `--shape`, one seeded case at each named shape instead, at full size.
    #[command(after_help = help::after("check"))]
    Check {
        #[command(flatten)]
        cargo: CargoFlags,
        #[command(flatten)]
        workers: WorkerOpts,
        #[command(flatten)]
        select: Selection,
        #[command(flatten)]
        grid: Grid,
        /// Random cases per variant (without `--shape`).
        #[arg(long, default_value_t = DEFAULT_CHECK_CASES, value_parser = positive::<u32>,
              allow_negative_numbers = true)]
        cases: u32,
        /// Seed for the random cases (printed on every run; replay with it).
        #[arg(long, value_parser = seed, allow_negative_numbers = true)]
        seed: Option<u64>,
    },
    /// Benchmark variants on the timing model; unchanged programs are served from the store.
    #[command(after_help = help::after("bench"))]
    Bench {
        #[command(flatten)]
        cargo: CargoFlags,
        #[command(flatten)]
        workers: WorkerOpts,
        #[command(flatten)]
        select: Selection,
        #[command(flatten)]
        grid: Grid,
        /// Re-simulate even variants whose results are in the store. A stored result is
        /// keyed by the traced program, the chip and the simulator version, and simulation
        /// is deterministic, so it is what a new simulation gives: this checks that. `tune`
        /// and `gate` always use the store (deleting `<target-dir>/neuron-tune` starts
        /// afresh, and deletes tune's journals and the gate's base worktree with it).
        #[arg(long)]
        force: bool,
        /// Benchmark this model (name or glob; repeatable) end to end instead of kernels:
        /// throughput with the tuned parameters and with the defaults, and where the time
        /// goes, per kernel call. `--shape` then names the model's shapes.
        #[arg(long = "model", value_name = "NAME")]
        models: Vec<String>,
        #[command(flatten)]
        parts: PartitionOpts,
    },
    /// Profile one variant: where the time goes, the bottleneck and what to do about it.
    #[command(after_help = help::after("profile"))]
    Profile {
        #[command(flatten)]
        cargo: CargoFlags,
        #[command(flatten)]
        workers: WorkerOpts,
        /// The kernel to profile: a name, or a glob that matches one kernel.
        #[arg(required_unless_present = "kernel_flag", conflicts_with = "kernel_flag")]
        kernel: Option<String>,
        /// The same as the positional KERNEL, spelled as the other commands spell it.
        #[arg(long = "kernel", short = 'k', value_name = "NAME", id = "kernel_flag")]
        kernel_flag: Option<String>,
        /// Parameter values `k=v,k=v` (default: the kernel's default parameters).
        #[arg(long, value_name = "K=V,...")]
        params: Option<String>,
        /// Profile the parameters the crate's `neuron-tune.tuned.toml` records for the
        /// kernel, chip and shape (what the models run) instead of the default.
        #[arg(long, conflicts_with = "params")]
        tuned: bool,
        /// Named shape (default: the kernel's smallest, by elements over all dims), or
        /// `MODEL@SHAPE`: the dims model MODEL calls the kernel with at its shape SHAPE (one
        /// call: `MODEL@SHAPE{DIM=N,..}` picks one of several, as `bench` labels them).
        #[arg(long)]
        shape: Option<String>,
        /// Chip: `trn1`, `trn2`, `trn3`, or a chip TOML file.
        #[arg(long, default_value = "trn2")]
        chip: String,
        /// Write a Chrome/Perfetto JSON trace here (open in ui.perfetto.dev).
        #[arg(long, value_name = "FILE", value_parser = output_file)]
        trace: Option<PathBuf>,
    },
    /// Search each selected kernel's space at each selected shape for the fastest correct
    /// variant; the winners go into the crate's `neuron-tune.tuned.toml`.
    #[command(mut_arg("shapes", |a| a.help(TUNE_SHAPE_HELP)), after_help = help::after("tune"))]
    Tune {
        #[command(flatten)]
        cargo: CargoFlags,
        #[command(flatten)]
        workers: WorkerOpts,
        #[command(flatten)]
        select: Selection,
        #[command(flatten)]
        search: SearchOpts,
        #[command(flatten)]
        goal: GoalOpts,
        /// Not a `tune` flag (hidden): refused with a pointer to `--params`, since a user
        /// coming from `bench --all-variants` may well try it.
        #[arg(long, hide = true)]
        all_variants: bool,
        /// Tune every distinct kernel call of this model (name or glob; repeatable) at the
        /// shapes it calls them with, instead of the kernels' named shapes. `--shape` then
        /// names the model's shapes; `--kernel` narrows which calls.
        #[arg(long = "model", value_name = "NAME")]
        models: Vec<String>,
        #[command(flatten)]
        parts: PartitionOpts,
    },
    /// Gate a change on end-to-end model throughput: build the workspace's models with
    /// their tuned (or default) kernels, simulate them end to end and compare each model's
    /// tokens/s with the baseline (the committed `neuron-tune.baseline.toml`, or the same
    /// models built from another git revision). Exit 5 on a regression (or, with
    /// --strict, a stale tuned entry); exit 4 when a model could not be evaluated or a
    /// baselined model or shape of a selected package is gone from the workspace; exit 2
    /// when, against the baseline file, nothing was compared (every model new: save a
    /// baseline first). 4 wins over the others. Writes a Markdown summary (to
    /// $GITHUB_STEP_SUMMARY when set) and JUnit XML.
    Gate {
        #[command(flatten)]
        cargo: CargoFlags,
        #[command(flatten)]
        workers: WorkerOpts,
        #[command(flatten)]
        gate: GateOpts,
        #[command(flatten)]
        parts: PartitionOpts,
    },
    /// The committed baseline of model throughput (`neuron-tune.baseline.toml`).
    Baseline {
        #[command(subcommand)]
        action: BaselineAction,
    },
    /// Join the results files (`--results`) of a partitioned `bench`, `tune` or `gate` into
    /// the report (and exit code) of one unpartitioned run; for `tune`, the tuned records
    /// go into the tuned databases.
    // Only `cargo metadata` and the target dir are used: no flag choosing a build.
    #[command(mut_args(hide_build_flags))]
    Merge {
        #[command(flatten)]
        cargo: CargoFlags,
        /// The results files, one per partition.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// gate: write the Markdown summary here (default: $GITHUB_STEP_SUMMARY, appended,
        /// when set, else <target-dir>/neuron-tune/gate/summary.md).
        #[arg(long, value_name = "FILE", value_parser = output_file)]
        markdown: Option<PathBuf>,
        /// gate: write the JUnit XML here (default: <target-dir>/neuron-tune/gate/junit.xml).
        #[arg(long, value_name = "FILE", value_parser = output_file)]
        junit: Option<PathBuf>,
        /// Also write the merged results as one results file.
        #[arg(long, value_name = "FILE", value_parser = output_file)]
        results: Option<PathBuf>,
    },
    /// Write the HTML report: convergence, Pareto front, engine use, roofline, gate history,
    /// the best variants, and Perfetto traces of the variants shown (one page, works offline).
    Report {
        #[command(flatten)]
        cargo: CargoFlags,
        #[command(flatten)]
        workers: WorkerOpts,
        /// Directory for the report and its traces (default: <target-dir>/neuron-tune/report).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Open the report in the default browser once written.
        #[arg(long)]
        open: bool,
        /// Only tuning runs of this kernel (name or glob; repeatable). Default: all.
        #[arg(long = "kernel", short = 'k', value_name = "NAME")]
        kernels: Vec<String>,
        /// Only tuning runs and gate history on this chip (its name). Default: all.
        #[arg(long, value_name = "CHIP")]
        chip: Option<String>,
    },
    /// Print a chip's description as TOML: a built-in (`trn1`, `trn2`, `trn3`) or a chip TOML
    /// file, validated. Start your own chip from a built-in:
    /// `cargo neuron-tune chip trn2 > my-chip.toml`, edit it, then pass `--chip my-chip.toml`.
    /// The format is in docs/chip-toml.md.
    Chip {
        /// A built-in chip name or a chip TOML file.
        #[arg(default_value = "trn2")]
        chip: String,
    },
    /// Read a profile measured on a NeuronCore (`neuron-profile`'s summary JSON) and/or one
    /// the simulator made (`cargo neuron-tune profile KERNEL --message-format json > f.json`),
    /// and give each the same bottleneck verdict, judged from engine, DMA and HBM activity.
    /// With two files, a field-by-field table (time, per-engine activity, DMA, HBM, FLOPs)
    /// shows where simulator and device disagree. Fields, units and the rule: docs/analyze.md.
    Analyze {
        /// One or two profile files (a simulated one and a measured one, in either order).
        #[arg(value_name = "FILE", required = true, num_args = 1..=2)]
        files: Vec<PathBuf>,
    },
    /// Run a search strategy on a recorded landscape (Kernel Tuner cache JSON, gzipped or
    /// not; T4 results JSON) instead of the simulator.
    // A replay is instant and has times only: no journal to resume, no Pareto front.
    #[command(
        mut_arg("resume", |a| a.hide(true)),
        mut_arg("objective", |a| a.hide(true)),
        mut_arg("proposer", |a| a.hide(true)),
        mut_arg("budget", |a| a.help(REPLAY_BUDGET_HELP)),
        mut_arg("time", |a| a.help(REPLAY_TIME_HELP)),
        after_help = help::after("replay")
    )]
    Replay {
        /// The landscape file.
        #[arg(long, value_name = "FILE")]
        cache: PathBuf,
        #[command(flatten)]
        search: SearchOpts,
    },
    /// Make a library crate a kernel crate: add the neuron-sim and neuron-tune-harness
    /// dependencies, the harness binary and [package.metadata.neuron-tune]; then `new` adds
    /// kernels. The dependencies point at the neuron-tune sources this tool was built from,
    /// unless --path or --git says otherwise.
    Init {
        /// The crate to initialize (default: the crate in the current directory).
        #[arg(long, value_name = "PATH")]
        manifest_path: Option<PathBuf>,
        /// Take neuron-sim and neuron-tune-harness from this neuron-tune checkout.
        #[arg(long, value_name = "DIR", conflicts_with = "git")]
        path: Option<PathBuf>,
        /// Take neuron-sim and neuron-tune-harness from this git repository.
        #[arg(long, value_name = "URL")]
        git: Option<String>,
        /// With --git: the revision (commit, tag or branch) to use.
        #[arg(long, value_name = "REV", requires = "git")]
        rev: Option<String>,
    },
    /// Write a new kernel module, its search space and CPU reference into the current crate.
    New {
        /// Kernel name (snake_case).
        name: String,
        /// What to start from.
        #[arg(long, value_enum, default_value_t = Template::Elementwise)]
        template: Template,
        /// The crate to add it to (default: the crate in the current directory).
        #[arg(long, value_name = "PATH")]
        manifest_path: Option<PathBuf>,
    },
}

impl Command {
    /// The command's harness worker options; the defaults for a command that runs no
    /// kernel code.
    pub fn workers(&self) -> WorkerOpts {
        match self {
            Command::List { workers, .. }
            | Command::Build { workers, .. }
            | Command::Check { workers, .. }
            | Command::Bench { workers, .. }
            | Command::Profile { workers, .. }
            | Command::Tune { workers, .. }
            | Command::Gate { workers, .. }
            | Command::Report { workers, .. }
            | Command::Baseline { action: BaselineAction::Save { workers, .. } } => *workers,
            Command::Baseline { action: BaselineAction::Show { .. } }
            | Command::Merge { .. }
            | Command::Chip { .. }
            | Command::Analyze { .. }
            | Command::Replay { .. }
            | Command::Init { .. }
            | Command::New { .. } => WorkerOpts::default(),
        }
    }
}

/// Hide the cargo flags that choose what a harness build is (packages, features, profile)
/// on a command that builds nothing; they are still accepted, so one set of cargo flags
/// serves every CI step.
fn hide_build_flags(a: clap::Arg) -> clap::Arg {
    const BUILD_FLAGS: [&str; 9] = [
        "packages",
        "workspace",
        "exclude",
        "features",
        "all_features",
        "no_default_features",
        "release",
        "profile",
        "build_jobs",
    ];
    match BUILD_FLAGS.contains(&a.get_id().as_str()) {
        true => a.hide(true),
        false => a,
    }
}

/// Splitting a command's work between CI jobs.
#[derive(Debug, Args, Clone, Default)]
pub struct PartitionOpts {
    /// Do only partition K of N of the work items (`kernel@shape@dims` for bench and tune,
    /// `model@shape@chip` for gate and `bench --model`), assigned by a hash of each item's name, so adding items
    /// moves no other item. `cargo neuron-tune merge` joins the partitions' results files,
    /// so it needs `--results`: a partition's results are only useful merged.
    #[arg(long, value_name = "K/N", help_heading = "Partitioning")]
    pub partition: Option<crate::partition::Partition>,
    /// Write this run's results to FILE (JSON) for `cargo neuron-tune merge`.
    #[arg(long, value_name = "FILE", help_heading = "Partitioning", value_parser = output_file)]
    pub results: Option<PathBuf>,
}

/// What the gate compares against and how.
#[derive(Debug, Args, Clone)]
pub struct GateOpts {
    /// The baseline file (default: neuron-tune.baseline.toml at the workspace root).
    #[arg(long, value_name = "FILE", conflicts_with = "base_ref")]
    pub baseline: Option<PathBuf>,
    /// Compare with the same models built from this git revision (checked out in a
    /// worktree under <target-dir>/neuron-tune/base/, built in the same target dir).
    #[arg(long, value_name = "REF")]
    pub base_ref: Option<String>,
    /// A model regresses when its throughput drops by more than PCT percent (`5` or `5%`).
    #[arg(long, value_name = "PCT", default_value_t = 0.0, value_parser = percent)]
    pub threshold: f64,
    /// Model name or glob; repeatable. Default: every model.
    #[arg(long = "model", value_name = "NAME")]
    pub models: Vec<String>,
    /// Model shape; repeatable. Default: every shape of each model.
    #[arg(long = "shape", value_name = "NAME")]
    pub shapes: Vec<String>,
    /// Chip: `trn1`, `trn2`, `trn3`, or a chip TOML file.
    #[arg(long, default_value = "trn2", value_name = "CHIP")]
    pub chip: String,
    /// Fail (exit 5) on stale tuned entries too (a kernel changed since it was tuned).
    #[arg(long)]
    pub strict: bool,
    /// Write the Markdown summary here (default: $GITHUB_STEP_SUMMARY, appended, when set,
    /// else <target-dir>/neuron-tune/gate/summary.md).
    #[arg(long, value_name = "FILE", value_parser = output_file)]
    pub markdown: Option<PathBuf>,
    /// Write the JUnit XML here (default: <target-dir>/neuron-tune/gate/junit.xml).
    #[arg(long, value_name = "FILE", value_parser = output_file)]
    pub junit: Option<PathBuf>,
}

/// `baseline save` / `baseline show`.
#[derive(Debug, Subcommand)]
pub enum BaselineAction {
    /// Evaluate the models end to end (tuned or default kernels) and write their throughput,
    /// per-call times and program hashes into the baseline file; entries of other models,
    /// shapes or chips are kept, except those of models or shapes gone from the workspace
    /// (dropped with a note; with -p or --exclude, only those of a selected package).
    Save {
        #[command(flatten)]
        cargo: CargoFlags,
        #[command(flatten)]
        workers: WorkerOpts,
        /// The baseline file (default: neuron-tune.baseline.toml at the workspace root).
        #[arg(long, value_name = "FILE", value_parser = output_file)]
        baseline: Option<PathBuf>,
        /// Model name or glob; repeatable. Default: every model.
        #[arg(long = "model", value_name = "NAME")]
        models: Vec<String>,
        /// Model shape; repeatable. Default: every shape of each model.
        #[arg(long = "shape", value_name = "NAME")]
        shapes: Vec<String>,
        /// Chip: `trn1`, `trn2`, `trn3`, or a chip TOML file.
        #[arg(long, default_value = "trn2", value_name = "CHIP")]
        chip: String,
    },
    /// Print the baseline file.
    // Only `cargo metadata` and the target dir are used: no flag choosing a build.
    #[command(mut_args(hide_build_flags))]
    Show {
        #[command(flatten)]
        cargo: CargoFlags,
        /// The baseline file (default: neuron-tune.baseline.toml at the workspace root).
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
    },
}

/// How a search runs.
#[derive(Debug, Args, Clone)]
pub struct SearchOpts {
    /// The search strategy; `default` is a TPE-guided portfolio (search/README.md says
    /// why).
    #[arg(long, default_value = "default", help_heading = "Search",
          value_parser = clap::builder::PossibleValuesParser::new(neuron_tune_search::BUILTIN))]
    pub strategy: String,
    /// An external program proposing configurations (JSON on stdin and stdout; see
    /// search/PROPOSER.md). Replaces --strategy.
    #[arg(long, value_name = "CMD", help_heading = "Search", conflicts_with = "strategy")]
    pub proposer: Option<String>,
    /// Evaluations per kernel and shape. In `tune` these are the variants simulated (or
    /// found invalid): a proposal pruned by its lower bound costs no simulation and is
    /// not counted, up to 4 × budget proposals in all.
    #[arg(long, default_value_t = 100, help_heading = "Search",
          value_parser = positive::<usize>, allow_negative_numbers = true)]
    pub budget: usize,
    /// Stop starting evaluations after this many seconds (per kernel and shape). The batch
    /// under way finishes, with the correctness checks of its would-be winners (for a
    /// kernel whose check is slow, that can be many times the limit) [default: no limit].
    #[arg(long, value_name = "SECS", help_heading = "Search", value_parser = positive_secs)]
    pub time: Option<f64>,
    /// Stop after this many proposals in a row (pruned ones included) without a new best
    /// [default: no limit].
    #[arg(long, value_name = "N", help_heading = "Search", value_parser = positive::<usize>,
          allow_negative_numbers = true)]
    pub early_stop: Option<usize>,
    /// Seed of the strategy (printed on every run; the same seed replays the same run)
    /// [default: the current time in seconds; give one to CI partitions, which start at
    /// different seconds].
    #[arg(long, help_heading = "Search", value_parser = seed, allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// Continue the run of the same kernel, shape (dimensions), chip (a chip file's
    /// content included), strategy, objective, pinned --params and seed from its journal
    /// without repeating an evaluation (without --seed: the seed of the latest such
    /// journal). A journal written by another build of the kernel crate or simulator is not
    /// resumed: the run starts afresh, unchanged programs served from the store.
    #[arg(long, help_heading = "Search")]
    pub resume: bool,
    /// `time`: the fastest correct variant. `pareto`: also the variants no other beats on
    /// all of time, SBUF footprint and estimated energy (docs/energy.md); the search is
    /// still guided by time, and nothing is pruned.
    #[arg(long, value_enum, default_value_t = Objective::Time, help_heading = "Search")]
    pub objective: Objective,
}

/// `tune --goal`: search in rounds until a target is met; and how would-be winners are
/// checked and validated (`--validate`, `--recheck`).
#[derive(Args, Debug, Clone, Default)]
pub struct GoalOpts {
    /// Stop as soon as the best variant meets this: a speed-up over the default (`20%`:
    /// the default's time / the best's ≥ 1.20), a time (`5ms`, `250us`, `1.5s`) or a
    /// throughput of the kernel's declared useful work per reported time (`150TFLOP/s`,
    /// `300GB/s`). Not met by the end: exit 6, saying how far it got and what limits the best
    /// variant. Implies --validate.
    #[arg(long, value_name = "PCT|TIME|RATE", value_parser = parse_goal, help_heading = "Goal")]
    pub goal: Option<Goal>,
    /// With --goal: at most this many rounds (a round is one batch of up to 4 proposals,
    /// then a decision). --budget still caps the simulations [default: no limit].
    #[arg(long, value_name = "N", value_parser = positive::<usize>, requires = "goal",
          allow_negative_numbers = true,
          help_heading = "Goal")]
    pub max_rounds: Option<usize>,
    /// Validate each new best before it stands: right at full size on every named shape of
    /// the kernel's key set (all its named shapes without --shape) and not slowing any
    /// selected model that calls it; one that fails is rolled back to the next best. The
    /// tuned database records what each winner was validated on. Always on with --goal.
    #[arg(long, help_heading = "Goal")]
    pub validate: bool,
    /// Check every would-be winner against its CPU reference again. Without it, a verdict
    /// stored by an earlier run of the same harness build (same binary, parameters, chip and
    /// seed) is reused.
    #[arg(long, help_heading = "Search")]
    pub recheck: bool,
}

impl GoalOpts {
    /// New bests are validated: `--validate`, or a goal (which implies it).
    pub fn validates(&self) -> bool {
        self.validate || self.goal.is_some()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Objective {
    #[value(alias = "latency")]
    Time,
    Pareto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Template {
    Gemm,
    Elementwise,
    Reduction,
    Attention,
}

/// The longest duration accepted (about 31 years): beyond what a `Duration` holds, a time
/// limit would overflow.
const MAX_SECS: f64 = 1e9;

/// A duration in seconds, above zero.
fn positive_secs(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= MAX_SECS => Ok(s),
        Ok(_) => Err(format!("must be a number of seconds above 0 and at most {MAX_SECS:e}")),
        Err(e) => Err(e.to_string()),
    }
}

/// A percentage, `5` or `5%`, from 0 to 100.
fn percent(text: &str) -> Result<f64, String> {
    let number = text.trim().strip_suffix('%').unwrap_or(text.trim());
    match number.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        Ok(_) => Err("must be a percentage from 0 to 100".into()),
        Err(e) => Err(format!("expected a percentage such as 5 or 5%: {e}")),
    }
}

/// `check --cases` when not given.
pub const DEFAULT_CHECK_CASES: u32 = 32;

/// A count that must be at least 1.
/// A whole number of at least 1 (counts, seconds): `0` and negative numbers are said to be
/// too small, rather than clap's range or "unexpected argument '-3'".
pub(crate) fn positive<T>(text: &str) -> Result<T, String>
where
    T: std::str::FromStr<Err = std::num::ParseIntError> + PartialEq + From<u8>,
{
    match text.trim().parse::<T>() {
        Ok(n) if n == T::from(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) if text.trim().starts_with('-') => Err("must be at least 1".into()),
        Err(e) => Err(format!("not a whole number ({e})")),
    }
}

/// A seed: a whole number from 0 to 2^64 − 1.
fn seed(text: &str) -> Result<u64, String> {
    text.trim().parse::<u64>().map_err(|_| {
        format!("a seed is a whole number from 0 to {} (the one a run printed)", u64::MAX)
    })
}

/// A file the command writes (`--results`, `--markdown`, `--junit`, `--trace`,
/// `--baseline` of `baseline save`): refused while the arguments are parsed (exit 2) when it
/// cannot be written — under a file, or a directory itself — rather than after the build
/// and every simulation it reports on. Missing parent directories are no reason: the write
/// (`store::write_atomic`) makes them.
fn output_file(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    match crate::store::unwritable(&path) {
        Some(why) => Err(why),
        None => Ok(path),
    }
}

impl Cli {
    /// What clap's derive cannot say: `--partition` without `--results` would do part of
    /// the work and keep nothing for `merge`, so it is refused as a usage error (exit 2)
    /// that says why, under the subcommand's own usage line, as clap's errors are.
    fn validate(&self) -> Result<(), clap::Error> {
        let (name, parts) = match &self.command {
            Command::Bench { parts, .. } => ("bench", parts),
            Command::Tune { parts, .. } => ("tune", parts),
            Command::Gate { parts, .. } => ("gate", parts),
            _ => return Ok(()),
        };
        let (Some(p), None) = (&parts.partition, &parts.results) else { return Ok(()) };
        let mut cli = <Cli as clap::CommandFactory>::command();
        // Built, so the subcommand knows its full name (`cargo neuron-tune bench`).
        cli.build();
        let subcommand = cli.find_subcommand_mut(name).expect("a subcommand of Cli");
        Err(subcommand.error(
            clap::error::ErrorKind::MissingRequiredArgument,
            format!(
                "--partition {p} needs --results FILE: a partition's results are only useful \
                 merged (`cargo neuron-tune merge` joins the partitions' files), and without \
                 one this run would keep nothing for the merge"
            ),
        ))
    }

    /// Parse the process arguments, dropping the `neuron-tune` that cargo inserts when it
    /// runs us as `cargo neuron-tune`.
    pub fn parse_args() -> Cli {
        let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if args.get(1).is_some_and(|a| a == "neuron-tune") {
            args.remove(1);
        }
        match Cli::try_parse_from(&args).and_then(|cli| cli.validate().map(|()| cli)) {
            Ok(cli) => cli,
            Err(e) => {
                // A usage error of a JSON run is also an `error` event on stdout, as every
                // other failure is, so a consumer of the event stream sees why it ended.
                if e.use_stderr() && wants_json(&args) {
                    let message = usage_error_message(&e.to_string());
                    let code = crate::exit::Exit::Config.code();
                    crate::output::Reporter::new(true).event(&crate::output::Event::Error {
                        code,
                        message,
                        diagnostics: Vec::new(),
                    });
                }
                e.exit()
            }
        }
    }
}

/// A clap usage error as an event's message: the error and its tips (clap's `tip:` lines
/// name the flag that was meant), without the usage synopsis and the `--help` pointer that
/// only a terminal reader needs.
fn usage_error_message(text: &str) -> String {
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|line| !line.starts_with("Usage:"))
        .filter(|line| !line.is_empty())
        .collect();
    kept.join("\n").trim_start_matches("error: ").to_string()
}

/// `--message-format json` (or `=json`) among the arguments, however the rest parses.
fn wants_json(args: &[std::ffi::OsString]) -> bool {
    let args: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    args.windows(2).any(|w| w == ["--message-format", "json"])
        || args.contains(&"--message-format=json")
}

#[cfg(test)]
mod tests;
