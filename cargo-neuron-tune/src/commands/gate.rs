//! `gate`: each selected model at each of its shapes, end to end with its tuned (or
//! default) kernels, against a baseline — the committed baseline file, or the same models
//! built from another git revision (`--base-ref`). The judgement is [`crate::gate`]'s; this
//! file measures, writes the reports and says the verdict.
//!
//! `--base-ref REF` checks REF out in the repository's base worktree under
//! `<target-dir>/neuron-tune/base/` (kept: a second run finds it at the commit and cargo
//! has nothing to do), builds its harnesses into the same target dir (dependency builds
//! are shared; its own packages get build units of their own) and, as every workspace's
//! workers do, runs its own links to its harness binaries (cargo puts both revisions'
//! binaries at the same path). Both revisions
//! share the variant store, so a program both have is simulated once; results are keyed
//! by the simulator version of the harness that produced them.

use super::open_store;
use crate::baseline::{self, Baseline};
use crate::cargo::CargoFlags;
use crate::cli::{GateOpts, PartitionOpts};
use crate::command_line::CommandLine;
use crate::exit::{fail, Exit, Failure};
use crate::gate::{
    call_params, call_times, dims, item_name, judge, moved_kernel, pct, tokens, Basis, Config,
    Item, Report, Side, Verdict, MOVED_FOOTNOTE, TOP_MOVED,
};
use crate::models::{self, ModelTarget};
use crate::output::{sgr, Event, GateSummary, Reporter, Summary, Table};
use crate::partition::keeps;
use crate::select::chip_spec;
use crate::store::{write_atomic, Store};
use crate::workspace::{Ctx, OpenOpts, Workspace};
use neuron_tune_protocol::ChipSpec;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the current models are compared with.
enum Against {
    File(Baseline),
    Rev { spec: String, commit: String, ws: Box<Workspace> },
}

pub fn run(
    cargo: &CargoFlags,
    g: &GateOpts,
    parts: &PartitionOpts,
    ctx: &Ctx,
) -> Result<Exit, Failure> {
    if !(g.threshold.is_finite() && g.threshold >= 0.0) {
        return Err(fail(Exit::Config, format!("--threshold {}: a percentage >= 0", g.threshold)));
    }
    let chip = chip_spec(&g.chip)?;
    let meta = cargo.metadata()?;
    // Before the base revision is built, so an unknown profile is not said of the base.
    cargo.check_profile(&meta)?;
    let root: PathBuf = meta.workspace_root.clone().into();
    // Absolute: git makes the base worktree from the workspace root, cargo from here.
    let target = cargo.target_dir(&meta);
    let target = std::path::absolute(&target).unwrap_or(target);
    // A damaged baseline file is said before anything is built. A missing one is said once
    // the workspace is known to have models: without any there is nothing to gate, and
    // advice to save a baseline would lead only to the same "no models".
    let file = g
        .base_ref
        .is_none()
        .then(|| g.baseline.clone().unwrap_or_else(|| root.join(baseline::FILE_NAME)));
    let read = match &file {
        Some(path) if path.exists() => Some(Baseline::load(path)?),
        _ => None,
    };
    let store = open_store(&target, &ctx.out)?;
    // The base revision is built first: building the current one afterwards leaves cargo's
    // binaries at their usual paths as they were (each side's workers run that side's own
    // links to its binaries: `crate::workspace`).
    let base = match &g.base_ref {
        None => None,
        Some(spec) => {
            let (commit, worktree, manifest) = base_checkout(&root, &target, spec, &ctx.out)?;
            let base_cargo = CargoFlags {
                manifest_path: Some(manifest),
                target_dir: Some(target.clone()),
                ..cargo.clone()
            };
            ctx.out.status(format!("   Building the base revision {spec} ({})", short(&commit)));
            let opts = OpenOpts { own_units_under: Some(worktree) };
            // The message says which revision; the exit code and a failed build's
            // diagnostics (the `error` event's) are kept.
            let ws = Workspace::open_with(&base_cargo, ctx, &opts).map_err(|f| Failure {
                message: format!("at the base revision {spec} ({}): {}", short(&commit), f),
                ..f
            })?;
            Some(Against::Rev { spec: spec.clone(), commit, ws: Box::new(ws) })
        }
    };
    let mut ws = Workspace::open(cargo, ctx)?;
    let lists: Vec<&neuron_tune_protocol::ListDoc> = ws.crates.iter().map(|c| &c.list).collect();
    // No models at all is said in `baseline save`'s words (what a model is).
    let targets: Vec<ModelTarget> = models::select_models(&lists, &g.models, &g.shapes)?
        .into_iter()
        .filter(|t| keeps(parts.partition, &item_name(&t.model, &t.shape_name, &chip.name)))
        .collect();
    let mut against = match (base, read, &file) {
        (Some(rev), _, _) => rev,
        (None, Some(b), _) => Against::File(b),
        // Missing: "no such baseline", and how to make one.
        (None, None, Some(path)) => Against::File(Baseline::load(path)?),
        (None, None, None) => unreachable!("a baseline file or a base revision"),
    };
    let described = match &against {
        Against::File(b) => b.path().display().to_string(),
        Against::Rev { spec, commit, .. } => format!("{spec} ({})", short(commit)),
    };
    if let Some(p) = parts.partition {
        ctx.out.status(format!("   Partition {p}: {} of the models' shapes", targets.len()));
    }
    let mut items = Vec::new();
    for t in &targets {
        ctx.out.status(format!("   Simulating {} at {} on {}", t.model, t.shape_name, chip.name));
        // The item's wall time (both sides), the JUnit test case's `time`.
        let started = std::time::Instant::now();
        let current = measure(&mut ws, t, &store, &chip, &ctx.out)?;
        let (base, base_note) = match &mut against {
            Against::File(b) => match b.find(&t.model, &t.shape_name, &chip.name) {
                Some(e) => {
                    (Some(Side { sim_version: e.sim_version.clone(), run: e.to_run() }), None)
                }
                None => (
                    None,
                    Some(format!(
                        "not in {} (`cargo neuron-tune baseline save` adds it)",
                        b.path().display()
                    )),
                ),
            },
            Against::Rev { spec, ws: base_ws, .. } => {
                match base_target(base_ws, &t.model, &t.shape_name) {
                    None => (
                        None,
                        Some(format!("no model `{}` at {} in {spec}", t.model, t.shape_name)),
                    ),
                    Some(bt) => {
                        ctx.out.status(format!(
                            "   Simulating {} at {} on {} at {spec}",
                            t.model, t.shape_name, chip.name
                        ));
                        match measure(base_ws, &bt, &store, &chip, &ctx.out)? {
                            Ok(side) => (Some(side), None),
                            Err(e) => {
                                (None, Some(format!("could not be evaluated at {spec}: {e}")))
                            }
                        }
                    }
                }
            }
        };
        let (current, error) = match current {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(e)),
        };
        items.push(Item {
            model: t.model.clone(),
            shape: t.shape_name.clone(),
            chip: chip.name.clone(),
            current,
            error,
            base,
            base_note,
            seconds: Some(started.elapsed().as_secs_f64()),
        });
    }
    let (gone, unknown) = gone_from_workspace(&against, &targets, g, &chip.name, parts, cargo);
    items.extend(gone);
    if !unknown.is_empty() {
        // Saved before entries named their package: with -p or --exclude it may be in a
        // package not selected, so it is neither judged nor called gone.
        ctx.out.note(format!(
            "note: not judged: {} of {described}, whose entries do not say which package \
             defines the model (saved by an older tool: `baseline save` again records it); \
             select every package to judge them",
            unknown.join(", ")
        ));
    }
    items.sort_by_key(|i| i.name());
    let baseline_hint = match &against {
        Against::File(b) => Some(baseline_hint(b, g, &chip.name, cargo)),
        Against::Rev { .. } => None,
    };
    let basis = match &against {
        Against::File(b) => Basis::BaselineFile { path: b.path().display().to_string() },
        Against::Rev { spec, commit, .. } => {
            Basis::BaseRef { base_ref: spec.clone(), commit: commit.clone() }
        }
    };
    let cfg = Config {
        threshold_pct: g.threshold,
        strict: g.strict,
        against: described,
        baseline_hint,
        basis: Some(basis),
    };
    let run_id = new_run_id();
    if let Some(path) = &parts.results {
        let r = super::merge::Results::Gate {
            partition: parts.partition,
            config: cfg.clone(),
            selection: selection(g, cargo, &chip.name),
            run_id: Some(run_id.clone()),
            items: items.clone(),
        };
        super::merge::write_results(path, &r)?;
        ctx.out.status(format!("   Wrote {}", path.display()));
    }
    // A partition that compares nothing is no failure of its own: its items may all be new
    // while the others compare; the merge (whose results keep the hint) judges the run.
    // Nor is it a gate run of its own in the gate history: the merge of its results is.
    let (cfg, history) = match parts.partition {
        Some(_) => (Config { baseline_hint: None, ..cfg }, None),
        None => (cfg, Some(run_id.as_str())),
    };
    let (md, junit) = (g.markdown.as_deref(), g.junit.as_deref());
    finish(&items, &cfg, &target, md, junit, history, &ctx.out)
}

/// A gate run's id in the gate history: its start in seconds since the epoch and the pid,
/// so two runs never share one.
pub(super) fn new_run_id() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{secs}-{}", std::process::id())
}

/// What a gate run selects, apart from the partition, as its results file records it: the
/// partitions of one run agree on every pair (`merge` names those that differ).
fn selection(g: &GateOpts, cargo: &CargoFlags, chip: &str) -> Vec<(String, String)> {
    let list = |v: &[String], none: &str| match v.is_empty() {
        true => none.to_string(),
        false => v.join(","),
    };
    let mut features = cargo.features.clone();
    if cargo.all_features {
        features.push("(all)".into());
    }
    if cargo.no_default_features {
        features.push("(no default)".into());
    }
    [
        ("--chip", chip.to_string()),
        ("--model", list(&g.models, "all")),
        ("--shape", list(&g.shapes, "all")),
        ("--package", list(&cargo.packages, "all")),
        ("--exclude", list(&cargo.exclude, "none")),
        ("--features", list(&features, "default")),
    ]
    .into_iter()
    .map(|(f, v)| (f.to_string(), v))
    .collect()
}

/// What a baseline file holds (its chips, each with its shapes, and its models) and the
/// `baseline save` that records this gate's selection in it: said when the gate compared
/// nothing.
fn baseline_hint(b: &Baseline, g: &GateOpts, chip: &str, cargo: &CargoFlags) -> String {
    use std::collections::{BTreeMap, BTreeSet};
    let mut shapes: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut models: BTreeSet<&str> = BTreeSet::new();
    for e in b.entries() {
        shapes.entry(&e.chip).or_default().insert(&e.shape);
        models.insert(&e.model);
    }
    let list = |v: &BTreeSet<&str>| v.iter().copied().collect::<Vec<_>>().join(", ");
    let holds = if shapes.is_empty() {
        "holds no entries".to_string()
    } else {
        let chips: Vec<String> = shapes
            .iter()
            .map(|(c, s)| {
                format!("chip {c} at shape{} {}", if s.len() == 1 { "" } else { "s" }, list(s))
            })
            .collect();
        format!(
            "holds {} (model{} {})",
            chips.join("; "),
            if models.len() == 1 { "" } else { "s" },
            list(&models)
        )
    };
    let save = CommandLine::new("baseline save")
        .selection(cargo)
        .opt_flag("--baseline", g.baseline.as_ref().map(|f| f.display()))
        .flags("--model", &g.models)
        .flags("--shape", &g.shapes)
        .flag("--chip", &g.chip);
    format!(
        "{} {holds}; `{}` records the models selected here on {chip} (commit the file), or \
         gate a chip and shape it holds",
        b.path().display(),
        save
    )
}

/// What the baseline measured, within the selection (`--model`, `--shape`, the chip, the
/// partition, the packages), that the workspace no longer has: a model or shape removed or
/// renamed. Each is a failed item (exit 4), so a gate never passes on models it did not
/// measure; `baseline save` drops such entries when the change is meant. Also returned,
/// apart: the entries not measured whose package is unknown (older files) under `-p` or
/// `--exclude`, which may be in a package not selected.
fn gone_from_workspace(
    against: &Against,
    targets: &[ModelTarget],
    g: &GateOpts,
    chip: &str,
    parts: &PartitionOpts,
    cargo: &CargoFlags,
) -> (Vec<Item>, Vec<String>) {
    let selected = |model: &str, shape: &str| {
        (g.models.is_empty() || g.models.iter().any(|p| crate::select::glob(p, model)))
            && (g.shapes.is_empty() || g.shapes.iter().any(|s| s == shape))
            && keeps(parts.partition, &item_name(model, shape, chip))
            && !targets.iter().any(|t| t.model == model && t.shape_name == shape)
    };
    let gone = |model: &str, shape: &str, base: Option<Side>, what: String| Item {
        model: model.into(),
        shape: shape.into(),
        chip: chip.into(),
        current: None,
        error: Some(what),
        base,
        base_note: None,
        seconds: None,
    };
    match against {
        Against::File(b) => {
            let (mut gone_items, mut unknown) = (Vec::new(), Vec::new());
            for e in b.entries().iter().filter(|e| e.chip == chip && selected(&e.model, &e.shape)) {
                match e.in_selection(cargo) {
                    None => unknown.push(format!("{} at {}", e.model, e.shape)),
                    // Another package's model: out of the selection.
                    Some(false) => {}
                    Some(true) => {
                        let side = Side { sim_version: e.sim_version.clone(), run: e.to_run() };
                        let what = format!(
                            "in {} but no longer in the workspace (no model `{}` with a shape \
                             `{}`); if that is meant, `cargo neuron-tune baseline save` drops it",
                            b.path().display(),
                            e.model,
                            e.shape
                        );
                        gone_items.push(gone(&e.model, &e.shape, Some(side), what));
                    }
                }
            }
            (gone_items, unknown)
        }
        // The base revision's workspace is opened with the same package selection, so
        // every model it lists is in a selected package.
        Against::Rev { spec, ws, .. } => (
            ws.crates
                .iter()
                .flat_map(|c| &c.list.models)
                .flat_map(|m| m.shapes.iter().map(move |(s, _)| (m.name.as_str(), s.as_str())))
                .filter(|(m, s)| selected(m, s))
                .map(|(m, s)| {
                    let what = format!(
                        "model `{m}` at `{s}` is in {spec} but no longer in the workspace \
                         (removed or renamed)"
                    );
                    gone(m, s, None, what)
                })
                .collect(),
            Vec::new(),
        ),
    }
}

/// One model measured in a workspace (with the tuned databases its crate links there), or
/// why it could not be.
fn measure(
    ws: &mut Workspace,
    t: &ModelTarget,
    store: &Store,
    chip: &ChipSpec,
    out: &Reporter,
) -> Result<Result<Side, String>, Failure> {
    let c = &mut ws.crates[t.krate];
    let records = ws.tuned.get()?.for_model(&c.krate.manifest_path, &chip.name);
    let tuned = records.tuned();
    let sim_version = c.list.sim_version.clone();
    let env = models::Bench {
        store,
        sim_version: &sim_version,
        chip,
        records: &records,
        force: false,
        out,
    };
    Ok(models::evaluate(&mut c.pool, &env, t, &tuned)?.map(|run| Side { sim_version, run }))
}

/// The same model at the same named shape in the base workspace (at its own dimensions).
fn base_target(ws: &Workspace, model: &str, shape: &str) -> Option<ModelTarget> {
    ws.crates.iter().enumerate().find_map(|(krate, c)| {
        let m = c.list.models.iter().find(|m| m.name == model)?;
        let (_, dims) = m.shapes.iter().find(|(n, _)| n == shape)?;
        Some(ModelTarget {
            krate,
            model: model.into(),
            shape_name: shape.into(),
            shape: dims.clone(),
        })
    })
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// Run git in `dir`: its stdout, trimmed, or its stderr.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| format!("could not run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Check `spec` out (detached) in the repository's base worktree,
/// `<target>/neuron-tune/base/<repository key>`, made on first use and moved to the commit
/// on later ones (git touches only the files that differ, so cargo rebuilds only what
/// changed, and nothing when the commit is the same); returns the commit and the
/// worktree and the workspace manifest in it. One worktree per repository, never one per commit:
/// cargo names a path package's build units by its path relative to the workspace root, so
/// two checkouts of the same workspace would share units, and one's fingerprints could
/// make the other's changed sources look fresh.
fn base_checkout(
    root: &Path,
    target: &Path,
    spec: &str,
    out: &Reporter,
) -> Result<(String, PathBuf, PathBuf), Failure> {
    let commit = git(root, &["rev-parse", "--verify", "--quiet", &format!("{spec}^{{commit}}")])
        .map_err(|e| not_a_commit(spec, root, &e))?;
    let not_git = |e: String| {
        fail(
            Exit::Config,
            format!("--base-ref: {} is not in a git repository ({e})", root.display()),
        )
    };
    let top = git(root, &["rev-parse", "--show-toplevel"]).map_err(not_git)?;
    let common =
        git(root, &["rev-parse", "--path-format=absolute", "--git-common-dir"]).map_err(not_git)?;
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let rel =
        canon(root).strip_prefix(canon(Path::new(&top))).map(Path::to_path_buf).unwrap_or_default();
    let dir = base_dir(target, &common);
    // Reuse only a worktree of its own (not a parent repository found above it) of this
    // repository.
    let reusable = dir.join(".git").is_file()
        && git(&dir, &["rev-parse", "--show-toplevel"])
            .is_ok_and(|t| canon(Path::new(&t)) == canon(&dir))
        && git(&dir, &["rev-parse", "--path-format=absolute", "--git-common-dir"])
            .is_ok_and(|c| canon(Path::new(&c)) == canon(Path::new(&common)));
    let d = dir.to_string_lossy().into_owned();
    if reusable {
        if git(&dir, &["rev-parse", "HEAD"]).ok().as_deref() != Some(commit.as_str()) {
            git(&dir, &["checkout", "-q", "--force", "--detach", &commit]).map_err(|e| {
                fail(Exit::Internal, format!("git checkout {} in {d}: {e}", short(&commit)))
            })?;
            out.status(format!("   Checked out {spec} ({}) in {d}", short(&commit)));
        }
    } else {
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| {
                fail(Exit::Internal, format!("removing the stale worktree {d}: {e}"))
            })?;
        }
        let _ = git(root, &["worktree", "prune"]);
        std::fs::create_dir_all(dir.parent().expect("under the target dir"))
            .map_err(|e| fail(Exit::Internal, format!("creating {d}: {e}")))?;
        git(root, &["worktree", "add", "--detach", "--force", &d, &commit]).map_err(|e| {
            fail(Exit::Internal, format!("git worktree add {d} {}: {e}", short(&commit)))
        })?;
        out.status(format!("   Checked out {spec} ({}) in {d}", short(&commit)));
    }
    let manifest = dir.join(rel).join("Cargo.toml");
    Ok((commit, dir, manifest))
}

/// `--base-ref` names no commit: git's own words (`rev-parse --quiet` has none for a ref
/// that does not exist, only for a repository it cannot read) in parentheses when it said any.
fn not_a_commit(spec: &str, root: &Path, git_said: &str) -> Failure {
    let said = match git_said.trim() {
        "" => String::new(),
        s => format!(" ({s})"),
    };
    fail(
        Exit::Config,
        format!(
            "--base-ref {spec}: not a commit of the git repository at {}{said}",
            root.display()
        ),
    )
}

/// The base worktree of the repository whose git common dir is `common`.
fn base_dir(target: &Path, common: &str) -> PathBuf {
    let canon = Path::new(common).canonicalize().unwrap_or_else(|_| PathBuf::from(common));
    let key = xxhash_rust::xxh3::xxh3_64(canon.to_string_lossy().as_bytes());
    target.join("neuron-tune").join("base").join(format!("{key:016x}"))
}

/// Judge the items, print the verdict, write the Markdown and JUnit reports, emit the
/// events; the exit code is the verdict's. `gate` and `merge` of gate results end here.
/// `history`: the id of the logical gate run, whose measurements go into the gate history
/// unless lines of that run are there already (`None`: a partition, whose merge records them).
pub(super) fn finish(
    items: &[Item],
    cfg: &Config,
    target: &Path,
    markdown: Option<&Path>,
    junit: Option<&Path>,
    history: Option<&str>,
    out: &Reporter,
) -> Result<Exit, Failure> {
    let report = judge(items, cfg);
    print(out, &report);
    let gate_dir = target.join("neuron-tune").join("gate");
    let md = crate::gate_report::markdown(&report);
    let io = |p: &Path, e: String| fail(Exit::Internal, format!("{}: {e}", p.display()));
    // Set but empty (a runner's template left blank) is as good as unset.
    let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty());
    let md_path = match (markdown, step_summary) {
        (Some(p), _) => {
            write_atomic(p, md.as_bytes()).map_err(|e| io(p, format!("{e:#}")))?;
            p.to_path_buf()
        }
        (None, Some(summary)) => {
            let p = PathBuf::from(summary);
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
                .map_err(|e| io(&p, e.to_string()))?;
            writeln!(f, "{md}").map_err(|e| io(&p, e.to_string()))?;
            p
        }
        (None, None) => {
            let p = gate_dir.join("summary.md");
            write_atomic(&p, md.as_bytes()).map_err(|e| io(&p, format!("{e:#}")))?;
            p
        }
    };
    let junit_path = junit.map_or_else(|| gate_dir.join("junit.xml"), Path::to_path_buf);
    let xml = crate::gate_report::junit(&report);
    write_atomic(&junit_path, xml.as_bytes()).map_err(|e| io(&junit_path, format!("{e:#}")))?;
    out.status(format!("   Wrote {} and {}", md_path.display(), junit_path.display()));
    for c in &report.comparisons {
        out.event(&Event::Gate(Box::new(c.clone())));
    }
    if let Some(run) = history {
        let lock = target.join("neuron-tune/journals/gate-history.lock");
        let waiting = || {
            let who = "another gate or merge recording its run";
            out.note(format!("    Blocking waiting for {who} (lock {})", lock.display()))
        };
        record_history(&target.join("neuron-tune"), run, &report, out, waiting)?;
    }
    out.event(&Event::GateSummary(Box::new(GateSummary {
        against: report.config.against.clone(),
        threshold_pct: report.config.threshold_pct,
        strict: report.config.strict,
        counts: report.counts.clone(),
        moved: report.moved.iter().take(2 * TOP_MOVED).cloned().collect(),
        stale: report.stale.clone(),
        notes: report.all_notes(),
        exit_code: report.exit_code,
        markdown: Some(md_path),
        junit: Some(junit_path),
    })));
    // Calls measured now and at the base revision (a baseline file's come from the file).
    let runs = items.iter().flat_map(|i| i.current.iter().chain(&i.base));
    let calls: Vec<&models::CallTime> = runs.flat_map(|s| &s.run.calls).collect();
    let cached = calls.iter().filter(|c| c.cached).count();
    out.event(&Event::Summary(Summary {
        command: "gate".into(),
        variants: calls.len(),
        simulated: Some(calls.len() - cached),
        cached: Some(cached),
        failed: Some(report.counts.failed),
        ..Default::default()
    }));
    out.status(format!(
        "   {} kernel calls: {} simulated, {cached} from the store",
        calls.len(),
        calls.len() - cached
    ));
    // Compared nothing against a baseline file: an error (exit 2) like any configuration
    // error, said after the reports that say it too were written.
    if let (Exit::Config, Some(why)) = (report.exit(), &report.nothing_compared) {
        return Err(fail(Exit::Config, why.clone()));
    }
    Ok(report.exit())
}

/// The throughput history the report charts (`journals/gate-history.jsonl` under the store
/// root): one line per model measured now, keyed by the logical gate run `run` and saying
/// what it was compared against. A run whose lines are there already (its results merged
/// again) adds none.
fn record_history(
    store_root: &Path,
    run: &str,
    report: &Report,
    out: &Reporter,
    waiting: impl FnOnce(),
) -> Result<(), Failure> {
    let path = store_root.join("journals").join("gate-history.jsonl");
    // The look for the run and the appends are one step: two merges of the same results at
    // once (a retried CI job) would otherwise both find the run absent and both append it.
    // The lock is released when `_lock` is dropped, or the process ends.
    let _lock = lock_history(store_root, waiting)
        .map_err(|e| fail(Exit::Internal, format!("locking the gate history: {e}")))?;
    let read = crate::store::read_journal(&path)
        .map_err(|e| fail(Exit::Internal, format!("reading the gate history: {e:#}")))?;
    // The history is never resumed: a line it cannot use (cut short by a killed gate, edited)
    // would stay in it for good, and `report` would warn of it on every page. Set aside
    // under the lock, as `tune --resume` sets a journal's aside: said once, kept to look at.
    // Lines of a newer tool (one sharing the target dir) are not damage: they stay.
    let damaged = read.damaged();
    if let Some((first, why)) = damaged.first() {
        let numbers: Vec<usize> = damaged.iter().map(|(n, _)| *n).collect();
        let aside = crate::store::set_aside_journal_lines(&path, &numbers)
            .map_err(|e| fail(Exit::Internal, format!("the gate history: {e:#}")))?;
        out.note(format!(
            "warning: {}:{first}: not used ({why}); moved {} to {}",
            path.display(),
            crate::convergence::count(numbers.len(), "unusable line"),
            aside.display()
        ));
    }
    let lines = read.lines;
    if lines.iter().any(|l| l["run"] == run) {
        out.status(format!(
            "   Gate history: run {run} is in {} already (these results were merged before)",
            path.display()
        ));
        return Ok(());
    }
    for c in report.comparisons.iter().filter(|c| c.tokens_per_s.is_some()) {
        let mut line = serde_json::json!({
            "run": run, "model": c.model, "shape": c.shape, "chip": c.chip,
            "tokens_per_s": c.tokens_per_s, "total_us": c.total_us,
        });
        if let Some(basis) = &report.config.basis {
            line["against"] = serde_json::to_value(basis).expect("a plain enum");
        }
        crate::store::append_journal(store_root, "gate-history", &line)
            .map_err(|e| fail(Exit::Internal, format!("writing the gate history: {e:#}")))?;
    }
    Ok(())
}

/// An exclusive lock on the gate history (`journals/gate-history.lock`), waited for.
/// `waiting` is called once, before blocking, when another process holds the lock.
fn lock_history(store_root: &Path, waiting: impl FnOnce()) -> std::io::Result<std::fs::File> {
    let dir = store_root.join("journals");
    std::fs::create_dir_all(&dir)?;
    let file = std::fs::File::create(dir.join("gate-history.lock"))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            waiting();
            file.lock()?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    Ok(file)
}

/// The verdict for people: a table of the models, the calls that moved, notes, stale
/// entries, the headline.
fn print(out: &Reporter, r: &Report) {
    out.result(format!(
        "\n  gate against {}, threshold {} %",
        r.config.against, r.config.threshold_pct
    ));
    let mut t = Table::new(&[
        "model",
        "shape",
        "chip",
        ">baseline tok/s",
        ">current tok/s",
        ">change",
        "verdict",
    ]);
    for c in &r.comparisons {
        let num = |v: Option<f64>| v.map_or("-".to_string(), tokens);
        t.row(vec![
            c.model.clone(),
            c.shape.clone(),
            c.chip.clone(),
            num(c.baseline_tokens_per_s),
            num(c.tokens_per_s),
            c.change_pct.map_or("-".into(), pct),
            c.verdict.as_str().into(),
        ]);
        match c.verdict {
            Verdict::Regression | Verdict::Failed => t.paint_last(6, sgr::RED),
            Verdict::Improvement => t.paint_last(6, sgr::GREEN),
            Verdict::NotComparable => t.paint_last(6, sgr::YELLOW),
            Verdict::Unchanged | Verdict::New => {}
        }
    }
    out.table(&t, "  ");
    if !r.moved.is_empty() {
        out.result("\n  kernel calls whose time moved most:");
        let mut t = Table::new(&[
            "kernel",
            "call shape",
            "params",
            ">µs per call",
            ">Δ µs, all calls",
            "models",
        ]);
        for m in r.moved.iter().take(TOP_MOVED) {
            t.row(vec![
                moved_kernel(m),
                dims(&m.shape),
                call_params(m),
                call_times(m),
                format!("{:+.1}", m.delta_total_us),
                m.models.join(", "),
            ]);
        }
        out.table(&t, "  ");
        out.result(format!("  {MOVED_FOOTNOTE}"));
    }
    for n in &r.notes {
        out.note(format!("note: {n}"));
    }
    for c in &r.comparisons {
        if let (Some(n), true) = (&c.note, c.verdict != Verdict::NotComparable) {
            let what = if c.verdict == Verdict::Failed { "error" } else { "note" };
            out.note(format!("{what}: {} at {} on {}: {n}", c.model, c.shape, c.chip));
        }
    }
    for s in &r.stale {
        out.note(format!(
            "{}: stale tuned entry: {s}",
            if r.config.strict { "error" } else { "warning" }
        ));
    }
    out.result(format!("\n  {}", crate::gate_report::headline(r)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::gate::tests::{cfg, item};
    use clap::Parser;

    /// The `baseline save` a gate that compared nothing suggests is the gate's own
    /// selection, each value quoted for a shell when it needs it (a path with a space, a
    /// glob the shell would expand): split as a shell splits it, it is those values, and a
    /// `baseline save` that parses.
    #[test]
    fn the_suggested_baseline_save_is_the_gates_selection_as_a_shell_reads_it() {
        let argv = ["cargo-neuron-tune", "gate", "--manifest-path", "my ws/Cargo.toml", "-p", "k"];
        let rest =
            ["--baseline", "it's.toml", "--model", "qwen*", "--shape", "tiny", "--chip", "trn1"];
        let Command::Gate { cargo, gate, .. } = Cli::parse_from(argv.iter().chain(&rest)).command
        else {
            unreachable!("a gate command line")
        };
        let dir = tempfile::tempdir().unwrap();
        let b = Baseline::load_or_empty(&dir.path().join("b.toml")).unwrap();
        let hint = baseline_hint(&b, &gate, "trn1", &cargo);
        let save = hint.split('`').nth(1).unwrap_or_else(|| panic!("{hint}"));
        assert_eq!(
            save,
            "cargo neuron-tune baseline save --manifest-path 'my ws/Cargo.toml' -p k --baseline \
             \"it's.toml\" --model 'qwen*' --shape tiny --chip trn1"
        );
        let words = shlex::split(save).unwrap();
        let mut expected = vec!["cargo", "neuron-tune", "baseline", "save"];
        expected.extend(&argv[2..]);
        expected.extend(&rest);
        assert_eq!(words, expected);
        let parsed = Cli::try_parse_from(["cargo-neuron-tune"].iter().chain(&expected[2..]));
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    /// One line per model per logical gate run, saying what it was compared against; the
    /// same run recorded again (its results merged once more) adds nothing.
    #[test]
    fn the_gate_history_records_each_run_once_with_what_it_was_compared_against() {
        let dir = tempfile::tempdir().unwrap();
        let items = [item("qwen3", Some(17.6), 18.6), item("qwen3_naive", Some(17.6), 18.6)];
        let basis = Basis::BaseRef { base_ref: "HEAD~1".into(), commit: "abc".into() };
        let report = judge(&items, &Config { basis: Some(basis), ..cfg(0.0) });
        let out = Reporter::new(true);
        let lines = || {
            let path = dir.path().join("journals/gate-history.jsonl");
            crate::store::read_journal(&path).unwrap().lines
        };
        record_history(dir.path(), "merge-1", &report, &out, || ()).unwrap();
        record_history(dir.path(), "merge-1", &report, &out, || ()).unwrap();
        let once = lines();
        assert_eq!(once.len(), 2, "{once:?}");
        for l in &once {
            assert_eq!(l["run"], "merge-1");
            let against =
                serde_json::json!({"kind": "base_ref", "base_ref": "HEAD~1", "commit": "abc"});
            assert_eq!(l["against"], against, "{l}");
        }
        record_history(dir.path(), "100-7", &report, &out, || ()).unwrap();
        assert_eq!(lines().len(), 4);
    }

    /// A line of the history that cannot be used (a gate killed while writing it) is set
    /// aside by the next recording, under its lock, so that `report` stops warning of it:
    /// the history is never resumed, and the line would otherwise stay for good. The line
    /// is kept, whole, in `gate-history.jsonl.rejected`; the lines around it are untouched.
    #[test]
    fn an_unusable_history_line_is_set_aside_by_the_next_recording() {
        let dir = tempfile::tempdir().unwrap();
        let report = judge(&[item("qwen3", Some(17.6), 18.6)], &cfg(0.0));
        let out = Reporter::new(true);
        let history = dir.path().join("journals/gate-history.jsonl");
        record_history(dir.path(), "100-1", &report, &out, || ()).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&history).unwrap();
        // A line a newer tool wrote (a higher schema, sealed as it would seal it) is not
        // damage: it stays where it is for that tool.
        let mut newer =
            serde_json::json!({"run": "100-0", "schema": crate::store::JOURNAL_SCHEMA + 1});
        crate::seal::seal_json(&mut newer);
        std::io::Write::write_all(&mut f, format!("{newer}\n").as_bytes()).unwrap();
        std::io::Write::write_all(&mut f, b"{\"run\":\"100-2\",\"mod").unwrap();
        drop(f);
        let damage = crate::report::model::gate_history_damage(dir.path());
        assert!(damage.is_some_and(|d| d.contains("line 3 not used (not JSON")));
        record_history(dir.path(), "100-3", &report, &out, || ()).unwrap();
        let read = crate::store::read_journal(&history).unwrap();
        let runs: Vec<&str> = read.lines.iter().map(|l| l["run"].as_str().unwrap()).collect();
        assert_eq!(runs, ["100-1", "100-3"]);
        assert_eq!(read.newer, [2], "the newer tool's line stays: {:?}", read.rejected);
        let said = crate::report::model::gate_history_damage(dir.path()).unwrap();
        assert!(said.contains("1 line from a newer cargo-neuron-tune not shown (line 2"), "{said}");
        let aside = std::fs::read_to_string(history.with_extension("jsonl.rejected")).unwrap();
        assert_eq!(aside, "{\"run\":\"100-2\",\"mod\n");
    }

    /// Looking for the run and appending its lines hold the history's lock, so two merges
    /// of one gate run at once cannot both find it absent: while another process (here, the
    /// test) holds the lock, a recording waits, and after it records nothing twice.
    #[test]
    fn recording_the_gate_history_waits_for_its_lock() {
        let dir = tempfile::tempdir().unwrap();
        let report = judge(&[item("qwen3", Some(17.6), 18.6)], &cfg(0.0));
        let history = dir.path().join("journals/gate-history.jsonl");
        let held = lock_history(dir.path(), || panic!("nobody holds it yet")).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let root = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let waiting = || tx.send(()).unwrap();
            record_history(&root, "merge-1", &report, &Reporter::new(true), waiting).unwrap()
        });
        // Received only if the recorder found the lock held and is about to block on it (a
        // recorder that took no lock never calls `waiting`, and `recv` fails when it ends);
        // no timing is involved.
        rx.recv().expect("the recorder found the lock held and said it waits");
        assert!(!history.exists(), "written while another held the lock");
        drop(held);
        waiter.join().unwrap();
        assert_eq!(crate::store::read_journal(&history).unwrap().lines.len(), 1);
    }

    /// A `--base-ref` that names no commit is said in one clean sentence: git says nothing
    /// for a missing ref (`--quiet`), which left a stray space at the end; what git does say
    /// comes in parentheses.
    #[test]
    fn a_bad_base_ref_is_said_without_a_stray_space() {
        let dir = tempfile::tempdir().unwrap();
        let (root, target) = (dir.path().join("repo"), dir.path().join("target"));
        std::fs::create_dir_all(&root).unwrap();
        git(&root, &["init", "-q"]).unwrap();
        let e = base_checkout(&root, &target, "no-such-ref", &Reporter::new(true)).unwrap_err();
        assert_eq!(e.exit, Exit::Config);
        let said = format!(
            "--base-ref no-such-ref: not a commit of the git repository at {}",
            root.display()
        );
        assert_eq!(e.message, said);
        let e = not_a_commit("no-such-ref", &root, "fatal: not a git repository\n");
        assert_eq!(e.message, format!("{said} (fatal: not a git repository)"));
    }
}
