//! The harness binary's `main`: `--list` and the `--serve` loop of the worker protocol.

use crate::check::{check, CheckConfig};
use crate::kernel::{run_variant, Kernel};
use crate::model::{evaluate_functional, evaluate_timing, Model};
use crate::params::{Params, Shape};
use crate::protocol::*;
use crate::space::{load_crate_config, CrateConfig};
use neuron_sim::ExecMode;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// What a harness binary serves.
pub struct Registry {
    pub crate_name: String,
    pub manifest_dir: PathBuf,
    pub kernels: Vec<Arc<dyn Kernel>>,
    pub models: Vec<Arc<dyn Model>>,
}

impl Registry {
    pub fn kernel(&self, name: &str) -> Option<&Arc<dyn Kernel>> {
        self.kernels.iter().find(|k| k.name() == name)
    }

    /// The crate's configuration (TOML spaces and shapes).
    pub fn config(&self) -> Result<CrateConfig, crate::space::SpaceError> {
        let ks: Vec<&dyn Kernel> = self.kernels.iter().map(|k| &**k).collect();
        load_crate_config(&self.manifest_dir, &ks)
    }

    pub fn list(&self, cfg: &CrateConfig) -> ListDoc {
        let kernels = self
            .kernels
            .iter()
            .map(|k| {
                let kc = &cfg.kernels[k.name()];
                KernelInfo {
                    name: k.name().to_string(),
                    doc: k.doc().to_string(),
                    params: k.params(),
                    space: kc.space.clone(),
                    defaults: kc.defaults.clone(),
                    shapes: kc.shapes.clone(),
                    valid_variants: kc
                        .shapes
                        .iter()
                        .map(|(n, s)| (n.clone(), kc.valid_variants(&**k, s).len()))
                        .collect(),
                }
            })
            .collect();
        let models = self
            .models
            .iter()
            .map(|m| ModelInfo {
                name: m.name().to_string(),
                doc: m.doc().to_string(),
                shapes: m.shapes(),
            })
            .collect();
        ListDoc {
            protocol: PROTOCOL_VERSION,
            harness_version: env!("CARGO_PKG_VERSION").to_string(),
            crate_name: self.crate_name.clone(),
            kernels,
            models,
        }
    }
}

fn resolve_shape(
    cfg: &CrateConfig,
    kernel: &dyn Kernel,
    shape: &ShapeRef,
) -> Result<Shape, String> {
    match shape {
        ShapeRef::Dims(s) => Ok(s.clone()),
        ShapeRef::Named(n) => cfg.kernels[kernel.name()].shape(n).cloned().ok_or_else(|| {
            let names: Vec<&str> =
                cfg.kernels[kernel.name()].shapes.iter().map(|(n, _)| n.as_str()).collect();
            format!("kernel `{}` has no shape `{n}` (it has: {})", kernel.name(), names.join(", "))
        }),
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("protocol types serialize")
}

/// Answer one request.
pub fn handle(reg: &Registry, cfg: &CrateConfig, req: Request) -> Response {
    let kernel_of = |id: u64, name: &str| {
        reg.kernel(name).cloned().ok_or_else(|| {
            let names: Vec<&str> = reg.kernels.iter().map(|k| k.name()).collect();
            Response::error(
                Some(id),
                "unknown_kernel",
                format!("no kernel `{name}` in {} (it has: {})", reg.crate_name, names.join(", ")),
            )
        })
    };
    let chip_of = |id: u64, c: &ChipSpec| {
        c.resolve().map_err(|e| Response::error(Some(id), "bad_request", e))
    };
    let result = (|| -> Result<Response, Response> {
        match req {
            Request::Hello { .. } => {
                Ok(Response::error(None, "bad_request", "hello was already exchanged"))
            }
            Request::Shutdown => Ok(Response::Result { id: 0, result: serde_json::Value::Null }),
            Request::Trace { id, kernel, params, shape, chip } => {
                let k = kernel_of(id, &kernel)?;
                let chip = chip_of(id, &chip)?;
                let shape = resolve_shape(cfg, &*k, &shape)
                    .map_err(|e| Response::error(Some(id), "bad_request", e))?;
                let mode = ExecMode { functional: false, timing: false, trace: false };
                let run = run_variant(&*k, &params, &shape, &chip, mode, None)
                    .map_err(|e| Response::from_run_error(id, &e))?;
                let p = run.profile;
                Ok(Response::Result {
                    id,
                    result: to_value(&TraceResult {
                        program_hash: p.program_hash,
                        instruction_count: p.instruction_count,
                        sbuf_bytes_per_partition: p.sbuf_peak_bytes_per_partition,
                        psum_banks: p.psum_peak_banks,
                        shape,
                    }),
                })
            }
            Request::Check { id, kernel, params, cases, seed, chip, regressions } => {
                let k = kernel_of(id, &kernel)?;
                let chip = chip_of(id, &chip)?;
                let report = check(&*k, &params, &CheckConfig { cases, seed, chip, regressions })
                    .map_err(|e| Response::from_run_error(id, &e))?;
                Ok(Response::Result { id, result: to_value(&report) })
            }
            Request::Bench { id, kernel, params, shape, chip } => {
                bench(reg, cfg, id, &kernel, &params, &shape, &chip, false, false)
            }
            Request::Profile { id, kernel, params, shape, chip, trace } => {
                bench(reg, cfg, id, &kernel, &params, &shape, &chip, true, trace)
            }
            Request::Model { id, model, shape, chip, tuned, functional, seed } => {
                let m = reg.models.iter().find(|m| m.name() == model).ok_or_else(|| {
                    Response::error(
                        Some(id),
                        "unknown_kernel",
                        format!("no model `{model}` in {}", reg.crate_name),
                    )
                })?;
                let chip = chip_of(id, &chip)?;
                let shape = match shape {
                    ShapeRef::Dims(s) => s,
                    ShapeRef::Named(n) => {
                        m.shapes().into_iter().find(|(sn, _)| *sn == n).map(|(_, s)| s).ok_or_else(
                            || {
                                Response::error(
                                    Some(id),
                                    "bad_request",
                                    format!("model `{model}` has no shape `{n}`"),
                                )
                            },
                        )?
                    }
                };
                let defaults: BTreeMap<String, Params> =
                    cfg.kernels.iter().map(|(k, c)| (k.clone(), c.defaults.clone())).collect();
                let timing = evaluate_timing(&**m, &shape, &chip, &tuned, &defaults)
                    .map_err(|e| Response::from_run_error(id, &e))?;
                let check = if functional {
                    Some(
                        evaluate_functional(&**m, &shape, &chip, &tuned, &defaults, seed)
                            .map_err(|e| Response::from_run_error(id, &e))?,
                    )
                } else {
                    None
                };
                Ok(Response::Result {
                    id,
                    result: serde_json::json!({ "timing": timing, "check": check }),
                })
            }
        }
    })();
    result.unwrap_or_else(|e| e)
}

#[allow(clippy::too_many_arguments)]
fn bench(
    reg: &Registry,
    cfg: &CrateConfig,
    id: u64,
    kernel: &str,
    params: &Params,
    shape: &ShapeRef,
    chip: &ChipSpec,
    full: bool,
    trace: bool,
) -> Result<Response, Response> {
    let k = reg.kernel(kernel).cloned().ok_or_else(|| {
        Response::error(Some(id), "unknown_kernel", format!("no kernel `{kernel}`"))
    })?;
    let chip = chip.resolve().map_err(|e| Response::error(Some(id), "bad_request", e))?;
    let shape =
        resolve_shape(cfg, &*k, shape).map_err(|e| Response::error(Some(id), "bad_request", e))?;
    let mode = if trace { ExecMode::TRACE } else { ExecMode::TIMING };
    let run = run_variant(&*k, params, &shape, &chip, mode, None)
        .map_err(|e| Response::from_run_error(id, &e))?;
    let p = run.profile;
    let result = BenchResult {
        cycles: p.neuroncore_cycle_count,
        time_us: p.total_time_us,
        kernel_time_us: p.kernel_time_us,
        tflops: p.tflops,
        bottleneck: p.bottleneck.kind.clone(),
        bottleneck_summary: p.bottleneck.summary.clone(),
        program_hash: p.program_hash.clone(),
        instruction_count: p.instruction_count,
        work: k.work(&shape),
        shape,
        profile: full.then(|| to_value(&p)),
        trace: if trace { run.trace } else { None },
    };
    Ok(Response::Result { id, result: to_value(&result) })
}

fn write_line(out: &mut impl Write, r: &Response) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, r)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// `main` of a harness binary (see [`crate::harness_main!`]). Returns the process exit code.
pub fn main(reg: Registry) -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut reg = reg;
    if let Some(dir) = std::env::var_os("NEURON_TUNE_MANIFEST_DIR") {
        reg.manifest_dir = PathBuf::from(dir);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let cfg = match reg.config() {
        Ok(c) => c,
        Err(e) => {
            let _ = write_line(&mut out, &Response::error(None, "config", e.to_string()));
            eprintln!("error: {e}");
            return 2;
        }
    };
    // `cargo bench` passes `--bench`; a bare run serves.
    if args.iter().any(|a| a == "--list") {
        let doc = reg.list(&cfg);
        let _ = serde_json::to_writer_pretty(&mut out, &doc);
        let _ = out.write_all(b"\n");
        return 0;
    }
    if let Some(a) = args.iter().find(|a| !matches!(a.as_str(), "--serve" | "--bench")) {
        eprintln!("usage: {} [--list | --serve]  (unknown argument `{a}`)", reg.crate_name);
        return 2;
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    // Handshake.
    match lines.next() {
        Some(Ok(line)) => match serde_json::from_str::<Request>(&line) {
            Ok(Request::Hello { protocol }) if protocol == PROTOCOL_VERSION => {
                let hello = Response::Hello {
                    protocol: PROTOCOL_VERSION,
                    harness_version: env!("CARGO_PKG_VERSION").into(),
                };
                if write_line(&mut out, &hello).is_err() {
                    return 1;
                }
            }
            Ok(Request::Hello { protocol }) => {
                let msg = format!(
                    "this harness speaks worker protocol {PROTOCOL_VERSION}, the client asked for {protocol}: \
                     rebuild the kernel crate against the neuron-tune-harness that matches your cargo-neuron-tune"
                );
                eprintln!("error: {msg}");
                let _ = write_line(&mut out, &Response::error(None, "protocol_mismatch", msg));
                return 2;
            }
            _ => {
                let msg =
                    "the first request must be {\"type\":\"hello\",\"protocol\":N}".to_string();
                eprintln!("error: {msg}");
                let _ = write_line(&mut out, &Response::error(None, "protocol_mismatch", msg));
                return 2;
            }
        },
        _ => return 0,
    }
    for line in lines {
        let Ok(line) = line else { return 1 };
        if line.trim().is_empty() {
            continue;
        }
        let resp = match serde_json::from_str::<Request>(&line) {
            Ok(Request::Shutdown) => return 0,
            Ok(req) => handle(&reg, &cfg, req),
            Err(e) => Response::error(None, "bad_request", format!("not a request: {e}")),
        };
        if write_line(&mut out, &resp).is_err() {
            return 1;
        }
    }
    0
}
