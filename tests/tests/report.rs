//! `report` end to end: real tuning runs and gate runs on a copy of the fixtures, the report
//! written, then loaded in headless Chromium, which must show every chart with its data and
//! log no error.
//!
//! Chromium is Debian's (`/usr/bin/chromium`; `.ci/run` installs it). Without it the test
//! skips with a loud message, unless `NEURON_TUNE_REQUIRE_CHROMIUM` is set (CI sets it):
//! then it fails.

use neuron_tune_tests::{
    cli, cli_env, cli_in_ok, events, fixture_workspace, scratch_dir, test_target_dir,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn run(ws: &Path, args: &[&str]) -> String {
    cli_in_ok(ws, args).0
}

fn chromium() -> Option<PathBuf> {
    let candidates = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

/// Run Chromium headless on `page` with `extra` flags, killed after 120 s. Returns stdout
/// and stderr.
fn headless(exe: &Path, page: &Path, extra: &[&str], profile: &Path) -> (String, String) {
    let mut child = Command::new(exe)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    // Read both pipes on threads so a full pipe never blocks Chromium.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut so, &mut s).ok();
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut se, &mut s).ok();
        s
    });
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (t1.join().unwrap(), t2.join().unwrap())
}

/// Put at the very start of the page (a copy of it): records errors (script errors,
/// failed loads — nothing should load — and console.error) and, on load, what each chart
/// holds, into a `<pre id="check">` that `--dump-dom` prints.
const COLLECTOR: &str = r#"<script>
window.__errs = [];
window.addEventListener('error', function (e) {
  window.__errs.push('error: ' + (e.message || (e.target && (e.target.src || e.target.href)) || e.type));
}, true);
window.addEventListener('unhandledrejection', function (e) { window.__errs.push('rejection: ' + e.reason); });
(function () {
  var orig = console.error;
  console.error = function () { window.__errs.push('console.error: ' + Array.prototype.join.call(arguments, ' ')); orig.apply(console, arguments); };
})();
window.addEventListener('load', function () {
  var charts = Array.prototype.map.call(document.querySelectorAll('figure.chart'), function (f) {
    var s = f.querySelector('svg');
    return {
      kind: f.dataset.chart, marks: f.dataset.marks, points: Number(f.dataset.points), svg: !!s,
      circles: s ? s.querySelectorAll('circle').length : 0,
      rects: s ? s.querySelectorAll('rect').length : 0,
      width: s ? s.getBoundingClientRect().width : 0
    };
  });
  var pre = document.createElement('pre');
  pre.id = 'check';
  pre.textContent = JSON.stringify({ errors: window.__errs, charts: charts, title: document.title });
  document.body.appendChild(pre);
});
</script>"#;

#[test]
fn the_report_of_a_real_tuning_run_renders_in_chromium_with_every_chart_drawn() {
    let Some(exe) = chromium() else {
        if std::env::var_os("NEURON_TUNE_REQUIRE_CHROMIUM").is_some() {
            panic!("NEURON_TUNE_REQUIRE_CHROMIUM is set but no chromium was found (apt-get install chromium)");
        }
        eprintln!(
            "\n\n!!!!! SKIPPED: no chromium (/usr/bin/chromium): the report is not rendered. \
             Install it (apt-get install chromium) or set NEURON_TUNE_REQUIRE_CHROMIUM=1 to fail. !!!!!\n\n"
        );
        return;
    };
    let ws = fixture_workspace("report");
    // Two seeds of one strategy (a band), a Pareto run, all small.
    let sel = ["--kernel", "rmsnorm", "--shape", "small", "--chip", "trn1", "--budget", "10"];
    for seed in ["15001", "15002"] {
        let mut a = vec!["tune", "--strategy", "random", "--seed", seed];
        a.extend_from_slice(&sel);
        let out = run(&ws, &a);
        assert_eq!(events(&out, "tune").len(), 1, "{out}");
    }
    let mut a = vec!["tune", "--objective", "pareto", "--seed", "15003"];
    a.extend_from_slice(&sel);
    let tuned = run(&ws, &a);
    assert!(
        events(&tuned, "tune")[0]["pareto"].as_array().is_some_and(|f| !f.is_empty()),
        "{tuned}"
    );
    // A run pinned to the default: its best is the default, one program shown twice.
    run(
        &ws,
        &[
            "tune",
            "--kernel",
            "add",
            "--shape",
            "small",
            "--chip",
            "trn1",
            "--budget",
            "1",
            "--params",
            "bufs=2,cols_per_tile=1024",
            "--seed",
            "15004",
        ],
    );
    // Two gate runs of one model: a history of two points.
    run(&ws, &["baseline", "save", "--model", "qwen3", "--shape", "tiny", "--chip", "trn1"]);
    for _ in 0..2 {
        run(&ws, &["gate", "--model", "qwen3", "--shape", "tiny", "--chip", "trn1"]);
    }

    // Tune stored the profiles of its best and default; without them the report profiles
    // what it shows (checked below). Other tests only lose a cache entry.
    let _ = std::fs::remove_dir_all(test_target_dir().join("neuron-tune").join("profile"));
    let dir = scratch_dir("report-out");
    let report = [
        "report",
        "--kernel",
        "rmsnorm",
        "--kernel",
        "add",
        "--chip",
        "trn1",
        "--out",
        dir.to_str().unwrap(),
    ];
    let out = run(&ws, &report);
    let ev = events(&out, "report").pop().unwrap_or_else(|| panic!("no report event: {out}"));
    let page = PathBuf::from(ev["path"].as_str().unwrap());
    assert_eq!(page, dir.join("index.html"));
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: no script, stylesheet or image fetched from anywhere.
    for needle in ["<script", "<link", "src=\"http", "<img", "@import"] {
        assert!(!html.contains(needle), "the report references `{needle}`");
    }
    // Each shown variant's trace is written next to it and linked, with how to open it.
    let traces: Vec<&Value> = ev["traces"].as_array().unwrap().iter().collect();
    assert!(traces.len() >= 2, "best and default traces: {ev}");
    for t in &traces {
        let p = Path::new(t.as_str().unwrap());
        assert_eq!(p.parent(), Some(dir.as_path()));
        let name = p.file_name().unwrap().to_str().unwrap();
        assert!(html.contains(&format!("href=\"{name}\"")), "{name} is linked");
        let trace: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        assert!(trace["traceEvents"].as_array().is_some_and(|e| !e.is_empty()), "{name}");
    }
    assert!(html.contains("ui.perfetto.dev"));
    // Each distinct program was profiled once (a default that is the best shares its
    // program, and so its trace text), and a second report profiles nothing: all stored.
    let mut programs: Vec<String> =
        traces.iter().map(|t| std::fs::read_to_string(t.as_str().unwrap()).unwrap()).collect();
    programs.sort_unstable();
    programs.dedup();
    assert_eq!(ev["profiled"].as_u64(), Some(programs.len() as u64), "{ev}");
    assert!(programs.len() < traces.len(), "add's best is its default: {ev}");
    let again = run(&ws, &report);
    assert_eq!(events(&again, "report")[0]["profiled"], 0, "{again}");
    // Filters that let nothing through say so (there is data, just not of that chip); a
    // kernel that does not exist is a usage error.
    let manifest = ws.join("Cargo.toml");
    let m = manifest.to_str().unwrap();
    let other = scratch_dir("report-other-chip");
    let (code, _, err) =
        cli(&["report", "--chip", "trn3", "--out", other.to_str().unwrap(), "--manifest-path", m]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("nothing to report for --chip trn3: what there is"), "{err}");
    let (code, _, err) = cli(&["report", "--kernel", "nosuch", "--manifest-path", m]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--kernel nosuch: no such kernel (have: "), "{err}");
    // The best-variant table comes from the copy's tuned database.
    assert!(html.contains("<td>rmsnorm</td><td>trn1</td><td>small</td>"), "tuned table");

    // Render: a copy of the page with the collector first, its DOM dumped after load.
    let probe = dir.join("probe.html");
    std::fs::write(&probe, html.replacen("<head>", &format!("<head>{COLLECTOR}"), 1)).unwrap();
    let profile = scratch_dir("report-chromium-profile");
    let (dom, log) =
        headless(&exe, &probe, &["--virtual-time-budget=5000", "--dump-dom"], &profile);
    let check = dom
        .split("<pre id=\"check\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .unwrap_or_else(|| panic!("the page never finished loading:\n{dom}\n{log}"));
    let check = check
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let check: Value = serde_json::from_str(&check).unwrap();
    assert_eq!(check["errors"], serde_json::json!([]), "errors while loading the report");
    // Chromium's own log of the page's console says nothing either.
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    assert_eq!(check["title"], "cargo neuron-tune report");

    let charts = check["charts"].as_array().unwrap();
    let kinds: std::collections::BTreeSet<&str> =
        charts.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    for kind in ["convergence", "utilization", "roofline", "pareto", "gate"] {
        assert!(kinds.contains(kind), "a {kind} chart: {charts:#?}");
    }
    for c in charts {
        let n = c["points"].as_u64().unwrap();
        assert!(c["svg"] == true && n > 0, "a chart with no data: {c}");
        assert!(c["width"].as_f64().unwrap() > 100.0, "laid out: {c}");
        match c["marks"].as_str().unwrap() {
            "points" => assert!(c["circles"].as_u64().unwrap() >= n, "every point drawn: {c}"),
            // Beyond the background.
            _ => assert!(c["rects"].as_u64().unwrap() > n, "every bar drawn: {c}"),
        }
    }
    // Both gate runs of qwen3 on trn1 are in its history (earlier tests may add more).
    let gate = charts.iter().filter(|c| c["kind"] == "gate").map(|c| c["points"].as_u64().unwrap());
    assert!(gate.max().unwrap() >= 2, "{charts:#?}");
    // Engines of the default and the best: five bars each.
    let util = charts.iter().find(|c| c["kind"] == "utilization").unwrap();
    assert_eq!(util["points"], 10, "{util}");

    // And a picture for people.
    let shot = dir.join("report.png");
    headless(
        &exe,
        &page,
        &[
            "--window-size=1400,2400",
            "--hide-scrollbars",
            &format!("--screenshot={}", shot.display()),
        ],
        &profile,
    );
    let png =
        std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot {}: {e}", shot.display()));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a real screenshot ({} bytes)",
        png.len()
    );
    eprintln!("report screenshot: {}", shot.display());
}

/// The journals are the target dir's, which other packages share: `report -p` shows the
/// tuning runs of the selected packages' kernels only (and the gate history of their
/// models). No browser needed.
#[test]
fn a_report_of_one_package_leaves_out_the_tuning_runs_of_other_packages() {
    let ws = fixture_workspace("report-packages");
    // A chip file of its own (results go by its file name): only this test tunes on it.
    let (code, toml, err) = cli(&["chip", "trn2"]);
    assert_eq!(code, 0, "{err}");
    let chip = scratch_dir("report-packages-chip").join("pkgchip.toml");
    std::fs::write(&chip, toml.replacen("name = \"trn2\"", "name = \"pkgchip\"", 1)).unwrap();
    // The store is shared with earlier runs of this test: their journals on the chip (its
    // model's calls among them) are not this run's.
    let journals = test_target_dir().join("neuron-tune").join("journals");
    for e in std::fs::read_dir(&journals).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().contains("-pkgchip-") {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let tune = [
        "tune",
        "-p",
        "neuron-fixtures-kernels",
        "--kernel",
        "add",
        "--shape",
        "small",
        "--chip",
        chip.to_str().unwrap(),
        "--budget",
        "2",
        "--seed",
        "16001",
    ];
    assert_eq!(events(&run(&ws, &tune), "tune").len(), 1);
    let report = |package: &str, out: &str| {
        let dir = scratch_dir(out);
        let args = ["report", "-p", package, "--chip", "pkgchip", "--out", dir.to_str().unwrap()];
        let ev = events(&run(&ws, &args), "report").pop().expect("a report event");
        (ev, std::fs::read_to_string(dir.join("index.html")).unwrap())
    };
    let (ev, html) = report("neuron-fixtures-kernels", "report-kernels-only");
    assert!(html.contains("<h2>add @ small on pkgchip</h2>"), "{ev}");
    // The models crate lists no kernel: the kernels crate's run is not its, nor its record.
    let (ev, html) = report("neuron-fixtures-qwen3", "report-qwen3-only");
    assert_eq!((&ev["targets"], &ev["tuned"]), (&0.into(), &0.into()), "{ev}");
    assert!(!html.contains("<h2>add @"), "{ev}");

    // Its model's calls are its, runs and records: the records are in the kernels crate's
    // database, which its model runs. qwen3's call of `add` at tiny has small's dimensions:
    // one problem, one record (whichever run's label it keeps).
    let model_tune = [
        "tune",
        "--model",
        "qwen3",
        "--shape",
        "tiny",
        "--kernel",
        "add",
        "--chip",
        chip.to_str().unwrap(),
        "--budget",
        "2",
        "--seed",
        "16002",
    ];
    let calls = events(&run(&ws, &model_tune), "tune");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let (ev, html) = report("neuron-fixtures-qwen3", "report-qwen3-calls");
    assert_eq!((&ev["targets"], &ev["tuned"]), (&1.into(), &1.into()), "{ev}");
    assert!(html.contains("<h2>add @ qwen3@tiny {cols=1024, rows=256} on pkgchip</h2>"), "{ev}");
    assert!(html.contains("<p>1 tuned records;"), "{html}");
    assert!(!html.contains("No tuned database records yet"), "{html}");
    // The kernels crate's report has the record too: it is its database's.
    let (ev, _) = report("neuron-fixtures-kernels", "report-kernels-calls");
    assert_eq!(ev["tuned"], 1, "{ev}");

    // But a record the model does not use is not its crate's, though it is of the model's
    // call: the same record (kernel, chip, dimensions and label) in the database of a
    // package the models crate does not link. `bench --model` never runs it (a model reads
    // the databases of the crates it links: `TunedSet::for_model`), so the report does not
    // credit it to the model's crate either.
    let unlinked = ws.join("unlinked");
    std::fs::create_dir_all(unlinked.join("src")).unwrap();
    std::fs::write(
        unlinked.join("Cargo.toml"),
        "[package]\nname = \"report-unlinked\"\nversion.workspace = true\n\
         edition.workspace = true\npublish = false\n",
    )
    .unwrap();
    std::fs::write(unlinked.join("src/lib.rs"), "//! No model's crate links it.\n").unwrap();
    let db = "neuron-tune.tuned.toml";
    std::fs::copy(ws.join("kernels").join(db), unlinked.join(db)).unwrap();
    let root = ws.join("Cargo.toml");
    let members = "members = [\"kernels\", \"qwen3\"]";
    let text = std::fs::read_to_string(&root).unwrap();
    assert!(text.contains(members), "{text}");
    let text = text.replacen(members, "members = [\"kernels\", \"qwen3\", \"unlinked\"]", 1);
    std::fs::write(&root, text).unwrap();
    let status = neuron_tune_tests::cargo()
        .args(["update", "--workspace", "--offline", "-q"])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(status.success());
    let (ev, html) = report("neuron-fixtures-qwen3", "report-qwen3-unlinked");
    // The call's run and the kernels crate's record, as before; not the unlinked copy (with
    // it, two packages' records: the table would grow a package column naming it).
    assert_eq!((&ev["targets"], &ev["tuned"]), (&1.into(), &1.into()), "{ev}");
    assert!(html.contains("<p>1 tuned records;"), "{html}");
    assert!(!html.contains("report-unlinked"), "{html}");
}

/// A chip file of its own, named `name` (results go by its file name): only the test that
/// makes it tunes on it, though the store is shared. The journals an earlier run of that test
/// left under this chip are removed (a report reads every journal of its chip, and an older
/// checkout's runs, under other pins, would be more curves and points).
fn own_chip(name: &str) -> PathBuf {
    let journals = test_target_dir().join("neuron-tune").join("journals");
    for e in std::fs::read_dir(&journals).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().contains(&format!("-{name}-")) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let (code, toml, err) = cli(&["chip", "trn2"]);
    assert_eq!(code, 0, "{err}");
    let chip = scratch_dir(&format!("{name}-chip")).join(format!("{name}.toml"));
    std::fs::write(&chip, toml.replacen("name = \"trn2\"", &format!("name = \"{name}\""), 1))
        .unwrap();
    chip
}

/// The report says of real runs what `tune` said of them (a search of the whole space), and
/// what it cannot read it says, naming the file, rather than showing a run with no
/// evaluations or leaving it out in silence. No browser needed.
#[test]
fn a_report_gives_tunes_figures_and_names_the_files_it_cannot_read() {
    let ws = fixture_workspace("report-damage");
    let chip = own_chip("dmgchip");
    let chip = chip.to_str().unwrap();
    let tune = |kernel: &str, extra: &[&str]| -> (PathBuf, Value) {
        let mut a = vec!["tune", "--kernel", kernel, "--shape", "small", "--chip", chip];
        a.extend_from_slice(extra);
        let (out, _) = cli_in_ok(&ws, &a);
        let ev = events(&out, "tune");
        assert_eq!(ev.len(), 1, "{out}");
        (PathBuf::from(ev[0]["journal"].as_str().unwrap()), ev[0].clone())
    };
    // `add` pinned to bufs=2 on one core: a space of 3, searched whole by a budget of 5.
    let pins = "bufs=2,spmd=1";
    let (add, ev) = tune("add", &["--params", pins, "--budget", "5", "--seed", "17001"]);
    assert_eq!(ev["convergence"]["whole_space"], 3, "{ev}");
    let (rmsnorm, _) = tune("rmsnorm", &["--budget", "2", "--seed", "17002"]);
    // The same strategy and pins under the Pareto objective: another journal, and another
    // search (it prunes nothing), so another curve of the convergence chart.
    let pareto = ["--params", pins, "--objective", "pareto", "--budget", "5", "--seed", "17003"];
    let (add_pareto, _) = tune("add", &pareto);
    assert_ne!(add_pareto, add);
    let dir = scratch_dir("report-damage-out");
    let report = ["report", "--chip", "dmgchip", "--out", dir.to_str().unwrap()];

    // An --out used before: an earlier report's trace the page will not link, and files
    // that are not traces (nor named as this tool names them).
    for f in ["trace-gone-small-n4-trn2-best.json", "notes.json", "trace-notes.txt"] {
        std::fs::write(dir.join(f), "{}").unwrap();
    }
    std::fs::create_dir_all(dir.join("trace-dir.json")).unwrap();

    // The run table gives the figures `tune` gave: a search of the whole space has no
    // convergence to judge (its journal alone cannot tell: the meta file records it).
    let (out, _) = cli_in_ok(&ws, &report);
    // The traces in the directory are the page's, every one linked; the rest stays.
    let ev = events(&out, "report").pop().unwrap();
    let mut traces: Vec<&str> =
        ev["traces"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    traces.sort_unstable();
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("trace-") && n.ends_with(".json") && n != "trace-dir.json")
        .map(|n| dir.join(n).display().to_string())
        .collect();
    on_disk.sort_unstable();
    assert!(!traces.is_empty());
    assert_eq!(on_disk, traces, "only this report's traces are left");
    for kept in ["notes.json", "trace-notes.txt", "trace-dir.json"] {
        assert!(dir.join(kept).exists(), "{kept} is not a trace of this tool's: kept");
    }
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let section = html.split("<h2>add @ small on dmgchip</h2>").nth(1).unwrap();
    let section = section.split("<h2>").next().unwrap();
    assert!(
        section.contains("<td>searched the whole space (3 variants); 0 % pruned, 0 % invalid</td>"),
        "{section}"
    );
    // Two runs of one strategy that differ by their objective are two curves, one seed
    // each, the pins named as given (the journals' names have `bufs-2-spmd-1`). Each
    // searched the space of 3 whole (every one measured): 3 points, one circle each.
    let fig = section.split("data-chart=\"convergence\"").nth(1).unwrap();
    let fig = fig.split("</figure>").next().unwrap();
    for curve in [
        "strategy default (pinned bufs=2,spmd=1)",
        "strategy default (pareto objective, pinned bufs=2,spmd=1)",
    ] {
        let name = format!(">\n{curve}: median of 1 seed\n<");
        assert_eq!(fig.matches(&name).count(), 1, "{name}\n{fig}");
    }
    assert!(fig.starts_with(" data-marks=\"points\" data-points=\"6\""), "{fig}");
    assert_eq!(fig.matches("<circle").count(), 6, "{fig}");

    // `--open`: the opener's exit status is waited for; one that fails is said, with its
    // status, never reported as opened. (A stand-in opener on PATH: the platform's name.)
    let bin = scratch_dir("report-damage-opener");
    for (status, said) in [
        ("3", format!("could not open {} (exit status: 3)", dir.join("index.html").display())),
        ("0", format!("Opened {} with ", dir.join("index.html").display())),
    ] {
        for name in ["xdg-open", "open"] {
            let script = bin.join(name);
            std::fs::write(&script, format!("#!/bin/sh\nexit {status}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        let manifest = ws.join("Cargo.toml");
        let args = [&report[..], &["--open", "--manifest-path", manifest.to_str().unwrap()]];
        let (code, _, err) = cli_env(&args.concat(), &[("PATH", &path)]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains(&said), "{err}");
        if status != "0" {
            assert!(err.contains("warning: ") && !err.contains("Opened "), "{err}");
        }
    }

    // The journal cut inside its first line (`head -c150`): nothing of it can be read.
    let text = std::fs::read(&add).unwrap();
    std::fs::write(&add, &text[..150]).unwrap();
    // A meta file that is not JSON: which run its journal is cannot be told.
    let meta = rmsnorm.with_extension("meta.json");
    std::fs::write(&meta, "{garbage").unwrap();
    let (_, err) = cli_in_ok(&ws, &report);
    let said = format!(
        "warning: {}: its last line (line 1) is cut short (its run was killed while writing \
         it, or the file was truncated); the report shows the run with the 0 evaluations \
         before it",
        add.display()
    );
    assert!(err.contains(&said), "{err}");
    let said = format!("warning: {}: not used (not JSON", meta.display());
    assert!(err.contains(&said), "{err}");
    assert!(err.contains("); its run is not shown"), "{err}");
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.contains("<h2>add @ small on dmgchip</h2>"), "the damaged journal's run");
    assert!(!html.contains("<h2>rmsnorm @ small"), "the run of the damaged meta file");
}

/// An `--out` that cannot be made is a file that could not be written: exit 1 (as
/// `profile --trace` to such a path), naming it — not a usage error (2).
#[cfg(target_os = "linux")]
#[test]
fn an_out_directory_that_cannot_be_written_exits_1_naming_it() {
    let (code, out, err) = cli(&["report", "--out", "/proc/neuron-tune-report"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("--out /proc/neuron-tune-report: could not create it"), "{err}");
    assert_eq!(err.matches("error:").count(), 1, "{err}");
}
