//! `tune` counts kernel code that panicked, crashed or hung as *faults*, apart from the
//! *invalid* configurations its rules refuse: in the table, the convergence line, the JSON
//! events, and with a pointer to where each fault can be seen again.

use neuron_tune_tests::{cli_env, double_crate, events, scratch_dir};
use serde_json::Value;

/// `double` that panics at `cols_per_tile = 128` (a bug in the kernel) and whose
/// `cols_per_tile = 65536` overflows SBUF (two buffers of 128 KiB per partition; trn2 has
/// 224 KiB): one fault, one invalid configuration, one that runs (the default, 512).
const BODY: &str = r#"
fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {
    let cw = p.uint("cols_per_tile")?;
    let index: Vec<u64> = if cw == 128 { Vec::new() } else { vec![0] };
    let _ = index[0]; // BUG: empty when cols_per_tile = 128
    let pool = nc.sbuf_pool("io", p.uint("bufs")? as u32);
    correct(nc, p, sh, x, y, pool)
}
"#;

fn tune(manifest: &str, json: bool) -> (i32, String, String) {
    let mut args = vec!["tune", "--manifest-path", manifest, "--kernel", "double"];
    args.extend_from_slice(&["--shape", "small", "--strategy", "grid", "--budget", "3"]);
    args.extend_from_slice(&["--seed", "17001", "--recheck"]);
    if json {
        args.extend_from_slice(&["--message-format", "json"]);
    }
    cli_env(&args, &[("NO_COLOR", "1")])
}

#[test]
fn kernel_code_that_panics_is_a_fault_not_an_invalid_configuration() {
    let dir = scratch_dir("tune-faults");
    double_crate(&dir, "tune-faults", "{ cols_per_tile = [128, 512, 65536] }", BODY, true);
    let manifest = dir.join("Cargo.toml");
    let manifest = manifest.to_str().unwrap();

    let (code, out, err) = tune(manifest, true);
    // A fault is a bug in kernel code: exit 4, as documented, the winner still recorded.
    assert_eq!(code, 4, "{err}");
    let t = &events(&out, "tune")[0];
    assert_eq!(t["evaluations"], 3, "{t}");
    assert_eq!((t["invalid"].as_u64(), t["faults"].as_u64()), (Some(1), Some(1)), "{t}");
    let third = 1.0 / 3.0;
    assert_eq!(t["convergence"]["invalid_fraction"], third, "{t}");
    assert_eq!(t["convergence"]["fault_fraction"], third, "{t}");
    let summary = &events(&out, "summary")[0];
    assert_eq!((summary["invalid"].as_u64(), summary["faults"].as_u64()), (Some(1), Some(1)));
    // The journal has the fault, with its error, for anyone to look at again.
    let journal = t["journal"].as_str().unwrap();
    let text = std::fs::read_to_string(journal).unwrap();
    assert!(text.contains("cols_per_tile\":128") && text.contains("panic: "), "{text}");
    let failed = events(&out, "variant_failed");
    assert_eq!(failed.len(), 1, "{out}");
    assert_eq!(
        (failed[0]["kind"].as_str(), &failed[0]["params"]["cols_per_tile"]),
        (Some("panic"), &Value::from(128))
    );
    // The error names the journal too.
    assert!(err.contains(&format!("the journal {journal} has every one")), "{err}");

    // As a person reads it: the table's columns, the convergence line, and where to look.
    let (code, out, err) = tune(manifest, false);
    assert_eq!(code, 4, "{err}");
    let mut lines = out.lines().skip_while(|l| !l.trim_start().starts_with("kernel "));
    let (header, row) = (lines.next().expect(&out), lines.next().expect(&out));
    // The last columns, as the table ends (its params have no spaces).
    fn tail(l: &str) -> Vec<&str> {
        l.split_whitespace().rev().take(5).collect()
    }
    assert_eq!(tail(header), ["params", "faults", "invalid", "pruned", "evaluations"], "{out}");
    assert_eq!(tail(row)[1..], ["1", "1", "0", "3"], "{out}");
    let line = "0 % pruned, 33 % invalid, 33 % faults (kernel code panicked, crashed or hung, or \
                failed its correctness check)";
    assert!(out.contains(line), "{out}");
    let faults = out.lines().find(|l| l.trim_start().starts_with("faults: ")).expect(&out);
    assert!(
        faults.trim_start().starts_with(
            "faults: 1 of 3 evaluations: the kernel code panicked, crashed or hung (a bug in the \
             kernel, not a configuration it refuses); `cargo neuron-tune bench "
        ) && faults.contains("` reproduces the first")
            && faults.contains(journal),
        "{faults}"
    );
    // The command names the crate and its package, and the run's build (`--profile dev`).
    let command = faults.split('`').nth(1).unwrap();
    let start = format!(
        "cargo neuron-tune bench --manifest-path {manifest} -p tune-faults --kernel double \
         --shape small --params "
    );
    assert!(command.starts_with(&start) && command.contains("cols_per_tile=128 "), "{faults}");
    assert!(command.contains(" --profile dev "), "{faults}");
    assert!(err.contains("a fault of the kernel code, counted apart from invalid"), "{err}");
    // Only the refused configuration is invalid: not invalid-heavy, whatever the faults.
    assert!(!out.contains("invalid-heavy"), "{out}");
    // Pasted into a shell where the run was started, the command panics again (exit 4, as
    // `bench` ends when kernel code panicked).
    let (code, bench_out, bench_err) = neuron_tune_tests::run_printed(command);
    assert_eq!(code, 4, "{command}\n{bench_out}\n{bench_err}");
    let said = "panic    double bufs=2,cols_per_tile=128 at small: index out of bounds";
    assert!(bench_err.contains(said), "{bench_err}");
}
