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
//! The tuned parameters come from every `neuron-tune.tuned.toml` of the workspace's local
//! packages (a models crate usually calls kernels of another crate, whose database it is).
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
use std::path::PathBuf;

/// Every tuned database of the workspace's local packages.
#[derive(Default)]
pub struct TunedSet {
    dbs: Vec<TunedDb>,
}

impl TunedSet {
    /// The databases beside every local (path) package's manifest, members or not.
    pub fn load(meta: &cargo_metadata::Metadata) -> Result<TunedSet, Failure> {
        let mut dbs = Vec::new();
        let mut dirs: Vec<PathBuf> = meta
            .packages
            .iter()
            .filter(|p| p.source.is_none())
            .filter_map(|p| p.manifest_path.parent().map(|d| d.as_std_path().to_path_buf()))
            .collect();
        dirs.sort();
        dirs.dedup();
        for dir in dirs {
            if dir.join(crate::tuned::FILE_NAME).exists() {
                dbs.push(TunedDb::load(&dir)?);
            }
        }
        Ok(TunedSet { dbs })
    }

    /// The database of the package whose manifest is in `dir`, if it has one.
    pub fn of_dir(&self, dir: &std::path::Path) -> Option<&TunedDb> {
        self.dbs.iter().find(|db| db.path().parent() == Some(dir))
    }

    /// The tuned parameters for `chip`, as a model request carries them.
    pub fn for_chip(&self, chip: &str) -> Tuned {
        Tuned(self.records().filter(|(_, r)| r.chip == chip).map(|(_, r)| r.entry()).collect())
    }

    /// Every record with the file it is in.
    pub fn records(&self) -> impl Iterator<Item = (&std::path::Path, &TunedRecord)> {
        self.dbs.iter().flat_map(|db| db.records().iter().map(move |r| (db.path(), r)))
    }

    /// The record a tuned call used.
    pub fn find(
        &self,
        kernel: &str,
        dims: &Shape,
        chip: &str,
    ) -> Option<(&std::path::Path, &TunedRecord)> {
        self.records().find(|(_, r)| r.kernel == kernel && &r.dims == dims && r.chip == chip)
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
        return Err(fail(Exit::Config, "the selected crates have no models".to_string()));
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
                return Err(fail(
                    Exit::Config,
                    format!(
                        "--shape {s}: model `{}` has no such shape (have: {})",
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

/// What model measurements share: where results are stored, the chip, the tuned databases
/// (to tell stale entries), whether to re-simulate stored programs, where to report, and
/// the simulator version of the harness that evaluates (its results are keyed by it).
pub struct Bench<'a> {
    pub store: &'a Store,
    pub sim_version: &'a str,
    pub chip: &'a ChipSpec,
    pub records: &'a TunedSet,
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
    let variants: Vec<Variant> = plan
        .calls
        .iter()
        .map(|c| Variant {
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
            records.find(&c.kernel, &c.shape, &plan.chip).and_then(|(file, r)| {
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
