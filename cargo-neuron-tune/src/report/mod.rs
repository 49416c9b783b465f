//! `report`: one self-contained HTML page of what tuning and the gate found, for people who
//! would rather look than read (what each chart shows and where its data comes from:
//! docs/report.md).
//!
//! [`model`] gathers what the store, the tune journals (and their meta files), the tuned
//! databases and the gate history hold; [`render`] writes the page, its charts drawn by
//! [`charts`]. The only thing not stored by the commands that produced the data is the full
//! profile (per-engine busy time) and the Perfetto trace of the variants the report shows
//! (each target's best and default): the report asks the harness for those once and keeps
//! them in the store (kind `profile`), so a second report simulates nothing.

pub mod charts;
pub mod model;
pub mod packages;
pub mod render;

use crate::cargo::CargoFlags;
use crate::commands::tune::RunPackage;
use crate::eval::variant_ref;
use crate::exit::{fail, Exit, Failure};
use crate::output::Event;
use crate::select::{glob, Variant};
use crate::store::{write_atomic, Store};
use crate::tuned::TunedDb;
use crate::workspace::{Ctx, Workspace};
use neuron_tune_protocol::{RequestBody, ResponseBody};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The largest program whose Perfetto trace `report` writes, in instructions: about 100 MB
/// of trace (measured on attention_flash: 2.5 slices an instruction, a DMA's split over its
/// queues, of about 290 bytes each — 690 bytes an instruction at `small`, 616 at qwen3's
/// shape, whose 901,120 instructions made a 555 MB trace that ui.perfetto.dev cannot open
/// and cost `report` GBs of memory). Larger programs are profiled without their trace, and
/// the page gives the `profile --trace` command that writes it.
pub const TRACE_MAX_INSTRUCTIONS: u64 = 150_000;

/// The same limit on a stored trace's text (one an earlier version stored).
pub const TRACE_MAX_BYTES: usize = 100 << 20;

/// Whether the report writes the trace of profile `p` (when it has one).
pub fn trace_fits(p: &neuron_tune_protocol::BenchResult) -> bool {
    p.instruction_count <= TRACE_MAX_INSTRUCTIONS
        && p.trace.as_ref().is_none_or(|t| t.len() <= TRACE_MAX_BYTES)
}

/// The command that writes the full trace of variant `s` of target `t`.
pub fn trace_command(t: &model::Target, s: &model::Shown, file: &str) -> String {
    crate::command_line::CommandLine::new("profile")
        .opt_flag("-p", t.package.as_ref().map(|p| &p.name))
        .arg(&t.kernel)
        .flag("--shape", &t.shape)
        .flag("--params", &s.params)
        .record_chip(&t.chip.name)
        .flag("--trace", file)
        .to_string()
}

/// What `report` was asked for.
pub struct Args<'a> {
    pub out: Option<&'a Path>,
    pub open: bool,
    /// Kernel globs (empty: all).
    pub kernels: &'a [String],
    pub chip: Option<&'a str>,
}

pub fn run(cargo: &CargoFlags, a: &Args, ctx: &Ctx) -> Result<Exit, Failure> {
    let out = &ctx.out;
    let (out_dir, open) = (a.out, a.open);
    // A bad --out is refused before anything is built or profiled.
    if let Some(dir) = out_dir {
        // Said as the output files' flags say it (`crate::store::unwritable`).
        if let Some(why) = crate::store::unwritable(&dir.join("index.html")) {
            return Err(fail(Exit::Config, format!("--out {}: {why}", dir.display())));
        }
        // A directory that cannot be made is a file that could not be written (exit 1),
        // as for every output file.
        std::fs::create_dir_all(dir).map_err(|e| {
            fail(Exit::Internal, format!("--out {}: could not create it: {e}", dir.display()))
        })?;
    }
    let mut ws = Workspace::open(cargo, ctx)?;
    // A --kernel that names no kernel is a typo, as in every other command.
    for p in a.kernels {
        if !ws.crates.iter().flat_map(|c| &c.list.kernels).any(|k| glob(p, &k.name)) {
            return Err(fail(
                Exit::Config,
                format!("--kernel {p}: no such kernel (have: {})", ws.kernel_names()),
            ));
        }
    }
    // A chip file goes by its file name, as its results do.
    let chip = a.chip.map(|c| match c.strip_suffix(".toml") {
        Some(_) => Path::new(c).file_stem().map_or(c.to_string(), |s| s.to_string_lossy().into()),
        None => c.to_string(),
    });
    let store = crate::commands::open_store(&ws.target_dir, out)?;
    let kernel_ok = |k: &str| a.kernels.is_empty() || a.kernels.iter().any(|p| glob(p, k));
    let chip_ok = |c: &str| chip.as_deref().is_none_or(|x| x == c);
    // The journals and the gate history are the target dir's, which other packages (and
    // other workspaces) may share: only the selected packages' runs and models are
    // reported. A run goes by the package its meta file names (`packages::pick`); one
    // journaled before meta files named it, by its kernel's name, said when ambiguous.
    let models_here: HashSet<String> =
        ws.crates.iter().flat_map(|c| &c.list.models).map(|m| m.name.clone()).collect();
    let selected: Vec<packages::Selected> = ws
        .crates
        .iter()
        .map(|c| packages::Selected {
            package: RunPackage::of(&ws.root, &c.krate),
            kernels: c.list.kernels.iter().map(|k| k.name.clone()).collect(),
            models: c.list.models.iter().map(|m| m.name.clone()).collect(),
        })
        .collect();
    let read = model::read_runs(store.root());
    // A run whose meta file or journal cannot be read is left out, and said (when it may be
    // one of the selected packages'): never a run that silently vanished.
    for (journal, why) in &read.skipped {
        if packages::may_be_selected(journal, &selected) {
            out.note(format!("warning: {why}; its run is not shown"));
        }
    }
    let mut runs = read.runs;
    let any_runs = !runs.is_empty();
    // Chips anything was recorded for (a chip file's results go by its name, so a name
    // that is neither built in nor among these is a typo).
    let mut seen_chips: Vec<String> = runs.iter().map(|r| r.meta.chip.name.clone()).collect();
    runs.retain(|r| kernel_ok(&r.meta.kernel) && chip_ok(&r.meta.chip.name));
    let picked = packages::pick(&selected, &ws.unselected, runs);
    let runs = picked.runs;
    // Lines of a shown run's journal that could not be read: the run is shown with the
    // others, and said.
    for damage in runs.iter().filter_map(model::TuneRun::damage) {
        out.note(format!("warning: {damage}"));
    }
    if !picked.ambiguous.is_empty() {
        out.note(format!(
            "note: tune runs of {} were journaled before journals named their package, and \
             are matched by the kernel's name: another package has, or may have, a kernel of \
             that name, whose runs they may be (tune again to record the package)",
            picked.ambiguous.join(", ")
        ));
    }
    let mut tuned = Vec::new();
    for c in &ws.crates {
        let dir = c.krate.manifest_path.parent().map(PathBuf::from).unwrap_or_default();
        let package = c.krate.package.clone();
        tuned.extend(TunedDb::load(&dir)?.records().iter().map(|record| model::PackageRecord {
            package: package.clone(),
            record: record.clone(),
        }));
    }
    // A selected crate's models run other packages' records (the kernel crate's database,
    // which `tune --model` writes): those of its models' calls are its too, as their runs
    // are — the records its models use (`TunedSet::for_model`: of the packages its crate
    // links, each for its own kernels), as `bench --model` reads them (a damaged
    // database is refused, as there).
    if selected.iter().any(|s| !s.models.is_empty()) {
        let set = ws.tuned.get()?;
        let own: Vec<&Path> =
            ws.crates.iter().filter_map(|c| c.krate.manifest_path.parent()).collect();
        for (path, record) in set.records() {
            let dir = path.parent().unwrap_or(Path::new(""));
            let manifest = dir.join("Cargo.toml");
            let used = ws.crates.iter().zip(&selected).any(|(c, s)| {
                !s.models.is_empty()
                    && set
                        .for_model(&c.krate.manifest_path, &record.chip)
                        .sees(&manifest, &record.kernel)
                    && packages::of_selected_models(record, std::slice::from_ref(s), &runs)
            });
            if !own.contains(&dir) && used {
                let package = package_in(dir);
                tuned.push(model::PackageRecord { package, record: record.clone() });
            }
        }
    }
    let any_tuned = !tuned.is_empty();
    seen_chips.extend(tuned.iter().map(|r| r.record.chip.clone()));
    tuned.retain(|r| kernel_ok(&r.record.kernel) && chip_ok(&r.record.chip));
    let data = model::build(&store, runs.clone(), tuned.clone());
    seen_chips.extend(data.gate.iter().map(|g| g.chip.clone()));
    if let Some(c) = chip.as_deref() {
        if neuron_sim::Chip::builtin(c).is_none() && !seen_chips.iter().any(|s| s == c) {
            seen_chips.sort();
            seen_chips.dedup();
            return Err(fail(
                Exit::Config,
                format!(
                    "--chip {c}: not a built-in chip (trn1, trn2, trn3) and nothing was recorded \
                     for a chip of that name (recorded: {})",
                    if seen_chips.is_empty() { "none".into() } else { seen_chips.join(", ") }
                ),
            ));
        }
    }
    let profiled = profile_shown(&mut ws, &store, &data, ctx)?;
    // Built again with the new profiles: the first, traces and all, is dropped first.
    drop(data);
    let mut data = model::build(&store, runs, tuned);
    if let Some(damage) = model::gate_history_damage(store.root()) {
        out.note(format!("warning: {damage}"));
    }
    let any_gate = !data.gate.is_empty();
    data.gate.retain(|g| models_here.contains(&g.model));
    // `--chip`: the other chips' gate runs are left out, and the page says they exist.
    data.gate_other_chips =
        data.gate.iter().filter(|g| !chip_ok(&g.chip)).map(|g| g.chip.clone()).collect();
    data.gate_other_chips.sort();
    data.gate_other_chips.dedup();
    data.gate.retain(|g| chip_ok(&g.chip));
    data.chip = chip.clone();
    if data.targets.is_empty() && data.tuned.is_empty() && data.gate.is_empty() {
        // Say whether there is nothing at all, or nothing the filters let through.
        if any_runs || any_tuned || any_gate {
            let filters = [
                (!a.kernels.is_empty()).then(|| format!("--kernel {}", a.kernels.join(","))),
                chip.as_ref().map(|c| format!("--chip {c}")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
            out.note(format!(
                "warning: nothing to report for {}: what there is (tune journals, tuned \
                 databases, gate runs) is of other kernels, chips or packages",
                match filters.is_empty() {
                    true => "the selected packages".to_string(),
                    false => filters.join(" "),
                }
            ));
        } else {
            out.note(
                "warning: nothing to report yet: no tune journal, tuned database or gate run \
                 (run `cargo neuron-tune tune` or `gate` first)",
            );
        }
    }

    let dir =
        out_dir.map_or_else(|| ws.target_dir.join("neuron-tune").join("report"), Path::to_path_buf);
    // An output file that cannot be written is exit 1, naming it (as `profile --trace`).
    let io = |p: &Path, e: anyhow::Error| {
        fail(Exit::Internal, format!("{}: could not be written: {e:#}", p.display()))
    };
    let mut traces = Vec::new();
    for t in &data.targets {
        for (which, s) in [("best", &t.best), ("default", &t.default)] {
            let Some((s, profile)) = s.as_ref().and_then(|s| Some((s, s.profile.as_ref()?))) else {
                continue;
            };
            match &profile.trace {
                Some(text) => {
                    let p = dir.join(render::trace_file(t, which));
                    write_atomic(&p, text.as_bytes()).map_err(|e| io(&p, e))?;
                    traces.push(p);
                }
                None => out.note(format!(
                    "note: the trace of {} {} at {} ({which}) is not written: its {} \
                     instructions are over the report's limit of {TRACE_MAX_INSTRUCTIONS} \
                     (Perfetto's web UI cannot open such a trace); `{}` writes it",
                    t.kernel,
                    s.params,
                    t.shape,
                    profile.instruction_count,
                    trace_command(t, s, &render::trace_file(t, which)),
                )),
            }
        }
    }
    let page = dir.join("index.html");
    write_atomic(&page, render::html(&data).as_bytes()).map_err(|e| io(&page, e))?;
    // Earlier reports' traces the page no longer links are removed — only once the new ones
    // and the page are written (a crash before leaves extra files, never a page linking a
    // missing one), and only files named as this tool names traces.
    remove_old_traces(&dir, &traces, out);
    out.status(format!(
        "   Wrote {} traces next to it (open them in ui.perfetto.dev)",
        traces.len()
    ));
    out.event(&Event::Report {
        path: page.clone(),
        targets: data.targets.len(),
        tuned: data.tuned.len(),
        gate_series: data.gate.len(),
        traces,
        profiled,
    });
    out.result(page.display().to_string());
    if open {
        open_in_browser(&page, out);
    }
    Ok(Exit::Ok)
}

/// The name of the package whose manifest is in `dir` (a local package's, whose tuned
/// database is beside it), or the directory when its manifest does not say.
fn package_in(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| Some(t.get("package")?.get("name")?.as_str()?.to_string()))
        .unwrap_or_else(|| dir.display().to_string())
}

/// Profile (with a trace) each shown variant that has no stored profile, through the
/// harness of the crate that lists its kernel, and store it; returns how many programs it
/// asked for. A program shown twice (the default is the best) is asked for once. A run
/// whose simulator version is not the harness's is left as it is: its profile would be
/// another simulator's.
fn profile_shown(
    ws: &mut Workspace,
    store: &Store,
    data: &model::ReportData,
    ctx: &Ctx,
) -> Result<usize, Failure> {
    let mut asked = std::collections::HashSet::new();
    for t in &data.targets {
        // The crate of the run's package; for a run that names none, one listing the kernel.
        let root = ws.root.clone();
        let Some(c) = ws.crates.iter_mut().find(|c| match &t.package {
            Some(p) => RunPackage::of(&root, &c.krate) == *p,
            None => c.list.kernels.iter().any(|k| k.name == t.kernel),
        }) else {
            continue;
        };
        if c.list.sim_version != t.sim_version {
            ctx.out.status(format!(
                "   {} @ {} was tuned with simulator {} (the harness has {}): no engine chart or trace",
                t.kernel, t.shape, t.sim_version, c.list.sim_version
            ));
            continue;
        }
        for s in [&t.best, &t.default].into_iter().flatten().filter(|s| s.profile.is_none()) {
            let key = Store::key_for(
                &s.program_hash,
                &crate::eval::chip_key(&t.chip),
                &t.sim_version,
                "profile",
            );
            if !asked.insert(key.clone()) {
                continue;
            }
            let v = Variant {
                krate: None,
                kernel: t.kernel.clone(),
                shape_name: t.shape.clone(),
                shape: t.dims.clone(),
                params: s.params.clone(),
            };
            ctx.out.status(format!("   Profiling {} {} at {}", t.kernel, s.params, t.shape));
            // The trace only of a program within the limit: its size (from tuning's stored
            // result, else from a profile without the trace) decides before one is made,
            // so a large program's trace never exists in memory.
            let size =
                model::stored_bench(store, &s.program_hash, &t.chip, &t.sim_version, "bench")
                    .map(|b| b.instruction_count);
            let mut ask = |trace| {
                c.pool.request(RequestBody::Profile { variant: variant_ref(&v, &t.chip), trace })
            };
            let mut done = ask(size.is_some_and(|n| n <= TRACE_MAX_INSTRUCTIONS))?;
            if size.is_none() {
                if let Ok(ResponseBody::Bench(b)) = &done.answer {
                    if b.instruction_count <= TRACE_MAX_INSTRUCTIONS {
                        done = ask(true)?;
                    }
                }
            }
            match done.answer {
                Ok(ResponseBody::Bench(b)) if b.program_hash == s.program_hash => store
                    .put("profile", &key, &b)
                    .map_err(|e| fail(Exit::Internal, format!("writing the store: {e:#}")))?,
                // The kernel changed since it was tuned: its program is not the one measured.
                Ok(ResponseBody::Bench(_)) => ctx.out.note(format!(
                    "note: {} {} at {} changed since it was tuned: no engine chart or trace",
                    t.kernel, s.params, t.shape
                )),
                Ok(other) => return Err(crate::eval::unexpected(&other)),
                Err(e) => ctx.out.note(format!(
                    "warning: profiling {} {} at {}: {e}",
                    t.kernel, s.params, t.shape
                )),
            }
        }
    }
    Ok(asked.len())
}

/// Remove the trace files in `dir` (`trace-*.json`, the names [`render::trace_file`] gives)
/// that are not among `kept`: an earlier report's, of variants no longer shown. Nothing else
/// in the directory is touched. Failing to remove one is only a warning.
fn remove_old_traces(dir: &Path, kept: &[PathBuf], out: &crate::output::Reporter) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = name.starts_with("trace-") && name.ends_with(".json");
        let path = entry.path();
        if !ours || kept.contains(&path) || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if let Err(e) = std::fs::remove_file(&path) {
            out.note(format!(
                "warning: {}: an earlier report's trace, not removed: {e}",
                path.display()
            ));
        }
    }
}

/// `--open`: the platform's opener (`xdg-open`, `open`), which hands the page to the browser
/// and exits: its exit status says whether it could. Failing to open is only a warning (the
/// page is written), with the opener's status. An opener still running after a few seconds
/// (one that runs a browser in the foreground) is left to it.
fn open_in_browser(page: &Path, out: &crate::output::Reporter) {
    let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    // Its output is not ours (stdout holds the JSON events), nor its browser's.
    let child = std::process::Command::new(opener)
        .arg(page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            let page = page.display();
            return out.note(format!("warning: could not run {opener} to open {page}: {e}"));
        }
    };
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < std::time::Duration::from_secs(10) => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            // Still running (or its status cannot be read): it has the page.
            _ => break None,
        }
    };
    match status {
        Some(s) if !s.success() => out.note(format!(
            "warning: {opener} could not open {} ({s}); open the page yourself",
            page.display()
        )),
        Some(_) => out.status(format!("   Opened {} with {opener}", page.display())),
        None => out.status(format!("   Opening {} with {opener} (still running)", page.display())),
    }
}
