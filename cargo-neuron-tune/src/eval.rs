//! Evaluating variants: trace → store → simulate, streaming.
//!
//! [`stream`] keeps a bounded window of requests in flight on a crate's pool and hands each
//! answer to the caller as it completes (the caller may follow it with another request).
//! [`bench_stream`] uses it so that each
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
    BenchResult, ChipSpec, ErrorInfo, RequestBody, ResponseBody, ShapeRef, TraceResult, VariantRef,
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
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Measured {
    pub bench: BenchResult,
    pub cached: bool,
}

/// The request for one variant.
pub fn variant_ref(v: &Variant, chip: &ChipSpec) -> VariantRef {
    VariantRef {
        kernel: v.kernel.clone(),
        krate: v.krate.clone(),
        params: v.params.clone(),
        shape: ShapeRef::Dims(v.shape.clone()),
        chip: chip.clone(),
    }
}

/// The text a chip is keyed by in the store (its TOML when it came from a file).
pub fn chip_key(chip: &ChipSpec) -> String {
    chip.toml.clone().unwrap_or_else(|| chip.name.clone())
}

/// An answer of a kind the request does not have: the worker is not to be trusted.
pub fn unexpected(answer: &ResponseBody) -> Failure {
    fail(Exit::Internal, format!("protocol error: unexpected answer {answer:?}"))
}

/// What to do after an answer: nothing more for this item, or another request for it.
pub enum Next<T> {
    Done,
    Then(RequestBody, T),
}

/// Submit `first(item)` for every item, at most two per job slot in flight, and call
/// `answered` with each item and its answer as they complete.
pub fn stream<T>(
    pool: &mut Pool,
    items: impl Iterator<Item = T>,
    first: impl Fn(&T) -> RequestBody,
    answered: impl FnMut(T, Done) -> Result<Next<T>, Failure>,
) -> Result<(), Failure> {
    stream_on(pool, items, |item| (first(item), None), answered)
}

/// [`stream`], each item's first request given to the job slot `first` names, if it names
/// one ([`Pool::submit_to`]).
pub fn stream_on<T>(
    pool: &mut Pool,
    items: impl Iterator<Item = T>,
    first: impl Fn(&T) -> (RequestBody, Option<usize>),
    mut answered: impl FnMut(T, Done) -> Result<Next<T>, Failure>,
) -> Result<(), Failure> {
    let window = pool.jobs() * 2;
    let mut items = items;
    let mut in_flight: HashMap<u64, T> = HashMap::new();
    loop {
        while in_flight.len() < window {
            let Some(item) = items.next() else { break };
            let id = match first(&item) {
                (body, Some(slot)) => pool.submit_to(body, slot),
                (body, None) => pool.submit(body),
            };
            in_flight.insert(id, item);
        }
        let Some(done) = pool.recv()? else { return Ok(()) };
        let item = in_flight.remove(&done.id).expect("a request of ours");
        if let Next::Then(body, item) = answered(item, done)? {
            in_flight.insert(pool.submit(body), item);
        }
    }
}

/// Bench `variants` on `pool`, calling `done` with each outcome as it completes. Results
/// are stored and looked up under `sim_version`, the simulator version the pool's harness
/// links (its `list`), so a result is only ever served to the simulator that produced it.
#[allow(clippy::too_many_arguments)]
pub fn bench_stream(
    pool: &mut Pool,
    sim_version: &str,
    variants: impl Iterator<Item = Variant>,
    chip: &ChipSpec,
    store: &Store,
    force: bool,
    out: &Reporter,
    done: &mut dyn FnMut(Outcome),
) -> Result<(), Failure> {
    let chip_text = chip_key(chip);
    // The store key is known once the variant is traced: `None` while tracing.
    let items = variants.enumerate().map(|(i, v)| (i, v, None::<String>));
    let first =
        |(_, v, _): &(usize, Variant, Option<String>)| RequestBody::Trace(variant_ref(v, chip));
    stream(pool, items, first, |(index, variant, key), answer| {
        show_output(out, &variant.kernel, &variant.shape_name, &variant.params, &answer.output);
        let result = match (key, answer.answer) {
            (_, Err(e)) => Err(e),
            (None, Ok(ResponseBody::Trace(t))) => {
                let key = Store::key_for(&t.program_hash, &chip_text, sim_version, "bench");
                match store.get::<BenchResult>("bench", &key).filter(|_| !force) {
                    Some(bench) => Ok(Measured { bench: served(bench, &t), cached: true }),
                    None => {
                        let bench = RequestBody::Bench(variant_ref(&variant, chip));
                        return Ok(Next::Then(bench, (index, variant, Some(key))));
                    }
                }
            }
            (Some(key), Ok(ResponseBody::Bench(bench))) => {
                store.put("bench", &key, &bench).map_err(|e| {
                    fail(
                        Exit::Internal,
                        format!("writing the store ({}): {e:#}", store.root().display()),
                    )
                })?;
                Ok(Measured { bench, cached: false })
            }
            (_, Ok(other)) => return Err(unexpected(&other)),
        };
        done(Outcome { index, variant, result });
        Ok(Next::Done)
    })
}

/// A stored result served to the variant traced as `trace`. The store is keyed by the
/// program (its instructions and the buffers they touch), and the pools a kernel allocates
/// are not part of it: variants that differ only in a ring buffer's depth they never use up
/// (`bufs` 2, 3 or 4 over two tiles) run the same program and share one result, whose SBUF
/// figure is that of the variant measured first. The variant's own allocation comes from
/// its trace.
pub fn served(mut stored: BenchResult, trace: &TraceResult) -> BenchResult {
    stored.sbuf_bytes_per_partition = trace.sbuf_bytes_per_partition;
    stored
}

/// Trace `variants` (no simulation), outcomes as they complete.
pub fn trace_stream(
    pool: &mut Pool,
    variants: impl Iterator<Item = Variant>,
    chip: &ChipSpec,
    out: &Reporter,
    done: &mut dyn FnMut(usize, Variant, Result<TraceResult, ErrorInfo>),
) -> Result<(), Failure> {
    let first = |(_, v): &(usize, Variant)| RequestBody::Trace(variant_ref(v, chip));
    stream(pool, variants.enumerate(), first, |(index, variant), answer| {
        show_output(out, &variant.kernel, &variant.shape_name, &variant.params, &answer.output);
        let result = match answer.answer {
            Ok(ResponseBody::Trace(t)) => Ok(t),
            Ok(other) => return Err(unexpected(&other)),
            Err(e) => Err(e),
        };
        done(index, variant, result);
        Ok(Next::Done)
    })
}
