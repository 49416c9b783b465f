//! The global output flags, as cargo's: `--color`, `-q`/`--quiet`, `-v`/`--verbose`, each
//! for the tool's own output and passed on to the `cargo build` of the harnesses; and the
//! compiler's diagnostics in the `error` event of a failed build in JSON mode.
//!
//! On the broken fixture crates (each its own small workspace): `compile_error` fails to
//! build, `panic`'s `double` panics at `cols_per_tile=128` and runs at 512.

use neuron_tune_tests::{broken_manifest, cli_command, events};

const ESC: char = '\x1b';

/// The tool with the colour variables removed, then `env` set (cargo reads them too).
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = cli_command(args);
    for k in ["NO_COLOR", "CLICOLOR_FORCE", "CLICOLOR", "CARGO_TERM_COLOR", "TERM"] {
        cmd.env_remove(k);
    }
    let out = cmd.envs(env.iter().copied()).output().expect("the CLI runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn check_compile_error(extra: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let m = broken_manifest("compile_error");
    let args = [&["check", "--manifest-path", &m][..], extra].concat();
    run(&args, env)
}

fn bench_panic(extra: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let m = broken_manifest("panic");
    let args = [&["bench", "--manifest-path", &m, "--all-variants"][..], extra].concat();
    run(&args, env)
}

#[test]
fn a_failed_build_s_json_error_event_carries_the_compiler_s_diagnostics() {
    // Colour asked for and forced: JSON is never coloured, diagnostics included.
    let (code, out, err) = check_compile_error(
        &["--message-format", "json", "--color", "always"],
        &[("CLICOLOR_FORCE", "1")],
    );
    assert_eq!(code, 3, "{err}");
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "error", "{out}");
    assert_eq!(last["code"], 3, "{last}");
    let error = &events(&out, "error")[0];
    let diagnostics: Vec<&str> = error["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics in {error}"))
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    let first = diagnostics.first().expect("a diagnostic");
    assert!(first.starts_with("error[E0308]: mismatched types"), "{diagnostics:?}");
    assert!(first.contains("src/main.rs:6:"), "where: {first}");
    assert!(!out.contains(ESC), "no escape codes in JSON: {out:?}");
    // A person still sees them on stderr, as cargo shows them.
    assert!(err.contains("error[E0308]: mismatched types"), "{err}");
    // A failure that is no build failure has none.
    let (code, out, _) = run(&["chip", "trn9", "--message-format", "json"], &[]);
    assert_eq!(code, 2, "{out}");
    assert!(events(&out, "error")[0].get("diagnostics").is_none(), "{out}");
}

#[test]
fn color_always_and_never_beat_the_environment_in_tables_and_in_cargo() {
    // The table's bold header: into a pipe, with NO_COLOR set, on request.
    let (code, out, err) = bench_panic(&["--color", "always"], &[("NO_COLOR", "1")]);
    assert_eq!(code, 4, "{err}");
    assert!(out.contains("\x1b[1mkernel\x1b[0m"), "--color always beats NO_COLOR: {out:?}");
    let (_, out, err) = bench_panic(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]);
    assert!(out.contains("kernel") && !out.contains(ESC), "--color never: {out:?}");
    assert!(!err.contains(ESC), "nor in cargo's lines: {err:?}");
    // Cargo gets the flag: its compile errors are coloured into a pipe with `always`, and
    // plain with `never` though CLICOLOR_FORCE (which cargo reads) asks for colour.
    let (code, _, err) = check_compile_error(&["--color", "always"], &[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("\x1b[") && err.contains("mismatched types"), "{err:?}");
    let (code, _, err) = check_compile_error(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]);
    assert_eq!(code, 3, "{err}");
    assert!(!err.contains(ESC) && err.contains("mismatched types"), "{err:?}");
}

#[test]
fn quiet_keeps_results_warnings_and_errors_and_drops_status() {
    let (code, loud_out, loud_err) = bench_panic(&[], &[]);
    assert_eq!(code, 4, "{loud_err}");
    assert!(loud_err.contains("Building broken-panic harness"), "{loud_err}");
    assert!(loud_err.contains("Finished"), "cargo's status: {loud_err}");
    let (code, out, err) = bench_panic(&["-q"], &[]);
    assert_eq!(code, 4, "{err}");
    // The results are the same table (whether a row came from the store aside).
    let rows = |text: &str| text.replace("  (cached)", "");
    assert_eq!(rows(&out), rows(&loud_out));
    for status in ["Building", "Finished", "Compiling", "simulated,", "(store:"] {
        assert!(!err.contains(status), "-q: no `{status}` in {err}");
    }
    // What went wrong is still said: the panicking variant's line, with its message (and
    // what its kernel code printed).
    let failed = |err: &str| {
        err.lines().any(|l| {
            l.starts_with("  panic ")
                && l.contains("double bufs=2,cols_per_tile=128 at small: index out of bounds")
        })
    };
    assert!(failed(&loud_err), "the premise: {loud_err}");
    assert!(failed(&err), "{err}");
    assert!(err.contains("output of double bufs=2,cols_per_tile=128 at small:"), "{err}");
    // Cargo's compile errors are still shown, and the tool's error.
    let (code, _, err) = check_compile_error(&["--quiet"], &[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("mismatched types"), "{err}");
    assert!(err.contains("error: building the harness of `broken-compile-error` failed"), "{err}");
    assert!(!err.contains("Building") && !err.contains("Compiling"), "{err}");
}

#[test]
fn verbose_says_what_runs_and_where_and_passes_v_to_cargo() {
    let (code, _, err) = bench_panic(&["-v"], &[]);
    assert_eq!(code, 4, "{err}");
    let running = err.lines().find(|l| l.contains("Running `")).unwrap_or_else(|| panic!("{err}"));
    assert!(running.contains(" build -v ") && running.contains("-p broken-panic"), "{running}");
    // Cargo's own -v: the units it found fresh.
    assert!(err.contains("Fresh "), "{err}");
    assert!(err.contains("Workers of broken-panic run "), "{err}");
    assert!(err.contains("Variant store "), "{err}");
    let (code, _, err) = bench_panic(&["-vv"], &[]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains(" build -vv "), "{err}");
    // None of it without -v.
    let (_, _, err) = bench_panic(&[], &[]);
    assert!(!err.contains("Running `") && !err.contains("Fresh "), "{err}");
}

/// `--build-jobs N` is cargo's `--jobs N` on the harness build (shown by `-v`), not the
/// workers' `-j`; a count below 1 is refused before anything is built (exit 2).
#[test]
fn build_jobs_reach_cargo_and_nothing_else() {
    let (code, _, err) = bench_panic(&["-v", "--build-jobs", "1", "-j", "2"], &[]);
    assert_eq!(code, 4, "{err}");
    let running = err.lines().find(|l| l.contains("Running `")).unwrap_or_else(|| panic!("{err}"));
    assert!(running.contains(" --jobs 1"), "{running}");
    assert!(!running.contains(" -j ") && !running.contains("--jobs 2"), "{running}");
    let (code, _, err) = bench_panic(&["--build-jobs", "0"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("invalid value '0' for '--build-jobs <N>'"), "{err}");
    assert!(!err.contains("Building"), "refused before the build: {err}");
}
