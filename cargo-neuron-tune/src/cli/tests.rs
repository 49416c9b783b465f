//! The command line's parsing, help and flag rules.

use super::*;
use clap::CommandFactory;

#[test]
fn a_usage_error_event_keeps_the_tip_and_drops_the_synopsis() {
    use clap::Parser;
    let error = Cli::try_parse_from(["cargo-neuron-tune", "tune", "--budgte", "3"])
        .expect_err("a misspelt flag");
    let message = usage_error_message(&error.to_string());
    assert!(message.starts_with("unexpected argument '--budgte' found"), "{message}");
    assert!(message.contains("--budget"), "the tip is kept: {message}");
    assert!(!message.contains("Usage:"), "{message}");
    assert!(!message.contains("--help"), "{message}");
}

#[test]
fn a_threshold_is_a_percentage_with_or_without_its_sign() {
    assert_eq!(percent("5"), Ok(5.0));
    assert_eq!(percent("5%"), Ok(5.0));
    assert_eq!(percent("0.5%"), Ok(0.5));
    for bad in ["", "%", "five", "-1", "101%", "nan"] {
        assert!(percent(bad).is_err(), "{bad}");
    }
}

/// Counts and seeds name their flag and say what they take, for 0, negative numbers (which
/// clap would otherwise take for flags: "unexpected argument '-3'") and words alike.
#[test]
fn counts_and_seeds_say_what_they_take() {
    use clap::Parser;
    let error = |args: &[&str]| {
        let argv = [&["cargo-neuron-tune", "tune"][..], args].concat();
        Cli::try_parse_from(argv).expect_err("refused").to_string()
    };
    for (args, words) in [
        (&["--budget", "-3"][..], "invalid value '-3' for '--budget <BUDGET>': must be at least 1"),
        (&["--budget", "0"], "invalid value '0' for '--budget <BUDGET>': must be at least 1"),
        (&["--budget", "x"], "for '--budget <BUDGET>': not a whole number"),
        (&["-j", "-2"], "invalid value '-2' for '--jobs <N>': must be at least 1"),
        (&["--build-jobs", "0"], "invalid value '0' for '--build-jobs <N>': must be at least 1"),
        (&["--build-jobs", "x"], "for '--build-jobs <N>': not a whole number"),
        (&["--timeout", "0"], "invalid value '0' for '--timeout <SECS>': must be at least 1"),
        (
            &["--seed", "-1"],
            "for '--seed <SEED>': a seed is a whole number from 0 to 18446744073709551615",
        ),
    ] {
        let message = error(args);
        assert!(message.contains(words), "{args:?}: {message}");
    }
    assert_eq!(positive::<u32>(" 7 "), Ok(7));
    assert_eq!(seed("0"), Ok(0));
}

#[test]
fn cli_is_well_formed() {
    Cli::command().debug_assert();
}

/// As an 80-column terminal shows it, the exit-code table keeps each meaning under its
/// own column: no line of it starts at the margin but a code's.
#[test]
fn the_exit_table_renders_in_80_columns() {
    let help = Cli::command().term_width(80).render_long_help().to_string();
    let table = help.split("Exit codes:\n").nth(1).expect("the table ends --help");
    for line in table.lines().filter(|l| !l.trim().is_empty()) {
        let code = line.trim_start().split(' ').next().unwrap();
        let indent = line.len() - line.trim_start().len();
        assert!((indent == 2 && code.parse::<u8>().is_ok()) || indent == 7, "{line:?} in\n{table}");
    }
}

#[test]
fn cargo_flags_are_spelled_as_cargo_spells_them() {
    let cli = Cli::try_parse_from([
        "cargo-neuron-tune",
        "bench",
        "--manifest-path",
        "x/Cargo.toml",
        "-p",
        "kernels",
        "--release",
        "--target-dir",
        "t",
        "--locked",
        "--offline",
        "--frozen",
        "--features",
        "a,b",
        "--kernel",
        "gemm",
        "--message-format",
        "json",
    ])
    .unwrap();
    let Command::Bench { cargo, select, .. } = cli.command else { panic!("bench") };
    assert_eq!(cargo.packages, ["kernels"]);
    assert!(cargo.release && cargo.locked && cargo.offline && cargo.frozen);
    assert_eq!(select.kernels, ["gemm"]);
    assert_eq!(cli.global.message_format, MessageFormat::Json);
}

/// `--color`, `-q` and `-v` are global, as cargo's are (before or after the command), `-v`
/// counts, and `-q` with `-v` is refused, as cargo refuses it.
#[test]
fn output_flags_are_global_and_counted_as_in_cargo() {
    use clap::Parser;
    let parse = |args: &[&str]| Cli::try_parse_from(["cargo-neuron-tune"].iter().chain(args));
    let g = parse(&["list"]).unwrap().global;
    assert_eq!((g.color, g.quiet, g.verbose), (ColorWhen::Auto, false, 0));
    let g = parse(&["--color", "never", "bench", "-vv"]).unwrap().global;
    assert_eq!((g.color, g.verbose), (ColorWhen::Never, 2));
    let g = parse(&["chip", "-v", "--verbose", "--color=always"]).unwrap().global;
    assert_eq!((g.color, g.verbose), (ColorWhen::Always, 2));
    assert!(parse(&["tune", "-q"]).unwrap().global.quiet);
    assert!(parse(&["--quiet", "gate"]).unwrap().global.quiet);
    let conflict = parse(&["bench", "-q", "-v"]).map(|_| ()).map_err(|e| e.kind());
    assert_eq!(conflict, Err(clap::error::ErrorKind::ArgumentConflict));
    assert!(parse(&["list", "--color", "sometimes"]).is_err());
    // Each value says what it does.
    let help = Cli::command().render_long_help().to_string();
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for words in ["- auto: Colour when stdout", "- always: Always colour", "- never: Never colour"]
    {
        assert!(help.contains(words), "{words} in\n{help}");
    }
}

#[test]
fn flags_that_would_silently_override_each_other_are_refused() {
    use clap::error::ErrorKind;
    let parse =
        |args: &[&str]| Cli::try_parse_from(["cargo-neuron-tune"].iter().chain(args)).map(|_| ());
    let conflict = |args: &[&str]| parse(args).map_err(|e| e.kind());
    // An external proposer replaces the strategy: asking for both is a mistake.
    assert_eq!(
        conflict(&["tune", "--proposer", "p", "--strategy", "random"]),
        Err(ErrorKind::ArgumentConflict)
    );
    assert!(parse(&["tune", "--proposer", "p"]).is_ok());
    assert!(parse(&["tune", "--strategy", "random"]).is_ok());
    // As in cargo, --exclude trims the whole workspace, not a -p selection.
    assert_eq!(conflict(&["bench", "-p", "k", "--exclude", "k"]), Err(ErrorKind::ArgumentConflict));
    assert!(parse(&["bench", "--exclude", "k"]).is_ok());
    // cargo refuses --release with --profile (which profile would it be?); so do we.
    assert_eq!(
        conflict(&["bench", "--release", "--profile", "dev"]),
        Err(ErrorKind::ArgumentConflict)
    );
}

/// `--workspace` selects every package, even with -p (cargo's reading); without either,
/// every package is selected too; -p alone or --exclude is a partial selection.
#[test]
fn workspace_selects_every_package_as_in_cargo() {
    // (every package?, is `k` selected?, is `other` selected?)
    let flags = |args: &[&str]| {
        let cli = Cli::try_parse_from(["cargo-neuron-tune", "bench"].iter().chain(args)).unwrap();
        let Command::Bench { cargo, .. } = cli.command else { panic!("bench") };
        (cargo.selects_every_package(), cargo.selects("k"), cargo.selects("other"))
    };
    assert_eq!(flags(&[]), (true, true, true));
    assert_eq!(flags(&["--workspace"]), (true, true, true));
    assert_eq!(flags(&["-p", "k", "--workspace"]), (true, true, true));
    assert_eq!(flags(&["-p", "k"]), (false, true, false));
    assert_eq!(flags(&["--exclude", "k"]), (false, false, true));
}

/// Each command's help lists the flags it acts on and no others: `--all-variants` only
/// where a grid is walked, `--jobs`/`--timeout` only where kernel code runs.
#[test]
fn each_command_offers_only_the_flags_it_uses() {
    let mut cli = Cli::command();
    cli.build();
    let offers = |path: &[&str], flag: &str| {
        let mut c = &cli;
        for name in path {
            c = c.find_subcommand(name).unwrap_or_else(|| panic!("no command {name}"));
        }
        c.get_arguments().any(|a| a.get_long() == Some(flag) && !a.is_hide_set())
    };
    for cmd in ["build", "check", "bench"] {
        assert!(offers(&[cmd], "all-variants"), "{cmd}");
    }
    for cmd in ["tune", "list", "profile", "gate", "report"] {
        assert!(!offers(&[cmd], "all-variants"), "{cmd}");
    }
    let runs_kernels: &[&[&str]] = &[
        &["list"],
        &["build"],
        &["check"],
        &["bench"],
        &["profile"],
        &["tune"],
        &["gate"],
        &["report"],
        &["baseline", "save"],
    ];
    let runs_none: &[&[&str]] = &[
        &["chip"],
        &["analyze"],
        &["replay"],
        &["init"],
        &["new"],
        &["merge"],
        &["baseline", "show"],
    ];
    for path in runs_kernels {
        assert!(offers(path, "jobs") && offers(path, "timeout"), "{path:?}");
        let mut args = vec!["cargo-neuron-tune"];
        args.extend_from_slice(path);
        if path == &["profile"] {
            args.push("gemm");
        }
        args.extend_from_slice(&["-j", "3", "--timeout", "7"]);
        let workers = Cli::try_parse_from(&args).unwrap().command.workers();
        assert_eq!((workers.jobs, workers.timeout), (Some(3), 7), "{path:?}");
    }
    for path in runs_none {
        assert!(!offers(path, "jobs") && !offers(path, "timeout"), "{path:?}");
    }
    // Every command that builds harnesses takes cargo's build jobs, as `--build-jobs`.
    for path in runs_kernels {
        assert!(offers(path, "build-jobs"), "{path:?}");
        let mut args = vec!["cargo-neuron-tune"];
        args.extend_from_slice(path);
        if path == &["profile"] {
            args.push("gemm");
        }
        args.extend_from_slice(&["--build-jobs", "2", "-j", "3"]);
        let cli = Cli::try_parse_from(&args).unwrap();
        let cargo = match cli.command {
            Command::List { cargo, .. }
            | Command::Build { cargo, .. }
            | Command::Check { cargo, .. }
            | Command::Bench { cargo, .. }
            | Command::Profile { cargo, .. }
            | Command::Tune { cargo, .. }
            | Command::Gate { cargo, .. }
            | Command::Report { cargo, .. }
            | Command::Baseline { action: BaselineAction::Save { cargo, .. } } => cargo,
            other => panic!("{path:?} parsed as {other:?}"),
        };
        assert_eq!(cargo.build_jobs, Some(2), "{path:?}");
    }
    // Commands that build nothing offer no flag that chooses a build.
    for path in [&["merge"][..], &["baseline", "show"], &["chip"], &["replay"]] {
        for flag in
            ["package", "features", "profile", "release", "workspace", "exclude", "build-jobs"]
        {
            assert!(!offers(path, flag), "{path:?} --{flag}");
        }
    }
    assert!(!offers(&["bench"], "proposer") && !offers(&["replay"], "proposer"));
    assert!(offers(&["merge"], "target-dir") && offers(&["baseline", "show"], "manifest-path"));
    assert!(offers(&["tune"], "proposer") && offers(&["gate"], "package"));
}

/// `--shape MODEL@SHAPE` is described where it is taken, and `tune`, which refuses it,
/// says what it takes instead.
#[test]
fn only_the_commands_that_take_model_shapes_describe_them() {
    let mut cli = Cli::command();
    cli.build();
    let shape_help = |cmd: &str| {
        let c = cli.find_subcommand(cmd).unwrap_or_else(|| panic!("no command {cmd}"));
        let arg = c.get_arguments().find(|a| a.get_long() == Some("shape")).expect("--shape");
        let help = arg.get_long_help().or(arg.get_help()).expect("help");
        help.to_string()
    };
    for cmd in ["build", "check", "bench"] {
        assert!(shape_help(cmd).contains("`MODEL@SHAPE`: each kernel at the dims"), "{cmd}");
    }
    let tune = shape_help("tune");
    assert!(tune.contains("`--model MODEL --shape SHAPE`"), "{tune}");
    assert!(tune.contains("not `--shape MODEL@SHAPE`"), "{tune}");
}

#[test]
fn tune_refuses_all_variants_with_a_pointer_to_params() {
    let cli = Cli::try_parse_from(["cargo-neuron-tune", "tune", "--all-variants"]).unwrap();
    assert!(matches!(cli.command, Command::Tune { all_variants: true, .. }));
    let cli = Cli::try_parse_from(["cargo-neuron-tune", "bench", "--all-variants"]).unwrap();
    let Command::Bench { select, grid, .. } = cli.command else { panic!("bench") };
    assert!(grid.apply(&select).all_variants);
}

#[test]
fn help_documents_exit_codes() {
    let help = Cli::command().render_long_help().to_string();
    assert!(
        help.contains("3    build failed") && help.contains("5    a performance regression"),
        "{help}"
    );
}
