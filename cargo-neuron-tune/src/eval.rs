//! Evaluating variants: trace → store → simulate, streaming.
//!
//! [`bench_stream`] keeps a bounded window of requests in flight on a crate's pool: each
//! variant is traced first (program hash only, cheap); a program whose result is in the
//! store is answered from it, any other is simulated and its result stored the moment it
//! arrives, so an interrupted run keeps everything already measured. Outcomes are handed
//! to the caller as they complete, so events stream. It never decides correctness: check
//! results come from the harness.

use crate::exit::{fail, Exit, Failure};
use crate::output::{show_output, Reporter};
use crate::select::Variant;
use crate::store::Store;
use crate::worker::{Done, Pool};
use neuron_tune_protocol::{
    BenchResult, ChipSpec, ErrorInfo, ErrorKind, RequestBody, ResponseBody, ShapeRef, TraceResult,
    VariantRef,
};
use std::collections::HashMap;

/// One variant's outcome.
#[derive(Debug)]
pub struct Outcome {
    /// Position of the variant in the order it was drawn.
    pub index: usize,
    pub variant: Variant,
    pub result: Result<Measured, ErrorInfo>,
}

/// A bench result and whether it came from the store.
#[derive(Clone, Debug)]
pub struct Measured {
    pub bench: BenchResult,
    pub cached: bool,
}

/// The request for one variant.
pub fn variant_ref(v: &Variant, chip: &ChipSpec) -> VariantRef {
    VariantRef {
        kernel: v.kernel.clone(),
        params: v.params.clone(),
        shape: ShapeRef::Dims(v.shape.clone()),
        chip: chip.clone(),
    }
}

/// The text a chip is keyed by in the store (its TOML when it came from a file).
pub fn chip_key(chip: &ChipSpec) -> String {
    chip.toml.clone().unwrap_or_else(|| chip.name.clone())
}

enum Stage {
    Trace,
    Bench { key: String },
}

/// A worker that broke the protocol: stop the command (exit 1), naming the worker.
pub fn protocol_failure(e: &ErrorInfo) -> Option<Failure> {
    matches!(e.kind, ErrorKind::Protocol | ErrorKind::ProtocolMismatch)
        .then(|| fail(Exit::Internal, format!("protocol error: {}", e.message)))
}

/// Bench `variants` on `pool`, calling `done` with each outcome as it completes.
pub fn bench_stream(
    pool: &mut Pool,
    variants: impl Iterator<Item = Variant>,
    chip: &ChipSpec,
    store: &Store,
    force: bool,
    out: &Reporter,
    done: &mut dyn FnMut(Outcome),
) -> Result<(), Failure> {
    let window = pool.jobs() * 2;
    let chip_text = chip_key(chip);
    let mut variants = variants.enumerate();
    let mut in_flight: HashMap<u64, (usize, Variant, Stage)> = HashMap::new();
    loop {
        while in_flight.len() < window {
            let Some((i, v)) = variants.next() else { break };
            let id = pool.submit(RequestBody::Trace(variant_ref(&v, chip)));
            in_flight.insert(id, (i, v, Stage::Trace));
        }
        let Some(Done { id, answer, output }) = pool.recv() else { break };
        let (index, variant, stage) = in_flight.remove(&id).expect("a request of ours");
        show_output(out, &variant.kernel, &variant.shape_name, &variant.params, &output);
        let result = match (stage, answer) {
            (_, Err(e)) => {
                if let Some(f) = protocol_failure(&e) {
                    return Err(f);
                }
                Err(e)
            }
            (Stage::Trace, Ok(ResponseBody::Trace(t))) => {
                let key = Store::key(&t.program_hash, &chip_text, "bench");
                match store.get::<BenchResult>("bench", &key).filter(|_| !force) {
                    Some(bench) => Ok(Measured { bench, cached: true }),
                    None => {
                        let id = pool.submit(RequestBody::Bench(variant_ref(&variant, chip)));
                        in_flight.insert(id, (index, variant, Stage::Bench { key }));
                        continue;
                    }
                }
            }
            (Stage::Bench { key }, Ok(ResponseBody::Bench(bench))) => {
                store.put("bench", &key, &bench).map_err(|e| {
                    fail(
                        Exit::Internal,
                        format!("writing the store ({}): {e:#}", store.root().display()),
                    )
                })?;
                Ok(Measured { bench, cached: false })
            }
            (_, Ok(other)) => {
                return Err(fail(Exit::Internal, format!("unexpected answer {other:?}")));
            }
        };
        done(Outcome { index, variant, result });
    }
    Ok(())
}

/// Trace `variants` (no simulation), outcomes as they complete.
pub fn trace_stream(
    pool: &mut Pool,
    variants: impl Iterator<Item = Variant>,
    chip: &ChipSpec,
    out: &Reporter,
    done: &mut dyn FnMut(usize, Variant, Result<TraceResult, ErrorInfo>),
) -> Result<(), Failure> {
    let window = pool.jobs() * 2;
    let mut variants = variants.enumerate();
    let mut in_flight: HashMap<u64, (usize, Variant)> = HashMap::new();
    loop {
        while in_flight.len() < window {
            let Some((i, v)) = variants.next() else { break };
            let id = pool.submit(RequestBody::Trace(variant_ref(&v, chip)));
            in_flight.insert(id, (i, v));
        }
        let Some(Done { id, answer, output }) = pool.recv() else { break };
        let (index, variant) = in_flight.remove(&id).expect("a request of ours");
        show_output(out, &variant.kernel, &variant.shape_name, &variant.params, &output);
        let result = match answer {
            Ok(ResponseBody::Trace(t)) => Ok(t),
            Ok(other) => return Err(fail(Exit::Internal, format!("unexpected answer {other:?}"))),
            Err(e) => {
                if let Some(f) = protocol_failure(&e) {
                    return Err(f);
                }
                Err(e)
            }
        };
        done(index, variant, result);
    }
    Ok(())
}
