//! Repository automation, so CI and a developer run exactly the same steps.
//!
//! * `cargo xtask ci`    — format check, clippy (warnings are errors), the whole test suite.
//! * `cargo xtask test`  — the test suite only.
//! * `cargo xtask bench` — the simulator's criterion benchmarks (`cargo bench -p neuron-sim`).
//!
//! Each step runs `$CARGO` (the cargo that started us) and stops at the first failure with
//! its exit code.

use std::process::{Command, ExitCode};

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(what: &str, args: &[&str]) -> Result<(), ExitCode> {
    eprintln!("xtask: {what}: cargo {}", args.join(" "));
    let status = cargo().args(args).status().map_err(|e| {
        eprintln!("xtask: could not start cargo: {e}");
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
            .and_then(|_| test()),
        Some("test") => test(),
        Some("bench") => run("benchmarks", &["bench", "-p", "neuron-sim", "--bench", "sim"]),
        _ => {
            eprintln!("usage: cargo xtask <ci|test|bench>\n  ci     format check, clippy -D warnings, all tests\n  test   all tests\n  bench  the simulator's criterion benchmarks");
            Err(ExitCode::from(2))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}
