//! The gate's judgement: each model's throughput against its baseline, and which calls
//! moved.
//!
//! The unit of work is an [`Item`]: one model at one shape on one chip, measured now
//! (`current`) and at the baseline (`base`, from the baseline file or another revision),
//! each with the simulator version that produced it. [`judge`] turns items into a
//! [`Report`]; it is a pure function of the items, so a run split with `--partition` and
//! joined with `merge` is judged exactly like one run. Invariants:
//!
//! - change = current / baseline − 1 in tokens/s; a regression is a change below
//!   −threshold (default 0: the simulator has no noise), an improvement one above +threshold.
//! - Results of different simulator versions, or of a model whose shape dimensions
//!   changed, are *not comparable*: reported, never a regression.
//! - Calls are matched between the two sides by (kernel, Rust crate, shape dimensions): a
//!   model may call two crates' kernels of one name. A call whose crate one side does not
//!   say (a baseline saved before calls recorded it) matches the other side's call of that
//!   kernel and dimensions only when that is unambiguous ([`moved_calls`]). A call moved by
//!   the difference of its total time in the model (calls × (time + launch)).
//! - Exit: 4 if a model could not be evaluated, else 2 if a gate against a baseline file
//!   compared nothing (every item new: a wrong `--chip`, `--shape` or `--baseline`, which
//!   would otherwise pass forever), else 5 on a regression (or, with `--strict`, a stale
//!   tuned entry), else 0.

use crate::exit::Exit;
use crate::models::{CallTime, ModelRun};
use neuron_tune_protocol::{Params, Shape};
use serde::{Deserialize, Serialize};

/// Relative changes smaller than this are float noise, not a change.
const EPS: f64 = 1e-12;

/// How many moved calls the reports name.
pub const TOP_MOVED: usize = 5;

/// What the moved calls' "Δ µs, all calls" column adds up, under both tables.
pub const MOVED_FOOTNOTE: &str = "µs per call include the launch overhead, as in `bench`; \
     Δ µs, all calls: the change in the time of all of the kernel's calls at this shape, \
     summed over the models listed";

/// One side of a comparison: a model run and the simulator version that produced it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub sim_version: String,
    pub run: ModelRun,
}

/// One model at one shape on one chip, measured now and at the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub model: String,
    pub shape: String,
    pub chip: String,
    /// The current measurement (`None`: it could not be evaluated, see `error`).
    pub current: Option<Side>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The baseline's (`None`: there is none, see `base_note`).
    pub base: Option<Side>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_note: Option<String>,
    /// Wall time spent measuring the item, in seconds: the model's evaluation now and,
    /// against a base revision, at the base (`None`: not measured, or a results file written
    /// before this was recorded). The JUnit test case's `time`; nothing is judged by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

impl Item {
    /// The item's name, which `--partition` hashes.
    pub fn name(&self) -> String {
        item_name(&self.model, &self.shape, &self.chip)
    }
}

/// `model@shape@chip`.
pub fn item_name(model: &str, shape: &str, chip: &str) -> String {
    format!("{model}@{shape}@{chip}")
}

/// What the items are judged with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub threshold_pct: f64,
    pub strict: bool,
    /// What the baseline is, for the reports (`neuron-tune.baseline.toml`, `HEAD~1 (…)`).
    pub against: String,
    /// Set when the baseline is a file (not a base revision, where a model the base lacks
    /// is simply new; not in one partition's own verdict, as the merge judges the whole
    /// run): what the file holds and how to record the selection in it. A gate that then
    /// compares nothing — every item new — fails with exit 2 saying this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_hint: Option<String>,
    /// What `against` names, as data: the gate history records it with each line, so gates
    /// against a baseline file and against a base revision can be told apart (absent from
    /// results files written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Basis>,
}

/// What a gate compared the current models with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Basis {
    /// A baseline file: its path as the gate read it.
    BaselineFile { path: String },
    /// The same models built from another revision: `--base-ref` as given, and the commit
    /// it named.
    BaseRef { base_ref: String, commit: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regression,
    Improvement,
    Unchanged,
    /// No baseline for it (a new model, shape or chip).
    New,
    /// Measured by different simulator versions, or at different dimensions.
    NotComparable,
    /// It could not be evaluated now.
    Failed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::Unchanged => "unchanged",
            Verdict::New => "new",
            Verdict::NotComparable => "not comparable",
            Verdict::Failed => "failed",
        }
    }
}

/// A kernel call whose time moved, with the models it moved in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallDelta {
    pub kernel: String,
    /// The Rust crate that defines the kernel (absent when neither side says it).
    #[serde(rename = "crate", default, skip_serializing_if = "Option::is_none")]
    pub krate: Option<String>,
    /// The package whose kernel it is, when the model's links tell (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// Another crate's kernel of the same name is among the calls of a model listed (or
    /// among the calls that moved): the reports name this one by its package or crate
    /// ([`moved_kernel`]). Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_name: bool,
    pub shape: Shape,
    pub chip: String,
    pub before_params: Option<Params>,
    pub after_params: Option<Params>,
    /// One call as `bench` reports it, the launch overhead included (`None`: the side does
    /// not make this call).
    pub before_us: Option<f64>,
    pub after_us: Option<f64>,
    /// Σ over the models of the change of the call's total time in the model.
    pub delta_total_us: f64,
    /// The models (`model@shape`) whose time it moved.
    pub models: Vec<String>,
}

/// One item judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub model: String,
    pub shape: String,
    pub chip: String,
    pub verdict: Verdict,
    pub baseline_tokens_per_s: Option<f64>,
    pub tokens_per_s: Option<f64>,
    /// current / baseline − 1, in percent.
    pub change_pct: Option<f64>,
    pub baseline_total_us: Option<f64>,
    pub total_us: Option<f64>,
    pub note: Option<String>,
    /// Tuned entries of the current run whose kernel changed since they were tuned.
    pub stale: Vec<String>,
    /// This model's calls that moved, most first.
    pub moved: Vec<CallDelta>,
    /// Calls served from the store / all calls, now.
    pub cached_calls: usize,
    pub calls: usize,
    /// The item's wall time in seconds ([`Item::seconds`], 0 when not measured), for the
    /// JUnit report only: it differs from run to run, so the JSON events, which the same
    /// store must reproduce (a merged run's equal one run's), leave it out.
    #[serde(skip)]
    pub seconds: f64,
}

/// Counts of the verdicts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub models: usize,
    pub regressions: usize,
    pub improvements: usize,
    pub unchanged: usize,
    pub new: usize,
    pub not_comparable: usize,
    pub failed: usize,
    pub stale: usize,
}

/// The gate's judgement of all items.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub config: Config,
    pub comparisons: Vec<Comparison>,
    /// Calls whose time moved most over all models (by |Δ total µs|).
    pub moved: Vec<CallDelta>,
    pub stale: Vec<String>,
    /// Said once: e.g. that the two sides' simulator versions differ.
    pub notes: Vec<String>,
    pub counts: Counts,
    pub exit_code: u8,
    /// Why a gate against a baseline file that compared nothing failed (exit 2): what was
    /// not compared, what the file holds, how to record a baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nothing_compared: Option<String>,
}

impl Report {
    pub fn exit(&self) -> Exit {
        Exit::ALL.into_iter().find(|e| e.code() == self.exit_code).unwrap_or(Exit::Internal)
    }
}

impl Report {
    /// The run's notes (first why it compared nothing, when that failed it) and each
    /// comparison's (a not-comparable one's is its verdict's reason, shown with it), as the
    /// Markdown summary and the JSON summary list them.
    pub fn all_notes(&self) -> Vec<String> {
        self.nothing_compared
            .iter()
            .chain(&self.notes)
            .cloned()
            .chain(
                self.comparisons.iter().filter(|c| c.verdict != Verdict::NotComparable).filter_map(
                    |c| {
                        c.note
                            .as_ref()
                            .map(|n| format!("{} at {} on {}: {n}", c.model, c.shape, c.chip))
                    },
                ),
            )
            .collect()
    }
}

/// Judge the items (in the order given; callers sort them by name).
pub fn judge(items: &[Item], cfg: &Config) -> Report {
    let threshold = cfg.threshold_pct / 100.0;
    let mut comparisons = Vec::new();
    let mut all_moved: Vec<CallDelta> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut stale_all: Vec<String> = Vec::new();
    for item in items {
        let mut c = Comparison {
            model: item.model.clone(),
            shape: item.shape.clone(),
            chip: item.chip.clone(),
            verdict: Verdict::Failed,
            baseline_tokens_per_s: item.base.as_ref().map(|b| b.run.tokens_per_s),
            tokens_per_s: item.current.as_ref().map(|s| s.run.tokens_per_s),
            change_pct: None,
            baseline_total_us: item.base.as_ref().map(|b| b.run.total_us),
            total_us: item.current.as_ref().map(|s| s.run.total_us),
            note: None,
            stale: Vec::new(),
            moved: Vec::new(),
            cached_calls: 0,
            calls: 0,
            seconds: item.seconds.unwrap_or(0.0),
        };
        let Some(cur) = &item.current else {
            c.note = Some(item.error.clone().unwrap_or_else(|| "not evaluated".into()));
            comparisons.push(c);
            continue;
        };
        (c.cached_calls, c.calls) = cur.run.cached_calls();
        c.stale = cur.run.calls.iter().filter_map(|x| x.stale.clone()).collect();
        for s in &c.stale {
            if !stale_all.contains(s) {
                stale_all.push(s.clone());
            }
        }
        let Some(base) = &item.base else {
            c.verdict = Verdict::New;
            c.note = Some(item.base_note.clone().unwrap_or_else(|| "no baseline".into()));
            comparisons.push(c);
            continue;
        };
        if base.sim_version != cur.sim_version {
            c.verdict = Verdict::NotComparable;
            let note = format!(
                "simulator {} at the baseline, {} now: results of different simulators are \
                 not compared",
                base.sim_version, cur.sim_version
            );
            if !notes.contains(&note) {
                notes.push(note.clone());
            }
            c.note = Some(note);
            comparisons.push(c);
            continue;
        }
        if base.run.shape != cur.run.shape || base.run.tokens_per_s <= 0.0 {
            c.verdict = Verdict::NotComparable;
            c.note = Some(format!(
                "the shape `{}` was {} at the baseline and is {} now",
                item.shape, base.run.shape, cur.run.shape
            ));
            comparisons.push(c);
            continue;
        }
        let change = cur.run.tokens_per_s / base.run.tokens_per_s - 1.0;
        c.change_pct = Some(change * 100.0);
        c.verdict = if change < -threshold - EPS {
            Verdict::Regression
        } else if change > threshold + EPS {
            Verdict::Improvement
        } else {
            Verdict::Unchanged
        };
        c.moved = moved_calls(&base.run, &cur.run);
        for m in &c.moved {
            match all_moved.iter_mut().find(|a| {
                a.kernel == m.kernel
                    && a.krate == m.krate
                    && a.shape == m.shape
                    && a.chip == m.chip
                    && a.before_params == m.before_params
                    && a.after_params == m.after_params
            }) {
                Some(a) => {
                    a.delta_total_us += m.delta_total_us;
                    a.models.extend(m.models.iter().cloned());
                    a.shared_name |= m.shared_name;
                    a.package = a.package.take().or_else(|| m.package.clone());
                }
                None => all_moved.push(m.clone()),
            }
        }
        comparisons.push(c);
    }
    // Two models may each call one of two crates' kernels of one name: listed together,
    // the name no longer tells them apart.
    let shared: Vec<bool> = all_moved
        .iter()
        .map(|m| {
            let others = all_moved.iter().map(|o| (o.kernel.as_str(), o.krate.as_deref()));
            name_shared(&m.kernel, m.krate.as_deref(), others)
        })
        .collect();
    for (m, shared) in all_moved.iter_mut().zip(shared) {
        m.shared_name |= shared;
    }
    sort_moved(&mut all_moved);
    let count = |v: Verdict| comparisons.iter().filter(|c| c.verdict == v).count();
    let counts = Counts {
        models: comparisons.len(),
        regressions: count(Verdict::Regression),
        improvements: count(Verdict::Improvement),
        unchanged: count(Verdict::Unchanged),
        new: count(Verdict::New),
        not_comparable: count(Verdict::NotComparable),
        failed: count(Verdict::Failed),
        stale: stale_all.len(),
    };
    let nothing_compared = match &cfg.baseline_hint {
        Some(hint) if counts.models > 0 && counts.new == counts.models => {
            Some(format!("nothing compared: {}; {hint}", not_compared(&counts)))
        }
        _ => None,
    };
    let exit = if counts.failed > 0 {
        Exit::Check
    } else if nothing_compared.is_some() {
        Exit::Config
    } else if counts.regressions > 0 || (cfg.strict && counts.stale > 0) {
        Exit::Regression
    } else {
        Exit::Ok
    };
    Report {
        config: cfg.clone(),
        comparisons,
        moved: all_moved,
        stale: stale_all,
        notes,
        counts,
        exit_code: exit.code(),
        nothing_compared,
    }
}

/// Why nothing was compared, when every item is new or not comparable: "2 models without a
/// baseline entry, 1 model not comparable".
pub fn not_compared(c: &Counts) -> String {
    let plural = |n: usize| format!("{n} model{}", if n == 1 { "" } else { "s" });
    let mut why = Vec::new();
    if c.new > 0 {
        why.push(format!("{} without a baseline entry", plural(c.new)));
    }
    if c.not_comparable > 0 {
        why.push(format!("{} not comparable", plural(c.not_comparable)));
    }
    why.join(", ")
}

/// The calls of one model whose total time moved, most first. A call one side does not make
/// counts as 0 µs there; calls are paired by [`pair_calls`].
pub fn moved_calls(base: &ModelRun, cur: &ModelRun) -> Vec<CallDelta> {
    let label = format!("{}@{}", cur.model, cur.shape_name);
    let all: Vec<&CallTime> = base.calls.iter().chain(&cur.calls).collect();
    let mut out: Vec<CallDelta> = pair_calls(&base.calls, &cur.calls)
        .into_iter()
        .filter_map(|(b, a)| {
            let total = |c: Option<&CallTime>| c.map_or(0.0, |c| c.total_us);
            let delta = total(a) - total(b);
            let scale = total(a).abs().max(total(b).abs()).max(1e-9);
            let either = a.or(b).expect("a pair has a call");
            let krate = a.and_then(|c| c.krate.clone()).or_else(|| b?.krate.clone());
            let others = all.iter().map(|o| (o.kernel.as_str(), o.krate.as_deref()));
            let shared_name = name_shared(&either.kernel, krate.as_deref(), others);
            (delta.abs() > EPS * scale).then(|| CallDelta {
                kernel: either.kernel.clone(),
                krate,
                package: a.and_then(|c| c.package.clone()).or_else(|| b?.package.clone()),
                shared_name,
                shape: either.shape.clone(),
                chip: cur.chip.clone(),
                before_params: b.map(|c| c.params.clone()),
                after_params: a.map(|c| c.params.clone()),
                before_us: b.map(|c| c.time_us + base.launch_overhead_us),
                after_us: a.map(|c| c.time_us + cur.launch_overhead_us),
                delta_total_us: delta,
                models: vec![label.clone()],
            })
        })
        .collect();
    sort_moved(&mut out);
    out
}

/// Each call of either side with the other side's same call (`None`: that side does not
/// make it): (baseline, current). The same call is the one of the same kernel, Rust crate
/// and shape dimensions. A call whose crate is not known on one side (a baseline entry
/// saved before calls recorded it) is paired with an unpaired call of that kernel and
/// dimensions on the other side only when that tells which: the one with the same program
/// (nothing changed), else the only one left on both sides; where more are left, which is
/// which cannot be told, and they stay apart.
fn pair_calls<'a>(
    base: &'a [CallTime],
    cur: &'a [CallTime],
) -> Vec<(Option<&'a CallTime>, Option<&'a CallTime>)> {
    let mut taken = vec![false; base.len()];
    let mut of_cur: Vec<Option<usize>> = vec![None; cur.len()];
    let unknown = |b: &CallTime, a: &CallTime| b.krate.is_none() || a.krate.is_none();
    pair_where(base, cur, &mut taken, &mut of_cur, |b, a| b.krate == a.krate);
    let same_program = |b: &CallTime, a: &CallTime| b.program_hash == a.program_hash;
    pair_where(base, cur, &mut taken, &mut of_cur, |b, a| unknown(b, a) && same_program(b, a));
    // The only one left of its kernel and dimensions on each side.
    let (left_base, left_cur) = (taken.clone(), of_cur.clone());
    let only = |b: &CallTime, a: &CallTime| {
        let n_base = base.iter().zip(&left_base).filter(|(o, t)| !**t && same_call(o, a)).count();
        let n_cur =
            cur.iter().zip(&left_cur).filter(|(o, i)| i.is_none() && same_call(b, o)).count();
        n_base == 1 && n_cur == 1
    };
    pair_where(base, cur, &mut taken, &mut of_cur, |b, a| unknown(b, a) && only(b, a));
    let mut pairs: Vec<_> =
        cur.iter().zip(&of_cur).map(|(a, i)| (i.map(|i| &base[i]), Some(a))).collect();
    pairs.extend(base.iter().zip(&taken).filter(|(_, t)| !**t).map(|(b, _)| (Some(b), None)));
    pairs
}

/// Whether another crate's kernel of the name `kernel` is among `calls` (kernel, crate), so
/// that the name does not tell a call of `krate`'s from it.
fn name_shared<'a>(
    kernel: &str,
    krate: Option<&str>,
    mut calls: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> bool {
    krate.is_some() && calls.any(|(k, c)| k == kernel && c.is_some() && c != krate)
}

/// Calls of the same kernel name at the same dimensions.
fn same_call(b: &CallTime, a: &CallTime) -> bool {
    b.kernel == a.kernel && b.shape == a.shape
}

/// Pair each current call not yet paired with the first baseline call not yet taken of the
/// same kernel name and dimensions that `fits` it.
fn pair_where(
    base: &[CallTime],
    cur: &[CallTime],
    taken: &mut [bool],
    of_cur: &mut [Option<usize>],
    fits: impl Fn(&CallTime, &CallTime) -> bool,
) {
    for (j, a) in cur.iter().enumerate() {
        if of_cur[j].is_some() {
            continue;
        }
        let found =
            (0..base.len()).find(|&i| !taken[i] && same_call(&base[i], a) && fits(&base[i], a));
        if let Some(i) = found {
            (taken[i], of_cur[j]) = (true, Some(i));
        }
    }
}

/// Most moved first (by |Δ|), then by kernel, crate and shape so the order is stable.
fn sort_moved(v: &mut [CallDelta]) {
    v.sort_by(|a, b| {
        b.delta_total_us
            .abs()
            .total_cmp(&a.delta_total_us.abs())
            .then_with(|| (&a.kernel, &a.krate, &a.shape.0).cmp(&(&b.kernel, &b.krate, &b.shape.0)))
    });
}

/// A moved call's kernel as the reports name it: its name, with its package (else its Rust
/// crate) when another crate's kernel of that name is called too, as `bench --model` names
/// a model's calls.
pub fn moved_kernel(m: &CallDelta) -> String {
    match m.shared_name {
        true => crate::models::kernel_of_crate(&m.kernel, m.package.as_deref(), m.krate.as_deref()),
        false => m.kernel.clone(),
    }
}

/// A throughput for people: `177,062`.
pub fn tokens(v: f64) -> String {
    let s = format!("{:.0}", v);
    let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}")
}

/// A change in percent with its sign: `-0.21 %`, `+3.00 %`, `0.00 %`.
pub fn pct(v: f64) -> String {
    if v.abs() < 0.005 {
        if v == 0.0 {
            "0.00 %".into()
        } else {
            format!("{v:+.4} %")
        }
    } else {
        format!("{v:+.2} %")
    }
}

/// A shape's dimensions without braces: `heads=8, tokens=256`.
pub fn dims(s: &Shape) -> String {
    s.to_string().trim_start_matches('{').trim_end_matches('}').to_string()
}

/// `before → after` µs per call.
pub fn call_times(m: &CallDelta) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    format!("{} → {}", f(m.before_us), f(m.after_us))
}

/// The parameters, or `before → after` when they changed.
pub fn call_params(m: &CallDelta) -> String {
    match (&m.before_params, &m.after_params) {
        (Some(b), Some(a)) if a == b => a.to_string(),
        (b, a) => format!(
            "{} → {}",
            b.as_ref().map_or("-".into(), |p| p.to_string()),
            a.as_ref().map_or("-".into(), |p| p.to_string())
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::models::CallTime;

    pub fn run(model: &str, rope_us: f64, sim: &str) -> Side {
        let call = |kernel: &str, heads: u64, t: f64, bufs: i64| CallTime {
            krate: None,
            package: None,
            kernel: kernel.into(),
            shape: Shape::new(&[("heads", heads), ("tokens", 256)]),
            params: Params::new().with("bufs", bufs),
            tuned: false,
            stale: None,
            calls: 2,
            time_us: t,
            total_us: 2.0 * (t + 1.0),
            program_hash: format!("{kernel}{heads}{t}"),
            cached: true,
        };
        let bufs = if rope_us > 18.0 { 1 } else { 2 };
        let calls = vec![call("rope", 8, rope_us, bufs), call("add", 1, 7.0, 2)];
        let total_us: f64 = calls.iter().map(|c| c.total_us).sum();
        Side {
            sim_version: sim.into(),
            run: ModelRun {
                model: model.into(),
                shape_name: "tiny".into(),
                shape: Shape::new(&[("layers", 2), ("tokens", 256)]),
                chip: "trn2".into(),
                tokens: 256.0,
                launch_overhead_us: 1.0,
                total_us,
                tokens_per_s: 256.0 / (total_us * 1e-6),
                prompts: 1.0,
                prompts_per_s: 1.0 / (total_us * 1e-6),
                calls,
            },
        }
    }

    pub fn item(model: &str, base_rope: Option<f64>, rope: f64) -> Item {
        Item {
            model: model.into(),
            shape: "tiny".into(),
            chip: "trn2".into(),
            current: Some(run(model, rope, "s1")),
            error: None,
            base: base_rope.map(|r| run(model, r, "s1")),
            base_note: None,
            seconds: None,
        }
    }

    pub fn cfg(threshold_pct: f64) -> Config {
        Config {
            threshold_pct,
            strict: false,
            against: "HEAD~1 (abc)".into(),
            baseline_hint: None,
            basis: None,
        }
    }

    #[test]
    fn a_slower_call_is_a_regression_naming_the_call_and_its_models() {
        let items = [item("qwen3", Some(17.6), 18.6), item("qwen3_naive", Some(17.6), 18.6)];
        let r = judge(&items, &cfg(0.0));
        assert_eq!(r.exit(), Exit::Regression);
        assert_eq!(r.counts.regressions, 2);
        let c = &r.comparisons[0];
        assert!(c.change_pct.unwrap() < 0.0);
        assert_eq!(c.moved.len(), 1, "only RoPE moved: {:?}", c.moved);
        assert_eq!(r.moved.len(), 1);
        let m = &r.moved[0];
        assert_eq!(m.kernel, "rope");
        assert_eq!(m.models, ["qwen3@tiny", "qwen3_naive@tiny"]);
        assert!((m.delta_total_us - 2.0 * 2.0 * 1.0).abs() < 1e-9, "{}", m.delta_total_us);
        // Per call with the 1 µs launch overhead, as `bench` reports a call.
        assert_eq!((m.before_us, m.after_us), (Some(17.6 + 1.0), Some(18.6 + 1.0)));
        assert_eq!(call_params(m), "bufs=2 → bufs=1");
    }

    #[test]
    fn thresholds_improvements_and_what_is_not_compared() {
        // Two RoPE and two add calls, each with the 1 µs launch overhead: the model takes
        // 2·(17.6 + 1) + 2·(7 + 1) = 53.2 µs at the baseline and 2·(18 + 1) + 16 = 54 µs now,
        // so its throughput changes by 53.2 / 54 − 1 = −1.4815 %: a regression past a 1 %
        // threshold, unchanged within 1.5 % (the threshold is a percentage, not a fraction).
        let items = [item("m", Some(17.6), 18.0)];
        let change = judge(&items, &cfg(0.0)).comparisons[0].change_pct.unwrap();
        assert!((change - (53.2 / 54.0 - 1.0) * 100.0).abs() < 1e-9, "{change}");
        assert_eq!(judge(&items, &cfg(1.0)).exit(), Exit::Regression);
        assert_eq!(judge(&items, &cfg(1.5)).exit(), Exit::Ok);
        assert_eq!(judge(&items, &cfg(1.5)).comparisons[0].verdict, Verdict::Unchanged);
        // The other way, 54 / 53.2 − 1 = +1.504 %: an improvement past 1 %, not past 2 %.
        let faster = [item("m", Some(18.0), 17.6)];
        assert_eq!(judge(&faster, &cfg(1.0)).comparisons[0].verdict, Verdict::Improvement);
        assert_eq!(judge(&faster, &cfg(2.0)).comparisons[0].verdict, Verdict::Unchanged);
        // Faster is an improvement, equal is unchanged; neither fails.
        let r = judge(&[item("a", Some(18.6), 17.6), item("b", Some(17.6), 17.6)], &cfg(0.0));
        assert_eq!(r.exit(), Exit::Ok);
        assert_eq!(r.comparisons[0].verdict, Verdict::Improvement);
        assert_eq!(r.comparisons[1].verdict, Verdict::Unchanged);
        assert!(r.comparisons[1].moved.is_empty());
        // No baseline: new. Another simulator: not comparable, said once.
        let mut other = item("c", Some(10.0), 18.6);
        other.base.as_mut().unwrap().sim_version = "s0".into();
        let r = judge(&[item("n", None, 18.6), other.clone(), other], &cfg(0.0));
        assert_eq!(r.exit(), Exit::Ok);
        assert_eq!(r.comparisons[0].verdict, Verdict::New);
        assert_eq!(r.comparisons[1].verdict, Verdict::NotComparable);
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].contains("s0") && r.notes[0].contains("s1"));
        // A model that cannot be evaluated is exit 4, whatever else.
        let mut failed = item("f", Some(17.6), 17.6);
        failed.current = None;
        failed.error = Some("call rope failed".into());
        let r = judge(&[failed, item("g", Some(17.6), 18.6)], &cfg(0.0));
        assert_eq!(r.exit(), Exit::Check);
        assert_eq!(r.comparisons[0].note.as_deref(), Some("call rope failed"));
    }

    #[test]
    fn a_shape_whose_dims_changed_is_not_compared() {
        // The baseline ran `tiny` with 4 layers, now it has 2: tokens/s of two different
        // workloads say nothing about a regression. Far slower now (17.6 → 40 µs) would be a
        // regression at the same dims, so only the shape check keeps this from exit 5.
        let mut grown = item("m", Some(17.6), 40.0);
        grown.base.as_mut().unwrap().run.shape = Shape::new(&[("layers", 4), ("tokens", 256)]);
        let r = judge(&[grown], &cfg(0.0));
        assert_eq!(r.exit(), Exit::Ok);
        assert_eq!(r.comparisons[0].verdict, Verdict::NotComparable);
        assert_eq!(r.comparisons[0].change_pct, None);
        let note = r.comparisons[0].note.as_deref().unwrap();
        assert!(note.contains("layers=4") && note.contains("layers=2"), "{note}");
        // The same slowdown at the same dims is the regression.
        assert_eq!(judge(&[item("m", Some(17.6), 40.0)], &cfg(0.0)).exit(), Exit::Regression);
    }

    #[test]
    fn a_gate_against_a_file_that_compared_nothing_fails_with_exit_2() {
        let file = Config { baseline_hint: Some("b.toml holds chip trn2".into()), ..cfg(0.0) };
        // Every model new: nothing compared, which the message says with the hint.
        let all_new = [item("a", None, 18.6), item("b", None, 18.6)];
        let r = judge(&all_new, &file);
        assert_eq!(r.exit(), Exit::Config);
        assert_eq!(
            r.nothing_compared.as_deref(),
            Some("nothing compared: 2 models without a baseline entry; b.toml holds chip trn2")
        );
        assert_eq!(r.all_notes()[0], r.nothing_compared.clone().unwrap());
        // Against a base revision (no hint) a model the base lacks is new: no failure.
        assert_eq!(judge(&all_new, &cfg(0.0)).exit(), Exit::Ok);
        // One compared is a comparison; a failed model is exit 4 whatever else.
        let r = judge(&[item("a", Some(18.6), 18.6), item("b", None, 18.6)], &file);
        assert_eq!((r.exit(), r.nothing_compared), (Exit::Ok, None));
        let mut failed = item("f", None, 18.6);
        failed.current = None;
        assert_eq!(judge(&[failed, item("b", None, 18.6)], &file).exit(), Exit::Check);
        // Not comparable (another simulator version) is reported, never a failure.
        let mut other = item("c", Some(10.0), 18.6);
        other.base.as_mut().unwrap().sim_version = "s0".into();
        assert_eq!(judge(&[other, item("b", None, 18.6)], &file).exit(), Exit::Ok);
        // Nothing selected at all (an empty partition) is not this failure.
        assert_eq!(judge(&[], &file).exit(), Exit::Ok);
    }

    #[test]
    fn stale_entries_fail_only_when_strict() {
        let mut i = item("m", Some(17.6), 17.6);
        i.current.as_mut().unwrap().run.calls[0].stale = Some("rope changed".into());
        let r = judge(std::slice::from_ref(&i), &cfg(0.0));
        assert_eq!((r.exit(), r.counts.stale), (Exit::Ok, 1));
        let strict = Config { strict: true, ..cfg(0.0) };
        assert_eq!(judge(&[i], &strict).exit(), Exit::Regression);
    }

    /// `run`'s calls with each kernel's Rust crate and package said (as a current harness says
    /// them), and a second `rope` of crate `other` at the same dimensions, `other_us` a call.
    pub fn with_crates(mut side: Side, other_us: Option<f64>) -> Side {
        for c in &mut side.run.calls {
            (c.krate, c.package) = (Some("fixtures".into()), Some("fixture-kernels".into()));
        }
        if let Some(t) = other_us {
            let mut c = side.run.calls[0].clone();
            (c.krate, c.package) = (Some("other".into()), Some("other-kernels".into()));
            (c.time_us, c.total_us) = (t, 2.0 * (t + 1.0));
            c.program_hash = format!("other{t}");
            side.run.total_us += c.total_us;
            side.run.tokens_per_s = side.run.tokens / (side.run.total_us * 1e-6);
            side.run.prompts_per_s = side.run.prompts / (side.run.total_us * 1e-6);
            side.run.calls.push(c);
        }
        side
    }

    /// Calls are matched by kernel, crate and dimensions: of a model calling two crates'
    /// `rope` at one shape, the one that moved is listed, by its package, and the other is
    /// not; each moved one is listed apart. (Matched by kernel and dimensions, the first
    /// `rope` stood for both, and a move of the second went unlisted.)
    #[test]
    fn two_crates_kernels_of_one_name_are_matched_and_listed_apart() {
        let moved = |base: Side, cur: Side| moved_calls(&base.run, &cur.run);
        let m = moved(
            with_crates(run("m", 17.6, "s1"), Some(5.0)),
            with_crates(run("m", 17.6, "s1"), Some(9.0)),
        );
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(
            (m[0].krate.as_deref(), m[0].package.as_deref()),
            (Some("other"), Some("other-kernels"))
        );
        assert_eq!((m[0].before_us, m[0].after_us), (Some(6.0), Some(10.0)));
        assert!(m[0].shared_name);
        assert_eq!(moved_kernel(&m[0]), "rope (other-kernels)");
        // Both moved: two entries, each its crate's times, the one that moved most first.
        let m = moved(
            with_crates(run("m", 17.6, "s1"), Some(5.0)),
            with_crates(run("m", 18.6, "s1"), Some(9.0)),
        );
        let times: Vec<_> =
            m.iter().map(|c| (c.krate.as_deref(), c.before_us, c.after_us)).collect();
        assert_eq!(
            times,
            [(Some("other"), Some(6.0), Some(10.0)), (Some("fixtures"), Some(18.6), Some(19.6))]
        );
        let names: Vec<_> = m.iter().map(moved_kernel).collect();
        assert_eq!(names, ["rope (other-kernels)", "rope (fixture-kernels)"]);
        // A kernel another crate replaced: the one gone, the other new — never one moved.
        let mut swapped = with_crates(run("m", 17.6, "s1"), None);
        swapped.run.calls[0].krate = Some("other".into());
        let m = moved(with_crates(run("m", 17.6, "s1"), None), swapped);
        let sides: Vec<_> = m
            .iter()
            .map(|c| (c.krate.as_deref(), c.before_us.is_some(), c.after_us.is_some()))
            .collect();
        assert_eq!(sides, [(Some("fixtures"), true, false), (Some("other"), false, true)], "{m:?}");
        // The name alone where no other crate's kernel has it.
        let m =
            moved(with_crates(run("m", 17.6, "s1"), None), with_crates(run("m", 18.6, "s1"), None));
        assert_eq!((m.len(), m[0].shared_name, moved_kernel(&m[0])), (1, false, "rope".into()));
    }

    /// A baseline saved before calls recorded their crate: where the name and dimensions tell
    /// the call, it is compared as before; two calls of one name are told by their program
    /// when it is unchanged, then by being the only one left; more left than that cannot be
    /// told apart, and are listed as gone and new rather than paired at random.
    #[test]
    fn calls_without_a_crate_are_matched_where_that_is_unambiguous() {
        let moved = |base: Side, cur: Side| moved_calls(&base.run, &cur.run);
        // One `rope`, one `add`: only the slower RoPE moved, paired with its crate-less self.
        let m = moved(run("m", 17.6, "s1"), with_crates(run("m", 18.6, "s1"), None));
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!((m[0].kernel.as_str(), m[0].krate.as_deref()), ("rope", Some("fixtures")));
        assert_eq!((m[0].before_us, m[0].after_us), (Some(18.6), Some(19.6)));
        assert!(moved(run("m", 17.6, "s1"), with_crates(run("m", 17.6, "s1"), None)).is_empty());
        // Two `rope`s of one shape in the old baseline (no crate): unchanged, nothing moved.
        let old = |other_us| {
            let mut s = with_crates(run("m", 17.6, "s1"), Some(other_us));
            for c in &mut s.run.calls {
                (c.krate, c.package) = (None, None);
            }
            s
        };
        assert!(moved(old(5.0), with_crates(run("m", 17.6, "s1"), Some(5.0))).is_empty());
        // One changed: the unchanged one is told by its program, the changed one is the
        // only one left.
        let m = moved(old(5.0), with_crates(run("m", 17.6, "s1"), Some(9.0)));
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(
            (m[0].krate.as_deref(), m[0].before_us, m[0].after_us),
            (Some("other"), Some(6.0), Some(10.0))
        );
        // Both changed: which was which cannot be told.
        let m = moved(old(5.0), with_crates(run("m", 18.6, "s1"), Some(9.0)));
        let gone = m.iter().filter(|c| c.after_us.is_none() && c.krate.is_none()).count();
        let new = m.iter().filter(|c| c.before_us.is_none() && c.krate.is_some()).count();
        assert_eq!((m.len(), gone, new), (4, 2, 2), "{m:?}");
    }

    /// Over all models, two models each calling one crate's `rope` (so neither model's own
    /// list needs the crate) are two entries of the run's list, each named by its package.
    #[test]
    fn the_runs_moved_list_keeps_two_models_crates_apart() {
        let mut b = item("b", Some(17.6), 18.6);
        for side in [b.current.as_mut().unwrap(), b.base.as_mut().unwrap()] {
            *side = with_crates(side.clone(), None);
            for c in side.run.calls.iter_mut().filter(|c| c.kernel == "rope") {
                (c.krate, c.package) = (Some("other".into()), Some("other-kernels".into()));
            }
        }
        let mut a = item("a", Some(17.6), 18.6);
        for side in [a.current.as_mut().unwrap(), a.base.as_mut().unwrap()] {
            *side = with_crates(side.clone(), None);
        }
        let r = judge(&[a, b], &cfg(0.0));
        assert!(r.comparisons.iter().all(|c| c.moved.len() == 1 && !c.moved[0].shared_name));
        let names: Vec<_> = r.moved.iter().map(|m| (moved_kernel(m), m.models.clone())).collect();
        assert_eq!(
            names,
            [
                ("rope (fixture-kernels)".to_string(), vec!["a@tiny".to_string()]),
                ("rope (other-kernels)".to_string(), vec!["b@tiny".to_string()])
            ]
        );
    }

    #[test]
    fn numbers_for_people() {
        assert_eq!(tokens(177062.4), "177,062");
        assert_eq!(tokens(999.0), "999");
        assert_eq!(tokens(1000.0), "1,000");
        assert_eq!(pct(-0.2131), "-0.21 %");
        assert_eq!(pct(0.0), "0.00 %");
        assert_eq!(pct(3.0), "+3.00 %");
    }
}
