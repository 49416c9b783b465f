//! The report's HTML: one self-contained page (inline CSS, charts as inline SVG drawn with
//! plotters by [`super::charts`], no script, nothing fetched at view time) from a
//! [`ReportData`].

use super::charts::{self, figure};
use super::model::{PackageRecord, ReportData, Target, TuneRun};
use crate::convergence::count;
use std::collections::HashSet;
use std::fmt::Write;

/// `text` safe inside HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&#39;"),
            c => s.push(c),
        }
    }
    s
}

/// The file name of a shown variant's trace, next to the report (`which`: best/default).
/// Named by the dimensions too: a model's calls of one kernel share a shape name
/// (`qwen3@tiny`).
pub fn trace_file(t: &Target, which: &str) -> String {
    use crate::commands::tune::{dims_slug, sanitize};
    // The package first, when known: two packages' kernels may share a name.
    let package = t.package.as_ref().map_or(String::new(), |p| format!("{}.", sanitize(&p.name)));
    format!(
        "trace-{package}{}-{}-{}-{}-{which}.json",
        sanitize(&t.kernel),
        sanitize(&t.shape),
        dims_slug(&t.dims),
        sanitize(&t.chip.name)
    )
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1340px;color:#222}\
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:1em 0}th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:left}\
td.n{text-align:right;font-variant-numeric:tabular-nums}code{font-size:.9em}\
.charts{display:flex;flex-wrap:wrap;gap:1em}figure.chart{margin:0}figure.chart svg{max-width:100%;height:auto}\
.none{color:#777;font-style:italic}h3{font-size:1.05em}tr.rolled_back td{color:#a40000}";

/// Each run's convergence figures (as `tune` printed them), then the decision log of each
/// `--goal` run: one row per round, rolled-back rounds marked.
fn runs_and_decisions(h: &mut String, runs: &[TuneRun]) {
    h.push_str(
        "<table class=\"runs\"><tr><th>run</th><th>evaluations</th><th>convergence</th></tr>\n",
    );
    for r in runs {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            escape(&r.label(runs)),
            r.entries.len(),
            escape(&r.figures())
        );
    }
    h.push_str("</table>\n");
    for r in runs.iter().filter(|r| !r.meta.diagnoses.is_empty()) {
        let _ = writeln!(
            h,
            "<p>Diagnosis of {}:</p>\n<ul class=\"diagnoses\">",
            escape(&r.label(runs))
        );
        for d in &r.meta.diagnoses {
            let _ = write!(h, "<li><strong>{}</strong>", escape(&d.summary));
            for (label, lines) in [("evidence", &d.evidence), ("advice", &d.advice)] {
                for l in lines {
                    let _ = write!(h, "<br>{label}: {}", escape(l));
                }
            }
            h.push_str("</li>\n");
        }
        h.push_str("</ul>\n");
    }
    for r in runs.iter().filter(|r| !r.rounds.is_empty()) {
        let _ = writeln!(
            h,
            "<h3>Decision log: {}</h3>\n<table class=\"rounds\"><tr><th>round</th>\
             <th>proposals</th><th>best (µs)</th><th>decision</th><th>why</th></tr>",
            escape(&r.label(runs))
        );
        for d in &r.rounds {
            let _ = writeln!(
                h,
                "<tr class=\"{}\"><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td>{}{}</td><td>{}</td></tr>",
                escape(&d.decision),
                d.round,
                d.proposals,
                d.best_time_us.map_or("—".to_string(), |t| format!("{t:.2}")),
                escape(&d.decision.replace('_', " ")),
                if d.goal_met { " (goal met)" } else { "" },
                escape(&d.reason)
            );
        }
        h.push_str("</table>\n");
    }
}

/// Where a target's tuned record came from, when it is not the best of the target's runs.
/// Records are keyed by the problem's dimensions, not by the shape's name: a run at another
/// named shape of the same dimensions (`small` and a model's call `qwen3@tiny`) writes the
/// record both use, and it keeps its label. When that run is shown (its section's best is
/// the record), its section is named; otherwise only what is known is said.
fn record_origin(data: &ReportData, t: &Target, r: &crate::tuned::TunedRecord) -> String {
    let faster = t.best.as_ref().is_none_or(|b| r.time_us <= b.time_us);
    let stays = if faster { " It stays while no run finds a faster variant." } else { "" };
    if r.shape == t.shape {
        return format!("its run is not among those shown.{stays}");
    }
    let same = |u: &&Target| {
        u.package == t.package
            && u.kernel == t.kernel
            && u.chip == t.chip
            && u.dims == t.dims
            && u.shape == r.shape
    };
    let shape = escape(&r.shape);
    match data.targets.iter().find(same) {
        Some(u) if u.best.as_ref().is_some_and(|b| b.params == r.params) => format!(
            "it was recorded at shape <code>{shape}</code>, which has the same dimensions (records \
             are kept by dimensions), by the runs of section <em>{}</em>.{stays}",
            title(u)
        ),
        _ => format!(
            "it was recorded at shape <code>{shape}</code>, which has the same dimensions (records \
             are kept by dimensions), by a run not among those shown.{stays}"
        ),
    }
}

/// A target's section title, escaped: `kernel @ shape on chip`, with the dimensions for a
/// model's call (a model's calls of one kernel share the shape's name).
fn title(t: &Target) -> String {
    let dims = match t.shape.contains('@') {
        true => format!(" {}", escape(&t.dims.to_string())),
        false => String::new(),
    };
    format!("{} @ {}{dims} on {}", escape(&t.kernel), escape(&t.shape), escape(&t.chip.name))
}

/// The whole page.
pub fn html(data: &ReportData) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<title>cargo neuron-tune report</title>\n<style>");
    h.push_str(STYLE);
    h.push_str("</style></head><body>\n<h1>cargo neuron-tune report</h1>\n");
    // The gate history is one series per model, shape and chip: models are counted as
    // models.
    let models = data.gate.iter().map(|g| &g.model).collect::<HashSet<_>>().len();
    let on_chip = data.chip.as_ref().map_or(String::new(), |c| format!(" on chip {}", escape(c)));
    let _ = writeln!(
        h,
        "<p>{} tuned records; {} kernel shapes with tuning runs, {} runs; {} in the gate \
         history{on_chip}{}. Times are simulated (neuron-sim), not measured on hardware.</p>",
        data.tuned.len(),
        data.targets.len(),
        data.targets.iter().map(|t| t.runs.len()).sum::<usize>(),
        count(models, "model"),
        match data.gate.len() {
            0 => String::new(),
            n => format!(" ({n} series of a model, shape and chip)"),
        }
    );

    h.push_str("<h2 id=\"best\">Best variant per kernel, chip and shape</h2>\n");
    if data.tuned.is_empty() {
        h.push_str("<p class=\"none\">No tuned database records yet: run <code>cargo neuron-tune tune</code>.</p>\n");
    } else {
        // Two packages' same-named kernels each have their records: say whose they are.
        let packages = data.tuned.iter().map(|r| &r.package).collect::<HashSet<_>>().len();
        let package_th = if packages > 1 { "<th>package</th>" } else { "" };
        let _ = writeln!(
            h,
            "<table><tr><th>kernel</th>{package_th}<th>chip</th><th>shape</th><th>time (µs)</th><th>params</th><th>simulator</th></tr>"
        );
        for PackageRecord { package, record: r } in &data.tuned {
            let package_td = match packages > 1 {
                true => format!("<td>{}</td>", escape(package)),
                false => String::new(),
            };
            // A model's calls of one kernel share a label (`qwen3@tiny`), and records are
            // kept by dimensions: a label that does not tell its record apart gets them, as
            // the section titles do.
            let shared = r.shape.contains('@')
                || data.tuned.iter().any(|o| {
                    let o_r = &o.record;
                    o.package == *package
                        && (&o_r.kernel, &o_r.chip, &o_r.shape) == (&r.kernel, &r.chip, &r.shape)
                        && o_r.dims != r.dims
                });
            let shape = match shared {
                true => format!("{} {}", r.shape, r.dims),
                false => r.shape.clone(),
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td>{package_td}<td>{}</td><td>{}</td><td class=\"n\">{:.2}</td><td><code>{}</code></td><td>{}</td></tr>",
                escape(&r.kernel),
                escape(&r.chip),
                escape(&shape),
                r.time_us,
                escape(&r.params.to_string()),
                escape(&r.sim_version)
            );
        }
        h.push_str("</table>\n");
    }

    let any_trace = data.targets.iter().any(|t| {
        [&t.best, &t.default].iter().any(|s| {
            s.as_ref().is_some_and(|s| s.profile.as_ref().is_some_and(|p| p.trace.is_some()))
        })
    });
    if any_trace {
        h.push_str(
            "<p>Each variant shown below links to its Perfetto trace, written next to this file. \
             To look at one, open <a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a> and drag \
             the file onto the page (or use <em>Open trace file</em>): the trace stays on your \
             machine.</p>\n",
        );
    }

    for t in &data.targets {
        let _ = writeln!(
            h,
            "<h2>{}</h2>\n<p>{}Shape <code>{}</code>; {}: {}.</p>",
            title(t),
            match &t.package {
                Some(p) => format!(
                    "Package <code>{}</code> (<code>{}</code>). ",
                    escape(&p.name),
                    escape(&p.manifest)
                ),
                None => String::new(),
            },
            escape(&t.dims.to_string()),
            count(t.runs.len(), "run"),
            t.runs
                .iter()
                .map(|r| format!(
                    "{}, {}",
                    escape(&r.label(&t.runs)),
                    count(r.entries.len(), "evaluation")
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        h.push_str(
            "<table><tr><th>variant</th><th>time (µs)</th><th>params</th><th>trace</th></tr>\n",
        );
        for (which, s) in [("best", &t.best), ("default", &t.default)] {
            let Some(s) = s else { continue };
            let trace = match s.profile.as_ref().map(|p| (p, p.trace.is_some())) {
                Some((_, true)) => {
                    let f = trace_file(t, which);
                    format!("<a href=\"{0}\">{0}</a>", escape(&f))
                }
                // Profiled, without its trace: over the limit.
                Some((p, false)) => format!(
                    "not written: {} instructions, over the report's limit of {} (too large \
                     for ui.perfetto.dev); <code>{}</code> writes it",
                    p.instruction_count,
                    super::TRACE_MAX_INSTRUCTIONS,
                    escape(&super::trace_command(t, s, &trace_file(t, which)))
                ),
                None => "—".into(),
            };
            let _ = writeln!(
                h,
                "<tr><td>{which}</td><td class=\"n\">{:.2}</td><td><code>{}</code></td><td>{trace}</td></tr>",
                s.time_us,
                escape(&s.params.to_string())
            );
        }
        h.push_str("</table>\n");
        // The database is what the models run: when its record is not the runs' best, say
        // which it is, and where it came from when that can be known.
        // A run journaled before its package was recorded matches any package's record.
        let record = data
            .tuned
            .iter()
            .find(|p| {
                let r = &p.record;
                t.package.as_ref().is_none_or(|tp| tp.name == p.package)
                    && r.kernel == t.kernel
                    && r.chip == t.chip.name
                    && r.dims == t.dims
            })
            .map(|p| &p.record);
        if let Some(r) = record.filter(|r| t.best.as_ref().is_none_or(|b| b.params != r.params)) {
            let _ = writeln!(
                h,
                "<p>The tuned database's record here is <code>{}</code> ({:.2} µs), not the best \
                 of the runs shown: {}</p>",
                escape(&r.params.to_string()),
                r.time_us,
                record_origin(data, t, r)
            );
        }
        runs_and_decisions(&mut h, &t.runs);
        h.push_str("<div class=\"charts\">\n");
        figure(&mut h, "convergence", charts::convergence(&t.runs));
        figure(&mut h, "utilization", charts::utilization(t.default.as_ref(), t.best.as_ref()));
        figure(&mut h, "roofline", charts::roofline(t));
        if let Some(front) = t.front() {
            figure(&mut h, "pareto", charts::pareto(front));
        }
        h.push_str("</div>\n");
    }

    h.push_str("<h2 id=\"gate\">Model throughput through the gate</h2>\n");
    if data.gate.is_empty() {
        match (&data.chip, data.gate_other_chips.as_slice()) {
            (Some(c), []) => {
                let _ = writeln!(
                    h,
                    "<p class=\"none\">No gate runs on chip {0} yet: run <code>cargo \
                     neuron-tune gate --chip {0}</code>.</p>",
                    escape(c)
                );
            }
            (Some(c), others) => {
                let _ = writeln!(
                    h,
                    "<p class=\"none\">No gate runs on chip {}: the models have gate runs on \
                     {} (a report without <code>--chip</code> shows them).</p>",
                    escape(c),
                    escape(&others.join(", "))
                );
            }
            (None, _) => h.push_str(
                "<p class=\"none\">No gate runs yet: run <code>cargo neuron-tune gate</code>.</p>\n",
            ),
        }
    } else {
        h.push_str("<div class=\"charts\">\n");
        for s in &data.gate {
            figure(&mut h, "gate", charts::gate_history(s));
        }
        h.push_str("</div>\n");
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    /// A target with two seeds of one strategy (3 evaluations each, the first invalid) and
    /// two roofline points; no profiles.
    fn data() -> ReportData {
        use crate::commands::tune::{Entry, JournalMeta};
        use neuron_tune_protocol::{ChipSpec, Params};
        let entry = |n: usize, status: &str, t: Option<f64>| Entry {
            n,
            params: Params::default(),
            status: status.into(),
            time_us: t,
            program_hash: Some(format!("h{n}")),
            sbuf_bytes: None,
            energy_uj: None,
            bottleneck: None,
            error: None,
            check: None,
        };
        let run = |seed: u64, times: [f64; 2]| TuneRun {
            journal: format!("j{seed}").into(),
            meta: JournalMeta {
                kernel: "k<&>".into(),
                package: None,
                shape: "small".into(),
                dims: Default::default(),
                chip: ChipSpec::builtin("trn2"),
                strategy: "random".into(),
                seed,
                budget: 3,
                objective: "time".into(),
                pinned: None,
                sim_version: "v".into(),
                harness_hash: None,
                default: None,
                default_refused: None,
                front: None,
                validated: None,
                diagnoses: Vec::new(),
                whole_space: None,
            },
            entries: vec![
                entry(0, "invalid", None),
                entry(1, "measured", Some(times[0])),
                entry(2, "measured", Some(times[1])),
            ],
            rounds: Vec::new(),
            unread: Default::default(),
        };
        ReportData {
            targets: vec![Target {
                package: None,
                kernel: "k<&>".into(),
                shape: "small".into(),
                dims: Default::default(),
                chip: ChipSpec::builtin("trn2"),
                sim_version: "v".into(),
                runs: vec![run(1, [9.0, 7.0]), goal_run(run(2, [8.0, 8.5]))],
                best: None,
                default: None,
                roofline: vec![
                    super::super::model::RooflinePoint { intensity: 10.0, tflops: 1.0 },
                    super::super::model::RooflinePoint { intensity: 300.0, tflops: 50.0 },
                ],
                peak_tflops: 90.0,
                hbm_gbps: 360.0,
            }],
            tuned: Vec::new(),
            gate: Vec::new(),
            chip: None,
            gate_other_chips: Vec::new(),
        }
    }

    /// `run` as a `--goal` run of two rounds: the first kept 8 µs, the second's winner was
    /// rolled back.
    fn goal_run(mut run: TuneRun) -> TuneRun {
        let round = |round: usize, decision: &str, reason: &str| crate::convergence::Round {
            line: "round".into(),
            round,
            proposals: 2 - (round - 1),
            best_time_us: Some(8.0),
            best_params: None,
            decision: decision.into(),
            reason: reason.into(),
            goal_met: false,
        };
        run.rounds = vec![
            round(1, "kept", "new best 8.00 µs (was the default)"),
            round(2, "rolled_back", "wrong at shape <large>; the best stays 8.00 µs"),
        ];
        run.meta.diagnoses = vec![crate::convergence::Diagnosis {
            rule: "slow".into(),
            summary: "slow: checks took most of the run".into(),
            evidence: vec!["of 10 s: checks 9 s".into()],
            advice: vec!["draw <smaller> shapes".into()],
        }];
        run
    }

    fn record(package: &str, params: neuron_tune_protocol::Params) -> PackageRecord {
        PackageRecord {
            package: package.into(),
            record: crate::tuned::TunedRecord {
                kernel: "k<&>".into(),
                chip: "trn2".into(),
                shape: "small".into(),
                dims: Default::default(),
                params,
                time_us: 6.5,
                program_hash: "h".into(),
                tool_version: "t".into(),
                sim_version: "v".into(),
                validated_shapes: Vec::new(),
                validated_models: Vec::new(),
            },
        }
    }

    #[test]
    fn a_trace_over_the_limit_is_not_linked_and_the_page_says_how_to_get_it() {
        let mut d = data();
        let profile = |instructions: u64, trace: Option<String>| {
            let b = serde_json::json!({
                "cycles": 0, "time_us": 1.0, "kernel_time_us": 1.0, "tflops": 0.0,
                "bottleneck": "", "bottleneck_summary": "", "program_hash": "h",
                "instruction_count": instructions, "shape": {}, "work": {"flops": 0.0, "bytes": 0.0},
                "hbm_bytes": 0, "hardware_flops": 0.0, "trace": trace,
            });
            Some(serde_json::from_value(b).unwrap())
        };
        let shown = |profile| super::super::model::Shown {
            params: neuron_tune_protocol::Params::new().with("bufs", 2),
            time_us: 6.5,
            program_hash: "h".into(),
            profile,
        };
        d.targets[0].best = Some(shown(profile(3_000_000, None)));
        d.targets[0].default = Some(shown(profile(10, Some("{}".into()))));
        let page = html(&d);
        let file = trace_file(&d.targets[0], "best");
        assert!(
            page.contains("not written: 3000000 instructions, over the report's limit"),
            "{page}"
        );
        assert!(
            page.contains(&format!("--params bufs=2 --chip trn2 --trace {}", escape(&file))),
            "{page}"
        );
        assert!(!page.contains(&format!("href=\"{}\"", escape(&file))), "{page}");
        assert!(
            page.contains(&format!("href=\"{}\"", escape(&trace_file(&d.targets[0], "default"))))
        );
    }

    #[test]
    fn a_record_that_is_not_the_runs_best_is_named_in_its_section() {
        let mut d = data();
        let note = "The tuned database's record here is <code>bufs=3</code> (6.50 µs)";
        d.tuned = vec![record("p", neuron_tune_protocol::Params::new().with("bufs", 3))];
        assert!(html(&d).contains(note), "{}", html(&d));
        // The record is the best shown: nothing to say.
        d.targets[0].best = Some(super::super::model::Shown {
            params: d.tuned[0].record.params.clone(),
            time_us: 6.5,
            program_hash: "h".into(),
            profile: None,
        });
        assert!(!html(&d).contains("The tuned database's record here"));
    }

    #[test]
    fn a_record_written_at_another_shape_of_the_same_dimensions_says_so() {
        use neuron_tune_protocol::Params;
        let shown = |bufs: i64, time_us: f64| super::super::model::Shown {
            params: Params::new().with("bufs", bufs),
            time_us,
            program_hash: "h".into(),
            profile: None,
        };
        // `small` and a model's call `net@tiny` of the same dimensions: one record, written
        // by the run at `small` (its best), labelled `small`; the call's runs found slower.
        let mut d = data();
        d.targets[0].best = Some(shown(3, 6.5));
        let mut call = d.targets[0].clone();
        call.shape = "net@tiny".into();
        call.best = Some(shown(2, 7.0));
        d.targets.push(call);
        d.tuned = vec![record("p", Params::new().with("bufs", 3))];
        let page = html(&d);
        let section = page.split("<h2>k&lt;&amp;&gt; @ net@tiny").nth(1).unwrap();
        assert!(
            section.contains(
                "not the best of the runs shown: it was recorded at shape <code>small</code>, \
                 which has the same dimensions (records are kept by dimensions), by the runs of \
                 section <em>k&lt;&amp;&gt; @ small on trn2</em>. It stays while no run finds a \
                 faster variant.</p>"
            ),
            "{section}"
        );
        // No story of a replaced journal: nothing says one was.
        assert!(!page.contains("replaced its journal"), "{page}");
        // The run at `small` not shown: where the record came from is still known by its label.
        d.targets.remove(0);
        let page = html(&d);
        assert!(
            page.contains(
                "it was recorded at shape <code>small</code>, which has the same \
             dimensions (records are kept by dimensions), by a run not among those shown."
            ),
            "{page}"
        );
        // A record of the section's own shape whose run is not shown: nothing more is known.
        d.tuned[0].record.shape = "net@tiny".into();
        let page = html(&d);
        assert!(
            page.contains(
                "not the best of the runs shown: its run is not among those \
             shown. It stays while no run finds a faster variant.</p>"
            ),
            "{page}"
        );
        // A record slower than the runs' best (not replaced: say, it failed its check) is not
        // said to stay until a faster variant is found: one was.
        d.tuned[0].record.time_us = 7.5;
        assert!(html(&d).contains("its run is not among those shown.</p>"));
    }

    #[test]
    fn the_best_variant_table_tells_records_of_one_label_apart_by_their_dimensions() {
        use neuron_tune_protocol::{Params, Shape};
        let dims =
            |n: u64| -> Shape { serde_json::from_value(serde_json::json!({"n": n})).unwrap() };
        let mut d = data();
        // A model's three calls of one kernel, one label; and a named shape's record.
        d.tuned = [1024, 2048, 4096]
            .into_iter()
            .map(|n| {
                let mut r = record("p", Params::new().with("bufs", 2));
                r.record.shape = "net@tiny".into();
                r.record.dims = dims(n);
                r
            })
            .collect();
        d.tuned.push(record("p", Params::new().with("bufs", 3)));
        let page = html(&d);
        for n in [1024, 2048, 4096] {
            let row =
                format!("<tr><td>k&lt;&amp;&gt;</td><td>trn2</td><td>net@tiny {{n={n}}}</td>");
            assert_eq!(page.matches(&row).count(), 1, "{row}\n{page}");
        }
        // A label of its own needs no dimensions.
        assert!(page.contains("<tr><td>k&lt;&amp;&gt;</td><td>trn2</td><td>small</td>"), "{page}");
        // Two records of one named label at different dimensions (two edits of `small`,
        // say): each says its dimensions.
        d.tuned[0].record.shape = "small".into();
        let page = html(&d);
        assert!(
            page.contains("<td>small {n=1024}</td>") && page.contains("<td>small {}</td>"),
            "{page}"
        );
    }

    #[test]
    fn a_target_is_compared_with_its_own_packages_record_only() {
        use neuron_tune_protocol::Params;
        let mut d = data();
        d.targets[0].package = Some(crate::commands::tune::RunPackage {
            name: "b".into(),
            manifest: "b/Cargo.toml".into(),
        });
        d.targets[0].best = Some(super::super::model::Shown {
            params: Params::new().with("bufs", 2),
            time_us: 6.5,
            program_hash: "h".into(),
            profile: None,
        });
        // Package `a` has a same-named kernel whose record differs; `b`'s record is the
        // target's best. Matching by kernel name alone named `a`'s record as `b`'s.
        d.tuned = vec![
            record("a", Params::new().with("bufs", 3)),
            record("b", Params::new().with("bufs", 2)),
        ];
        let page = html(&d);
        assert!(!page.contains("The tuned database's record here"), "{page}");
        // Two packages' records: the table says whose each is.
        assert!(page.contains("<th>kernel</th><th>package</th>"), "{page}");
        assert!(page.contains("<tr><td>k&lt;&amp;&gt;</td><td>a</td>"), "{page}");
        // With `b`'s record the other one, the note names it.
        d.tuned[1].record.params = Params::new().with("bufs", 4);
        assert!(html(&d).contains("record here is <code>bufs=4</code>"), "{}", html(&d));
        // One package: no package column.
        d.tuned.remove(0);
        assert!(html(&d).contains("<th>kernel</th><th>chip</th>"));
    }

    #[test]
    fn each_run_has_its_convergence_and_a_goal_run_its_decision_log() {
        let html = html(&data());
        // Seed 1: nothing valid, 9, 7 → within 95 % of 7 only at evaluation 3; seed 2:
        // nothing valid, 8, 8.5 → at evaluation 2. One of three invalid in each.
        for (seed, at) in [(1, 3), (2, 2)] {
            let row = format!(
                "<tr><td>random seed {seed}</td><td class=\"n\">3</td><td>95 % of the final \
                 best after {at} evaluations;"
            );
            assert!(html.contains(&row), "{row}\n{html}");
        }
        assert_eq!(html.matches("33 % invalid").count(), 2);
        // The stored diagnosis of seed 2, escaped; seed 1 has none.
        assert_eq!(html.matches("<ul class=\"diagnoses\">").count(), 1);
        assert!(html.contains(
            "<p>Diagnosis of random seed 2:</p>\n<ul class=\"diagnoses\">\n<li><strong>slow: \
             checks took most of the run</strong><br>evidence: of 10 s: checks 9 s<br>advice: \
             draw &lt;smaller&gt; shapes</li>"
        ));
        // Only the goal run has a log: a row per round, the rolled-back one marked and its
        // reason escaped.
        assert_eq!(html.matches("<h3>Decision log:").count(), 1);
        assert!(html.contains("<h3>Decision log: random seed 2</h3>"));
        let log = &html[html.find("<table class=\"rounds\">").unwrap()..];
        let log = &log[..log.find("</table>").unwrap()];
        assert_eq!(log.matches("<tr class=").count(), 2, "{log}");
        assert!(log.contains("<tr class=\"kept\"><td class=\"n\">1</td><td class=\"n\">2</td>"));
        assert!(log.contains(
            "<tr class=\"rolled_back\"><td class=\"n\">2</td><td class=\"n\">1</td><td \
             class=\"n\">8.00</td><td>rolled back</td><td>wrong at shape &lt;large&gt;;"
        ));
    }

    #[test]
    fn runs_of_one_strategy_and_seed_are_told_apart_by_what_else_differs() {
        let mut d = data();
        // Seed 1 again, as a Pareto run (its journal is its own) with another budget, and a
        // run pinned by --params.
        let mut pareto = d.targets[0].runs[0].clone();
        pareto.meta.objective = "pareto".into();
        pareto.meta.budget = 5;
        pareto.journal = "tune-p.k-small-n4-trn2-random-pareto-1.jsonl".into();
        let mut pinned = d.targets[0].runs[0].clone();
        pinned.journal = "tune-p.k-small-n4-trn2-random-pinned-bufs-2-1.jsonl".into();
        d.targets[0].runs.push(pareto);
        d.targets[0].runs.push(pinned);
        let page = html(&d);
        // Budgets differ (3 and 5): each says its own; the time runs say no objective.
        for label in [
            "random seed 1 (budget 3)",
            "random seed 2 (budget 3)",
            "random seed 1 (pareto objective, budget 5)",
            "random seed 1 (pinned bufs-2, budget 3)",
        ] {
            let row = format!("<tr><td>{label}</td><td class=\"n\">3</td>");
            assert_eq!(page.matches(&row).count(), 1, "{row}\n{page}");
        }
        assert!(page.contains(
            "4 runs: random seed 1 (budget 3), 3 evaluations; random seed 2 (budget 3), 3 \
             evaluations; random seed 1 (pareto objective, budget 5), 3 evaluations; random \
             seed 1 (pinned bufs-2, budget 3), 3 evaluations."
        ));
        // The goal run's headings too.
        assert!(page.contains("<h3>Decision log: random seed 2 (budget 3)</h3>"));
        assert!(page.contains("<p>Diagnosis of random seed 2 (budget 3):</p>"));
    }

    #[test]
    fn the_header_counts_models_and_a_chip_filter_says_where_the_gate_runs_are() {
        let series = |model: &str, shape: &str, chip: &str| super::super::model::GateSeries {
            model: model.into(),
            shape: shape.into(),
            chip: chip.into(),
            points: vec![(1, 10.0)],
        };
        let mut d = data();
        // Two models, six series (three shapes or chips each).
        d.gate = ["a", "b"]
            .into_iter()
            .flat_map(|m| {
                [series(m, "tiny", "trn2"), series(m, "small", "trn2"), series(m, "tiny", "trn1")]
            })
            .collect();
        let page = html(&d);
        assert!(
            page.contains("; 2 models in the gate history (6 series of a model, shape and chip)."),
            "{page}"
        );
        // `--chip trn3`: the other chips' runs were left out; the page says they exist.
        d.gate.clear();
        d.chip = Some("trn3".into());
        d.gate_other_chips = vec!["trn1".into(), "trn2".into()];
        let page = html(&d);
        assert!(page.contains("; 0 models in the gate history on chip trn3."), "{page}");
        assert!(page.contains("No gate runs on chip trn3: the models have gate runs on trn1, trn2"));
        assert!(!page.contains("No gate runs yet"), "{page}");
        // None anywhere: on that chip, say how to make one.
        d.gate_other_chips.clear();
        assert!(html(&d).contains(
            "No gate runs on chip trn3 yet: run <code>cargo neuron-tune gate --chip trn3</code>"
        ));
    }

    #[test]
    fn the_convergence_chart_groups_runs_by_strategy_objective_and_pins() {
        let mut d = data();
        let base = d.targets[0].runs[0].clone();
        let run = |seed: u64, objective: &str, pinned: Option<&str>, journal: &str| {
            let mut r = base.clone();
            r.meta.seed = seed;
            r.meta.objective = objective.into();
            r.meta.pinned = pinned.map(String::from);
            r.journal = journal.into();
            r
        };
        // Beside the two time runs (seeds 1 and 2): a Pareto run of the same strategy, two
        // runs pinned to bufs=2 (one recorded its pins, one is older: only its journal's
        // name has them, `bufs-2`) and one pinned to another value, with another budget.
        let mut runs = vec![
            run(3, "pareto", None, "tune-p.k-small-n4-trn2-random-pareto-3.jsonl"),
            run(4, "time", Some("bufs=2"), "tune-p.k-small-n4-trn2-random-pinned-bufs-2-4.jsonl"),
            run(5, "time", None, "tune-p.k-small-n4-trn2-random-pinned-bufs-2-5.jsonl"),
            run(6, "time", Some("bufs=3"), "tune-p.k-small-n4-trn2-random-pinned-bufs-3-6.jsonl"),
        ];
        runs[3].meta.budget = 9;
        d.targets[0].runs.extend(runs);
        let page = html(&d);
        let (fig, n) = figure_of(&page, "convergence");
        // Four searches: the time runs (2 seeds), the Pareto run, bufs=2 (2 seeds, named as
        // given) and bufs=3. Each run evaluates nothing valid first, then two values: two
        // points per group, one circle each, and a band for each group of two seeds.
        for group in [
            "strategy random: median of 2 seeds",
            "strategy random (pareto objective): median of 1 seed",
            "strategy random (pinned bufs=2): median of 2 seeds",
            "strategy random (pinned bufs=3): median of 1 seed",
        ] {
            assert_eq!(fig.matches(&format!(">\n{group}\n<")).count(), 1, "{group}\n{fig}");
        }
        assert_eq!(fig.matches(": median of ").count(), 4, "{fig}");
        assert_eq!((n, fig.matches("<circle").count()), (8, 8), "{fig}");
        assert_eq!(fig.matches("<polygon").count(), 2, "{fig}");
        // The run table names the pins as the chart does: as given, or as an older run's
        // journal has them.
        assert!(page.contains("<tr><td>random seed 4 (pinned bufs=2, budget 3)</td>"), "{page}");
        assert!(page.contains("<tr><td>random seed 5 (pinned bufs-2, budget 3)</td>"), "{page}");
    }

    /// The SVG of the figure of `kind`, and its `data-points`.
    fn figure_of<'a>(html: &'a str, kind: &str) -> (&'a str, usize) {
        let start = html.find(&format!("data-chart=\"{kind}\"")).expect(kind);
        let fig = &html[start..start + html[start..].find("</figure>").unwrap()];
        let n = fig.split("data-points=\"").nth(1).unwrap().split('"').next().unwrap();
        (fig, n.parse().unwrap())
    }

    #[test]
    fn the_page_is_deterministic_escaped_and_draws_each_point() {
        let d = data();
        let html = html(&d);
        assert_eq!(html, super::html(&d), "same data, same page");
        assert!(html.contains("k&lt;&amp;&gt; @ small on trn2") && !html.contains("k<&>"));
        // Convergence: the first evaluation has no value in either seed, so the median line
        // has 2 points (evaluations 2 and 3), each a circle; two seeds draw a band.
        let (fig, n) = figure_of(&html, "convergence");
        assert_eq!(n, 2);
        assert_eq!(fig.matches("<circle").count(), 2, "{fig}");
        assert!(fig.contains("<polygon"), "a seed band");
        assert!(fig.contains("strategy random: median of 2 seeds"));
        let (fig, n) = figure_of(&html, "roofline");
        assert_eq!((n, fig.matches("<circle").count()), (2, 2));
        // No profile: the engine chart says there is nothing, rather than drawing empty axes.
        let (fig, n) = figure_of(&html, "utilization");
        assert_eq!(n, 0);
        assert!(!fig.contains("<svg") && fig.contains("nothing to draw"));
        // No Pareto run: no Pareto chart; no gate run: said so.
        assert!(!html.contains("data-chart=\"pareto\""));
        assert!(html.contains("No gate runs yet"));
        // Offline: nothing to fetch.
        assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("src="));
    }
}
