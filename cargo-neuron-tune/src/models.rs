//! Models end to end: what `bench --model` and `gate` measure.
//!
//! A model is evaluated from its *plan* (the harness's `model_plan`: its distinct kernel
//! calls, each with the tuned or default parameters it uses, nothing simulated). Each call
//! is then a variant like any other, benched through [`bench_stream`]: traced, served from
//! the variant store when its program is unchanged, else simulated in parallel on the
//! crate's pool. So a model whose kernels did not change (an edit to comments or
//! formatting) costs traces only, and the end-to-end time is the harness's formula
//! recomputed here: Σ calls × (kernel time + launch overhead).
//!
//! The tuned parameters come from the `neuron-tune.tuned.toml` of the packages the model's
//! crate links: its own and its local dependencies, transitively (a models crate usually
//! calls kernels of another crate, whose database it is) — never another package's record
//! of a kernel of the same name ([`TunedSet::for_model`]).
//! A tuned call whose program hash differs from the one recorded when it was tuned is
//! *stale*: the kernel changed since, and its tuning may no longer be the best.

use crate::eval::{bench_stream, Outcome};
use crate::exit::{fail, Exit, Failure};
use crate::output::Reporter;
use crate::select::{glob, Variant};
use crate::store::Store;
use crate::tuned::{TunedDb, TunedRecord};
use crate::worker::Pool;
use neuron_tune_protocol::{
    ChipSpec, ListDoc, ModelPlan, Params, RequestBody, ResponseBody, Shape, ShapeRef, Tuned,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Every tuned database of the workspace's local packages, and which of them each package's
/// harness sees.
///
/// A record names its kernel, not its package (the file is the package's), and a model's
/// harness receives tuned parameters by kernel name. So a model crate uses the records of
/// the packages its harness links — its own and its local dependencies, transitively
/// ([`TunedSet::for_model`]) — never those of another package's kernel of the same name
/// (a team's `kernels` and `kernels-experimental`, a crate `new` made reusing a name).
#[derive(Default)]
pub struct TunedSet {
    dbs: Vec<TunedDb>,
    packages: Vec<LocalPackage>,
    /// What [`ModelTuned::say_withheld`] said already (once per model crate, kernel, chip).
    said: std::sync::Mutex<Vec<String>>,
}

/// A local (path) package as the tuned databases see it.
struct LocalPackage {
    name: String,
    manifest: PathBuf,
    /// Its database, when it has one (index into `dbs`).
    db: Option<usize>,
    /// The kernels it is known to define: those its configuration names, those its harness
    /// listed (when it was built), those its database records.
    kernels: std::collections::BTreeSet<String>,
    /// The local packages its harness links: itself and its local normal dependencies,
    /// transitively (indices into `packages`, sorted).
    links: Vec<usize>,
}

impl TunedSet {
    /// The databases beside every local (path) package's manifest, members or not, and the
    /// local packages each one's harness links (from the metadata's resolve graph: normal
    /// dependencies, with the run's `--features`: `CargoFlags::metadata` resolves with them).
    pub fn load(meta: &cargo_metadata::Metadata) -> Result<TunedSet, Failure> {
        match TunedSet::read(meta) {
            (set, None) => Ok(set),
            (_, Some(damage)) => Err(damage),
        }
    }

    /// [`TunedSet::load`], whose link graph stands whatever the databases hold: the set with
    /// every database that reads, and the refusal of the first (by manifest path) that does
    /// not. Which packages a harness links comes from the metadata alone, so a damaged
    /// database only hides the kernels its records name ([`Tuned::links_of`]).
    ///
    /// [`Tuned::links_of`]: crate::workspace::Tuned::links_of
    pub fn read(meta: &cargo_metadata::Metadata) -> (TunedSet, Option<Failure>) {
        let mut damage = None;
        let mut local: Vec<&cargo_metadata::Package> =
            meta.packages.iter().filter(|p| p.source.is_none()).collect();
        local.sort_by(|a, b| a.manifest_path.cmp(&b.manifest_path));
        local.dedup_by(|a, b| a.manifest_path == b.manifest_path);
        let links = local_links(meta, &local);
        let mut dbs = Vec::new();
        let mut packages = Vec::new();
        for (p, links) in local.iter().zip(links) {
            let manifest = p.manifest_path.as_std_path().to_path_buf();
            let dir = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
            let mut kernels: std::collections::BTreeSet<String> = Default::default();
            if p.metadata.get("neuron-tune").is_some() {
                kernels.extend(crate::workspace::configured_kernels(&p.metadata, &manifest));
            }
            let db = if !dir.join(crate::tuned::FILE_NAME).exists() {
                None
            } else {
                match TunedDb::load(&dir) {
                    Ok(db) => {
                        kernels.extend(db.records().iter().map(|r| r.kernel.clone()));
                        dbs.push(db);
                        Some(dbs.len() - 1)
                    }
                    Err(f) => {
                        damage.get_or_insert(f);
                        None
                    }
                }
            };
            packages.push(LocalPackage { name: p.name.to_string(), manifest, db, kernels, links });
        }
        (TunedSet { dbs, packages, said: Default::default() }, damage)
    }

    /// Add the kernels the harness of the package whose manifest is `manifest` lists (built
    /// for this command) to those it is known to define.
    pub fn add_listed(&mut self, manifest: &Path, kernels: impl IntoIterator<Item = String>) {
        if let Some(p) = self.packages.iter_mut().find(|p| p.manifest == manifest) {
            p.kernels.extend(kernels);
        }
    }

    /// Every record with the file it is in (of every local package).
    pub fn records(&self) -> impl Iterator<Item = (&Path, &TunedRecord)> {
        self.dbs.iter().flat_map(|db| db.records().iter().map(move |r| (db.path(), r)))
    }

    /// The database of the package whose manifest is in `dir`, if it has one.
    pub fn of_dir(&self, dir: &Path) -> Option<&TunedDb> {
        self.dbs.iter().find(|db| db.path().parent() == Some(dir))
    }

    /// What the harness of the package whose manifest is `manifest` (a model's crate) sees
    /// of the tuned databases on `chip`.
    pub fn for_model(&self, manifest: &Path, chip: &str) -> ModelTuned<'_> {
        ModelTuned { links: self.links_of(manifest), chip: chip.to_string() }
    }

    /// Which local packages the harness of the package whose manifest is `manifest` links,
    /// and which of them define a kernel: no record of any database.
    pub fn links_of(&self, manifest: &Path) -> ModelLinks<'_> {
        let package = self.packages.iter().position(|p| p.manifest == manifest);
        ModelLinks { set: self, package }
    }
}

/// For each of `local`, the indices of the local packages it links: itself and its normal
/// dependencies, transitively, through any package of the resolve graph (a `[patch]` can
/// make a registry crate's dependency a path one). Without a resolve graph, itself only.
fn local_links(
    meta: &cargo_metadata::Metadata,
    local: &[&cargo_metadata::Package],
) -> Vec<Vec<usize>> {
    use cargo_metadata::{DependencyKind, PackageId};
    use std::collections::{BTreeMap, BTreeSet};
    let nodes: BTreeMap<&PackageId, &cargo_metadata::Node> =
        meta.resolve.iter().flat_map(|r| &r.nodes).map(|n| (&n.id, n)).collect();
    let index: BTreeMap<&PackageId, usize> =
        local.iter().enumerate().map(|(i, p)| (&p.id, i)).collect();
    local
        .iter()
        .map(|p| {
            let mut seen: BTreeSet<&PackageId> = BTreeSet::from([&p.id]);
            let mut stack = vec![&p.id];
            while let Some(id) = stack.pop() {
                for d in nodes.get(id).map_or(&[][..], |n| &n.deps[..]) {
                    // What the harness binary links: normal dependencies (a dev- or
                    // build-dependency is not in it). No kinds: a cargo too old to say.
                    let normal = d.dep_kinds.is_empty()
                        || d.dep_kinds.iter().any(|k| k.kind == DependencyKind::Normal);
                    if normal && seen.insert(&d.pkg) {
                        stack.push(&d.pkg);
                    }
                }
            }
            let mut links: Vec<usize> =
                seen.iter().filter_map(|id| index.get(id).copied()).collect();
            links.sort_unstable();
            links
        })
        .collect()
}

/// The tuned records one model crate's harness uses on one chip: those of the databases of
/// the packages it links ([`TunedSet::for_model`]), less those of a kernel name two of
/// those packages define. The harness knows kernels by name (the tuned table it is given,
/// the calls its plan names), so the tool cannot tell which of the two a call runs: their
/// records are withheld (the calls run their defaults) and said ([`ModelTuned::say_withheld`]),
/// never one picked silently.
pub struct ModelTuned<'a> {
    links: ModelLinks<'a>,
    chip: String,
}

/// The local packages one model crate's harness links ([`TunedSet::links_of`]), and which of
/// them define a kernel (their configuration, their harness's list when built, the records
/// of their database when it reads): what `model_calls::kernel_owner` needs, which the
/// records themselves are not.
#[derive(Clone, Copy)]
pub struct ModelLinks<'a> {
    set: &'a TunedSet,
    /// The model's package (index into `set.packages`); `None`: not a local package, so it
    /// links none (and sees no database).
    package: Option<usize>,
}

impl<'a> ModelLinks<'a> {
    fn links(&self) -> &'a [usize] {
        self.package.map_or(&[][..], |p| &self.set.packages[p].links[..])
    }

    /// The linked packages that define `kernel`.
    fn defining(&self, kernel: &str) -> Vec<&'a LocalPackage> {
        let set = self.set;
        self.links()
            .iter()
            .map(|&i| &set.packages[i])
            .filter(|p| p.kernels.contains(kernel))
            .collect()
    }

    /// The names of the linked packages that define `kernel`.
    pub fn defining_packages(&self, kernel: &str) -> Vec<&'a str> {
        self.defining(kernel).into_iter().map(|p| p.name.as_str()).collect()
    }

    /// Whether the model's crate links the package whose manifest is `manifest`.
    pub fn links_manifest(&self, manifest: &Path) -> bool {
        let set = self.set;
        self.links().iter().any(|&i| set.packages[i].manifest == manifest)
    }
}

impl<'a> ModelTuned<'a> {
    fn links(&self) -> &'a [usize] {
        self.links.links()
    }

    fn defining(&self, kernel: &str) -> Vec<&'a LocalPackage> {
        self.links.defining(kernel)
    }

    /// Whether a record of `kernel` in the database of the package whose manifest is
    /// `manifest` is one this model uses: the package is linked, and no other linked
    /// package defines a kernel of that name.
    pub fn sees(&self, manifest: &Path, kernel: &str) -> bool {
        self.links.links_manifest(manifest) && self.defining(kernel).len() <= 1
    }

    /// The records on this chip in the linked packages' databases, ambiguous kernels or
    /// not, with their files and the package whose database holds each.
    fn linked_records(
        &self,
    ) -> impl Iterator<Item = (&'a LocalPackage, &'a Path, &'a TunedRecord)> + '_ {
        let set = self.links.set;
        self.links().iter().map(move |&i| &set.packages[i]).flat_map(move |p| {
            p.db.map(|d| &set.dbs[d]).into_iter().flat_map(move |db| {
                db.records().iter().filter(|r| r.chip == self.chip).map(move |r| (p, db.path(), r))
            })
        })
    }

    /// The records this model uses, with the file each is in.
    pub fn records(&self) -> impl Iterator<Item = (&'a Path, &'a TunedRecord)> + '_ {
        self.linked_records()
            .filter(|(p, _, r)| self.sees(&p.manifest, &r.kernel))
            .map(|(_, file, r)| (file, r))
    }

    /// The tuned parameters, as a model request carries them.
    pub fn tuned(&self) -> Tuned {
        Tuned(self.records().map(|(_, r)| r.entry(None)).collect())
    }

    /// The record a tuned call used.
    pub fn find(&self, kernel: &str, dims: &Shape) -> Option<(&'a Path, &'a TunedRecord)> {
        self.records().find(|(_, r)| r.kernel == kernel && &r.dims == dims)
    }

    /// Say (once per model crate, kernel and chip, on stderr) why the records of each of
    /// `kernels` that this model does not use although a linked database holds them are
    /// withheld: two linked packages define a kernel of that name.
    pub fn say_withheld<'k>(&self, kernels: impl IntoIterator<Item = &'k str>, out: &Reporter) {
        let Some(model) = self.links.package.map(|p| &self.links.set.packages[p]) else { return };
        for kernel in kernels {
            let defining = self.defining(kernel);
            if defining.len() < 2 {
                continue;
            }
            let mut files: Vec<String> = self
                .linked_records()
                .filter(|(_, _, r)| r.kernel == kernel)
                .map(|(_, f, _)| f.display().to_string())
                .collect();
            files.dedup();
            if files.is_empty() {
                continue;
            }
            let key = format!("{}\0{kernel}\0{}", model.name, self.chip);
            {
                let mut said = self.links.set.said.lock().expect("said");
                if said.contains(&key) {
                    continue;
                }
                said.push(key);
            }
            let names: Vec<String> = defining.iter().map(|p| format!("`{}`", p.name)).collect();
            out.note(format!(
                "warning: `{}` links {} packages that define a kernel `{kernel}` ({}): its \
                 harness knows kernels by name, so which one its models call cannot be told, \
                 and the tuned records of `{kernel}` on {} ({}) are not used for them: their \
                 `{kernel}` calls run the kernel's defaults. Rename one of the kernels, or drop \
                 the dependency the models do not call",
                model.name,
                defining.len(),
                names.join(", "),
                self.chip,
                files.join(", ")
            ));
        }
    }
}

/// One distinct kernel call of a model, measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallTime {
    pub kernel: String,
    pub shape: Shape,
    pub params: Params,
    pub tuned: bool,
    /// Why the tuned entry this call used is stale (its kernel changed since tuning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<String>,
    pub calls: u64,
    /// One call, without launch overhead.
    pub time_us: f64,
    /// calls × (time + launch overhead).
    pub total_us: f64,
    pub program_hash: String,
    /// Served from the variant store.
    pub cached: bool,
}

/// A model measured end to end at one shape on one chip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelRun {
    pub model: String,
    pub shape_name: String,
    pub shape: Shape,
    pub chip: String,
    pub tokens: f64,
    pub launch_overhead_us: f64,
    pub total_us: f64,
    pub tokens_per_s: f64,
    /// Prompts per evaluation (the model's `prompts`; one by default) and per second, the
    /// second end-to-end throughput beside tokens/s (README, "Searching"). Absent
    /// from files written before them, and from baselines.
    #[serde(default)]
    pub prompts: f64,
    #[serde(default)]
    pub prompts_per_s: f64,
    pub calls: Vec<CallTime>,
}

impl ModelRun {
    /// Calls served from the store / all calls.
    pub fn cached_calls(&self) -> (usize, usize) {
        (self.calls.iter().filter(|c| c.cached).count(), self.calls.len())
    }
}

/// A model of one crate at one named shape.
#[derive(Clone, Debug)]
pub struct ModelTarget {
    /// Index of its crate in the workspace.
    pub krate: usize,
    pub model: String,
    pub shape_name: String,
    pub shape: Shape,
}

/// The models matching `patterns` (globs; all when empty) at the shapes named in `shapes`
/// (all of each model's when empty). A pattern or shape that matches nothing is a usage
/// error naming what exists.
pub fn select_models(
    lists: &[&ListDoc],
    patterns: &[String],
    shapes: &[String],
) -> Result<Vec<ModelTarget>, Failure> {
    let all: Vec<(usize, &neuron_tune_protocol::ModelInfo)> =
        lists.iter().enumerate().flat_map(|(i, l)| l.models.iter().map(move |m| (i, m))).collect();
    let names = || all.iter().map(|(_, m)| m.name.as_str()).collect::<Vec<_>>().join(", ");
    if all.is_empty() {
        // `gate` and `baseline` are about models; a kernels-only crate needs one first.
        return Err(fail(
            Exit::Config,
            "the selected crates have no models: a model (`impl Model`, the kernels it calls \
             end to end) is listed in a harness binary, `harness_main!(kernels: [...], models: \
             [MyModel])`, and the gate and baselines measure models' throughput (README, \
             \"Writing kernels\"; fixtures/qwen3 is one)"
                .to_string(),
        ));
    }
    for p in patterns {
        if !all.iter().any(|(_, m)| glob(p, &m.name)) {
            return Err(fail(
                Exit::Config,
                format!("--model {p}: no such model (have: {})", names()),
            ));
        }
    }
    let mut out = Vec::new();
    for (krate, m) in all {
        if !patterns.is_empty() && !patterns.iter().any(|p| glob(p, &m.name)) {
            continue;
        }
        for s in shapes {
            if !m.shapes.iter().any(|(n, _)| n == s) {
                let have: Vec<&str> = m.shapes.iter().map(|(n, _)| n.as_str()).collect();
                // `--model qwen3 --shape qwen3@tiny`: the form of the kernel commands, where
                // `--shape` alone names the model; here `--model` does.
                let prefix = format!("{}@", m.name);
                let drop = match s.strip_prefix(&prefix) {
                    Some(rest) => format!(
                        "; --model names the model, so `--shape` is its shape alone: drop \
                         the `{prefix}` prefix (`--shape {}`)",
                        rest.split('{').next().unwrap_or(rest)
                    ),
                    None => String::new(),
                };
                return Err(fail(
                    Exit::Config,
                    format!(
                        "--shape {s}: model `{}` has no such shape (have: {}){drop}",
                        m.name,
                        have.join(", ")
                    ),
                ));
            }
        }
        for (shape_name, shape) in &m.shapes {
            if shapes.is_empty() || shapes.contains(shape_name) {
                out.push(ModelTarget {
                    krate,
                    model: m.name.clone(),
                    shape_name: shape_name.clone(),
                    shape: shape.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// The model's plan with these tuned parameters.
pub fn plan(
    pool: &mut Pool,
    target: &ModelTarget,
    chip: &ChipSpec,
    tuned: &Tuned,
) -> Result<Result<ModelPlan, String>, Failure> {
    let done = pool.request(RequestBody::ModelPlan {
        model: target.model.clone(),
        shape: ShapeRef::Dims(target.shape.clone()),
        chip: chip.clone(),
        tuned: tuned.clone(),
    })?;
    match done.answer {
        Ok(ResponseBody::ModelPlan(p)) => Ok(Ok(p)),
        Ok(other) => Err(crate::eval::unexpected(&other)),
        Err(e) => Ok(Err(format!("model `{}` at {}: {}", target.model, target.shape_name, e))),
    }
}

/// What model measurements share: where results are stored, the chip, the tuned records the
/// model's crate uses (to tell stale entries, and to say withheld ones), whether to re-simulate stored programs, where to report, and
/// the simulator version of the harness that evaluates (its results are keyed by it).
pub struct Bench<'a> {
    pub store: &'a Store,
    pub sim_version: &'a str,
    pub chip: &'a ChipSpec,
    pub records: &'a ModelTuned<'a>,
    pub force: bool,
    pub out: &'a Reporter,
}

/// Measure `target` with `tuned` parameters (an empty table: the defaults). `Ok(Err)`: the
/// model cannot be evaluated (a call is invalid or failed), with the call named.
pub fn evaluate(
    pool: &mut Pool,
    env: &Bench,
    target: &ModelTarget,
    tuned: &Tuned,
) -> Result<Result<ModelRun, String>, Failure> {
    let (store, chip, records, force, out) = (env.store, env.chip, env.records, env.force, env.out);
    let plan = match plan(pool, target, chip, tuned)? {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    records.say_withheld(plan.calls.iter().filter(|c| !c.tuned).map(|c| c.kernel.as_str()), out);
    let variants: Vec<Variant> = plan
        .calls
        .iter()
        .map(|c| Variant {
            krate: c.krate.clone(),
            kernel: c.kernel.clone(),
            shape_name: format!("{}@{}", target.model, target.shape_name),
            shape: c.shape.clone(),
            params: c.params.clone(),
        })
        .collect();
    let mut outcomes: Vec<Option<Outcome>> = Vec::new();
    outcomes.resize_with(variants.len(), || None);
    let sim = env.sim_version;
    bench_stream(pool, sim, variants.into_iter(), chip, store, force, out, &mut |o: Outcome| {
        let i = o.index;
        outcomes[i] = Some(o);
    })?;
    let mut calls = Vec::new();
    for (c, o) in plan.calls.iter().zip(outcomes) {
        let o = o.expect("bench_stream answers every variant");
        let m = match o.result {
            Ok(m) => m,
            Err(e) => {
                return Ok(Err(format!(
                    "model `{}` at {}: call {} at {} with {} ({}): {e}",
                    target.model,
                    target.shape_name,
                    c.kernel,
                    c.shape,
                    c.params,
                    if c.tuned { "tuned" } else { "default" }
                )))
            }
        };
        let stale = if c.tuned {
            records.find(&c.kernel, &c.shape).and_then(|(file, r)| {
                (r.program_hash != m.bench.program_hash).then(|| {
                    // A model call's label (`qwen3@tiny`) is shared by the model's calls
                    // of the kernel: the dimensions tell them apart.
                    let at = if r.shape.contains('@') {
                        format!("{} {}", r.shape, r.dims)
                    } else {
                        r.shape.clone()
                    };
                    format!(
                        "{}: `{}` at {at} was tuned as program {}, its parameters now give {} \
                         (the kernel changed since; tune it again)",
                        file.display(),
                        c.kernel,
                        short(&r.program_hash),
                        short(&m.bench.program_hash)
                    )
                })
            })
        } else {
            None
        };
        let time_us = m.bench.kernel_time_us;
        calls.push(CallTime {
            kernel: c.kernel.clone(),
            shape: c.shape.clone(),
            params: c.params.clone(),
            tuned: c.tuned,
            stale,
            calls: c.calls,
            time_us,
            total_us: c.calls as f64 * (time_us + plan.launch_overhead_us),
            program_hash: m.bench.program_hash.clone(),
            cached: m.cached,
        });
    }
    let total_us: f64 = calls.iter().map(|c| c.total_us).sum();
    Ok(Ok(ModelRun {
        model: plan.model,
        shape_name: target.shape_name.clone(),
        shape: plan.shape,
        chip: plan.chip,
        tokens: plan.tokens,
        launch_overhead_us: plan.launch_overhead_us,
        total_us,
        tokens_per_s: if total_us > 0.0 { plan.tokens / (total_us * 1e-6) } else { 0.0 },
        prompts: plan.prompts,
        prompts_per_s: if total_us > 0.0 { plan.prompts / (total_us * 1e-6) } else { 0.0 },
        calls,
    }))
}

/// The first 12 hex digits of a program hash, for messages.
pub fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use neuron_tune_protocol::ModelInfo;

    fn list(models: &[(&str, &[&str])]) -> ListDoc {
        ListDoc {
            protocol: neuron_tune_protocol::PROTOCOL_VERSION,
            harness_version: "0".into(),
            sim_version: "0".into(),
            crate_name: "c".into(),
            kernels: vec![],
            models: models
                .iter()
                .map(|(n, shapes)| ModelInfo {
                    name: n.to_string(),
                    doc: String::new(),
                    shapes: shapes
                        .iter()
                        .map(|s| (s.to_string(), Shape::new(&[("tokens", 1)])))
                        .collect(),
                })
                .collect(),
        }
    }

    /// A record of `kernel` at rows=1 on trn2 with `bufs`.
    fn record(kernel: &str, bufs: i64) -> TunedRecord {
        TunedRecord {
            kernel: kernel.into(),
            chip: "trn2".into(),
            shape: "small".into(),
            dims: Shape::new(&[("rows", 1)]),
            params: Params([("bufs".to_string(), bufs.into())].into_iter().collect()),
            time_us: 1.0,
            program_hash: "0".repeat(32),
            tool_version: "0".into(),
            sim_version: "0".into(),
            validated_shapes: vec![],
            validated_models: vec![],
        }
    }

    /// A package: name, kernels, records (kernel, bufs), links.
    type Package<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, i64)], &'a [usize]);

    /// `packages` in directories of their names under `dir`, as `TunedSet::load` would find
    /// them.
    fn set(dir: &Path, packages: &[Package]) -> TunedSet {
        let mut set = TunedSet::default();
        for (name, kernels, records, links) in packages {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).unwrap();
            let db = (!records.is_empty()).then(|| {
                let mut db = TunedDb::load(&d).unwrap();
                for (k, b) in *records {
                    db.record(record(k, *b));
                }
                db.save().unwrap();
                set.dbs.push(TunedDb::load(&d).unwrap());
                set.dbs.len() - 1
            });
            set.packages.push(LocalPackage {
                name: name.to_string(),
                manifest: d.join("Cargo.toml"),
                db,
                kernels: kernels.iter().map(|k| k.to_string()).collect(),
                links: links.to_vec(),
            });
        }
        set
    }

    #[test]
    fn a_model_sees_the_records_of_the_packages_it_links_and_none_of_an_ambiguous_kernel() {
        let tmp = tempfile::tempdir().unwrap();
        let dims = Shape::new(&[("rows", 1)]);
        let set = set(
            tmp.path(),
            &[
                ("kernels", &["add", "gemm"], &[("add", 1), ("gemm", 2)], &[0]),
                ("experimental", &["add"], &[("add", 3)], &[1]),
                ("model", &[], &[], &[0, 2]),
                ("both", &[], &[], &[0, 1, 3]),
            ],
        );
        let manifest = |n: &str| tmp.path().join(n).join("Cargo.toml");
        let bufs = |t: &Tuned, k: &str| t.get(None, k, &dims).and_then(|p| p.get("bufs")).cloned();

        // The model links `kernels`: its records only, never experimental's `add`.
        let model = set.for_model(&manifest("model"), "trn2");
        let tuned = model.tuned();
        assert_eq!((bufs(&tuned, "add"), bufs(&tuned, "gemm")), (Some(1.into()), Some(2.into())));
        assert_eq!(tuned.0.len(), 2);
        let (file, r) = model.find("add", &dims).unwrap();
        assert_eq!(
            (file.parent(), &r.params),
            (Some(&*tmp.path().join("kernels")), &record("add", 1).params)
        );
        assert!(model.sees(&manifest("kernels"), "add"));
        assert!(!model.sees(&manifest("experimental"), "add"));
        assert_eq!(set.links_of(&manifest("model")).defining_packages("add"), ["kernels"]);
        // Another chip: nothing.
        assert!(set.for_model(&manifest("model"), "trn1").tuned().0.is_empty());

        // A crate linking both: `add` is ambiguous, so neither record is used; `gemm` is not.
        let both = set.for_model(&manifest("both"), "trn2");
        let tuned = both.tuned();
        assert_eq!((bufs(&tuned, "add"), bufs(&tuned, "gemm")), (None, Some(2.into())));
        assert!(both.find("add", &dims).is_none());
        assert!(!both.sees(&manifest("kernels"), "add") && both.sees(&manifest("kernels"), "gemm"));
        let links = set.links_of(&manifest("both"));
        assert_eq!(links.defining_packages("add"), ["kernels", "experimental"]);
        // Said once per model crate, kernel and chip, however many times it is evaluated; a
        // kernel defined once is nothing to say.
        let out = Reporter::new(true);
        both.say_withheld(["add", "gemm", "add"], &out);
        set.for_model(&manifest("both"), "trn2").say_withheld(["add"], &out);
        model.say_withheld(["add"], &out);
        assert_eq!(set.said.lock().unwrap().len(), 1);

        // A package the set does not know sees nothing.
        assert!(set.for_model(&manifest("elsewhere"), "trn2").tuned().0.is_empty());
    }

    #[test]
    fn model_selection_matches_globs_and_shapes_and_names_what_exists() {
        let l = list(&[("qwen3", &["tiny", "big"]), ("qwen3_naive", &["tiny"])]);
        let names = |t: Vec<ModelTarget>| {
            t.into_iter().map(|t| format!("{}@{}", t.model, t.shape_name)).collect::<Vec<_>>()
        };
        assert_eq!(
            names(select_models(&[&l], &[], &[]).unwrap()),
            ["qwen3@tiny", "qwen3@big", "qwen3_naive@tiny"]
        );
        assert_eq!(
            names(select_models(&[&l], &["qwen3*".into()], &["tiny".into()]).unwrap()),
            ["qwen3@tiny", "qwen3_naive@tiny"]
        );
        let e = select_models(&[&l], &["llama".into()], &[]).unwrap_err();
        assert_eq!(e.exit, Exit::Config);
        assert!(e.message.contains("qwen3, qwen3_naive"), "{}", e.message);
        let e = select_models(&[&l], &["qwen3_naive".into()], &["big".into()]).unwrap_err();
        assert!(e.message.contains("have: tiny"), "{}", e.message);
    }
}
