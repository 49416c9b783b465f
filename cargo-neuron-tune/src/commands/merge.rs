//! Results files of partitioned runs (`--partition k/n --results FILE`) and `merge`, which
//! joins them into what one unpartitioned run reports.
//!
//! A results file is JSON: the command, the partition, and the command's work items with
//! everything its report needs (`gate`: each model's measurements on both sides and the
//! judging config; `bench`: each variant's result; `tune`: the tuned records the run wrote).
//! `merge` checks that it has every partition of one `n` exactly once, joins the items in
//! the order one run gives them (gate items by name; bench rows by their index in the whole
//! run's grid, which each results file records) and reports as the command would: `gate` judges them (same
//! verdicts, reports and exit code), `bench` prints its tables, `tune` records the tuned
//! entries into the tuned databases (paths relative to the workspace root).

use crate::cargo::CargoFlags;
use crate::eval::Measured;
use crate::exit::{fail, Exit, Failure};
use crate::gate::{Config, Item};
use crate::partition::Partition;
use crate::select::Variant;
use crate::store::write_atomic;
use crate::tuned::{Recorded, TunedDb, TunedRecord, Written};
use crate::workspace::Ctx;
use neuron_tune_protocol::Params;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A command's results, as one run (or one partition) produced them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Results {
    Gate {
        partition: Option<Partition>,
        config: Config,
        /// What was gated, apart from the partition, as (flag, value) pairs: the chip,
        /// `--model`, `--shape` and the packages (partitions of different runs are not
        /// joined; absent from files written before it was recorded).
        #[serde(default)]
        selection: Vec<(String, String)>,
        /// The gate run these are results of, which keys its lines in the gate history:
        /// each gate run's own (`<unix seconds>-<pid>`); merged results, one derived from
        /// their partitions' ([`gate_run_id`]). Absent from files written before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        /// Sorted by name.
        items: Vec<Item>,
    },
    Bench {
        partition: Option<Partition>,
        /// What was run, apart from the partition (`Selection::describe`): partitions of
        /// different runs (another chip, shape or grid) are not joined.
        #[serde(default)]
        run: String,
        /// The chip's name (every partition's is the same: it is part of `run`).
        #[serde(default)]
        chip: String,
        rows: Vec<(Variant, Measured)>,
        /// Each row's index in the whole run's grid (every partition's variants in the order
        /// the unpartitioned run gives them), by which `merge` orders the joined rows. Absent
        /// from files written before it was recorded (their rows are ordered by name).
        #[serde(default)]
        row_index: Vec<usize>,
        /// The variants whose kernel code panicked, crashed or hung (rows of bench's table;
        /// absent from files written before they were).
        #[serde(default)]
        failed: Vec<super::bench::FailedVariant>,
        /// Each failed variant's index in the whole run's grid, as `row_index`.
        #[serde(default)]
        failed_index: Vec<usize>,
        /// Each kernel's default parameters (for the gain of the best variant).
        defaults: Vec<(String, Params)>,
        invalid: usize,
        crashed: usize,
    },
    Tune {
        partition: Option<Partition>,
        /// What was run, apart from the partition (the selection and the search flags).
        #[serde(default)]
        run: String,
        /// The tuned records the run added or changed, with their database's path
        /// relative to the workspace root.
        records: Vec<(PathBuf, TunedRecord)>,
        /// How the partition ended when not with success: exit 4 (a check failed, kernel
        /// code crashed) or 6 (`--goal` not met), and why. Its records are kept all the same.
        #[serde(default)]
        failure: Option<(u8, String)>,
    },
}

impl Results {
    fn command(&self) -> &'static str {
        match self {
            Results::Gate { .. } => "gate",
            Results::Bench { .. } => "bench",
            Results::Tune { .. } => "tune",
        }
    }

    fn partition(&self) -> Option<Partition> {
        match self {
            Results::Gate { partition, .. }
            | Results::Bench { partition, .. }
            | Results::Tune { partition, .. } => *partition,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct File {
    tool_version: String,
    #[serde(flatten)]
    results: Results,
}

/// The schema of a results file (its `schema` field).
const RESULTS_SCHEMA: u64 = 1;

/// Write a results file (atomically, sealed: `merge` records its tuned winners, so it must
/// not take an edited or damaged file for what a run measured).
pub fn write_results(path: &Path, results: &Results) -> Result<(), Failure> {
    let file = File { tool_version: env!("CARGO_PKG_VERSION").into(), results: results.clone() };
    let mut value = serde_json::to_value(&file)
        .map_err(|e| fail(Exit::Internal, format!("{}: {e}", path.display())))?;
    if let Some(obj) = value.as_object_mut() {
        obj.insert("schema".into(), RESULTS_SCHEMA.into());
    }
    crate::seal::seal_json(&mut value);
    let text = serde_json::to_string_pretty(&value)
        .map_err(|e| fail(Exit::Internal, format!("{}: {e}", path.display())))?;
    write_atomic(path, text.as_bytes())
        .map_err(|e| fail(Exit::Internal, format!("{}: {e:#}", path.display())))
}

/// Read a results file, refusing one whose seal or schema does not hold.
pub fn read_results(path: &Path) -> Result<Results, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| fail(Exit::Config, format!("{}: {e}", path.display())))?;
    let not_ours = |why: String| {
        fail(
            Exit::Config,
            format!("{}: not a cargo neuron-tune results file ({why})", path.display()),
        )
    };
    let mut value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| not_ours(e.to_string()))?;
    crate::seal::unseal_json(&mut value).map_err(|why| {
        fail(
            Exit::Config,
            format!(
                "{}: not used: {why}; write it again with the command's --results",
                path.display()
            ),
        )
    })?;
    match value.as_object_mut().and_then(|o| o.remove("schema")).and_then(|s| s.as_u64()) {
        Some(RESULTS_SCHEMA) => {}
        other => {
            return Err(not_ours(format!("schema {other:?}, this tool reads {RESULTS_SCHEMA}")))
        }
    }
    let file: File = serde_json::from_value(value).map_err(|e| not_ours(e.to_string()))?;
    Ok(file.results)
}

/// The tuned records of the workspace's local packages, with their database's path
/// relative to the workspace root (what `tune --results` compares before and after).
pub fn tuned_snapshot(cargo: &CargoFlags) -> Result<Vec<(PathBuf, TunedRecord)>, Failure> {
    let meta = cargo.metadata()?;
    let root: PathBuf = meta.workspace_root.clone().into();
    let set = crate::models::TunedSet::load(&meta)?;
    Ok(set
        .records()
        .map(|(p, r)| (p.strip_prefix(&root).unwrap_or(p).to_path_buf(), r.clone()))
        .collect())
}

/// Join every partition's items: the partitions must be 1..=n of one n, each once.
fn check_partitions(files: &[PathBuf], all: &[Results]) -> Result<(), Failure> {
    let command = all[0].command();
    if let Some((f, r)) = files.iter().zip(all).find(|(_, r)| r.command() != command) {
        return Err(fail(
            Exit::Config,
            format!("{}: results of `{}`, the others are of `{command}`", f.display(), r.command()),
        ));
    }
    let parts: Vec<Option<Partition>> = all.iter().map(Results::partition).collect();
    if parts.iter().all(Option::is_none) && all.len() == 1 {
        return Ok(());
    }
    let Some(n) = parts.iter().flatten().map(|p| p.n).next() else {
        return Err(fail(
            Exit::Config,
            "unpartitioned results can only be merged alone".to_string(),
        ));
    };
    let mut ks = Vec::new();
    for (f, p) in files.iter().zip(&parts) {
        match p {
            Some(p) if p.n == n && !ks.contains(&p.k) => ks.push(p.k),
            Some(p) if p.n == n => {
                return Err(fail(
                    Exit::Config,
                    format!("{}: partition {p} given twice", f.display()),
                ))
            }
            other => {
                return Err(fail(
                    Exit::Config,
                    format!(
                        "{}: partition {}, the others are partitions of {n}",
                        f.display(),
                        other.map_or("none".into(), |p| p.to_string())
                    ),
                ))
            }
        }
    }
    let missing: Vec<String> =
        (1..=n).filter(|k| !ks.contains(k)).map(|k| format!("{k}/{n}")).collect();
    if !missing.is_empty() {
        return Err(fail(
            Exit::Config,
            format!("missing the results of partition(s) {}", missing.join(", ")),
        ));
    }
    Ok(())
}

/// Partitions of different runs (`what` = how they were run) are not joined.
fn differently(what: &str, a: &str, b: &str) -> Result<(), Failure> {
    if a == b {
        return Ok(());
    }
    Err(fail(Exit::Config, format!("the partitions were {what} differently ({a} vs {b})")))
}

/// How a partition of tune ended (`why`, its error), said as the merge's: which partition,
/// and that the paths it names (its journals) are on the machine that ran it. An
/// unpartitioned run's is its own.
fn of_partition(partition: Option<Partition>, why: &str) -> String {
    let Some(p) = partition else { return why.to_string() };
    let lines: Vec<String> = why.lines().map(|l| format!("  {l}")).collect();
    format!("partition {p} (its paths are on the machine that ran it):\n{}", lines.join("\n"))
}

/// Every setting two gate partitions were run with differently, each as "what: a vs b".
fn gated_differently(
    a: &Config,
    a_sel: &[(String, String)],
    b: &Config,
    b_sel: &[(String, String)],
) -> Vec<String> {
    let mut differs = Vec::new();
    let mut say = |what: &str, x: String, y: String| {
        if x != y {
            differs.push(format!("{what} {x} vs {y}"));
        }
    };
    // Every field, so that a new one cannot be left out of the message.
    // (`basis` is what `against` says, as data.)
    let Config { threshold_pct, strict, against, baseline_hint, basis: _ } = a;
    let on = |b: bool| if b { "on" } else { "off" }.to_string();
    say("--strict", on(*strict), on(b.strict));
    say("--threshold", format!("{threshold_pct} %"), format!("{} %", b.threshold_pct));
    say("against", against.clone(), b.against.clone());
    // A file written before the selection was recorded has none to compare.
    let recorded = !a_sel.is_empty() && !b_sel.is_empty();
    let mut flags: Vec<&str> = Vec::new();
    for (f, _) in a_sel.iter().chain(b_sel).filter(|_| recorded) {
        if !flags.contains(&f.as_str()) {
            flags.push(f);
        }
    }
    for f in flags {
        let value = |sel: &[(String, String)]| {
            sel.iter().find(|(g, _)| g == f).map_or("(none)".into(), |(_, v)| v.clone())
        };
        say(f, value(a_sel), value(b_sel));
    }
    // The hint says what the baseline file holds: when nothing else differs, the
    // partitions read different versions of the file.
    if differs.is_empty() && *baseline_hint != b.baseline_hint {
        let hint = |h: &Option<String>| h.clone().unwrap_or_else(|| "nothing".into());
        differs.push(format!(
            "the baseline file's entries ({} vs {})",
            hint(baseline_hint),
            hint(&b.baseline_hint)
        ));
    }
    differs
}

/// The gate run that results files of `gate` are of, which keys the gate history: one
/// unpartitioned run's own id; for partitions, `merge-` and a hash of their ids in partition
/// order (a file written before runs had ids stands for itself by a hash of its results).
/// So merging the same files again, in any order, is the same run, and merging a run's own
/// results is that run. `None` for other commands' results.
fn gate_run_id(all: &[Results]) -> Option<String> {
    let mut ids = Vec::new();
    for r in all {
        let Results::Gate { partition, run_id, .. } = r else { return None };
        let id = run_id.clone().unwrap_or_else(|| {
            let text = serde_json::to_string(r).unwrap_or_default();
            format!("results-{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
        });
        ids.push((partition.map_or(0, |p| p.k), id));
    }
    ids.sort();
    match ids.as_slice() {
        [(0, id)] => Some(id.clone()),
        _ => {
            let all: Vec<&str> = ids.iter().map(|(_, id)| id.as_str()).collect();
            Some(format!("merge-{:016x}", xxhash_rust::xxh3::xxh3_64(all.join("\n").as_bytes())))
        }
    }
}

/// Join `all` (same command, partitions checked) into the results of one run.
pub fn join(mut all: Vec<Results>) -> Result<Results, Failure> {
    let gate_run = gate_run_id(&all);
    // In partition order, whatever the files' order: what is said of each partition is too.
    all.sort_by_key(|r| r.partition().map(|p| p.k));
    let mut it = all.into_iter();
    let mut acc = it.next().expect("at least one results file");
    if let Results::Tune { partition, failure, .. } = &mut acc {
        *failure = failure.take().map(|(code, why)| (code, of_partition(*partition, &why)));
    }
    for r in it {
        match (&mut acc, r) {
            (
                Results::Gate { partition, config, selection, items, .. },
                Results::Gate { partition: p, config: c, selection: s, items: i, .. },
            ) => {
                let differs = gated_differently(config, selection, &c, &s);
                if !differs.is_empty() {
                    let which = |p: &Option<Partition>| {
                        p.map_or("unpartitioned".to_string(), |p| format!("partition {p}"))
                    };
                    return Err(fail(
                        Exit::Config,
                        format!(
                            "the partitions were gated differently ({} vs {}): {}",
                            which(partition),
                            which(&p),
                            differs.join("; ")
                        ),
                    ));
                }
                items.extend(i);
            }
            (
                Results::Bench {
                    run,
                    rows,
                    row_index,
                    failed,
                    failed_index,
                    defaults,
                    invalid,
                    crashed,
                    ..
                },
                Results::Bench {
                    run: other,
                    rows: r,
                    row_index: ri,
                    failed: f,
                    failed_index: fi,
                    defaults: d,
                    invalid: i,
                    crashed: c,
                    ..
                },
            ) => {
                differently("benchmarked", run, &other)?;
                // A file without the grid's indices (for rows it has) leaves the merge none
                // to order by.
                let indexed = row_index.len() == rows.len()
                    && failed_index.len() == failed.len()
                    && ri.len() == r.len()
                    && fi.len() == f.len();
                if indexed {
                    row_index.extend(ri);
                    failed_index.extend(fi);
                } else {
                    row_index.clear();
                    failed_index.clear();
                }
                rows.extend(r);
                failed.extend(f);
                for x in d {
                    if !defaults.contains(&x) {
                        defaults.push(x);
                    }
                }
                *invalid += i;
                *crashed += c;
            }
            (
                Results::Tune { run, records, failure, .. },
                Results::Tune { partition: p, run: other, records: r, failure: f },
            ) => {
                differently("tuned", run, &other)?;
                records.extend(r);
                let f = f.map(|(code, why)| (code, of_partition(p, &why)));
                // Exit 4 wins over 6, as in one run; the reasons are all kept.
                *failure = match (failure.take(), f) {
                    (Some((a, x)), Some((b, y))) => {
                        let code = if a == Exit::Check.code() || b == Exit::Check.code() {
                            Exit::Check.code()
                        } else {
                            a
                        };
                        Some((code, format!("{x}\n{y}")))
                    }
                    (a, b) => a.or(b),
                };
            }
            _ => unreachable!("the commands were checked"),
        }
    }
    match &mut acc {
        Results::Gate { partition, items, run_id, .. } => {
            *partition = None;
            *run_id = gate_run;
            items.sort_by_key(Item::name);
            if let Some(w) = items.windows(2).find(|w| w[0].name() == w[1].name()) {
                return Err(fail(Exit::Config, format!("{} is in two partitions", w[0].name())));
            }
        }
        Results::Bench { partition, rows, row_index, failed, failed_index, defaults, .. } => {
            *partition = None;
            // The unpartitioned run's order: each variant's place in the whole grid. Files
            // written before they recorded it get each row's place by name instead, so
            // that from here on every merged bench has an index per row.
            if row_index.len() != rows.len() || failed_index.len() != failed.len() {
                let mut order: Vec<_> = rows.iter().map(|(v, _)| bench_order(v)).collect();
                order.extend(failed.iter().map(|f| bench_order(&f.variant)));
                order.sort();
                let at = |v: &Variant| order.binary_search(&bench_order(v)).unwrap_or(order.len());
                *row_index = rows.iter().map(|(v, _)| at(v)).collect();
                *failed_index = failed.iter().map(|f| at(&f.variant)).collect();
            }
            sort_by_index(rows, row_index);
            sort_by_index(failed, failed_index);
            defaults.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Results::Tune { partition, records, .. } => {
            *partition = None;
            records.sort_by(|a, b| {
                (&a.0, &a.1.kernel, &a.1.chip, &a.1.shape).cmp(&(
                    &b.0,
                    &b.1.kernel,
                    &b.1.chip,
                    &b.1.shape,
                ))
            });
        }
    }
    Ok(acc)
}

/// Sort `items` by their `index` (both in the same order, one per item).
fn sort_by_index<T>(items: &mut Vec<T>, index: &mut Vec<usize>) {
    let mut both: Vec<(usize, T)> = index.drain(..).zip(items.drain(..)).collect();
    both.sort_by_key(|(i, _)| *i);
    for (i, item) in both {
        index.push(i);
        items.push(item);
    }
}

/// The order of a merged bench's variants when the files do not record the grid's (written
/// before they did): by name.
fn bench_order(v: &Variant) -> (String, String, String) {
    (v.kernel.clone(), v.shape_name.clone(), v.params.to_string())
}

pub fn run(
    cargo: &CargoFlags,
    files: &[PathBuf],
    markdown: Option<&Path>,
    junit: Option<&Path>,
    results: Option<&Path>,
    ctx: &Ctx,
) -> Result<Exit, Failure> {
    let all: Vec<Results> = files.iter().map(|f| read_results(f)).collect::<Result<_, _>>()?;
    check_partitions(files, &all)?;
    let merged = join(all)?;
    if let Some(p) = results {
        write_results(p, &merged)?;
        ctx.out.status(format!("   Wrote {}", p.display()));
    }
    let out = &ctx.out;
    match merged {
        Results::Gate { config, items, run_id, .. } => {
            let target = match cargo.metadata() {
                Ok(meta) => cargo.target_dir(&meta),
                Err(_) => cargo.target_dir.clone().unwrap_or_else(|| PathBuf::from("target")),
            };
            // One logical gate run: its history lines once, however often it is merged.
            let run = run_id.unwrap_or_else(super::gate::new_run_id);
            super::gate::finish(&items, &config, &target, markdown, junit, Some(&run), out)
        }
        Results::Bench {
            chip,
            rows,
            row_index,
            failed,
            failed_index,
            defaults,
            invalid,
            crashed,
            ..
        } => {
            // Each variant's event, as the unpartitioned run gave it while it ran.
            for (v, m) in &rows {
                out.event(&super::bench::bench_event(v, &chip, m));
            }
            for f in &failed {
                out.event(&f.event(&chip));
            }
            // One order for both kinds of row, the table interleaves them: the grid's, as
            // joined (`join` gives every row its index).
            let rows: Vec<(usize, Variant, Measured)> =
                row_index.into_iter().zip(rows).map(|(i, (v, m))| (i, v, m)).collect();
            let failed: Vec<_> = failed_index.into_iter().zip(failed).collect();
            Ok(super::bench::report(
                out,
                &chip,
                &rows,
                &failed,
                &defaults,
                (invalid, crashed),
                None,
            ))
        }
        Results::Tune { records, failure, .. } => {
            let root: PathBuf = cargo.metadata()?.workspace_root.into();
            let recorded = record_tuned(&root, records, out)?;
            out.event(&crate::output::Event::Summary(crate::output::Summary {
                command: "merge".into(),
                variants: recorded,
                failed: Some(usize::from(failure.is_some())),
                ..Default::default()
            }));
            match failure {
                None => Ok(Exit::Ok),
                Some((code, why)) => {
                    let exit = if code == Exit::GoalNotMet.code() {
                        Exit::GoalNotMet
                    } else {
                        Exit::Check
                    };
                    Err(fail(exit, why))
                }
            }
        }
    }
}

/// Record the partitions' tuned records into the databases of the checkout at `root`, as one
/// run would: a record the checkout has that is no slower (and timed by the same simulator)
/// stands, since the partitions never saw it. Each database's status line counts what each
/// record did to it, as `tune`'s does ([`Written`]): a file no record changed is said
/// unchanged, and is not written. Returns the records recorded.
fn record_tuned(
    root: &Path,
    records: Vec<(PathBuf, TunedRecord)>,
    out: &crate::output::Reporter,
) -> Result<usize, Failure> {
    // Each database with what the merge did to it and whether it recorded anything in it.
    let mut dbs: Vec<(TunedDb, Written, bool)> = Vec::new();
    let mut recorded = 0;
    for (file, record) in records {
        let dir = root.join(&file).parent().map(Path::to_path_buf).unwrap_or_default();
        let i = match dbs.iter().position(|d| d.0.path().parent() == Some(dir.as_path())) {
            Some(i) => i,
            None => {
                let db = TunedDb::load(&dir)?;
                let before = std::fs::read(db.path()).ok();
                let written = Written::new(db.path().to_path_buf(), before);
                dbs.push((db, written, false));
                dbs.len() - 1
            }
        };
        let (db, written, changed) = &mut dbs[i];
        let kept = db.records().iter().find(|r| {
            r.kernel == record.kernel
                && r.chip == record.chip
                && r.dims == record.dims
                && r.sim_version == record.sim_version
                && r.time_us <= record.time_us
        });
        if let Some(kept) = kept {
            out.result(format!(
                "  {} {} at {} on {}: kept the recorded {} ({:.1} µs; the partitions' best {} \
                 is not faster, {:.1} µs)",
                db.path().display(),
                record.kernel,
                record.shape,
                record.chip,
                kept.params,
                kept.time_us,
                record.params,
                record.time_us
            ));
            // What one run does with a record it keeps, which it finds exactly as it was.
            written.count(Recorded::Unchanged);
            continue;
        }
        out.result(format!(
            "  {} {} at {} on {}: {} ({:.1} µs)",
            db.path().display(),
            record.kernel,
            record.shape,
            record.chip,
            record.params,
            record.time_us
        ));
        written.count(db.record(record));
        *changed = true;
        recorded += 1;
    }
    for (db, written, changed) in &mut dbs {
        if *changed {
            db.save()?;
        }
        out.status(written.line());
    }
    Ok(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::tests::{cfg, item};

    fn gate(k: u32, names: &[&str]) -> Results {
        Results::Gate {
            partition: Some(Partition { k, n: 3 }),
            config: cfg(0.0),
            selection: vec![("--chip".into(), "trn2".into()), ("--shape".into(), "tiny".into())],
            run_id: Some(format!("100-{k}")),
            items: names.iter().map(|n| item(n, Some(17.6), 18.6)).collect(),
        }
    }

    #[test]
    fn partitions_join_in_canonical_order_and_must_all_be_there_once() {
        let files: Vec<PathBuf> = ["a", "b", "c"].iter().map(PathBuf::from).collect();
        let all = vec![gate(2, &["m2"]), gate(1, &["m3", "m1"]), gate(3, &[])];
        check_partitions(&files, &all).unwrap();
        let Results::Gate { items, partition, .. } = join(all).unwrap() else { panic!() };
        assert_eq!(partition, None);
        let names: Vec<&str> = items.iter().map(|i| i.model.as_str()).collect();
        assert_eq!(names, ["m1", "m2", "m3"]);
        let e = check_partitions(&files[..2], &[gate(1, &[]), gate(3, &[])]).unwrap_err();
        assert!(e.message.contains("missing the results of partition(s) 2/3"), "{}", e.message);
        let e = check_partitions(&files[..2], &[gate(1, &[]), gate(1, &[])]).unwrap_err();
        assert!(e.message.contains("given twice"), "{}", e.message);
        let dup = join(vec![gate(1, &["m1"]), gate(2, &["m1"])]).unwrap_err();
        assert!(dup.message.contains("two partitions"), "{}", dup.message);
    }

    /// A check failure (4) in one partition wins over a goal not met (6) in another, as in
    /// one run; with no failure anywhere there is none.
    #[test]
    fn a_failed_partition_decides_the_merged_exit() {
        let tune = |k: u32, failure: Option<(u8, &str)>| Results::Tune {
            partition: Some(Partition { k, n: 3 }),
            run: "same".into(),
            records: Vec::new(),
            failure: failure.map(|(c, m)| (c, m.to_string())),
        };
        let failure = |all: Vec<Results>| match join(all).unwrap() {
            Results::Tune { failure, .. } => failure,
            _ => panic!("tune"),
        };
        let (six, four) = (Exit::GoalNotMet.code(), Exit::Check.code());
        let f = failure(vec![
            tune(1, Some((six, "goal"))),
            tune(2, None),
            tune(3, Some((four, "check"))),
        ]);
        // Each partition's reasons under its name: the paths they name (journals) are the
        // partition machine's.
        let of = |p: &str, why: &str| {
            format!("partition {p} (its paths are on the machine that ran it):\n  {why}")
        };
        assert_eq!(f, Some((four, format!("{}\n{}", of("1/3", "goal"), of("3/3", "check")))));
        assert_eq!(
            failure(vec![tune(2, Some((six, "g\nh"))), tune(1, None)]),
            Some((six, of("2/3", "g\n  h")))
        );
        assert_eq!(failure(vec![tune(1, None), tune(2, None)]), None);
        let mut other = tune(3, None);
        if let Results::Tune { run, .. } = &mut other {
            *run = "other".into();
        }
        let e = join(vec![tune(1, None), other]).unwrap_err();
        assert!(e.message.contains("tuned differently (same vs other)"), "{}", e.message);
    }

    /// Partitions gated with other settings are not joined, and the refusal names each
    /// setting that differs with both values — not what the two have in common.
    #[test]
    fn gate_partitions_run_differently_are_refused_naming_each_difference() {
        let refusal = |a: Results, b: Results| join(vec![a, b]).unwrap_err().message;
        let mut strict = gate(1, &["m1"]);
        if let Results::Gate { config, .. } = &mut strict {
            config.strict = true;
        }
        assert_eq!(
            refusal(strict.clone(), gate(2, &["m2"])),
            "the partitions were gated differently (partition 1/3 vs partition 2/3): \
             --strict on vs off"
        );
        let mut other = gate(2, &["m2"]);
        if let Results::Gate { config, selection, .. } = &mut other {
            config.threshold_pct = 0.5;
            config.against = "b.toml".into();
            selection[0].1 = "trn1".into();
            selection.push(("--model".into(), "qwen3".into()));
        }
        assert_eq!(
            refusal(strict, other),
            "the partitions were gated differently (partition 1/3 vs partition 2/3): \
             --strict on vs off; --threshold 0 % vs 0.5 %; against HEAD~1 (abc) vs b.toml; \
             --chip trn2 vs trn1; --model (none) vs qwen3"
        );
        // Only what the baseline file holds differs: the partitions read two versions of it.
        let mut hinted = gate(3, &["m3"]);
        if let Results::Gate { config, .. } = &mut hinted {
            config.baseline_hint = Some("b.toml holds chip trn2".into());
        }
        let e = refusal(gate(1, &[]), hinted);
        assert!(
            e.ends_with(": the baseline file's entries (nothing vs b.toml holds chip trn2)"),
            "{e}"
        );
        // Files written before the selection was recorded are compared on the rest.
        let mut old = gate(2, &["m2"]);
        if let Results::Gate { selection, .. } = &mut old {
            selection.clear();
        }
        assert!(join(vec![gate(1, &["m1"]), old]).is_ok());
    }

    /// The merged results are one gate run, the same whichever order the files come in and
    /// however often they are merged; other partitions are another run, and an unpartitioned
    /// run's own results are that run.
    #[test]
    fn merged_gate_results_are_one_run_however_often_they_are_merged() {
        let id = |all: Vec<Results>| match join(all).unwrap() {
            Results::Gate { run_id, .. } => run_id.unwrap(),
            _ => panic!("gate"),
        };
        let parts = || vec![gate(1, &["m1"]), gate(2, &["m2"]), gate(3, &["m3"])];
        let once = id(parts());
        assert!(once.starts_with("merge-"), "{once}");
        assert_eq!(id(parts().into_iter().rev().collect()), once);
        let mut again = parts();
        if let Results::Gate { run_id, .. } = &mut again[1] {
            *run_id = Some("200-2".into());
        }
        assert_ne!(id(again), once, "another partition 2/3 is another run");
        // Files written before runs had ids stand for themselves by their content.
        let mut old = parts();
        for r in &mut old {
            if let Results::Gate { run_id, .. } = r {
                *run_id = None;
            }
        }
        assert_eq!(id(old.clone()), id(old.clone()));
        if let Results::Gate { items, .. } = &mut old[0] {
            items[0].current = None;
        }
        assert_ne!(id(old.clone()), id(parts()));
        let mut whole = gate(1, &["m1"]);
        if let Results::Gate { partition, run_id, .. } = &mut whole {
            (*partition, *run_id) = (None, Some("300-1".into()));
        }
        assert_eq!(id(vec![whole]), "300-1");
    }

    /// Merged bench rows come in the unpartitioned run's order (each row's index in the
    /// whole grid), not by name; files without the indices fall back to names.
    #[test]
    fn merged_bench_rows_keep_the_grid_order() {
        let variant = |kernel: &str, p: i64| Variant {
            krate: None,
            kernel: kernel.into(),
            shape_name: "small".into(),
            shape: neuron_tune_protocol::Shape::new(&[("n", 8)]),
            params: Params::new().with("cols", p),
        };
        let failed = |kernel: &str, p: i64| super::super::bench::FailedVariant {
            variant: variant(kernel, p),
            kind: "panic".into(),
            message: "boom".into(),
        };
        let bench = |k: u32, rows: &[(&str, i64, usize)], f: &[(&str, i64, usize)]| {
            let measured = Measured {
                bench: neuron_tune_protocol::BenchResult {
                    cycles: 0,
                    time_us: 1.0,
                    kernel_time_us: 1.0,
                    tflops: 0.0,
                    bottleneck: String::new(),
                    bottleneck_summary: String::new(),
                    program_hash: String::new(),
                    instruction_count: 0,
                    shape: Default::default(),
                    work: Default::default(),
                    sbuf_bytes_per_partition: 0,
                    hbm_bytes: 0,
                    hardware_flops: 0.0,
                    physical_cores: None,
                    profile: None,
                    trace: None,
                },
                cached: false,
            };
            Results::Bench {
                partition: Some(Partition { k, n: 2 }),
                run: "same".into(),
                chip: "trn2".into(),
                rows: rows.iter().map(|(n, p, _)| (variant(n, *p), measured.clone())).collect(),
                row_index: rows.iter().map(|r| r.2).collect(),
                failed: f.iter().map(|(n, p, _)| failed(n, *p)).collect(),
                failed_index: f.iter().map(|r| r.2).collect(),
                defaults: Vec::new(),
                invalid: 0,
                crashed: f.len(),
            }
        };
        let order = |r: Results| match r {
            Results::Bench { rows, failed, .. } => {
                let name = |v: &Variant| format!("{}:{}", v.kernel, v.params);
                let mut all: Vec<String> = rows.iter().map(|(v, _)| name(v)).collect();
                all.extend(failed.iter().map(|f| name(&f.variant)));
                all
            }
            _ => panic!("bench"),
        };
        let one = bench(1, &[("softmax", 1024, 0), ("softmax", 256, 1)], &[]);
        let two = bench(2, &[("add", 1024, 3), ("add", 256, 4)], &[("add", 512, 2)]);
        let merged = join(vec![two.clone(), one.clone()]).unwrap();
        let Results::Bench { row_index, failed_index, .. } = &merged else { panic!() };
        assert_eq!((row_index.clone(), failed_index.clone()), (vec![0, 1, 3, 4], vec![2]));
        assert_eq!(
            order(merged),
            [
                "softmax:cols=1024",
                "softmax:cols=256",
                "add:cols=1024",
                "add:cols=256",
                "add:cols=512"
            ]
        );
        // A file written before the indices were recorded: by name, failed rows among the
        // others (`add:cols=512` between `add:cols=256` and `softmax:…`), each row given
        // its place so that the table interleaves them without sorting again.
        let mut old = one;
        if let Results::Bench { row_index, .. } = &mut old {
            row_index.clear();
        }
        let merged = join(vec![old, two]).unwrap();
        let Results::Bench { row_index, failed_index, .. } = &merged else { panic!() };
        assert_eq!((row_index.clone(), failed_index.clone()), (vec![0, 1, 3, 4], vec![2]));
        assert_eq!(
            order(merged),
            [
                "add:cols=1024",
                "add:cols=256",
                "softmax:cols=1024",
                "softmax:cols=256",
                "add:cols=512"
            ]
        );
    }

    #[test]
    fn results_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let r = gate(1, &["m1"]);
        write_results(&p, &r).unwrap();
        assert_eq!(read_results(&p).unwrap(), r);
        std::fs::write(&p, "{}").unwrap();
        assert_eq!(read_results(&p).unwrap_err().exit, Exit::Config);
    }
}
