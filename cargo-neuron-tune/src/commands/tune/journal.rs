//! The run's files: the journal's lines ([`Entry`], rounds, roll-backs; read by kind in
//! [`JournalLines`]), the meta file beside it ([`JournalMeta`]), and the names both go by.

use super::*;

/// One journal line: an evaluation and what it gave. The report reads these.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct Entry {
    pub n: usize,
    pub params: Params,
    /// `measured`, `pruned`, `invalid`, `failed_check` (a winner rolled back later keeps
    /// `measured` here; a `rolled_back` journal line names it).
    pub status: String,
    pub time_us: Option<f64>,
    pub program_hash: Option<String>,
    /// SBUF peak (bytes per partition) and estimated energy (µJ) of a measured variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sbuf_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_uj: Option<f64>,
    /// The profile's verdict on a measured variant: what bounds it and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<String>,
    /// Why an invalid variant was refused (the harness's error), for the diagnosis; of a
    /// `failed_check` one, why its check failed ([`FailedCheck::journal_error`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A `failed_check` evaluation's failing part: its seed and shrunk case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<FailedCheck>,
}

/// Why a variant failed its correctness check, journaled with its `failed_check`
/// evaluation: what `tune` warns about and the command that replays it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FailedCheck {
    /// The seed of the first failing part of the check: `check --params P --cases 2 --seed
    /// <seed>` at the run's chip replays it.
    pub seed: u64,
    /// Its shrunk failing case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<neuron_tune_protocol::CheckFailure>,
    /// The harness's error when the part gave no verdict: the kernel's rule refused the
    /// parameters at every small shape the check drew (`invalid: …`), or it panicked,
    /// crashed or hung.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FailedCheck {
    /// The failing case in words, on one line (a warning's, a journal field's): the
    /// smallest failing shape, its inputs and what went wrong, or the hardware rule broken
    /// (or the harness's error). A check's message has a line per finding (what was never
    /// written, then the comparison); they are joined with `; `.
    pub fn case_words(&self) -> String {
        match (&self.case, &self.error) {
            (Some(c), _) => {
                let message: Vec<&str> = c.message.lines().map(str::trim).collect();
                format!("{}: {}", c.heading(), message.join("; "))
            }
            (None, Some(e)) => e.clone(),
            (None, None) => "no failing case reported".into(),
        }
    }

    /// As the journal's `error` says it, which tells a failed check (a fault of the kernel,
    /// [`conv::is_fault`]) from a check the rule refused everywhere (invalid).
    pub fn journal_error(&self) -> String {
        match (&self.case, &self.error) {
            (None, Some(e)) => e.clone(),
            _ => format!("{}{}", conv::CHECK_FAILED, self.case_words()),
        }
    }

    /// The command that replays the failing part, as the run would ([`Replay`]).
    pub(super) fn command(&self, kernel: &str, params: &Params, replay: &Replay) -> String {
        replay.check(kernel, params, Some(self.seed))
    }
}

/// What a journal's lines are about, written next to it (`<journal>.meta.json`, atomically)
/// once the default is measured and again with the Pareto front at the end: the journal's
/// lines alone do not say which kernel, shape, chip, strategy or seed they belong to, nor
/// what the default gave. `report` reads it; `--resume` checks that it names this run's
/// problem and reuses its validation of the tuned record. Sealed, with a schema, as the
/// journal's lines are (docs/formats.md).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct JournalMeta {
    pub kernel: String,
    /// The package whose kernel this is (`None`: written before it was recorded; `report`
    /// then goes by the kernel's name, which another package's kernel may share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<RunPackage>,
    pub shape: String,
    pub dims: Shape,
    pub chip: ChipSpec,
    /// The strategy's name, or `proposer`.
    pub strategy: String,
    pub seed: u64,
    pub budget: usize,
    /// `time` or `pareto`.
    pub objective: String,
    /// The parameters `--params` pinned, as given (`bufs=2`; `None`: not pinned, or written
    /// before this was recorded: the journal's name has them, sanitized, `bufs-2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<String>,
    /// The harness's simulator version: the store keys of the journal's results.
    pub sim_version: String,
    /// The checksum of the harness binary whose times the journal holds (`None`: written
    /// before this was recorded). A rebuilt harness may trace other programs (the kernel
    /// was edited): its journal is not resumed.
    #[serde(default)]
    pub harness_hash: Option<String>,
    /// The default parameters' evaluation, if they run. It is no proposal of the search, so
    /// the file has it without `n` ([`default_evaluation`]); in memory its `n` is
    /// [`Entry::NOT_A_PROPOSAL`].
    #[serde(with = "default_evaluation")]
    pub default: Option<Entry>,
    /// Why a rule refused the default parameters, when one did (`default` is then `null`;
    /// `None` too when written before this was recorded): `report` says so in the run's
    /// figures, as `tune` did, rather than "0 % invalid".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_refused: Option<String>,
    /// `--objective pareto`: the checked front, fastest first (written at the end).
    #[serde(default)]
    pub front: Option<Vec<ParetoPoint>>,
    /// New bests were validated (`--goal` or `--validate`) by a run of this journal, so it
    /// may hold `rolled_back` lines (`None`: written before this was recorded).
    #[serde(default)]
    pub validated: Option<bool>,
    /// The diagnosis rules of the run that fired, as `tune` printed them (written at the
    /// end; the `slow` rule needs times a journal does not keep).
    #[serde(default)]
    pub diagnoses: Vec<conv::Diagnosis>,
    /// The size of the space when the run searched all of it (`TuneResult::whole_space`;
    /// written at the end; `None` otherwise, or written before this was recorded): `report`
    /// then gives the figures `tune` printed ("searched the whole space").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_space: Option<u64>,
}

/// The meta file's `default`: the default parameters' evaluation as a journal line without
/// `n`, since it is no proposal (`null` when they did not run). Meta files of schema 1 have
/// `n` = 2⁶⁴ − 1 there (`usize::MAX`), which a reader that holds JSON numbers as doubles
/// (JavaScript) cannot hold exactly; they read the same: whatever `n` the file has is not
/// used.
mod default_evaluation {
    use super::Entry;
    use serde::{de::Error as _, ser::Error as _, Deserialize, Serialize};

    pub fn serialize<S: serde::Serializer>(d: &Option<Entry>, s: S) -> Result<S::Ok, S::Error> {
        let mut value = serde_json::to_value(d).map_err(S::Error::custom)?;
        if let Some(line) = value.as_object_mut() {
            line.remove("n");
        }
        value.serialize(s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Entry>, D::Error> {
        let Some(mut value) = Option::<serde_json::Value>::deserialize(d)? else {
            return Ok(None);
        };
        let line =
            value.as_object_mut().ok_or_else(|| D::Error::custom("`default`: not an object"))?;
        line.insert("n".into(), Entry::NOT_A_PROPOSAL.into());
        serde_json::from_value(value).map(Some).map_err(D::Error::custom)
    }
}

/// The package a run's kernel came from, as its meta file names it: its name, and its
/// manifest's path relative to the workspace root (`/`-separated), which also tells apart
/// packages of one name in other workspaces that share the target directory.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunPackage {
    pub name: String,
    pub manifest: String,
}

impl RunPackage {
    /// The package of a kernel crate of the workspace at `root`.
    pub fn of(root: &std::path::Path, krate: &crate::cargo::KernelCrate) -> RunPackage {
        let manifest = match krate.manifest_path.strip_prefix(root) {
            Ok(rel) => {
                let parts: Vec<String> =
                    rel.components().map(|c| c.as_os_str().to_string_lossy().into()).collect();
                parts.join("/")
            }
            // Not under the root (never for a member): the path as it is.
            Err(_) => krate.manifest_path.display().to_string(),
        };
        RunPackage { name: krate.package.clone(), manifest }
    }

    /// What its journals' names start with after `tune-`: the name and a dot. A package
    /// name has no dot, so no kernel name that follows can make two packages' names meet.
    pub(super) fn journal_part(&self) -> String {
        format!("{}.", sanitize(&self.name))
    }
}

/// `--resume` of a run journaled before journals were named by their package
/// (`legacy`: `tune-<kernel>-…`, no `<package>.`): its journal and meta file take this
/// run's names (`journal`), if there is none of those yet and its meta file names no
/// package and was written by this very harness binary (so of this package: a journal
/// with another build's times is not resumed anyway). Returns whether it did.
pub(super) fn adopt_unnamed(
    journal: &std::path::Path,
    legacy: &std::path::Path,
    harness_hash: &str,
) -> bool {
    if journal.exists() || meta_path(journal).exists() || !legacy.exists() {
        return false;
    }
    match read_meta_checked(legacy) {
        Ok(Some(m)) if m.package.is_none() && m.harness_hash.as_deref() == Some(harness_hash) => {}
        _ => return false,
    }
    if std::fs::rename(legacy, journal).is_err() {
        return false;
    }
    if std::fs::rename(meta_path(legacy), meta_path(journal)).is_err() {
        let _ = std::fs::rename(journal, legacy);
        return false;
    }
    true
}

/// The meta file of a journal.
pub fn meta_path(journal: &std::path::Path) -> std::path::PathBuf {
    journal.with_extension("meta.json")
}

/// The schema of a journal's meta file (its `schema` field; sealed like a journal line): 2
/// since its `default` has no `n`. Schema 1 files (`n` = 2⁶⁴ − 1 there) are read too.
const META_SCHEMA: u64 = 2;

/// A journal's meta file, if it has one that reads and whose seal holds.
pub fn read_meta(journal: &std::path::Path) -> Option<JournalMeta> {
    read_meta_checked(journal).ok().flatten()
}

/// A journal's meta file: `Ok(None)` when there is none, `Err(why)` when it cannot be
/// trusted (edited, damaged, another schema), so it is never believed.
pub fn read_meta_checked(journal: &std::path::Path) -> Result<Option<JournalMeta>, String> {
    let text = match std::fs::read_to_string(meta_path(journal)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("not JSON ({e})"))?;
    crate::seal::unseal_json(&mut value)?;
    match value.as_object_mut().and_then(|o| o.remove("schema")).and_then(|s| s.as_u64()) {
        Some(1 | META_SCHEMA) => {}
        other => return Err(format!("schema {other:?}, this tool reads 1 and {META_SCHEMA}")),
    }
    serde_json::from_value(value).map(Some).map_err(|e| e.to_string())
}

/// Write a journal's meta file (atomically, sealed).
pub(super) fn write_meta(journal: &std::path::Path, meta: &JournalMeta) -> Result<(), Failure> {
    let mut value = serde_json::to_value(meta).expect("meta serializes");
    if let Some(obj) = value.as_object_mut() {
        obj.insert("schema".into(), META_SCHEMA.into());
    }
    crate::seal::seal_json(&mut value);
    let text = serde_json::to_string_pretty(&value).expect("meta serializes");
    crate::store::write_atomic(&meta_path(journal), text.as_bytes())
        .map_err(|e| fail(Exit::Internal, format!("writing the journal: {e:#}")))
}

/// A tune journal's trusted lines by kind (docs/tuning-loop.md, "The journal"); kinds it
/// does not know are skipped. `--resume` and `report` read it the same way.
#[derive(Debug, Default)]
pub struct JournalLines {
    /// The evaluations as journaled: a winner rolled back later is still `measured` here.
    pub entries: Vec<Entry>,
    /// `--goal`'s decision log.
    pub rounds: Vec<Round>,
    /// The `rolled_back` lines.
    pub rolled_back: Vec<RolledBack>,
}

/// A `rolled_back` line: the measured evaluation `n` with `params` failed its validation.
#[derive(Debug)]
pub struct RolledBack {
    pub n: u64,
    pub params: serde_json::Value,
    /// Why validation refused it (absent in journals written before this was recorded).
    pub why: Option<String>,
    /// How many evaluations were journaled before the line (it names one of those).
    before: usize,
}

impl JournalLines {
    pub fn of(lines: Vec<serde_json::Value>) -> JournalLines {
        let mut j = JournalLines::default();
        for line in lines {
            match line.get("line").and_then(|l| l.as_str()) {
                Some("round") => j.rounds.extend(serde_json::from_value::<Round>(line).ok()),
                Some("rolled_back") => {
                    j.rolled_back.extend(line["n"].as_u64().map(|n| RolledBack {
                        n,
                        params: line["params"].clone(),
                        why: line["why"].as_str().map(String::from),
                        before: j.entries.len(),
                    }))
                }
                _ => j.entries.extend(serde_json::from_value::<Entry>(line).ok()),
            }
        }
        j
    }

    /// The evaluations as the run's result has them: each rolled-back winner `rolled_back`.
    /// A resumed run may have evaluated one `n` twice (a proposer's replayed proposal that
    /// differed): a line names the latest of that `n` before it, with its params.
    pub fn entries_after_roll_backs(&self) -> Vec<Entry> {
        let mut entries = self.entries.clone();
        for r in &self.rolled_back {
            let named = |e: &&mut Entry| {
                e.n as u64 == r.n
                    && serde_json::to_value(&e.params).ok().as_ref() == Some(&r.params)
            };
            let latest = entries[..r.before].iter_mut().rev().find(named);
            if let Some(e) = latest.filter(|e| e.status == "measured") {
                e.status = "rolled_back".into();
            }
        }
        entries
    }
}

impl Entry {
    /// The `n` of a measurement that is no proposal of the search (the default parameters',
    /// a tuned record's measured again): never journaled, and never written (the meta file's
    /// `default` has no `n`).
    pub const NOT_A_PROPOSAL: usize = usize::MAX;

    /// What the strategy is told. A pruned variant is told its lower bound: a value no
    /// better than the incumbent that still ranks it among the others (telling it invalid
    /// instead left 5 of 15 `tune-gemm` seeds short of 2 %, against none).
    pub(super) fn outcome(&self) -> Outcome {
        match (self.status.as_str(), self.time_us) {
            ("measured" | "pruned", Some(t)) => Outcome::Value(t),
            _ => Outcome::Invalid,
        }
    }
}

/// The seed of the most recently written journal whose name is one of `prefixes` followed by
/// a seed (`tune-{package}.{kernel}-{shape}-{dims}-{chip}-{strategy}-{seed}.jsonl`, or
/// without `{package}.` as journals were named before).
pub(super) fn latest_journal_seed(dir: &std::path::Path, prefixes: &[String]) -> Option<u64> {
    let mut latest: Option<(std::time::SystemTime, u64)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else { continue };
        let seed = prefixes.iter().find_map(|p| stem.strip_prefix(p.as_str())?.parse::<u64>().ok());
        let (Some(seed), Ok(modified)) = (seed, entry.metadata().and_then(|m| m.modified())) else {
            continue;
        };
        if latest.is_none_or(|(t, s)| (modified, seed) > (t, s)) {
            latest = Some((modified, seed));
        }
    }
    latest.map(|(_, seed)| seed)
}

/// A shape label as a file-name part.
pub(crate) fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect()
}

/// A shape's dimensions as they go into file names (`cols1024-rows256`): journals and
/// report traces are named by them, since a model's calls of one kernel share a shape name.
pub(crate) fn dims_slug(shape: &Shape) -> String {
    let dims: Vec<String> = shape.0.iter().map(|(d, n)| format!("{d}{n}")).collect();
    sanitize(&dims.join("-"))
}

#[cfg(test)]
mod tests {
    use super::{meta_path, read_meta_checked, write_meta, Entry, JournalLines, JournalMeta};
    use serde_json::{json, Value};

    /// A check's message has a line per finding; a warning and a journal field say it on
    /// one line, so that nothing of it lands on a line of its own under the `warning:`.
    #[test]
    fn a_failed_check_is_said_on_one_line() {
        let case = json!({"shape": {"rows": 1}, "input_seed": 3, "distribution": "normal",
            "message": "all of `y` was never written\n  57 of 57 elements outside", "metrics": null});
        let failed: super::FailedCheck =
            serde_json::from_value(json!({"seed": 1, "case": case})).unwrap();
        assert_eq!(
            failed.case_words(),
            "smallest failing shape {rows=1} (input seed 3, Normal inputs): all of `y` was never \
             written; 57 of 57 elements outside"
        );
    }

    /// A meta file's value with `default` the evaluation `default`.
    fn meta(default: Value) -> JournalMeta {
        serde_json::from_value(json!({
            "kernel": "k", "shape": "s", "dims": {"n": 4}, "chip": {"name": "trn2"},
            "strategy": "random", "seed": 7, "budget": 5, "objective": "time",
            "sim_version": "v", "default": default
        }))
        .unwrap()
    }

    fn default_line() -> Value {
        json!({"params": {"bufs": 2}, "status": "measured", "time_us": 8.5,
               "program_hash": "h", "sbuf_bytes": 4096, "energy_uj": 1.25})
    }

    /// Every integer in `v`, for a reader that holds numbers as doubles: none above 2⁵³.
    fn exact_in_a_double(v: &Value) -> bool {
        match v {
            Value::Number(n) => n.as_u64().is_none_or(|n| n <= 1 << 53),
            Value::Array(a) => a.iter().all(exact_in_a_double),
            Value::Object(o) => o.values().all(exact_in_a_double),
            _ => true,
        }
    }

    #[test]
    fn the_default_is_written_without_n_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("tune-p.k-s-n4-trn2-random-7.jsonl");
        let written = meta(default_line());
        assert_eq!(written.default.as_ref().unwrap().n, Entry::NOT_A_PROPOSAL);
        write_meta(&journal, &written).unwrap();
        let file: Value =
            serde_json::from_str(&std::fs::read_to_string(meta_path(&journal)).unwrap()).unwrap();
        assert_eq!(file["schema"], 2);
        // The default is the evaluation line without `n`: no sentinel a JavaScript reader
        // would round (2⁶⁴ − 1 is 18446744073709551616 as a double).
        for (k, v) in default_line().as_object().unwrap() {
            assert_eq!(&file["default"][k], v, "{k}: {file}");
        }
        assert!(file["default"].get("n").is_none(), "{file}");
        assert!(exact_in_a_double(&file), "{file}");
        // Read back: the same meta, and written again, the same file.
        let read = read_meta_checked(&journal).unwrap().expect("a meta file");
        let value = |m: &JournalMeta| serde_json::to_value(m).unwrap();
        assert_eq!(value(&read), value(&written));
        assert_eq!(read.default.as_ref().unwrap().n, Entry::NOT_A_PROPOSAL);
        // No default (it did not run): `null`, as before.
        let none = meta(Value::Null);
        write_meta(&journal, &none).unwrap();
        let read = read_meta_checked(&journal).unwrap().unwrap();
        assert!(read.default.is_none());
        let file = std::fs::read_to_string(meta_path(&journal)).unwrap();
        assert!(file.contains("\"default\": null"), "{file}");
    }

    #[test]
    fn a_meta_file_of_schema_1_with_the_defaults_n_sentinel_still_reads() {
        // As the tool wrote it before: schema 1, the default's `n` = 2⁶⁴ − 1, sealed.
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("tune-p.k-s-n4-trn2-random-7.jsonl");
        let mut line = default_line();
        line["n"] = u64::MAX.into();
        let mut old = serde_json::to_value(meta(Value::Null)).unwrap();
        old["default"] = line;
        old["schema"] = 1.into();
        crate::seal::seal_json(&mut old);
        let text = serde_json::to_string_pretty(&old).unwrap();
        assert!(text.contains("\"n\": 18446744073709551615"), "{text}");
        std::fs::write(meta_path(&journal), text).unwrap();
        let read = read_meta_checked(&journal).unwrap().expect("an old meta file reads");
        let d = read.default.expect("its default");
        assert_eq!(
            (d.n, d.status.as_str(), d.time_us),
            (Entry::NOT_A_PROPOSAL, "measured", Some(8.5))
        );
        assert_eq!(serde_json::to_value(&d.params).unwrap(), json!({"bufs": 2}));
        assert_eq!((read.seed, read.strategy.as_str()), (7, "random"));
        // Another schema is still refused.
        old.as_object_mut().unwrap().remove(crate::seal::FIELD);
        old["schema"] = 3.into();
        crate::seal::seal_json(&mut old);
        std::fs::write(meta_path(&journal), old.to_string()).unwrap();
        assert!(read_meta_checked(&journal).unwrap_err().contains("schema Some(3)"));
    }

    #[test]
    fn journal_lines_are_read_by_kind_and_a_roll_back_names_the_latest_of_its_n() {
        let entry = |n: usize, a: i64, t: f64| {
            json!({"n": n, "params": {"a": a}, "status": "measured", "time_us": t,
                   "program_hash": null})
        };
        let lines = vec![
            entry(0, 1, 5.0),
            entry(1, 2, 4.0),
            json!({"line": "rolled_back", "n": 1, "params": {"a": 2}, "reason": "a=2 wrong",
                   "why": "wrong"}),
            json!({"line": "round", "round": 1, "proposals": 2, "best_time_us": 5.0,
                   "best_params": {"a": 1}, "decision": "rolled_back", "reason": "r",
                   "goal_met": false}),
            json!({"line": "from a later version"}),
            // A resumed proposer evaluated other params under n = 1: it stands.
            entry(1, 3, 3.0),
        ];
        let j = JournalLines::of(lines);
        assert_eq!((j.entries.len(), j.rounds.len(), j.rolled_back.len()), (3, 1, 1));
        assert!(j.entries.iter().all(|e| e.status == "measured"), "as journaled");
        // What `--resume` takes instead of validating the winner again.
        assert_eq!(j.rolled_back[0].why.as_deref(), Some("wrong"));
        let after: Vec<String> =
            j.entries_after_roll_backs().into_iter().map(|e| e.status).collect();
        assert_eq!(after, ["measured", "rolled_back", "measured"]);
    }
}
