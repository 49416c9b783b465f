//! `cargo xtask tune-gemm`: does the default search find the GEMM fixture's best variant?
//!
//! Through the real CLI, on the fixture crate (`neuron-fixtures-kernels`), by default at
//! `qwen3_mlp_up` (4096 × 8192 × 8192 bf16) on trn1:
//!
//! 1. `bench --all-variants`: every valid variant of the GEMM space is simulated (the variant
//!    store under `<target>/neuron-tune/` serves any already simulated, so a rerun takes
//!    seconds): the space's best time, and the default variant's;
//! 2. `profile` of that best variant: the share of the kernel time TensorE is active;
//! 3. `tune --budget B --seed S` with the default strategy for each seed: its best, and the
//!    ratio to the space's best.
//!
//! Targets (exit status 1 if one is missed, the numbers are printed either way): every seed
//! within 2 % of the space's best, and TensorE active at least 85 % of the best variant's
//! kernel time. `tune` records its winner in the crate's `neuron-tune.tuned.toml`; this task
//! puts that file back as it found it.
//!
//! Options: `--seeds 1,2,3,4,5`, `--budget 100`, `--shape qwen3_mlp_up`, `--chip trn1`,
//! `--force` (simulate the whole space again instead of taking the store's results: the
//! sweep's cold wall time), `--export-landscape FILE` (the sweep as a Kernel Tuner cache,
//! how `fixtures/landscapes/gemm_*` was made).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

/// Within this factor of the space's best.
const RATIO_TARGET: f64 = 1.02;
/// TensorE active time over kernel time, at least.
const TENSOR_TARGET: f64 = 0.85;

struct Opts {
    seeds: Vec<u64>,
    budget: u64,
    shape: String,
    chip: String,
    force: bool,
    /// Write the sweep as a Kernel Tuner cache (a landscape `bench-search` replays).
    export: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        seeds: vec![1, 2, 3, 4, 5],
        budget: 100,
        shape: "qwen3_mlp_up".into(),
        chip: "trn1".into(),
        force: false,
        export: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--seeds" => {
                o.seeds = value()?
                    .split(',')
                    .map(|s| s.trim().parse().map_err(|_| format!("bad seed `{s}`")))
                    .collect::<Result<_, _>>()?;
            }
            "--budget" => o.budget = value()?.parse().map_err(|_| "bad --budget".to_string())?,
            "--shape" => o.shape = value()?,
            "--chip" => o.chip = value()?,
            "--force" => o.force = true,
            "--export-landscape" => o.export = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    if o.seeds.is_empty() {
        return Err("--seeds needs at least one seed".into());
    }
    Ok(o)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `cargo neuron-tune ARGS --message-format json` on the GEMM fixture: its JSON events (the
/// human status stays on our stderr).
fn neuron_tune(args: &[&str]) -> Result<Vec<Value>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut full = vec!["neuron-tune"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-p", "neuron-fixtures-kernels", "--message-format", "json"]);
    eprintln!("xtask: tune-gemm: cargo {}", full.join(" "));
    let out = Command::new(cargo)
        .args(&full)
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("`cargo {}` failed ({})", full.join(" "), out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect())
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> impl Iterator<Item = &'a Value> {
    let kind = kind.to_string();
    events.iter().filter(move |e| e["event"] == kind.as_str())
}

/// The sweep as a Kernel Tuner cache: the space from `list` (its parameters in name order),
/// one entry per valid variant with its time in µs; the invalid ones are absent, which a
/// landscape reads as invalid, as the tuner's validity rule does.
fn export_landscape(path: &Path, results: &[&Value]) -> Result<(), String> {
    let listed = neuron_tune(&["list"])?;
    let space = listed
        .iter()
        .flat_map(|e| e["kernels"].as_array().into_iter().flatten())
        .find(|k| k["name"] == "gemm")
        .and_then(|k| k["space"].as_object().cloned())
        .ok_or("`list` gave no space for gemm")?;
    let keys: Vec<&String> = space.keys().collect();
    let mut cache = serde_json::Map::new();
    for r in results {
        let Some(time) = r["time_us"].as_f64() else { continue };
        let p = &r["params"];
        let id: Vec<String> = keys.iter().map(|k| param_text(&p[k.as_str()])).collect();
        let mut entry: serde_json::Map<String, Value> =
            keys.iter().map(|k| ((*k).clone(), p[k.as_str()].clone())).collect();
        entry.insert("time".into(), time.into());
        cache.insert(id.join(","), Value::Object(entry));
    }
    let doc = serde_json::json!({
        "tune_params_keys": keys,
        "tune_params": space,
        "objective": "time",
        // The simulator's times are µs; Kernel Tuner's own caches are ms and have no such key.
        "time_unit": "µs",
        "cache": cache,
    });
    std::fs::write(path, doc.to_string()).map_err(|e| format!("{}: {e}", path.display()))
}

/// A parameter's value as the CLI and Kernel Tuner keys spell it (strings unquoted).
fn param_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// `k=v,k=v` for `--params`, from a params object.
fn params_arg(p: &Value) -> String {
    p.as_object()
        .map(|m| {
            m.iter().map(|(k, v)| format!("{k}={}", param_text(v))).collect::<Vec<_>>().join(",")
        })
        .unwrap_or_default()
}

/// The tuned database `tune` writes into; restored on drop.
struct KeepTuned {
    path: PathBuf,
    before: Option<Vec<u8>>,
}

impl KeepTuned {
    fn new() -> Self {
        let path = root().join("fixtures/kernels/neuron-tune.tuned.toml");
        let before = std::fs::read(&path).ok();
        KeepTuned { path, before }
    }
}

impl Drop for KeepTuned {
    fn drop(&mut self) {
        let _ = match &self.before {
            Some(bytes) => std::fs::write(&self.path, bytes),
            None => std::fs::remove_file(&self.path).or(Ok(())),
        };
    }
}

/// The `tune-gemm` subcommand; `args` are those after it.
pub fn tune_gemm(args: &[String]) -> Result<(), ExitCode> {
    let o = parse(args).map_err(|e| {
        eprintln!("xtask: tune-gemm: {e}");
        ExitCode::from(2)
    })?;
    let fail = |e: String| {
        eprintln!("xtask: tune-gemm: {e}");
        ExitCode::from(1)
    };
    let start = Instant::now();
    let (shape, chip) = (o.shape.as_str(), o.chip.as_str());
    let sel = ["--kernel", "gemm", "--shape", shape, "--chip", chip];

    // 1. The whole space.
    let mut bench = vec!["bench", "--all-variants"];
    bench.extend_from_slice(&sel);
    if o.force {
        bench.push("--force");
    }
    let events = neuron_tune(&bench).map_err(fail)?;
    let sweep_secs = start.elapsed().as_secs_f64();
    let results: Vec<&Value> = of_kind(&events, "bench").collect();
    let best = results
        .iter()
        .filter_map(|e| Some((e["time_us"].as_f64()?, *e)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .ok_or_else(|| fail("the sweep measured no variant".into()))?;
    let (best_time, best_params) = (best.0, best.1["params"].clone());
    let summary = of_kind(&events, "summary").next().cloned().unwrap_or(Value::Null);
    let default_time = of_kind(&events, "best").next().and_then(|e| e["default_time"].as_f64());
    if let Some(path) = &o.export {
        export_landscape(path, &results).map_err(fail)?;
        eprintln!("xtask: tune-gemm: wrote the sweep as a landscape to {}", path.display());
    }

    // 2. TensorE's share of the best variant's kernel time.
    let mut profile = vec!["profile", "gemm", "--params"];
    let p = params_arg(&best_params);
    profile.push(&p);
    profile.extend_from_slice(&sel[2..]);
    let prof = neuron_tune(&profile).map_err(fail)?;
    let pr = of_kind(&prof, "profile")
        .next()
        .map(|e| e["profile"].clone())
        .ok_or_else(|| fail("profile gave no profile event".into()))?;
    let tensor_us = pr["engines"]
        .as_array()
        .and_then(|es| es.iter().find(|e| e["engine"] == "Tensor"))
        .and_then(|e| e["active_time_us"].as_f64())
        .unwrap_or(0.0);
    let kernel_us = pr["kernel_time_us"].as_f64().unwrap_or(f64::NAN);
    let tensor_share = tensor_us / kernel_us;

    // 3. The default strategy, per seed.
    let keep = KeepTuned::new();
    let budget = o.budget.to_string();
    let mut tuned = Vec::new();
    for &seed in &o.seeds {
        let t0 = Instant::now();
        let s = seed.to_string();
        let mut tune = vec!["tune", "--budget", &budget, "--seed", &s];
        tune.extend_from_slice(&sel);
        let ev = neuron_tune(&tune).map_err(fail)?;
        let t = of_kind(&ev, "tune").next().cloned().ok_or_else(|| fail("no tune event".into()))?;
        tuned.push((seed, t, t0.elapsed().as_secs_f64()));
    }
    drop(keep);

    // The report.
    println!("\nGEMM {shape} on {chip}, the fixture space, through cargo neuron-tune:");
    println!(
        "  space: {} variants, {} valid, {} simulated now, {} from the store ({sweep_secs:.0} s)",
        summary["variants"],
        summary["variants"].as_u64().unwrap_or(0) - summary["invalid"].as_u64().unwrap_or(0),
        summary["simulated"],
        summary["cached"]
    );
    println!("  space's best:  {best_time:>10.1} µs  {}", params_arg(&best_params));
    if let Some(d) = default_time {
        println!("  default:       {d:>10.1} µs  ({:.2}x the best)", d / best_time);
    }
    let tensor_ok = tensor_share >= TENSOR_TARGET;
    println!(
        "  TensorE active {:.1} % of the best's kernel time ({tensor_us:.1} of {kernel_us:.1} µs; \
         target >= {:.0} %): {}",
        100.0 * tensor_share,
        100.0 * TENSOR_TARGET,
        if tensor_ok { "met" } else { "MISSED" }
    );
    println!("  default tune, --budget {} (simulations; pruned proposals are free):", o.budget);
    let mut all_ok = tensor_ok;
    for (seed, t, secs) in &tuned {
        let time = t["best_time"].as_f64().unwrap_or(f64::NAN);
        let ratio = time / best_time;
        let ok = ratio <= RATIO_TARGET;
        all_ok &= ok;
        println!(
            "    seed {seed:<4} {time:>10.1} µs  ratio {ratio:.4}  {}  ({secs:.0} s)  {}",
            if ok { "within 2 %" } else { "MISSED" },
            params_arg(&t["best_params"])
        );
    }
    println!("  wall time {:.0} s", start.elapsed().as_secs_f64());
    if all_ok {
        println!("  targets met");
        Ok(())
    } else {
        println!("  targets MISSED");
        Err(ExitCode::from(1))
    }
}
