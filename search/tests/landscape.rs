//! Landscape loading: Kernel Tuner caches (plain, gzipped, unterminated) and T4 results.

use neuron_tune_search::{Config, Landscape, Level};

const KT: &str = r#"{
"device_name": "Test GPU",
"kernel_name": "k",
"problem_size": [64],
"tune_params_keys": ["bx", "ro"],
"tune_params": {"bx": [16, 32, 64], "ro": [0, 1]},
"objective": "time",
"cache": {
"16,0": {"bx": 16, "ro": 0, "time": 3.0, "times": [3.0]},
"16,1": {"bx": 16, "ro": 1, "time": "RuntimeFailedConfig"},
"32,0": {"bx": 32, "ro": 0, "time": 1.25, "times": [1.25]},
"32,1": {"bx": 32, "ro": 1, "time": "CompilationFailedConfig"},
"64,0": {"bx": 64, "ro": 0, "time": "InvalidConfig"},
"64,1": {"bx": 64, "ro": 1, "time": 2.0, "times": [2.0]}}
}"#;

fn check_kt(l: &Landscape) {
    let s = l.space();
    assert_eq!(s.len(), 6);
    assert_eq!(s.dims()[0].name(), "bx");
    assert_eq!(s.dims()[0].levels()[2], Level::Int(64));
    let (opt, v) = l.optimum();
    assert_eq!((opt.clone(), v), (Config(vec![1, 0]), 1.25));
    assert_eq!(l.value(&Config(vec![2, 1])), Some(2.0));
    assert_eq!(l.invalid_reason(&Config(vec![0, 1])), Some("RuntimeFailedConfig"));
    assert_eq!(l.invalid_reason(&Config(vec![1, 1])), Some("CompilationFailedConfig"));
    assert_eq!(l.invalid_reason(&Config(vec![2, 0])), Some("InvalidConfig"));
    assert_eq!(l.valid_values(), vec![1.25, 2.0, 3.0]);
    let mut oracle = l.oracle();
    assert!(oracle(&Config(vec![0, 0])) && !oracle(&Config(vec![0, 1])));
}

#[test]
fn kernel_tuner_cache_plain_and_gzipped() {
    check_kt(&Landscape::parse(KT.as_bytes(), "kt").unwrap());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, KT.as_bytes()).unwrap();
    let l = Landscape::parse(&gz.finish().unwrap(), "kt").unwrap();
    check_kt(&l);
    assert_eq!(l.unit(), "ms", "Kernel Tuner's `time` is in milliseconds");
    assert_eq!(l.unterminated(), None);
}

#[test]
fn a_cache_that_says_its_time_unit_is_read_in_it() {
    let with_unit = KT.replacen('{', "{\"time_unit\": \"µs\", ", 1);
    let l = Landscape::parse(with_unit.as_bytes(), "kt").unwrap();
    check_kt(&l);
    assert_eq!(l.unit(), "µs");
    let bad = KT.replacen('{', "{\"time_unit\": 1000, ", 1);
    let e = Landscape::parse(bad.as_bytes(), "kt").unwrap_err().to_string();
    assert!(e.contains("time_unit"), "{e}");
    // The simulator-swept GEMM landscape this repository bundles is in µs and says so.
    let gemm = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/landscapes/gemm_qwen3_mlp_up_trn1.json.gz"
    );
    assert_eq!(Landscape::load(gemm).unwrap().unit(), "µs");
}

#[test]
fn unterminated_kernel_tuner_cache_is_accepted() {
    // What an interrupted run leaves: no closing `}\n}`, a trailing comma after the last entry.
    let cut = KT.rfind("}}").unwrap();
    let unterminated = format!("{},\n", &KT[..cut + 1]);
    assert!(serde_json::from_str::<serde_json::Value>(&unterminated).is_err());
    let l = Landscape::parse(unterminated.as_bytes(), "kt").unwrap();
    check_kt(&l);
    assert_eq!(l.unterminated(), Some(0), "said, so a replay can warn");
    // Interrupted partway through writing an entry: the partial line is dropped.
    let partial = format!("{unterminated}\"99,0\": {{\"bx\": 99, \"ro\"");
    let l = Landscape::parse(partial.as_bytes(), "kt").unwrap();
    check_kt(&l);
    assert_eq!(l.unterminated(), Some(1));
}

#[test]
fn absent_configurations_are_invalid() {
    let cut = KT.find("\"64,1\"").unwrap();
    let l = Landscape::parse(&KT.as_bytes()[..cut], "kt").unwrap();
    assert_eq!(l.invalid_reason(&Config(vec![2, 1])), Some("absent"));
    assert!(!l.is_valid(&Config(vec![2, 1])));
}

#[test]
fn t4_results() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/t4_small.json");
    let l = Landscape::load(path).unwrap();
    assert_eq!(l.name(), "t4_small");
    assert_eq!(l.unit(), "ms", "the measurements' own unit");
    let s = l.space();
    // Dimensions by name; numeric levels ascending, others in order of appearance.
    assert_eq!(s.dims()[0].name(), "block");
    assert_eq!(s.dims()[0].levels(), &[Level::Int(16), Level::Int(32), Level::Int(64)]);
    assert_eq!(s.dims()[1].levels(), &[Level::Str("yes".into()), Level::Str("no".into())]);
    assert_eq!(l.optimum(), (&Config(vec![2, 0]), 0.9));
    assert_eq!(l.invalid_reason(&Config(vec![0, 1])), Some("compile"));
    assert_eq!(l.invalid_reason(&Config(vec![0, 0])), Some("absent"));
    assert_eq!(l.value(&Config(vec![2, 1])), Some(2.0));
}

#[test]
fn garbage_is_an_error() {
    assert!(Landscape::parse(b"{\"neither\": 1}", "x").is_err());
    assert!(Landscape::parse(b"not json", "x").is_err());
    assert!(Landscape::parse(&[0x1f, 0x8b, 0, 0], "x").is_err());
}

#[test]
fn shipped_landscapes_load() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/landscapes");
    let l = Landscape::load(format!("{dir}/convolution_milo_A4000.json.gz")).unwrap();
    assert_eq!(l.space().len(), 10240);
    assert_eq!(l.valid_values().len(), 4201);
    assert_eq!(l.failure_count(), 161);
}

#[test]
fn a_key_listed_but_not_in_tune_params_is_an_error_not_a_panic() {
    // Found by the fuzzer (tests/tests/fuzz.rs): this indexed a missing key.
    let doc = br#"{"tune_params_keys": ["a", "zz"], "tune_params": {"a": [1]}, "cache": {}}"#;
    let e = neuron_tune_search::Landscape::parse(doc, "x").unwrap_err().to_string();
    assert!(e.contains("tune_params.zz is missing"), "{e}");
}

#[test]
fn the_gemm_sweep_landscape_loads_with_its_optimum() {
    // fixtures/landscapes/README.md: 6,912 configurations, 5,152 valid, best 6235.9 µs.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/landscapes");
    let l = Landscape::load(format!("{dir}/gemm_qwen3_mlp_up_trn1.json.gz")).unwrap();
    assert_eq!((l.space().len(), l.valid_values().len()), (6912, 5152));
    let (best, time) = l.optimum();
    assert!((time - 6235.9).abs() < 0.05, "{time}");
    assert_eq!(l.space().describe(best).matches("accumulate=psum").count(), 1);
}
