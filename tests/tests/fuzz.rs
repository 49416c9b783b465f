//! Fuzzing the parsers of untrusted input: none may panic, whatever the bytes.
//!
//! Each target starts from valid documents and applies random edits (deletions, insertions
//! of syntax-heavy bytes, byte replacements), so most inputs are almost valid — where
//! parsers break. proptest drives it (cases from `PROPTEST_RNG_SEED`, so CI is
//! deterministic); `FUZZ_CASES` sets the count per target: 10⁴ in the suite, 10⁶ with
//! `cargo xtask fuzz`. A panic is reported with the shrunk input.

use neuron_tune_harness::proptest::prelude::*;
use neuron_tune_harness::proptest::test_runner::{Config, TestRunner};
use neuron_tune_harness::{Kernel, ParamSpec, Params, Shape, TensorSpec, Work};
use neuron_tune_protocol::{
    ChipSpec, Params as P, Request, RequestBody, Response, ShapeRef, VariantRef,
};
use std::path::Path;

fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

/// Random edits of one of `seeds`.
fn mutated(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    const ALPHABET: &[u8] = b"{}[]\",:=.#\n \\0123456789-+eE_abcxyz\x00\xff\x1f\x8b";
    let edit = (
        0u8..3,
        any::<prop::sample::Index>(),
        prop::collection::vec(prop::sample::select(ALPHABET), 0..6),
    );
    (prop::sample::select(seeds), prop::collection::vec(edit, 0..8)).prop_map(|(mut doc, edits)| {
        for (op, at, bytes) in edits {
            let i = if doc.is_empty() { 0 } else { at.index(doc.len() + 1) };
            match op {
                0 => {
                    let end = (i + bytes.len() + 1).min(doc.len());
                    doc.drain(i.min(end)..end);
                }
                1 => {
                    doc.splice(i..i, bytes);
                }
                _ => {
                    if i < doc.len() {
                        doc[i] = bytes.first().copied().unwrap_or(b'"');
                    }
                }
            }
        }
        doc
    })
}

/// Run `target` on mutated `seeds`; it must return (any result) without panicking.
fn fuzz(name: &str, seeds: Vec<Vec<u8>>, target: impl Fn(&[u8])) {
    let mut runner =
        TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() });
    let result = runner.run(&mutated(seeds), |input| {
        target(&input);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    eprintln!("{name}: {} inputs, no panic", cases());
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A kernel with an int, a choice and a bool parameter, for the space parser.
struct K;
impl Kernel for K {
    fn name(&self) -> &str {
        "k"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::int("bufs", 1, "buffers"),
            ParamSpec::choice("order", &["mn", "nm"], "mn", "loop order"),
            ParamSpec::bool("flag", false, "a flag"),
        ]
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![("small".into(), Shape::new(&[("n", 128)]))]
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        Just(Shape::new(&[("n", 128)])).boxed()
    }
    fn tensors(&self, _: &Shape) -> Vec<TensorSpec> {
        vec![]
    }
    fn run(
        &self,
        _: &mut neuron_sim::Nc,
        _: &Params,
        _: &Shape,
        _: &[neuron_sim::Hbm],
    ) -> neuron_sim::SimResult<()> {
        Ok(())
    }
    fn reference(&self, _: &Shape, _: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![]
    }
    fn work(&self, _: &Shape) -> Work {
        Work { flops: 0.0, bytes: 0.0 }
    }
}

#[test]
fn the_toml_space_parser_never_panics() {
    let manifest = "[package]\nname = \"x\"\n\n[package.metadata.neuron-tune]\nharness = \"h\"\n\n\
        [package.metadata.neuron-tune.kernels.k]\nspace = { bufs = [1, 2, 3], order = [\"mn\", \"nm\"], flag = [true, false] }\n\
        shapes = { small = { n = 128 }, big = { n = 4096 } }\ndefault = { bufs = 2 }\n";
    let kernels: Vec<&dyn Kernel> = vec![&K];
    let parse = |b: &[u8], in_manifest: bool| {
        neuron_tune_harness::space::parse_config(
            Path::new("Cargo.toml"),
            &text(b),
            in_manifest,
            &kernels,
            neuron_tune_harness::CrateConfig::default(),
        )
    };
    let seed = parse(manifest.as_bytes(), true);
    assert!(seed.is_ok(), "the seed is valid: {:?}", seed.err());
    fuzz("space parser", vec![manifest.as_bytes().to_vec()], |b| {
        let _ = parse(b, true);
        let _ = parse(b, false);
    });
}

#[test]
fn the_chip_toml_loader_never_panics() {
    let seeds: Vec<Vec<u8>> = ["trn1", "trn2", "trn3"]
        .iter()
        .map(|c| neuron_sim::Chip::builtin(c).unwrap().to_toml().into_bytes())
        .collect();
    assert!(neuron_sim::Chip::from_toml(&text(&seeds[0])).is_ok());
    fuzz("chip loader", seeds, |b| {
        let _ = neuron_sim::Chip::from_toml(&text(b));
    });
}

#[test]
fn the_worker_protocol_decoder_never_panics() {
    let variant = VariantRef {
        kernel: "gemm".into(),
        krate: Some("kernels".into()),
        params: P::new().with("bufs", 2).with("order", "mn").with("flag", true),
        shape: ShapeRef::Named("small".into()),
        chip: ChipSpec::builtin("trn2"),
    };
    let seeds: Vec<Vec<u8>> = [
        RequestBody::Trace(variant.clone()),
        RequestBody::Bench(variant),
        RequestBody::List,
        RequestBody::Hello { protocol: 4 },
    ]
    .into_iter()
    .enumerate()
    .map(|(id, body)| serde_json::to_vec(&Request { id: id as u64, body }).unwrap())
    .chain(std::iter::once(
        serde_json::to_vec(&Response::error(3, neuron_tune_protocol::ErrorKind::Timeout, "slow"))
            .unwrap(),
    ))
    .collect();
    fuzz("protocol decoder", seeds, |b| {
        let _ = serde_json::from_slice::<Request>(b);
        let _ = serde_json::from_slice::<Response>(b);
    });
}

/// What the tool does with a line a worker wrote ([`cargo_neuron_tune::worker::response_to`]:
/// complete, a protocol response, and to the request asked): never a panic, never a line
/// without its end taken, and never the response to another request taken for the one
/// asked (whatever ids, bodies or key orders the bytes hold).
#[test]
fn the_tool_never_takes_a_worker_s_line_for_another_request_s_answer() {
    use cargo_neuron_tune::worker::response_to;
    use neuron_tune_protocol::{ErrorKind, ResponseBody, PROTOCOL_VERSION};
    let hello = ResponseBody::Hello { protocol: PROTOCOL_VERSION, harness_version: "0.1.0".into() };
    let verdicts = ResponseBody::Validate { verdicts: vec![None, Some("odd".into())] };
    let mut printed = Response::new(11, verdicts.clone());
    printed.output = "kernel output {\"id\": 12}".into();
    let responses = [
        Response::new(0, hello),
        Response::new(7, verdicts),
        printed,
        Response::error(3, ErrorKind::Timeout, "slow"),
    ];
    // (A line as read: with its end of line.)
    let seeds: Vec<Vec<u8>> = responses
        .iter()
        .map(|r| format!("{}\n", serde_json::to_string(r).unwrap()).into_bytes())
        .collect();
    // The seeds are taken for their own request only, and only whole.
    for (r, seed) in responses.iter().zip(&seeds) {
        assert_eq!(response_to(r.id, &text(seed), true).as_ref(), Ok(r));
        assert!(response_to(r.id + 1, &text(seed), true).is_err());
        assert!(response_to(r.id, &text(seed), false).is_err());
    }
    let asked: Vec<u64> = [0, 1, 3, 7, 11, 12, 1000, u64::MAX].to_vec();
    fuzz("worker response reader", seeds, |b| {
        let line = text(b);
        for &id in &asked {
            if let Ok(r) = response_to(id, &line, true) {
                assert_eq!(r.id, id, "the response to request {} taken for {id}: {line}", r.id);
            }
            assert!(response_to(id, &line, false).is_err(), "a line cut short taken: {line}");
        }
    });
}

#[test]
fn the_store_entry_reader_never_panics() {
    let dir = neuron_tune_tests::scratch_dir("fuzz-store");
    let store = cargo_neuron_tune::store::Store::open(&dir, |_, _| {}).unwrap();
    let key = cargo_neuron_tune::store::Store::key("abc", "trn2", "bench");
    store.put("bench", &key, &serde_json::json!({"time_us": 1.5, "cycles": 7})).unwrap();
    let path = dir.join("neuron-tune/bench").join(&key[..2]).join(format!("{key}.json"));
    let seed = std::fs::read(&path).unwrap();
    assert!(cargo_neuron_tune::store::open_entry(&text(&seed), &key).is_ok());
    let value = cargo_neuron_tune::store::open_entry(&text(&seed), &key).unwrap();
    // Never a panic, and never a changed value served (docs/formats.md: an edited entry is
    // not used): whatever the reader accepts holds the stored value.
    fuzz("store entry reader", vec![seed], |b| {
        if let Ok(v) = cargo_neuron_tune::store::open_entry(&text(b), &key) {
            assert_eq!(v, value, "an edited entry was accepted with another value");
        }
    });
}

#[test]
fn the_kernel_tuner_cache_reader_never_panics() {
    let kt = br#"{"tune_params_keys": ["a", "b"], "tune_params": {"a": [1, 2], "b": ["x", "y"]},
        "objective": "time", "cache": {"1,x": {"a": 1, "b": "x", "time": 1.5},
        "2,x": {"a": 2, "b": "x", "time": "InvalidConfig"}, "1,y": {"a": 1, "b": "y", "time": 0.5}}}"#;
    let t4 = br#"{"results": [{"configuration": {"a": 1}, "objectives": ["time"], "times": {"runtimes": [1.0]}, "invalidity": "correct"}]}"#;
    assert!(neuron_tune_search::Landscape::parse(kt, "kt").is_ok(), "the seed is valid");
    fuzz("Kernel Tuner cache reader", vec![kt.to_vec(), t4.to_vec()], |b| {
        let _ = neuron_tune_search::Landscape::parse(b, "fuzz");
    });
}

#[test]
fn the_tuned_database_baseline_and_journal_readers_never_panic() {
    // Seeds: a real sealed tuned database, the committed baseline, a real journal.
    let dir = neuron_tune_tests::scratch_dir("fuzz-sealed");
    let mut db = cargo_neuron_tune::tuned::TunedDb::load(&dir).unwrap();
    db.record(cargo_neuron_tune::tuned::TunedRecord {
        kernel: "gemm".into(),
        chip: "trn2".into(),
        shape: "small".into(),
        dims: neuron_tune_protocol::Shape::new(&[("m", 128), ("n", 512)]),
        params: neuron_tune_protocol::Params::new().with("bufs", 2).with("evict", "scalar"),
        time_us: 12.5,
        program_hash: "abc".into(),
        tool_version: "0.1.0".into(),
        sim_version: "0.1.0".into(),
        validated_shapes: vec!["small".into()],
        validated_models: vec!["qwen3@tiny".into()],
    });
    let tuned = std::fs::read(db.save().unwrap()).unwrap();
    let baseline =
        std::fs::read(neuron_tune_tests::root().join("fixtures/neuron-tune.baseline.toml"))
            .unwrap();
    let store = cargo_neuron_tune::store::Store::open(&dir, |_, _| {}).unwrap();
    store.append_journal("j", &serde_json::json!({"n": 0, "status": "measured"})).unwrap();
    let journal_path =
        store.append_journal("j", &serde_json::json!({"n": 1, "time_us": 2.5})).unwrap();
    let journal = std::fs::read(&journal_path).unwrap();
    use cargo_neuron_tune::{baseline, seal, tuned};
    let name = |t: &toml::Table| seal::describe_keys(t, &["kernel", "chip", "shape"]);
    assert!(seal::read_sealed_toml::<tuned::TunedRecord>(
        &text(&tuned),
        tuned::SCHEMA,
        "tuned",
        name
    )
    .is_ok());
    // Never a panic, and never an edited record trusted: a record (or journal line) the
    // readers accept is one the seeds hold, unchanged. (A record cut out whole is not
    // detected: each record is sealed, not the file.)
    let records =
        seal::read_sealed_toml::<tuned::TunedRecord>(&text(&tuned), tuned::SCHEMA, "tuned", name)
            .unwrap();
    let entries = seal::read_sealed_toml::<baseline::BaselineEntry>(
        &text(&baseline),
        baseline::SCHEMA,
        "model",
        name,
    )
    .unwrap();
    let lines = cargo_neuron_tune::store::parse_journal(&text(&journal)).lines;
    assert_eq!((records.len(), entries.len(), lines.len()), (1, 2, 2));
    fuzz("sealed file readers", vec![tuned, baseline, journal], |b| {
        let t = text(b);
        for r in seal::read_sealed_toml::<tuned::TunedRecord>(&t, tuned::SCHEMA, "tuned", name)
            .unwrap_or_default()
        {
            assert!(records.contains(&r), "an edited tuned record was trusted: {r:?}");
        }
        for e in
            seal::read_sealed_toml::<baseline::BaselineEntry>(&t, baseline::SCHEMA, "model", name)
                .unwrap_or_default()
        {
            assert!(entries.contains(&e), "an edited baseline entry was trusted: {e:?}");
        }
        for l in cargo_neuron_tune::store::parse_journal(&t).lines {
            assert!(lines.contains(&l), "an edited journal line was trusted: {l}");
        }
    });
}

#[test]
fn the_profile_summary_reader_of_analyze_never_panics() {
    // Seeds: a neuron-profile summary of the fixtures and a simulated profile event line.
    let measured = std::fs::read(
        neuron_tune_tests::root().join("fixtures/analyze/nkibench-silu.neuron-profile.json"),
    )
    .unwrap();
    let simulated = br#"{"event":"profile","profile":{"total_time":1.2e-5,"chip":"trn2","program_hash":"ab","tensor_engine_active_time_percent":96.5,"dma_active_time_percent":"40","hbm_read_bytes":4096,"bottleneck":{"summary":"Tensor-bound"}}}"#;
    fuzz("analyze", vec![measured, simulated.to_vec()], |b| {
        if let Ok(s) = cargo_neuron_tune::analyze::parse(&String::from_utf8_lossy(b), "fuzz") {
            let v = cargo_neuron_tune::analyze::verdict(&s);
            let rows = cargo_neuron_tune::analyze::compare(&s, &s);
            let _ = (v, cargo_neuron_tune::analyze::disagreements(&rows));
        }
    });
}
