//! The kernel crates of a command: discovered, built, their workers started, listed.
//!
//! [`Workspace::open`] is every command's first step: `cargo metadata` finds the kernel
//! crates, cargo builds each harness, and each crate gets its [`Pool`] for the whole command;
//! the first worker's first request is `list` (under the same timeout and panic isolation
//! as any variant).

use crate::cargo::{BuildError, CargoFlags, KernelCrate};
use crate::exit::{fail, Exit, Failure};
use crate::models::TunedSet;
use crate::output::{Event, Reporter};
use crate::worker::{Pool, PoolEvents};
use neuron_tune_protocol::{ListDoc, RequestBody, ResponseBody};
use std::path::PathBuf;
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
    pub target_dir: PathBuf,
    /// The tuned databases of every local package (models use them).
    pub tuned: TunedSet,
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

impl Workspace {
    pub fn open(cargo: &CargoFlags, ctx: &Ctx) -> Result<Workspace, Failure> {
        let meta = cargo.metadata()?;
        let crates = cargo.kernel_crates(&meta)?;
        if crates.is_empty() {
            return Err(fail(
                Exit::Config,
                format!(
                    "no kernel crates in {}: a kernel crate has [package.metadata.neuron-tune] \
                     with harness = \"<bin>\"",
                    meta.workspace_root
                ),
            ));
        }
        let mut built = Vec::new();
        for k in crates {
            ctx.out.status(format!("   Building {} harness `{}`", k.package, k.harness));
            let exe = cargo.build_harness(&k).map_err(|e| match e {
                BuildError::Failed { .. } => fail(Exit::Build, e.to_string()),
                other => fail(Exit::Internal, other.to_string()),
            })?;
            let dir = k.manifest_path.parent().map(PathBuf::from).unwrap_or_default();
            let events = Arc::new(StartEvents { package: k.package.clone(), out: ctx.out.clone() });
            let mut pool = Pool::new(&exe, &dir, ctx.jobs, ctx.timeout, events);
            let done = pool
                .request(RequestBody::List)
                .map_err(|f| fail(f.exit, format!("{}: {}", k.package, f.message)))?;
            let list = match done.answer {
                Ok(ResponseBody::List(l)) => l,
                Ok(other) => return Err(crate::eval::unexpected(&other)),
                Err(e) => return Err(fail(Exit::Config, format!("{}: {}", k.package, e.message))),
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
        let tuned = TunedSet::load(&meta)?;
        Ok(Workspace { crates: built, target_dir: cargo.target_dir(&meta), tuned })
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
