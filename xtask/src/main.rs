//! Repository automation, so CI and a developer run exactly the same steps.
//!
//! * `cargo xtask ci`    — format check, clippy (warnings are errors), the whole test suite,
//!   then the gate: the fixture models against `fixtures/neuron-tune.baseline.toml`.
//! * `cargo xtask bless` — save that baseline again, on purpose (`--tuned`: re-tune the
//!   fixture kernels first); `cargo xtask bench-gate` — the gate's speed (see `gate.rs`).
//! * `cargo xtask test`  — the test suite only; `cargo xtask fuzz` — the fuzz targets
//!   (`tests/tests/fuzz.rs`) on 10⁶ inputs each instead of the suite's 10⁴.
//! * `cargo xtask bench` — the simulator's criterion benchmarks (`cargo bench -p neuron-sim`),
//!   then each measured figure against its target from the issues, as a ratio
//!   (`cargo xtask bench --report` prints that table for the last run without running).
//!
//! * `cargo xtask bench-search` — every search strategy replayed on the recorded landscapes
//!   in `fixtures/landscapes/`, against exact random search (see `bench_search.rs`).
//! * `cargo xtask calibrate` — the calibration suite (`fixtures/calibration`): simulated
//!   against measured latency and busy time per published kernel, the MAPE; exit 1 when a
//!   threshold of issue 13 is missed (`--quick` leaves out the Mamba scaling table).
//! * `cargo xtask tune-gemm` — the GEMM fixture's whole space at `qwen3_mlp_up` on trn1, its
//!   best variant's TensorE share, and the default `tune` for a few seeds against that best
//!   (see `tune_gemm.rs`).
//!
//! Each step runs `$CARGO` (the cargo that started us) and stops at the first failure with
//! its exit code.

use std::process::{Command, ExitCode};

mod bench_search;
mod gate;
mod tune_gemm;

pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The repository root (every step runs there, so relative paths mean the same anywhere).
pub(crate) fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_path_buf()
}

/// `cargo ARGS` from the repository root; its failure is the step's exit code.
pub(crate) fn run(what: &str, args: &[&str]) -> Result<(), ExitCode> {
    let mut cmd = cargo();
    cmd.args(args);
    run_command(what, &format!("cargo {}", args.join(" ")), cmd)
}

/// `cmd` (announced as `shown`) from the repository root; its failure is the step's exit
/// code.
pub(crate) fn run_command(what: &str, shown: &str, mut cmd: Command) -> Result<(), ExitCode> {
    eprintln!("xtask: {what}: {shown}");
    let status = cmd.current_dir(root()).status().map_err(|e| {
        eprintln!("xtask: could not start `{shown}`: {e}");
        ExitCode::from(1)
    })?;
    if status.success() {
        Ok(())
    } else {
        eprintln!("xtask: {what} failed ({status})");
        Err(ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8))
    }
}

fn test() -> Result<(), ExitCode> {
    run("tests", &["test", "--workspace", "--locked"])
}

/// A speed target from the issues, checked against criterion's median.
struct Target {
    /// criterion's directory under `target/criterion`.
    dir: &'static str,
    what: &'static str,
    /// The figure and whether bigger is better.
    goal: Goal,
}

enum Goal {
    /// At least this many throughput elements (instructions) per second.
    PerSecond(f64),
    /// At most this many seconds.
    Seconds(f64),
    /// No target: reported for context.
    None,
}

const TARGETS: [Target; 4] = [
    Target {
        dir: "timing_gemm/4096_3_panel_loads",
        what: "timing model, 4096^3 GEMM (K-panel loads)",
        goal: Goal::PerSecond(5e6),
    },
    Target {
        dir: "timing_gemm/4096_3_panel_loads_builder_only",
        what: "  same program, builder only (timing off)",
        goal: Goal::None,
    },
    Target {
        dir: "timing_gemm/4096_3_tile_loads",
        what: "timing model, 4096^3 GEMM (one DMA per A tile)",
        goal: Goal::None,
    },
    Target {
        dir: "functional_gemm/bf16_1024x1024x1024",
        what: "functional bf16 GEMM 1024^3",
        goal: Goal::Seconds(0.5),
    },
];

/// Print each benchmark's median, and its fastest sample, against its target (criterion's own
/// files are the source). Other work on the machine only ever adds time, so on a shared host
/// the fastest sample is the closer estimate of what the code itself costs; the median is
/// what a run on that host gave. Both are printed, and the verdict says which met the target.
fn bench_report() -> Result<(), ExitCode> {
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        std::path::PathBuf::from,
    );
    let read = |dir: &str, file: &str| -> Option<serde_json::Value> {
        let path = target_dir.join("criterion").join(dir).join("new").join(file);
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
    };
    let timing_share = || {
        // The timing model's own share: the full run's time minus the builder-only run's.
        let median = |dir| read(dir, "estimates.json")?["median"]["point_estimate"].as_f64();
        let count = read(TARGETS[0].dir, "benchmark.json")
            .and_then(|m| m["throughput"]["Elements"].as_f64());
        if let (Some(full), Some(builder), Some(n)) =
            (median(TARGETS[0].dir), median(TARGETS[1].dir), count)
        {
            if full > builder {
                println!(
                    "{:<48} {:>11} {:>11} {:>14}  (derived: instructions / (full - builder-only median))",
                    "  timing model's own work",
                    format!("{:.2} M/s", n / ((full - builder) / 1e9) / 1e6),
                    "-",
                    "-"
                );
            }
        }
    };
    // The fastest sample's time per iteration, in ns (sample.json: iterations and total time
    // per sample).
    let fastest = |dir: &str| -> Option<f64> {
        let sample = read(dir, "sample.json")?;
        let (iters, times) = (sample["iters"].as_array()?, sample["times"].as_array()?);
        iters
            .iter()
            .zip(times)
            .filter_map(|(i, t)| Some(t.as_f64()? / i.as_f64()?))
            .reduce(f64::min)
    };
    println!(
        "\n{:<48} {:>11} {:>11} {:>14}  ratio (median, fastest)",
        "benchmark", "median", "fastest", "target"
    );
    for t in &TARGETS {
        let (Some(est), Some(meta)) =
            (read(t.dir, "estimates.json"), read(t.dir, "benchmark.json"))
        else {
            println!("{:<48} {:>11}", t.what, "not measured");
            continue;
        };
        let median = est["median"]["point_estimate"].as_f64().unwrap_or(f64::NAN) / 1e9;
        let best = fastest(t.dir).map_or(f64::NAN, |ns| ns / 1e9);
        let elems = meta["throughput"]["Elements"].as_f64();
        let (figure_median, r_median) = figure(&t.goal, elems, median);
        let (figure_best, r_best) = figure(&t.goal, elems, best);
        let target = match t.goal {
            Goal::PerSecond(goal) => format!(">= {:.1} M/s", goal / 1e6),
            Goal::Seconds(goal) => format!("< {:.0} ms", goal * 1e3),
            Goal::None => "-".into(),
        };
        let (r_median, r_best) = (r_median.unwrap_or(f64::NAN), r_best.unwrap_or(f64::NAN));
        let verdict = if r_median.is_nan() {
            String::new()
        } else if r_median >= 1.0 {
            format!("{r_median:.2}x, {r_best:.2}x  met")
        } else if r_best >= 1.0 {
            format!("{r_median:.2}x, {r_best:.2}x  met by the fastest sample only")
        } else {
            format!("{r_median:.2}x, {r_best:.2}x  NOT met")
        };
        println!("{:<48} {figure_median:>11} {figure_best:>11} {target:>14}  {verdict}", t.what);
        if t.dir == TARGETS[1].dir {
            timing_share();
        }
    }
    println!("(ratio > 1: the target is met with that much room)");
    Ok(())
}

/// A benchmark's time (seconds per iteration) as its figure, and its ratio to the target
/// (> 1: met) when it has one.
fn figure(goal: &Goal, elems: Option<f64>, secs: f64) -> (String, Option<f64>) {
    match (goal, elems) {
        (Goal::PerSecond(goal), Some(n)) => {
            (format!("{:.2} M/s", n / secs / 1e6), Some(n / secs / goal))
        }
        (Goal::Seconds(goal), _) => (format!("{:.1} ms", secs * 1e3), Some(goal / secs)),
        (_, Some(n)) => (format!("{:.2} M/s", n / secs / 1e6), None),
        _ => (format!("{:.1} ms", secs * 1e3), None),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => run("format", &["fmt", "--all", "--", "--check"])
            .and_then(|_| {
                run(
                    "clippy",
                    &["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"],
                )
            })
            .and_then(|_| test())
            .and_then(|_| gate::ci_gate()),
        Some("test") => test(),
        Some("fuzz") => {
            // The suite runs each target on 10^4 inputs; this on 10^6 (or FUZZ_CASES).
            if std::env::var_os("FUZZ_CASES").is_none() {
                std::env::set_var("FUZZ_CASES", "1000000");
            }
            run(
                "fuzz",
                &[
                    "test",
                    "--release",
                    "-p",
                    "neuron-tune-tests",
                    "--test",
                    "fuzz",
                    "--",
                    "--nocapture",
                ],
            )
        }
        Some("bless") => gate::bless(&args[1..]),
        Some("bench-gate") => gate::bench_gate(&args[1..]),
        Some("bench") if args.get(1).is_some_and(|a| a == "--report") => bench_report(),
        Some("bench-search") => bench_search::bench_search(&args[1..]),
        Some("calibrate") => {
            let mut a = vec!["run", "--release", "--locked", "-p", "neuron-calibration"];
            a.extend(["--bin", "calibrate", "--"]);
            a.extend(args[1..].iter().map(String::as_str));
            run("calibration", &a)
        }
        Some("tune-gemm") => tune_gemm::tune_gemm(&args[1..]),
        Some("bench") => run("benchmarks", &["bench", "-p", "neuron-sim", "--bench", "sim"])
            .and_then(|_| bench_report()),
        _ => {
            eprintln!("usage: cargo xtask <ci|test|fuzz|bless|bench|bench-search|bench-gate|calibrate|tune-gemm>\n  ci     format check, clippy -D warnings, all tests, the gate against fixtures/neuron-tune.baseline.toml\n  bless  save fixtures/neuron-tune.baseline.toml again (--tuned: re-tune the fixture kernels first)\n  bench-gate  the gate's speed at prefill_16k (--baseline and --base-ref HEAD, warm; --cold: first run on an empty store)\n  test   all tests\n  fuzz   the parsers of untrusted input on 10^6 mutated inputs each (FUZZ_CASES=N to change)\n  bench  the simulator's criterion benchmarks (--report: the last run's table only)\n  bench-search  search strategies replayed on the landscapes (--seeds N, default 50;\n                --landscape SUBSTRING, --strategy a,b: a subset;\n                --first-seed S: seeds S..S+N; --dir DIR: other caches,\n                relative to the repository root)\n  calibrate     the calibration suite against published device figures (--quick: no Mamba scaling table)\n  tune-gemm     the GEMM fixture's space swept at qwen3_mlp_up on trn1 vs the default tune\n                (--seeds 1,2,3,4,5 --budget 100 --shape qwen3_mlp_up --chip trn1 --force\n                --export-landscape FILE)");
            Err(ExitCode::from(2))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}
