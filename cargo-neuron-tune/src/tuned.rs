//! The tuned database: `neuron-tune.tuned.toml` beside a kernel crate's Cargo.toml.
//!
//! `tune` records, per kernel, chip and shape, the best parameters it found with their time,
//! program hash and the tool and simulator versions that measured them; the file is meant
//! to be committed with the kernels. It is written atomically and kept sorted, so a rerun
//! that finds the same winners leaves it byte-identical. It has a schema version and each
//! record a checksum (`seal`): an edited or damaged record is refused, never used.

use crate::exit::{fail, Exit, Failure};
use crate::seal::Unreadable;
use crate::store::write_atomic;
use neuron_tune_protocol::{Params, Shape};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "neuron-tune.tuned.toml";

/// One tuned (kernel, chip, shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TunedRecord {
    pub kernel: String,
    pub chip: String,
    pub shape: String,
    pub dims: Shape,
    pub params: Params,
    pub time_us: f64,
    pub program_hash: String,
    pub tool_version: String,
    pub sim_version: String,
    /// `tune --goal`/`--validate`: the named shapes of its key set the winner was checked
    /// correct on (absent from older files and from runs without validation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validated_shapes: Vec<String>,
    /// `tune --goal`/`--validate`: the models (as `model@shape`, of the selected crates)
    /// that call the kernel at this shape and whose throughput the winner was checked not
    /// to lower.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validated_models: Vec<String>,
}

/// What [`TunedDb::record`] did to the record of its kernel, chip and dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// There was none.
    New,
    /// It had other parameters: a new winner replaced it.
    Replaced,
    /// The same parameters, with something else changed (the time or program measured
    /// today, what it was validated on).
    Refreshed,
    /// Exactly the same record.
    Unchanged,
}

/// The file's format: `schema`, then `[[tuned]]` records, each sealed with a checksum.
pub const SCHEMA: u32 = 1;

/// A crate's tuned database.
pub struct TunedDb {
    path: PathBuf,
    records: Vec<TunedRecord>,
    /// The records this process added, applied again on top of the file at each save.
    mine: Vec<TunedRecord>,
}

impl TunedRecord {
    /// `kernel/chip/shape`, as messages name a record.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.kernel, self.chip, self.shape)
    }

    /// The record as a model request carries it (kernel, shape dims, parameters), for the
    /// kernel of Rust crate `krate` (`None`: of the name alone).
    pub fn entry(&self, krate: Option<&str>) -> neuron_tune_protocol::TunedEntry {
        neuron_tune_protocol::TunedEntry {
            kernel: self.kernel.clone(),
            krate: krate.map(Into::into),
            shape: self.dims.clone(),
            params: self.params.clone(),
        }
    }
}

/// Why a tuned database is not used, and what to do: `path:line:column: what is wrong`,
/// then advice that fits the damage. A file that cannot be read as a whole is restored or
/// deleted; a record whose seal does not hold is deleted and tuned again (the other records
/// are intact); a newer tool's file is left alone.
fn refusal(path: &Path, e: &Unreadable) -> String {
    let first = e.located(path);
    match e {
        Unreadable::Newer { .. } => format!("{first} to use it; it is not used, nor changed"),
        Unreadable::NotToml { .. } | Unreadable::Damaged(_) => format!(
            "{first}\n  The tuned database cannot be read, so none of its records is used: \
             restore it from version control (a merge conflict?), or delete it and tune again \
             (`cargo neuron-tune tune`)"
        ),
        Unreadable::Record(d) => {
            let field = |k: &str| d.fields.get(k).and_then(|v| v.as_str()).unwrap_or("?");
            let (kernel, chip, shape) = (field("kernel"), field("chip"), field("shape"));
            let tune = crate::command_line::CommandLine::new("tune");
            let again = match shape.split_once('@') {
                Some((model, at)) => tune.flag("--model", model).flag("--shape", at),
                None => tune,
            }
            .flag("--kernel", kernel)
            .opt_flag("--shape", (!shape.contains('@')).then_some(shape));
            format!(
                "{first}\n  A damaged record is never used (nor the file, until the record is \
                 gone): delete that record (its `[[tuned]]` table) and tune it again (`{}`{}), \
                 or restore the file from version control",
                again.record_chip(chip),
                crate::command_line::chip_file_hint(chip)
            )
        }
    }
}

impl TunedDb {
    /// The database of the crate in `dir` (empty when there is none yet). A file of
    /// another schema, or a record whose checksum does not hold, is refused (exit 2) with
    /// the path and the record: a tuned database is never used after it was damaged. One a
    /// newer tool wrote (a higher schema) is refused alike, but as what it is: the advice
    /// is to upgrade, never to delete it (nor is it ever overwritten: a save loads it first).
    pub fn load(dir: &Path) -> Result<TunedDb, Failure> {
        let path = dir.join(FILE_NAME);
        let records = match std::fs::read_to_string(&path) {
            Ok(text) => crate::seal::read_sealed_toml(&text, SCHEMA, "tuned", |t| {
                crate::seal::describe_keys(t, &["kernel", "chip", "shape"])
            })
            .map_err(|e| fail(Exit::Config, refusal(&path, &e)))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(fail(Exit::Config, format!("{}: {e}", path.display()))),
        };
        Ok(TunedDb { path, records, mine: Vec::new() })
    }

    /// The file (which may not exist yet).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn records(&self) -> &[TunedRecord] {
        &self.records
    }

    /// The record of `kernel` on `chip` at dimensions `dims`: the one the models run.
    pub fn find(&self, kernel: &str, chip: &str, dims: &Shape) -> Option<&TunedRecord> {
        self.records.iter().find(|r| r.kernel == kernel && r.chip == chip && &r.dims == dims)
    }

    /// Replace the record of the same kernel, chip and problem, or add it; says what that
    /// did to the problem's record. The problem is the dimensions (a model's call and a
    /// named shape may be the same one); a named shape (no `@`) is also replaced when its
    /// dimensions changed. Labels of model calls (`model@shape`) are shared by the model's
    /// calls of one kernel, so they never key. A record keeps its label while its parameters
    /// stand (see [`TunedDb::insert`]).
    pub fn record(&mut self, r: TunedRecord) -> Recorded {
        let before = self.of_problem(&r).cloned();
        self.mine.push(r.clone());
        self.insert(r.clone());
        match before {
            None => Recorded::New,
            Some(b) if b.params != r.params => Recorded::Replaced,
            Some(b) if self.of_problem(&r) == Some(&b) => Recorded::Unchanged,
            Some(_) => Recorded::Refreshed,
        }
    }

    /// The record of `r`'s kernel, chip and dimensions.
    fn of_problem(&self, r: &TunedRecord) -> Option<&TunedRecord> {
        self.records.iter().find(|x| x.kernel == r.kernel && x.chip == r.chip && x.dims == r.dims)
    }

    /// Put `r` in, in place of its problem's record. The label (`shape`) is the name the
    /// problem's current parameters were first recorded under: a record of the same
    /// dimensions and parameters (kept, or found again) keeps the label it has, whichever
    /// name the run used, so runs that reach one problem under two names (`tune --model
    /// qwen3 --shape tiny`, then `tune --shape small` of the same dimensions) leave the
    /// file unchanged; a new winner takes the name of the run that found it.
    fn insert(&mut self, mut r: TunedRecord) {
        // The run's name, whatever the label: a named shape's record of other dimensions
        // (edited since) is replaced all the same.
        let name = r.shape.clone();
        if let Some(x) = self.of_problem(&r).filter(|x| x.params == r.params) {
            r.shape = x.shape.clone();
        }
        let same_name = |x: &TunedRecord| x.shape == name && !name.contains('@');
        self.records.retain(|x| {
            !(x.kernel == r.kernel && x.chip == r.chip && (x.dims == r.dims || same_name(x)))
        });
        self.records.push(r);
        self.records.sort_by(|a, b| {
            (&a.kernel, &a.chip, &a.shape, &a.dims.0)
                .cmp(&(&b.kernel, &b.chip, &b.shape, &b.dims.0))
        });
    }

    /// Write it (atomically); returns its path. Another `tune` in the same crate may have
    /// written the file since it was loaded, so under an advisory lock on the crate's
    /// directory the file is read again and this process's records since its last save are
    /// applied on top: neither run's winners are lost, and of two records of one key the one
    /// saved later stands.
    pub fn save(&mut self) -> Result<PathBuf, Failure> {
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        // An exclusive lock on the directory itself, so nothing is added to the crate. On
        // a platform that cannot open or lock a directory (Windows), it runs unlocked: a
        // concurrent save can then lose the other run's records, as before.
        let _lock = std::fs::File::open(&dir).and_then(|f| f.lock().map(|()| f)).ok();
        let mut merged = TunedDb::load(&dir).map_err(|f| {
            let unsaved: Vec<String> = self.mine.iter().map(TunedRecord::key).collect();
            let message = match unsaved.is_empty() {
                true => f.message,
                false => format!(
                    "{}\n(while saving this run's winners, which are not recorded: {})",
                    f.message,
                    unsaved.join(", ")
                ),
            };
            Failure { message, ..f }
        })?;
        for r in &self.mine {
            merged.insert(r.clone());
        }
        self.records = merged.records;
        let text = crate::seal::write_sealed_toml(SCHEMA, "tuned", &self.records)
            .map_err(|e| fail(Exit::Internal, format!("{}: {e}", self.path.display())))?;
        let text = format!(
            "# Written by `cargo neuron-tune tune`: the best parameters found per kernel, chip and\n\
             # shape. Commit it with the kernels; models use these parameters.\n\n{text}"
        );
        write_atomic(&self.path, text.as_bytes())
            .map_err(|e| fail(Exit::Internal, format!("{}: {e:#}", self.path.display())))?;
        // On disk now: later merges (this process's or another's) keep them from the file,
        // and re-applying them would undo a newer record another run saved since.
        self.mine.clear();
        Ok(self.path.clone())
    }
}

/// A tuned database a `tune` run wrote: how many of the run's records went into it, by what
/// each did to the file's record of its problem ([`Recorded`]), and the file's bytes before
/// the run's first save (to say when it did not change).
#[derive(Default)]
pub struct Written {
    pub path: PathBuf,
    /// The file's bytes before the run's first save (`None`: there was no file).
    before: Option<Vec<u8>>,
    records: usize,
    /// A first record of its problem.
    new: usize,
    /// A new winner in place of the file's record of other parameters (slower, or no
    /// longer correct, as measured by this run).
    replaced: usize,
    /// The record's parameters stand, measured again today (another time or program).
    kept: usize,
    /// The same record as the file held.
    unchanged: usize,
}

impl Written {
    pub fn new(path: PathBuf, before: Option<Vec<u8>>) -> Written {
        Written { path, before, ..Default::default() }
    }

    /// One record of the run went into the file.
    pub fn count(&mut self, change: Recorded) {
        self.records += 1;
        match change {
            Recorded::New => self.new += 1,
            Recorded::Replaced => self.replaced += 1,
            Recorded::Refreshed => self.kept += 1,
            Recorded::Unchanged => self.unchanged += 1,
        }
    }

    /// The status line saying what the run did to the file.
    pub fn line(&self) -> String {
        let (path, records) =
            (self.path.display(), crate::convergence::count(self.records, "record"));
        if self.before.is_some() && self.before == std::fs::read(&self.path).ok() {
            format!("   {path} unchanged (this run's {records} already there)")
        } else if self.kept == self.records {
            // Written again with their times and programs as measured today.
            format!("   Wrote {path} ({records} kept, measured again: no new winner)")
        } else if self.new == self.records {
            format!("   Wrote {path} ({records} of this run, all new)")
        } else {
            let parts: Vec<String> = [
                (self.new, "new"),
                (self.replaced, "replacing a record of other parameters"),
                (self.kept, "kept and measured again"),
                (self.unchanged, "unchanged"),
            ]
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
            format!("   Wrote {path} ({records} of this run: {})", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kernel: &str, shape: &str, t: f64) -> TunedRecord {
        TunedRecord {
            kernel: kernel.into(),
            chip: "trn2".into(),
            shape: shape.into(),
            dims: Shape::new(&[("n", 128)]),
            params: Params::new().with("bufs", 2).with("order", "mn"),
            time_us: t,
            program_hash: "abc".into(),
            tool_version: "0.1.0".into(),
            sim_version: "0.1.0+model2".into(),
            validated_shapes: vec![],
            validated_models: vec![],
        }
    }

    #[test]
    fn validated_shapes_are_optional_so_older_files_still_read() {
        let dir = tempfile::tempdir().unwrap();
        // A record as written before `validated_shapes` existed (sealed as it was then).
        let mut record: toml::Table = toml::from_str(
            "kernel = \"gemm\"\nchip = \"trn2\"\nshape = \"small\"\n\
             time_us = 2.0\nprogram_hash = \"abc\"\ntool_version = \"0.1.0\"\n\
             sim_version = \"0.1.0+model2\"\n[dims]\nn = 128\n[params]\nbufs = 2\n",
        )
        .unwrap();
        crate::seal::seal_toml(&mut record);
        let old = format!(
            "schema = {SCHEMA}\n{}",
            toml::to_string(&toml::Table::from_iter([(
                "tuned".to_string(),
                toml::Value::Array(vec![toml::Value::Table(record)])
            )]))
            .unwrap()
        );
        std::fs::write(dir.path().join(FILE_NAME), old).unwrap();
        let mut db = TunedDb::load(dir.path()).unwrap();
        assert_eq!(db.records()[0].validated_shapes, Vec::<String>::new());
        assert_eq!(db.records()[0].validated_models, Vec::<String>::new());
        db.save().unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(!text.contains("validated_"), "{text}");
        // A validated record keeps its shapes and models through a save and a load.
        db.record(TunedRecord {
            validated_shapes: vec!["large".into(), "small".into()],
            validated_models: vec!["qwen3@tiny".into()],
            ..rec("gemm", "small", 1.0)
        });
        db.save().unwrap();
        let again = TunedDb::load(dir.path()).unwrap();
        assert_eq!(again.records()[0].validated_shapes, ["large", "small"]);
        assert_eq!(again.records()[0].validated_models, ["qwen3@tiny"]);
    }

    #[test]
    fn records_replace_their_key_stay_sorted_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TunedDb::load(dir.path()).unwrap();
        db.record(rec("softmax", "small", 3.0));
        db.record(rec("gemm", "small", 2.0));
        db.record(rec("gemm", "small", 1.5));
        assert_eq!(db.records().len(), 2);
        assert_eq!(db.records()[0].kernel, "gemm");
        assert_eq!(db.records()[0].time_us, 1.5);
        db.save().unwrap();
        let first = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        let mut again = TunedDb::load(dir.path()).unwrap();
        assert_eq!(again.records(), db.records());
        again.save().unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(), first);
    }

    #[test]
    fn concurrent_saves_keep_every_runs_records() {
        // Eight "runs" in one crate, each loaded before any saved, each tuning its own
        // kernel and saving after each of three shapes: a save that wrote its stale
        // snapshot would drop the others' records; all 24 must be there in the end.
        let dir = tempfile::tempdir().unwrap();
        let runs: Vec<TunedDb> = (0..8).map(|_| TunedDb::load(dir.path()).unwrap()).collect();
        std::thread::scope(|scope| {
            for (i, mut db) in runs.into_iter().enumerate() {
                scope.spawn(move || {
                    for (j, shape) in ["small", "medium", "large"].into_iter().enumerate() {
                        let dims = Shape::new(&[("n", 128 << j)]);
                        db.record(TunedRecord { dims, ..rec(&format!("k{i}"), shape, 1.0) });
                        db.save().unwrap();
                    }
                });
            }
        });
        let db = TunedDb::load(dir.path()).unwrap();
        assert_eq!(db.records().len(), 24);
        // Of two runs' records of one key, the one saved later stands, even when the
        // earlier run saves again afterwards (for another key).
        let mut a = TunedDb::load(dir.path()).unwrap();
        let mut b = TunedDb::load(dir.path()).unwrap();
        a.record(rec("k0", "small", 5.0));
        a.save().unwrap();
        b.record(rec("k0", "small", 6.0));
        b.save().unwrap();
        a.record(rec("other", "small", 7.0));
        a.save().unwrap();
        let db = TunedDb::load(dir.path()).unwrap();
        let k0 = db.records().iter().find(|r| r.kernel == "k0" && r.shape == "small").unwrap();
        assert_eq!(k0.time_us, 6.0, "b saved k0/small after a did");
        for i in 0..8 {
            let k = format!("k{i}");
            assert_eq!(db.records().iter().filter(|r| r.kernel == k).count(), 3, "{k}");
        }
    }

    #[test]
    fn model_calls_share_a_label_but_key_by_their_dimensions() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TunedDb::load(dir.path()).unwrap();
        let at = |n: u64, label: &str, t: f64| TunedRecord {
            dims: Shape::new(&[("n", n)]),
            ..rec("gemm", label, t)
        };
        db.record(at(128, "qwen3@tiny", 1.0));
        db.record(at(256, "qwen3@tiny", 2.0));
        assert_eq!(db.records().len(), 2, "two calls of one model are two problems");
        // The same problem under its kernel's own shape name: a new winner replaces the
        // model's record, and takes the name of the run that found it.
        let winner = |n: u64, label: &str, t: f64| TunedRecord {
            params: Params::new().with("bufs", 3).with("order", "mn"),
            ..at(n, label, t)
        };
        assert_eq!(db.record(winner(256, "small", 1.5)), Recorded::Replaced);
        assert_eq!(db.records().len(), 2);
        assert!(db.records().iter().any(|r| r.shape == "small" && r.time_us == 1.5));
        // A named shape whose dimensions changed replaces its old record.
        assert_eq!(db.record(at(512, "small", 3.0)), Recorded::New);
        let small: Vec<_> = db.records().iter().filter(|r| r.shape == "small").collect();
        assert_eq!((small.len(), small[0].time_us), (1, 3.0));
    }

    /// `tune --model qwen3 --shape tiny`, then the README's `tune --shape small`, whose
    /// `small` has the dimensions of one of the model's calls, alternately: the record of
    /// that problem keeps its parameters (kept, or found again), so it keeps its label, and
    /// the file does not change from one run to the next.
    #[test]
    fn a_record_keeps_its_label_while_its_parameters_stand() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TunedDb::load(dir.path()).unwrap();
        assert_eq!(db.record(rec("add", "qwen3@tiny", 2.0)), Recorded::New);
        db.save().unwrap();
        let first = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        for label in ["small", "qwen3@tiny", "small"] {
            let mut db = TunedDb::load(dir.path()).unwrap();
            assert_eq!(db.record(rec("add", label, 2.0)), Recorded::Unchanged, "{label}");
            db.save().unwrap();
            let now = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
            assert_eq!(now, first, "after a run at `{label}`");
        }
        // Measured again with another time (today's code), it is refreshed under its label.
        assert_eq!(db.record(rec("add", "small", 1.9)), Recorded::Refreshed);
        assert_eq!((db.records()[0].shape.as_str(), db.records()[0].time_us), ("qwen3@tiny", 1.9));
        // Under a save's merge too: another run's file is read again and this run's
        // records applied on top.
        db.save().unwrap();
        let again = TunedDb::load(dir.path()).unwrap();
        assert_eq!(again.records()[0].shape, "qwen3@tiny");
        assert_eq!(again.records().len(), 1);
        // A named shape's record of other dimensions (edited since) still goes, though
        // the run's record keeps another label.
        let mut db = TunedDb::load(dir.path()).unwrap();
        db.record(TunedRecord { dims: Shape::new(&[("n", 64)]), ..rec("add", "small", 5.0) });
        assert_eq!(db.records().len(), 2);
        db.record(rec("add", "small", 1.9));
        let labels: Vec<&str> = db.records().iter().map(|r| r.shape.as_str()).collect();
        assert_eq!(labels, ["qwen3@tiny"]);
    }

    /// The README's main job run again after `tune --model qwen3 --shape tiny`: of its 8
    /// records, 7 are the winners the file holds already and 1 is a record kept; the line
    /// counted the 7 as new. Each record counts by what it did to the file's record.
    #[test]
    fn the_written_line_counts_each_record_by_what_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TunedDb::load(dir.path()).unwrap();
        let kernels = ["a", "b", "c", "d", "e", "f", "g", "h"];
        for k in kernels {
            db.record(rec(k, "small", 2.0));
        }
        let path = db.save().unwrap();
        let run = |db: &mut TunedDb, records: &[TunedRecord]| {
            let mut w = Written::new(path.clone(), std::fs::read(&path).ok());
            for r in records {
                w.count(db.record(r.clone()));
                db.save().unwrap();
            }
            w.line()
        };
        let all: Vec<TunedRecord> = kernels.iter().map(|k| rec(k, "small", 2.0)).collect();
        let mut db = TunedDb::load(dir.path()).unwrap();
        let file = path.display();
        assert_eq!(
            run(&mut db, &all),
            format!("   {file} unchanged (this run's 8 records already there)")
        );
        // One measured again under another time, one new winner, six as they were.
        let mut some = all.clone();
        some[0].time_us = 1.5;
        some[1].params = Params::new().with("bufs", 4);
        assert_eq!(
            run(&mut db, &some),
            format!("   Wrote {file} (8 records of this run: 1 replacing a record of other parameters, 1 kept and measured again, 6 unchanged)")
        );
        assert_eq!(
            run(&mut db, &[rec("z", "small", 3.0)]),
            format!("   Wrote {file} (1 record of this run, all new)")
        );
        // A winner of other parameters is never said to be new: it replaced one.
        let other = TunedRecord { params: Params::new().with("bufs", 8), ..rec("z", "small", 2.5) };
        assert_eq!(
            run(&mut db, &[other, rec("y", "small", 3.0)]),
            format!("   Wrote {file} (2 records of this run: 1 new, 1 replacing a record of other parameters)")
        );
        let slower = TunedRecord { time_us: 1.6, ..some[0].clone() };
        assert_eq!(
            run(&mut db, &[slower]),
            format!("   Wrote {file} (1 record kept, measured again: no new winner)")
        );
    }

    #[test]
    fn an_edited_record_or_a_file_without_schema_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TunedDb::load(dir.path()).unwrap();
        db.record(rec("gemm", "small", 2.0));
        db.record(rec("softmax", "small", 3.0));
        let path = db.save().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("schema = 1") && text.matches("checksum = ").count() == 2);
        // A hand edit of one parameter of the second record.
        let edited = text.replacen("bufs = 2", "bufs = 4", 2).replacen("bufs = 4", "bufs = 2", 1);
        assert_ne!(edited, text);
        std::fs::write(&path, &edited).unwrap();
        let e = TunedDb::load(dir.path()).err().expect("an edited record is refused");
        assert_eq!(e.exit, Exit::Config);
        for w in [FILE_NAME, "tuned #2 (softmax/trn2/small)", "checksum does not match"] {
            assert!(e.message.contains(w), "{w}: {}", e.message);
        }
        // Named by its line, and the advice is about that record.
        let line = edited.lines().enumerate().filter(|(_, l)| *l == "[[tuned]]").nth(1);
        let at = format!("{}:{}: tuned #2", path.display(), line.unwrap().0 + 1);
        assert!(e.message.starts_with(&at), "{at}\n{}", e.message);
        let again = "delete that record (its `[[tuned]]` table) and tune it again (`cargo \
                     neuron-tune tune --kernel softmax --shape small --chip trn2`)";
        assert!(e.message.contains(again), "{}", e.message);
        std::fs::write(&path, text.replace("schema = 1\n", "")).unwrap();
        let e = TunedDb::load(dir.path()).err().expect("a file without schema is refused");
        assert!(e.message.contains("no `schema`"), "{}", e.message);
    }

    /// A file that is not TOML at all (a merge conflict, garbage) is one block: where the
    /// parser stopped and what it says, then advice for a file, not for a record (there is
    /// none to delete in a file that does not parse); a model call's record names the
    /// command that tunes it.
    #[test]
    fn a_file_that_does_not_parse_is_located_and_the_advice_fits_the_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, "garbage [[[\n").unwrap();
        let e = TunedDb::load(dir.path()).err().expect("garbage is refused");
        assert_eq!(e.exit, Exit::Config);
        let lines: Vec<&str> = e.message.lines().collect();
        assert_eq!(lines.len(), 2, "{}", e.message);
        assert!(lines[0].starts_with(&format!("{}:1:9: ", path.display())), "{}", e.message);
        assert!(lines[1].starts_with("  The tuned database cannot be read"), "{}", e.message);
        assert!(lines[1].contains("restore it from version control"), "{}", e.message);
        assert!(lines[1].contains("or delete it and tune again"), "{}", e.message);
        assert!(!e.message.contains("record and tune"), "{}", e.message);

        // A database of `record` alone whose time was then edited: refused on load.
        let edited = |record: TunedRecord| {
            let _ = std::fs::remove_file(&path);
            let mut db = TunedDb::load(dir.path()).unwrap();
            db.record(record);
            db.save().unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, text.replace("time_us = 2.0", "time_us = 1.0")).unwrap();
            TunedDb::load(dir.path()).err().expect("an edited record is refused")
        };
        let e = edited(TunedRecord { chip: "trn1".into(), ..rec("rmsnorm", "qwen3@tiny", 2.0) });
        let again = "tune it again (`cargo neuron-tune tune --model qwen3 --shape tiny --kernel \
                     rmsnorm --chip trn1`)";
        assert!(e.message.contains(again), "{}", e.message);

        // The command is built from the damaged record's fields: each one quoted for a
        // shell when it needs it (a chip file's name may have a space). A chip that is not
        // built in is a chip file, which `--chip` takes by its path: the file is named after
        // the chip, and the advice says the path is wanted (the record keeps no directory).
        let e = edited(TunedRecord { chip: "my chip".into(), ..rec("rmsnorm", "it's", 2.0) });
        let again = "(`cargo neuron-tune tune --kernel rmsnorm --shape \"it's\" --chip 'my \
                     chip.toml'`, `--chip` giving the path of the chip file 'my chip.toml')";
        assert!(e.message.contains(again), "{}", e.message);
    }

    /// A newer tool's file is not called damaged, and the advice is to upgrade, never to
    /// delete it; a save leaves it as it was (the winners are said to be unrecorded).
    #[test]
    fn a_newer_schema_says_upgrade_and_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TunedDb::load(dir.path()).unwrap();
        db.record(rec("gemm", "small", 2.0));
        let path = db.save().unwrap();
        let newer = std::fs::read_to_string(&path).unwrap().replace("schema = 1", "schema = 99");
        std::fs::write(&path, &newer).unwrap();
        let e = TunedDb::load(dir.path()).err().expect("a newer file is not used");
        assert_eq!(e.exit, Exit::Config);
        let want = "written by a newer cargo-neuron-tune (schema 99; this tool reads 1): \
                    upgrade cargo-neuron-tune";
        assert!(e.message.contains(want), "{}", e.message);
        assert!(!e.message.contains("delete") && !e.message.contains("damaged"), "{}", e.message);
        db.record(rec("softmax", "small", 3.0));
        let e = db.save().expect_err("a save does not replace a newer file");
        assert!(
            e.message.contains(want) && e.message.contains("softmax/trn2/small"),
            "{}",
            e.message
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
    }
}
