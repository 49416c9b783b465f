//! `bench`: the timing model on the selected variants; unchanged programs come from the
//! store. Events stream as results arrive; the tables come at the end.

use super::{open_store, report_failure};
use crate::cargo::CargoFlags;
use crate::cli::Selection;
use crate::eval::{bench_stream, Measured, Outcome};
use crate::exit::{Exit, Failure};
use crate::output::{Event, Reporter, Summary};
use crate::select::{check_patterns, chip_spec, select, Variant};
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::Params;

pub fn run(cargo: &CargoFlags, s: &Selection, force: bool, ctx: &Ctx) -> Result<Exit, Failure> {
    let mut ws = Workspace::open(cargo, ctx)?;
    let store = open_store(&ws.target_dir, &ctx.out)?;
    let chip = chip_spec(&s.chip)?;
    check_patterns(&ws.crates.iter().map(|c| &c.list).collect::<Vec<_>>(), s)?;
    let out = &ctx.out;
    let (mut invalid, mut crashed, mut simulated, mut cached) = (0, 0, 0, 0);
    let mut rows: Vec<(usize, Variant, Measured)> = Vec::new();
    let mut defaults: Vec<(String, Params)> = Vec::new();
    let mut offset = 0;
    for c in &mut ws.crates {
        let selected = select(&c.list, s)?;
        defaults
            .extend(selected.iter().map(|k| (k.kernel.name.clone(), k.kernel.defaults.clone())));
        let total: u64 = selected.iter().map(|k| k.count()).sum();
        let bar = progress(out, total);
        let variants = selected.iter().flat_map(|k| k.variants());
        let mut n = 0;
        bench_stream(&mut c.pool, variants, &chip, &store, force, out, &mut |o: Outcome| {
            bar.inc(1);
            n += 1;
            match o.result {
                Ok(m) => {
                    if m.cached {
                        cached += 1;
                    } else {
                        simulated += 1;
                    }
                    let r = &m.bench;
                    out.event(&Event::Bench {
                        kernel: o.variant.kernel.clone(),
                        shape: o.variant.shape_name.clone(),
                        params: o.variant.params.clone(),
                        chip: chip.name.clone(),
                        cycles: r.cycles,
                        time_us: r.time_us,
                        kernel_time_us: r.kernel_time_us,
                        tflops: r.tflops,
                        bottleneck: r.bottleneck.clone(),
                        program_hash: r.program_hash.clone(),
                        cached: m.cached,
                    });
                    rows.push((offset + o.index, o.variant, m));
                }
                Err(e) => {
                    if e.kind.is_invalid_variant() {
                        invalid += 1;
                    } else {
                        crashed += 1;
                    }
                    bar.suspend(|| report_failure(out, &o.variant, &chip.name, &e));
                }
            }
        })?;
        bar.finish_and_clear();
        offset += n;
    }
    rows.sort_by_key(|r| r.0);
    out.flush_invalid();
    print_table(out, &rows);
    print_best(out, &rows, &defaults);
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
        "   {variants} variants: {simulated} simulated, {cached} from the store, {invalid} invalid, \
         {crashed} crashed or hung (store: {})",
        store.root().display()
    ));
    Ok(if crashed > 0 { Exit::Check } else { Exit::Ok })
}

/// A progress bar on stderr for long runs (hidden in JSON mode and when not a terminal).
pub fn progress(out: &Reporter, len: u64) -> indicatif::ProgressBar {
    if out.is_json() || len < 2 {
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

fn print_table(out: &Reporter, rows: &[(usize, Variant, Measured)]) {
    if rows.is_empty() {
        return;
    }
    out.result(format!(
        "\n  {:<16} {:<14} {:<44} {:>11} {:>8} {:<18} ",
        "kernel", "shape", "params", "time µs", "TFLOP/s", "bottleneck"
    ));
    for (_, v, m) in rows {
        out.result(format!(
            "  {:<16} {:<14} {:<44} {:>11.1} {:>8.2} {:<18} {}",
            v.kernel,
            v.shape_name,
            v.params.to_string(),
            m.bench.time_us,
            m.bench.tflops,
            m.bench.bottleneck,
            if m.cached { "(cached)" } else { "" }
        ));
    }
}

/// Per kernel and shape: the fastest variant benchmarked and its gain over the default.
fn print_best(out: &Reporter, rows: &[(usize, Variant, Measured)], defaults: &[(String, Params)]) {
    let mut keys: Vec<(&str, &str)> =
        rows.iter().map(|(_, v, _)| (v.kernel.as_str(), v.shape_name.as_str())).collect();
    keys.dedup();
    let mut header = false;
    for (k, s) in keys {
        let group: Vec<_> =
            rows.iter().filter(|(_, v, _)| v.kernel == k && v.shape_name == s).collect();
        if group.len() < 2 {
            continue;
        }
        if !header {
            out.result("\n  fastest variant per kernel and shape:");
            header = true;
        }
        let best = group
            .iter()
            .min_by(|a, b| a.2.bench.time_us.total_cmp(&b.2.bench.time_us))
            .expect("non-empty");
        let default = defaults
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, d)| group.iter().find(|(_, v, _)| &v.params == d));
        let gain = default.map_or(String::new(), |d| {
            format!(
                "  {:.2}x faster than the default ({:.1} µs)",
                d.2.bench.time_us / best.2.bench.time_us,
                d.2.bench.time_us
            )
        });
        out.event(&Event::Best {
            kernel: k.into(),
            shape: s.into(),
            best_params: best.1.params.clone(),
            best_time: best.2.bench.time_us,
            default_time: default.map(|d| d.2.bench.time_us),
            evaluations: group.len(),
        });
        out.result(format!(
            "  {k:<16} {s:<14} {:>9.1} µs  {}{gain}  ({} variants)",
            best.2.bench.time_us,
            best.1.params,
            group.len()
        ));
    }
}
