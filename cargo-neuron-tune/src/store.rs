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

/// An open, locked store.
pub struct Store {
    root: PathBuf,
    _lock: File,
}

impl Store {
    /// Open (creating) the store under `target_dir`, waiting for another run's lock.
    /// `waiting` is called once if the lock is held by someone else.
    pub fn open(target_dir: &Path, waiting: impl FnOnce(&Path)) -> Result<Store> {
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
                waiting(&lock_path);
                lock.lock().with_context(|| format!("locking {}", lock_path.display()))?;
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", lock_path.display()))
            }
        }
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

    /// A stored value, or `None` if absent or unreadable (a corrupt entry is re-measured).
    pub fn get<T: DeserializeOwned>(&self, kind: &str, key: &str) -> Option<T> {
        let text = fs::read_to_string(self.path(kind, key)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Store a value atomically.
    pub fn put<T: Serialize>(&self, kind: &str, key: &str, value: &T) -> Result<()> {
        let path = self.path(kind, key);
        write_atomic(&path, serde_json::to_string_pretty(value)?.as_bytes())
    }

    /// Append one JSON line to a journal (created if missing) and flush it to disk.
    pub fn append_journal(&self, name: &str, line: &serde_json::Value) -> Result<PathBuf> {
        let dir = self.root.join("journals");
        fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.jsonl"));
        let mut f = OpenOptions::new().create(true).append(true).open(&path)?;
        writeln!(f, "{line}")?;
        f.sync_data()?;
        Ok(path)
    }
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
    fn put_get_round_trip_and_keys_separate_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_| panic!("nobody else holds the lock")).unwrap();
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
        let first = Store::open(dir.path(), |_| {}).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let path = dir.path().to_path_buf();
        let t = std::thread::spawn(move || {
            let waited = std::cell::Cell::new(false);
            let _second = Store::open(&path, |_| waited.set(true)).unwrap();
            tx.send(waited.get()).unwrap();
        });
        // The second open cannot finish while the first holds the lock.
        assert!(rx.recv_timeout(std::time::Duration::from_millis(300)).is_err());
        drop(first);
        assert!(
            rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap(),
            "it said it was waiting"
        );
        t.join().unwrap();
    }

    #[test]
    fn journal_appends_lines() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_| {}).unwrap();
        store.append_journal("run", &serde_json::json!({"a": 1})).unwrap();
        let p = store.append_journal("run", &serde_json::json!({"a": 2})).unwrap();
        let text = fs::read_to_string(p).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"a\":2}\n");
    }
}
