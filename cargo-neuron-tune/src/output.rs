//! What the tool says: typed events, and the two ways of saying them.
//!
//! Every command reports through [`Reporter`]. With `--message-format json` each [`Event`]
//! is one JSON object on stdout and stdout carries nothing else (the events and their
//! field names are public API, ARCHITECTURE.md); otherwise results (tables, verdicts) go to
//! stdout and status (building, progress, notes, warnings) to stderr, as cargo and
//! ripgrep do, so `cargo neuron-tune list > kernels.txt` keeps the list and shows the
//! progress.

use crate::cli::{ColorWhen, GlobalOpts, MessageFormat};
use neuron_tune_protocol::{CheckFailure, KernelInfo, ModelInfo, Params, ProfileSummary};
use serde::Serialize;
use std::io::Write;
use std::sync::Mutex;

/// A machine-readable event. `kernel`, `shape`, `params` and `chip` name the variant an
/// event is about.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// `analyze`: each file read with its verdict; with two files the comparison and whether
    /// the verdicts agree.
    Analyze {
        files: Vec<crate::analyze::Analyzed>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        comparison: Vec<crate::analyze::Row>,
        #[serde(skip_serializing_if = "Option::is_none")]
        agree: Option<bool>,
    },
    /// `chip`: a chip description as TOML.
    Chip {
        name: String,
        toml: String,
    },
    List {
        package: String,
        kernels: Vec<KernelInfo>,
        models: Vec<ModelInfo>,
        /// The crate's tuned parameters, each with whether it is stale.
        tuned: Vec<TunedStatus>,
    },
    WorkerStarted {
        package: String,
        pid: u32,
    },
    Build {
        kernel: String,
        shape: String,
        params: Params,
        chip: String,
        program_hash: String,
        instruction_count: u64,
        sbuf_bytes_per_partition: u64,
    },
    Check {
        kernel: String,
        /// The named shape checked (`check --shape`); `None`: the kernel's small random
        /// shapes were.
        shape: Option<String>,
        params: Params,
        chip: String,
        passed: bool,
        cases: u32,
        /// The errors over the cases; `None` (null) where they could not be measured: the
        /// outputs were never compared (a panic, a broken hardware rule) or held a NaN or an
        /// infinity (the cosine then too), which the harness says as `f64::MAX`.
        max_abs_err: Option<f64>,
        max_rel_err: Option<f64>,
        mse: Option<f64>,
        cosine: Option<f64>,
        seed: u64,
        /// The failing case; a figure of its metrics that could not be measured is null.
        failure: Option<FailedCase>,
        /// The tolerance the verdict used, and the absolute tolerance it came to.
        tolerance: Option<neuron_tune_protocol::Tolerance>,
        effective_atol: f64,
        /// The element nearest its own bound (absent when the harness does not say); a
        /// figure that could not be measured is null.
        #[serde(skip_serializing_if = "Option::is_none")]
        worst: Option<Worst>,
    },
    Bench {
        kernel: String,
        shape: String,
        params: Params,
        chip: String,
        cycles: u64,
        time_us: f64,
        kernel_time_us: f64,
        tflops: f64,
        bottleneck: String,
        program_hash: String,
        cached: bool,
    },
    /// A variant that could not be run: `kind` is `invalid` (its rule or a hardware rule),
    /// `panic`, `timeout` or `crashed`; or (`tune`) one that failed its correctness check:
    /// `failed_check`, the message its shrunk failing case.
    VariantFailed {
        kernel: String,
        shape: String,
        params: Params,
        chip: String,
        kind: String,
        message: String,
    },
    /// What kernel code printed while a variant ran (never mixed into results).
    Output {
        kernel: String,
        shape: String,
        params: Params,
        text: String,
    },
    Best {
        kernel: String,
        shape: String,
        chip: String,
        best_params: Params,
        best_time: f64,
        default_time: Option<f64>,
        evaluations: usize,
    },
    Profile {
        kernel: String,
        shape: String,
        params: Params,
        chip: String,
        cycles: u64,
        time_us: f64,
        tflops: f64,
        bottleneck: String,
        profile: Box<ProfileSummary>,
        trace: Option<std::path::PathBuf>,
    },
    /// `new` wrote a kernel module.
    New {
        kernel: String,
        template: String,
        module: std::path::PathBuf,
    },
    /// `init`: the crate made a kernel crate (`changed` false: it already was one).
    Init {
        package: String,
        manifest: std::path::PathBuf,
        harness: String,
        changed: bool,
    },
    /// A diagnosis `tune` can only make once every shape of a kernel is tuned
    /// (`over_fitted`): for the result of this kernel and shape.
    Diagnosis {
        kernel: String,
        shape: String,
        /// The shape's dimensions: a model's calls of one kernel share the shape's name.
        dims: neuron_tune_protocol::Shape,
        chip: String,
        diagnosis: crate::convergence::Diagnosis,
    },
    /// A diagnosis of a whole `tune` run rather than of one kernel and shape (`slow` by
    /// the harness build, which every kernel shape of the run shares): after their events.
    RunDiagnosis {
        diagnosis: crate::convergence::Diagnosis,
    },
    /// The result of a search (`tune` per kernel and shape; `replay` per landscape).
    Tune {
        kernel: String,
        shape: Option<String>,
        /// The shape's dimensions (a model's calls of one kernel share the shape's name,
        /// `qwen3@tiny`); absent for `replay`.
        #[serde(skip_serializing_if = "Option::is_none")]
        dims: Option<neuron_tune_protocol::Shape>,
        chip: Option<String>,
        best_params: serde_json::Value,
        /// µs for the simulator; the landscape's own unit for `replay`.
        best_time: f64,
        default_time: Option<f64>,
        evaluations: usize,
        pruned: usize,
        /// Configurations refused: the kernel's rule or a hardware rule, a failed
        /// correctness check, a validation that rolled a winner back.
        invalid: usize,
        /// Evaluations whose kernel code panicked, crashed or hung (not in `invalid`).
        faults: usize,
        seed: u64,
        strategy: String,
        /// The best value after each evaluation (`null` while none was valid).
        best_so_far: Vec<Option<f64>>,
        journal: Option<std::path::PathBuf>,
        /// `--objective pareto`: the front (params, time_us, sbuf_bytes_per_partition,
        /// energy_uj_estimate), fastest first.
        #[serde(skip_serializing_if = "Option::is_none")]
        pareto: Option<serde_json::Value>,
        /// How the run converged (docs/tuning-loop.md).
        convergence: Box<crate::convergence::Convergence>,
        /// The diagnosis rules that fired, each with evidence and advice.
        diagnoses: Vec<crate::convergence::Diagnosis>,
        /// `tune --goal`: the decision log, one entry per round.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        rounds: Vec<crate::convergence::Round>,
        /// `tune --goal`: the goal, whether it was met, and what limits the best variant.
        #[serde(skip_serializing_if = "Option::is_none")]
        goal: Option<Box<crate::convergence::GoalReport>>,
        /// `--goal`/`--validate`: what the best was validated on, `{"shapes": [names],
        /// "models": ["model@shape"]}` (absent when it was not: not asked, or the default).
        #[serde(skip_serializing_if = "Option::is_none")]
        validated: Option<Box<serde_json::Value>>,
        /// `"default"` when nothing the search found was faster than the default
        /// parameters (a tie too), which the result then is (absent otherwise).
        #[serde(skip_serializing_if = "Option::is_none")]
        kept: Option<&'static str>,
        /// `{"params", "time_us"}`: the tuned database's record, measured again, when it
        /// stays in the file because the run's best is not faster (absent otherwise; the
        /// run's own result above is unchanged by it).
        #[serde(skip_serializing_if = "Option::is_none")]
        kept_record: Option<Box<serde_json::Value>>,
        /// `"early_stop"` or `"time"` when `--early-stop` or `--time` ended the search
        /// before its budget (absent otherwise).
        #[serde(skip_serializing_if = "Option::is_none")]
        stopped_by: Option<&'static str>,
    },
    /// A model end to end (`bench --model`): throughput with the tuned parameters and with
    /// the defaults, each with its per-call breakdown.
    Model {
        model: String,
        shape: String,
        chip: String,
        tokens_per_s: f64,
        default_tokens_per_s: f64,
        total_us: f64,
        default_total_us: f64,
        tuned: Box<crate::models::ModelRun>,
        default: Box<crate::models::ModelRun>,
        /// Tuned entries whose kernel changed since they were tuned.
        stale: Vec<String>,
    },
    /// `gate`: one model at one shape on one chip against its baseline (verdict, both
    /// throughputs, change, the calls that moved, stale tuned entries).
    Gate(Box<crate::gate::Comparison>),
    /// `gate` (and `merge` of gate results): the verdict over all models, before `summary`.
    GateSummary(Box<GateSummary>),
    /// `baseline save` / `baseline show`: the baseline file's entries.
    Baseline {
        path: std::path::PathBuf,
        entries: Vec<crate::baseline::BaselineEntry>,
    },
    /// `report`: the page written, what it shows, and the traces written next to it.
    Report {
        path: std::path::PathBuf,
        targets: usize,
        tuned: usize,
        gate_series: usize,
        traces: Vec<std::path::PathBuf>,
        /// Programs profiled by this run (the others' profiles were stored).
        profiled: usize,
    },
    Summary(Summary),
    Error {
        code: u8,
        message: String,
        /// A failed harness build (code 3): the compiler's diagnostics, each as rustc
        /// rendered it, in the order they came (absent when there are none).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        diagnostics: Vec<String>,
    },
}

/// A check's failing case as the `check` event says it: the protocol's [`CheckFailure`],
/// with null for each figure the harness could not measure.
#[derive(Clone, Debug, Serialize)]
pub struct FailedCase {
    pub shape: neuron_tune_protocol::Shape,
    pub input_seed: u64,
    pub distribution: neuron_tune_protocol::Distribution,
    pub message: String,
    pub metrics: Option<CaseMetrics>,
    /// A broken hardware rule: its name, the instruction and its source location.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

impl From<CheckFailure> for FailedCase {
    fn from(f: CheckFailure) -> FailedCase {
        FailedCase {
            shape: f.shape,
            input_seed: f.input_seed,
            distribution: f.distribution,
            message: f.message,
            metrics: f.metrics.map(|m| CaseMetrics {
                max_abs_err: measured(m.max_abs_err),
                max_rel_err: measured(m.max_rel_err),
                mse: measured(m.mse),
                cosine: measured(m.max_abs_err).map(|_| m.cosine),
                mismatches: m.mismatches,
                elements: m.elements,
                effective_atol: m.effective_atol,
                worst: m.worst.map(Worst::from),
            }),
            rule: f.rule,
            instruction: f.instruction,
            location: f.location,
        }
    }
}

/// The failing case's `Metrics`, null where not measured (a NaN or an infinity in the
/// outputs: the cosine is then NaN too, which the harness sends as 0).
#[derive(Clone, Debug, Serialize)]
pub struct CaseMetrics {
    pub max_abs_err: Option<f64>,
    pub max_rel_err: Option<f64>,
    pub mse: Option<f64>,
    pub cosine: Option<f64>,
    pub mismatches: u64,
    pub elements: u64,
    pub effective_atol: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst: Option<Worst>,
}

/// The protocol's `WorstElement`, null where not measured (a NaN's error and ratio).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Worst {
    pub abs_err: Option<f64>,
    pub abs_ref: Option<f64>,
    pub allowed: Option<f64>,
    pub ratio: Option<f64>,
}

impl From<neuron_tune_protocol::WorstElement> for Worst {
    fn from(w: neuron_tune_protocol::WorstElement) -> Worst {
        Worst {
            abs_err: measured(w.abs_err),
            abs_ref: measured(w.abs_ref),
            allowed: measured(w.allowed),
            ratio: measured(w.ratio),
        }
    }
}

/// A figure of a check report as the `check` event says it: `None` where the harness could
/// not measure it (`f64::MAX`).
pub fn measured(x: f64) -> Option<f64> {
    (x < f64::MAX).then_some(x)
}

/// The gate's verdict over all models: counts, the calls that moved most (with the models
/// they moved), stale tuned entries, notes, the exit code and where the reports went.
#[derive(Clone, Debug, Serialize)]
pub struct GateSummary {
    pub against: String,
    pub threshold_pct: f64,
    pub strict: bool,
    #[serde(flatten)]
    pub counts: crate::gate::Counts,
    pub moved: Vec<crate::gate::CallDelta>,
    /// The stale tuned entries themselves (`stale`, among the counts, is how many).
    #[serde(rename = "stale_entries")]
    pub stale: Vec<String>,
    pub notes: Vec<String>,
    pub exit_code: u8,
    pub markdown: Option<std::path::PathBuf>,
    pub junit: Option<std::path::PathBuf>,
}

/// A tuned record and whether its kernel changed since (`None`: not checked).
#[derive(Clone, Debug, Serialize)]
pub struct TunedStatus {
    #[serde(flatten)]
    pub record: crate::tuned::TunedRecord,
    pub stale: Option<bool>,
}

/// The last event of a command that runs variants (`build`, `check`, `bench`, `tune`,
/// `gate`, `baseline save`, `merge`): what it did, in counts (`variants`: for `tune` the
/// evaluations over every kernel shape, for a `merge` of tune results the winners recorded).
/// `list`, `report`, `chip`, `new`, `init` and `analyze` say what they did in their one
/// event of their own kind.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub command: String,
    pub variants: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid: Option<usize>,
    /// `tune`: evaluations whose kernel code panicked, crashed or hung (not in `invalid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// Whether results may carry colour. `--color always` or `never` decides, whatever the
/// environment (cargo's meaning: the flag beats it); `auto` follows the conventions of
/// no-color.org and bixense.com/clicolors: `NO_COLOR` (set, not empty) never; else
/// `CLICOLOR_FORCE` (set, not empty, not `0`) always; else only on a terminal that is not
/// `TERM=dumb`. `env` reads a variable (a function so the rule is tested without touching
/// the process environment). JSON mode never colours ([`Reporter`] does not ask).
pub fn color_enabled(
    when: ColorWhen,
    env: impl Fn(&str) -> Option<String>,
    stdout_is_terminal: bool,
) -> bool {
    match when {
        ColorWhen::Always => return true,
        ColorWhen::Never => return false,
        ColorWhen::Auto => {}
    }
    let set = |k: &str| env(k).is_some_and(|v| !v.is_empty());
    if set("NO_COLOR") {
        return false;
    }
    if set("CLICOLOR_FORCE") && env("CLICOLOR_FORCE").as_deref() != Some("0") {
        return true;
    }
    stdout_is_terminal && env("TERM").as_deref() != Some("dumb")
}

/// SGR codes the tool uses.
pub mod sgr {
    pub const BOLD: &str = "1";
    pub const RED: &str = "31";
    pub const GREEN: &str = "32";
    pub const YELLOW: &str = "33";
}

/// Where events and human lines go, and how much is said (`--quiet`, `--verbose`).
pub struct Reporter {
    json: bool,
    /// Results may carry colour ([`color_enabled`]; never in JSON mode).
    color: bool,
    /// `--color` as given, for cargo's own output ([`Reporter::cargo_output`]).
    color_when: ColorWhen,
    /// `--quiet`: no status lines ([`Reporter::status`]) and no progress bars.
    quiet: bool,
    /// `-v` given this many times: [`Reporter::verbose`] lines from 1.
    verbose: u8,
    /// Invalid variants seen (combinations the validity rule or the hardware rejects):
    /// shown as a count with a few examples, not one line each.
    invalid: Mutex<Vec<String>>,
    /// Failures by message: each distinct one is printed once, repeats are counted.
    repeats: Mutex<Vec<(String, usize)>>,
}

impl Reporter {
    /// JSON mode or human mode with the default `--color`, neither quiet nor verbose.
    pub fn new(json: bool) -> Reporter {
        Reporter::from_flags(&GlobalOpts {
            message_format: if json { MessageFormat::Json } else { MessageFormat::Human },
            color: ColorWhen::Auto,
            quiet: false,
            verbose: 0,
        })
    }

    /// As the global flags ask.
    pub fn from_flags(g: &GlobalOpts) -> Reporter {
        use std::io::IsTerminal;
        let json = g.message_format == MessageFormat::Json;
        let env = |k: &str| std::env::var(k).ok();
        let color = !json && color_enabled(g.color, env, std::io::stdout().is_terminal());
        Reporter {
            json,
            color,
            color_when: g.color,
            quiet: g.quiet,
            verbose: g.verbose,
            invalid: Mutex::default(),
            repeats: Mutex::default(),
        }
    }

    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Whether status lines and progress bars are shown: human mode, not `--quiet`.
    pub fn shows_status(&self) -> bool {
        !self.json && !self.quiet
    }

    /// How a harness build's cargo is to speak: the same `--color`, `-q` and `-v`; in JSON
    /// mode the compiler's diagnostics are collected (for the `error` event of a failed
    /// build) rather than rendered by cargo.
    pub fn cargo_output(&self) -> crate::cargo::CargoOutput {
        crate::cargo::CargoOutput {
            color: self.color_when,
            quiet: self.quiet,
            verbose: self.verbose,
            collect_diagnostics: self.json,
        }
    }

    /// A table as result lines (header in bold when colour is on), trailing spaces cut.
    pub fn table(&self, t: &Table, indent: &str) {
        for line in t.lines_colored(indent, self.color) {
            self.result(line.trim_end());
        }
    }

    /// An event: a JSON line in JSON mode, nothing otherwise (the command prints its human
    /// form with [`Reporter::result`] or [`Reporter::status`]).
    pub fn event(&self, e: &Event) {
        if self.json {
            let mut out = std::io::stdout().lock();
            let _ = serde_json::to_writer(&mut out, e);
            let _ = out.write_all(b"\n");
            let _ = out.flush();
        }
    }

    /// A result line (human mode only): stdout.
    pub fn result(&self, line: impl AsRef<str>) {
        if !self.json {
            // As in JSON mode, a closed stdout (`| head`) is not an error worth a panic:
            // the run goes on and still writes its files.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", line.as_ref());
        }
    }

    /// A status line (human mode only, not with `--quiet`): stderr. Progress and what the
    /// command is doing, never the only word on something that went wrong.
    pub fn status(&self, line: impl AsRef<str>) {
        if self.shows_status() {
            eprintln!("{}", line.as_ref());
        }
    }

    /// A line about a variant that failed, or what kernel code printed (human mode only,
    /// `--quiet` too, which keeps what went wrong): stderr. In JSON mode an event says it.
    pub fn detail(&self, line: impl AsRef<str>) {
        if !self.json {
            eprintln!("{}", line.as_ref());
        }
    }

    /// A status line shown only with `-v` (human mode): what the tool runs and where.
    pub fn verbose(&self, line: impl AsRef<str>) {
        if self.verbose > 0 && self.shows_status() {
            eprintln!("{}", line.as_ref());
        }
    }

    /// A warning, note or error (`warning:`, `note:`, `error:`): stderr in both modes.
    pub fn note(&self, line: impl AsRef<str>) {
        eprintln!("{}", line.as_ref());
    }

    /// Remember an invalid variant for [`Reporter::flush_invalid`].
    pub fn invalid(&self, line: String) {
        self.invalid.lock().expect("reporter").push(line);
    }

    /// A failure line, printed the first time its `message` is seen; later ones with the
    /// same message are counted and summed up by [`Reporter::flush_invalid`].
    /// Returns whether it was printed.
    pub fn once(&self, message: &str, line: String) -> bool {
        let mut seen = self.repeats.lock().expect("reporter");
        match seen.iter_mut().find(|(m, _)| m == message) {
            Some((_, n)) => {
                *n += 1;
                false
            }
            None => {
                seen.push((message.to_string(), 0));
                drop(seen);
                // Not a note: in JSON mode every failure is a `variant_failed` event.
                self.detail(line);
                true
            }
        }
    }

    /// Print the invalid variants seen (all when few, else a count and examples) and how
    /// often each failure printed once was repeated (detail lines: in JSON mode each is a
    /// `variant_failed` event already).
    pub fn flush_invalid(&self) {
        for (message, n) in std::mem::take(&mut *self.repeats.lock().expect("reporter")) {
            if n > 0 {
                self.detail(format!(
                    "   … and {n} more variants failed the same way: {}",
                    message.lines().next().unwrap_or_default()
                ));
            }
        }
        let mut lines = std::mem::take(&mut *self.invalid.lock().expect("reporter"));
        // They arrive as parallel workers finish; sorted, a run prints the same lines (and
        // the same examples) every time.
        lines.sort();
        if lines.len() <= 4 {
            for l in &lines {
                self.detail(l);
            }
        } else {
            self.detail(format!(
                "   {} invalid variants skipped (the kernels' validity rules or hardware limits), e.g.:",
                lines.len()
            ));
            for l in lines.iter().take(3) {
                self.detail(l);
            }
        }
    }
}

/// What kernel code printed, indented under its variant (stderr: it is not a result; shown
/// with `--quiet` too: it is the kernel's own word, not the tool's status).
pub fn show_output(out: &Reporter, kernel: &str, shape: &str, params: &Params, text: &str) {
    if text.is_empty() {
        return;
    }
    out.event(&Event::Output {
        kernel: kernel.into(),
        shape: shape.into(),
        params: params.clone(),
        text: text.into(),
    });
    out.detail(format!("  output of {kernel} {params} at {shape}:"));
    for line in text.lines() {
        out.detail(format!("    | {line}"));
    }
}

/// A table whose columns are as wide as their widest cell (counted in characters, so
/// `µ` is one), numbers right-aligned.
pub struct Table {
    headers: Vec<String>,
    /// Per column: right-aligned.
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
    /// (row, column, SGR code) of coloured cells; row 0 is the first data row.
    paint: Vec<(usize, usize, &'static str)>,
}

impl Table {
    /// Columns named `headers`; a header starting with `>` is right-aligned (the `>` is
    /// dropped).
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.trim_start_matches('>').to_string()).collect(),
            right: headers.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
            paint: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// No row yet.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Colour cell `col` of the last row added (shown only when colour is on).
    pub fn paint_last(&mut self, col: usize, sgr: &'static str) {
        if let Some(r) = self.rows.len().checked_sub(1) {
            self.paint.push((r, col, sgr));
        }
    }

    /// The lines, each indented by `indent`, the last column unpadded; no colour.
    pub fn lines(&self, indent: &str) -> Vec<String> {
        self.lines_colored(indent, false)
    }

    /// [`Table::lines`], with the header bold and painted cells coloured when `color`:
    /// widths count the text only, so columns stay aligned either way.
    pub fn lines_colored(&self, indent: &str, color: bool) -> Vec<String> {
        let n = self.headers.len();
        let width = |i: usize| {
            std::iter::once(&self.headers[i])
                .chain(self.rows.iter().filter_map(|r| r.get(i)))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..n).map(width).collect();
        std::iter::once(&self.headers)
            .chain(&self.rows)
            .enumerate()
            .map(|(r, cells)| {
                let mut line = indent.to_string();
                for (i, c) in cells.iter().enumerate() {
                    let pad = widths.get(i).copied().unwrap_or(0).saturating_sub(c.chars().count());
                    let last = i + 1 == cells.len();
                    if i > 0 {
                        line.push_str("  ");
                    }
                    let code = match r {
                        0 => Some(sgr::BOLD),
                        r => self.paint.iter().find(|p| p.0 == r - 1 && p.1 == i).map(|p| p.2),
                    };
                    let painted;
                    let c = match code {
                        Some(code) if color && !c.is_empty() => {
                            painted = format!("\x1b[{code}m{c}\x1b[0m");
                            &painted
                        }
                        _ => c,
                    };
                    if self.right.get(i).copied().unwrap_or(false) {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(c);
                    } else {
                        line.push_str(c);
                        if !last {
                            line.extend(std::iter::repeat_n(' ', pad));
                        }
                    }
                }
                line
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{Reporter, Table};
    use crate::cli::{ColorWhen, GlobalOpts, MessageFormat};

    /// docs/json-events.md documents every event: a heading "## `name`" per variant of
    /// [`super::Event`], in snake_case as serde writes it (the variants read from this
    /// file's source, so a new event without its section fails here).
    #[test]
    fn every_event_has_its_section_in_the_json_events_doc() {
        let source = include_str!("output.rs");
        let doc = include_str!("../../docs/json-events.md");
        let body = &source[source.find("pub enum Event {").unwrap()..];
        let body = &body[..body.find("\n}\n").unwrap()];
        let variants: Vec<String> = body
            .lines()
            .filter_map(|l| l.strip_prefix("    "))
            .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
            .map(|l| l.split(|c: char| !c.is_ascii_alphanumeric()).next().unwrap().to_string())
            .collect();
        assert!(variants.len() > 20, "{variants:?}");
        for v in &variants {
            let mut snake = String::new();
            for (i, c) in v.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            }
            assert!(doc.contains(&format!("\n## `{snake}`")), "docs/json-events.md: no `{snake}`");
        }
    }

    #[test]
    fn a_repeated_failure_is_printed_once_and_counted() {
        let r = Reporter::new(true);
        assert!(r.once("panic: index out of bounds", "first".into()));
        assert!(!r.once("panic: index out of bounds", "second".into()));
        assert!(r.once("panic: another", "third".into()));
        assert!(!r.once("panic: index out of bounds", "fourth".into()));
        let counts: Vec<usize> = r.repeats.lock().unwrap().iter().map(|(_, n)| *n).collect();
        assert_eq!(counts, [2, 0]);
    }

    /// A test environment of these variables.
    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn no_color_wins_then_clicolor_force_then_the_terminal() {
        use super::color_enabled;
        let auto = |vars, terminal| color_enabled(ColorWhen::Auto, env(vars), terminal);
        assert!(auto(&[], true));
        assert!(!auto(&[], false));
        assert!(!auto(&[("TERM", "dumb")], true));
        assert!(!auto(&[("NO_COLOR", "1")], true));
        assert!(!auto(&[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")], true));
        // An empty NO_COLOR is unset (no-color.org).
        assert!(auto(&[("NO_COLOR", "")], true));
        assert!(auto(&[("CLICOLOR_FORCE", "1")], false));
        assert!(!auto(&[("CLICOLOR_FORCE", "0")], false));
    }

    /// `--color always` and `--color never` beat every variable and the terminal, as
    /// cargo's flag does; only `auto` reads them.
    #[test]
    fn the_color_flag_beats_the_environment() {
        use super::color_enabled;
        let every: &[&[(&str, &str)]] = &[
            &[],
            &[("NO_COLOR", "1")],
            &[("TERM", "dumb")],
            &[("CLICOLOR_FORCE", "1")],
            &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1"), ("TERM", "dumb")],
        ];
        for &vars in every {
            for terminal in [false, true] {
                assert!(color_enabled(ColorWhen::Always, env(vars), terminal), "{vars:?}");
                assert!(!color_enabled(ColorWhen::Never, env(vars), terminal), "{vars:?}");
            }
        }
        assert!(color_enabled(ColorWhen::Always, env(&[("NO_COLOR", "1")]), false));
        assert!(!color_enabled(ColorWhen::Never, env(&[("CLICOLOR_FORCE", "1")]), true));
    }

    /// JSON output is never coloured, `--color always` or not; human output is when asked.
    #[test]
    fn json_mode_never_colours() {
        let flags =
            |format, color| GlobalOpts { message_format: format, color, quiet: false, verbose: 0 };
        let json = Reporter::from_flags(&flags(MessageFormat::Json, ColorWhen::Always));
        assert!(!json.color);
        let human = Reporter::from_flags(&flags(MessageFormat::Human, ColorWhen::Always));
        assert!(human.color);
    }

    /// What cargo is told: the same `--color` (except `auto`), `-q` and `-v`s; JSON mode
    /// collects the diagnostics.
    #[test]
    fn cargo_hears_the_output_flags() {
        let g = GlobalOpts {
            message_format: MessageFormat::Json,
            color: ColorWhen::Never,
            quiet: true,
            verbose: 0,
        };
        let c = Reporter::from_flags(&g).cargo_output();
        assert_eq!(
            (c.color, c.quiet, c.verbose, c.collect_diagnostics),
            (ColorWhen::Never, true, 0, true)
        );
        let g = GlobalOpts { message_format: MessageFormat::Human, quiet: false, verbose: 2, ..g };
        let r = Reporter::from_flags(&g);
        assert!(r.shows_status());
        let c = r.cargo_output();
        assert_eq!((c.quiet, c.verbose, c.collect_diagnostics), (false, 2, false));
        let quiet = Reporter::from_flags(&GlobalOpts { quiet: true, verbose: 0, ..g });
        assert!(!quiet.shows_status(), "--quiet hides status lines and progress bars");
    }

    #[test]
    fn coloured_tables_align_like_plain_ones() {
        let mut t = Table::new(&["model", ">change", "verdict"]);
        t.row(vec!["qwen3".into(), "-12.5 %".into(), "regression".into()]);
        t.paint_last(2, super::sgr::RED);
        t.row(vec!["qwen3_naive_long".into(), "0.0 %".into(), "unchanged".into()]);
        let plain = t.lines("");
        let colored = t.lines_colored("", true);
        assert_eq!(plain, t.lines_colored("", false));
        // Widths 16, 7, 10: `qwen3` + 11 pad + 2 gap; `change` right-aligned in 7.
        let gap = |n: usize| " ".repeat(n);
        assert_eq!(colored[1], format!("qwen3{}-12.5 %  \x1b[31mregression\x1b[0m", gap(13)));
        assert_eq!(
            colored[0],
            format!("\x1b[1mmodel\x1b[0m{}\x1b[1mchange\x1b[0m  \x1b[1mverdict\x1b[0m", gap(14))
        );
        // With the escapes taken out, the coloured lines are the plain ones.
        let strip =
            |l: &str| l.replace("\x1b[1m", "").replace("\x1b[31m", "").replace("\x1b[0m", "");
        assert_eq!(colored.iter().map(|l| strip(l)).collect::<Vec<_>>(), plain);
    }

    #[test]
    fn table_columns_fit_their_widest_cell() {
        let mut t = Table::new(&["kernel", ">time µs", "note"]);
        t.row(vec!["attention_naive".into(), "1.5".into(), "x".into()]);
        t.row(vec!["add".into(), "1234.5".into(), "".into()]);
        let lines = t.lines("  ");
        assert_eq!(lines[0], "  kernel           time µs  note");
        assert_eq!(lines[1], "  attention_naive      1.5  x");
        assert_eq!(lines[2], "  add               1234.5  ");
    }
}
