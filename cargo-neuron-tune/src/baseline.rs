//! The baseline: `neuron-tune.baseline.toml` at the workspace root, committed.
//!
//! Per model, shape and chip, what `cargo neuron-tune baseline save` measured: throughput,
//! end-to-end time, and every distinct kernel call (its kernel's Rust crate and package,
//! parameters, whether tuned, time per call, calls, program hash), with the tool and
//! simulator versions. `gate --baseline` compares against it. The file has a schema
//! version, each entry a checksum (an edited or damaged entry is refused, never compared
//! against), is kept sorted (models by model, shape, chip; calls by kernel, shape and
//! crate) and written atomically, so saving the same measurements again leaves it
//! byte-identical.
//!
//! A call's `crate` and `package` came without a schema change: they are optional (absent
//! in entries saved before they were recorded, whose calls the gate matches by kernel and
//! shape where that is unambiguous: `gate::moved_calls`), and a checksum covers whatever
//! keys an entry has, so an older tool reads a newer file and only ignores them.

use crate::exit::{fail, Exit, Failure};
use crate::models::{CallTime, ModelRun};
use crate::seal::Unreadable;
use crate::store::write_atomic;
use neuron_tune_protocol::{Params, Shape};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "neuron-tune.baseline.toml";

/// The schema this tool writes and reads (2: each entry sealed with a checksum).
pub const SCHEMA: u32 = 2;

/// One distinct kernel call of a model, as measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineCall {
    pub kernel: String,
    /// The Rust crate that defines the kernel, as the harness's plan says it: a model may
    /// call two crates' kernels of one name (absent in entries saved before it was recorded).
    #[serde(rename = "crate", default, skip_serializing_if = "Option::is_none")]
    pub krate: Option<String>,
    /// The package whose kernel it is, when the model's links tell (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    pub shape: Shape,
    pub params: Params,
    pub tuned: bool,
    pub calls: u64,
    /// One call, without launch overhead.
    pub time_us: f64,
    /// calls × (time + launch overhead).
    pub total_us: f64,
    pub program_hash: String,
}

/// A model at one shape on one chip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineEntry {
    pub model: String,
    pub shape: String,
    pub chip: String,
    /// The package whose harness defines the model: with `-p` or `--exclude`, an entry of
    /// a package not selected is out of the selection, not gone from the workspace (absent
    /// in entries saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    pub tokens_per_s: f64,
    pub total_us: f64,
    pub tokens: f64,
    pub launch_overhead_us: f64,
    pub tool_version: String,
    pub sim_version: String,
    pub dims: Shape,
    pub calls: Vec<BaselineCall>,
}

impl BaselineEntry {
    /// A measured run as a baseline entry (calls sorted by kernel, shape and crate).
    pub fn from_run(run: &ModelRun, package: &str, sim_version: &str) -> BaselineEntry {
        let mut calls: Vec<BaselineCall> = run
            .calls
            .iter()
            .map(|c| BaselineCall {
                kernel: c.kernel.clone(),
                krate: c.krate.clone(),
                package: c.package.clone(),
                shape: c.shape.clone(),
                params: c.params.clone(),
                tuned: c.tuned,
                calls: c.calls,
                time_us: c.time_us,
                total_us: c.total_us,
                program_hash: c.program_hash.clone(),
            })
            .collect();
        calls.sort_by(|a, b| {
            (&a.kernel, &a.shape.0, &a.krate).cmp(&(&b.kernel, &b.shape.0, &b.krate))
        });
        BaselineEntry {
            model: run.model.clone(),
            shape: run.shape_name.clone(),
            chip: run.chip.clone(),
            package: Some(package.into()),
            tokens_per_s: run.tokens_per_s,
            total_us: run.total_us,
            tokens: run.tokens,
            launch_overhead_us: run.launch_overhead_us,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            sim_version: sim_version.into(),
            dims: run.shape.clone(),
            calls,
        }
    }

    /// The entry as a run (every call "from the store": nothing was simulated for it).
    pub fn to_run(&self) -> ModelRun {
        ModelRun {
            model: self.model.clone(),
            shape_name: self.shape.clone(),
            shape: self.dims.clone(),
            chip: self.chip.clone(),
            tokens: self.tokens,
            launch_overhead_us: self.launch_overhead_us,
            total_us: self.total_us,
            tokens_per_s: self.tokens_per_s,
            // Not recorded in a baseline: the gate judges tokens/s.
            prompts: 0.0,
            prompts_per_s: 0.0,
            calls: self
                .calls
                .iter()
                .map(|c| CallTime {
                    krate: c.krate.clone(),
                    package: c.package.clone(),
                    kernel: c.kernel.clone(),
                    shape: c.shape.clone(),
                    params: c.params.clone(),
                    tuned: c.tuned,
                    stale: None,
                    calls: c.calls,
                    time_us: c.time_us,
                    total_us: c.total_us,
                    program_hash: c.program_hash.clone(),
                    cached: true,
                })
                .collect(),
        }
    }

    /// Whether the model's package is among those selected; `None` when the entry does not
    /// say which package it is.
    pub fn in_selection(&self, cargo: &crate::cargo::CargoFlags) -> Option<bool> {
        match &self.package {
            _ if cargo.selects_every_package() => Some(true),
            Some(p) => Some(cargo.selects(p)),
            None => None,
        }
    }

    fn key(&self) -> (&str, &str, &str) {
        (&self.model, &self.shape, &self.chip)
    }
}

/// An entry of a baseline file whose seal does not hold, by what it says it is.
#[derive(Debug)]
pub struct Damaged {
    pub model: String,
    pub shape: String,
    pub chip: String,
    /// What is wrong, naming the entry.
    pub message: String,
}

/// A baseline file.
#[derive(Debug)]
pub struct Baseline {
    path: PathBuf,
    entries: Vec<BaselineEntry>,
    /// What this process changed since it loaded or last saved the file, applied again to
    /// the file as it is when saving (another save may have written it meanwhile).
    changes: Vec<Change>,
}

/// One change [`Baseline::save`] applies to the file as it finds it.
#[derive(Clone, Debug)]
enum Change {
    Record(BaselineEntry),
    Drop { model: String, shape: String, chip: String },
}

impl Baseline {
    /// Read the baseline at `path`. A missing file is a usage error saying how to make one.
    pub fn load(path: &Path) -> Result<Baseline, Failure> {
        if !path.exists() {
            return Err(fail(
                Exit::Config,
                format!(
                    "{}: no such baseline; create it with `cargo neuron-tune baseline save` \
                     (and commit it), or compare with another revision with --base-ref REF",
                    path.display()
                ),
            ));
        }
        Baseline::load_or_empty(path)
    }

    /// The baseline at `path`, or an empty one if there is no file yet.
    pub fn load_or_empty(path: &Path) -> Result<Baseline, Failure> {
        let entries = match Baseline::read(path)? {
            None => Vec::new(),
            Some(text) => Baseline::parse(&text).map_err(|e| {
                let first = e.located(path);
                fail(
                    Exit::Config,
                    match e {
                        Unreadable::Newer { .. } => format!("{first} to use it; not used"),
                        Unreadable::NotToml { .. } | Unreadable::Damaged(_) => format!(
                            "{first}\n  The baseline cannot be read, so nothing is compared \
                             against it: restore it from version control (a merge conflict?), or \
                             delete it and save it again with `cargo neuron-tune baseline save` \
                             (on the revision it should describe)"
                        ),
                        Unreadable::Record(d) => {
                            let field = |k: &str| {
                                d.fields.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_string()
                            };
                            let save = crate::command_line::CommandLine::new("baseline save")
                                .flag("--model", field("model"))
                                .flag("--shape", field("shape"))
                                .record_chip(&field("chip"));
                            let hint = crate::command_line::chip_file_hint(&field("chip"));
                            format!(
                                "{first}\n  A damaged entry is never compared against (nor the \
                                 file, until it is saved again): save that entry again \
                                 (`{save}`{hint}, on the revision it should describe), or \
                                 restore the file from version control"
                            )
                        }
                    },
                )
            })?,
        };
        Ok(Baseline { path: path.to_path_buf(), entries, changes: Vec::new() })
    }

    /// The baseline `baseline save` adds to, with its damaged entries apart (a broken seal:
    /// saving again is how an entry is repaired, so the save decides what to do with them,
    /// see [`Damaged`]). A file that cannot be read as a whole (not TOML, as a merge
    /// conflict leaves it; another schema) is an error: replacing it would lose every entry.
    pub fn load_for_save(path: &Path) -> Result<(Baseline, Vec<Damaged>), Failure> {
        let (entries, damaged) = match Baseline::read(path)? {
            None => (Vec::new(), Vec::new()),
            Some(text) => {
                let read = crate::seal::read_sealed_toml_records(&text, SCHEMA, "model", |t| {
                    crate::seal::describe_keys(t, &["model", "shape", "chip"])
                });
                let (entries, damaged) = read.map_err(|e| {
                    let first = e.located(path);
                    fail(
                        Exit::Config,
                        match e {
                            Unreadable::Newer { .. } => format!(
                                "{first} to save into it; not replaced, so that its entries \
                                 are not lost"
                            ),
                            // (A damaged record is not an error here: it comes apart.)
                            _ => format!(
                                "{first}\n  It is not replaced, so that its entries are not lost: \
                                 repair it or restore it from version control (a merge \
                                 conflict?), or delete it and save every model again"
                            ),
                        },
                    )
                })?;
                let damaged = damaged
                    .into_iter()
                    .map(|d| {
                        let field = |k: &str| {
                            d.fields.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_string()
                        };
                        Damaged {
                            model: field("model"),
                            shape: field("shape"),
                            chip: field("chip"),
                            message: d.message,
                        }
                    })
                    .collect();
                (entries, damaged)
            }
        };
        Ok((Baseline { path: path.to_path_buf(), entries, changes: Vec::new() }, damaged))
    }

    /// Drop the entries `keep` refuses; returns them.
    pub fn drop_entries(&mut self, keep: impl Fn(&BaselineEntry) -> bool) -> Vec<BaselineEntry> {
        let (kept, dropped): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.entries).into_iter().partition(keep);
        self.entries = kept;
        self.changes.extend(dropped.iter().map(|e| Change::Drop {
            model: e.model.clone(),
            shape: e.shape.clone(),
            chip: e.chip.clone(),
        }));
        dropped
    }

    /// The file's text, or `None` if there is no file yet.
    fn read(path: &Path) -> Result<Option<String>, Failure> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(fail(Exit::Config, format!("{}: {e}", path.display()))),
        }
    }

    /// The entries of a baseline file's text, or why it cannot be trusted.
    fn parse(text: &str) -> Result<Vec<BaselineEntry>, Unreadable> {
        crate::seal::read_sealed_toml(text, SCHEMA, "model", |t| {
            crate::seal::describe_keys(t, &["model", "shape", "chip"])
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[BaselineEntry] {
        &self.entries
    }

    /// The entry of a model at a shape on a chip.
    pub fn find(&self, model: &str, shape: &str, chip: &str) -> Option<&BaselineEntry> {
        self.entries.iter().find(|e| e.key() == (model, shape, chip))
    }

    /// Replace the entry of the same model, shape and chip, or add it; kept sorted.
    pub fn record(&mut self, entry: BaselineEntry) {
        let change = Change::Record(entry);
        self.apply(&change);
        self.changes.push(change);
    }

    fn apply(&mut self, change: &Change) {
        match change {
            Change::Record(entry) => {
                self.entries.retain(|e| e.key() != entry.key());
                self.entries.push(entry.clone());
                self.entries.sort_by(|a, b| a.key().cmp(&b.key()));
            }
            Change::Drop { model, shape, chip } => {
                self.entries.retain(|e| e.key() != (model, shape, chip));
            }
        }
    }

    /// The file's text.
    pub fn to_toml(&self) -> Result<String, Failure> {
        let text = crate::seal::write_sealed_toml(SCHEMA, "model", &self.entries)
            .map_err(|e| fail(Exit::Internal, format!("{}: {e}", self.path.display())))?;
        Ok(format!(
            "# Written by `cargo neuron-tune baseline save`: end-to-end model throughput per model,\n\
             # shape and chip, with every kernel call. `cargo neuron-tune gate` compares against it.\n\
             # Commit it; update it on purpose (`cargo neuron-tune baseline save`), never by hand.\n\n{text}"
        ))
    }

    /// Write it atomically. Another save (of another target directory: one in the same
    /// target directory waits for the store's lock) may have written the file since it was
    /// loaded, so under an advisory lock on the file's directory it is read again and this
    /// process's changes are applied on top, as the tuned database does: neither save's
    /// entries are lost, and of two entries of one key the one saved later stands. A file
    /// damaged meanwhile is not replaced.
    pub fn save(&mut self) -> Result<(), Failure> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // On a platform that cannot open or lock a directory (Windows), it runs unlocked.
        let _lock = std::fs::File::open(&dir).and_then(|f| f.lock().map(|()| f)).ok();
        let (mut merged, damaged) = Baseline::load_for_save(&self.path)?;
        // A damaged entry goes only when this save measured it again (`baseline save`
        // refuses before simulating to save past one it does not measure).
        let remeasured = |d: &Damaged| {
            let key = (d.model.as_str(), d.shape.as_str(), d.chip.as_str());
            self.changes.iter().any(|c| matches!(c, Change::Record(e) if e.key() == key))
        };
        if let Some(d) = damaged.iter().find(|d| !remeasured(d)) {
            return Err(fail(
                Exit::Config,
                format!(
                    "{}: {}; not replaced, so that it is not lost",
                    self.path.display(),
                    d.message
                ),
            ));
        }
        for c in &self.changes {
            merged.apply(c);
        }
        self.entries = merged.entries;
        write_atomic(&self.path, self.to_toml()?.as_bytes())
            .map_err(|e| fail(Exit::Internal, format!("{}: {e:#}", self.path.display())))?;
        // On disk now: re-applying them later would undo a newer entry another save wrote.
        self.changes.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn run(model: &str, shape: &str, rope_us: f64) -> ModelRun {
        let call = |kernel: &str, n: u64, t: f64| CallTime {
            krate: None,
            package: None,
            kernel: kernel.into(),
            shape: Shape::new(&[("tokens", n)]),
            params: Params::new().with("bufs", 2),
            tuned: false,
            stale: None,
            calls: 2,
            time_us: t,
            total_us: 2.0 * (t + 1.5),
            program_hash: format!("{kernel}{n}{t}"),
            cached: false,
        };
        let calls = vec![call("rope", 256, rope_us), call("add", 256, 7.0)];
        let total_us: f64 = calls.iter().map(|c| c.total_us).sum();
        ModelRun {
            model: model.into(),
            shape_name: shape.into(),
            shape: Shape::new(&[("tokens", 256)]),
            chip: "trn2".into(),
            tokens: 256.0,
            launch_overhead_us: 1.5,
            total_us,
            tokens_per_s: 256.0 / (total_us * 1e-6),
            prompts: 1.0,
            prompts_per_s: 1.0 / (total_us * 1e-6),
            calls,
        }
    }

    #[test]
    fn entries_round_trip_sorted_and_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let e = Baseline::load(&path).unwrap_err();
        assert_eq!(e.exit, Exit::Config);
        assert!(e.message.contains("baseline save"), "{}", e.message);
        let mut b = Baseline::load_or_empty(&path).unwrap();
        b.record(BaselineEntry::from_run(&run("qwen3_naive", "tiny", 31.9), "pkg", "sim1"));
        b.record(BaselineEntry::from_run(&run("qwen3", "tiny", 30.0), "pkg", "sim1"));
        b.record(BaselineEntry::from_run(&run("qwen3", "tiny", 31.9), "pkg", "sim1"));
        assert_eq!(b.entries().len(), 2);
        assert_eq!(b.entries()[0].model, "qwen3");
        assert_eq!(b.entries()[0].calls[0].kernel, "add", "calls sorted");
        b.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("schema = 2"), "{text}");
        let mut again = Baseline::load(&path).unwrap();
        assert_eq!(again.entries(), b.entries());
        again.save().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        // Numbers survive the file exactly (the gate compares them exactly).
        let r = run("qwen3", "tiny", 31.9);
        let back = again.find("qwen3", "tiny", "trn2").unwrap().to_run();
        assert_eq!(back.tokens_per_s, r.tokens_per_s);
        assert_eq!(back.total_us, r.total_us);
    }

    /// Each call keeps its kernel's Rust crate and package through the file, so two crates'
    /// kernels of one name at one shape are two calls, sorted by crate; a call without them
    /// (as entries were saved before calls recorded them) is written without the keys, and
    /// read back without them.
    #[test]
    fn calls_keep_their_crate_and_those_saved_without_one_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut r = run("pair", "one", 30.0);
        r.calls[0].krate = Some("a_kernels".into());
        r.calls[0].package = Some("a-kernels".into());
        let mut other = r.calls[0].clone();
        (other.krate, other.package) = (Some("b_kernels".into()), Some("b-kernels".into()));
        other.program_hash = "another program".into();
        r.calls.insert(0, other);
        let mut b = Baseline::load_or_empty(&path).unwrap();
        b.record(BaselineEntry::from_run(&r, "pkg", "sim1"));
        b.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches("crate = ").count(), 2, "not the `add` call's: {text}");
        let back = Baseline::load(&path).unwrap();
        let calls = &back.entries()[0].calls;
        let order: Vec<_> = calls
            .iter()
            .map(|c| (c.kernel.as_str(), c.krate.as_deref(), c.package.as_deref()))
            .collect();
        assert_eq!(
            order,
            [
                ("add", None, None),
                ("rope", Some("a_kernels"), Some("a-kernels")),
                ("rope", Some("b_kernels"), Some("b-kernels"))
            ]
        );
        // As a run (what the gate compares), each call with its crate and package.
        let mut want = r.calls.clone();
        want.sort_by(|a, b| (&a.kernel, &a.krate).cmp(&(&b.kernel, &b.krate)));
        let got = back.entries()[0].to_run().calls;
        let of = |c: &CallTime| (c.krate.clone(), c.package.clone(), c.program_hash.clone());
        assert_eq!(got.iter().map(of).collect::<Vec<_>>(), want.iter().map(of).collect::<Vec<_>>());
    }

    /// Two saves that loaded the file before either wrote it (in different target
    /// directories, which do not share the store's lock): the later one applies its own
    /// changes to the file as the earlier left it, so neither loses the other's entries.
    #[test]
    fn concurrent_saves_merge_their_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut seed = Baseline::load_or_empty(&path).unwrap();
        seed.record(BaselineEntry::from_run(&run("gone", "tiny", 30.0), "pkg", "sim1"));
        seed.record(BaselineEntry::from_run(&run("kept", "tiny", 30.0), "pkg", "sim1"));
        seed.save().unwrap();
        let (mut a, _) = Baseline::load_for_save(&path).unwrap();
        let (mut b, _) = Baseline::load_for_save(&path).unwrap();
        a.record(BaselineEntry::from_run(&run("qwen3", "tiny", 31.9), "pkg", "sim1"));
        a.save().unwrap();
        b.drop_entries(|e| e.model != "gone");
        b.record(BaselineEntry::from_run(&run("qwen3_naive", "tiny", 31.9), "pkg", "sim1"));
        b.save().unwrap();
        let models =
            |b: &Baseline| -> Vec<String> { b.entries().iter().map(|e| e.model.clone()).collect() };
        let file = Baseline::load(&path).unwrap();
        assert_eq!(models(&file), ["kept", "qwen3", "qwen3_naive"]);
        assert_eq!(models(&b), models(&file), "the saver sees what it wrote");
        // Of two entries of one key, the one saved later stands; a save with nothing new
        // does not undo it.
        a.record(BaselineEntry::from_run(&run("kept", "tiny", 20.0), "pkg", "sim1"));
        a.save().unwrap();
        b.save().unwrap();
        let kept = Baseline::load(&path).unwrap().find("kept", "tiny", "trn2").unwrap().clone();
        assert_eq!(kept.to_run().total_us, run("kept", "tiny", 20.0).total_us);
    }

    #[test]
    fn another_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, "schema = 1\n").unwrap();
        let e = Baseline::load(&path).unwrap_err();
        assert!(e.message.contains("schema 1 (this tool reads schema 2)"), "{}", e.message);
        assert!(e.message.contains("baseline save"), "an older file is saved again");
    }

    /// A newer tool's baseline: the advice is to upgrade, never to save it again or to
    /// delete it (either would lose what the newer tool wrote), and a save leaves it.
    #[test]
    fn a_newer_schema_says_upgrade_and_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, "schema = 99\n").unwrap();
        let want = "written by a newer cargo-neuron-tune (schema 99; this tool reads 2): \
                    upgrade cargo-neuron-tune";
        let e = Baseline::load(&path).unwrap_err();
        assert_eq!(e.exit, Exit::Config);
        let e2 = Baseline::load_for_save(&path).unwrap_err();
        assert_eq!(e2.exit, Exit::Config);
        for m in [&e.message, &e2.message] {
            assert!(m.contains(want), "{m}");
            assert!(!m.contains("delete") && !m.to_lowercase().contains("save it again"), "{m}");
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "schema = 99\n");
    }

    #[test]
    fn an_edited_entry_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut b = Baseline::load_or_empty(&path).unwrap();
        b.record(BaselineEntry::from_run(&run("qwen3", "tiny", 31.9), "pkg", "sim1"));
        b.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        // Someone makes the baseline look slower, so that a regression passes the gate.
        let tps = b.entries()[0].tokens_per_s.to_string();
        assert!(text.contains(&tps), "{text}");
        std::fs::write(&path, text.replace(&tps, "1000.0")).unwrap();
        let e = Baseline::load(&path).unwrap_err();
        assert_eq!(e.exit, Exit::Config);
        for w in
            [FILE_NAME, "model #1 (qwen3/tiny/trn2)", "checksum does not match", "baseline save"]
        {
            assert!(e.message.contains(w), "{w}: {}", e.message);
        }
        // One block: the file, the entry's line and what is wrong, then what to do with it.
        let (first, advice) = e.message.split_once('\n').expect("two lines");
        let header = text.lines().position(|l| l == "[[model]]").unwrap() + 1;
        let at = format!("{}:{header}: model #1 (", path.display());
        assert!(first.starts_with(&at), "{at}\n{first}");
        let again = "save that entry again (`cargo neuron-tune baseline save --model qwen3 \
                     --shape tiny --chip trn2`";
        assert!(advice.starts_with("  A damaged entry") && advice.contains(again), "{advice}");
        assert!(!advice.contains("path of the chip file"), "{advice}");
        // Of a chip file, the entry keeps the chip's name, not the file's path: `--chip`
        // takes the file (named after the chip), and the advice says its path is wanted.
        let other = tempfile::tempdir().unwrap();
        let mut c = Baseline::load_or_empty(&other.path().join(FILE_NAME)).unwrap();
        let mine = ModelRun { chip: "my-chip".into(), ..run("qwen3", "tiny", 31.9) };
        c.record(BaselineEntry::from_run(&mine, "pkg", "sim1"));
        c.save().unwrap();
        let file = other.path().join(FILE_NAME);
        let text_c = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text_c.replace(&tps, "1000.0")).unwrap();
        let e = Baseline::load(&file).unwrap_err();
        let again = "(`cargo neuron-tune baseline save --model qwen3 --shape tiny --chip \
                     my-chip.toml`, `--chip` giving the path of the chip file my-chip.toml, on";
        assert!(e.message.contains(again), "{}", e.message);
        // `baseline save` gets the damaged entry apart (it repairs it by measuring it again)
        // and keeps the intact ones.
        b.record(BaselineEntry::from_run(&run("qwen3", "small", 40.0), "pkg", "sim1"));
        let text = b.to_toml().unwrap();
        let edited = text.replacen(&tps, "1000.0", 1);
        assert_ne!(text, edited);
        std::fs::write(&path, edited).unwrap();
        let (kept, damaged) = Baseline::load_for_save(&path).unwrap();
        let keys: Vec<_> = kept.entries().iter().map(|e| e.key()).collect();
        assert_eq!(keys, [("qwen3", "small", "trn2")]);
        assert_eq!(damaged.len(), 1);
        let d = &damaged[0];
        assert_eq!(
            (d.model.as_str(), d.shape.as_str(), d.chip.as_str()),
            ("qwen3", "tiny", "trn2")
        );
        assert!(d.message.contains("checksum does not match"), "{}", d.message);
        assert!(Baseline::load_for_save(&dir.path().join("none.toml")).unwrap().1.is_empty());
        // A file that is not TOML at all is refused, never replaced.
        std::fs::write(&path, format!("{text}<<<<<<< HEAD\n")).unwrap();
        let e = Baseline::load_for_save(&path).unwrap_err();
        assert_eq!(e.exit, Exit::Config);
        assert!(e.message.contains("not replaced"), "{}", e.message);
        // Where the parser stopped, on the first line; advice for the file on the next.
        let conflict = text.lines().count() + 1;
        for e in [e, Baseline::load(&path).unwrap_err()] {
            let (first, advice) = e.message.split_once('\n').expect("two lines");
            let at = format!("{}:{conflict}:", path.display());
            assert!(first.starts_with(&at), "{at}\n{}\n{text}", e.message);
            assert!(!advice.contains('\n') && advice.contains("restore it from version control"));
            assert!(!e.message.contains("; not used. Save it again"), "{}", e.message);
        }
    }
}
