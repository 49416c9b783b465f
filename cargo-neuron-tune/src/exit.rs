//! The documented exit codes, one enum: the README, `--help` and every command use it.

use std::fmt;

/// How a command ends. The numbers are public API (CI scripts branch on them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    /// A bug or an environment problem (a worker broke the protocol, a file could not be
    /// written).
    Internal = 1,
    /// Bad flags or configuration: a bad TOML space, an unknown kernel, shape or chip, a
    /// damaged tuned database or baseline (refused by the commands that use it).
    Config = 2,
    /// cargo could not build a harness.
    Build = 3,
    /// A correctness check failed, or a variant crashed or hung.
    Check = 4,
    /// A performance regression (gate).
    Regression = 5,
    /// `tune --goal`: the goal was not met within the rounds and budget (the best found is
    /// still recorded).
    GoalNotMet = 6,
    /// Stopped by Ctrl-C, SIGTERM or SIGHUP (everything finished is kept).
    Interrupted = 130,
}

impl Exit {
    pub const ALL: [Exit; 8] = [
        Exit::Ok,
        Exit::Internal,
        Exit::Config,
        Exit::Build,
        Exit::Check,
        Exit::Regression,
        Exit::GoalNotMet,
        Exit::Interrupted,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => "success",
            Exit::Internal => "internal error (a worker broke the protocol, a file could not be written)",
            Exit::Config => "usage or configuration error (bad flag, bad TOML space, unknown kernel, a damaged tuned database or baseline), or no valid variant to run",
            Exit::Build => "build failed (cargo's errors are printed above)",
            Exit::Check => {
                "a correctness check failed (the shrunk failing case is printed), a variant's kernel code panicked, crashed or hung, or (gate) a model could not be evaluated or a baselined one is gone"
            }
            Exit::Regression => {
                "a performance regression (gate), or a stale tuned entry (gate --strict)"
            }
            Exit::GoalNotMet => {
                "tune --goal: the goal was not met (how far it got and what limits it are printed)"
            }
            Exit::Interrupted => {
                "interrupted by Ctrl-C, SIGTERM or SIGHUP (finished results are kept; rerun to continue)"
            }
        }
    }

    /// The table `--help` ends with: each meaning wrapped under its own column at 78
    /// columns, within which clap leaves a line alone on an 80-column terminal (a longer
    /// line it wraps back to the margin, under the codes).
    pub fn help_table() -> String {
        format!("Exit codes:\n{}", Exit::help_rows(&Exit::ALL))
    }

    /// The rows of [`Exit::help_table`] for `codes` (a command's own help lists those it can
    /// give).
    pub fn help_rows(codes: &[Exit]) -> String {
        const WIDTH: usize = 78;
        const INDENT: usize = 7;
        let mut s = String::new();
        for &e in codes {
            let mut line = format!("  {:<3} ", e.code());
            for word in e.meaning().split(' ') {
                if line.len() + 1 + word.len() > WIDTH && line.trim_end().len() > INDENT {
                    s.push_str(line.trim_end());
                    s.push('\n');
                    line = " ".repeat(INDENT - 1);
                }
                line.push(' ');
                line.push_str(word);
            }
            s.push_str(&line);
            s.push('\n');
        }
        s
    }
}

/// A command's failure: its exit code and what to tell the user.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
    /// A failed harness build: the compiler's diagnostics (collected in JSON mode only,
    /// for the `error` event; a person saw them on stderr), else empty.
    pub diagnostics: Vec<String>,
}

impl Failure {
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure { exit, message: message.into(), diagnostics: Vec::new() }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::new(Exit::Config, format!("{e:#}"))
    }
}

/// Shorthand for the commands.
pub fn fail(exit: Exit, message: impl Into<String>) -> Failure {
    Failure::new(exit, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_numbers() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6, 130]);
        let table = Exit::help_table();
        assert!(table.contains("\n  5    a performance regression"), "{table}");
        // Wrapped under the meanings' column: every line is a code's or indented past it.
        for line in table.lines().skip(1) {
            assert!(line.len() <= 78, "{line}");
            let code = line[..5].trim();
            assert!(code.is_empty() || code.parse::<u8>().is_ok(), "{line}");
            assert_eq!(&line[5..7], "  ", "{line}");
        }
        assert!(table.lines().count() > Exit::ALL.len() + 1, "some meanings wrap: {table}");
    }
}
