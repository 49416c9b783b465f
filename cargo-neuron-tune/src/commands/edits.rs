//! All-or-nothing file changes: a command computes every change first, then [`Edits::apply`]
//! writes them (each atomically) and, if one write fails, puts back what the others wrote.

use crate::exit::{fail, Exit, Failure};
use crate::store::write_atomic;
use std::path::{Path, PathBuf};

/// The file changes of one command, not yet written.
#[derive(Debug, Default)]
pub struct Edits {
    /// (path, new contents, contents before — `None` when the file is new).
    files: Vec<(PathBuf, String, Option<String>)>,
}

impl Edits {
    /// Change `path` (read now, so a later restore puts back exactly this) to `contents`.
    pub fn change(&mut self, path: &Path, contents: String) -> Result<(), Failure> {
        let before = read(path)?;
        self.files.push((path.to_path_buf(), contents, Some(before)));
        Ok(())
    }

    /// Create `path`, which must not exist yet.
    pub fn create(&mut self, path: &Path, contents: String) -> Result<(), Failure> {
        if path.exists() {
            return Err(fail(Exit::Config, format!("{} already exists", path.display())));
        }
        self.files.push((path.to_path_buf(), contents, None));
        Ok(())
    }

    /// Write every change; if one fails, restore the files already written and say so.
    pub fn apply(self) -> Result<(), Failure> {
        self.apply_with(write_atomic)
    }

    fn apply_with(
        self,
        mut write: impl FnMut(&Path, &[u8]) -> anyhow::Result<()>,
    ) -> Result<(), Failure> {
        for (i, (path, contents, _)) in self.files.iter().enumerate() {
            if let Err(e) = write(path, contents.as_bytes()) {
                let mut message = format!("writing {}: {e:#}; nothing was changed", path.display());
                for (done, _, before) in self.files[..i].iter().rev() {
                    let undone = match before {
                        Some(text) => write_atomic(done, text.as_bytes()),
                        None => std::fs::remove_file(done).map_err(Into::into),
                    };
                    if let Err(u) = undone {
                        message = format!(
                            "writing {}: {e:#}; and restoring {} failed too: {u:#}",
                            path.display(),
                            done.display()
                        );
                    }
                }
                return Err(fail(Exit::Internal, message));
            }
        }
        Ok(())
    }
}

/// A file's text, or a usage error naming it.
pub fn read(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map_err(|e| fail(Exit::Config, format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_restores_the_files_written_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
        std::fs::write(&a, "old a").unwrap();
        let mut edits = Edits::default();
        edits.change(&a, "new a".into()).unwrap();
        edits.create(&b, "new b".into()).unwrap();
        edits.create(&c, "new c".into()).unwrap();
        let err = edits
            .apply_with(|p, bytes| {
                if p.ends_with("c") {
                    anyhow::bail!("disk full")
                }
                write_atomic(p, bytes)
            })
            .unwrap_err();
        assert!(err.message.contains("disk full") && err.message.contains("nothing was changed"));
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old a");
        assert!(!b.exists() && !c.exists());
    }

    #[test]
    fn creating_an_existing_file_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, "mine").unwrap();
        let err = Edits::default().create(&a, "x".into()).unwrap_err();
        assert_eq!(err.exit, Exit::Config);
        assert!(err.message.contains("already exists"));
    }
}
