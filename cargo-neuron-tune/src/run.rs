//! The subcommands: discover crates, build harnesses, fan variants out to workers, report.

use crate::cargo::{BuildError, CargoFlags, KernelCrate};
use crate::cli::{Cli, Command, MessageFormat, Selection};
use crate::pool::{Answer, Pool};
use crate::store::{write_atomic, Store};
use neuron_tune_harness::protocol::{
    BenchResult, CheckResult, ChipSpec, KernelInfo, ListDoc, Response, TraceResult,
};
use neuron_tune_harness::{Params, Shape};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Documented exit codes (README, `--help`).
pub mod exit {
    pub const OK: u8 = 0;
    pub const INTERNAL: u8 = 1;
    pub const CONFIG: u8 = 2;
    pub const BUILD: u8 = 3;
    pub const CHECK: u8 = 4;
}

/// An error with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

fn fail(code: u8, message: impl Into<String>) -> Failure {
    Failure { code, message: message.into() }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        fail(exit::CONFIG, format!("{e:#}"))
    }
}

/// Where output goes: JSON events on stdout, or human lines on stderr.
pub struct Out {
    json: bool,
    /// Invalid variants seen (the space's combinations the validity rule rejects): shown
    /// as a count with a few examples, not one line each.
    invalid: std::sync::Mutex<Vec<String>>,
}

impl Out {
    pub fn event(&self, v: Value) {
        if self.json {
            println!("{v}");
        }
    }
    pub fn human(&self, s: impl AsRef<str>) {
        if !self.json {
            eprintln!("{}", s.as_ref());
        }
    }
    /// Warnings and errors are shown in both modes (stderr).
    pub fn note(&self, s: impl AsRef<str>) {
        eprintln!("{}", s.as_ref());
    }
}

/// Entry point of the binary.
pub fn main(cli: Cli) -> ExitCode {
    let out =
        Out { json: cli.global.message_format == MessageFormat::Json, invalid: Default::default() };
    match dispatch(&cli, &out) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            out.event(json!({"event": "error", "code": f.code, "message": f.message}));
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// A built kernel crate with what its harness lists.
struct Crate {
    krate: KernelCrate,
    exe: PathBuf,
    list: ListDoc,
}

fn manifest_dir(k: &KernelCrate) -> PathBuf {
    k.manifest_path.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn prepare(cargo: &CargoFlags, out: &Out) -> Result<(Vec<Crate>, PathBuf), Failure> {
    let meta = cargo.metadata()?;
    let crates = cargo.kernel_crates(&meta)?;
    if crates.is_empty() {
        return Err(fail(exit::CONFIG, format!(
            "no kernel crates in {}: a kernel crate has [package.metadata.neuron-tune] with harness = \"<bin>\"",
            meta.workspace_root
        )));
    }
    let mut built = Vec::new();
    for k in crates {
        out.human(format!("   Building {} harness `{}`", k.package, k.harness));
        let exe = cargo.build_harness(&k).map_err(|e| match e {
            BuildError::Failed { .. } => fail(exit::BUILD, e.to_string()),
            other => fail(exit::INTERNAL, other.to_string()),
        })?;
        let o = duct::cmd(&exe, ["--list"])
            .env("NEURON_TUNE_MANIFEST_DIR", manifest_dir(&k))
            .stdout_capture()
            .stderr_capture()
            .unchecked()
            .run()
            .map_err(|e| fail(exit::INTERNAL, format!("running {}: {e}", exe.display())))?;
        if !o.status.success() {
            let msg = match serde_json::from_slice::<Response>(&o.stdout) {
                Ok(Response::Error { message, .. }) => message,
                _ => String::from_utf8_lossy(&o.stderr).into_owned(),
            };
            return Err(fail(exit::CONFIG, msg));
        }
        let list: ListDoc = serde_json::from_slice(&o.stdout).map_err(|e| {
            fail(exit::INTERNAL, format!("{} --list printed no protocol JSON: {e}", exe.display()))
        })?;
        if list.protocol != neuron_tune_harness::protocol::PROTOCOL_VERSION {
            return Err(fail(exit::CONFIG, format!(
                "{}'s harness speaks worker protocol {}, this tool speaks {}: update neuron-tune-harness",
                k.package,
                list.protocol,
                neuron_tune_harness::protocol::PROTOCOL_VERSION
            )));
        }
        built.push(Crate { krate: k, exe, list });
    }
    Ok((built, cargo.target_dir(&meta)))
}

fn dispatch(cli: &Cli, out: &Out) -> Result<u8, Failure> {
    let jobs = cli
        .global
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let timeout = Duration::from_secs(cli.global.timeout);
    match &cli.command {
        Command::List { cargo } => {
            let (crates, _) = prepare(cargo, out)?;
            for c in &crates {
                out.event(json!({"event": "list", "package": c.krate.package, "kernels": c.list.kernels, "models": c.list.models}));
                out.human(format!(
                    "{} ({} kernels, {} models)",
                    c.krate.package,
                    c.list.kernels.len(),
                    c.list.models.len()
                ));
                for k in &c.list.kernels {
                    let params: Vec<String> = k
                        .space
                        .iter()
                        .map(|(n, v)| {
                            format!(
                                "{n}∈{{{}}}",
                                v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
                            )
                        })
                        .collect();
                    out.human(format!("  {:<18} {}", k.name, k.doc));
                    out.human(format!("  {:<18} space: {}", "", params.join("  ")));
                    let shapes: Vec<String> = k
                        .shapes
                        .iter()
                        .map(|(n, s)| {
                            format!("{n} {s} ({} valid)", k.valid_variants.get(n).unwrap_or(&0))
                        })
                        .collect();
                    out.human(format!("  {:<18} shapes: {}", "", shapes.join("; ")));
                }
                for m in &c.list.models {
                    out.human(format!("  model {:<12} {}", m.name, m.doc));
                }
            }
            Ok(exit::OK)
        }
        Command::Build { cargo, select } => {
            let (crates, target) = prepare(cargo, out)?;
            let store = open_store(&target, out)?;
            let chip = chip_spec(&select.chip)?;
            let mut total = 0;
            for c in &crates {
                let variants = select_variants(&c.list, select)?;
                let traces = trace_all(c, &variants, &chip, jobs, timeout);
                for (v, t) in variants.iter().zip(&traces) {
                    match t {
                        Ok(t) => {
                            store.put("variants", &t.program_hash, &json!({"kernel": v.kernel, "shape": v.shape, "params": v.params, "chip": chip.name, "trace": t}))?;
                            out.event(json!({"event": "build", "kernel": v.kernel, "shape": v.shape_name, "params": v.params, "chip": chip.name,
                                "program_hash": t.program_hash, "instruction_count": t.instruction_count, "sbuf_bytes_per_partition": t.sbuf_bytes_per_partition}));
                            out.human(format!(
                                "  traced {:<16} {:<14} {:<40} {:>9} instructions  {}",
                                v.kernel,
                                v.shape_name,
                                v.params.to_string(),
                                t.instruction_count,
                                &t.program_hash[..12]
                            ));
                        }
                        Err(e) => report_variant_failure(out, v, &chip, e),
                    }
                }
                total += variants.len();
            }
            out.flush_invalid();
            out.event(json!({"event": "summary", "command": "build", "variants": total}));
            Ok(exit::OK)
        }
        Command::Check { cargo, select, cases, seed } => {
            let (crates, target) = prepare(cargo, out)?;
            let chip = chip_spec(&select.chip)?;
            let seed = seed.unwrap_or_else(default_seed);
            out.human(format!("   Checking with seed {seed} ({cases} cases per variant; replay with --seed {seed})"));
            let regress = target.join("neuron-tune").join("regressions");
            std::fs::create_dir_all(&regress).map_err(|e| fail(exit::INTERNAL, e.to_string()))?;
            let mut failed = 0;
            let mut total = 0;
            for c in &crates {
                let mut variants = select_variants(&c.list, select)?;
                // A check covers the kernel's small-shape strategy, not a named shape.
                variants.dedup_by(|a, b| a.kernel == b.kernel && a.params == b.params);
                let reqs: Vec<String> = variants
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let file = regress.join(format!("{}-{}.txt", v.kernel, short_hash(&v.params.to_string())));
                        json!({"type": "check", "id": i, "kernel": v.kernel, "params": v.params, "cases": cases, "seed": seed, "chip": chip, "regressions": file}).to_string()
                    })
                    .collect();
                let answers = with_progress(out, "check", &reqs, |r| {
                    Pool::new(&c.exe, &manifest_dir(&c.krate), jobs, timeout).run(&reqs, r)
                });
                for (v, a) in variants.iter().zip(answers) {
                    total += 1;
                    match result::<CheckResult>(a) {
                        Ok(r) => {
                            out.event(json!({"event": "check", "kernel": v.kernel, "shape": Value::Null, "params": v.params, "chip": chip.name, "passed": r.passed, "cases": r.cases,
                                "max_abs_err": r.max_abs_err, "max_rel_err": r.max_rel_err, "mse": r.mse, "cosine": r.cosine, "seed": r.seed, "failure": r.failure}));
                            if r.passed {
                                out.human(format!("  ok     {:<18} {:<40} cases {:>3}  max abs err {:.2e}  cosine {:.6}", v.kernel, v.params.to_string(), r.cases, r.max_abs_err, r.cosine));
                            } else {
                                failed += 1;
                                let f = r.failure.as_ref().expect("a failed check has a failure");
                                out.note(format!(
                                    "  FAILED {:<18} {:<40} after {} cases (seed {})",
                                    v.kernel,
                                    v.params.to_string(),
                                    r.cases,
                                    r.seed
                                ));
                                out.note(format!("         smallest failing shape {} (input seed {}, {:?} inputs)", f.shape, f.input_seed, f.distribution));
                                out.note(format!("         {}", f.message));
                                out.note(format!("         max abs err {:.3e}  max rel err {:.3e}  MSE {:.3e}  cosine {:.6}", r.max_abs_err, r.max_rel_err, r.mse, r.cosine));
                            }
                        }
                        Err(e) => {
                            failed += 1;
                            report_variant_failure(out, v, &chip, &e);
                        }
                    }
                }
            }
            out.flush_invalid();
            out.event(json!({"event": "summary", "command": "check", "variants": total, "failed": failed, "seed": seed}));
            out.human(format!("   {} of {total} variants passed", total - failed));
            Ok(if failed > 0 { exit::CHECK } else { exit::OK })
        }
        Command::Bench { cargo, select, force } => {
            let (crates, target) = prepare(cargo, out)?;
            let store = open_store(&target, out)?;
            let chip = chip_spec(&select.chip)?;
            let chip_text = chip.toml.clone().unwrap_or_else(|| chip.name.clone());
            let (mut simulated, mut cached, mut failed, mut crashed) = (0, 0, 0, 0);
            let mut rows = Vec::new();
            for c in &crates {
                let variants = select_variants(&c.list, select)?;
                let traces = trace_all(c, &variants, &chip, jobs, timeout);
                let mut todo = Vec::new();
                let mut results: Vec<Option<(BenchResult, bool)>> = vec![None; variants.len()];
                for (i, (v, t)) in variants.iter().zip(&traces).enumerate() {
                    match t {
                        Ok(t) => {
                            let key = Store::key(&t.program_hash, &chip_text, "bench");
                            match store.get::<BenchResult>("bench", &key).filter(|_| !force) {
                                Some(r) => results[i] = Some((r, true)),
                                None => todo.push((i, key)),
                            }
                        }
                        Err(e) => {
                            failed += 1;
                            crashed += is_crash(e) as usize;
                            report_variant_failure(out, v, &chip, e);
                        }
                    }
                }
                let reqs: Vec<String> = todo
                    .iter()
                    .map(|(i, _)| {
                        let v = &variants[*i];
                        json!({"type": "bench", "id": i, "kernel": v.kernel, "params": v.params, "shape": v.shape, "chip": chip}).to_string()
                    })
                    .collect();
                // Each result is stored the moment it arrives: an interrupted run keeps it.
                let answers = with_progress(out, "bench", &reqs, |r| {
                    Pool::new(&c.exe, &manifest_dir(&c.krate), jobs, timeout).run(&reqs, &|j, a| {
                        if let Ok(Response::Result { result, .. }) = a {
                            let _ = store.put("bench", &todo[j].1, result);
                        }
                        r(j, a)
                    })
                });
                for ((i, _), a) in todo.iter().zip(answers) {
                    match result::<BenchResult>(a) {
                        Ok(r) => {
                            simulated += 1;
                            results[*i] = Some((r, false));
                        }
                        Err(e) => {
                            failed += 1;
                            crashed += is_crash(&e) as usize;
                            report_variant_failure(out, &variants[*i], &chip, &e);
                        }
                    }
                }
                for (v, r) in variants.iter().zip(results) {
                    let Some((r, was_cached)) = r else { continue };
                    cached += was_cached as usize;
                    out.event(json!({"event": "bench", "kernel": v.kernel, "shape": v.shape_name, "params": v.params, "chip": chip.name,
                        "cycles": r.cycles, "time_us": r.time_us, "kernel_time_us": r.kernel_time_us, "tflops": r.tflops,
                        "bottleneck": r.bottleneck, "program_hash": r.program_hash, "cached": was_cached}));
                    rows.push((v.clone(), r, was_cached));
                }
            }
            out.flush_invalid();
            print_bench_table(out, &rows);
            let defaults: Vec<(String, Params)> = crates
                .iter()
                .flat_map(|c| c.list.kernels.iter().map(|k| (k.name.clone(), k.defaults.clone())))
                .collect();
            print_best(out, &rows, &defaults);
            let invalid = failed - crashed;
            out.event(json!({"event": "summary", "command": "bench", "variants": rows.len() + failed, "simulated": simulated, "cached": cached, "invalid": invalid, "failed": crashed}));
            out.human(format!(
                "   {} variants: {simulated} simulated, {cached} from the store, {invalid} invalid, {crashed} crashed or hung (store: {})",
                rows.len() + failed,
                store.root().display()
            ));
            Ok(if crashed > 0 { exit::CHECK } else { exit::OK })
        }
        Command::Profile { cargo, kernel, params, shape, chip, trace } => {
            let (crates, _) = prepare(cargo, out)?;
            let chip = chip_spec(chip)?;
            let (c, k) = crates
                .iter()
                .find_map(|c| c.list.kernels.iter().find(|k| &k.name == kernel).map(|k| (c, k)))
                .ok_or_else(|| {
                    fail(
                        exit::CONFIG,
                        format!("no kernel `{kernel}` (have: {})", all_kernels(&crates)),
                    )
                })?;
            let p = parse_params(k, params.as_deref())?;
            let (shape_name, sh) = match shape {
                Some(n) => (
                    n.clone(),
                    k.shapes.iter().find(|(s, _)| s == n).map(|(_, s)| s.clone()).ok_or_else(
                        || fail(exit::CONFIG, format!("kernel `{kernel}` has no shape `{n}`")),
                    )?,
                ),
                None => k.shapes.first().cloned().ok_or_else(|| {
                    fail(exit::CONFIG, format!("kernel `{kernel}` has no shapes"))
                })?,
            };
            let req = json!({"type": "profile", "id": 0, "kernel": kernel, "params": p, "shape": sh, "chip": chip, "trace": trace.is_some()}).to_string();
            let a = Pool::new(&c.exe, &manifest_dir(&c.krate), 1, timeout)
                .run(std::slice::from_ref(&req), &|_, _| {})
                .remove(0);
            let r: BenchResult = result(a)
                .map_err(|e| fail(exit::CHECK, format!("{kernel} {p} at {shape_name}: {e}")))?;
            let prof = r.profile.clone().unwrap_or(Value::Null);
            if let (Some(path), Some(t)) = (trace, &r.trace) {
                write_atomic(
                    path,
                    serde_json::to_string(t)
                        .map_err(|e| fail(exit::INTERNAL, e.to_string()))?
                        .as_bytes(),
                )?;
                out.human(format!(
                    "   Wrote Perfetto trace {} (open in ui.perfetto.dev)",
                    path.display()
                ));
            }
            out.event(json!({"event": "profile", "kernel": kernel, "shape": shape_name, "params": p, "chip": chip.name, "cycles": r.cycles, "time_us": r.time_us,
                "tflops": r.tflops, "bottleneck": r.bottleneck, "profile": prof, "trace": trace}));
            print_profile(out, kernel, &shape_name, &p, &prof);
            Ok(exit::OK)
        }
        Command::New { name, template, manifest_path } => {
            crate::new::new_kernel(name, *template, manifest_path.as_deref(), out)
        }
    }
}

/// A variant to run.
#[derive(Clone, Debug)]
pub struct Variant {
    pub kernel: String,
    pub shape_name: String,
    pub shape: Shape,
    pub params: Params,
}

fn glob(pat: &str, name: &str) -> bool {
    // `*` matches any run of characters; written here because one wildcard is all the
    // selection syntax needs.
    let parts: Vec<&str> = pat.split('*').collect();
    if parts.len() == 1 {
        return pat == name;
    }
    let mut rest = name;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(p) else { return false };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else {
            let Some(pos) = rest.find(p) else { return false };
            rest = &rest[pos + p.len()..];
        }
    }
    true
}

fn parse_params(k: &KernelInfo, text: Option<&str>) -> Result<Params, Failure> {
    match text {
        None => Ok(k.defaults.clone()),
        Some(t) => Params::parse_overrides(&k.defaults, t, &k.params)
            .map_err(|e| fail(exit::CONFIG, format!("--params for `{}`: {e}", k.name))),
    }
}

fn select_variants(list: &ListDoc, s: &Selection) -> Result<Vec<Variant>, Failure> {
    let mut out = Vec::new();
    for pat in &s.kernels {
        if !list.kernels.iter().any(|k| glob(pat, &k.name)) {
            return Err(fail(
                exit::CONFIG,
                format!(
                    "--kernel {pat}: no such kernel in {} (have: {})",
                    list.crate_name,
                    list.kernels.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    for k in &list.kernels {
        if !s.kernels.is_empty() && !s.kernels.iter().any(|p| glob(p, &k.name)) {
            continue;
        }
        let param_sets = if s.all_variants {
            Params::grid(&k.space)
        } else {
            vec![parse_params(k, s.params.as_deref())?]
        };
        for (sn, sh) in &k.shapes {
            if !s.shapes.is_empty() && !s.shapes.contains(sn) {
                continue;
            }
            for p in &param_sets {
                out.push(Variant {
                    kernel: k.name.clone(),
                    shape_name: sn.clone(),
                    shape: sh.clone(),
                    params: p.clone(),
                });
            }
        }
    }
    Ok(out)
}

fn chip_spec(chip: &str) -> Result<ChipSpec, Failure> {
    let path = Path::new(chip);
    if neuron_sim::Chip::builtin(chip).is_some() {
        return Ok(ChipSpec::builtin(chip));
    }
    if path.exists() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| fail(exit::CONFIG, format!("{}: {e}", path.display())))?;
        neuron_sim::Chip::from_toml(&text)
            .map_err(|e| fail(exit::CONFIG, format!("{}: {e}", path.display())))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| chip.into());
        return Ok(ChipSpec { name, toml: Some(text) });
    }
    Err(fail(
        exit::CONFIG,
        format!(
            "--chip {chip}: not a built-in chip ({}) nor a chip TOML file",
            neuron_sim::Chip::BUILTIN.join(", ")
        ),
    ))
}

fn open_store(target: &Path, out: &Out) -> Result<Store, Failure> {
    Ok(Store::open(target, |lock| {
        out.note(format!(
            "    Blocking waiting for another cargo neuron-tune run (lock {})",
            lock.display()
        ))
    })?)
}

fn default_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn short_hash(s: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(s.as_bytes()))
}

fn all_kernels(crates: &[Crate]) -> String {
    crates
        .iter()
        .flat_map(|c| c.list.kernels.iter().map(|k| k.name.clone()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn result<T: serde::de::DeserializeOwned>(a: Answer) -> Result<T, String> {
    match a? {
        Response::Result { result, .. } => {
            serde_json::from_value(result).map_err(|e| format!("unexpected result: {e}"))
        }
        Response::Error { kind, message, .. } => Err(format!("{kind}: {message}")),
        Response::Hello { .. } => Err("unexpected hello".into()),
    }
}

/// Crashes and hangs (not invalid variants) make `bench` fail.
fn is_crash(e: &str) -> bool {
    !e.starts_with("invalid: ")
}

fn report_variant_failure(out: &Out, v: &Variant, chip: &ChipSpec, e: &str) {
    // `e` is "<protocol error kind>: <message>" from the worker, or the pool's own words.
    let (kind, e) = if let Some(m) = e.strip_prefix("invalid: ") {
        ("invalid", m.trim_start_matches("invalid variant: "))
    } else if let Some(m) = e.strip_prefix("panic: ") {
        ("panic", m)
    } else if e.contains("timed out") {
        ("timeout", e)
    } else {
        ("failed", e)
    };
    out.event(json!({"event": "variant_failed", "kernel": v.kernel, "shape": v.shape_name, "params": v.params, "chip": chip.name, "kind": kind, "message": e}));
    let line = format!("  {kind:<8} {} {} at {}: {e}", v.kernel, v.params, v.shape_name);
    if kind == "invalid" {
        out.invalid.lock().unwrap().push(line);
    } else {
        out.note(line);
    }
}

impl Out {
    /// Print the invalid variants seen: all when few, else a count and examples.
    fn flush_invalid(&self) {
        let lines = std::mem::take(&mut *self.invalid.lock().unwrap());
        if lines.len() <= 4 {
            for l in &lines {
                self.note(l);
            }
        } else {
            self.note(format!("   {} invalid variants skipped (the kernels' validity rules or hardware limits), e.g.:", lines.len()));
            for l in lines.iter().take(3) {
                self.note(l);
            }
        }
    }
}

fn trace_all(
    c: &Crate,
    variants: &[Variant],
    chip: &ChipSpec,
    jobs: usize,
    timeout: Duration,
) -> Vec<Result<TraceResult, String>> {
    let reqs: Vec<String> = variants
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"type": "trace", "id": i, "kernel": v.kernel, "params": v.params, "shape": v.shape, "chip": chip}).to_string())
        .collect();
    Pool::new(&c.exe, &manifest_dir(&c.krate), jobs, timeout)
        .run(&reqs, &|_, _| {})
        .into_iter()
        .map(result)
        .collect()
}

fn with_progress(
    out: &Out,
    what: &str,
    reqs: &[String],
    f: impl FnOnce(&(dyn Fn(usize, &Answer) + Sync)) -> Vec<Answer>,
) -> Vec<Answer> {
    let bar = if out.json || reqs.is_empty() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(reqs.len() as u64)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("  {prefix:>8} [{bar:30}] {pos}/{len} {elapsed}")
            .unwrap()
            .progress_chars("=> "),
    );
    bar.set_prefix(what.to_string());
    let r = f(&|_, _| bar.inc(1));
    bar.finish_and_clear();
    r
}

fn print_bench_table(out: &Out, rows: &[(Variant, BenchResult, bool)]) {
    if rows.is_empty() {
        return;
    }
    out.human(format!(
        "\n  {:<16} {:<14} {:<44} {:>11} {:>8} {:<18} {}",
        "kernel", "shape", "params", "time µs", "TFLOP/s", "bottleneck", ""
    ));
    for (v, r, cached) in rows {
        out.human(format!(
            "  {:<16} {:<14} {:<44} {:>11.1} {:>8.2} {:<18} {}",
            v.kernel,
            v.shape_name,
            v.params.to_string(),
            r.time_us,
            r.tflops,
            r.bottleneck,
            if *cached { "(cached)" } else { "" }
        ));
    }
}

/// Per kernel and shape: the fastest variant benchmarked and its gain over the default.
fn print_best(out: &Out, rows: &[(Variant, BenchResult, bool)], defaults: &[(String, Params)]) {
    let mut keys: Vec<(&str, &str)> =
        rows.iter().map(|(v, _, _)| (v.kernel.as_str(), v.shape_name.as_str())).collect();
    keys.dedup();
    let groups: Vec<_> = keys
        .iter()
        .filter_map(|&(k, s)| {
            let group: Vec<_> =
                rows.iter().filter(|(v, _, _)| v.kernel == k && v.shape_name == s).collect();
            (group.len() > 1).then_some((k, s, group))
        })
        .collect();
    if groups.is_empty() {
        return;
    }
    out.human("\n  fastest variant per kernel and shape:");
    for (k, s, group) in groups {
        let best =
            group.iter().min_by(|a, b| a.1.time_us.total_cmp(&b.1.time_us)).expect("non-empty");
        let default = defaults
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, d)| group.iter().find(|(v, _, _)| &v.params == d));
        let gain = default.map_or(String::new(), |d| {
            format!(
                "  {:.2}x faster than the default ({:.1} µs)",
                d.1.time_us / best.1.time_us,
                d.1.time_us
            )
        });
        out.event(json!({"event": "best", "kernel": k, "shape": s, "best_params": best.0.params, "best_time": best.1.time_us,
            "default_time": default.map(|d| d.1.time_us), "evaluations": group.len()}));
        out.human(format!(
            "  {k:<16} {s:<14} {:>9.1} µs  {}{gain}  ({} variants)",
            best.1.time_us,
            best.0.params,
            group.len()
        ));
    }
}

fn print_profile(out: &Out, kernel: &str, shape: &str, p: &Params, prof: &Value) {
    let f = |k: &str| prof[k].as_f64().unwrap_or(0.0);
    out.human(format!("\n  {kernel} {p} at {shape} on {}", prof["chip"].as_str().unwrap_or("?")));
    out.human(format!(
        "  time {:.1} µs ({:.1} µs kernel + {:.1} µs launch), {} cycles",
        f("total_time_us"),
        f("kernel_time_us"),
        f("launch_overhead_us"),
        prof["neuroncore_cycle_count"]
    ));
    out.human(format!(
        "  {:.2} TFLOP/s, MFU {:.1}%, HBM {:.0} GB/s (MBU {:.0}%), roofline bound {:.1} µs",
        f("tflops"),
        f("mfu_estimated_percent"),
        f("hbm_bandwidth_gbps"),
        f("mbu_estimated_percent"),
        f("roofline_bound_us")
    ));
    let b = &prof["bottleneck"];
    out.human(format!("\n  {}", b["summary"].as_str().unwrap_or("")));
    for e in b["evidence"].as_array().into_iter().flatten() {
        out.human(format!("    · {}", e.as_str().unwrap_or("")));
    }
    for a in b["advice"].as_array().into_iter().flatten() {
        out.human(format!("    → {}", a.as_str().unwrap_or("")));
    }
    out.human("\n  top source lines:");
    for l in prof["top_lines"].as_array().into_iter().flatten().take(8) {
        out.human(format!(
            "    {:>10.1} µs  {:>7}×  {:<14} {}",
            l["busy_time_us"].as_f64().unwrap_or(0.0),
            l["instruction_count"],
            l["opcode"].as_str().unwrap_or(""),
            l["nki_source_location"].as_str().unwrap_or("")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob("gemm", "gemm") && !glob("gemm", "gemm2"));
        assert!(glob("attention_*", "attention_flash") && !glob("attention_*", "flash_attention"));
        assert!(
            glob("*norm", "rmsnorm")
                && glob("*", "x")
                && glob("a*c*e", "abcde")
                && !glob("a*c*e", "abcd")
        );
    }
}
