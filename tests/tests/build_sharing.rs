//! Every build the tests start reuses `cargo test`'s units, which holds only while each of
//! those builds resolves its dependencies' features exactly as the whole workspace does.
//! `workspace-hack/` asks for the union; this test says what to add to it when a
//! dependency change makes a standalone build resolve them differently (which would
//! silently build the simulator, the harness or the tool again in every CI run).

use neuron_tune_tests::{cargo, root};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each package of the graph `cargo tree ARGS` prints (run in `dir`) with its enabled
/// features.
fn features(dir: &Path, args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let out = cargo()
        .args(["tree", "--quiet", "--locked", "--offline", "--prefix", "none"])
        .args(["--format", "{p}|{f}"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cargo tree {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let mut all: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in stdout.lines() {
        let Some((package, feats)) = line.split_once('|') else { continue };
        let package = package.replace(" (*)", "").replace(" (proc-macro)", "");
        let entry = all.entry(package.trim().to_string()).or_default();
        for f in feats.split(',').map(|f| f.replace(" (*)", "")) {
            if !f.trim().is_empty() {
                entry.insert(f.trim().to_string());
            }
        }
    }
    assert!(all.len() > 10, "cargo tree {args:?} printed no graph:\n{stdout}");
    all
}

#[test]
fn standalone_builds_resolve_features_as_the_workspace_does() {
    let r = root();
    let workspace = features(&r, &["--workspace", "--edges", "normal,dev,build"]);
    let standalone = [
        ("the tool", r.clone(), vec!["-p", "cargo-neuron-tune"]),
        ("the kernel fixtures", r.clone(), vec!["-p", "neuron-fixtures-kernels"]),
        ("the qwen3 fixture", r.clone(), vec!["-p", "neuron-fixtures-qwen3"]),
        ("a broken fixture crate", r.join("fixtures/broken/panic"), vec![]),
    ];
    let mut missing = Vec::new();
    for (what, dir, args) in standalone {
        let mut args = args;
        args.extend(["--edges", "normal,build"]);
        for (package, feats) in features(&dir, &args) {
            // Local packages have no features here; only dependencies are shared units.
            if package.contains("(/") {
                continue;
            }
            let whole = workspace.get(&package).cloned().unwrap_or_default();
            let lacking: Vec<&String> = whole.difference(&feats).collect();
            if !lacking.is_empty() {
                missing.push(format!("{what}: {package} lacks {lacking:?}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "builds the tests start would not reuse cargo test's units; add these features to \
         workspace-hack/Cargo.toml:\n  {}",
        missing.join("\n  ")
    );
}
