//! Models: sequences of kernel invocations over HBM tensors, evaluated end to end.
//!
//! A [`Model`] declares, for a shape, its tensors and its kernel calls through a
//! [`ModelBuilder`]; it also has a CPU reference of the whole. Each call uses the tuned
//! parameters for its (crate, kernel, shape) from a [`Tuned`] table when there is one, else
//! the kernel's default (a kernel is its Rust crate and its name, [`Kernel::rust_crate`]: a
//! model may call two kernels of one name from two crates). Functional evaluation runs every call on one simulated core (values
//! flow through HBM); timing evaluation simulates each distinct call once and adds the
//! chip's launch overhead per call, as a real model pays it per kernel launch.

use crate::inputs::make_inputs;
use crate::kernel::{run_variant, Kernel, Role, RunError, TensorSpec};
use crate::params::{Params, Shape};
use neuron_sim::{Chip, Dtype, ExecMode, Nc};
pub use neuron_tune_protocol::{
    Distribution, KernelTime, Metrics, ModelCheck, ModelPlan, ModelTiming, PlannedCall, Tolerance,
    Tuned, TunedEntry,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A tensor of a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorId(usize);

struct Call {
    kernel: Arc<dyn Kernel>,
    shape: Shape,
    args: Vec<TensorId>,
}

/// Records a model's tensors and calls.
#[derive(Default)]
pub struct ModelBuilder {
    tensors: Vec<(TensorSpec, bool)>,
    /// (alias, original): tensors that are reshaped views of another.
    aliases: Vec<(usize, usize)>,
    calls: Vec<Call>,
}

impl ModelBuilder {
    /// A model input (drawn from the check distributions when evaluated functionally).
    pub fn input(&mut self, name: &str, dtype: Dtype, dims: &[u64]) -> TensorId {
        self.input_scaled(name, dtype, dims, 1.0)
    }
    /// A model input drawn with standard deviation `scale` (weights: 1/√fan_in).
    pub fn input_scaled(&mut self, name: &str, dtype: Dtype, dims: &[u64], scale: f32) -> TensorId {
        self.tensors.push((TensorSpec::input(name, dtype, dims).scaled(scale), true));
        TensorId(self.tensors.len() - 1)
    }
    /// A model output (compared with the reference).
    pub fn output(&mut self, name: &str, dtype: Dtype, dims: &[u64]) -> TensorId {
        self.tensors.push((TensorSpec::output(name, dtype, dims), true));
        TensorId(self.tensors.len() - 1)
    }
    /// An intermediate tensor.
    pub fn scratch(&mut self, name: &str, dtype: Dtype, dims: &[u64]) -> TensorId {
        self.tensors.push((TensorSpec::scratch(name, dtype, dims), false));
        TensorId(self.tensors.len() - 1)
    }

    /// The same tensor seen with another row-major shape of the same size.
    pub fn reshape(&mut self, t: TensorId, dims: &[u64]) -> Result<TensorId, String> {
        let (spec, visible) = self.tensors[t.0].clone();
        if spec.elems() != dims.iter().product::<u64>() as usize {
            return Err(format!("cannot view `{}` {:?} as {dims:?}", spec.name, spec.dims));
        }
        self.aliases.push((self.tensors.len(), t.0));
        self.tensors.push((TensorSpec { dims: dims.to_vec(), role: Role::Scratch, ..spec }, false));
        let _ = visible;
        Ok(TensorId(self.tensors.len() - 1))
    }
    /// Invoke `kernel` at `shape` on `args` (in the order of the kernel's tensors; dims and
    /// dtypes must match what the kernel declares for that shape).
    pub fn call(
        &mut self,
        kernel: &Arc<dyn Kernel>,
        shape: Shape,
        args: &[TensorId],
    ) -> Result<(), String> {
        let specs = kernel.tensors(&shape);
        if specs.len() != args.len() {
            return Err(format!(
                "{} at {shape} takes {} tensors, got {}",
                kernel.name(),
                specs.len(),
                args.len()
            ));
        }
        for (s, a) in specs.iter().zip(args) {
            let (t, _) = &self.tensors[a.0];
            if t.dims != s.dims || t.dtype != s.dtype {
                return Err(format!(
                    "{} at {shape}: `{}` must be {} {:?}, `{}` is {} {:?}",
                    kernel.name(),
                    s.name,
                    s.dtype,
                    s.dims,
                    t.name,
                    t.dtype,
                    t.dims
                ));
            }
        }
        self.calls.push(Call { kernel: kernel.clone(), shape, args: args.to_vec() });
        Ok(())
    }
}

/// A model a crate registers.
pub trait Model: Send + Sync {
    fn name(&self) -> &str;
    fn doc(&self) -> &str {
        ""
    }
    /// Named shapes (e.g. layers × tokens).
    fn shapes(&self) -> Vec<(String, Shape)>;
    /// Declare tensors and calls for `shape`.
    fn build(&self, b: &mut ModelBuilder, shape: &Shape) -> Result<(), String>;
    /// CPU reference: outputs from inputs (in declaration order).
    fn reference(&self, shape: &Shape, inputs: &[Vec<f32>]) -> Vec<Vec<f32>>;
    /// Work units (tokens) per evaluation, for throughput.
    fn tokens(&self, shape: &Shape) -> f64;
    /// Prompts (independent sequences) per evaluation, for prompts/s. The default, one:
    /// an evaluation is one prompt's `tokens` (a prefill); a batched shape says its batch.
    fn prompts(&self, _shape: &Shape) -> f64 {
        1.0
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance { atol: 5e-2, rtol: 5e-2, min_cosine: 0.999 }
    }
}

/// Default parameters by (Rust crate, kernel name): those a harness's configuration gives
/// the kernels it lists. A kernel not in it uses its declared defaults.
pub type Defaults = BTreeMap<(String, String), Params>;

/// A kernel's identity: its Rust crate and its name.
fn key(kernel: &dyn Kernel) -> (String, String) {
    (kernel.rust_crate().to_string(), kernel.name().to_string())
}

fn params_for(
    kernel: &dyn Kernel,
    shape: &Shape,
    tuned: &Tuned,
    defaults: &Defaults,
) -> (Params, bool) {
    match tuned.get(Some(kernel.rust_crate()), kernel.name(), shape) {
        Some(p) => (p.clone(), true),
        None => (
            defaults
                .get(&key(kernel))
                .cloned()
                .unwrap_or_else(|| Params::defaults(&kernel.params())),
            false,
        ),
    }
}

fn built(model: &dyn Model, shape: &Shape) -> Result<ModelBuilder, RunError> {
    let mut b = ModelBuilder::default();
    model.build(&mut b, shape).map_err(RunError::Invalid)?;
    Ok(b)
}

/// Say which call of the model failed.
fn in_call(e: RunError, kernel: &dyn Kernel, shape: &Shape, params: &Params) -> RunError {
    e.context(&format!("{} at {shape} with {params}", kernel.name()))
}

/// The distinct calls `model` makes at `shape` and the parameters each uses, in order of
/// first call; nothing is simulated. Two calls are the same when crate, kernel, shape and
/// parameters are.
pub fn plan(
    model: &dyn Model,
    shape: &Shape,
    chip: &Chip,
    tuned: &Tuned,
    defaults: &Defaults,
) -> Result<ModelPlan, RunError> {
    let b = built(model, shape)?;
    let mut calls: Vec<PlannedCall> = Vec::new();
    for call in &b.calls {
        let (params, is_tuned) = params_for(&*call.kernel, &call.shape, tuned, defaults);
        let krate = call.kernel.rust_crate();
        match calls.iter_mut().find(|c| {
            c.kernel == call.kernel.name()
                && c.krate.as_deref() == Some(krate)
                && c.shape == call.shape
                && c.params == params
        }) {
            Some(c) => c.calls += 1,
            None => calls.push(PlannedCall {
                kernel: call.kernel.name().to_string(),
                krate: Some(krate.to_string()),
                shape: call.shape.clone(),
                params,
                tuned: is_tuned,
                calls: 1,
            }),
        }
    }
    Ok(ModelPlan {
        model: model.name().to_string(),
        shape: shape.clone(),
        chip: chip.name.clone(),
        tokens: model.tokens(shape),
        prompts: model.prompts(shape),
        launch_overhead_us: chip.launch_overhead_ns / 1e3,
        calls,
    })
}

/// The kernels `model` calls at any of its shapes (the first of each crate and name: two
/// crates' kernels of one name are both there), so a harness can serve them even when its
/// crate does not list them.
pub fn kernels_of(model: &dyn Model) -> Vec<Arc<dyn Kernel>> {
    let mut out: Vec<Arc<dyn Kernel>> = Vec::new();
    for (_, shape) in model.shapes() {
        let Ok(b) = built(model, &shape) else { continue };
        for c in b.calls {
            if !out.iter().any(|k| key(&**k) == key(&*c.kernel)) {
                out.push(c.kernel);
            }
        }
    }
    out
}

/// Simulated end-to-end time and throughput of `model` at `shape`: each distinct call of
/// its [`plan`] simulated once.
pub fn evaluate_timing(
    model: &dyn Model,
    shape: &Shape,
    chip: &Chip,
    tuned: &Tuned,
    defaults: &Defaults,
) -> Result<ModelTiming, RunError> {
    let b = built(model, shape)?;
    let plan = plan(model, shape, chip, tuned, defaults)?;
    let launch_us = plan.launch_overhead_us;
    let mut kernels: Vec<KernelTime> = Vec::new();
    for c in plan.calls {
        let kernel = &b
            .calls
            .iter()
            .find(|k| {
                k.kernel.name() == c.kernel && c.krate.as_deref() == Some(k.kernel.rust_crate())
            })
            .expect("a planned call is one of the model's")
            .kernel;
        let run = run_variant(&**kernel, &c.params, &c.shape, chip, ExecMode::TIMING, None)
            .map_err(|e| in_call(e, &**kernel, &c.shape, &c.params))?;
        let t = run.profile.kernel_time_us;
        kernels.push(KernelTime {
            kernel: c.kernel,
            krate: c.krate,
            shape: c.shape,
            params: c.params,
            tuned: c.tuned,
            calls: c.calls,
            time_us: t,
            total_us: c.calls as f64 * (t + launch_us),
            program_hash: run.profile.program_hash.clone(),
        });
    }
    let total: f64 = kernels.iter().map(|k| k.total_us).sum();
    Ok(ModelTiming {
        model: plan.model,
        shape: shape.clone(),
        chip: plan.chip,
        total_us: total,
        launch_overhead_us: launch_us,
        tokens: plan.tokens,
        tokens_per_s: if total > 0.0 { plan.tokens / (total * 1e-6) } else { 0.0 },
        prompts_per_s: if total > 0.0 { plan.prompts / (total * 1e-6) } else { 0.0 },
        kernels,
    })
}

/// Run `model` functionally on inputs drawn from `seed` and compare with its reference.
pub fn evaluate_functional(
    model: &dyn Model,
    shape: &Shape,
    chip: &Chip,
    tuned: &Tuned,
    defaults: &Defaults,
    seed: u64,
) -> Result<ModelCheck, RunError> {
    let b = built(model, shape)?;
    let input_specs: Vec<TensorSpec> =
        b.tensors.iter().filter(|(t, _)| t.role == Role::Input).map(|(t, _)| t.clone()).collect();
    let inputs = make_inputs(&input_specs, seed, Distribution::Normal);
    let body = std::panic::AssertUnwindSafe(|| -> Result<Vec<Vec<f32>>, RunError> {
        let mut nc = Nc::new(chip.clone(), ExecMode::FUNCTIONAL);
        let mut handles = Vec::new();
        let mut next = 0;
        for (i, (t, _)) in b.tensors.iter().enumerate() {
            if let Some(&(_, orig)) = b.aliases.iter().find(|(a, _)| *a == i) {
                let h: neuron_sim::Hbm = handles[orig];
                handles.push(h.reshape(&t.dims).expect("sizes checked when the alias was made"));
                continue;
            }
            handles.push(match t.role {
                Role::Input => {
                    next += 1;
                    nc.hbm_input(&t.name, t.dtype, &t.dims, &inputs[next - 1])?
                }
                Role::Output | Role::Scratch => nc.hbm(&t.name, t.dtype, &t.dims)?,
            });
        }
        for call in &b.calls {
            let (params, _) = params_for(&*call.kernel, &call.shape, tuned, defaults);
            call.kernel
                .validate(&params, &call.shape, chip)
                .map_err(|e| in_call(RunError::Invalid(e), &*call.kernel, &call.shape, &params))?;
            let args: Vec<_> = call.args.iter().map(|a| handles[a.0]).collect();
            call.kernel
                .run(&mut nc, &params, &call.shape, &args)
                .map_err(|e| in_call(e.into(), &*call.kernel, &call.shape, &params))?;
            nc.release_pools();
        }
        Ok(b.tensors
            .iter()
            .zip(&handles)
            .filter(|((t, visible), _)| t.role == Role::Output && *visible)
            .map(|(_, h)| nc.read_hbm(*h).expect("functional").to_vec())
            .collect())
    });
    let outputs = crate::kernel::catch_panic(body).map_err(RunError::Panic)??;
    let reference = model.reference(shape, &inputs);
    let tol = model.tolerance();
    let metrics = Metrics::compare(&outputs, &reference, &tol);
    Ok(ModelCheck {
        model: model.name().to_string(),
        shape: shape.clone(),
        passed: metrics.cosine >= tol.min_cosine,
        metrics,
    })
}
