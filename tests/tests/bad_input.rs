//! Bad input gets a clear error with the documented exit code, never a silent wrong answer.
//!
//! Data-driven: each case is a command line, the exit code it must give and words its
//! message must hold (on stderr). Add a case for every defect fixed.

use neuron_tune_tests::{cli, cli_json, events};

struct Case {
    what: &'static str,
    args: &'static [&'static str],
    code: i32,
    words: &'static [&'static str],
}

const K: &str = "neuron-fixtures-kernels";
/// The models crate: models, no kernels.
const Q: &str = "neuron-fixtures-qwen3";

const CASES: &[Case] = &[
    Case {
        what: "report of a chip that is neither built in nor recorded",
        args: &["report", "-p", K, "--chip", "trn9", "--out", "target/e2e/report-trn9"],
        code: 2,
        words: &["--chip trn9: not a built-in chip (trn1, trn2, trn3) and nothing was recorded"],
    },
    Case {
        what: "--params naming a parameter no selected kernel has",
        args: &["build", "-p", K, "--shape", "small", "--params", "bfus=3"],
        code: 2,
        words: &["--params bfus=3: no selected kernel has the parameter `bfus`", "add: bufs"],
    },
    Case {
        what: "--params naming a parameter the kernel named on its own does not have",
        args: &[
            "build",
            "-p",
            K,
            "--kernel",
            "gemm",
            "--kernel",
            "add",
            "--params",
            "cols_per_tile=512",
        ],
        code: 2,
        words: &["--params for `gemm`: parameter `cols_per_tile`: unknown parameter (known: "],
    },
    Case {
        what: "a feature the kernel crate does not have",
        args: &["list", "-p", K, "--features", "nope"],
        code: 2,
        words: &["--features nope: kernel crate `neuron-fixtures-kernels` has no feature `nope`"],
    },
    Case {
        what: "an unknown strategy, refused before anything is built",
        args: &["tune", "-p", K, "--strategy", "bayesian", "--target-dir", "/nonexistent/t"],
        code: 2,
        words: &["invalid value 'bayesian' for '--strategy", "similar value exists: 'bayes'"],
    },
    Case {
        what: "leaving out a package that is not in the workspace",
        args: &["list", "--exclude", "neuron-fixtures-kernelz"],
        code: 2,
        words: &["--exclude neuron-fixtures-kernelz: no package `neuron-fixtures-kernelz`"],
    },
    Case {
        what: "--exclude with -p (as cargo, it trims the whole workspace)",
        args: &["list", "-p", K, "--exclude", K],
        code: 2,
        words: &["--exclude", "cannot be used with"],
    },
    Case {
        what: "list of a kernel that does not exist",
        args: &["list", "-p", K, "--kernel", "gemmm"],
        code: 2,
        words: &["--kernel gemmm: no such kernel", "gemm"],
    },
    Case {
        what: "a time budget of zero",
        args: &["tune", "-p", K, "--time", "0"],
        code: 2,
        words: &["--time", "above 0"],
    },
    Case {
        what: "a time budget beyond what a duration holds (it panicked)",
        args: &["tune", "-p", K, "--time", "1e300"],
        code: 2,
        words: &["--time", "at most 1e9"],
    },
    Case {
        what: "replay with an external proposer (it was silently ignored)",
        args: &[
            "replay",
            "--cache",
            "fixtures/landscapes/convolution_milo_A4000.json.gz",
            "--proposer",
            "does-not-exist",
        ],
        code: 2,
        words: &["--proposer: not for `replay`"],
    },
    Case {
        what: "replay with --resume (it keeps no journal; it was silently ignored)",
        args: &[
            "replay",
            "--cache",
            "fixtures/landscapes/convolution_milo_A4000.json.gz",
            "--resume",
        ],
        code: 2,
        words: &["--resume: not for `replay`"],
    },
    Case {
        what: "a trace that cannot be written (/proc takes no new files): exit 1, as documented",
        args: &["profile", "-p", K, "add", "--shape", "small", "--trace", "/proc/trace.json"],
        code: 1,
        words: &["--trace /proc/trace.json"],
    },
    Case {
        what: "a trace into a directory: refused before simulating",
        args: &["profile", "-p", K, "add", "--shape", "small", "--trace", "fixtures"],
        code: 2,
        words: &["--trace", "fixtures'", "a directory; name a file in it"],
    },
    Case {
        what: "early stop after zero evaluations",
        args: &["tune", "-p", K, "--early-stop", "0"],
        code: 2,
        words: &["--early-stop", "at least 1"],
    },
    Case {
        what: "a package of the workspace that is not a kernel crate",
        args: &["bench", "-p", "neuron-sim"],
        code: 2,
        words: &["`neuron-sim` is not a kernel crate", "neuron-fixtures-kernels"],
    },
    Case {
        what: "the only variant asked for is outside what the kernel accepts",
        args: &["bench", "-p", K, "--kernel", "gemm", "--shape", "small", "--params", "tile_n=129"],
        code: 2,
        words: &["tile_n = 129 must be 128, 256 or 512", "no valid variant to bench"],
    },
    Case {
        what: "a Rust keyword as a new kernel's name",
        args: &["new", "fn", "--manifest-path", "fixtures/kernels/Cargo.toml"],
        code: 2,
        words: &["kernel name `fn` is a Rust keyword"],
    },
    Case {
        what: "a report directory that cannot be made",
        args: &["report", "-p", K, "--out", "Cargo.toml/report"],
        code: 2,
        words: &["--out Cargo.toml/report: parent Cargo.toml is not a directory"],
    },
    Case {
        what: "a shape no selected kernel has",
        args: &["bench", "-p", K, "--shape", "nosuch"],
        code: 2,
        words: &[
            "--shape nosuch: no selected kernel has this shape",
            "gemm: qwen3_mlp_up, small, medium",
        ],
    },
    Case {
        what: "a shape the selected kernel lacks",
        args: &["bench", "-p", K, "--kernel", "rope", "--shape", "small"],
        code: 2,
        words: &["--shape small", "rope: qwen3_q, qwen3_k"],
    },
    Case {
        what: "a kernel that does not exist",
        args: &["bench", "-p", K, "--kernel", "gemmm"],
        code: 2,
        words: &["--kernel gemmm: no such kernel", "gemm"],
    },
    Case {
        what: "zero cases",
        args: &["check", "-p", K, "--cases", "0"],
        code: 2,
        words: &["--cases"],
    },
    Case {
        what: "zero timeout",
        args: &["bench", "-p", K, "--timeout", "0"],
        code: 2,
        words: &["--timeout"],
    },
    Case {
        what: "a goal that is neither a percentage, a time nor a throughput",
        args: &["tune", "-p", K, "--goal", "fast"],
        code: 2,
        words: &[
            "--goal",
            "`fast`: expected a speed-up such as `20%`, a time such as `5ms`",
            "or a throughput such as `150TFLOP/s`",
        ],
    },
    Case {
        what: "a throughput goal in bits, not bytes",
        args: &["tune", "-p", K, "--goal", "300Gb/s"],
        code: 2,
        words: &["--goal", "`300Gb/s`: gigabits per second? Give bytes: `GB/s`"],
    },
    Case {
        what: "a goal of no improvement",
        args: &["tune", "-p", K, "--goal", "0%"],
        code: 2,
        words: &["--goal", "`0%`: must be more than 0"],
    },
    Case {
        what: "--max-rounds without a goal",
        args: &["tune", "-p", K, "--max-rounds", "3"],
        code: 2,
        words: &["--max-rounds", "--goal"],
    },
    Case {
        what: "zero budget",
        args: &["tune", "-p", K, "--budget", "0"],
        code: 2,
        words: &["--budget", "at least 1"],
    },
    Case { what: "zero jobs", args: &["list", "-j", "0"], code: 2, words: &["--jobs"] },
    Case {
        what: "profile of a variant its rules refuse",
        args: &["profile", "-p", K, "gemm", "--shape", "small", "--params", "bufs=99"],
        code: 2,
        words: &["gemm", "bufs=99", "invalid"],
    },
    Case {
        what: "check of a variant its rule refuses: the rule's reason, not the shapes'",
        args: &["check", "-p", K, "--kernel", "add", "--params", "bufs=0", "--cases", "2"],
        code: 2,
        words: &["no valid variant to check", "the kernel's rule refuses these parameters"],
    },
    Case {
        what: "a negative buffer count: the value given, and which parameter",
        args: &["bench", "-p", K, "--kernel", "add", "--shape", "small", "--params", "bufs=-1"],
        code: 2,
        words: &["bufs = -1: must be at least 1"],
    },
    Case {
        what: "`bench --chip` with a typo, refused before anything is built",
        args: &["bench", "-p", K, "--chip", "TRN2", "--manifest-path", "/nonexistent/Cargo.toml"],
        code: 2,
        words: &["--chip TRN2: not a built-in chip"],
    },
    Case {
        what: "`check --chip` with a typo, refused before anything is built",
        args: &["check", "-p", K, "--chip", "TRN2", "--manifest-path", "/nonexistent/Cargo.toml"],
        code: 2,
        words: &["--chip TRN2: not a built-in chip"],
    },
    Case {
        what: "`build --chip` with a typo, refused before anything is built",
        args: &["build", "-p", K, "--chip", "TRN2", "--manifest-path", "/nonexistent/Cargo.toml"],
        code: 2,
        words: &["--chip TRN2: not a built-in chip"],
    },
    Case {
        what: "`tune --chip` with a typo, refused before anything is built",
        args: &["tune", "-p", K, "--chip", "TRN2", "--manifest-path", "/nonexistent/Cargo.toml"],
        code: 2,
        words: &["--chip TRN2: not a built-in chip"],
    },
    Case {
        what: "`profile --chip` with a typo, refused before anything is built",
        args: &[
            "profile",
            "-p",
            K,
            "add",
            "--chip",
            "TRN2",
            "--manifest-path",
            "/nonexistent/Cargo.toml",
        ],
        code: 2,
        words: &["--chip TRN2: not a built-in chip"],
    },
    Case {
        what: "`bench --model --chip` with a typo, refused before anything is built",
        args: &[
            "bench",
            "-p",
            Q,
            "--model",
            "qwen3",
            "--chip",
            "TRN2",
            "--manifest-path",
            "/nonexistent/Cargo.toml",
        ],
        code: 2,
        words: &["--chip TRN2: not a built-in chip"],
    },
    Case {
        what: "a chip file that does not exist",
        args: &["bench", "-p", K, "--kernel", "add", "--chip", "/nonexistent/my-chip.toml"],
        code: 2,
        words: &["--chip /nonexistent/my-chip.toml: no such file"],
    },
    Case {
        what: "chip of a file that does not exist (a positional argument, not --chip)",
        args: &["chip", "nope.toml"],
        code: 2,
        words: &["error: nope.toml: no such file"],
    },
    Case {
        what: "profile of a glob that matches several kernels",
        args: &["profile", "-p", K, "attention_*", "--shape", "small"],
        code: 2,
        words: &[
            "`attention_*` matches 2 kernels (attention_naive, attention_flash)",
            "profile takes one",
        ],
    },
    Case {
        what: "profile given its kernel twice (positional and --kernel)",
        args: &["profile", "-p", K, "add", "--kernel", "gemm"],
        code: 2,
        words: &["cannot be used with"],
    },
    Case {
        what: "new with a name cargo takes as a crate root",
        args: &["new", "main", "--manifest-path", "fixtures/kernels/Cargo.toml"],
        code: 2,
        words: &["kernel name `main` would be src/main.rs or src/lib.rs"],
    },
    Case {
        what: "a parameter given twice in --params",
        args: &[
            "bench",
            "-p",
            K,
            "--kernel",
            "add",
            "--shape",
            "small",
            "--params",
            "bufs=1,bufs=3",
        ],
        code: 2,
        words: &["--params for `add`", "bufs", "given twice"],
    },
    Case {
        what: "tune asked for bench's grid",
        args: &["tune", "-p", K, "--all-variants"],
        code: 2,
        words: &["--all-variants is `bench`'s grid", "--params bufs=2"],
    },
    Case {
        what: "-q with -v (as cargo, which would it be?), refused before anything is built",
        args: &["list", "-p", K, "-q", "-v"],
        code: 2,
        words: &["--quiet", "cannot be used with", "--verbose"],
    },
    Case {
        what: "a --color cargo does not know",
        args: &["chip", "trn2", "--color", "sometimes"],
        code: 2,
        words: &["invalid value 'sometimes' for '--color <WHEN>'", "auto, always, never"],
    },
    Case {
        what: "--jobs where no kernel code runs",
        args: &["chip", "trn2", "--jobs", "2"],
        code: 2,
        words: &["unexpected argument '--jobs'"],
    },
    Case {
        what: "bench --partition without --results (its part would be lost to merge)",
        args: &["bench", "-p", K, "--kernel", "add", "--shape", "small", "--partition", "1/2"],
        code: 2,
        words: &[
            "--partition 1/2 needs --results FILE",
            "only useful merged",
            "Usage: cargo neuron-tune bench ",
        ],
    },
    Case {
        what: "tune --partition without --results",
        args: &["tune", "-p", K, "--kernel", "add", "--partition", "2/2"],
        code: 2,
        words: &[
            "--partition 2/2 needs --results FILE",
            "only useful merged",
            "Usage: cargo neuron-tune tune ",
        ],
    },
    Case {
        what: "gate --partition without --results",
        args: &["gate", "--shape", "tiny", "--partition", "1/3"],
        code: 2,
        words: &[
            "--partition 1/3 needs --results FILE",
            "only useful merged",
            "Usage: cargo neuron-tune gate ",
        ],
    },
    Case {
        what: "a bench --results file under a file, refused before anything is built",
        args: &["bench", "-p", K, "--kernel", "add", "--results", "Cargo.toml/r.json"],
        code: 2,
        words: &["--results", "parent Cargo.toml is not a directory"],
    },
    Case {
        what: "a tune --results file under a file, refused before anything is built",
        args: &["tune", "-p", K, "--kernel", "add", "--results", "Cargo.toml/r.json"],
        code: 2,
        words: &["--results", "parent Cargo.toml is not a directory"],
    },
    Case {
        what: "a profile --trace file under a file, refused before anything is built",
        args: &["profile", "-p", K, "add", "--shape", "small", "--trace", "Cargo.toml/t.json"],
        code: 2,
        words: &["--trace", "parent Cargo.toml is not a directory"],
    },
    Case {
        what: "a baseline save --baseline file that is a directory",
        args: &["baseline", "save", "--baseline", "fixtures"],
        code: 2,
        words: &["--baseline", "a directory; name a file in it"],
    },
    Case {
        what: "a merge output file that is a directory",
        args: &["merge", "r.json", "--junit", "fixtures"],
        code: 2,
        words: &["--junit", "a directory; name a file in it"],
    },
    Case {
        what: "a parameter the kernel does not declare",
        args: &["bench", "-p", K, "--kernel", "add", "--shape", "small", "--params", "nope=1"],
        code: 2,
        words: &["--params for `add`", "nope"],
    },
    Case {
        what: "an unknown model",
        args: &["bench", "--model", "llama"],
        code: 2,
        words: &["--model llama: no such model", "qwen3"],
    },
    Case {
        what: "a model with a shape it does not have",
        args: &["bench", "--model", "qwen3", "--shape", "huge"],
        code: 2,
        words: &["--shape huge: model `qwen3` has no such shape", "tiny"],
    },
    Case {
        what: "--model with --shape MODEL@SHAPE, the kernel commands' form",
        args: &["bench", "--model", "qwen3", "--shape", "qwen3@tiny"],
        code: 2,
        words: &["drop the `qwen3@` prefix (`--shape tiny`)"],
    },
    Case {
        what: "--kernel with --model on bench",
        args: &["bench", "--model", "qwen3", "--kernel", "gemm"],
        code: 2,
        words: &["--model benchmarks whole models"],
    },
    Case {
        what: "check of a package with models but no kernels (it passed: 0 of 0 variants)",
        args: &["check", "-p", Q],
        code: 2,
        words: &[
            "neuron-fixtures-qwen3 has no kernels (it has models: qwen3, qwen3_naive",
            "`bench --model` and `gate` use them",
        ],
    },
    Case {
        what: "tune of a package with no kernels (it tuned 0 kernel shapes, exit 0)",
        args: &["tune", "-p", Q, "--budget", "3", "--seed", "1"],
        code: 2,
        words: &["neuron-fixtures-qwen3 has no kernels (it has models: qwen3"],
    },
    Case {
        what: "bench of a package with no kernels (it benched 0 variants, exit 0)",
        args: &["bench", "-p", Q],
        code: 2,
        words: &["neuron-fixtures-qwen3 has no kernels"],
    },
    Case {
        what: "build of a package with no kernels (it printed nothing, exit 0)",
        args: &["build", "-p", Q],
        code: 2,
        words: &["neuron-fixtures-qwen3 has no kernels"],
    },
    Case {
        what: "the pareto objective on a landscape",
        args: &[
            "replay",
            "--cache",
            "fixtures/landscapes/convolution_milo_A4000.json.gz",
            "--objective",
            "pareto",
        ],
        code: 2,
        words: &["--objective pareto", "times only"],
    },
];

#[test]
fn each_bad_input_is_refused_with_its_exit_code_and_says_why() {
    let mut failures = Vec::new();
    for c in CASES {
        let (code, _, err) = cli(c.args);
        let missing: Vec<&&str> = c.words.iter().filter(|w| !err.contains(**w)).collect();
        if code != c.code || !missing.is_empty() {
            failures.push(format!(
                "{}: exit {code} (want {}), missing {missing:?} in:\n{err}",
                c.what, c.code
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A refused run ends on its `error:` line: the status lines (the counts, the store) come
/// before it, so the last thing a reader sees is why it failed.
#[test]
fn a_refused_bench_ends_on_its_error_line() {
    let args = ["bench", "-p", K, "--kernel", "gemm", "--shape", "small", "--params", "tile_n=129"];
    let (code, _, err) = cli(&args);
    assert_eq!(code, 2, "{err}");
    let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    assert!(last.starts_with("error: no valid variant to bench"), "last line {last:?} of:\n{err}");
    assert!(err.contains("(store: "), "{err}");
}

/// A usage error clap catches is an `error` event too in a JSON run (the only line on
/// stdout), with clap's message on stderr.
#[test]
fn a_usage_error_of_a_json_run_is_an_error_event() {
    let (code, out, err) = cli_json(&["gate", "--threshold", "abc"]);
    assert_eq!(code, 2, "{err}");
    let errors = events(&out, "error");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(errors[0]["code"], 2);
    assert!(errors[0]["message"].as_str().unwrap().contains("--threshold"), "{out}");
    assert!(err.contains("--threshold"), "{err}");
    // --help is no error, in any format.
    let (code, out, _) = cli_json(&["gate", "--help"]);
    assert_eq!(code, 0);
    assert!(events(&out, "error").is_empty());
}

#[test]
fn a_kernel_without_the_requested_shape_is_skipped_with_a_note() {
    // `rope` has no `small` shape; every other kernel has one.
    let (code, out, err) =
        cli_json(&["build", "-p", K, "--shape", "small", "--kernel", "add", "--kernel", "rope"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("skipping `rope`: it has no shape `small`"), "{err}");
    let built = events(&out, "build");
    assert!(!built.is_empty() && built.iter().all(|b| b["kernel"] == "add"), "{out}");
}

#[test]
fn params_with_all_variants_pin_those_parameters() {
    let (code, out, err) = cli_json(&[
        "build",
        "-p",
        K,
        "--kernel",
        "add",
        "--shape",
        "small",
        "--all-variants",
        "--params",
        "bufs=2",
    ]);
    assert_eq!(code, 0, "{err}");
    let built = events(&out, "build");
    // The add kernel's space is bufs × cols_per_tile; pinning bufs leaves cols_per_tile.
    assert!(built.len() > 1, "{out}");
    assert!(built.iter().all(|b| b["params"]["bufs"] == 2), "{out}");
}

#[test]
fn check_shows_the_tolerance_its_verdict_used() {
    let (code, out, err) =
        cli_json(&["check", "-p", K, "--kernel", "add", "--cases", "2", "--seed", "1"]);
    assert_eq!(code, 0, "{err}");
    let c = &events(&out, "check")[0];
    let tol = &c["tolerance"];
    assert!(tol["atol"].as_f64().unwrap() > 0.0 && tol["rtol"].as_f64().unwrap() > 0.0, "{c}");
    // The absolute tolerance is atol scaled by the reference's RMS (never below atol).
    assert!(c["effective_atol"].as_f64().unwrap() >= tol["atol"].as_f64().unwrap(), "{c}");
}

/// `--kernel '*' --params X=v` means the selected kernels that have `X`: the others are
/// skipped with a note, not an error.
#[test]
fn params_with_a_pattern_apply_to_the_kernels_that_have_them() {
    let (code, out, err) = cli_json(&[
        "build",
        "-p",
        K,
        "--kernel",
        "*",
        "--shape",
        "small",
        "--params",
        "cols_per_tile=512",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("note: skipping `gemm`: it has no parameter `cols_per_tile`"), "{err}");
    let built = events(&out, "build");
    assert!(!built.is_empty() && built.iter().all(|b| b["kernel"] == "add"), "{out}");
}

/// A level of 0 where the kernel means "none" (`roomy`'s default, `scratch = 0`: no scratch
/// buffers) runs: the fixture read it with `Params::uint`, which refuses 0 (it is for
/// counts that must be positive), so its default variant was always invalid.
#[test]
fn a_zero_level_of_a_kernel_that_takes_zero_runs() {
    let manifest = neuron_tune_tests::broken_manifest("loop");
    let (code, out, err) = cli_json(&[
        "bench",
        "--manifest-path",
        &manifest,
        "--kernel",
        "roomy",
        "--shape",
        "narrow",
        "--params",
        "scratch=0",
    ]);
    assert_eq!(code, 0, "{err}");
    let benched = events(&out, "bench");
    assert_eq!(benched.len(), 1, "{out}");
    assert_eq!(benched[0]["params"]["scratch"], 0, "{out}");
    assert!(!err.contains("must be positive"), "{err}");
}

/// `profile --trace` into directories that do not exist yet makes them, as `--results`,
/// `--markdown` and `--junit` do (it was refused with "no directory"); under a file it is
/// still refused, before anything is built, naming the path.
#[test]
fn a_trace_into_missing_directories_makes_them_and_one_under_a_file_is_refused() {
    let dir = neuron_tune_tests::scratch_dir("trace-dirs");
    let trace = dir.join("new/dirs/t.json");
    let args = ["profile", "-p", K, "add", "--shape", "small", "--trace", trace.to_str().unwrap()];
    let (code, out, err) = cli_json(&args);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&trace).unwrap_or_else(|e| panic!("{e}: {err}"));
    let t: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(t["traceEvents"].as_array().is_some_and(|e| !e.is_empty()), "{text}");
    assert_eq!(events(&out, "profile")[0]["trace"], trace.to_str().unwrap(), "{out}");
    // Written atomically: no temporary file left beside it.
    let left: Vec<_> = std::fs::read_dir(trace.parent().unwrap()).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "{left:?}");

    let file = dir.join("afile");
    std::fs::write(&file, "").unwrap();
    let under = file.join("deeper/t.json");
    let args = ["profile", "-p", K, "add", "--shape", "small", "--trace", under.to_str().unwrap()];
    let (code, out, err) = cli(&args);
    assert_eq!(code, 2, "{out}{err}");
    let why = format!("parent {} is not a directory", file.display());
    assert!(err.contains("--trace") && err.contains(under.to_str().unwrap()), "{err}");
    assert!(err.contains(&why), "{err}");
    assert!(!err.contains("Building"), "refused before anything is built: {err}");
    assert!(std::fs::read(&file).unwrap().is_empty(), "the file is left alone");
}

/// A crate `init` made a kernel crate, before `new` added a kernel: `check` said "0 of 0
/// variants passed" and exited 0, so a CI step over it passed forever.
#[test]
fn a_kernel_crate_without_kernels_yet_is_told_how_to_add_one() {
    let dir = neuron_tune_tests::empty_kernel_crate("no-kernels-yet");
    let manifest = dir.join("Cargo.toml");
    let manifest = manifest.to_str().unwrap();
    for command in ["check", "bench", "build"] {
        let (code, out, err) = cli(&[command, "--manifest-path", manifest]);
        assert_eq!(code, 2, "{command}: {out}\n{err}");
        assert!(
            err.contains(
                "no-kernels-yet has no kernels yet (`cargo neuron-tune new NAME` adds one)"
            ),
            "{command}: {err}"
        );
    }
    // `list` still lists it (nothing to list is an answer there).
    let (code, _, err) = cli(&["list", "--manifest-path", manifest]);
    assert_eq!(code, 0, "{err}");
}

/// An unknown `--profile` is the command line's error (exit 2), said before anything is
/// built, naming the profiles there are; cargo refused it during the build, which read as a
/// failed build (exit 3). Run without the helpers, which give every build `--profile dev`.
#[test]
fn an_unknown_profile_is_a_usage_error_naming_the_profiles() {
    let td = neuron_tune_tests::test_target_dir();
    for command in ["bench", "gate"] {
        let out = std::process::Command::new(neuron_tune_tests::cli_exe())
            .args(["neuron-tune", command, "-p", K, "--profile", "nosuch", "--target-dir"])
            .arg(&td)
            .current_dir(neuron_tune_tests::root())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains(
                "--profile nosuch: no such profile (known here: bench, dev, release, test;"
            ),
            "{command}: {err}"
        );
        assert!(!err.contains("Compiling") && !err.contains("building the harness"), "{err}");
    }
}

/// A `harness` key of the wrong type is located and named, as the other metadata errors
/// are (file:line:column); it was reported as missing ("has no `harness = …`").
#[test]
fn a_harness_key_that_is_not_a_string_is_located_and_named() {
    let dir = neuron_tune_tests::empty_kernel_crate("harness-not-a-string");
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let wrong = text.replace("harness = \"harness-harness-not-a-string\"", "harness = 5");
    assert_ne!(text, wrong, "the scratch crate names its harness where this test expects");
    std::fs::write(&manifest, &wrong).unwrap();
    let line = wrong.lines().position(|l| l == "harness = 5").unwrap() + 1;
    let (code, _, err) = cli(&["list", "--manifest-path", manifest.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    let want = format!(
        "{}:{line}:11: package.metadata.neuron-tune.harness: expected a string naming the \
         harness binary target, found an integer",
        manifest.display()
    );
    assert!(err.contains(&want), "{want}\nin:\n{err}");
}

/// A passing check's largest error can exceed the printed absolute bound (the relative
/// term lets it through), so each line names the element nearest its own bound: its error,
/// its |ref| and the share of its bound it used — in the text and in the JSON.
#[test]
fn check_names_the_element_nearest_its_bound() {
    let args = ["check", "-p", K, "--kernel", "rmsnorm", "--cases", "4", "--seed", "1"];
    let (code, out, err) = cli_json(&args);
    assert_eq!(code, 0, "{err}");
    let c = &events(&out, "check")[0];
    let w = &c["worst"];
    let f =
        |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v} in {c}"));
    let (abs_err, abs_ref, allowed, ratio) =
        (f(&w["abs_err"]), f(&w["abs_ref"]), f(&w["allowed"]), f(&w["ratio"]));
    let rtol = f(&c["tolerance"]["rtol"]);
    // Its bound is its case's absolute tolerance (atol × max(1, RMS of that case's
    // reference): at least atol, at most the largest over the cases) plus rtol × |ref|.
    let own_atol = allowed - rtol * abs_ref;
    let atol = f(&c["tolerance"]["atol"]);
    assert!(
        own_atol >= atol * (1.0 - 1e-9) && own_atol <= f(&c["effective_atol"]) * (1.0 + 1e-9),
        "{c}"
    );
    assert!((ratio - abs_err / allowed).abs() <= 1e-9, "{c}");
    assert!(ratio > 0.0 && ratio <= 1.0 && abs_err <= f(&c["max_abs_err"]), "{c}");
    // The human line says it as a share of the bound.
    let (code, out, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    let line = out.lines().find(|l| l.contains("rmsnorm")).unwrap_or_else(|| panic!("{out}"));
    let pct = format!("worst at {:.0} % of its bound", ratio * 100.0);
    assert!(line.contains(&pct), "{pct:?} in {line}");
    assert!(line.contains(&format!("|ref| {abs_ref:.2e}")), "{line}");
}
