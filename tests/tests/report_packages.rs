//! `report -p` goes by the package a tuning run's kernel came from, not by the kernel's
//! name: two crates of one workspace that both define `double` have their runs told apart,
//! in their journals (named by the package) and in the report. Runs journaled before
//! journals named their package are still read, by the kernel's name, with a note when
//! that name is ambiguous, and `tune --resume` continues them.
//!
//! No browser needed.

use neuron_tune_tests::{cli, cli_in_ok, double_crate, events, root, scratch_dir, test_target_dir};
use serde_json::Value;
use std::path::{Path, PathBuf};

const A: &str = "report-same-a";
const B: &str = "report-same-b";

/// The correct body, for both crates: their runs differ only by their package.
const BODY: &str = r#"
fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {
    let pool = nc.sbuf_pool("io", p.uint("bufs")? as u32);
    correct(nc, p, sh, x, y, pool)
}
"#;

/// A workspace with two kernel crates, `a` (package `A`) and `b` (`B`), both defining
/// `double`.
fn workspace() -> PathBuf {
    let ws = scratch_dir("report-same-name");
    let manifest = "[workspace]\nresolver = \"2\"\nmembers = [\"a\", \"b\"]\n";
    std::fs::write(ws.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(root().join("Cargo.lock"), ws.join("Cargo.lock")).unwrap();
    let space = "{ cols_per_tile = [128, 512] }";
    double_crate(&ws.join("a"), A, space, BODY, false);
    double_crate(&ws.join("b"), B, space, BODY, false);
    ws
}

fn run(ws: &Path, args: &[&str]) -> (String, String) {
    cli_in_ok(ws, args)
}

/// A sealed JSON file's value, edited by `f` and sealed again (as an older tool wrote it).
fn reseal(path: &Path, f: impl FnOnce(&mut serde_json::Map<String, Value>)) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let obj = v.as_object_mut().unwrap();
    obj.remove(cargo_neuron_tune::seal::FIELD);
    f(obj);
    cargo_neuron_tune::seal::seal_json(&mut v);
    std::fs::write(path, v.to_string()).unwrap();
}

fn meta_of(journal: &Path) -> PathBuf {
    journal.with_extension("meta.json")
}

#[test]
fn report_of_one_package_leaves_out_another_packages_kernel_of_the_same_name() {
    let ws = workspace();
    // A chip file of its own (results go by its file name): only this test tunes on it, so
    // every journal of it is this test's; those of an earlier run are removed.
    let (code, toml, err) = cli(&["chip", "trn2"]);
    assert_eq!(code, 0, "{err}");
    let chip = scratch_dir("report-same-name-chip").join("samechip.toml");
    std::fs::write(&chip, toml.replacen("name = \"trn2\"", "name = \"samechip\"", 1)).unwrap();
    let journals = test_target_dir().join("neuron-tune/journals");
    for e in std::fs::read_dir(&journals).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().contains("-samechip-") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let tune = |package: &str, seed: &str, extra: &[&str]| -> (Value, String) {
        let mut args = vec!["tune", "-p", package, "--kernel", "double", "--shape", "small"];
        args.extend(["--chip", chip.to_str().unwrap(), "--strategy", "grid", "--budget", "2"]);
        args.extend(["--seed", seed]);
        args.extend_from_slice(extra);
        let (out, err) = run(&ws, &args);
        (events(&out, "tune").pop().expect("a tune event"), err)
    };
    // The same kernel, shape, chip, strategy and seed in both packages, and one more run of B.
    let (a, _) = tune(A, "18001", &[]);
    let (b, _) = tune(B, "18001", &[]);
    tune(B, "18002", &[]);
    let report = |package: &str, out: &str| {
        let dir = scratch_dir(out);
        let args = ["report", "-p", package, "--chip", "samechip", "--out", dir.to_str().unwrap()];
        let (out, err) = run(&ws, &args);
        let ev = events(&out, "report").pop().expect("a report event");
        (ev, std::fs::read_to_string(dir.join("index.html")).unwrap(), err)
    };
    let runs_of = |html: &str| -> String {
        let h = html.find("<h2>double @ small on samechip</h2>").expect(html);
        html[h..].lines().nth(1).unwrap().to_string()
    };
    let (ev, html, err) = report(A, "report-same-a");
    assert_eq!(ev["targets"], 1, "{ev}");
    let runs = runs_of(&html);
    assert!(runs.contains("1 run: grid seed 18001, 2 evaluations."), "{runs}");
    assert!(runs.contains(&format!("Package <code>{A}</code> (<code>a/Cargo.toml</code>)")));
    assert!(!html.contains("seed 18002"), "B's run is not A's: {runs}");
    assert!(!err.contains("journaled before"), "{err}");
    let (_, html, _) = report(B, "report-same-b");
    let runs = runs_of(&html);
    assert!(runs.contains("2 runs: grid seed 18001, 2 evaluations; grid seed 18002"), "{runs}");

    // One journal per package: B's run of the same seed did not replace A's.
    let (ja, jb) = (PathBuf::from(a["journal"].as_str().unwrap()), b["journal"].as_str().unwrap());
    assert_ne!(ja.to_str().unwrap(), jb);
    let name = ja.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with(&format!("tune-{A}.double-small-")), "{name}");
    let meta = std::fs::read_to_string(meta_of(&ja)).unwrap();
    let meta: Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["package"], serde_json::json!({"name": A, "manifest": "a/Cargo.toml"}));

    // A run journaled before journals named their package (B's, seed 18003): read by the
    // kernel's name, so A's report shows it, and says it may be another package's.
    let jb = PathBuf::from(jb);
    let old = journals.join("tune-double-small-cols512-rows256-samechip-grid-18003.jsonl");
    std::fs::copy(&jb, &old).unwrap();
    std::fs::copy(meta_of(&jb), meta_of(&old)).unwrap();
    reseal(&meta_of(&old), |m| {
        m.remove("package");
        m.insert("seed".into(), 18003.into());
    });
    let (_, html, err) = report(A, "report-same-a-old");
    assert!(runs_of(&html).contains("2 runs: grid seed 18001, 2 evaluations; grid seed 18003"));
    assert!(
        err.contains(
            "note: tune runs of double were journaled before journals named their package"
        ),
        "{err}"
    );
    std::fs::remove_file(&old).unwrap();
    std::fs::remove_file(meta_of(&old)).unwrap();

    // `--resume` continues a run journaled under the older name, under the new one.
    let unnamed = journals.join(format!("tune-{}", &name[format!("tune-{A}.").len()..]));
    let written = std::fs::metadata(&ja).unwrap().modified().unwrap();
    std::fs::rename(&ja, &unnamed).unwrap();
    std::fs::rename(meta_of(&ja), meta_of(&unnamed)).unwrap();
    reseal(&meta_of(&unnamed), |m| {
        m.remove("package");
    });
    let (resumed, err) = tune(A, "18001", &["--resume"]);
    let said =
        format!("journaled before journals named their package; resumed as {}", ja.display());
    assert!(err.contains(&said), "{err}");
    assert_eq!(resumed["journal"], a["journal"], "{resumed}");
    assert!(ja.exists() && !unnamed.exists() && !meta_of(&unnamed).exists());
    // Its evaluations were taken, not made again: the journal was not written anew.
    assert_eq!(std::fs::metadata(&ja).unwrap().modified().unwrap(), written);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(meta_of(&ja)).unwrap()).unwrap();
    assert_eq!(meta["package"]["name"], A, "the meta file names the package now");
}
