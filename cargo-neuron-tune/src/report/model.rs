//! The report's data: what the store, the tune journals, the tuned databases and the gate
//! history say, gathered into plain values the renderer draws.
//!
//! It exists apart from the rendering so what the report shows is decided (and tested)
//! without HTML, and so it is built from what the tool *stored* — never from anything a
//! command printed. Everything here is a pure function of files: the same store gives the
//! same report.

use crate::commands::tune::{
    meta_path, read_meta_checked, Entry, JournalLines, JournalMeta, ParetoPoint, RunPackage,
};
use crate::convergence::{Convergence, Round};
use crate::eval::chip_key;
use crate::store::Store;
use crate::tuned::TunedRecord;
use neuron_tune_protocol::{BenchResult, ChipSpec, Params, Shape};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One tuning run: its journal and what it was about.
#[derive(Clone, Debug)]
pub struct TuneRun {
    pub journal: PathBuf,
    pub meta: JournalMeta,
    /// The journal's evaluations in order (a torn or foreign line is skipped).
    pub entries: Vec<Entry>,
    /// The decision log of a `--goal` run (its journal's `round` lines), in order; empty
    /// for a run without rounds.
    pub rounds: Vec<Round>,
    /// The journal's lines that could not be trusted (said on stderr: [`TuneRun::damage`]).
    pub unread: Unread,
}

/// A journal's lines that were not used (torn, edited, damaged, another schema), as
/// `crate::store::read_journal` rejects them: `tune --resume` reads journals the same way.
#[derive(Clone, Debug, Default)]
pub struct Unread {
    /// (line number from 1, why) of each line not used.
    pub lines: Vec<(usize, String)>,
    /// How many lines the journal has, used or not.
    pub of: usize,
}

impl TuneRun {
    /// The best correct time after each evaluation (`None` while none was measured), as
    /// `tune` computes it: only `measured` evaluations count (a pruned one is a bound, a
    /// `failed_check` one is wrong).
    pub fn best_so_far(&self) -> Vec<Option<f64>> {
        let mut best: Option<f64> = None;
        self.entries
            .iter()
            .map(|e| {
                if let ("measured", Some(t)) = (e.status.as_str(), e.time_us) {
                    best = Some(best.map_or(t, |b| b.min(t)));
                }
                best
            })
            .collect()
    }

    /// The run's name among `runs` (its target's): `<strategy> seed <seed>`, and what else
    /// tells it from a run of the same strategy and seed — each is a journal of its own: the
    /// Pareto objective, the parameters pinned by `--params` (as given, [`TuneRun::pinned`]),
    /// and the budget when the runs' budgets differ (`default seed 1 (pareto objective,
    /// budget 8)`).
    pub fn label(&self, runs: &[TuneRun]) -> String {
        let m = &self.meta;
        let mut extra = search_of(m, self.pinned());
        if runs.iter().any(|r| r.meta.budget != m.budget) {
            extra.push(format!("budget {}", m.budget));
        }
        with_extra(format!("{} seed {}", m.strategy, m.seed), extra)
    }

    /// The parameters a `--params` run pinned: as given (`bufs=2`), which its meta file
    /// records; for a meta file written before that was recorded, as its journal's name has
    /// them (`…-<strategy>[-pareto]-pinned-<params>-<seed>.jsonl`, sanitized: `bufs-2`).
    pub fn pinned(&self) -> Option<&str> {
        let m = &self.meta;
        if let Some(pins) = m.pinned.as_deref() {
            return Some(pins);
        }
        let name = self.journal.file_name()?.to_str()?;
        let stem = name.strip_suffix(&format!("-{}.jsonl", m.seed))?;
        let pareto = if m.objective == "pareto" { "-pareto" } else { "" };
        let marker = format!("-{}{pareto}-pinned-", crate::commands::tune::sanitize(&m.strategy));
        stem.find(&marker).map(|i| &stem[i + marker.len()..])
    }

    /// What the run's convergence is comparable with: runs of the same search — its
    /// strategy, objective (a Pareto run prunes nothing) and pinned parameters (another
    /// space), the pins compared as journal names have them, so a run whose meta file did not
    /// record them (`bufs-2`) goes with its like (`bufs=2`). Seeds are what a group's band
    /// spans; the budget is not part of it: no strategy reads it, so a smaller budget only
    /// ends the same search sooner.
    pub fn comparable(&self) -> (&str, &str, Option<String>) {
        let pins = self.pinned().map(crate::commands::tune::sanitize);
        (&self.meta.strategy, &self.meta.objective, pins)
    }

    /// The name of a group of comparable runs ([`TuneRun::comparable`]), worded as their
    /// labels are: `strategy random (pareto objective, pinned bufs=2)`; the pins as given
    /// when one of the runs recorded them.
    pub fn group_name(group: &[&TuneRun]) -> String {
        let Some(first) = group.first() else { return String::new() };
        let pins = group.iter().find_map(|r| r.meta.pinned.as_deref()).or(first.pinned());
        with_extra(format!("strategy {}", first.meta.strategy), search_of(&first.meta, pins))
    }

    /// What is wrong with the journal, when some of its lines were not used: the file, the
    /// first such line and why, and what the report shows instead (the evaluations it could
    /// read). A run killed mid-write leaves its last line cut short, which `tune --resume`
    /// expects: said as such. `None` when every line was read.
    pub fn damage(&self) -> Option<String> {
        let Unread { lines, of } = &self.unread;
        let (first, why) = lines.first()?;
        let shown = crate::convergence::count(self.entries.len(), "evaluation");
        let journal = self.journal.display();
        // The one line not used is the last, and not even JSON: cut short mid-write.
        if lines.len() == 1 && first == of && why.starts_with("not JSON") {
            return Some(format!(
                "{journal}: its last line (line {first}) is cut short (its run was killed while \
                 writing it, or the file was truncated); the report shows the run with the \
                 {shown} before it"
            ));
        }
        let more = match lines.len() {
            1 => String::new(),
            2 => ", and 1 more line".to_string(),
            n => format!(", and {} more lines", n - 1),
        };
        Some(format!(
            "{journal}: line {first} not used ({why}){more}; the report shows the run with the \
             {shown} it could read"
        ))
    }

    /// The run's convergence figures, as `tune` printed them with its result: invalid
    /// counts failed checks and rolled-back winners too, and faults of the kernel code
    /// apart (read from each evaluation's error, so journals written before faults were
    /// counted apart are read the same way).
    pub fn convergence(&self) -> Convergence {
        let count = |f: &dyn Fn(&str, Option<&str>) -> bool| {
            self.entries.iter().filter(|e| f(&e.status, e.error.as_deref())).count()
        };
        let invalid = count(&crate::convergence::is_invalid);
        let faults = count(&crate::convergence::is_fault);
        Convergence {
            // A run that searched its whole space: its meta file says so (written at the end;
            // which configurations the kernel's rule refused is not journaled).
            whole_space: self.meta.whole_space,
            default_invalid: self.meta.default_refused.is_some(),
            ..crate::convergence::analyze(
                &self.best_so_far(),
                count(&|s, _| s == "pruned"),
                invalid,
                faults,
            )
        }
    }

    /// The convergence figures in words, as `tune` said them with its result: a run that
    /// evaluated nothing searched nothing, one whose space holds only the default had nothing
    /// to search, and one that searched its whole space says so rather than judge how it
    /// converged.
    pub fn figures(&self) -> String {
        let only_default = self.meta.whole_space == Some(1)
            && self
                .meta
                .default
                .as_ref()
                .is_some_and(|d| self.entries.iter().all(|e| e.params == d.params));
        match self.entries.len() {
            0 => "nothing searched".into(),
            _ if only_default => "its space holds only the default: nothing to search".into(),
            _ => crate::convergence::describe(&self.convergence()),
        }
    }
}

/// What tells a run's search from another of its strategy: its objective when not time,
/// the parameters it pinned.
fn search_of(m: &JournalMeta, pinned: Option<&str>) -> Vec<String> {
    let mut extra = Vec::new();
    if m.objective != "time" {
        extra.push(format!("{} objective", m.objective));
    }
    if let Some(pins) = pinned {
        extra.push(format!("pinned {pins}"));
    }
    extra
}

/// `name (a, b)`, or `name` alone.
fn with_extra(name: String, extra: Vec<String>) -> String {
    match extra.is_empty() {
        true => name,
        false => format!("{name} ({})", extra.join(", ")),
    }
}

/// A variant the report shows in full (its engines and its trace).
#[derive(Clone, Debug)]
pub struct Shown {
    pub params: Params,
    pub time_us: f64,
    pub program_hash: String,
    /// Its stored profile (kind `profile` in the store, with the Perfetto trace's text);
    /// `report` profiles the shown variants that have none before building the data.
    pub profile: Option<BenchResult>,
}

impl Shown {
    /// Busy percent of each engine (TensorE, VectorE, ScalarE, GpSimdE, DMA), from the
    /// profile.
    pub fn engines(&self) -> Option<[(&'static str, f64); 5]> {
        let p = self.profile.as_ref()?.profile.as_ref()?;
        Some([
            ("TensorE", p.tensor_engine_active_time_percent),
            ("VectorE", p.vector_engine_active_time_percent),
            ("ScalarE", p.scalar_engine_active_time_percent),
            ("GpSimdE", p.gpsimd_engine_active_time_percent),
            ("DMA", p.dma_active_time_percent),
        ])
    }
}

/// One evaluated variant on the roofline: FLOPs per HBM byte and achieved TFLOP/s (kernel
/// time, without launch overhead) per physical core, from its stored bench result: the
/// roofs are one core's, so a launch over two cores (SPMD) counts half its rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RooflinePoint {
    pub intensity: f64,
    pub tflops: f64,
}

/// One (package, kernel, shape, chip) with every run that tuned it.
#[derive(Clone, Debug)]
pub struct Target {
    /// The kernel's package (`None`: runs journaled before their package was recorded,
    /// which no one selected crate could be given: see `packages::pick`).
    pub package: Option<RunPackage>,
    pub kernel: String,
    pub shape: String,
    pub dims: Shape,
    pub chip: ChipSpec,
    pub sim_version: String,
    pub runs: Vec<TuneRun>,
    /// The fastest correct variant any run measured (the default included).
    pub best: Option<Shown>,
    pub default: Option<Shown>,
    /// Distinct measured programs (one point per program hash).
    pub roofline: Vec<RooflinePoint>,
    /// The chip's peak TFLOP/s and HBM GB/s per core (the roofs).
    pub peak_tflops: f64,
    pub hbm_gbps: f64,
}

impl Target {
    /// The last Pareto run's front, if any run was one.
    pub fn front(&self) -> Option<&[ParetoPoint]> {
        self.runs.iter().rev().find_map(|r| r.meta.front.as_deref())
    }
}

/// One model at one shape on one chip, through the gate runs that measured it.
#[derive(Clone, Debug, PartialEq)]
pub struct GateSeries {
    pub model: String,
    pub shape: String,
    pub chip: String,
    /// (run ordinal from 1 over all gate runs, tokens/s).
    pub points: Vec<(usize, f64)>,
}

/// A tuned record and the package whose `neuron-tune.tuned.toml` holds it: records do not
/// name their package (the file is the package's), and two packages may have same-named
/// kernels, each with its own record at the same chip and dimensions.
#[derive(Clone, Debug)]
pub struct PackageRecord {
    pub package: String,
    pub record: TunedRecord,
}

/// Everything the report shows.
#[derive(Clone, Debug)]
pub struct ReportData {
    pub targets: Vec<Target>,
    /// The tuned databases' records with the package whose database holds each, sorted by
    /// kernel, package, chip, shape.
    pub tuned: Vec<PackageRecord>,
    pub gate: Vec<GateSeries>,
    /// `--chip`: what the page is narrowed to (`None`: every chip).
    pub chip: Option<String>,
    /// The chips `--chip` left out that the selected packages' models have gate runs on,
    /// sorted, each once: the page says they exist rather than that there are none.
    pub gate_other_chips: Vec<String>,
}

/// The tune runs in the store, and those that cannot be shown.
#[derive(Debug, Default)]
pub struct Runs {
    /// Every run whose journal has a meta file that reads, sorted by (kernel, shape, chip,
    /// strategy, seed).
    pub runs: Vec<TuneRun>,
    /// Runs left out because a file of theirs cannot be trusted or read: (the journal, the
    /// file at fault and what is wrong with it). A meta file that exists and does not read
    /// (edited, damaged, another schema) is one: which run its journal is of cannot be told.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Every tune run whose journal has a meta file. Journals written before meta files existed
/// say too little and are skipped (silently: they are expected); a meta file or journal
/// that cannot be read is skipped too, and said ([`Runs::skipped`]).
pub fn read_runs(store_root: &Path) -> Runs {
    let dir = store_root.join("journals");
    let mut read = Runs::default();
    let Ok(entries) = std::fs::read_dir(&dir) else { return read };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    paths.sort();
    for journal in paths {
        let name = journal.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if !(name.starts_with("tune-") && name.ends_with(".jsonl")) {
            continue;
        }
        let meta = match read_meta_checked(&journal) {
            Ok(Some(meta)) => meta,
            Ok(None) => continue,
            Err(why) => {
                let why = format!("{}: not used ({why})", meta_path(&journal).display());
                read.skipped.push((journal, why));
                continue;
            }
        };
        // Only sealed lines are trusted (a damaged or torn line is never shown).
        let lines = match crate::store::read_journal(&journal) {
            Ok(lines) => lines,
            Err(e) => {
                let why = format!("{e:#}");
                read.skipped.push((journal, why));
                continue;
            }
        };
        let unread = Unread { of: lines.lines.len() + lines.rejected.len(), lines: lines.rejected };
        let lines = JournalLines::of(lines.lines);
        let entries = lines.entries_after_roll_backs();
        let rounds = lines.rounds;
        read.runs.push(TuneRun { journal, meta, entries, rounds, unread });
    }
    let runs = &mut read.runs;
    runs.sort_by(|a, b| {
        let k = |r: &TuneRun| {
            (
                r.meta.kernel.clone(),
                r.meta.shape.clone(),
                r.meta.chip.name.clone(),
                r.meta.strategy.clone(),
                r.meta.seed,
            )
        };
        k(a).cmp(&k(b))
    });
    read
}

/// The gate history (`journals/gate-history.jsonl`): one series per (model, shape, chip),
/// runs numbered in the order they were appended.
pub fn read_gate_history(store_root: &Path) -> Vec<GateSeries> {
    #[derive(serde::Deserialize)]
    struct Line {
        run: String,
        model: String,
        shape: String,
        chip: String,
        tokens_per_s: f64,
    }
    let lines = crate::store::read_journal(&store_root.join("journals/gate-history.jsonl"))
        .map(|j| j.lines)
        .unwrap_or_default();
    let mut runs: Vec<String> = Vec::new();
    let mut series: BTreeMap<(String, String, String), Vec<(usize, f64)>> = BTreeMap::new();
    for l in lines.into_iter().filter_map(|l| serde_json::from_value::<Line>(l).ok()) {
        if runs.last() != Some(&l.run) {
            runs.push(l.run.clone());
        }
        series.entry((l.model, l.shape, l.chip)).or_default().push((runs.len(), l.tokens_per_s));
    }
    series
        .into_iter()
        .map(|((model, shape, chip), points)| GateSeries { model, shape, chip, points })
        .collect()
}

/// What the gate history holds that [`read_gate_history`] cannot use — lines that are not
/// JSON, not sealed, of another schema or edited; a file that cannot be read — said on
/// stderr as a tune journal's damage is, never left out in silence. The next gate run sets
/// such lines aside (the history is never resumed), so this is said only of damage since.
pub fn gate_history_damage(store_root: &Path) -> Option<String> {
    let path = store_root.join("journals/gate-history.jsonl");
    let j = match crate::store::read_journal(&path) {
        Ok(j) => j,
        Err(e) => {
            return Some(format!("{}: {e:#}; the report shows no gate history", path.display()))
        }
    };
    let damaged = j.damaged();
    let Some((first, why)) = damaged.first() else {
        // Only a newer tool's lines: not damage, and no gate run of this tool moves them.
        let (first, why) = j.rejected.first()?;
        return Some(format!(
            "{}: {} from a newer cargo-neuron-tune not shown (line {first}: {why})",
            path.display(),
            crate::convergence::count(j.newer.len(), "line")
        ));
    };
    let more = match damaged.len() {
        1 => String::new(),
        2 => ", and 1 more line".to_string(),
        n => format!(", and {} more lines", n - 1),
    };
    Some(format!(
        "{}: line {first} not used ({why}){more}; the gate history shows the runs it could \
         read (the next gate run moves the line aside)",
        path.display()
    ))
}

/// The measured result of a program on a chip, from the store.
pub fn stored_bench(
    store: &Store,
    hash: &str,
    chip: &ChipSpec,
    sim_version: &str,
    what: &str,
) -> Option<BenchResult> {
    store.get(what, &Store::key_for(hash, &chip_key(chip), sim_version, what))
}

/// Group runs into targets; find each target's best and default and its roofline points.
pub fn build(store: &Store, runs: Vec<TuneRun>, tuned: Vec<PackageRecord>) -> ReportData {
    let gate = read_gate_history(store.root());
    let mut targets: Vec<Target> = Vec::new();
    for run in runs {
        let m = &run.meta;
        let same = |t: &Target| {
            t.package == m.package
                && t.kernel == m.kernel
                && t.shape == m.shape
                && t.chip == m.chip
                && t.dims == m.dims
        };
        if !targets.iter().any(same) {
            let chip = crate::select::chip_of(&m.chip);
            targets.push(Target {
                package: m.package.clone(),
                kernel: m.kernel.clone(),
                shape: m.shape.clone(),
                dims: m.dims.clone(),
                chip: m.chip.clone(),
                sim_version: m.sim_version.clone(),
                runs: Vec::new(),
                best: None,
                default: None,
                roofline: Vec::new(),
                peak_tflops: chip.as_ref().map_or(0.0, |c| c.peak_bf16_flops() / 1e12),
                hbm_gbps: chip.as_ref().map_or(0.0, |c| c.memory.hbm_gbps_per_core),
            });
        }
        let t = targets.iter_mut().find(|t| same(t)).expect("just added");
        t.runs.push(run);
    }
    for t in &mut targets {
        let shown = |e: &Entry| {
            Some(Shown {
                params: e.params.clone(),
                time_us: e.time_us?,
                program_hash: e.program_hash.clone()?,
                profile: None,
            })
        };
        let measured = |e: &&Entry| e.status == "measured";
        t.default = t.runs.iter().rev().find_map(|r| r.meta.default.as_ref().and_then(shown));
        t.best = t
            .runs
            .iter()
            // The default first: of equally fast variants it is the one shown, as `tune`
            // keeps the default on a tie.
            .flat_map(|r| r.meta.default.iter().chain(&r.entries))
            .filter(measured)
            .filter_map(shown)
            .min_by(|a, b| a.time_us.total_cmp(&b.time_us));
        for s in [&mut t.best, &mut t.default].into_iter().flatten() {
            // A stored profile whose file is far over the trace limit (an earlier version
            // stored its trace: 1.3 GB for attention_flash at qwen3's shape, 4.5 GB of
            // memory to read) is not read: `report` profiles the variant again, without
            // the trace, and stores that in its place.
            let key =
                Store::key_for(&s.program_hash, &chip_key(&t.chip), &t.sim_version, "profile");
            let huge = store
                .entry_len("profile", &key)
                .is_some_and(|len| len > 2 * super::TRACE_MAX_BYTES as u64);
            s.profile = match huge {
                true => None,
                false => stored_bench(store, &s.program_hash, &t.chip, &t.sim_version, "profile"),
            };
            // A trace over the report's limit (one stored by an earlier version) is not
            // kept in memory, nor written: the page says how to get it.
            if let Some(p) = s.profile.as_mut().filter(|p| !super::trace_fits(p)) {
                p.trace = None;
            }
        }
        let mut hashes: Vec<&str> = t
            .runs
            .iter()
            .flat_map(|r| r.entries.iter().chain(&r.meta.default))
            .filter(measured)
            .filter_map(|e| e.program_hash.as_deref())
            .collect();
        hashes.sort_unstable();
        hashes.dedup();
        t.roofline = hashes
            .iter()
            .filter_map(|h| stored_bench(store, h, &t.chip, &t.sim_version, "bench"))
            .filter(|b| b.hbm_bytes > 0 && b.kernel_time_us > 0.0)
            .map(|b| RooflinePoint {
                intensity: b.hardware_flops / b.hbm_bytes as f64,
                tflops: b.hardware_flops
                    / (b.kernel_time_us * 1e-6)
                    / 1e12
                    / f64::from(b.physical_cores.unwrap_or(1)),
            })
            .collect();
    }
    let mut tuned = tuned;
    fn key(p: &PackageRecord) -> (&str, &str, &str, &str) {
        (&p.record.kernel, &p.package, &p.record.chip, &p.record.shape)
    }
    tuned.sort_by(|a, b| key(a).cmp(&key(b)));
    ReportData { targets, tuned, gate, chip: None, gate_other_chips: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neuron_tune_protocol::ParamValue;

    fn entry(n: usize, status: &str, t: Option<f64>) -> Entry {
        let mut p = Params::default();
        p.0.insert("tile".into(), ParamValue::Int(n as i64));
        Entry {
            n,
            params: p,
            status: status.into(),
            time_us: t,
            program_hash: Some(format!("h{n}")),
            sbuf_bytes: None,
            energy_uj: None,
            bottleneck: None,
            error: None,
            check: None,
        }
    }

    #[test]
    fn best_so_far_counts_only_measured_variants() {
        let run = TuneRun {
            journal: PathBuf::from("j"),
            meta: serde_json::from_value(serde_json::json!({
                "kernel": "k", "shape": "s", "dims": {"n": 4}, "chip": {"name": "trn2"},
                "strategy": "random", "seed": 1, "budget": 5, "objective": "time",
                "sim_version": "v", "default": null
            }))
            .unwrap(),
            entries: vec![
                entry(0, "invalid", None),
                entry(1, "measured", Some(9.0)),
                // A pruned variant's value is its lower bound, not a time.
                entry(2, "pruned", Some(1.0)),
                // Faster but wrong.
                entry(3, "failed_check", Some(2.0)),
                entry(4, "measured", Some(7.5)),
                entry(5, "measured", Some(8.0)),
            ],
            rounds: vec![],
            unread: Unread::default(),
        };
        assert_eq!(
            run.best_so_far(),
            [None, Some(9.0), Some(9.0), Some(9.0), Some(7.5), Some(7.5)]
        );
        // The figures `tune` prints: 7.5 is within 95 % of itself first at evaluation 5;
        // one of six pruned, two invalid (the failed check counts).
        let c = run.convergence();
        assert_eq!(c.evaluations_to_95, Some(5));
        assert_eq!((c.pruned_fraction, c.invalid_fraction), (1.0 / 6.0, 2.0 / 6.0));
        // A winner rolled back later (its journal's `rolled_back` line) is not a time either:
        // without 7.5 the best stays 9 until the 8 of evaluation 5.
        let mut rolled = run.clone();
        rolled.entries[4].status = "rolled_back".into();
        assert_eq!(rolled.best_so_far()[4..], [Some(9.0), Some(8.0)][..]);
        assert_eq!(rolled.convergence().invalid_fraction, 3.0 / 6.0);
    }

    #[test]
    fn a_run_that_searched_its_whole_space_has_the_figures_tune_gave_it() {
        let meta = |whole_space: Option<u64>, default: serde_json::Value| {
            serde_json::from_value::<JournalMeta>(serde_json::json!({
                "kernel": "k", "shape": "s", "dims": {"n": 4}, "chip": {"name": "trn2"},
                "strategy": "grid", "seed": 1, "budget": 40, "objective": "time",
                "sim_version": "v", "default": default, "whole_space": whole_space,
            }))
            .unwrap()
        };
        // Nine variants, the best found last but one: 8 % better than before the window.
        let times = [9.0, 9.5, 9.2, 9.9, 9.8, 9.6, 9.7, 8.28, 8.5];
        let run = |whole_space| TuneRun {
            journal: PathBuf::from("j"),
            meta: meta(whole_space, serde_json::Value::Null),
            entries: times
                .iter()
                .enumerate()
                .map(|(n, t)| entry(n, "measured", Some(*t)))
                .collect(),
            rounds: vec![],
            unread: Unread::default(),
        };
        // The space tried whole: its best is the space's best, there is no convergence to
        // judge, whatever the window says.
        assert_eq!(
            run(Some(9)).figures(),
            "searched the whole space (9 variants); 0 % pruned, 0 % invalid"
        );
        // Not recorded (or not the whole space): the figures of a search.
        assert!(run(None).figures().starts_with("95 % of the final best after 8 evaluations; its best improved 8.0 % over the last 4 evaluations"), "{}", run(None).figures());
        // A space of one configuration, the default: nothing to search.
        let default = serde_json::to_value(entry(0, "measured", Some(9.0))).unwrap();
        let only = TuneRun {
            meta: meta(Some(1), default.clone()),
            entries: vec![entry(0, "measured", Some(9.0))],
            ..run(None)
        };
        assert_eq!(only.figures(), "its space holds only the default: nothing to search");
        // One configuration that is not the default (pinned away from it): searched whole.
        let mut pinned = only.clone();
        pinned.entries[0].params.0.insert("tile".into(), ParamValue::Int(7));
        assert!(pinned.figures().starts_with("searched the whole space (1 variant);"));
        // Nothing evaluated.
        assert_eq!(TuneRun { entries: vec![], ..only }.figures(), "nothing searched");
        // A default a rule refused is said, as `tune` said it, not hidden behind "0 %".
        let mut refused = run(Some(9));
        refused.meta.default_refused = Some("SBUF capacity exceeded".into());
        assert_eq!(
            refused.figures(),
            "searched the whole space (9 variants); 0 % pruned, none invalid but the default \
             itself"
        );
        // Meta files written before the field was recorded read as not known.
        let old: JournalMeta = serde_json::from_value(serde_json::json!({
            "kernel": "k", "shape": "s", "dims": {"n": 4}, "chip": {"name": "trn2"},
            "strategy": "grid", "seed": 1, "budget": 40, "objective": "time",
            "sim_version": "v", "default": null,
        }))
        .unwrap();
        assert_eq!(old.whole_space, None);
    }

    fn bench(hash: &str, kernel_us: f64, flops: f64, hbm: u64) -> BenchResult {
        BenchResult {
            cycles: 0,
            time_us: kernel_us + 10.0,
            kernel_time_us: kernel_us,
            tflops: 0.0,
            bottleneck: String::new(),
            bottleneck_summary: String::new(),
            program_hash: hash.into(),
            instruction_count: 0,
            shape: Shape::default(),
            work: Default::default(),
            sbuf_bytes_per_partition: 0,
            hbm_bytes: hbm,
            hardware_flops: flops,
            physical_cores: None,
            profile: None,
            trace: None,
        }
    }

    #[test]
    fn a_target_gathers_its_runs_best_default_and_roofline_from_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_, _| {}).unwrap();
        let chip = ChipSpec::builtin("trn2");
        let meta = |seed: u64, default_t: f64| {
            serde_json::json!({
                "kernel": "k", "shape": "small", "dims": {"n": 4}, "chip": chip,
                "strategy": "random", "seed": seed, "budget": 3, "objective": "time",
                "sim_version": "v1",
                "default": {"n": 0, "params": {}, "status": "measured", "time_us": default_t,
                            "program_hash": "hd"},
            })
        };
        let journals = store.root().join("journals");
        std::fs::create_dir_all(&journals).unwrap();
        for (seed, lines) in [
            (1u64, vec![entry(0, "measured", Some(9.0)), entry(1, "measured", Some(6.0))]),
            // Seed 2 found the fastest; its last line is torn (a killed run).
            (2, vec![entry(2, "pruned", Some(3.0)), entry(3, "measured", Some(5.0))]),
        ] {
            let name = format!("tune-k-small-trn2-random-{seed}");
            let mut j = PathBuf::new();
            for e in &lines {
                j = store.append_journal(&name, &serde_json::to_value(e).unwrap()).unwrap();
            }
            let mut f = std::fs::OpenOptions::new().append(true).open(&j).unwrap();
            std::io::Write::write_all(&mut f, b"{\"n\": 9, \"par").unwrap();
            // Sealed as `tune` writes it.
            let mut m = meta(seed, 8.0);
            m["schema"] = 1.into();
            crate::seal::seal_json(&mut m);
            std::fs::write(crate::commands::tune::meta_path(&j), m.to_string()).unwrap();
        }
        // A journal without meta is not shown, and not said (journals of before meta files).
        std::fs::write(journals.join("tune-old-x-trn2-random-1.jsonl"), "").unwrap();
        // A meta file that does not read: its run is not shown, and that is said.
        let garbled = journals.join("tune-k-small-trn2-random-3.jsonl");
        std::fs::write(&garbled, "").unwrap();
        std::fs::write(crate::commands::tune::meta_path(&garbled), "{garbage").unwrap();
        // Bench results of two of the measured programs (the others are not in the store),
        // and one of another simulator version that must not be read.
        let put = |hash: &str, sim: &str, b: &BenchResult| {
            let key = Store::key_for(hash, &chip_key(&chip), sim, "bench");
            store.put("bench", &key, b).unwrap();
        };
        put("h1", "v1", &bench("h1", 2.0, 4e6, 1000));
        put("hd", "v1", &bench("hd", 8.0, 4e6, 4000));
        put("h3", "v0", &bench("h3", 1.0, 1e6, 10));
        // A launch over two cores: 8e6 FLOP in 2 µs is 2 TFLOP/s per core under one core's
        // roofs, at the same 4000 FLOP/B.
        put("h0", "v1", &BenchResult { physical_cores: Some(2), ..bench("h0", 2.0, 8e6, 2000) });

        let read = read_runs(store.root());
        assert_eq!(read.skipped.len(), 1, "{:?}", read.skipped);
        let (journal, why) = &read.skipped[0];
        assert_eq!(journal, &garbled);
        assert!(
            why.starts_with(&format!(
                "{}.meta.json: not used (not JSON",
                journals.join("tune-k-small-trn2-random-3").display()
            )),
            "{why}"
        );
        let runs = read.runs;
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1].entries.len(), 2, "the torn line is skipped");
        // Seed 2's last line, cut short, is said as a killed run's, with what is shown.
        let damage = runs[1].damage().unwrap();
        assert!(damage.contains("-2.jsonl: its last line (line 3) is cut short"), "{damage}");
        assert!(damage.ends_with("the report shows the run with the 2 evaluations before it"));
        // A line damaged inside the journal (not the last, or not a cut) is said with why.
        let mut edited = runs[1].clone();
        edited.unread = Unread { lines: vec![(1, "checksum mismatch".into())], of: 3 };
        let damage = edited.damage().unwrap();
        assert!(damage.contains("-2.jsonl: line 1 not used (checksum mismatch); the report shows the run with the 2 evaluations it could read"), "{damage}");
        edited.unread.lines.push((3, "not JSON".into()));
        assert!(edited
            .damage()
            .unwrap()
            .contains("line 1 not used (checksum mismatch), and 1 more line;"));
        let data = build(&store, runs, Vec::new());
        assert_eq!(data.targets.len(), 1);
        let t = &data.targets[0];
        assert_eq!(t.runs.len(), 2);
        // The pruned 3.0 is a bound, not a time: the best is seed 2's measured 5.0.
        assert_eq!(
            t.best.as_ref().map(|b| (b.time_us, b.program_hash.as_str())),
            Some((5.0, "h3"))
        );
        assert_eq!(t.default.as_ref().map(|d| d.time_us), Some(8.0));
        // h1: 4e6 FLOP / 1000 B = 4000 FLOP/B at 4e6 FLOP / 2 µs = 2 TFLOP/s; hd: 1000
        // FLOP/B at 0.5 TFLOP/s (kernel time, not the 10 µs of launch overhead).
        let mut pts: Vec<(f64, f64)> = t.roofline.iter().map(|p| (p.intensity, p.tflops)).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(pts, [(1000.0, 0.5), (4000.0, 2.0), (4000.0, 2.0)]);
        // trn2's roofs: 128 x 128 x 2 FLOP x its TensorE clock; its HBM per core.
        let c = neuron_sim::Chip::builtin("trn2").unwrap();
        assert_eq!(t.peak_tflops, 128.0 * 128.0 * 2.0 * c.clocks.tensor_ghz * 1e9 / 1e12);
        assert_eq!(t.hbm_gbps, c.memory.hbm_gbps_per_core);
        // A default as fast as the best is the one shown, as `tune` keeps it on a tie.
        let mut tie = read_runs(store.root()).runs;
        for r in &mut tie {
            r.meta.default.as_mut().unwrap().time_us = Some(5.0);
        }
        let data = build(&store, tie, Vec::new());
        let best = data.targets[0].best.as_ref().map(|b| b.program_hash.as_str());
        assert_eq!(best, Some("hd"));
        // Stored profiles: a trace over the report's limit (an earlier version stored it)
        // is not kept; one within it is.
        let profile = |hash: &str, instructions: u64| {
            let mut b = bench(hash, 1.0, 1.0, 1);
            (b.instruction_count, b.trace) = (instructions, Some("{\"traceEvents\":[]}".into()));
            let key = Store::key_for(hash, &chip_key(&chip), "v1", "profile");
            store.put("profile", &key, &b).unwrap();
        };
        profile("h3", super::super::TRACE_MAX_INSTRUCTIONS + 1);
        profile("hd", super::super::TRACE_MAX_INSTRUCTIONS);
        let data = build(&store, read_runs(store.root()).runs, Vec::new());
        let t = &data.targets[0];
        let trace = |s: &Option<Shown>| {
            let p = s.as_ref().unwrap().profile.as_ref().expect("profiled");
            (p.program_hash.clone(), p.trace.is_some())
        };
        assert_eq!(trace(&t.best), ("h3".to_string(), false));
        assert_eq!(trace(&t.default), ("hd".to_string(), true));
    }

    #[test]
    fn gate_history_numbers_runs_in_append_order_per_model() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("journals");
        std::fs::create_dir_all(&j).unwrap();
        let line = |run: &str, model: &str, tps: f64| {
            format!(
                "{{\"run\":\"{run}\",\"model\":\"{model}\",\"shape\":\"s\",\"chip\":\"trn2\",\"tokens_per_s\":{tps},\"total_us\":1.0}}\n"
            )
        };
        let history = j.join("gate-history.jsonl");
        for (i, l) in [
            line("100-1", "a", 10.0),
            line("100-1", "b", 20.0),
            line("200-7", "a", 11.0),
            line("300-2", "b", 21.0),
        ]
        .iter()
        .enumerate()
        {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            crate::store::append_journal(dir.path(), "gate-history", &v).unwrap();
            if i == 1 {
                // A torn line (a killed run) is never read.
                let mut f = std::fs::OpenOptions::new().append(true).open(&history).unwrap();
                std::io::Write::write_all(&mut f, b"{torn\n").unwrap();
            }
        }
        let s = read_gate_history(dir.path());
        let damage = gate_history_damage(dir.path()).expect("the torn line is said");
        assert!(damage.contains("gate-history.jsonl: line 3 not used (not JSON"), "{damage}");
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].model.as_str(), s[0].points.clone()), ("a", vec![(1, 10.0), (2, 11.0)]));
        assert_eq!((s[1].model.as_str(), s[1].points.clone()), ("b", vec![(1, 20.0), (3, 21.0)]));
    }
}
