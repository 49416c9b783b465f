//! The kernel crates of a command: discovered, built, their workers started, listed.
//!
//! [`Workspace::open`] is every command's first step: `cargo metadata` finds the kernel
//! crates, cargo builds each harness, and each crate gets its [`Pool`] for the whole command;
//! the first worker's first request is `list` (under the same timeout and panic isolation
//! as any variant). The workers run the workspace's own links to the binaries its builds
//! produced ([`RunExes`]), never cargo's output path, which other workspaces share.

use crate::cargo::{command_text, BuildError, CargoFlags, KernelCrate};
use crate::exit::{fail, Exit, Failure};
use crate::models::TunedSet;
use crate::output::{Event, Reporter};
use crate::worker::{Pool, PoolEvents};
use neuron_tune_protocol::{ErrorKind, ListDoc, RequestBody, ResponseBody};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Settings every command shares.
#[derive(Clone)]
pub struct Ctx {
    pub out: Arc<Reporter>,
    pub jobs: usize,
    pub timeout: Duration,
}

/// A built kernel crate with its workers and what its harness lists.
pub struct Crate {
    pub krate: KernelCrate,
    pub exe: PathBuf,
    pub list: ListDoc,
    pub pool: Pool,
}

/// The kernel crates of one command.
pub struct Workspace {
    pub crates: Vec<Crate>,
    /// The workspace root (where its root Cargo.toml is).
    pub root: PathBuf,
    pub target_dir: PathBuf,
    /// The tuned databases of every local package, and which ones each package's harness
    /// links (a model uses those of its crate's: [`TunedSet::for_model`]).
    pub tuned: Tuned,
    /// The workspace's kernel crates left out of the selection (`-p`, `--exclude`), never
    /// built: each package's name and the kernels its configuration names
    /// ([`configured_kernels`]), what `report` can know of them.
    pub unselected: Vec<(String, Vec<String>)>,
    /// The executables the crates' workers run (each crate's `exe`): removed after the
    /// crates (and their pools) are dropped, so it stays the last field.
    _exes: Option<RunExes>,
}

/// The kernels a kernel crate's configuration names, without building it: the keys of
/// `[package.metadata.neuron-tune.kernels]` and of `[kernels]` in the `neuron-tune.toml`
/// beside its manifest. (A kernel with no space configured is not among them.)
pub fn configured_kernels(metadata: &serde_json::Value, manifest: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = metadata["neuron-tune"]["kernels"]
        .as_object()
        .map(|k| k.keys().cloned().collect())
        .unwrap_or_default();
    let side = manifest.with_file_name("neuron-tune.toml");
    let table = std::fs::read_to_string(side).ok().and_then(|t| t.parse::<toml::Table>().ok());
    if let Some(kernels) = table.as_ref().and_then(|t| t.get("kernels")?.as_table()) {
        names.extend(kernels.keys().cloned());
    }
    names.sort();
    names.dedup();
    names
}

/// The tuned databases, or why one was refused. Only the commands that use them (models,
/// `tune`, `list`, baselines) fail on a damaged one (exit 2, naming the file and the
/// record); those that read them only to mention a winner (kernel `bench`, `profile`
/// without `--tuned`) warn and go on; `check` and `build` read them only with `--tuned`.
/// Which packages a model's crate links does not depend on them ([`Tuned::links_of`]).
pub struct Tuned {
    /// Every database that reads (all of them when `damage` is `None`).
    set: TunedSet,
    /// The refusal of the first database that does not read.
    damage: Option<Failure>,
}

impl Tuned {
    pub fn get(&self) -> Result<&TunedSet, Failure> {
        match &self.damage {
            None => Ok(&self.set),
            Some(f) => Err(Failure::new(f.exit, f.message.clone())),
        }
    }

    /// The local packages the harness of the package whose manifest is `manifest` links,
    /// and the kernels each defines, whether or not every database reads (one that does not
    /// adds no kernel names): what finds the crate a model's call runs from
    /// (`model_calls::kernel_owner`), so that a command which does not apply tuned records
    /// works at a model's shape as at a named one.
    pub fn links_of(&self, manifest: &std::path::Path) -> crate::models::ModelLinks<'_> {
        self.set.links_of(manifest)
    }
}

struct StartEvents {
    package: String,
    out: Arc<Reporter>,
}

impl PoolEvents for StartEvents {
    fn worker_started(&self, pid: u32) {
        self.out.event(&Event::WorkerStarted { package: self.package.clone(), pid });
    }
}

/// How [`Workspace::open_with`] opens a workspace.
#[derive(Clone, Debug, Default)]
pub struct OpenOpts {
    /// Give the local packages under this directory build units of their own. cargo names
    /// a path package's units by its path *relative to its workspace root*, so two
    /// checkouts of one workspace built into one target dir share (and overwrite) the same
    /// units, and one checkout's fingerprints can make the other's changed sources look
    /// fresh. A per-package profile override (`codegen-units`, which changes neither
    /// semantics nor results) gives these packages distinct units, while every dependency
    /// outside the directory (registry crates, shared path crates) stays shared.
    pub own_units_under: Option<PathBuf>,
}

/// The `codegen-units` of the base revision's own packages: any value the user is unlikely
/// to have set gives them distinct build units.
const BASE_CODEGEN_UNITS: u32 = 15;

impl Workspace {
    pub fn open(cargo: &CargoFlags, ctx: &Ctx) -> Result<Workspace, Failure> {
        Workspace::open_with(cargo, ctx, &OpenOpts::default())
    }

    pub fn open_with(cargo: &CargoFlags, ctx: &Ctx, opts: &OpenOpts) -> Result<Workspace, Failure> {
        let meta = cargo.metadata()?;
        cargo.check_profile(&meta)?;
        let mut cargo = cargo.clone();
        if let Some(dir) = &opts.own_units_under {
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            let profile = cargo.profile_name().to_string();
            for p in meta.packages.iter().filter(|p| p.source.is_none()) {
                let manifest = p.manifest_path.as_std_path();
                let manifest = manifest.canonicalize().unwrap_or_else(|_| manifest.to_path_buf());
                if manifest.starts_with(&dir) {
                    cargo.build_config.push(format!(
                        "profile.{profile}.package.\"{}\".codegen-units={BASE_CODEGEN_UNITS}",
                        p.name
                    ));
                }
            }
        }
        let cargo = &cargo;
        let target_dir = cargo.target_dir(&meta);
        let runs = target_dir.join("neuron-tune").join("workers");
        let crates = cargo.kernel_crates(&meta)?;
        if crates.is_empty() {
            return Err(fail(
                Exit::Config,
                format!(
                    "no kernel crates in {}: a kernel crate has [package.metadata.neuron-tune] \
                     with harness = \"<bin>\"; `cargo neuron-tune init` makes a library crate \
                     a kernel crate (then `cargo neuron-tune new NAME --template elementwise` \
                     adds a kernel)",
                    meta.workspace_root
                ),
            ));
        }
        let mut built = Vec::new();
        let mut exes: Option<RunExes> = None;
        let io = |what: &str, path: &Path, e: std::io::Error| {
            fail(Exit::Internal, format!("{what} {}: {e}", path.display()))
        };
        for k in crates {
            ctx.out.status(format!("   Building {} harness `{}`", k.package, k.harness));
            // From the build to the link, no other command's build can put its binary at
            // cargo's path (a build outside this tool still could, in that moment only).
            let lock = BuildLock::take(&runs, &ctx.out).map_err(|e| io("locking", &runs, e))?;
            let how = ctx.out.cargo_output();
            ctx.out.verbose(format!(
                "   Running `{}`",
                command_text(&cargo.harness_command(&k, &how))
            ));
            let exe = cargo.build_harness(&k, &how).map_err(|e| match e {
                BuildError::Failed { ref diagnostics, .. } => {
                    Failure { diagnostics: diagnostics.clone(), ..fail(Exit::Build, e.to_string()) }
                }
                BuildError::Interrupted => crate::interrupt::failure(),
                other => fail(Exit::Internal, other.to_string()),
            })?;
            let run = match &mut exes {
                Some(run) => run,
                slot => slot.insert(RunExes::create(&runs).map_err(|e| io("creating", &runs, e))?),
            };
            let exe = run.link(&exe, &k.package).map_err(|e| io("linking", &exe, e))?;
            drop(lock);
            ctx.out.verbose(format!("   Workers of {} run {}", k.package, exe.display()));
            let dir = k.manifest_path.parent().map(PathBuf::from).unwrap_or_default();
            let events = Arc::new(StartEvents { package: k.package.clone(), out: ctx.out.clone() });
            let mut pool = Pool::new(&exe, &dir, ctx.jobs, ctx.timeout, events);
            let done = pool
                .request(RequestBody::List)
                .map_err(|f| fail(f.exit, format!("{}: {}", k.package, f.message)))?;
            let list = match done.answer {
                Ok(ResponseBody::List(l)) => l,
                Ok(other) => return Err(crate::eval::unexpected(&other)),
                // The harness's own code failed listing its kernels (a panic in a
                // registration, a crash, a hang): what README's exit 4 covers. Anything
                // else is how the crate is configured.
                Err(e) => {
                    let exit = match e.kind {
                        ErrorKind::Panic | ErrorKind::Crashed | ErrorKind::Timeout => Exit::Check,
                        _ => Exit::Config,
                    };
                    return Err(fail(
                        exit,
                        format!("{}: listing its kernels: {} ({})", k.package, e.message, e.kind),
                    ));
                }
            };
            if !done.output.is_empty() {
                crate::output::show_output(
                    &ctx.out,
                    "(list)",
                    "-",
                    &Default::default(),
                    &done.output,
                );
            }
            built.push(Crate { krate: k, exe, list, pool });
        }
        let (mut set, damage) = TunedSet::read(&meta);
        for c in &built {
            let names = c.list.kernels.iter().map(|k| k.name.clone());
            set.add_listed(&c.krate.manifest_path, names);
        }
        let tuned = Tuned { set, damage };
        let unselected = meta
            .workspace_packages()
            .iter()
            .filter(|p| p.metadata.get("neuron-tune").is_some() && !cargo.selects(&p.name))
            .map(|p| {
                (p.name.to_string(), configured_kernels(&p.metadata, p.manifest_path.as_std_path()))
            })
            .collect();
        Ok(Workspace {
            crates: built,
            root: meta.workspace_root.clone().into(),
            target_dir,
            tuned,
            unselected,
            _exes: exes,
        })
    }

    /// Every kernel name, for messages.
    pub fn kernel_names(&self) -> String {
        self.crates
            .iter()
            .flat_map(|c| c.list.kernels.iter().map(|k| k.name.clone()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The harness executables one workspace's workers run: its own hard links (copies where
/// a link cannot be made) to the binaries its builds produced, one directory per
/// [`Workspace`] (`<target-dir>/neuron-tune/workers/<pid>-<n>/<package>/<bin>`), removed
/// with it.
///
/// cargo puts a harness at `<target-dir>/<profile>/<bin>`, one path for every workspace
/// built into that target dir (copies or worktrees of one workspace, the gate's base
/// revision, scratch crates), and links its binary there again at every build, a fresh one
/// too. A worker started from that path after another workspace's build would run the
/// other workspace's kernels and answer for them, and workers start for as long as the
/// command runs: a pool starts a slot's worker at its first request, and a new one after a
/// crash or a hang. (The tests' copies of the fixture workspace, built in parallel, did
/// this: a model benched after its kernel was edited ran another copy's unedited kernel.)
/// A link is to the file cargo wrote, which cargo replaces and never rewrites, so it keeps
/// this build's binary whatever happens at cargo's path.
struct RunExes {
    dir: PathBuf,
    /// Held while the workspace lives: a directory whose lock is free is a dead run's,
    /// removed by the next one.
    lock: Option<File>,
}

/// What a [`RunExes`] directory's lock file is called.
const RUN_LOCK: &str = "lock";

impl RunExes {
    /// A directory of this workspace's own under `runs`, locked; the directories of runs
    /// that ended without removing theirs (killed) are removed. Called with [`BuildLock`]
    /// held, so no directory is looked at while its run is still making it.
    fn create(runs: &Path) -> std::io::Result<RunExes> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        for entry in std::fs::read_dir(runs)?.flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dead = match File::open(path.join(RUN_LOCK)) {
                Ok(f) => f.try_lock().is_ok(),
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            };
            if dead {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = runs.join(format!("{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let lock = File::create(dir.join(RUN_LOCK))?;
        lock.lock()?;
        Ok(RunExes { dir, lock: Some(lock) })
    }

    /// This run's link to `exe`, the harness of `package` just built.
    fn link(&self, exe: &Path, package: &str) -> std::io::Result<PathBuf> {
        let dir = self.dir.join(package);
        std::fs::create_dir_all(&dir)?;
        let name = exe.file_name().ok_or(std::io::ErrorKind::InvalidInput)?;
        let dest = dir.join(name);
        if std::fs::hard_link(exe, &dest).is_err() {
            // (Another file system, or none that links: a copy, whole before it is there.)
            let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
            std::fs::copy(exe, &tmp)?;
            std::fs::rename(&tmp, &dest)?;
        }
        Ok(dest)
    }
}

impl Drop for RunExes {
    fn drop(&mut self) {
        // Unlocked first: a locked file cannot be removed everywhere.
        drop(self.lock.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Held by a command from starting a harness build to taking its link ([`RunExes`]), and
/// while it makes or sweeps its directory: one per target dir
/// (`<target-dir>/neuron-tune/workers/build.lock`).
struct BuildLock {
    _file: File,
}

impl BuildLock {
    fn take(runs: &Path, out: &Reporter) -> std::io::Result<BuildLock> {
        std::fs::create_dir_all(runs)?;
        let path = runs.join("build.lock");
        let file =
            std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                out.status(format!(
                    "    Blocking waiting for another cargo neuron-tune build (lock {})",
                    path.display()
                ));
                file.lock()?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        Ok(BuildLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::RunExes;

    /// A link keeps the binary that was built, whatever is put at cargo's path afterwards
    /// (cargo removes the file there and links another in its place).
    #[test]
    fn a_run_s_link_keeps_its_build_when_cargo_s_path_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (runs, cargo_path) = (dir.path().join("workers"), dir.path().join("harness"));
        std::fs::create_dir_all(&runs).unwrap();
        std::fs::write(&cargo_path, "this workspace's build").unwrap();
        let run = RunExes::create(&runs).unwrap();
        let exe = run.link(&cargo_path, "pkg").unwrap();
        assert!(exe.starts_with(&runs) && exe.ends_with("pkg/harness"), "{}", exe.display());
        std::fs::remove_file(&cargo_path).unwrap();
        std::fs::write(&cargo_path, "another workspace's build").unwrap();
        assert_eq!(std::fs::read_to_string(&exe).unwrap(), "this workspace's build");
        drop(run);
        assert!(!exe.exists(), "removed with the workspace");
    }

    /// A run's directory stays while its run lives (its lock held, in this process too: the
    /// gate opens two workspaces); those of runs that ended without removing theirs go.
    #[test]
    fn dead_runs_directories_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("workers");
        let killed = runs.join("1-0");
        std::fs::create_dir_all(&killed).unwrap();
        std::fs::write(killed.join(super::RUN_LOCK), "").unwrap();
        std::fs::write(killed.join("harness"), "").unwrap();
        let unlocked = runs.join("2-0");
        std::fs::create_dir_all(&unlocked).unwrap();
        let live = RunExes::create(&runs).unwrap();
        let other = RunExes::create(&runs).unwrap();
        assert!(!killed.exists() && !unlocked.exists());
        assert!(live.dir.is_dir() && other.dir.is_dir() && live.dir != other.dir);
    }
}
