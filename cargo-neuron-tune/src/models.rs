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
//! of a kernel of the same name ([`TunedSet::for_model`]). A call's kernel is told by its
//! Rust crate and name (the plan says both, `Kernel::rust_crate`), and a crate by the
//! package whose library (or, for the model's own crate, harness binary) it is, so a model
//! calling two crates' kernels of one name gets each crate's records.
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
    TunedEntry,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Every tuned database of the workspace's local packages, and which of them each package's
/// harness sees.
///
/// A record names its kernel, not its package (the file is the package's); a model's
/// harness receives tuned parameters by Rust crate and kernel name. So a model crate uses
/// the records of the packages its harness links — its own and its local dependencies,
/// transitively ([`TunedSet::for_model`]) — each for the calls of that package's kernel,
/// never for another package's kernel of the same name (a team's `kernels` and
/// `kernels-experimental`, a crate `new` made reusing a name).
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
    /// The Rust crate of its library (the lib target's name, `-` as `_`: what
    /// `Kernel::rust_crate` says of a kernel type defined there), if it has one.
    lib: Option<String>,
    /// The Rust crates of its binaries (its harness: a kernel defined in it).
    bins: Vec<String>,
}

/// The Rust crates of a package's code as `std::any::type_name` spells them: its library's
/// (lib, rlib or dylib target) and its binaries', each target name with `-` as `_`.
pub fn rust_crates(p: &cargo_metadata::Package) -> (Option<String>, Vec<String>) {
    use cargo_metadata::TargetKind::{Bin, DyLib, Lib, RLib};
    let name = |t: &cargo_metadata::Target| t.name.replace('-', "_");
    let has = |t: &cargo_metadata::Target, kinds: &[cargo_metadata::TargetKind]| {
        t.kind.iter().any(|k| kinds.contains(k))
    };
    let lib = p.targets.iter().find(|t| has(t, &[Lib, RLib, DyLib])).map(name);
    let bins = p.targets.iter().filter(|t| has(t, &[Bin])).map(name).collect();
    (lib, bins)
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
            let (lib, bins) = rust_crates(p);
            let name = p.name.to_string();
            packages.push(LocalPackage { name, manifest, db, kernels, links, lib, bins });
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
/// the packages it links ([`TunedSet::for_model`]), each for the kernel of its package's
/// Rust crate ([`ModelLinks::owner`]). The tuned table names each entry's crate, and the
/// harness gives a call the entry of its kernel's crate. A call whose crate is no linked
/// package's (a kernel of a type another crate defines) is told by its name alone: it gets
/// the records of the one linked package defining that name; of a name two of them define,
/// none — which one it runs cannot be told: its records are withheld (the call runs its
/// defaults) and said ([`ModelTuned::say_withheld`]), never one picked silently.
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

    /// The linked package whose code the Rust crate `krate` is (a call's `kernel`'s crate,
    /// `Kernel::rust_crate`): the linked package whose library it is, or the model's own
    /// package when it is one of its binaries and that package is known to define `kernel`
    /// (a kernel its harness defines and lists). `None`: no crate said, or none of theirs
    /// (a kernel of a type another crate defines, one its harness defines without listing
    /// it), or two (a library renamed apart): the crate does not tell.
    fn identified(&self, krate: Option<&str>, kernel: &str) -> Option<&'a LocalPackage> {
        let (set, krate) = (self.set, krate?);
        if let Some(own) = self.package.map(|p| &set.packages[p]) {
            if own.bins.iter().any(|b| b == krate) && own.kernels.contains(kernel) {
                return Some(own);
            }
        }
        let mut libs = self.links().iter().map(|&i| &set.packages[i]);
        let first = libs.find(|p| p.lib.as_deref() == Some(krate))?;
        (!libs.any(|p| p.lib.as_deref() == Some(krate))).then_some(first)
    }

    /// The linked package whose `kernel` a call of the kernel of Rust crate `krate` runs:
    /// the package that crate is ([`ModelLinks::identified`]), else the one linked package
    /// known to define a kernel of that name. `None`: no linked package, or two define it
    /// and the crate does not tell which.
    fn owner(&self, krate: Option<&str>, kernel: &str) -> Option<&'a LocalPackage> {
        self.identified(krate, kernel).or_else(|| match self.defining(kernel)[..] {
            [one] => Some(one),
            _ => None,
        })
    }

    /// The manifest of the package whose code the Rust crate `krate` of a call of `kernel`
    /// is, when the crate tells ([`ModelLinks::identified`]).
    pub fn identified_manifest(&self, krate: Option<&str>, kernel: &str) -> Option<&'a Path> {
        self.identified(krate, kernel).map(|p| p.manifest.as_path())
    }

    /// The manifest and name of the package whose kernel a call of `kernel` of Rust crate
    /// `krate` runs ([`ModelLinks::owner`]).
    pub fn owner_of(&self, krate: Option<&str>, kernel: &str) -> Option<(&'a Path, &'a str)> {
        self.owner(krate, kernel).map(|p| (p.manifest.as_path(), p.name.as_str()))
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

    /// Whether this model uses records of the database of the package whose manifest is
    /// `manifest`: its crate links the package (each package's records are for the calls
    /// of its own kernels).
    pub fn sees(&self, manifest: &Path, _kernel: &str) -> bool {
        self.links.links_manifest(manifest)
    }

    /// The manifest and name of the package whose kernel a call of `kernel` of Rust crate
    /// `krate` runs, when that can be told ([`ModelLinks::owner`]).
    pub fn owner_of(&self, krate: Option<&str>, kernel: &str) -> Option<(&'a Path, &'a str)> {
        self.links.owner_of(krate, kernel)
    }

    /// The records on this chip in the linked packages' databases, with their files and
    /// the package whose database holds each.
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

    /// The records this model's calls may use (of the packages its crate links), with the
    /// file each is in.
    pub fn records(&self) -> impl Iterator<Item = (&'a Path, &'a TunedRecord)> + '_ {
        self.linked_records().map(|(_, file, r)| (file, r))
    }

    /// `entry` (of a kernel of package `p`) as the tuned table carries it: for the Rust
    /// crate of `p`'s library, and of its binaries when `p` is the model's own crate; and,
    /// for a call whose crate is no linked package's, by its name alone when `p` is the one
    /// linked package known to define that kernel.
    fn tagged(&self, p: &LocalPackage, entry: &TunedEntry) -> Vec<TunedEntry> {
        let own = self.links.package.map(|i| &self.links.set.packages[i]);
        let bins = own.filter(|o| o.manifest == p.manifest).map_or(&[][..], |o| &o.bins[..]);
        let mut crates: Vec<Option<&str>> =
            p.lib.iter().chain(bins).map(|c| Some(c.as_str())).collect();
        if matches!(self.defining(&entry.kernel)[..], [one] if one.manifest == p.manifest) {
            crates.push(None);
        }
        crates
            .into_iter()
            .map(|c| TunedEntry { krate: c.map(Into::into), ..entry.clone() })
            .collect()
    }

    /// The tuned parameters, as a model request carries them: each record for its
    /// package's kernel ([`ModelTuned::tagged`]).
    pub fn tuned(&self) -> Tuned {
        Tuned(self.linked_records().flat_map(|(p, _, r)| self.tagged(p, &r.entry(None))).collect())
    }

    /// `entry`, of a kernel of the package whose manifest is `manifest`, as the tuned table
    /// carries it (none when the model's crate does not link that package).
    pub fn entries_of(&self, manifest: &Path, entry: &TunedEntry) -> Vec<TunedEntry> {
        let set = self.links.set;
        let linked =
            self.links().iter().map(|&i| &set.packages[i]).find(|p| p.manifest == manifest);
        linked.map_or_else(Vec::new, |p| self.tagged(p, entry))
    }

    /// The record a tuned call of `kernel` of Rust crate `krate` at `dims` used: its
    /// package's ([`ModelLinks::owner`]).
    pub fn find(
        &self,
        krate: Option<&str>,
        kernel: &str,
        dims: &Shape,
    ) -> Option<(&'a Path, &'a TunedRecord)> {
        let owner = self.links.owner(krate, kernel)?;
        self.linked_records()
            .find(|(p, _, r)| p.manifest == owner.manifest && r.kernel == kernel && &r.dims == dims)
            .map(|(_, file, r)| (file, r))
    }

    /// Say (once per model crate, kernel and chip, on stderr) why the records of each of
    /// `calls` (Rust crate and kernel name of a call that ran its defaults) that a linked
    /// database holds are withheld: two linked packages define a kernel of that name, and
    /// the call's crate does not tell which one it runs (none said — an older harness —, or
    /// none of theirs).
    pub fn say_withheld<'k>(
        &self,
        calls: impl IntoIterator<Item = (Option<&'k str>, &'k str)>,
        out: &Reporter,
    ) {
        let Some(model) = self.links.package.map(|p| &self.links.set.packages[p]) else { return };
        for (krate, kernel) in calls {
            let defining = self.defining(kernel);
            if defining.len() < 2 || self.links.identified(krate, kernel).is_some() {
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
            let why = match krate {
                Some(c) => format!(
                    "its models call a `{kernel}` of Rust crate `{c}`, which is none of theirs \
                     (a kernel of a type another crate defines: override `Kernel::rust_crate` \
                     to name the crate it belongs to)"
                ),
                None => "its harness does not say which crate a call's kernel is of".to_string(),
            };
            out.note(format!(
                "warning: `{}` links {} packages that define a kernel `{kernel}` ({}), and {why}, \
                 so which one its models call cannot be told, and the tuned records of \
                 `{kernel}` on {} ({}) are not used for them: their `{kernel}` calls run the \
                 kernel's defaults",
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
    /// The Rust crate that defines the kernel, as the harness's plan says it.
    #[serde(rename = "crate", default, skip_serializing_if = "Option::is_none")]
    pub krate: Option<String>,
    /// The package whose kernel it is, when the model's links tell ([`ModelTuned::owner_of`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
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

/// A kernel as a model's calls are named where it calls another crate's kernel of the same
/// name: `double (kcrates-fast)`, by its package when the model's links tell it, else by its
/// Rust crate (`bench --model`'s breakdown, the gate's moved calls).
pub fn kernel_of_crate(kernel: &str, package: Option<&str>, krate: Option<&str>) -> String {
    match package.or(krate) {
        Some(of) => format!("{kernel} ({of})"),
        None => kernel.to_string(),
    }
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
    let untuned = plan.calls.iter().filter(|c| !c.tuned);
    records.say_withheld(untuned.map(|c| (c.krate.as_deref(), c.kernel.as_str())), out);
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
            records.find(c.krate.as_deref(), &c.kernel, &c.shape).and_then(|(file, r)| {
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
        let package = records.owner_of(c.krate.as_deref(), &c.kernel).map(|(_, n)| n.to_string());
        calls.push(CallTime {
            kernel: c.kernel.clone(),
            krate: c.krate.clone(),
            package,
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
                lib: Some(name.to_string()),
                bins: vec![format!("{name}_harness")],
            });
        }
        set
    }

    #[test]
    fn a_model_gets_each_linked_packages_records_for_its_own_kernel_and_none_it_cannot_tell() {
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
        let bufs = |t: &Tuned, c: &str, k: &str| {
            t.get(Some(c), k, &dims).and_then(|p| p.get("bufs")).cloned()
        };

        // The model links `kernels`: its records only, never experimental's `add`.
        let model = set.for_model(&manifest("model"), "trn2");
        let tuned = model.tuned();
        assert_eq!(bufs(&tuned, "kernels", "add"), Some(1.into()));
        assert_eq!(bufs(&tuned, "kernels", "gemm"), Some(2.into()));
        assert!(tuned.0.iter().all(|e| e.params != record("add", 3).params), "{tuned:?}");
        // A call of a crate that is no linked package's (a kernel of a shared crate's type):
        // by its name, the one linked package defining it.
        assert_eq!(bufs(&tuned, "shared", "add"), Some(1.into()));
        let (file, r) = model.find(Some("kernels"), "add", &dims).unwrap();
        assert_eq!(
            (file.parent(), &r.params),
            (Some(&*tmp.path().join("kernels")), &record("add", 1).params)
        );
        assert!(model.sees(&manifest("kernels"), "add"));
        assert!(!model.sees(&manifest("experimental"), "add"));
        assert_eq!(set.links_of(&manifest("model")).defining_packages("add"), ["kernels"]);
        // Another chip: nothing.
        assert!(set.for_model(&manifest("model"), "trn1").tuned().0.is_empty());

        // A crate linking both: each `add` call gets its own crate's record, told by the
        // crate the plan names; one whose crate is neither's cannot be told, and gets none.
        let both = set.for_model(&manifest("both"), "trn2");
        let tuned = both.tuned();
        assert_eq!(bufs(&tuned, "kernels", "add"), Some(1.into()));
        assert_eq!(bufs(&tuned, "experimental", "add"), Some(3.into()));
        assert_eq!(bufs(&tuned, "shared", "add"), None);
        assert_eq!(bufs(&tuned, "shared", "gemm"), Some(2.into()));
        assert_eq!(both.find(Some("experimental"), "add", &dims).unwrap().1.params, r3());
        assert!(both.find(Some("shared"), "add", &dims).is_none());
        assert!(both.find(None, "add", &dims).is_none());
        assert_eq!(
            both.owner_of(Some("experimental"), "add"),
            Some((&*manifest("experimental"), "experimental"))
        );
        assert_eq!(both.owner_of(Some("shared"), "gemm").map(|(_, n)| n), Some("kernels"));
        assert!(
            both.sees(&manifest("kernels"), "add") && both.sees(&manifest("experimental"), "add")
        );
        let links = set.links_of(&manifest("both"));
        assert_eq!(links.defining_packages("add"), ["kernels", "experimental"]);
        // A kernel a model crate's own harness defines: its package when it lists it, else
        // told by its name (here two define it: none).
        let own = set.for_model(&manifest("kernels"), "trn2");
        assert_eq!(own.owner_of(Some("kernels_harness"), "add").map(|(_, n)| n), Some("kernels"));
        assert!(both.owner_of(Some("both_harness"), "add").is_none());
        // This run's winner of experimental's `add`: for its crate's kernel only.
        let fresh = record("add", 4).entry(None);
        let entries = both.entries_of(&manifest("experimental"), &fresh);
        assert_eq!(
            entries.iter().map(|e| e.krate.as_deref()).collect::<Vec<_>>(),
            [Some("experimental")]
        );
        assert!(model.entries_of(&manifest("experimental"), &fresh).is_empty(), "not linked");
        // Withheld only where the crate does not tell: said once per model crate, kernel
        // and chip, however many times it is evaluated; a call its crate tells, or a kernel
        // defined once, is nothing to say.
        let out = Reporter::new(true);
        both.say_withheld([(Some("kernels"), "add"), (Some("experimental"), "add")], &out);
        assert!(set.said.lock().unwrap().is_empty());
        both.say_withheld([(Some("shared"), "add"), (Some("shared"), "gemm"), (None, "add")], &out);
        set.for_model(&manifest("both"), "trn2").say_withheld([(None, "add")], &out);
        model.say_withheld([(None, "add")], &out);
        assert_eq!(set.said.lock().unwrap().len(), 1);

        // A package the set does not know sees nothing.
        assert!(set.for_model(&manifest("elsewhere"), "trn2").tuned().0.is_empty());
    }

    fn r3() -> Params {
        record("add", 3).params
    }

    /// A kernel type's crate (`Kernel::rust_crate`) is its package's lib target name with
    /// `-` as `_`, or a binary's, as `cargo metadata` says them.
    #[test]
    fn a_packages_rust_crates_are_its_lib_and_bin_target_names_underscored() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let meta = cargo_metadata::MetadataCommand::new()
            .manifest_path(root.join("Cargo.toml"))
            .no_deps()
            .exec()
            .unwrap();
        let of = |name: &str| rust_crates(meta.packages.iter().find(|p| p.name == name).unwrap());
        assert_eq!(
            of("neuron-fixtures-kernels"),
            (Some("neuron_fixtures_kernels".into()), vec!["neuron_tune_harness".into()])
        );
        assert_eq!(
            of("neuron-fixtures-qwen3"),
            (Some("neuron_fixtures_qwen3".into()), vec!["qwen3_harness".into()])
        );
        assert_eq!(of("xtask"), (None, vec!["xtask".into()]));
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
