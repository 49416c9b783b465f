//! `--goal`'s and `--validate`'s check of a new best against the models that use its kernel:
//! every model of the selected crates whose plan calls the kernel at the tuned shape is
//! measured end to end with the winner and with the parameters the winner would replace; a
//! winner that lowers a model's throughput, or that a model cannot run, is rolled back.
//!
//! With one build of the kernel a faster kernel cannot slow a model down in this simulator
//! (a model's time is Σ calls × (kernel time + launch)). It can when the model's crate builds
//! the kernel differently — a pinned older version of the kernel crate, other features — and
//! that is what this check is for: the tuner measured one program, the model runs another.
//! The calls come from the variant store when their programs were measured already, so the
//! check costs traces, and a simulation only where the model's program differs.

use super::*;
use crate::models::{self, Bench, ModelRun, ModelTarget, ModelTuned, TunedSet};
use crate::output::Reporter;
use crate::workspace::Crate;
use neuron_tune_protocol::{Tuned, TunedEntry};
use std::path::PathBuf;

/// The models (name and named shape, of the selected crates) whose plan with today's tuned
/// parameters calls each target's kernel at its shape, per target: models whose call's
/// kernel is the target crate's (`ModelTuned::owner_of`: the package the call's Rust crate
/// is, else the one linked package defining a kernel of that name), so that the winner is
/// what they run. A model that cannot be planned is named in a note (it calls
/// nothing that can be checked).
pub(super) fn users(
    ws: &mut Workspace,
    chip: &ChipSpec,
    targets: &[Target],
    out: &Reporter,
) -> Result<Vec<Vec<ModelTarget>>, Failure> {
    let set = ws.tuned.get()?;
    type Call = (Option<String>, String, Shape);
    let mut plans: Vec<(ModelTarget, Vec<Call>)> = Vec::new();
    for krate in 0..ws.crates.len() {
        let tuned = set.for_model(&ws.crates[krate].krate.manifest_path, &chip.name).tuned();
        for m in ws.crates[krate].list.models.clone() {
            for (shape_name, shape) in m.shapes {
                let target = ModelTarget { krate, model: m.name.clone(), shape_name, shape };
                match models::plan(&mut ws.crates[krate].pool, &target, chip, &tuned)? {
                    Ok(plan) => {
                        let calls =
                            plan.calls.into_iter().map(|c| (c.krate, c.kernel, c.shape)).collect();
                        plans.push((target, calls));
                    }
                    Err(e) => out.note(format!(
                        "warning: winners are not validated on {e} (it cannot be planned)"
                    )),
                }
            }
        }
    }
    let manifest = |krate: usize| ws.crates[krate].krate.manifest_path.as_path();
    Ok(targets
        .iter()
        .map(|t| {
            plans
                .iter()
                .filter(|(m, calls)| {
                    let view = set.for_model(manifest(m.krate), &chip.name);
                    calls.iter().any(|(c, k, s)| {
                        *k == t.kernel.name
                            && *s == t.shape
                            && view.owner_of(c.as_deref(), k).map(|(o, _)| o)
                                == Some(manifest(t.krate))
                    })
                })
                .map(|(m, _)| m.clone())
                .collect()
        })
        .collect())
}

/// Model runs of this target: ((index into `users`, the kernel's parameters at the shape,
/// `None` for what the models use today), result).
pub(super) type Runs = Vec<((usize, Option<Params>), Result<ModelRun, String>)>;

/// One target's models and what measuring them needs.
pub(super) struct ModelCheck<'a> {
    pub users: &'a [ModelTarget],
    pub kernel: &'a str,
    pub shape: &'a Shape,
    pub chip: &'a ChipSpec,
    pub store: &'a Store,
    pub tuned: &'a TunedSet,
    pub out: &'a Reporter,
    /// Winners this run has recorded already (for other targets), each with the manifest of
    /// the crate whose database has it: the models whose crates link that crate use them.
    pub fresh: &'a [(PathBuf, TunedEntry)],
    /// Models left out of a check, and why (a model that fails without the candidate too):
    /// noted after the target's search, once each.
    pub skipped: Vec<String>,
    /// Each model's runs, by (model index, parameters): a run is deterministic, so the run
    /// without the candidate is measured once for every candidate of a round (and of later
    /// rounds while the best stands), and a winner's run serves as the next round's base.
    pub runs: Runs,
    /// The target's crate: its pool is the one the search holds.
    pub own: usize,
    pub own_sim_version: &'a str,
    pub own_manifest: &'a std::path::Path,
}

impl ModelCheck<'_> {
    /// `Ok(Ok(the models checked, as model@shape))`, or `Ok(Err(why))` naming the model and
    /// its throughput with and without `candidate`. `replaced`: the parameters the candidate
    /// would replace (`None`: what the models use today, tuned or default; `tune` passes the
    /// run's previous best, or the defaults).
    pub(super) fn run(
        &mut self,
        own_pool: &mut Pool,
        before: &mut [Crate],
        after: &mut [Crate],
        candidate: &Params,
        replaced: Option<&Params>,
    ) -> Result<Result<Vec<String>, String>, Failure> {
        let mut checked = Vec::new();
        for (i, m) in self.users.iter().enumerate() {
            let (pool, sim_version, manifest) = match m.krate.cmp(&self.own) {
                std::cmp::Ordering::Equal => {
                    (&mut *own_pool, self.own_sim_version, self.own_manifest)
                }
                std::cmp::Ordering::Less => {
                    let c = &mut before[m.krate];
                    (&mut c.pool, c.list.sim_version.as_str(), c.krate.manifest_path.as_path())
                }
                std::cmp::Ordering::Greater => {
                    let c = &mut after[m.krate - self.own - 1];
                    (&mut c.pool, c.list.sim_version.as_str(), c.krate.manifest_path.as_path())
                }
            };
            // What the model's crate sees: the databases of the crates it links.
            let records = self.tuned.for_model(manifest, &self.chip.name);
            let bench = Bench {
                store: self.store,
                sim_version,
                chip: self.chip,
                records: &records,
                force: false,
                out: self.out,
            };
            let name = format!("{}@{}", m.model, m.shape_name);
            let (fresh, kernel, shape) = (self.fresh, self.kernel, self.shape);
            let own = self.own_manifest;
            let with = |p: Option<&Params>| tuned_with(&records, fresh, own, kernel, shape, p);
            let runs = &mut self.runs;
            let mut measure = |params: Option<&Params>| -> Result<_, Failure> {
                let key = (i, params.cloned());
                if let Some((_, r)) = runs.iter().find(|(k, _)| *k == key) {
                    return Ok(r.clone());
                }
                let r = models::evaluate(pool, &bench, m, &with(params))?;
                runs.push((key, r.clone()));
                Ok(r)
            };
            let base = measure(replaced)?;
            let with = measure(Some(candidate))?;
            match (base, with) {
                // Failing without the candidate too: not the candidate's doing, so not held
                // against it; the model is left out of the check (and of `validated_models`).
                (Err(e), _) => {
                    let why = format!("{name} fails without the candidate too: {e}");
                    if !self.skipped.contains(&why) {
                        self.skipped.push(why);
                    }
                }
                (Ok(_), Err(e)) => return Ok(Err(format!("breaks model {name}: {e}"))),
                (Ok(a), Ok(b)) if lowers(&a, &b) => {
                    let (us_a, _) = kernel_calls(&a, self.kernel, self.shape);
                    let (us_b, calls) = kernel_calls(&b, self.kernel, self.shape);
                    return Ok(Err(format!(
                        "lowers model {name} from {} to {} tokens/s ({us_a:.2} → {us_b:.2} µs \
                         per call, {calls} call(s))",
                        crate::gate::tokens(a.tokens_per_s),
                        crate::gate::tokens(b.tokens_per_s),
                    )));
                }
                (Ok(_), Ok(_)) => checked.push(name),
            }
        }
        Ok(Ok(checked))
    }
}

/// The tuned parameters a model's crate uses on the chip (its linked databases', then this
/// run's winners `fresh` of the crates it links), with `kernel` of the crate whose manifest
/// is `own` at `shape` set to `params` (`None`: left as they are). Each entry is for its
/// package's kernel (`ModelTuned::entries_of`), so a winner of one crate's kernel never
/// replaces another crate's kernel of the same name.
fn tuned_with(
    records: &ModelTuned,
    fresh: &[(PathBuf, TunedEntry)],
    own: &std::path::Path,
    kernel: &str,
    shape: &Shape,
    params: Option<&Params>,
) -> Tuned {
    let mut t = records.tuned();
    let set = |t: &mut Tuned, entries: Vec<TunedEntry>| {
        for e in entries {
            t.0.retain(|x| !(x.krate == e.krate && x.kernel == e.kernel && x.shape == e.shape));
            t.0.push(e);
        }
    };
    for (manifest, e) in fresh {
        set(&mut t, records.entries_of(manifest, e));
    }
    if let Some(p) = params {
        let e = TunedEntry {
            kernel: kernel.into(),
            krate: None,
            shape: shape.clone(),
            params: p.clone(),
        };
        set(&mut t, records.entries_of(own, &e));
    }
    t
}

/// `b` delivers fewer tokens per second than `a` (beyond float noise: the runs are
/// deterministic, so any real drop is far above it).
fn lowers(a: &ModelRun, b: &ModelRun) -> bool {
    b.tokens_per_s < a.tokens_per_s * (1.0 - 1e-9)
}

/// One call of `kernel` at `shape` in a model run (µs, without launch overhead), and how
/// many calls the model makes.
/// The kernel's time per call in the model run, launch overhead included (as `bench
/// --model` and the variant's own time give it), and its number of calls.
fn kernel_calls(r: &ModelRun, kernel: &str, shape: &Shape) -> (f64, u64) {
    r.calls
        .iter()
        .find(|c| c.kernel == kernel && &c.shape == shape)
        .map_or((0.0, 0), |c| (c.time_us + r.launch_overhead_us, c.calls))
}
