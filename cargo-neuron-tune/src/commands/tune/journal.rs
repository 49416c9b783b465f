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
    /// The failing case in words: the smallest failing shape, its inputs and what went
    /// wrong (or the harness's error).
    pub fn case_words(&self) -> String {
        match (&self.case, &self.error) {
            (Some(c), _) => format!(
                "smallest failing shape {} (input seed {}, {:?} inputs): {}",
                c.shape, c.input_seed, c.distribution, c.message
            ),
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
    /// The default parameters' evaluation (`n` is meaningless), if they run.
    pub default: Option<Entry>,
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

/// The schema of a journal's meta file (its `schema` field; sealed like a journal line).
const META_SCHEMA: u64 = 1;

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
        Some(META_SCHEMA) => {}
        other => return Err(format!("schema {other:?}, this tool reads {META_SCHEMA}")),
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
    /// What the strategy is told. A pruned variant is told its roofline bound: a value no
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
    use super::JournalLines;
    use serde_json::json;

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
