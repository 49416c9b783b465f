//! The worker protocol: how `cargo neuron-tune` talks to a crate's harness binary.
//!
//! * `HARNESS --list` prints one JSON document ([`ListDoc`]) and exits: protocol version,
//!   kernels with parameters, spaces, shapes and defaults, models. A bad TOML configuration
//!   prints an [`Response::Error`] of kind `config` instead and exits 2.
//! * `HARNESS --serve` reads requests, one JSON object per line on stdin, and answers each
//!   with one JSON line on stdout, in order. The first exchange is a handshake: the client
//!   sends `{"type":"hello","protocol":N}`; the worker answers `hello` with its version, or
//!   an error of kind `protocol_mismatch` and exits 2. stdout carries nothing else;
//!   diagnostics go to stderr.
//!
//! Example session:
//!
//! ```text
//! > {"type":"hello","protocol":1}
//! < {"type":"hello","protocol":1,"harness_version":"0.1.0"}
//! > {"type":"bench","id":7,"kernel":"rmsnorm","params":{"bufs":2},"shape":"small","chip":{"name":"trn2"}}
//! < {"type":"result","id":7,"result":{"cycles":123456,"time_us":102.9,...}}
//! ```

use crate::check::CheckReport;
use crate::kernel::{RunError, Work};
use crate::model::Tuned;
use crate::params::{ParamSpec, ParamValue, Params, Shape};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Bumped on any incompatible change of the messages below.
pub const PROTOCOL_VERSION: u32 = 1;

/// A chip: a built-in name, or the text of a chip TOML (then `name` is for display).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChipSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toml: Option<String>,
}

impl ChipSpec {
    pub fn builtin(name: &str) -> ChipSpec {
        ChipSpec { name: name.into(), toml: None }
    }

    pub fn resolve(&self) -> Result<neuron_sim::Chip, String> {
        match &self.toml {
            Some(t) => {
                neuron_sim::Chip::from_toml(t).map_err(|e| format!("chip `{}`: {e}", self.name))
            }
            None => neuron_sim::Chip::builtin(&self.name).ok_or_else(|| {
                format!(
                    "unknown chip `{}` (built in: {})",
                    self.name,
                    neuron_sim::Chip::BUILTIN.join(", ")
                )
            }),
        }
    }
}

/// A shape by name (one of the kernel's) or given in full.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ShapeRef {
    Named(String),
    Dims(Shape),
}

/// A request from the tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Hello {
        protocol: u32,
    },
    /// Trace a variant without simulating: program hash and footprint.
    Trace {
        id: u64,
        kernel: String,
        params: Params,
        shape: ShapeRef,
        chip: ChipSpec,
    },
    /// Property-based correctness check.
    Check {
        id: u64,
        kernel: String,
        params: Params,
        cases: u32,
        seed: u64,
        chip: ChipSpec,
        #[serde(default)]
        regressions: Option<PathBuf>,
    },
    /// Timing run.
    Bench {
        id: u64,
        kernel: String,
        params: Params,
        shape: ShapeRef,
        chip: ChipSpec,
    },
    /// Timing run with the full profile (and a Perfetto trace if asked).
    Profile {
        id: u64,
        kernel: String,
        params: Params,
        shape: ShapeRef,
        chip: ChipSpec,
        trace: bool,
    },
    /// End-to-end model evaluation.
    Model {
        id: u64,
        model: String,
        shape: ShapeRef,
        chip: ChipSpec,
        #[serde(default)]
        tuned: Tuned,
        /// Compare with the CPU reference too (small shapes only).
        #[serde(default)]
        functional: bool,
        #[serde(default)]
        seed: u64,
    },
    Shutdown,
}

/// A response from the worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    Hello {
        protocol: u32,
        harness_version: String,
    },
    Result {
        id: u64,
        result: serde_json::Value,
    },
    Error {
        #[serde(default)]
        id: Option<u64>,
        /// `protocol_mismatch`, `config`, `bad_request`, `unknown_kernel`, `invalid`
        /// (the variant breaks its validity rule or a hardware rule), `panic`.
        kind: String,
        message: String,
    },
}

impl Response {
    pub fn error(id: Option<u64>, kind: &str, message: impl Into<String>) -> Response {
        Response::Error { id, kind: kind.into(), message: message.into() }
    }

    pub fn from_run_error(id: u64, e: &RunError) -> Response {
        let kind = match e {
            RunError::Invalid(_) | RunError::Sim(_) => "invalid",
            RunError::Panic(_) => "panic",
        };
        Response::error(Some(id), kind, e.to_string())
    }
}

/// Result of `trace`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceResult {
    pub program_hash: String,
    pub instruction_count: u64,
    pub sbuf_bytes_per_partition: u64,
    pub psum_banks: u64,
    pub shape: Shape,
}

/// Result of `bench` (and, with the profile, of `profile`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// End to end at the chip's profiler base clock (includes launch overhead).
    pub cycles: u64,
    pub time_us: f64,
    pub kernel_time_us: f64,
    pub tflops: f64,
    pub bottleneck: String,
    pub bottleneck_summary: String,
    pub program_hash: String,
    pub instruction_count: u64,
    pub shape: Shape,
    pub work: Work,
    /// The full `neuron_sim::Profile` (`profile` requests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<serde_json::Value>,
    /// The Perfetto trace (`profile` with `trace: true` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<serde_json::Value>,
}

/// Result of `check`.
pub type CheckResult = CheckReport;

/// A kernel as `--list` describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelInfo {
    pub name: String,
    pub doc: String,
    pub params: Vec<ParamSpec>,
    pub space: BTreeMap<String, Vec<ParamValue>>,
    pub defaults: Params,
    pub shapes: Vec<(String, Shape)>,
    /// Valid variants of the space per shape name.
    pub valid_variants: BTreeMap<String, usize>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub name: String,
    pub doc: String,
    pub shapes: Vec<(String, Shape)>,
}

/// The `--list` document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListDoc {
    pub protocol: u32,
    pub harness_version: String,
    pub crate_name: String,
    pub kernels: Vec<KernelInfo>,
    pub models: Vec<ModelInfo>,
}

/// Client side of the handshake: the request to send.
pub fn hello() -> String {
    serde_json::to_string(&Request::Hello { protocol: PROTOCOL_VERSION }).expect("serializes")
}

/// Client side of the handshake: check the worker's answer.
pub fn check_hello(line: &str) -> Result<String, String> {
    match serde_json::from_str::<Response>(line) {
        Ok(Response::Hello { protocol, harness_version }) if protocol == PROTOCOL_VERSION => Ok(harness_version),
        Ok(Response::Hello { protocol, .. }) => Err(format!(
            "the harness speaks worker protocol {protocol}, this cargo-neuron-tune speaks {PROTOCOL_VERSION}: \
             update neuron-tune-harness in the kernel crate (or this tool) so they match"
        )),
        Ok(Response::Error { message, .. }) => Err(message),
        Ok(other) => Err(format!("unexpected handshake answer: {other:?}")),
        Err(e) => Err(format!("the harness did not answer the handshake with protocol JSON ({e}): {line:?}")),
    }
}
