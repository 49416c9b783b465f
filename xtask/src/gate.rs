//! The gate in this repository: the fixture models (`fixtures/qwen3`: qwen3 with flash
//! attention, qwen3_naive) against the committed baseline `fixtures/neuron-tune.baseline.toml`.
//!
//! * `cargo xtask ci` ends with [`ci_gate`]: the gate at the `tiny` shape, on the tests'
//!   build (seconds). A change that makes a fixture model slower fails CI until it is
//!   blessed.
//! * `cargo xtask bless` ([`bless`]) saves the baseline again on purpose; `--tuned` first
//!   re-runs the README's tune of the fixture kernels (the tuned database the models use).
//!   Nothing else ever writes the baseline.
//! * `cargo xtask bench-gate` ([`bench_gate`]) measures the gate's speed on the fixture
//!   workspace at `prefill_16k` (4 layers × 16 K tokens, trn2), both models: `--baseline`
//!   (target: under 10 s warm) and `--base-ref HEAD` with nothing changed (target: under
//!   60 s warm), each after a first (cold) run that is reported too.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Instant;

/// The committed baseline of the fixture models.
pub const BASELINE: &str = "fixtures/neuron-tune.baseline.toml";

/// `cargo neuron-tune ARGS` (the alias: a release build of the tool) from the root.
fn neuron_tune(what: &str, args: &[&str]) -> Result<(), ExitCode> {
    let mut all = vec!["neuron-tune"];
    all.extend_from_slice(args);
    super::run(what, &all)
}

/// The gate of `cargo xtask ci`, after the tests: it runs on their build of the tool and
/// of the fixture harnesses (`target/e2e`, dev profile), since simulated cycles do not
/// depend on the build profile (the baseline is blessed from a release build and this gate
/// must reproduce it exactly). A release build of its own took about 5 minutes of CI; the
/// gate itself takes seconds. Its store starts empty, so it reads nothing the tests left
/// (some damage stored entries on purpose): every call is simulated as in a fresh clone.
pub fn ci_gate() -> Result<(), ExitCode> {
    let target = super::root().join("target").join("e2e");
    let target_arg = target.to_str().expect("a UTF-8 path");
    super::run(
        "gate: the tool",
        &["build", "-q", "-p", "cargo-neuron-tune", "--target-dir", target_arg],
    )?;
    if let Err(e) = std::fs::remove_dir_all(target.join("neuron-tune")) {
        if e.kind() != std::io::ErrorKind::NotFound {
            eprintln!("xtask: could not empty the gate's store {}: {e}", target.display());
            return Err(ExitCode::from(1));
        }
    }
    let exe =
        target.join("debug").join(format!("cargo-neuron-tune{}", std::env::consts::EXE_SUFFIX));
    let args = [
        "gate",
        "--baseline",
        BASELINE,
        "--shape",
        "tiny",
        "--target-dir",
        target_arg,
        "--profile",
        "dev",
    ];
    let mut cmd = Command::new(&exe);
    cmd.arg("neuron-tune").args(args);
    super::run_command("gate", &format!("cargo neuron-tune {}", args.join(" ")), cmd)
}

/// Update the committed baseline (and with `--tuned` the fixtures' tuned database) on
/// purpose.
pub fn bless(args: &[String]) -> Result<(), ExitCode> {
    if args.iter().any(|a| a == "--tuned") {
        neuron_tune(
            "tune",
            &[
                "tune",
                "-p",
                "neuron-fixtures-kernels",
                "--shape",
                "small",
                "--budget",
                "40",
                "--seed",
                "1",
            ],
        )?;
    }
    neuron_tune("bless", &["baseline", "save", "--baseline", BASELINE, "--shape", "tiny"])?;
    eprintln!("xtask: review and commit {BASELINE}");
    Ok(())
}

/// Time one run of the tool's release binary; its exit code must be `expect`.
fn timed(bin: &PathBuf, args: &[&str], expect: i32) -> Result<f64, ExitCode> {
    let start = Instant::now();
    let out = Command::new(bin)
        .arg("neuron-tune")
        .args(args)
        .current_dir(super::root())
        .output()
        .map_err(|e| {
        eprintln!("xtask: could not run {}: {e}", bin.display());
        ExitCode::from(1)
    })?;
    let secs = start.elapsed().as_secs_f64();
    if out.status.code() != Some(expect) {
        eprintln!(
            "xtask: `cargo neuron-tune {}` exited {:?} (expected {expect}):\n{}",
            args.join(" "),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        return Err(ExitCode::from(1));
    }
    Ok(secs)
}

/// Move every file of `from` that `to` lacks into `to` (directories merged), then remove
/// `from`.
fn merge_dirs(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dest = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            merge_dirs(&e.path(), &dest)?;
        } else if !dest.exists() {
            std::fs::rename(e.path(), dest)?;
        }
    }
    std::fs::remove_dir_all(from)
}

/// Measure the gate's speed at `prefill_16k` (see the module doc). `--cold`: the first run
/// (`baseline save`) starts from a store without bench results (they are set aside and put
/// back afterwards), so it simulates every call: the cold figure.
pub fn bench_gate(args: &[String]) -> Result<(), ExitCode> {
    let cold = args.iter().any(|a| a == "--cold");
    let status = super::cargo()
        .args(["build", "--release", "-q", "-p", "cargo-neuron-tune"])
        .current_dir(super::root())
        .status()
        .map_err(|_| ExitCode::from(1))?;
    if !status.success() {
        return Err(ExitCode::from(1));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| super::root().join("target"), PathBuf::from);
    let bin =
        target.join("release").join(format!("cargo-neuron-tune{}", std::env::consts::EXE_SUFFIX));
    let file = target.join("neuron-tune").join("bench-gate.baseline.toml");
    let file = file.to_str().expect("a UTF-8 path");
    let shape = ["--shape", "prefill_16k", "--chip", "trn2"];
    let with = |args: &[&'static str]| -> Vec<&str> {
        let mut a: Vec<&str> = args.to_vec();
        a.extend_from_slice(&shape);
        a
    };
    eprintln!("xtask: bench-gate: qwen3 and qwen3_naive at prefill_16k on trn2");
    let mut save = with(&["baseline", "save"]);
    save.extend(["--baseline", file]);
    let store = target.join("neuron-tune").join("bench");
    let aside = target.join("neuron-tune").join(format!("bench.aside-{}", std::process::id()));
    if cold && store.exists() {
        std::fs::rename(&store, &aside).map_err(|e| {
            eprintln!("xtask: setting {} aside: {e}", store.display());
            ExitCode::from(1)
        })?;
    }
    let cold_save = timed(&bin, &save, 0);
    if aside.exists() {
        merge_dirs(&aside, &store).map_err(|e| {
            eprintln!("xtask: putting {} back: {e}", aside.display());
            ExitCode::from(1)
        })?;
    }
    let cold_save = cold_save?;
    eprintln!("xtask:   baseline save (first run): {cold_save:.1} s");
    let mut gate_file = with(&["gate"]);
    gate_file.extend(["--baseline", file]);
    let runs = 3;
    let mut file_times = Vec::new();
    for _ in 0..runs {
        file_times.push(timed(&bin, &gate_file, 0)?);
    }
    let gate_ref = with(&["gate", "--base-ref", "HEAD"]);
    let cold_ref = timed(&bin, &gate_ref, 0)?;
    let mut ref_times = Vec::new();
    for _ in 0..runs {
        ref_times.push(timed(&bin, &gate_ref, 0)?);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (m_file, m_ref) = (median(&mut file_times), median(&mut ref_times));
    let verdict = |secs: f64, goal: f64| if secs < goal { "met" } else { "NOT met" };
    println!(
        "\n{:<58} {:>9} {:>9}  verdict",
        "gate at prefill_16k, trn2, qwen3 + qwen3_naive", "seconds", "target"
    );
    let first = if cold {
        "baseline save, first run, empty store (simulates all)"
    } else {
        "baseline save, first run (simulates what the store lacks)"
    };
    println!("{first:<58} {cold_save:>9.2} {:>9}", "-");
    println!(
        "{:<58} {:>9.2} {:>9}  {}",
        format!("gate --baseline, warm (median of {runs})"),
        m_file,
        "< 10",
        verdict(m_file, 10.0)
    );
    println!(
        "{:<58} {:>9.2} {:>9}",
        "gate --base-ref HEAD, first run (worktree, its build)", cold_ref, "-"
    );
    println!(
        "{:<58} {:>9.2} {:>9}  {}",
        format!("gate --base-ref HEAD, nothing changed, warm (median of {runs})"),
        m_ref,
        "< 60",
        verdict(m_ref, 60.0)
    );
    if m_file < 10.0 && m_ref < 60.0 {
        Ok(())
    } else {
        Err(ExitCode::from(1))
    }
}
