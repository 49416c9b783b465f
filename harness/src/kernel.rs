//! What a kernel declares, and running one variant on the simulator.
//!
//! A [`Kernel`] is a trait object: name, typed parameters and their validity rule, named
//! shapes (the tuning keys) and a proptest strategy for small shapes, the HBM tensors of a
//! shape, the body (a function over `neuron_sim::Nc`), a CPU reference, a tolerance and
//! its useful work. [`run_variant`] traces/executes one variant in the mode asked for and
//! never lets a panic in kernel code escape.

use crate::inputs::make_inputs;
use crate::params::{ParamSpec, Params, Shape};
use neuron_sim::{Chip, Dtype, ExecMode, Hbm, Nc, Profile, SimError, SimResult};
pub use neuron_tune_protocol::{Distribution, Metrics, Tolerance, Work};
use neuron_tune_protocol::{ErrorInfo, ErrorKind};
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

/// Input or output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Input,
    Output,
    /// Working memory in HBM (e.g. attention scores): allocated, never compared.
    Scratch,
}

/// One HBM tensor of a kernel invocation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: Dtype,
    pub dims: Vec<u64>,
    pub role: Role,
    /// Inputs are drawn from the check distributions times this (e.g. 1/√fan_in for
    /// weights, so activations keep their scale through a model).
    #[serde(default = "one")]
    pub init_scale: f32,
}

fn one() -> f32 {
    1.0
}

impl TensorSpec {
    pub fn input(name: &str, dtype: Dtype, dims: &[u64]) -> Self {
        TensorSpec {
            name: name.into(),
            dtype,
            dims: dims.to_vec(),
            role: Role::Input,
            init_scale: 1.0,
        }
    }
    pub fn output(name: &str, dtype: Dtype, dims: &[u64]) -> Self {
        TensorSpec {
            name: name.into(),
            dtype,
            dims: dims.to_vec(),
            role: Role::Output,
            init_scale: 1.0,
        }
    }
    pub fn scratch(name: &str, dtype: Dtype, dims: &[u64]) -> Self {
        TensorSpec {
            name: name.into(),
            dtype,
            dims: dims.to_vec(),
            role: Role::Scratch,
            init_scale: 1.0,
        }
    }
    /// Scale the drawn input values (see `init_scale`).
    pub fn scaled(mut self, s: f32) -> Self {
        self.init_scale = s;
        self
    }
    pub fn elems(&self) -> usize {
        self.dims.iter().product::<u64>() as usize
    }
}

/// The default tolerance for an output dtype, after the tolerances the NKI samples use
/// (docs/neuroncore.md §5: bf16 `atol=1e-2, rtol=2e-2`; fp32 matmul `atol=1e-4, rtol=1e-2`).
pub fn tolerance_for(d: Dtype) -> Tolerance {
    match d {
        // An integer output is held to fp32's tolerance: below 2^24 its values are exact.
        Dtype::F32 | Dtype::I32 | Dtype::U8 | Dtype::I8 | Dtype::U16 | Dtype::I16 | Dtype::U32 => {
            Tolerance::FP32
        }
        Dtype::Bf16 | Dtype::F16 => Tolerance::BF16,
        Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => Tolerance::FP8,
    }
}

/// The default tolerance of a kernel whose outputs are `tensors`' outputs: that of the least
/// precise output dtype, so an fp32 output is held to fp32's tolerance (a bf16 one would let
/// a 1.5 % error through) and a kernel with a bf16 output is not failed on rounding it may
/// do. A kernel with no output gets fp32's.
pub fn default_tolerance(tensors: &[TensorSpec]) -> Tolerance {
    let rank = |d: Dtype| match d {
        Dtype::F32 | Dtype::I32 | Dtype::U8 | Dtype::I8 | Dtype::U16 | Dtype::I16 | Dtype::U32 => 0,
        Dtype::Bf16 | Dtype::F16 => 1,
        Dtype::Fp8E4m3 | Dtype::Fp8E5m2 => 2,
    };
    let loosest = tensors
        .iter()
        .filter(|t| t.role == Role::Output)
        .map(|t| t.dtype)
        .max_by_key(|&d| rank(d))
        .unwrap_or(Dtype::F32);
    tolerance_for(loosest)
}

/// A kernel a crate registers with the harness.
pub trait Kernel: Send + Sync {
    /// Unique name (the `--kernel` selector and the TOML key).
    fn name(&self) -> &str;
    /// One line on what it computes.
    fn doc(&self) -> &str {
        ""
    }
    /// Declared parameters with defaults.
    fn params(&self) -> Vec<ParamSpec>;
    /// Which parameter values work for a shape on a chip (divisibility, SBUF and PSUM fit:
    /// read the sizes from `chip.memory`, they differ between chips).
    fn validate(&self, _params: &Params, _shape: &Shape, _chip: &Chip) -> Result<(), String> {
        Ok(())
    }
    /// Named shapes (tuning keys); TOML `shapes` may add to or replace them.
    fn shapes(&self) -> Vec<(String, Shape)>;
    /// Small random shapes for `check`, valid for `params` (a kernel knows which multiples
    /// its blocking needs; shapes are still filtered by [`Kernel::validate`]). Should shrink
    /// toward the smallest shape.
    fn small_shapes(&self, params: &Params) -> BoxedStrategy<Shape>;
    /// The HBM tensors of a shape, inputs first.
    fn tensors(&self, shape: &Shape) -> Vec<TensorSpec>;
    /// The input values for a check case: one vector per [`Role::Input`] tensor, in order,
    /// row-major, already representable in the tensor's dtype. The default draws them from
    /// `dist` with [`make_inputs`] (deterministic in `seed`); override it when a kernel needs
    /// a particular domain (positive values, indices, a mask).
    fn inputs(&self, shape: &Shape, seed: u64, dist: Distribution) -> Vec<Vec<f32>> {
        make_inputs(&self.tensors(shape), seed, dist)
    }
    /// The body: issue instructions for `tensors` (in the order of [`Kernel::tensors`]).
    fn run(&self, nc: &mut Nc, params: &Params, shape: &Shape, tensors: &[Hbm]) -> SimResult<()>;
    /// The CPU reference: outputs (in order) from inputs (in order), as f32 row-major.
    fn reference(&self, shape: &Shape, inputs: &[Vec<f32>]) -> Vec<Vec<f32>>;
    /// How close outputs must be at `shape`. The default follows the output dtypes
    /// ([`default_tolerance`]); override it when the algorithm loses more precision than its
    /// outputs' rounding does (a long bf16 reduction written to fp32, say).
    fn tolerance(&self, shape: &Shape) -> Tolerance {
        default_tolerance(&self.tensors(shape))
    }
    /// Useful work of one invocation.
    fn work(&self, shape: &Shape) -> Work;
    /// The Rust crate whose code defines this kernel: the first path segment of its type's
    /// name (`std::any::type_name`), so `my_kernels` for `my_kernels::gemm::Gemm` — the lib
    /// target's name (`-` spelled `_`), or the harness binary's for a kernel defined in it.
    /// With the name it identifies the kernel across the protocol: a model that calls two
    /// kernels of one name from two crates gets each crate's tuned parameters, and the tool
    /// tells each call's package from it (a lib target name in `cargo metadata`).
    ///
    /// It is the crate of the *type*: a kernel that is a value of a type another crate
    /// defines (a generic `shared::Elementwise<Op>`, a struct holding a closure, a name
    /// given at run time) reports that crate. Override it when such a kernel belongs to
    /// the crate that builds it: `fn rust_crate(&self) -> &str { env!("CARGO_CRATE_NAME") }`
    /// in that crate's library. (Not knowing the crate, the tool falls back to the name,
    /// as before crates were told apart.)
    fn rust_crate(&self) -> &str {
        crate_of_type(std::any::type_name::<Self>())
    }
}

/// The crate of a type's name as `std::any::type_name` spells it: the leading path
/// segment (`a::b::C<d::E>` → `a`), past references (`&a::C` → `a`). Empty for a type
/// without one (a tuple).
pub fn crate_of_type(type_name: &str) -> &str {
    let t = type_name.trim_start_matches(['&', '*']);
    let t = t.strip_prefix("mut ").or_else(|| t.strip_prefix("const ")).unwrap_or(t);
    let end = t.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(t.len());
    &t[..end]
}

/// Why a variant could not be run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunError {
    /// The parameters are not valid for the shape (the kernel's validity rule).
    #[error("invalid variant: {0}")]
    Invalid(String),
    /// The program broke a hardware rule (`violation` names it: `over_capacity`, …) at an
    /// instruction (`nc_matmul`, …) issued at `location` (`file:line:col` of kernel code).
    #[error("{message}")]
    Sim { violation: String, instruction: String, location: String, message: String },
    /// The kernel code panicked.
    #[error("kernel panicked: {0}")]
    Panic(String),
}

impl RunError {
    /// The same error with `context` in front of its message (which model call failed).
    pub fn context(self, context: &str) -> RunError {
        match self {
            RunError::Invalid(m) => RunError::Invalid(format!("{context}: {m}")),
            RunError::Sim { violation, instruction, location, message } => RunError::Sim {
                violation,
                instruction,
                location,
                message: format!("{context}: {message}"),
            },
            RunError::Panic(m) => RunError::Panic(format!("{context}: {m}")),
        }
    }
}

impl From<SimError> for RunError {
    fn from(e: SimError) -> Self {
        match e.kind {
            // A kernel's own `Err(String)` or parameter error through `?` breaks its rule,
            // not a hardware rule.
            neuron_sim::ViolationKind::Invalid(_) if e.instruction == "kernel" => {
                RunError::Invalid(e.to_string())
            }
            _ => RunError::Sim {
                violation: e.kind.name().to_string(),
                instruction: e.instruction.to_string(),
                location: e.loc.to_string(),
                message: e.to_string(),
            },
        }
    }
}

impl From<&RunError> for ErrorInfo {
    fn from(e: &RunError) -> ErrorInfo {
        let kind = match e {
            RunError::Invalid(_) => ErrorKind::Invalid,
            RunError::Sim { violation, .. } => {
                ErrorKind::SimViolation { violation: violation.clone() }
            }
            RunError::Panic(_) => ErrorKind::Panic,
        };
        let message = match e {
            RunError::Invalid(m) | RunError::Panic(m) => m.clone(),
            RunError::Sim { message, .. } => message.clone(),
        };
        ErrorInfo { kind, message }
    }
}

/// Result of running a variant.
pub struct VariantRun {
    pub outputs: Vec<Vec<f32>>,
    pub profile: Profile,
    pub trace: Option<serde_json::Value>,
    /// Lower bounds of the kernel time, from the program alone (timing on or off).
    pub lower_bound: neuron_sim::LowerBound,
}

/// Run one variant: create its tensors (inputs from `inputs` when functional), run the
/// body in `mode`, collect outputs (functional) and the profile (with the kernel's useful
/// FLOPs). Panics in kernel code are caught and reported as [`RunError::Panic`].
pub fn run_variant(
    kernel: &dyn Kernel,
    params: &Params,
    shape: &Shape,
    chip: &Chip,
    mode: ExecMode,
    inputs: Option<&[Vec<f32>]>,
) -> Result<VariantRun, RunError> {
    params.check(&kernel.params()).map_err(|e| RunError::Invalid(e.to_string()))?;
    // Everything that runs kernel code is inside `catch_panic`, the validity rule and the
    // tensor list included: a panic there is the kernel's, never the worker's.
    let body = || -> Result<VariantRun, RunError> {
        kernel.validate(params, shape, chip).map_err(RunError::Invalid)?;
        let specs = kernel.tensors(shape);
        let n_inputs = specs.iter().filter(|s| s.role == Role::Input).count();
        if let Some(v) = inputs.filter(|_| mode.functional) {
            if v.len() != n_inputs {
                return Err(RunError::Invalid(format!(
                    "{} input tensors, {} input vectors given",
                    n_inputs,
                    v.len()
                )));
            }
        }
        let mut nc = Nc::new(chip.clone(), mode);
        let mut handles = Vec::with_capacity(specs.len());
        let mut next_input = 0;
        for spec in &specs {
            let h = match spec.role {
                Role::Input => {
                    let data: &[f32] = match inputs {
                        Some(v) if mode.functional => {
                            next_input += 1;
                            &v[next_input - 1]
                        }
                        _ => &[],
                    };
                    nc.hbm_input(&spec.name, spec.dtype, &spec.dims, data)?
                }
                Role::Output | Role::Scratch => nc.hbm(&spec.name, spec.dtype, &spec.dims)?,
            };
            handles.push(h);
        }
        kernel.run(&mut nc, params, shape, &handles)?;
        let outputs = if mode.functional {
            specs
                .iter()
                .zip(&handles)
                .filter(|(s, _)| s.role == Role::Output)
                .map(|(_, h)| nc.read_hbm(*h).expect("functional run").to_vec())
                .collect()
        } else {
            Vec::new()
        };
        let lower_bound = nc.lower_bound();
        let mut profile = nc.profile();
        profile.set_model_flops(kernel.work(shape).flops, chip.peak_bf16_flops());
        let trace = nc.trace_json();
        Ok(VariantRun { outputs, profile, trace, lower_bound })
    };
    catch_panic(body).map_err(RunError::Panic)?
}

/// Run kernel code, turning a panic into its message. Every call into kernel code (validity
/// rule, tensor list, input generator, body, reference) goes through here, so a kernel's
/// panic is reported as the kernel's, never as a dead worker.
pub fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let _ = crate::panics::take_last_location();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        // The payload is a `Box<dyn Any>`; downcast what it holds, not the box (a `&Box` is
        // itself an `Any` and matches neither type).
        let message = if let Some(s) = payload.downcast_ref::<&str>() {
            s.to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "(non-string panic payload)".into()
        };
        // Where, when the worker's hook saw it (the summary line names the kernel's line).
        match crate::panics::take_last_location() {
            Some(at) => format!("{message} (at {at})"),
            None => message,
        }
    })
}
