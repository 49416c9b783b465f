//! `neuron-tune-protocol`: what `cargo neuron-tune` and a kernel crate's harness binary say
//! to each other. Types only (serde), so the tool depends on the protocol and never on the
//! harness's internals, and both sides are checked by one compiler.
//!
//! The transport: the tool starts `HARNESS --serve` and writes [`Request`]s, one JSON object
//! per line, to its stdin; the worker answers each with one [`Response`] line on its
//! stdout. Before serving, the worker moves its own stdout and stderr to a capture file, so
//! whatever kernel code prints (a `println!` in a body, a reference, a validity rule)
//! never enters the protocol stream; it comes back in [`Response::output`] of the request
//! during which it was printed. The first exchange is a handshake
//! ([`RequestBody::Hello`]); a version mismatch is refused by both sides.
//!
//! ```text
//! > {"id":0,"type":"hello","protocol":2}
//! < {"id":0,"type":"hello","protocol":2,"harness_version":"0.1.0"}
//! > {"id":7,"type":"bench","kernel":"rmsnorm","params":{"bufs":2},"shape":"small","chip":{"name":"trn2"}}
//! < {"id":7,"output":"hello from the body\n","type":"bench","cycles":123456,"time_us":102.9,...}
//! ```

pub mod messages;
pub mod params;
pub mod results;
pub mod space;

pub use messages::*;
pub use params::{ParamError, ParamKind, ParamSpec, ParamValue, Params, Shape};
pub use results::*;
pub use space::Space;
