//! The harness binary's `main`: `--list` and the `--serve` loop of the worker protocol.
//!
//! [`Registry::handle`] answers one request; every call into kernel code under it (the
//! validity rule, shapes, the input generator, the body, the reference) runs inside
//! `catch_panic`, so a panic is an answer, never a dead worker. [`main`] serves requests on
//! a protocol channel that kernel code cannot write to (see [`crate::stdio`]).

use crate::cases::Cases;
use crate::check::{check_remembering, CheckConfig};
use crate::kernel::{catch_panic, run_variant, Kernel, RunError};
use crate::model::{evaluate_functional, evaluate_timing, Model};
use crate::params::{Params, Shape};
use crate::space::{check_shape_size, load_crate_config, CrateConfig};
use crate::stdio::ProtocolChannel;
use neuron_sim::{Chip, ExecMode, Profile};
use neuron_tune_protocol::*;
use std::path::PathBuf;
use std::sync::Arc;

/// What a harness binary serves.
pub struct Registry {
    pub crate_name: String,
    pub manifest_dir: PathBuf,
    pub kernels: Vec<Arc<dyn Kernel>>,
    pub models: Vec<Arc<dyn Model>>,
}

/// A request that cannot be answered: the response's error.
type Refusal = ErrorInfo;

/// The first name that occurs again in `names`.
fn first_repeat(names: &[&str]) -> Option<String> {
    names.iter().enumerate().find(|(i, n)| names[..*i].contains(n)).map(|(_, n)| n.to_string())
}

/// A variant request resolved: kernel, parameters, shape, chip.
type Resolved = (Arc<dyn Kernel>, Params, Shape, Chip);

fn refuse(kind: ErrorKind, message: impl Into<String>) -> Refusal {
    ErrorInfo { kind, message: message.into() }
}

/// The chip a request names (built in, or its TOML text).
pub fn resolve_chip(c: &ChipSpec) -> Result<Chip, String> {
    match &c.toml {
        Some(t) => Chip::from_toml(t).map_err(|e| format!("chip `{}`: {e}", c.name)),
        None => Chip::builtin(&c.name).ok_or_else(|| {
            format!("unknown chip `{}` (built in: {})", c.name, Chip::BUILTIN.join(", "))
        }),
    }
}

/// The profile as the protocol carries it (the simulator's `Profile`, field for field;
/// a field renamed on one side and not the other fails this module's tests).
pub fn profile_summary(p: &Profile) -> ProfileSummary {
    serde_json::to_value(p)
        .and_then(serde_json::from_value)
        .expect("neuron_sim::Profile and ProfileSummary have the same fields")
}

impl Registry {
    /// The kernel of that name (of Rust crate `krate` when given, [`Kernel::rust_crate`]):
    /// one the crate lists, else one its models call (a models crate serves the variants of
    /// its models' calls without listing, tuning or checking kernels that belong to another
    /// crate). Without a crate, a name the crate lists is that kernel (listed names are
    /// unique); a name its models call from two crates is refused, never the first picked.
    pub fn kernel(&self, name: &str, krate: Option<&str>) -> Result<Arc<dyn Kernel>, Refusal> {
        let of_crate = |k: &Arc<dyn Kernel>| krate.is_none_or(|c| k.rust_crate() == c);
        if let Some(k) = self.kernels.iter().find(|k| k.name() == name && of_crate(k)) {
            return Ok(k.clone());
        }
        let from_models = catch_panic(|| {
            self.models.iter().flat_map(|m| crate::model::kernels_of(&**m)).collect::<Vec<_>>()
        })
        .unwrap_or_default();
        let mut found: Vec<Arc<dyn Kernel>> = Vec::new();
        for k in from_models.into_iter().filter(|k| k.name() == name && of_crate(k)) {
            if !found.iter().any(|f| f.rust_crate() == k.rust_crate()) {
                found.push(k);
            }
        }
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => {
                let names: Vec<&str> = self.kernels.iter().map(|k| k.name()).collect();
                let of = krate.map(|c| format!(" of crate `{c}`")).unwrap_or_default();
                Err(refuse(
                    ErrorKind::UnknownKernel,
                    format!(
                        "no kernel `{name}`{of} in {} (it has: {})",
                        self.crate_name,
                        names.join(", ")
                    ),
                ))
            }
            _ => {
                let crates: Vec<String> =
                    found.iter().map(|k| format!("`{}`", k.rust_crate())).collect();
                Err(refuse(
                    ErrorKind::BadRequest,
                    format!(
                        "kernel `{name}` is ambiguous in {}: its models call kernels of that name \
                         from crates {}; a request must name the crate",
                        self.crate_name,
                        crates.join(" and ")
                    ),
                ))
            }
        }
    }

    fn model(&self, name: &str) -> Result<&Arc<dyn Model>, Refusal> {
        self.models.iter().find(|m| m.name() == name).ok_or_else(|| {
            let names: Vec<&str> = self.models.iter().map(|m| m.name()).collect();
            refuse(
                ErrorKind::UnknownModel,
                format!("no model `{name}` in {} (it has: {})", self.crate_name, names.join(", ")),
            )
        })
    }

    /// The crate's configuration (TOML spaces and shapes).
    /// A kernel or model name registered twice (`harness_main!` lists each once: the names
    /// are the `--kernel`/`--model` selectors and the TOML keys), if any.
    pub fn duplicate_name(&self) -> Option<String> {
        let kernels = first_repeat(&self.kernels.iter().map(|k| k.name()).collect::<Vec<_>>());
        let models = first_repeat(&self.models.iter().map(|m| m.name()).collect::<Vec<_>>());
        kernels.map(|k| format!("kernel `{k}`")).or(models.map(|m| format!("model `{m}`")))
    }

    pub fn config(&self) -> Result<CrateConfig, crate::space::SpaceError> {
        let ks: Vec<&dyn Kernel> = self.kernels.iter().map(|k| &**k).collect();
        load_crate_config(&self.manifest_dir, &ks)
    }

    /// The `list` document. Model shapes and every validity rule are kernel code: a panic
    /// there is an error answer naming the kernel or model. Valid variants are counted on
    /// trn2, the command line's default chip (`list` names no chip).
    pub fn list(&self, cfg: &CrateConfig) -> Result<ListDoc, Refusal> {
        let mut kernels = Vec::new();
        let chip = Chip::trn2();
        for k in &self.kernels {
            let kc = &cfg.kernels[k.name()];
            let valid_variants = catch_panic(|| {
                kc.shapes.iter().map(|(n, s)| (n.clone(), kc.count_valid(&**k, s, &chip))).collect()
            })
            .map_err(|m| refuse(ErrorKind::Panic, format!("kernel `{}`: {m}", k.name())))?;
            kernels.push(KernelInfo {
                name: k.name().to_string(),
                doc: k.doc().to_string(),
                params: k.params(),
                space: kc.space(),
                defaults: kc.defaults.clone(),
                shapes: kc.shapes.clone(),
                valid_variants,
            });
        }
        let mut models = Vec::new();
        for m in &self.models {
            let shapes = catch_panic(|| m.shapes())
                .map_err(|e| refuse(ErrorKind::Panic, format!("model `{}`: {e}", m.name())))?;
            models.push(ModelInfo { name: m.name().into(), doc: m.doc().into(), shapes });
        }
        Ok(ListDoc {
            protocol: PROTOCOL_VERSION,
            harness_version: env!("CARGO_PKG_VERSION").to_string(),
            sim_version: neuron_sim::SIM_VERSION.to_string(),
            crate_name: self.crate_name.clone(),
            kernels,
            models,
        })
    }

    /// Answer one request (never a handshake: that is [`main`]'s).
    pub fn handle(&self, cfg: &CrateConfig, req: Request) -> Response {
        self.handle_remembering(cfg, req, &mut Cases::default())
    }

    /// [`Registry::handle`], with the check cases a worker remembers across its requests
    /// (the same answers, sooner: [`crate::cases`]).
    pub fn handle_remembering(
        &self,
        cfg: &CrateConfig,
        req: Request,
        cases: &mut Cases,
    ) -> Response {
        let id = req.id;
        match self.answer(cfg, req.body, cases) {
            Ok(body) => Response::new(id, body),
            Err(e) => Response::new(id, ResponseBody::Error(e)),
        }
    }

    fn answer(
        &self,
        cfg: &CrateConfig,
        body: RequestBody,
        cases: &mut Cases,
    ) -> Result<ResponseBody, Refusal> {
        let run_err = |e: RunError| ErrorInfo::from(&e);
        let bad = |e: String| refuse(ErrorKind::BadRequest, e);
        match body {
            RequestBody::Hello { .. } => {
                Err(refuse(ErrorKind::BadRequest, "hello was already exchanged"))
            }
            RequestBody::Shutdown => Ok(ResponseBody::Shutdown),
            RequestBody::List => self.list(cfg).map(ResponseBody::List),
            RequestBody::Validate { kernel, shape, configs, chip } => {
                let k = self.kernel(&kernel, None)?;
                let chip = resolve_chip(&chip).map_err(bad)?;
                let shape = resolve_shape(cfg, &*k, &shape).map_err(bad)?;
                let specs = k.params();
                let verdicts = configs
                    .iter()
                    .map(|p| {
                        p.check(&specs).map_err(|e| e.to_string())?;
                        catch_panic(|| k.validate(p, &shape, &chip))
                            .unwrap_or_else(|m| Err(format!("validity rule panicked: {m}")))
                    })
                    .map(|r| r.err())
                    .collect();
                Ok(ResponseBody::Validate { verdicts })
            }
            RequestBody::Trace(v) => {
                let (k, params, shape, chip) = self.variant(cfg, &v)?;
                let mode = ExecMode { functional: false, timing: false, trace: false };
                let run = run_variant(&*k, &params, &shape, &chip, mode, None).map_err(run_err)?;
                let p = run.profile;
                let launch = p.launch_overhead_us;
                Ok(ResponseBody::Trace(TraceResult {
                    program_hash: p.program_hash,
                    instruction_count: p.instruction_count,
                    sbuf_bytes_per_partition: p.sbuf_peak_bytes_per_partition,
                    psum_banks: p.psum_peak_banks,
                    work: k.work(&shape),
                    shape,
                    roofline_bound_us: p.roofline_bound_us + launch,
                    lower_bound_us: run.lower_bound.us() + launch,
                }))
            }
            RequestBody::Check { kernel, params, cases: n, seed, chip, regressions } => {
                let k = self.kernel(&kernel, None)?;
                let chip = resolve_chip(&chip).map_err(bad)?;
                let cfg = CheckConfig { cases: n, seed, chip, regressions };
                let report = check_remembering(&*k, &params, &cfg, cases).map_err(run_err)?;
                Ok(ResponseBody::Check(report))
            }
            RequestBody::CheckAt { kernel, params, shapes, seed, chip } => {
                let k = self.kernel(&kernel, None)?;
                let chip = resolve_chip(&chip).map_err(bad)?;
                let report =
                    crate::check::check_at(&*k, &params, &shapes, seed, &chip).map_err(run_err)?;
                Ok(ResponseBody::Check(report))
            }
            RequestBody::Bench(v) => self.bench(cfg, &v, false, false),
            RequestBody::Profile { variant, trace } => self.bench(cfg, &variant, true, trace),
            RequestBody::Model { model, shape, chip, tuned, functional, seed } => {
                let (m, shape) = self.model_shape(&model, shape)?;
                let chip = resolve_chip(&chip).map_err(bad)?;
                let defaults = self.kernel_defaults(cfg);
                let timing =
                    evaluate_timing(&**m, &shape, &chip, &tuned, &defaults).map_err(run_err)?;
                let check = if functional {
                    Some(
                        evaluate_functional(&**m, &shape, &chip, &tuned, &defaults, seed)
                            .map_err(run_err)?,
                    )
                } else {
                    None
                };
                Ok(ResponseBody::Model(ModelResult { timing, check }))
            }
            RequestBody::ModelPlan { model, shape, chip, tuned } => {
                let (m, shape) = self.model_shape(&model, shape)?;
                let chip = resolve_chip(&chip).map_err(bad)?;
                let plan =
                    crate::model::plan(&**m, &shape, &chip, &tuned, &self.kernel_defaults(cfg))
                        .map_err(run_err)?;
                Ok(ResponseBody::ModelPlan(plan))
            }
            other => Err(bad(format!("this harness does not serve {other:?}"))),
        }
    }

    /// A model and its shape (a named one is looked up among the model's shapes).
    fn model_shape(
        &self,
        model: &str,
        shape: ShapeRef,
    ) -> Result<(&Arc<dyn Model>, Shape), Refusal> {
        let m = self.model(model)?;
        let shape = match shape {
            ShapeRef::Dims(s) => {
                check_shape_size(&s).map_err(|e| refuse(ErrorKind::BadRequest, e))?;
                s
            }
            ShapeRef::Named(n) => {
                let shapes = catch_panic(|| m.shapes()).map_err(|e| refuse(ErrorKind::Panic, e))?;
                let names: Vec<String> = shapes.iter().map(|(n, _)| n.clone()).collect();
                shapes.into_iter().find(|(sn, _)| *sn == n).map(|(_, s)| s).ok_or_else(|| {
                    refuse(
                        ErrorKind::BadRequest,
                        format!(
                            "model `{model}` has no shape `{n}` (it has: {})",
                            names.join(", ")
                        ),
                    )
                })?
            }
        };
        Ok((m, shape))
    }

    /// The default parameters of the kernels the crate lists (from its configuration), by
    /// crate and name: a same-named kernel of another crate that a model calls keeps its own.
    fn kernel_defaults(&self, cfg: &CrateConfig) -> crate::model::Defaults {
        let listed = self.kernels.iter().filter_map(|k| {
            let c = cfg.kernels.get(k.name())?;
            Some(((k.rust_crate().to_string(), k.name().to_string()), c.defaults.clone()))
        });
        listed.collect()
    }

    fn variant(&self, cfg: &CrateConfig, v: &VariantRef) -> Result<Resolved, Refusal> {
        let k = self.kernel(&v.kernel, v.krate.as_deref())?;
        let chip = resolve_chip(&v.chip).map_err(|e| refuse(ErrorKind::BadRequest, e))?;
        let shape =
            resolve_shape(cfg, &*k, &v.shape).map_err(|e| refuse(ErrorKind::BadRequest, e))?;
        Ok((k, v.params.clone(), shape, chip))
    }

    fn bench(
        &self,
        cfg: &CrateConfig,
        v: &VariantRef,
        full: bool,
        trace: bool,
    ) -> Result<ResponseBody, Refusal> {
        let (k, params, shape, chip) = self.variant(cfg, v)?;
        let mode = if trace { ExecMode::TRACE } else { ExecMode::TIMING };
        let run = run_variant(&*k, &params, &shape, &chip, mode, None)
            .map_err(|e| ErrorInfo::from(&e))?;
        let p = run.profile;
        Ok(ResponseBody::Bench(BenchResult {
            cycles: p.neuroncore_cycle_count,
            time_us: p.total_time_us,
            kernel_time_us: p.kernel_time_us,
            tflops: p.tflops,
            bottleneck: p.bottleneck.kind.clone(),
            bottleneck_summary: p.bottleneck.summary.clone(),
            program_hash: p.program_hash.clone(),
            instruction_count: p.instruction_count,
            sbuf_bytes_per_partition: p.sbuf_peak_bytes_per_partition,
            hbm_bytes: p.hbm_read_bytes + p.hbm_write_bytes,
            hardware_flops: p.hardware_flops,
            physical_cores: (p.physical_cores > 1).then_some(p.physical_cores),
            work: k.work(&shape),
            shape,
            profile: full.then(|| profile_summary(&p)),
            trace: if trace { run.trace.map(|t| t.to_string()) } else { None },
        }))
    }
}

fn resolve_shape(
    cfg: &CrateConfig,
    kernel: &dyn Kernel,
    shape: &ShapeRef,
) -> Result<Shape, String> {
    match shape {
        ShapeRef::Dims(s) => check_shape_size(s).map(|()| s.clone()),
        ShapeRef::Named(n) => {
            let kc = cfg.kernels.get(kernel.name()).ok_or_else(|| {
                format!("kernel `{}` has no named shapes in this crate", kernel.name())
            })?;
            kc.shape(n).cloned().ok_or_else(|| {
                let names: Vec<&str> = kc.shapes.iter().map(|(n, _)| n.as_str()).collect();
                format!(
                    "kernel `{}` has no shape `{n}` (it has: {})",
                    kernel.name(),
                    names.join(", ")
                )
            })
        }
    }
}

/// `main` of a harness binary (see [`crate::harness_main!`]). Returns the process exit code.
///
/// * `--list` prints the [`ListDoc`] (pretty JSON) on stdout and exits; a configuration
///   error prints an error response instead and exits 2.
/// * `--serve` (or no argument; `cargo bench` passes `--bench`) serves the protocol.
pub fn main(reg: Registry) -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut reg = reg;
    if let Some(dir) = std::env::var_os("NEURON_TUNE_MANIFEST_DIR") {
        reg.manifest_dir = PathBuf::from(dir);
    }
    if let Some(a) = args.iter().find(|a| !matches!(a.as_str(), "--serve" | "--bench" | "--list")) {
        eprintln!("usage: {} [--list | --serve]  (unknown argument `{a}`)", reg.crate_name);
        return 2;
    }
    crate::panics::install();
    // A name registered twice is a configuration error like a bad space.
    let cfg = match reg.duplicate_name() {
        Some(what) => Err(format!(
            "{what} is registered twice in `harness_main!` of {}: names must be unique (they \
             are the --kernel/--model selectors and the keys of the TOML spaces)",
            reg.crate_name
        )),
        None => reg.config().map_err(|e| e.to_string()),
    };
    if args.iter().any(|a| a == "--list") {
        let answer = cfg.map_err(|e| refuse(ErrorKind::Config, e)).and_then(|cfg| reg.list(&cfg));
        return match answer {
            Ok(doc) => {
                println!("{}", serde_json::to_string_pretty(&doc).expect("serializes"));
                0
            }
            Err(e) => {
                eprintln!("error: {}", e.message);
                2
            }
        };
    }
    let mut chan = match ProtocolChannel::open() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot set up the protocol channel: {e}");
            return 1;
        }
    };
    // Handshake.
    let Some(first) = chan.read_request() else { return 0 };
    let hello = match first {
        Ok(Request { id, body: RequestBody::Hello { protocol } })
            if protocol == PROTOCOL_VERSION =>
        {
            Response::new(
                id,
                ResponseBody::Hello {
                    protocol: PROTOCOL_VERSION,
                    harness_version: env!("CARGO_PKG_VERSION").into(),
                },
            )
        }
        other => {
            let (id, msg) = match other {
                Ok(Request { id, body: RequestBody::Hello { protocol } }) => (
                    id,
                    format!(
                        "this harness speaks worker protocol {PROTOCOL_VERSION}, the client asked \
                         for {protocol}: rebuild the kernel crate against the neuron-tune-harness \
                         that matches your cargo-neuron-tune"
                    ),
                ),
                _ => {
                    (0, format!("the first request must be a hello of protocol {PROTOCOL_VERSION}"))
                }
            };
            chan.diagnostic(&format!("error: {msg}"));
            let _ = chan.write_response(&Response::error(id, ErrorKind::ProtocolMismatch, msg));
            return 2;
        }
    };
    if chan.write_response(&hello).is_err() {
        return 1;
    }
    // A configuration error is the answer to every request (the client prints it once);
    // printing it here as well would show the user the same error twice.
    let (cfg, why) = match cfg {
        Ok(cfg) => (Some(cfg), String::new()),
        Err(why) => (None, why),
    };
    let cfg_error = |id| Response::error(id, ErrorKind::Config, why.clone());
    let mut cases = Cases::new(Cases::LIMIT);
    while let Some(req) = chan.read_request() {
        let (resp, stop) = match req {
            Ok(Request { id, body: RequestBody::Shutdown }) => {
                (Response::new(id, ResponseBody::Shutdown), true)
            }
            Ok(req) => {
                let id = req.id;
                let resp = match &cfg {
                    Some(cfg) => chan.capturing(|| {
                        let resp = reg.handle_remembering(cfg, req, &mut cases);
                        crate::panics::end_request();
                        resp
                    }),
                    None => cfg_error(id),
                };
                (resp, false)
            }
            Err(e) => {
                (Response::error(0, ErrorKind::BadRequest, format!("not a request: {e}")), false)
            }
        };
        if chan.write_response(&resp).is_err() || stop {
            return if stop { 0 } else { 1 };
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::profile_summary;
    use neuron_sim::{Chip, Dtype, ExecMode, Nc};

    #[test]
    fn the_first_name_registered_twice_is_found() {
        assert_eq!(super::first_repeat(&["a", "b", "c"]), None);
        assert_eq!(super::first_repeat(&["a", "b", "a", "b"]).as_deref(), Some("a"));
        assert_eq!(super::first_repeat(&["a", "b", "b", "a"]).as_deref(), Some("b"));
        assert_eq!(super::first_repeat(&[]), None);
    }

    /// The summary must carry every field of the simulator's profile under the same name:
    /// serialized, the two are the same JSON.
    fn same_json(nc: &mut Nc) {
        let p = nc.profile();
        let summary = profile_summary(&p);
        assert_eq!(serde_json::to_value(&summary).unwrap(), serde_json::to_value(&p).unwrap());
    }

    #[test]
    fn the_profile_summary_is_the_profile_field_for_field() {
        // No HBM traffic: the arithmetic intensity is infinite (JSON null).
        same_json(&mut Nc::new(Chip::trn2(), ExecMode::TIMING));
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let x = nc.hbm("x", Dtype::Bf16, &[128, 512]).unwrap();
        let pool = nc.sbuf_pool("io", 2);
        let t = nc.tile(pool, Dtype::Bf16, &[128, 512]).unwrap();
        nc.dma(t, x).unwrap();
        same_json(&mut nc);
        // An affine loop adds the scheduler's summary, which must cross too.
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let x = nc.hbm("x", Dtype::Bf16, &[512, 512]).unwrap();
        let pool = nc.sbuf_pool("io", 2);
        nc.affine_range((0..512).step_by(128), |nc, r| {
            let t = nc.tile(pool, Dtype::Bf16, &[128, 512])?;
            nc.dma(t, x.rows(r..r + 128))
        })
        .unwrap();
        assert!(nc.profile().scheduling.is_some());
        same_json(&mut nc);
        // An SPMD launch adds the physical cores, which must cross too.
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let x = nc.hbm("x", Dtype::Bf16, &[256, 512]).unwrap();
        nc.spmd(2, |nc, pid| {
            let pool = nc.sbuf_pool("io", 1);
            let t = nc.tile(pool, Dtype::Bf16, &[128, 512])?;
            nc.dma(t, x.rows(pid as u64 * 128..(pid as u64 + 1) * 128))
        })
        .unwrap();
        assert_eq!(profile_summary(&nc.profile()).physical_cores, Some(2));
        same_json(&mut nc);
    }
}
