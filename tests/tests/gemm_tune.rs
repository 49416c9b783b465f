//! The default search finds the GEMM fixture's best: at the `medium` shape (1024 × 2048 ×
//! 2048 bf16) on trn1, `tune` with a modest budget gets close to the best of the whole
//! space, which the test finds by an exhaustive `bench --all-variants`. (The figure at the
//! full `qwen3_mlp_up` shape comes from `cargo xtask tune-gemm`.)
//!
//! Since the GEMM's block loops are `affine_range`, only 2 of the ~5,400 valid variants at
//! this shape are within 2 % of the best, and a basin 4.2 % off (SBUF accumulation over 8×4
//! blocks) is left only by changing four parameters together, which the default's repaired
//! moves and two-step kicks do for some seeds and not others. So the test judges five seeds against what
//! valid-only random search does with the same budget, computed exactly from this
//! landscape: random gets within 5 % in 35 % of runs and within 2 % in 5.5 %.
//!
//! The harness is the dev build the other tests use: the workspace's dev profile builds its
//! own crates at opt-level 1, at which the sweep of ~5400 variants runs as fast as with a
//! release build (`.cargo/config.toml`).

use neuron_tune_tests::{cli_exe, root, test_target_dir, KeepFile};
use serde_json::Value;

/// `cargo neuron-tune ARGS` on the kernel fixtures, dev harness, JSON events.
fn run(args: &[&str]) -> Vec<Value> {
    let out = std::process::Command::new(cli_exe())
        .arg("neuron-tune")
        .args(args)
        .args(["-p", "neuron-fixtures-kernels", "--profile", "dev", "--message-format", "json"])
        .arg("--target-dir")
        .arg(test_target_dir())
        .current_dir(root())
        .output()
        .expect("the CLI runs");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{args:?}: {stderr}");
    stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn of_kind(events: &[Value], kind: &str) -> Vec<Value> {
    events.iter().filter(|e| e["event"] == kind).cloned().collect()
}

#[test]
fn the_default_tune_reaches_the_gemm_spaces_best_at_the_medium_shape() {
    let sel = ["--kernel", "gemm", "--shape", "medium", "--chip", "trn1"];
    let mut bench = vec!["bench", "--all-variants", "-j", "2"];
    bench.extend_from_slice(&sel);
    let swept = run(&bench);
    let times: Vec<f64> =
        of_kind(&swept, "bench").iter().filter_map(|e| e["time_us"].as_f64()).collect();
    assert!(times.len() > 4000, "the space has thousands of valid variants: {}", times.len());
    let best = times.iter().copied().fold(f64::INFINITY, f64::min);
    let default = of_kind(&swept, "best")[0]["default_time"].as_f64().unwrap();
    // The space holds real gains: its best is far ahead of the plain default.
    assert!(default > 1.2 * best, "default {default} µs vs best {best} µs");

    let _keep = KeepFile::new(root().join("fixtures/kernels/neuron-tune.tuned.toml"));
    let mut found = Vec::new();
    for seed in ["1", "2", "3", "4", "5"] {
        let mut tune = vec!["tune", "--budget", "150", "--seed", seed, "-j", "2"];
        tune.extend_from_slice(&sel);
        let tuned = of_kind(&run(&tune), "tune");
        let t = tuned[0]["best_time"].as_f64().unwrap();
        eprintln!(
            "GEMM medium on trn1: space best {best:.1} µs, default {default:.1} µs, \
             tune@150 (seed {seed}) {t:.1} µs ({:.4}x); {}",
            t / best,
            tuned[0]["best_params"]
        );
        found.push(t);
    }
    // Every run within 5 % (random: all five with probability 0.35⁵ ≈ 0.5 %), and at least
    // two of five within 2 % (random: about 0.3 %).
    assert!(found.iter().all(|&t| t <= 1.05 * best), "{found:?} vs the space's best {best}");
    let close = found.iter().filter(|&&t| t <= 1.02 * best).count();
    assert!(close >= 2, "{close} of 5 runs within 2 %: {found:?} vs {best}");
}
