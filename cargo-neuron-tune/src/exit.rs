//! The documented exit codes, one enum: the README, `--help` and every command use it.

use std::fmt;

/// How a command ends. The numbers are public API (CI scripts branch on them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    /// A bug or an environment problem (a worker broke the protocol, a file could not be
    /// written).
    Internal = 1,
    /// Bad flags or configuration: a bad TOML space, an unknown kernel, shape or chip.
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
            Exit::Config => "usage or configuration error (bad flag, bad TOML space, unknown kernel), or no valid variant to run",
            Exit::Build => "build failed (cargo's errors are printed above)",
            Exit::Check => {
                "a correctness check failed (the shrunk failing case is printed), a variant's kernel code panicked, crashed or hung, or (gate) a model could not be evaluated"
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

    /// The table `--help` ends with.
    pub fn help_table() -> String {
        let mut s = String::from("Exit codes:\n");
        for e in Exit::ALL {
            s.push_str(&format!("  {:<3}  {}\n", e.code(), e.meaning()));
        }
        s
    }
}

/// A command's failure: its exit code and what to tell the user.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure { exit, message: message.into() }
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
        assert!(Exit::help_table().contains("  5    a performance regression"));
    }
}
