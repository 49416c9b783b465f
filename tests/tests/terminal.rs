//! What people see in a terminal: the human tables of `list`, `bench`, `tune` and `gate`
//! (insta snapshots), written to a file as they would be by `> file`, and colour only when
//! asked for.
//!
//! The commands run on a copy of the fixtures (tune writes its tuned database), in one test
//! so they run in order (list before anything is tuned). Simulated times are deterministic,
//! so the snapshots hold the numbers; filters only take out the copy's path and whether a
//! result came from the store (`(cached)` depends on what ran before).

use neuron_tune_tests::{cli_command, fixture_workspace, scratch_dir};
use std::path::Path;
use std::process::Stdio;

/// Run the CLI in human mode with stdout redirected to a file, as `> file` does; returns
/// the file's text. `env`: variables set (colour ones are cleared first).
fn to_file(ws: &Path, args: &[&str], env: &[(&str, &str)], file: &Path) -> String {
    let manifest = ws.join("Cargo.toml");
    let mut a = args.to_vec();
    a.extend(["--manifest-path", manifest.to_str().unwrap()]);
    let out = std::fs::File::create(file).unwrap();
    let mut cmd = cli_command(&a);
    for k in ["NO_COLOR", "CLICOLOR_FORCE", "CLICOLOR", "TERM"] {
        cmd.env_remove(k);
    }
    let done = cmd
        .envs(env.iter().copied())
        .stdout(Stdio::from(out))
        .stderr(Stdio::piped())
        .output()
        .expect("the CLI runs");
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{args:?}: {err}");
    std::fs::read_to_string(file).unwrap()
}

fn settings(ws: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("snapshots");
    s.set_prepend_module_to_snapshot(false);
    s.add_filter(&regex_escape(&ws.display().to_string()), "[WS]");
    s.add_filter(r" *\(cached\)", "");
    s
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// One short, seeded tune of `add`, shown as a person sees it and as JSON.
const TUNE_ADD: [&str; 11] = [
    "tune",
    "--kernel",
    "add",
    "--shape",
    "small",
    "--strategy",
    "random",
    "--seed",
    "7",
    "--budget",
    "8",
];
#[test]
fn tables_of_list_bench_tune_and_gate_redirected_to_a_file_without_colour() {
    let ws = fixture_workspace("terminal");
    let dir = scratch_dir("terminal-out");
    let no_color = [("NO_COLOR", "1")];
    let settings = settings(&ws);

    let bench = to_file(
        &ws,
        &["bench", "--kernel", "add", "--kernel", "rmsnorm", "--shape", "small"],
        &no_color,
        &dir.join("bench.txt"),
    );
    let tune = to_file(&ws, &TUNE_ADD, &no_color, &dir.join("tune.txt"));
    to_file(
        &ws,
        &["baseline", "save", "--model", "qwen3", "--shape", "tiny"],
        &no_color,
        &dir.join("b.txt"),
    );
    let gate = to_file(
        &ws,
        &["gate", "--model", "qwen3", "--shape", "tiny"],
        &no_color,
        &dir.join("gate.txt"),
    );
    // After tuning, so its table of tuned records has a row.
    let list = to_file(&ws, &["list"], &no_color, &dir.join("list.txt"));

    // What a file holds is the tables (their headers and a row per item), nothing else.
    for (name, text, header) in [
        ("list", &list, "model"),
        ("bench", &bench, "bottleneck"),
        ("tune", &tune, "speed-up"),
        ("gate", &gate, "verdict"),
    ] {
        assert!(
            text.lines().any(|l| l.contains(header)),
            "{name}'s table header in the file:\n{text}"
        );
        assert!(!text.contains('\x1b'), "NO_COLOR: no escape codes in {name}:\n{text:?}");
        assert!(
            !text.contains("Compiling") && !text.contains("Finished"),
            "status in {name}'s file"
        );
    }
    assert!(list.contains("rmsnorm") && list.contains("qwen3"), "{list}");
    assert!(list.lines().any(|l| l.starts_with("  add ") && l.ends_with("current")), "{list}");
    assert_eq!(
        bench.lines().filter(|l| l.starts_with("  add ") || l.starts_with("  rmsnorm ")).count(),
        2
    );
    assert!(tune.lines().any(|l| l.starts_with("  add ")), "{tune}");
    // The figures agree with each other, so the snapshots below pin layout, not luck: each
    // bench row's time is its kernel time plus trn2's 11 µs launch overhead
    // (docs/neuroncore.md §7); tune's default for `add` is bench's time of the same default
    // variant; `list` shows the record tune wrote.
    // The last line of `text` starting with `first`: a table's row comes after any line of
    // prose about the same kernel.
    let row = |text: &str, first: &str| -> Vec<String> {
        let line = text.lines().rfind(|l| l.starts_with(&format!("  {first} "))).unwrap();
        line.split_whitespace().map(String::from).collect()
    };
    let num = |s: &str| s.replace(',', "").parse::<f64>().unwrap();
    for kernel in ["add", "rmsnorm"] {
        let r = row(&bench, kernel); // kernel shape params time kernel-time ...
        assert!((num(&r[3]) - num(&r[4]) - 11.0).abs() < 0.051, "{kernel}: {r:?}");
    }
    let (bench_add, tune_add) = (row(&bench, "add"), row(&tune, "add"));
    assert_eq!(tune_add[3], bench_add[3], "tune's default µs is bench's: {tune_add:?}");
    // The last `add` line of `list` is the tuned table's row (kernel chip shape time …).
    let tuned = row(&list, "add");
    assert_eq!(tuned[3], tune_add[2], "list shows tune's best µs: {tuned:?} vs {tune_add:?}");

    settings.bind(|| {
        insta::assert_snapshot!("list", list);
        insta::assert_snapshot!("bench", bench);
        insta::assert_snapshot!("tune", tune);
        insta::assert_snapshot!("gate", gate);
    });

    // Colour on request even into a file, and NO_COLOR over CLICOLOR_FORCE; by default a
    // file gets none.
    let forced = to_file(&ws, &["list"], &[("CLICOLOR_FORCE", "1")], &dir.join("forced.txt"));
    assert!(
        forced.contains("\x1b[1mmodel\x1b[0m"),
        "CLICOLOR_FORCE=1 colours the header:\n{forced:?}"
    );
    let both = to_file(
        &ws,
        &["list"],
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")],
        &dir.join("both.txt"),
    );
    assert_eq!(both, list, "NO_COLOR wins over CLICOLOR_FORCE");
    let plain = to_file(&ws, &["list"], &[], &dir.join("plain.txt"));
    assert_eq!(plain, list, "not a terminal: no colour");
    // Stripped of its escapes, the coloured list is the plain one (colour never misaligns).
    let stripped = forced.replace("\x1b[1m", "").replace("\x1b[33m", "").replace("\x1b[0m", "");
    assert_eq!(stripped, list);

    // `--message-format json`: stdout is JSON lines only, even when colour is forced.
    let json = to_file(
        &ws,
        &[&TUNE_ADD[..], &["--message-format", "json"]].concat(),
        &[("CLICOLOR_FORCE", "1")],
        &dir.join("tune.json"),
    );
    assert!(json.lines().count() > 1);
    for line in json.lines() {
        assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "not JSON: {line:?}");
    }
}
