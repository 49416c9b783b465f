//! `neuron-sim` is a library that knows nothing of cargo, processes, files or the CLI
//! (ARCHITECTURE.md, invariants). Its manifest may only name the crates below; a new dependency has to be
//! added here deliberately, with the reason.

#[test]
fn simulator_depends_only_on_math_and_data_crates() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let doc: toml::Table = manifest.parse().unwrap();
    let deps = doc["dependencies"].as_table().unwrap();
    let allowed = [
        "thiserror",      // error types
        "serde",          // profile / chip (de)serialization
        "serde_json",     // the trace
        "toml",           // chips from TOML text
        "half",           // bf16 / fp16 rounding
        "libm",           // erf (f32::erf is not in stable std) for the activation functions
        "matrixmultiply", // the functional matmul
        "xxhash-rust",    // the program hash
        "rustc-hash",     // fast maps on the hot path
    ];
    for name in deps.keys() {
        assert!(allowed.contains(&name.as_str()), "neuron-sim must not depend on `{name}`");
    }
    for forbidden in ["neuron-tune-harness", "cargo-neuron-tune", "cargo_metadata", "duct", "clap"]
    {
        assert!(!deps.contains_key(forbidden));
    }
    assert!(!manifest.contains("[build-dependencies]"), "no build script reaching outside");
}
