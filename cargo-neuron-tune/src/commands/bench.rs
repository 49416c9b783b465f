//! `bench`: the timing model on the selected variants; unchanged programs come from the
//! store. Events stream as results arrive; the tables come at the end.

use super::{open_store, report_failure};
use crate::cargo::CargoFlags;
use crate::cli::{PartitionOpts, Selection};
use crate::eval::{bench_stream, Measured, Outcome};
use crate::exit::{Exit, Failure};
use crate::models;
use crate::output::{Event, Reporter, Summary};
use crate::partition::keeps;
use crate::select::{chip_spec, Variant};
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::{ErrorInfo, ErrorKind, Params};
use serde::{Deserialize, Serialize};

pub fn run(
    cargo: &CargoFlags,
    s: &Selection,
    force: bool,
    parts: &PartitionOpts,
    ctx: &Ctx,
) -> Result<Exit, Failure> {
    // A chip name or file is checked before anything is built.
    let chip = chip_spec(&s.chip)?;
    let mut ws = Workspace::open(cargo, ctx)?;
    // Without --tuned bench measures the parameters selected, never the tuned ones, but a
    // damaged tuned database is said all the same: the commands that use it refuse it.
    if !s.tuned {
        super::tuned_to_mention(
            &ws.tuned,
            &ctx.out,
            "bench measures the parameters selected (the defaults, --params, --all-variants), \
             never the tuned ones, so its figures do not depend on it; `tune`, `list`, `bench \
             --model`, `--tuned` and `gate` refuse the file until it is repaired",
        );
    }
    let store = open_store(&ws.target_dir, &ctx.out)?;
    let at_models = crate::model_calls::checked_selection(&mut ws, s, &chip, &ctx.out)?;
    let out = &ctx.out;
    let mut invalid = 0;
    let mut rows: Vec<(usize, Variant, Measured)> = Vec::new();
    // Variants whose kernel code panicked, crashed or hung: rows of the results table too.
    let mut failed: Vec<(usize, FailedVariant)> = Vec::new();
    let mut defaults: Vec<(String, Params)> = Vec::new();
    // Where the crate's variants start in the whole run's grid (every partition's).
    let mut offset = 0;
    for (i, c) in ws.crates.iter_mut().enumerate() {
        let mut selected = super::select_in_crate(&ws.tuned, s, (i, c), &chip.name, &at_models)?;
        let keep = |k: &str, sn: &str, sh: &neuron_tune_protocol::Shape| {
            keeps(parts.partition, &item_name(k, sn, sh))
        };
        let (places, whole) = grid_places(&selected, offset, keep);
        for k in &mut selected {
            let name = k.kernel.name.clone();
            k.retain_shapes(|sn, sh| keep(&name, sn, sh));
        }
        crate::select::note_untuned(&selected, &chip.name, out);
        defaults
            .extend(selected.iter().map(|k| (k.kernel.name.clone(), k.kernel.defaults.clone())));
        let total: u64 = selected.iter().map(|k| k.count()).sum();
        let bar = progress(out, total);
        let variants = selected.iter().flat_map(|k| k.variants());
        let sim = c.list.sim_version.clone();
        bench_stream(&mut c.pool, &sim, variants, &chip, &store, force, out, &mut |o: Outcome| {
            bar.inc(1);
            let place = grid_place(&places, o.index);
            match o.result {
                Ok(m) => {
                    out.event(&bench_event(&o.variant, &chip.name, &m));
                    rows.push((place, o.variant, m));
                }
                Err(e) => {
                    if bar.suspend(|| report_failure(out, &o.variant, &chip.name, &e)) {
                        invalid += 1;
                    } else {
                        failed.push((place, FailedVariant::new(o.variant, &e)));
                    }
                }
            }
        })?;
        bar.finish_and_clear();
        offset = whole;
    }
    rows.sort_by_key(|r| r.0);
    let crashed = failed.len();
    out.flush_invalid();
    if let Some(path) = &parts.results {
        let results = super::merge::Results::Bench {
            partition: parts.partition,
            run: s.describe(),
            chip: chip.name.clone(),
            rows: rows.iter().map(|(_, v, m)| (v.clone(), m.clone())).collect(),
            row_index: rows.iter().map(|r| r.0).collect(),
            failed: failed.iter().map(|(_, f)| f.clone()).collect(),
            failed_index: failed.iter().map(|f| f.0).collect(),
            defaults: defaults.clone(),
            invalid,
            crashed,
        };
        super::merge::write_results(path, &results)?;
        out.status(format!("   Wrote {}", path.display()));
    }
    let counts = (invalid, crashed);
    Ok(report(out, &chip.name, &rows, &failed, &defaults, counts, Some(store.root())))
}

/// Of the selection's work items (kernel shapes, shape-major within a kernel as
/// [`crate::select::KernelSelection::variants`] walks them), those `keep` keeps, each as
/// (its first variant's index in the stream of kept variants, its index in the whole grid —
/// the unpartitioned run's order, starting at `offset` —, its variants); and the grid index
/// after the selection. So each partition's rows carry their place in one run's order.
fn grid_places(
    selected: &[crate::select::KernelSelection],
    offset: usize,
    keep: impl Fn(&str, &str, &neuron_tune_protocol::Shape) -> bool,
) -> (Vec<(usize, usize, usize)>, usize) {
    let (mut places, mut kept, mut grid) = (Vec::new(), 0usize, offset);
    for k in selected {
        let per_shape = match &k.params {
            crate::select::ParamSets::PerShape(_) => 1,
            p => usize::try_from(p.count()).unwrap_or(usize::MAX),
        };
        for (sn, sh) in &k.shapes {
            if keep(&k.kernel.name, sn, sh) {
                places.push((kept, grid, per_shape));
                kept = kept.saturating_add(per_shape);
            }
            grid = grid.saturating_add(per_shape);
        }
    }
    (places, grid)
}

/// The grid index of the kept variant `index` (its place in the stream) by [`grid_places`].
fn grid_place(places: &[(usize, usize, usize)], index: usize) -> usize {
    let i = places.partition_point(|&(kept, _, _)| kept <= index).saturating_sub(1);
    places.get(i).map_or(index, |&(kept, grid, _)| grid + (index - kept))
}

/// A bench work item's name, which `--partition` hashes: `kernel@shape@{dims}`.
pub fn item_name(kernel: &str, shape_name: &str, shape: &neuron_tune_protocol::Shape) -> String {
    format!("{kernel}@{shape_name}@{shape}")
}

/// A variant that could not run, as its `variant_failed` event says it. One whose kernel
/// code panicked, crashed or hung is also a row of bench's results table on stdout (so
/// `bench > results.txt` keeps it), as `check` prints its failures there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedVariant {
    pub variant: Variant,
    /// `invalid`, `panic`, `timeout`, `crashed` or `failed`.
    pub kind: String,
    pub message: String,
}

impl FailedVariant {
    pub(super) fn new(variant: Variant, e: &ErrorInfo) -> FailedVariant {
        let kind = match e.kind {
            ref k if k.is_invalid_variant() => "invalid",
            ErrorKind::Panic => "panic",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Crashed => "crashed",
            _ => "failed",
        };
        FailedVariant { variant, kind: kind.into(), message: e.message.clone() }
    }

    /// Its `variant_failed` event (`merge` gives it as the unpartitioned run did).
    pub(super) fn event(&self, chip: &str) -> Event {
        Event::VariantFailed {
            kernel: self.variant.kernel.clone(),
            shape: self.variant.shape_name.clone(),
            params: self.variant.params.clone(),
            chip: chip.to_string(),
            kind: self.kind.clone(),
            message: self.message.clone(),
        }
    }

    /// Its table cell: the kind and the message's first line, cut to a table's width (the
    /// whole message is on stderr, and in the event).
    fn status(&self) -> String {
        const MAX: usize = 80;
        let first = self.message.lines().next().unwrap_or("").trim();
        let reason = match first.chars().count() > MAX {
            true => format!("{}…", first.chars().take(MAX - 1).collect::<String>()),
            false => first.to_string(),
        };
        format!("{}: {reason}", self.kind)
    }
}

/// A measured variant's event.
pub(super) fn bench_event(v: &Variant, chip: &str, m: &Measured) -> Event {
    let r = &m.bench;
    Event::Bench {
        kernel: v.kernel.clone(),
        shape: v.shape_name.clone(),
        params: v.params.clone(),
        chip: chip.to_string(),
        cycles: r.cycles,
        time_us: r.time_us,
        kernel_time_us: r.kernel_time_us,
        tflops: r.tflops,
        bottleneck: r.bottleneck.clone(),
        program_hash: r.program_hash.clone(),
        cached: m.cached,
    }
}

/// The tables, the summary event and line, and the exit code of a bench (`bench` and
/// `merge` of bench results).
pub(super) fn report(
    out: &Reporter,
    chip: &str,
    rows: &[(usize, Variant, Measured)],
    failed: &[(usize, FailedVariant)],
    defaults: &[(String, Params)],
    (invalid, crashed): (usize, usize),
    store: Option<&std::path::Path>,
) -> Exit {
    print_table(out, rows, failed);
    print_best(out, chip, rows, defaults);
    let cached = rows.iter().filter(|r| r.2.cached).count();
    let simulated = rows.len() - cached;
    let variants = rows.len() + invalid + crashed;
    out.event(&Event::Summary(Summary {
        command: "bench".into(),
        variants,
        simulated: Some(simulated),
        cached: Some(cached),
        invalid: Some(invalid),
        failed: Some(crashed),
        ..Default::default()
    }));
    out.status(format!(
        "   {}: {simulated} simulated, {cached} from the store, {invalid} invalid, {crashed} \
         crashed or hung",
        crate::convergence::count(variants, "variant")
    ));
    // Before the verdict, so that an `error:` line is the last thing the run says.
    if let Some(store) = store {
        out.status(format!("   (store: {})", store.display()));
    }
    super::variants_exit(out, "bench", rows.len(), invalid, crashed)
}

/// A progress bar on stderr for long runs (hidden in JSON mode, with `--quiet` and when not
/// a terminal).
pub fn progress(out: &Reporter, len: u64) -> indicatif::ProgressBar {
    if !out.shows_status() || len < 2 {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "  {prefix:>8} [{bar:30}] {pos}/{len} {elapsed} (eta {eta})",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix("bench");
    bar
}

/// The results table: every variant that ran, in grid order, the failed ones with their
/// status (their measurements `-`).
fn print_table(
    out: &Reporter,
    rows: &[(usize, Variant, Measured)],
    failed: &[(usize, FailedVariant)],
) {
    if rows.is_empty() && failed.is_empty() {
        return;
    }
    out.result("");
    let mut t = crate::output::Table::new(&[
        "kernel",
        "shape",
        "params",
        ">time µs",
        ">kernel µs",
        ">TFLOP/s",
        "bottleneck",
        "",
    ]);
    // `time µs` is the call, the chip's launch overhead included, as every reported time
    // (and `--goal`); the rate is over the kernel's own time, as the profiler counts it, so
    // that column is shown beside it.
    // A row that ran, or failed.
    type Line<'a> = Result<(&'a Variant, &'a Measured), &'a FailedVariant>;
    let mut lines: Vec<(usize, Line)> = rows.iter().map(|(i, v, m)| (*i, Ok((v, m)))).collect();
    lines.extend(failed.iter().map(|(i, f)| (*i, Err(f))));
    lines.sort_by_key(|l| l.0);
    for (_, line) in lines {
        match line {
            Ok((v, m)) => t.row(vec![
                v.kernel.clone(),
                v.shape_name.clone(),
                v.params.to_string(),
                format!("{:.1}", m.bench.time_us),
                format!("{:.1}", m.bench.kernel_time_us),
                format!("{:.2}", m.bench.tflops),
                m.bench.bottleneck.clone(),
                if m.cached { "(cached)".into() } else { String::new() },
            ]),
            Err(f) => {
                let v = &f.variant;
                t.row(vec![
                    v.kernel.clone(),
                    v.shape_name.clone(),
                    v.params.to_string(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    f.status(),
                ]);
                t.paint_last(7, crate::output::sgr::RED);
            }
        }
    }
    out.table(&t, "  ");
}

/// Per kernel and shape: the fastest variant benchmarked and its gain over the default.
/// Nothing when no kernel had two variants to compare (a bench of one variant each); else
/// every kernel and shape, one with a single valid variant too (it is that shape's fastest).
fn print_best(
    out: &Reporter,
    chip: &str,
    rows: &[(usize, Variant, Measured)],
    defaults: &[(String, Params)],
) {
    let mut keys: Vec<(&str, &str)> =
        rows.iter().map(|(_, v, _)| (v.kernel.as_str(), v.shape_name.as_str())).collect();
    keys.dedup();
    if keys.len() == rows.len() {
        return;
    }
    let mut header = false;
    for (k, s) in keys {
        let group: Vec<_> =
            rows.iter().filter(|(_, v, _)| v.kernel == k && v.shape_name == s).collect();
        if !header {
            out.result("\n  fastest variant per kernel and shape:");
            header = true;
        }
        let default = defaults
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, d)| group.iter().find(|(_, v, _)| &v.params == d));
        // The fastest; on a tie the default, as `tune` keeps it, then the first in grid order.
        let is_default =
            |r: &(usize, Variant, Measured)| default.is_some_and(|d| std::ptr::eq(*d, r));
        let best = *group
            .iter()
            .min_by(|a, b| {
                let by_time = a.2.bench.time_us.total_cmp(&b.2.bench.time_us);
                by_time.then(is_default(b).cmp(&is_default(a)))
            })
            .expect("non-empty");
        let gain = default.map_or(String::new(), |d| {
            if group.len() == 1 {
                return "  (the only valid variant)".to_string();
            }
            if std::ptr::eq(*d, best) {
                return "  (the default; nothing is faster)".to_string();
            }
            format!(
                "  {:.2}x faster than the default ({:.1} µs)",
                d.2.bench.time_us / best.2.bench.time_us,
                d.2.bench.time_us
            )
        });
        out.event(&Event::Best {
            kernel: k.into(),
            shape: s.into(),
            chip: chip.into(),
            best_params: best.1.params.clone(),
            best_time: best.2.bench.time_us,
            default_time: default.map(|d| d.2.bench.time_us),
            evaluations: group.len(),
        });
        out.result(format!(
            "  {k:<16} {s:<14} {:>9.1} µs  {}{gain}  ({})",
            best.2.bench.time_us,
            best.1.params,
            crate::convergence::count(group.len(), "variant")
        ));
    }
}

/// `bench --model`: each selected model at each selected shape, end to end, with the tuned
/// parameters and with the defaults.
pub fn run_models(
    cargo: &CargoFlags,
    s: &Selection,
    patterns: &[String],
    force: bool,
    partition: Option<crate::partition::Partition>,
    ctx: &Ctx,
) -> Result<Exit, Failure> {
    if !s.kernels.is_empty() || s.params.is_some() || s.all_variants || s.tuned {
        return Err(crate::exit::fail(
            Exit::Config,
            "--model benchmarks whole models, tuned beside default: --kernel, --params, \
             --all-variants and --tuned do not apply"
                .to_string(),
        ));
    }
    // A chip name or file is checked before anything is built.
    let chip = chip_spec(&s.chip)?;
    let mut ws = Workspace::open(cargo, ctx)?;
    let store = open_store(&ws.target_dir, &ctx.out)?;
    let lists: Vec<&neuron_tune_protocol::ListDoc> = ws.crates.iter().map(|c| &c.list).collect();
    let targets: Vec<models::ModelTarget> = models::select_models(&lists, patterns, &s.shapes)?
        .into_iter()
        .filter(|t| keeps(partition, &crate::gate::item_name(&t.model, &t.shape_name, &chip.name)))
        .collect();
    let set = ws.tuned.get()?;
    let out = &ctx.out;
    let mut failed = 0;
    // Distinct kernel calls evaluated (tuned and default runs), and how many the store served.
    let (mut calls, mut cached) = (0, 0);
    for t in &targets {
        out.status(format!("   Simulating {} at {} on {}", t.model, t.shape_name, chip.name));
        let c = &mut ws.crates[t.krate];
        // The records of the packages the model's crate links, never another's kernel of
        // the same name.
        let records = set.for_model(&c.krate.manifest_path, &chip.name);
        let tuned = records.tuned();
        let env = models::Bench {
            store: &store,
            sim_version: &c.list.sim_version,
            chip: &chip,
            records: &records,
            force,
            out,
        };
        let pool = &mut c.pool;
        let with = models::evaluate(pool, &env, t, &tuned)?;
        // With no tuned call, the default run is the same run: not traced again.
        let without = match &with {
            Ok(w) if w.calls.iter().all(|c| !c.tuned) => Ok(w.clone()),
            _ => models::evaluate(pool, &env, t, &Default::default())?,
        };
        let (with, without) = match (with, without) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                failed += 1;
                out.event(&Event::Error {
                    code: Exit::Check.code(),
                    message: e.clone(),
                    diagnostics: Vec::new(),
                });
                out.note(format!("error: {e}"));
                continue;
            }
        };
        let stale: Vec<String> = with.calls.iter().filter_map(|c| c.stale.clone()).collect();
        for s in &stale {
            out.note(format!("warning: stale tuned entry: {s}"));
        }
        // Without a tuned call the default run is the tuned one (not traced again above).
        let runs =
            if with.calls.iter().any(|c| c.tuned) { vec![&with, &without] } else { vec![&with] };
        for r in runs {
            let (c, n) = r.cached_calls();
            (cached, calls) = (cached + c, calls + n);
        }
        print_model(out, &with, &without);
        out.event(&Event::Model {
            model: with.model.clone(),
            shape: with.shape_name.clone(),
            chip: with.chip.clone(),
            tokens_per_s: with.tokens_per_s,
            default_tokens_per_s: without.tokens_per_s,
            total_us: with.total_us,
            default_total_us: without.total_us,
            tuned: Box::new(with),
            default: Box::new(without),
            stale,
        });
    }
    out.event(&Event::Summary(crate::output::Summary {
        command: "bench".into(),
        variants: calls,
        simulated: Some(calls - cached),
        cached: Some(cached),
        failed: Some(failed),
        ..Default::default()
    }));
    Ok(if failed > 0 { Exit::Check } else { Exit::Ok })
}

/// A call's kernel as the breakdown names it: its name, and the package it is of (or else
/// its Rust crate) when the model calls another crate's kernel of the same name.
fn call_kernel(run: &models::ModelRun, c: &models::CallTime) -> String {
    match run.calls.iter().any(|o| o.kernel == c.kernel && o.krate != c.krate) {
        true => models::kernel_of_crate(&c.kernel, c.package.as_deref(), c.krate.as_deref()),
        false => c.kernel.clone(),
    }
}

/// A model's throughput, tuned beside default, and its calls by share of the tuned time.
fn print_model(out: &Reporter, tuned: &models::ModelRun, default: &models::ModelRun) {
    let any_tuned = tuned.calls.iter().any(|c| c.tuned);
    out.result(format!(
        "\n  {} at {} {} on {}",
        tuned.model, tuned.shape_name, tuned.shape, tuned.chip
    ));
    if any_tuned {
        out.result(format!(
            "    tuned     {:>12.0} tokens/s  {:>9.2} prompts/s  {:>10.3} ms  {:.2}x the default",
            tuned.tokens_per_s,
            tuned.prompts_per_s,
            tuned.total_us / 1e3,
            default.total_us / tuned.total_us
        ));
    }
    out.result(format!(
        "    default   {:>12.0} tokens/s  {:>9.2} prompts/s  {:>10.3} ms{}",
        default.tokens_per_s,
        default.prompts_per_s,
        default.total_us / 1e3,
        if any_tuned {
            ""
        } else {
            "  (no tuned parameters apply: `cargo neuron-tune tune` writes them)"
        }
    ));
    let mut table = crate::output::Table::new(&[
        "kernel",
        "shape",
        ">calls",
        ">default µs",
        ">tuned µs",
        ">total ms",
        ">share",
        "",
    ]);
    let mut rows: Vec<&models::CallTime> = tuned.calls.iter().collect();
    rows.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
    for c in rows {
        let d = default
            .calls
            .iter()
            .find(|d| (&d.krate, &d.kernel, &d.shape) == (&c.krate, &c.kernel, &c.shape));
        let shape = c.shape.to_string();
        table.row(vec![
            call_kernel(tuned, c),
            shape.trim_start_matches('{').trim_end_matches('}').to_string(),
            c.calls.to_string(),
            d.map_or("-".into(), |d| format!("{:.1}", d.time_us + default.launch_overhead_us)),
            if c.tuned {
                format!("{:.1}", c.time_us + tuned.launch_overhead_us)
            } else {
                "-".into()
            },
            format!("{:.3}", c.total_us / 1e3),
            format!("{:.1}%", 100.0 * c.total_us / tuned.total_us),
            if c.stale.is_some() { "stale".into() } else { String::new() },
        ]);
    }
    for line in table.lines("    ") {
        out.result(line.trim_end());
    }
    // Per call as `bench` and `tune` report a variant, so that calls × µs is the total.
    out.result(format!(
        "    µs per call include the {:.1} µs launch overhead, as in `bench`; total = calls × µs",
        tuned.launch_overhead_us
    ));
}

#[cfg(test)]
mod tests {
    use super::grid_place;

    /// A partition's variants stream in the grid's order with the other partitions' items
    /// left out: each maps back to its place in the whole grid.
    #[test]
    fn a_kept_variant_maps_to_its_place_in_the_whole_grid() {
        // Items of 3, 0 and 2 variants kept, at grid indices 10, 20 and 30.
        let places = [(0, 10, 3), (3, 20, 0), (3, 30, 2)];
        let grid: Vec<usize> = (0..5).map(|i| grid_place(&places, i)).collect();
        assert_eq!(grid, [10, 11, 12, 30, 31]);
    }
}
