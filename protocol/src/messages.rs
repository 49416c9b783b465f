//! The messages: requests from the tool, responses from a worker.
//!
//! Every request carries an id and every response repeats it; a response with another id
//! is a protocol error, never an answer to a different question. Results are typed per
//! request ([`ResponseBody`]); errors carry an [`ErrorKind`], never a string to match.

use crate::params::{Params, Shape};
use crate::results::{
    BenchResult, CheckReport, ListDoc, ModelPlan, ModelResult, TraceResult, Tuned,
};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// Bumped on any incompatible change of these messages. A field added as optional (a serde
/// default when absent, not written when empty) is not one: neither side refuses an object
/// with a key it does not know, so each reads the other's messages and the field is simply
/// missing from an older side's (`CheckFailure`'s `rule`, `instruction` and `location`).
///
/// History: 1 — JSON lines on the worker's stdout, shared with what kernel code printed;
/// 2 — requests and responses carry ids, typed results and errors, the captured output of
/// kernel code travels inside the response; 3 — `model_plan` (a model's distinct kernel
/// calls, which the tool simulates and caches as variants), and kernels a crate's models
/// use are served by its harness even when the crate does not list them; 4 — `list` says
/// which simulator version the harness links (`sim_version`), so results are keyed and
/// compared by the version that produced them; 5 — `validate` names the chip (validity
/// rules read its SBUF and PSUM sizes); 6 — `check_at` (a variant's correctness at given
/// full-size shapes, how `tune --goal` validates a round's winner on its key set); 7 — a
/// kernel's Rust crate (`crate`, [`VariantRef`], `TunedEntry`, `PlannedCall`, `KernelTime`):
/// a model may call two kernels of one name from two crates, and a variant, a tuned entry
/// and a planned call say which (a harness of 6 would run the first of the name).
pub const PROTOCOL_VERSION: u32 = 7;

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
}

/// A shape by name (one of the kernel's) or given in full.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ShapeRef {
    Named(String),
    Dims(Shape),
}

/// One variant: kernel × parameters × shape × chip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VariantRef {
    pub kernel: String,
    /// The Rust crate that defines the kernel (`Kernel::rust_crate`), when the name alone
    /// may not tell: a model's call of another crate's kernel. Absent: the kernel of that
    /// name the harness lists, else the one its models call (refused when they call two).
    #[serde(rename = "crate", default, skip_serializing_if = "Option::is_none")]
    pub krate: Option<String>,
    pub params: Params,
    pub shape: ShapeRef,
    pub chip: ChipSpec,
}

/// A request: its id and what is asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    #[serde(flatten)]
    pub body: RequestBody,
}

/// What a request asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RequestBody {
    /// The first request of a session: the client's protocol version.
    Hello { protocol: u32 },
    /// Kernels, parameters, spaces, shapes and models ([`ListDoc`]).
    List,
    /// Which of these configurations the kernel's validity rule accepts for a shape on a
    /// chip (SBUF and PSUM sizes differ between chips).
    Validate { kernel: String, shape: ShapeRef, configs: Vec<Params>, chip: ChipSpec },
    /// Trace a variant without simulating: program hash and footprint.
    Trace(VariantRef),
    /// Property-based correctness check over the kernel's small shapes.
    Check {
        kernel: String,
        params: Params,
        cases: u32,
        seed: u64,
        chip: ChipSpec,
        /// Where failing cases are persisted and replayed from.
        #[serde(default)]
        regressions: Option<PathBuf>,
    },
    /// Correctness of one variant at each of these shapes, one seeded case each (normal
    /// values): how `tune --goal` validates a round's winner on every shape of its key set.
    /// Answered with `Check`; a failure names its shape.
    CheckAt { kernel: String, params: Params, shapes: Vec<Shape>, seed: u64, chip: ChipSpec },
    /// Timing run.
    Bench(VariantRef),
    /// Timing run with the full profile (and the Perfetto trace when `trace`).
    Profile {
        #[serde(flatten)]
        variant: VariantRef,
        trace: bool,
    },
    /// End-to-end model evaluation.
    Model {
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
    /// A model's distinct kernel calls at a shape, with the parameters each would use
    /// (tuned or default), without simulating anything.
    ModelPlan {
        model: String,
        shape: ShapeRef,
        chip: ChipSpec,
        #[serde(default)]
        tuned: Tuned,
    },
    /// End the session.
    Shutdown,
}

/// A response: the id of its request, what kernel code printed while answering it, and the
/// answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: u64,
    /// stdout and stderr of kernel code during this request (trimmed), never mixed into the
    /// protocol stream.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    #[serde(flatten)]
    pub body: ResponseBody,
}

/// An answer. (One is built per request and serialized at once, so the size of its
/// largest variant costs nothing worth a box.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResponseBody {
    Hello {
        protocol: u32,
        harness_version: String,
    },
    List(ListDoc),
    /// Per configuration: `None` when valid, else why not.
    Validate {
        verdicts: Vec<Option<String>>,
    },
    Trace(TraceResult),
    Check(CheckReport),
    Bench(BenchResult),
    Model(ModelResult),
    ModelPlan(ModelPlan),
    Shutdown,
    Error(ErrorInfo),
}

/// Why a request has no result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub kind: ErrorKind,
    pub message: String,
}

impl fmt::Display for ErrorInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// The kinds of failure, on either side of the protocol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The two sides speak different protocol versions.
    ProtocolMismatch,
    /// The crate's configuration (TOML spaces, shapes) is wrong.
    Config,
    /// A malformed or impossible request (unknown shape, bad chip).
    BadRequest,
    UnknownKernel,
    UnknownModel,
    /// The parameters break the kernel's validity rule (or its parameter declarations).
    Invalid,
    /// The program broke a hardware rule; `violation` names which (e.g. `sbuf_overflow`).
    SimViolation {
        violation: String,
    },
    /// Kernel code panicked.
    Panic,
    /// The worker did not answer within the timeout (client side).
    Timeout,
    /// The worker process died (client side).
    Crashed,
    /// The worker answered something that is not the protocol (client side).
    Protocol,
    /// The worker process could not be started (client side): the harness binary is gone
    /// or not executable. Not the kernel's doing: the command stops.
    Unstartable,
}

impl ErrorKind {
    /// The variant itself is not runnable (its rule or a hardware rule): a search skips
    /// it; it is not a failure of the tool or of the kernel code.
    pub fn is_invalid_variant(&self) -> bool {
        matches!(self, ErrorKind::Invalid | ErrorKind::SimViolation { .. })
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            ErrorKind::ProtocolMismatch => "protocol mismatch",
            ErrorKind::Config => "configuration error",
            ErrorKind::BadRequest => "bad request",
            ErrorKind::UnknownKernel => "unknown kernel",
            ErrorKind::UnknownModel => "unknown model",
            ErrorKind::Invalid => "invalid",
            ErrorKind::SimViolation { violation } => {
                return write!(f, "hardware rule ({violation})")
            }
            ErrorKind::Panic => "panic",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Crashed => "crashed",
            ErrorKind::Protocol => "protocol error",
            ErrorKind::Unstartable => "cannot start",
        };
        f.write_str(s)
    }
}

impl Response {
    pub fn new(id: u64, body: ResponseBody) -> Response {
        Response { id, output: String::new(), body }
    }

    pub fn error(id: u64, kind: ErrorKind, message: impl Into<String>) -> Response {
        Response::new(id, ResponseBody::Error(ErrorInfo { kind, message: message.into() }))
    }
}

/// The handshake's check of the worker's answer: its harness version, or why not.
pub fn check_hello(r: &Response) -> Result<String, String> {
    match &r.body {
        ResponseBody::Hello { protocol, harness_version } if *protocol == PROTOCOL_VERSION => {
            Ok(harness_version.clone())
        }
        ResponseBody::Hello { protocol, .. } => Err(format!(
            "the harness speaks worker protocol {protocol}, this cargo-neuron-tune speaks \
             {PROTOCOL_VERSION}: update neuron-tune-harness in the kernel crate (or this tool) \
             so they match"
        )),
        ResponseBody::Error(e) => Err(e.message.clone()),
        other => Err(format!("unexpected handshake answer: {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(r: &Request) -> Request {
        serde_json::from_str(&serde_json::to_string(r).unwrap()).unwrap()
    }

    #[test]
    fn requests_round_trip_with_their_ids() {
        let v = VariantRef {
            kernel: "gemm".into(),
            krate: None,
            params: Params::new().with("bufs", 2).with("order", "mn"),
            shape: ShapeRef::Named("small".into()),
            chip: ChipSpec::builtin("trn2"),
        };
        for body in [
            RequestBody::Hello { protocol: PROTOCOL_VERSION },
            RequestBody::List,
            RequestBody::Bench(v.clone()),
            RequestBody::Profile { variant: v.clone(), trace: true },
            RequestBody::Shutdown,
        ] {
            let r = Request { id: 41, body };
            assert_eq!(round_trip(&r), r);
        }
        let line = serde_json::to_string(&Request { id: 7, body: RequestBody::Bench(v) }).unwrap();
        assert!(line.starts_with(r#"{"id":7,"type":"bench","kernel":"gemm""#), "{line}");
    }

    #[test]
    fn errors_are_typed_and_round_trip() {
        let r = Response::error(
            3,
            ErrorKind::SimViolation { violation: "sbuf_overflow".into() },
            "SBUF over capacity",
        );
        let text = serde_json::to_string(&r).unwrap();
        let back: Response = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        let ResponseBody::Error(e) = back.body else { panic!("{text}") };
        assert!(e.kind.is_invalid_variant());
        assert_eq!(e.to_string(), "hardware rule (sbuf_overflow): SBUF over capacity");
        assert!(!ErrorKind::Panic.is_invalid_variant());
    }

    #[test]
    fn a_hello_of_another_version_is_refused_with_both_versions() {
        let r =
            Response::new(0, ResponseBody::Hello { protocol: 1, harness_version: "0.0.1".into() });
        let e = check_hello(&r).unwrap_err();
        assert!(e.contains("protocol 1") && e.contains(&PROTOCOL_VERSION.to_string()), "{e}");
    }
}
