//! The protocol is the contract between the CLI and every kernel crate's harness, so it
//! holds serde types and nothing else (ARCHITECTURE.md, invariants): a kernel crate that
//! links it pulls in no more than serde. A new dependency has to be added here
//! deliberately, with the reason.

#[test]
fn the_protocol_depends_on_serde_only() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let deps: Vec<String> = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table")
        .split("\n[")
        .next()
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split(['=', '.']).next().unwrap().trim().to_string())
        .collect();
    // serde, and the workspace-hack, which adds features to shared builds and no code.
    assert_eq!(deps, ["neuron-tune-workspace-hack", "serde"], "{manifest}");
    assert!(!manifest.contains("[build-dependencies]"), "no build script");
}
