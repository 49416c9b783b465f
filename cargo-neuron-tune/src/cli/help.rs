//! What each command's `--help` ends with: examples a new user can run in this repository's
//! checkout (the bundled fixtures), and the exit codes that command can give — the full
//! table is on `cargo neuron-tune --help`, but a user reading `tune --help` should not have
//! to go there to learn what 6 or 130 means.

use crate::exit::Exit;

/// The examples and exit codes of `command`'s help.
pub fn after(command: &str) -> String {
    let (examples, codes): (&[(&str, &str)], &[Exit]) = match command {
        "tune" => (
            &[
                (
                    "the README's main job: every fixture kernel at its small shape, 40 \
                     simulations each, seed 1",
                    "cargo neuron-tune tune -p neuron-fixtures-kernels --shape small --budget 40 --seed 1",
                ),
                (
                    "one kernel with another strategy, two workers",
                    "cargo neuron-tune tune -k gemm --shape medium --strategy bayes --budget 100 -j 2",
                ),
                (
                    "continue a run that was interrupted (the seed it printed, or its latest)",
                    "cargo neuron-tune tune -k gemm --shape medium --resume",
                ),
                (
                    "pin some parameters, search the rest",
                    "cargo neuron-tune tune -k gemm --shape small --params transpose=pe,bufs=3",
                ),
                (
                    "tune what a model calls, at the dims it calls it with",
                    "cargo neuron-tune tune --model qwen3 --shape tiny",
                ),
            ],
            &[
                Exit::Ok,
                Exit::Internal,
                Exit::Config,
                Exit::Build,
                Exit::Check,
                Exit::GoalNotMet,
                Exit::Interrupted,
            ],
        ),
        "bench" => (
            &[
                (
                    "every variant of a kernel's space at one shape, fastest first in the summary",
                    "cargo neuron-tune bench -k softmax --shape qwen3_scores --all-variants",
                ),
                (
                    "one variant (unnamed parameters keep their defaults)",
                    "cargo neuron-tune bench -k gemm --shape small --params block_m=2,k_tiles=4",
                ),
                (
                    "the variants the tuned database records, on another chip",
                    "cargo neuron-tune bench -k rmsnorm --tuned --chip trn1",
                ),
                (
                    "a model end to end: tokens/s tuned and default, per kernel call",
                    "cargo neuron-tune bench --model qwen3 --shape prefill_16k",
                ),
            ],
            &[Exit::Ok, Exit::Internal, Exit::Config, Exit::Build, Exit::Check, Exit::Interrupted],
        ),
        "check" => (
            &[
                (
                    "every variant of a kernel against its CPU reference, on random small shapes",
                    "cargo neuron-tune check -p neuron-fixtures-kernels -k rmsnorm --all-variants",
                ),
                (
                    "more cases, another seed (printed on every run: a failure replays with it)",
                    "cargo neuron-tune check -k gemm --cases 64 --seed 7",
                ),
                (
                    "the tuned winners at full size, after changing a kernel",
                    "cargo neuron-tune check -k gemm --tuned --shape medium",
                ),
            ],
            &[Exit::Ok, Exit::Internal, Exit::Config, Exit::Build, Exit::Check, Exit::Interrupted],
        ),
        "profile" => (
            &[
                (
                    "where the time goes in the default variant, and a Perfetto trace",
                    "cargo neuron-tune profile gemm --shape small --trace gemm.json",
                ),
                (
                    "the variant the tuned database records",
                    "cargo neuron-tune profile attention_flash --tuned --shape small",
                ),
            ],
            &[Exit::Ok, Exit::Internal, Exit::Config, Exit::Build, Exit::Check, Exit::Interrupted],
        ),
        "replay" => (
            &[
                (
                    "the default strategy on a recorded GPU landscape, 50 evaluations",
                    "cargo neuron-tune replay --cache fixtures/landscapes/convolution_milo_A4000.json.gz --budget 50",
                ),
                (
                    "a Kernel Tuner cache of your own (gzipped or not; T4 results too), another strategy",
                    "cargo neuron-tune replay --strategy bayes --cache my_kernel_cache.json",
                ),
            ],
            &[Exit::Ok, Exit::Internal, Exit::Config, Exit::Interrupted],
        ),
        _ => return String::new(),
    };
    let mut s = String::from("Examples:\n");
    for (what, command) in examples {
        s.push_str(&format!("  # {what}\n  {command}\n"));
    }
    s.push_str("\nExit codes (all of them: cargo neuron-tune --help):\n");
    s.push_str(&Exit::help_rows(codes));
    s
}

#[cfg(test)]
mod tests {
    use super::after;
    use crate::cli::Cli;
    use clap::Parser;

    /// Every example parses with the real command line (a renamed flag would break one), and
    /// names the command whose help shows it.
    #[test]
    fn every_example_is_a_valid_command_line() {
        for command in ["tune", "bench", "check", "profile", "replay"] {
            let text = after(command);
            let lines: Vec<&str> =
                text.lines().filter(|l| l.trim_start().starts_with("cargo neuron-tune")).collect();
            assert!(lines.len() >= 2, "{command}: {text}");
            for line in lines {
                let args = line.split_whitespace().skip(2); // `cargo neuron-tune`
                let parsed = Cli::try_parse_from(std::iter::once("cargo-neuron-tune").chain(args));
                assert!(parsed.is_ok(), "{line}: {}", parsed.unwrap_err());
                assert!(line.contains(&format!("neuron-tune {command} ")), "{line}");
                // A bundled file an example names is in the repository.
                let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
                let mut words = line.split_whitespace();
                while let Some(w) = words.next() {
                    if w == "--cache" {
                        let file = words.next().unwrap();
                        let bundled = file.starts_with("fixtures/");
                        assert!(!bundled || root.join(file).is_file(), "{line}: no {file}");
                    }
                }
            }
            assert!(text.contains("\n  0    success\n"), "{command}: {text}");
            // Every command that reads or writes files can fail on them (exit 1).
            assert!(text.contains("\n  1    internal error"), "{command}: {text}");
            // Within the 100 columns clap wraps help at, so no example breaks mid-command.
            for line in text.lines() {
                assert!(line.len() <= 98, "{command}: too wide to stay whole: {line}");
            }
        }
        assert_eq!(after("list"), "");
    }
}
