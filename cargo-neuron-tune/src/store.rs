//! The variant store: what has been traced and measured, keyed by content.
//!
//! Lives under `<target-dir>/neuron-tune/`. A result is keyed by the hash of the variant's
//! traced program, the chip description and the simulator version, so an unchanged program
//! is never simulated twice and a changed kernel, chip or simulator invalidates exactly what
//! it affects. Every file is written atomically (temp file in the same directory, then
//! rename), journals are append-only JSON lines, and a lock file keeps two runs from
//! interleaving: the second one says what it is waiting for and waits.

use anyhow::{Context, Result};
use serde::{de::DeserializeOwned, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The format of store entries; an entry of another is measured again.
pub const SCHEMA: u32 = 1;

/// A store entry: the value as the exact JSON text that was written, sealed by its key and
/// a checksum of that text (so an edited or truncated entry, or one copied under another
/// key, is detected rather than served).
#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    schema: u32,
    key: String,
    checksum: String,
    value: String,
}

use crate::seal::checksum;

/// The format of journal lines (each line carries it, and a checksum of itself).
pub const JOURNAL_SCHEMA: u64 = 1;

/// The value text of a sealed entry, or why it cannot be trusted.
pub fn open_entry(text: &str, key: &str) -> std::result::Result<String, String> {
    let e: Entry = serde_json::from_str(text).map_err(|e| format!("not a store entry ({e})"))?;
    if e.schema != SCHEMA {
        return Err(format!("schema {} (this tool writes {SCHEMA})", e.schema));
    }
    if e.key != key {
        return Err(format!("it is the entry of key {}, not {key}", e.key));
    }
    if checksum(&e.value) != e.checksum {
        return Err("its checksum does not match its contents".into());
    }
    Ok(e.value)
}

/// An open, locked store.
pub struct Store {
    root: PathBuf,
    _lock: File,
}

impl Store {
    /// Open (creating) the store under `target_dir`, waiting for another run's lock.
    /// `waiting` is called once if the lock is held by someone else, with the lock's path
    /// and who holds it (`pid N (command line)`, empty if unknown).
    pub fn open(target_dir: &Path, waiting: impl FnOnce(&Path, &str)) -> Result<Store> {
        let root = target_dir.join("neuron-tune");
        fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        let lock_path = root.join("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                // The holder wrote who it is into the lock file.
                let holder = fs::read_to_string(&lock_path).unwrap_or_default();
                waiting(&lock_path, holder.trim());
                lock.lock().with_context(|| format!("locking {}", lock_path.display()))?;
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", lock_path.display()))
            }
        }
        // Who holds it, for the next run's waiting message (best effort: the lock is the
        // file lock, not this text).
        let me: Vec<String> = std::env::args().collect();
        let _ = lock.set_len(0).and_then(|_| {
            (&lock).write_all(format!("pid {} ({})", std::process::id(), me.join(" ")).as_bytes())
        });
        Ok(Store { root, _lock: lock })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The key of a result simulated by this tool's own simulator version:
    /// [`Store::key_for`] with `neuron_sim::SIM_VERSION`.
    pub fn key(program_hash: &str, chip_toml: &str, what: &str) -> String {
        Store::key_for(program_hash, chip_toml, neuron_sim::SIM_VERSION, what)
    }

    /// The key of a result: program hash + chip + the version of the simulator that
    /// produced it (the harness's, from its `list`) + what was measured. A result of one
    /// simulator version is never served for another.
    pub fn key_for(program_hash: &str, chip_toml: &str, sim_version: &str, what: &str) -> String {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for part in [program_hash, chip_toml, sim_version, what] {
            h.update(part.as_bytes());
            h.update(&[0]);
        }
        format!("{:032x}", h.digest128())
    }

    fn path(&self, kind: &str, key: &str) -> PathBuf {
        self.root.join(kind).join(&key[..2]).join(format!("{key}.json"))
    }

    /// The size in bytes of a stored entry's file, without reading it (`None`: absent).
    pub fn entry_len(&self, kind: &str, key: &str) -> Option<u64> {
        std::fs::metadata(self.path(kind, key)).ok().map(|m| m.len())
    }

    /// A stored value, or `None` if absent. An entry that is not what was written (a
    /// checksum or key mismatch, another schema, unreadable) is never used: it is reported
    /// on stderr with its path and measured again.
    pub fn get<T: DeserializeOwned>(&self, kind: &str, key: &str) -> Option<T> {
        let path = self.path(kind, key);
        let text = fs::read_to_string(&path).ok()?;
        match open_entry(&text, key) {
            Ok(value) => match serde_json::from_str(&value) {
                Ok(v) => Some(v),
                Err(e) => {
                    eprintln!(
                        "warning: store entry {} is of an older format ({e}); measuring again",
                        path.display()
                    );
                    None
                }
            },
            Err(why) => {
                eprintln!(
                    "warning: corrupt store entry {}: {why}; measuring again",
                    path.display()
                );
                None
            }
        }
    }

    /// Store a value atomically, sealed with its key, the schema version and a checksum.
    pub fn put<T: Serialize>(&self, kind: &str, key: &str, value: &T) -> Result<()> {
        let path = self.path(kind, key);
        let value = serde_json::to_string(value)?;
        let entry =
            Entry { schema: SCHEMA, key: key.to_string(), checksum: checksum(&value), value };
        write_atomic(&path, serde_json::to_string_pretty(&entry)?.as_bytes())
    }

    /// Append one JSON object as a line of a journal (created if missing), sealed with the
    /// journal schema and a checksum, and flush it to disk.
    pub fn append_journal(&self, name: &str, line: &serde_json::Value) -> Result<PathBuf> {
        append_journal(&self.root, name, line)
    }
}

/// [`Store::append_journal`] for a command that does not hold the store's lock (an append
/// of one line is atomic enough for a journal: a torn last line is rejected by readers).
pub fn append_journal(root: &Path, name: &str, line: &serde_json::Value) -> Result<PathBuf> {
    let dir = root.join("journals");
    fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.jsonl"));
    let mut line = line.clone();
    if let serde_json::Value::Object(obj) = &mut line {
        obj.insert("schema".into(), JOURNAL_SCHEMA.into());
    }
    crate::seal::seal_json(&mut line);
    let mut f = OpenOptions::new().create(true).read(true).append(true).open(&path)?;
    // A killed run can leave a torn last line: start a line of our own, or this one would
    // be glued to it and lost with it on every read.
    if ends_mid_line(&mut f)? {
        writeln!(f)?;
    }
    // One write of the whole line (the `Display` of a `Value` writes each token apart:
    // a syscall per token into an unbuffered file).
    f.write_all(format!("{line}\n").as_bytes())?;
    f.sync_data()?;
    Ok(path)
}

/// Whether a file's last byte is not a newline (an empty file is not mid-line).
fn ends_mid_line(f: &mut File) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    if f.metadata()?.len() == 0 {
        return Ok(false);
    }
    f.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    f.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// A journal as read back: the lines that can be trusted, and those that cannot.
#[derive(Debug, Default)]
pub struct JournalRead {
    /// Trusted lines in file order, their seal and schema taken off.
    pub lines: Vec<serde_json::Value>,
    /// `(line number, why)` of every line that is not used. The last line of a journal
    /// killed mid-write is one of them (torn), which is expected after SIGKILL.
    pub rejected: Vec<(usize, String)>,
    /// The line numbers among `rejected` written by a newer tool (a higher schema): not
    /// damage, so a reader that sets damaged lines aside leaves these in place.
    pub newer: Vec<usize>,
}

impl JournalRead {
    /// The `rejected` lines that are damage (cut short, edited, an older schema), not a
    /// newer tool's.
    pub fn damaged(&self) -> Vec<&(usize, String)> {
        self.rejected.iter().filter(|(n, _)| !self.newer.contains(n)).collect()
    }
}

/// Read the journal at `path` (a missing file is an empty journal). A line that is not
/// JSON, not sealed, of another schema or whose checksum does not match is never used:
/// it is listed in `rejected`, so the evaluation it records is made again.
pub fn read_journal(path: &Path) -> Result<JournalRead> {
    let text = match fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(JournalRead::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(parse_journal(&text))
}

/// [`read_journal`] on a journal's text.
pub fn parse_journal(text: &str) -> JournalRead {
    let mut read = JournalRead::default();
    for (i, raw) in text.lines().enumerate() {
        let why = match serde_json::from_str::<serde_json::Value>(raw) {
            Err(e) => format!("not JSON ({e})"),
            Ok(mut v) => match crate::seal::unseal_json(&mut v) {
                Err(why) => why,
                Ok(()) => match v.as_object_mut().and_then(|o| o.remove("schema")) {
                    Some(s) if s == JOURNAL_SCHEMA => {
                        read.lines.push(v);
                        continue;
                    }
                    s => {
                        if s.as_ref().and_then(|s| s.as_u64()).is_some_and(|s| s > JOURNAL_SCHEMA) {
                            read.newer.push(i + 1);
                        }
                        format!(
                            "journal schema {} (this tool reads {JOURNAL_SCHEMA})",
                            s.map_or("none".to_string(), |s| s.to_string())
                        )
                    }
                },
            },
        };
        read.rejected.push((i + 1, why));
    }
    read
}

/// Move the lines numbered `rejected` (1-based, as [`JournalRead::rejected`] gives them) out
/// of the journal at `path` into `<path>.rejected` (appended), so that the next read of the
/// journal does not warn about them again, while nothing is destroyed: a damaged line may
/// still be worth a look. The `.rejected` file is written first and the journal then
/// replaced atomically, so a crash between the two leaves a line in both, never in
/// neither. Returns the `.rejected` file's path. The caller holds the store's lock (no
/// other process appends to the journal meanwhile).
pub fn set_aside_journal_lines(path: &Path, rejected: &[usize]) -> Result<PathBuf> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    // Byte for byte, each line with its own ending (a `\r` kept, a torn last line given its
    // newline), numbered as `str::lines` numbers them for `parse_journal`.
    let (mut kept, mut moved) = (Vec::new(), Vec::new());
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    if !bytes.is_empty() {
        for (i, line) in body.split(|&b| b == b'\n').enumerate() {
            let to = if rejected.contains(&(i + 1)) { &mut moved } else { &mut kept };
            to.extend_from_slice(line);
            to.push(b'\n');
        }
    }
    let mut aside = path.as_os_str().to_owned();
    aside.push(".rejected");
    let aside = PathBuf::from(aside);
    let mut f = OpenOptions::new().create(true).append(true).open(&aside)?;
    f.write_all(&moved)?;
    f.sync_data()?;
    write_atomic(path, &kept)?;
    Ok(aside)
}

/// Why [`write_atomic`] could not write `path`, found before any work is done, so that a
/// typo in an output flag is refused up front (exit 2) instead of after the build and the
/// simulation: `path` is a directory, or its nearest existing ancestor (the directory
/// `write_atomic` would create it in, or create directories under) is not a directory or
/// cannot be read. `None` when nothing on disk stands in the way.
pub fn unwritable(path: &Path) -> Option<String> {
    if path.as_os_str().is_empty() {
        return Some("an empty path; name a file".into());
    }
    if path.is_dir() {
        return Some("a directory; name a file in it".into());
    }
    for dir in path.ancestors().skip(1) {
        let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
        match fs::metadata(dir) {
            Ok(m) if m.is_dir() => return None,
            Ok(_) => return Some(format!("parent {} is not a directory", dir.display())),
            // Made by `write_atomic`, or under a file an ancestor further up names.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Some(format!("parent {}: {}", dir.display(), e.kind())),
        }
    }
    None
}

/// Write `bytes` to `path` atomically: a temp file in the same directory, synced, renamed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // The temporary file's own name means nothing to the user: say which file and why.
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| {
        anyhow::anyhow!("cannot create {} in {}: {}", path.display(), dir.display(), e.kind())
    })?;
    // Temp files are created private; what we write is for the user to read.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file().set_permissions(fs::Permissions::from_mode(0o644))?;
    }
    tmp.write_all(bytes).with_context(|| format!("writing {}", path.display()))?;
    tmp.as_file().sync_data().with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_appended_after_a_torn_one_starts_a_line_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let first = serde_json::json!({"n": 1, "time_us": 2.5});
        let path = append_journal(dir.path(), "j", &first).unwrap();
        // A killed run's half-written line, with no newline.
        OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"n\": 2, \"ti").unwrap();
        let third = serde_json::json!({"n": 3, "time_us": 4.5});
        append_journal(dir.path(), "j", &third).unwrap();
        let read = read_journal(&path).unwrap();
        let ns: Vec<u64> = read.lines.iter().map(|l| l["n"].as_u64().unwrap()).collect();
        assert_eq!(ns, [1, 3], "the torn line alone is lost: {read:?}");
        assert_eq!(read.rejected.len(), 1, "{read:?}");
        assert_eq!(read.rejected[0].0, 2, "line 2 is the torn one: {read:?}");
    }

    #[test]
    fn an_output_path_under_a_file_or_naming_a_directory_is_unwritable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("afile");
        fs::write(&file, "").unwrap();
        let why = |p: &Path| unwritable(p);
        let parent = format!("parent {} is not a directory", file.display());
        assert_eq!(why(&file.join("x.json")), Some(parent.clone()));
        assert_eq!(why(&file.join("deeper/x.json")), Some(parent));
        assert_eq!(why(dir.path()), Some("a directory; name a file in it".into()));
        // Directories still to be made, an existing file to replace, a bare name: fine.
        assert_eq!(why(&dir.path().join("new/dirs/x.json")), None);
        assert_eq!(why(&file), None);
        assert_eq!(why(Path::new("x.json")), None);
        // What `write_atomic` says of the same paths, after the work.
        assert!(write_atomic(&file.join("x.json"), b"").is_err());
        assert!(write_atomic(&dir.path().join("new/dirs/x.json"), b"").is_ok());
    }

    #[test]
    fn an_edited_truncated_or_moved_entry_is_never_served() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_, _| panic!("nobody else holds the lock")).unwrap();
        let (k1, k2) = (Store::key("a", "c", "bench"), Store::key("b", "c", "bench"));
        store.put("bench", &k1, &serde_json::json!({"time_us": 12.5})).unwrap();
        assert_eq!(store.get::<serde_json::Value>("bench", &k1).unwrap()["time_us"], 12.5);
        let path = store.path("bench", &k1);
        let text = fs::read_to_string(&path).unwrap();
        // Edited into other valid JSON.
        fs::write(&path, text.replace("12.5", "1.5")).unwrap();
        assert!(store.get::<serde_json::Value>("bench", &k1).is_none());
        // Truncated.
        fs::write(&path, &text[..text.len() / 2]).unwrap();
        assert!(store.get::<serde_json::Value>("bench", &k1).is_none());
        // Copied under another key.
        let other = store.path("bench", &k2);
        fs::create_dir_all(other.parent().unwrap()).unwrap();
        fs::write(&other, &text).unwrap();
        assert!(store.get::<serde_json::Value>("bench", &k2).is_none());
        // Rewritten, it is served again.
        store.put("bench", &k1, &serde_json::json!({"time_us": 12.5})).unwrap();
        assert!(store.get::<serde_json::Value>("bench", &k1).is_some());
    }

    #[test]
    fn put_get_round_trip_and_keys_separate_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_, _| panic!("nobody else holds the lock")).unwrap();
        let k1 = Store::key("abc", "chip-a", "bench");
        let k2 = Store::key("abc", "chip-b", "bench");
        let k3 = Store::key("abd", "chip-a", "bench");
        assert!(k1 != k2 && k1 != k3 && k2 != k3);
        assert_eq!(k1, Store::key_for("abc", "chip-a", neuron_sim::SIM_VERSION, "bench"));
        assert_ne!(k1, Store::key_for("abc", "chip-a", "0.0.0+other", "bench"));
        assert_eq!(store.get::<u64>("bench", &k1), None);
        store.put("bench", &k1, &42u64).unwrap();
        assert_eq!(store.get::<u64>("bench", &k1), Some(42));
        // A corrupt entry reads as absent (it will be re-measured), never as garbage.
        fs::write(store.path("bench", &k1), b"{not json").unwrap();
        assert_eq!(store.get::<u64>("bench", &k1), None);
    }

    #[test]
    fn second_open_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let first = Store::open(dir.path(), |_, _| {}).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let path = dir.path().to_path_buf();
        let t = std::thread::spawn(move || {
            let holder = std::cell::RefCell::new(None);
            let _second =
                Store::open(&path, |_, who| *holder.borrow_mut() = Some(who.to_string())).unwrap();
            tx.send(holder.take()).unwrap();
        });
        // The second open cannot finish while the first holds the lock.
        assert!(rx.recv_timeout(std::time::Duration::from_millis(300)).is_err());
        drop(first);
        let holder = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        // It said it was waiting, and for whom.
        let holder = holder.expect("it said it was waiting");
        assert!(holder.starts_with(&format!("pid {} (", std::process::id())), "{holder}");
        t.join().unwrap();
    }

    #[test]
    fn journal_appends_sealed_lines_and_reads_back_only_trusted_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_, _| {}).unwrap();
        store.append_journal("run", &serde_json::json!({"a": 1})).unwrap();
        store.append_journal("run", &serde_json::json!({"a": 2})).unwrap();
        let p = store.append_journal("run", &serde_json::json!({"a": 3})).unwrap();
        let text = fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 3);
        let read = read_journal(&p).unwrap();
        assert_eq!(read.lines, [1, 2, 3].map(|a| serde_json::json!({ "a": a })));
        assert!(read.rejected.is_empty());
        // Line 2 edited into other valid JSON, line 3 torn (as SIGKILL mid-write leaves it).
        let lines: Vec<&str> = text.lines().collect();
        let torn = &lines[2][..lines[2].len() / 2];
        fs::write(&p, format!("{}\n{}\n{torn}", lines[0], lines[1].replace("\"a\":2", "\"a\":7")))
            .unwrap();
        let read = read_journal(&p).unwrap();
        assert_eq!(read.lines, [serde_json::json!({"a": 1})]);
        assert_eq!(read.rejected.iter().map(|r| r.0).collect::<Vec<_>>(), [2, 3]);
        assert!(read.rejected[0].1.contains("checksum"), "{:?}", read.rejected);
        assert!(read.rejected[1].1.contains("not JSON"), "{:?}", read.rejected);
        // A missing journal is an empty one.
        assert!(read_journal(&dir.path().join("nope.jsonl")).unwrap().lines.is_empty());
        // Set aside, the rejected lines leave the journal for `.rejected`, whole and in
        // order; what stays reads back with nothing rejected, and appends go on after it.
        let edited = lines[1].replace("\"a\":2", "\"a\":7");
        let aside = set_aside_journal_lines(&p, &[2, 3]).unwrap();
        assert_eq!(aside, p.with_file_name("run.jsonl.rejected"));
        assert_eq!(fs::read_to_string(&aside).unwrap(), format!("{edited}\n{torn}\n"));
        assert_eq!(fs::read_to_string(&p).unwrap(), format!("{}\n", lines[0]));
        store.append_journal("run", &serde_json::json!({"a": 4})).unwrap();
        let read = read_journal(&p).unwrap();
        assert_eq!(read.lines, [1, 4].map(|a| serde_json::json!({ "a": a })));
        assert!(read.rejected.is_empty(), "{:?}", read.rejected);
    }
}
