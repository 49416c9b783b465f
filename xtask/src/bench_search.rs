//! `cargo xtask bench-search`: every built-in strategy replayed on every landscape.
//!
//! Each landscape in `fixtures/landscapes/` (Kernel Tuner caches and T4 results, the
//! `.T1.json` problem descriptions skipped) is replayed with every built-in strategy over
//! `--seeds N` seeds (default 50), 200 evaluations each (`--landscape SUBSTRING` and
//! `--strategy a,b` restrict the run to a subset, for iterating on a strategy; `--first-seed S`
//! starts the seeds at S, for held-out seeds; `--dir DIR` replays the caches of another
//! directory). The table gives the mean fraction of
//! the optimum reached (optimal time / best time found) after 25, 50, 100 and 200
//! evaluations, beside valid-only random search computed exactly from order statistics.
//!
//! Targets for the `default` strategy (exit status 1 if one is missed): it beats exact random
//! search at every budget on every landscape, and on the convolution landscapes it reaches
//! at least 0.90 at 50 evaluations and 0.97 at 200.
//!
//! It always runs optimised: started from a debug build, it re-runs itself with `--release`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use neuron_tune_search::{baseline, builtin, driver, Budget, Landscape, BUILTIN};

const BUDGETS: [usize; 4] = [25, 50, 100, 200];

/// The targets for the default strategy on a landscape: (budget, minimum fraction).
fn absolute_targets(landscape: &str) -> &'static [(usize, f64)] {
    if landscape.starts_with("convolution") {
        &[(50, 0.90), (200, 0.97)]
    } else {
        &[]
    }
}

fn landscapes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/landscapes")
}

/// Mean fraction of the optimum at each budget for one strategy over `seeds`.
fn replay(landscape: &Landscape, strategy: &str, seeds: std::ops::Range<u64>) -> [f64; 4] {
    let n = seeds.end - seeds.start;
    let max = *BUDGETS.last().expect("budgets");
    let (_, opt) = landscape.optimum();
    let mut sums = [0.0; 4];
    for seed in seeds {
        let mut s = builtin(strategy, seed).expect("built-in strategy");
        let mut oracle = landscape.oracle();
        let mut eval = landscape;
        let r = driver::run(
            s.as_mut(),
            landscape.space(),
            &mut oracle,
            &mut eval,
            Budget::evaluations(max),
            None,
        )
        .expect("built-in strategies do not fail");
        for (sum, &k) in sums.iter_mut().zip(&BUDGETS) {
            // A run shorter than k (space exhausted) keeps its final best.
            let best = r.best_so_far.get(k - 1).or(r.best_so_far.last()).copied().flatten();
            *sum += best.map_or(0.0, |b| opt / b);
        }
    }
    sums.map(|s| s / n as f64)
}

/// The value after `flag`, if the flag is given; an error if the value is missing.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Result<Option<&'a str>, ExitCode> {
    match args.iter().position(|a| a == flag) {
        None => Ok(None),
        Some(i) => args.get(i + 1).map(|v| Some(v.as_str())).ok_or_else(|| {
            eprintln!("xtask: bench-search: {flag} needs a value");
            ExitCode::from(2)
        }),
    }
}

/// The number after `flag` (at least `min`), or `default` without the flag.
fn number_flag(args: &[String], flag: &str, default: u64, min: u64) -> Result<u64, ExitCode> {
    match flag_value(args, flag)? {
        None => Ok(default),
        Some(v) => v.parse().ok().filter(|&n| n >= min).ok_or_else(|| {
            eprintln!("xtask: bench-search: {flag} needs a number of at least {min}");
            ExitCode::from(2)
        }),
    }
}

/// The `bench-search` subcommand; `args` are those after it.
pub fn bench_search(args: &[String]) -> Result<(), ExitCode> {
    if cfg!(debug_assertions) {
        let mut all =
            vec!["run", "--quiet", "--release", "--package", "xtask", "--", "bench-search"];
        all.extend(args.iter().map(String::as_str));
        return crate::run("bench-search (release build)", &all);
    }
    let count = number_flag(args, "--seeds", 50, 1)?;
    // `--first-seed S`: seeds S..S+N, e.g. held-out seeds no setting was chosen on.
    let first = number_flag(args, "--first-seed", 0, 0)?;
    let seeds = first..first + count;
    // Subset mode for iterating on a strategy: `--landscape SUBSTRING`, `--strategy a,b`.
    let only_landscape = flag_value(args, "--landscape")?;
    let strategies: Vec<&str> = match flag_value(args, "--strategy")? {
        None => BUILTIN.to_vec(),
        Some(list) => {
            let names: Vec<&str> = list.split(',').collect();
            if let Some(bad) = names.iter().find(|n| !BUILTIN.contains(n)) {
                eprintln!(
                    "xtask: bench-search: unknown strategy `{bad}` (built-in: {})",
                    BUILTIN.join(", ")
                );
                return Err(ExitCode::from(2));
            }
            names
        }
    };
    // `--dir DIR`: replay other caches (e.g. a sweep exported from `bench --all-variants`).
    // (A relative DIR is taken from the repository root, where a debug build re-runs this.)
    let dir = flag_value(args, "--dir")?.map_or_else(landscapes_dir, |d| crate::root().join(d));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| {
            eprintln!("xtask: cannot read {}: {e}", dir.display());
            ExitCode::from(1)
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            (name.ends_with(".json") || name.ends_with(".json.gz"))
                && !name.contains(".T1.")
                && only_landscape.is_none_or(|l| name.contains(l))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        eprintln!("xtask: bench-search: no landscape in {} matches", dir.display());
        return Err(ExitCode::from(2));
    }
    let started = Instant::now();
    let mut misses = Vec::new();
    println!(
        "Mean fraction of the optimum reached (optimal time / best time found), seeds {}–{};\n\
         `random*` is valid-only random search computed exactly (order statistics).",
        seeds.start,
        seeds.end - 1
    );
    for file in &files {
        let landscape = Landscape::load(file).map_err(|e| {
            eprintln!("xtask: {e}");
            ExitCode::from(1)
        })?;
        let valid = landscape.valid_values();
        let exact = BUDGETS.map(|k| {
            baseline::expected_fraction_of_optimum(&valid, k).expect("a landscape has values")
        });
        println!(
            "\n{} — {} configurations, {} valid, optimum {:.4}",
            landscape.name(),
            landscape.space().len(),
            valid.len(),
            landscape.optimum().1
        );
        let header: String = BUDGETS.iter().map(|k| format!("{:>8}", format!("@{k}"))).collect();
        println!("  {:<10}{header}", "strategy");
        let row = |name: &str, f: &[f64; 4], note: &str| {
            let cells: String = f.iter().map(|x| format!("{x:>8.4}")).collect();
            println!("  {name:<10}{cells}  {note}");
        };
        row("random*", &exact, "");
        // Two threads: the machine's cores. Each strategy is independent and deterministic.
        let results: Vec<(&str, [f64; 4])> = std::thread::scope(|scope| {
            let handles: Vec<_> = strategies
                .chunks(strategies.len().div_ceil(2))
                .map(|chunk| {
                    let (landscape, seeds) = (&landscape, seeds.clone());
                    scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|&s| (s, replay(landscape, s, seeds.clone())))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().expect("replay thread")).collect()
        });
        for (name, f) in &results {
            let mut note = String::new();
            if *name == "default" {
                let mut missed = Vec::new();
                for (i, &k) in BUDGETS.iter().enumerate() {
                    if f[i] <= exact[i] {
                        missed.push(format!("not above random* @{k}"));
                    }
                }
                for &(k, goal) in absolute_targets(landscape.name()) {
                    let i = BUDGETS.iter().position(|&b| b == k).expect("target budget");
                    if f[i] < goal {
                        missed.push(format!("@{k} {:.4} < {goal}", f[i]));
                    }
                }
                note = if missed.is_empty() {
                    let extra: Vec<String> = absolute_targets(landscape.name())
                        .iter()
                        .map(|(k, g)| format!(">= {g} @{k}"))
                        .collect();
                    let extra = if extra.is_empty() {
                        String::new()
                    } else {
                        format!(", {}", extra.join(", "))
                    };
                    format!("targets met (above random* everywhere{extra})")
                } else {
                    format!("MISSED: {}", missed.join("; "))
                };
                misses.extend(missed.into_iter().map(|m| format!("{}: {m}", landscape.name())));
            }
            row(name, f, &note);
        }
    }
    println!("\n({:.1} s)", started.elapsed().as_secs_f64());
    if misses.is_empty() {
        println!("bench-search: every target of the default strategy is met");
        Ok(())
    } else {
        eprintln!("bench-search: the default strategy missed {} target(s):", misses.len());
        for m in &misses {
            eprintln!("  {m}");
        }
        Err(ExitCode::from(1))
    }
}
