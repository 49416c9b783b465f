//! The `cargo neuron-tune …` command lines the tool prints for a person to copy: the
//! reproducer of a failed check or a fault, the `baseline save` a gate suggests, the next
//! step after `new`.
//!
//! Why one builder: a printed command is only worth printing if pasting it into a shell
//! runs what it says. The values in it come from the user (`--chip my\ chips/c.toml`, a
//! `--manifest-path` with spaces, `--features "a b"`) or from files (a damaged record's
//! fields), so each one is quoted for a POSIX shell when it needs it, and left bare when it
//! does not (`--params a=1,b=2`, plain paths), so that the common line reads as typed. The
//! quoting itself is `shlex`'s (single or double quotes as the text needs, also safe from
//! interactive `!` history expansion); this module only decides what is plain enough to
//! need none. The run's cargo selection (`--manifest-path`, `-p`) and build flags
//! (`--features`, `--profile`, `--target-dir`, …) are carried the same way everywhere, so a
//! reproducer names the package whose kernel failed and rebuilds the same code. The global
//! output flags (`--message-format`, `--color`, `-q`, `-v`) are not carried: they change
//! what is said, never a result, and the person pasting the line picks their own.

use crate::cargo::CargoFlags;
use std::borrow::Cow;
use std::fmt;

/// A `cargo neuron-tune` command line, built flag by flag; [`fmt::Display`] renders it.
///
/// ```
/// use cargo_neuron_tune::command_line::CommandLine;
/// let c = CommandLine::new("check")
///     .flag("--kernel", "add")
///     .flag("--params", "bufs=2,tile=128")
///     .opt_flag("--chip", Some("my chips/c.toml"))
///     .opt_flag("--seed", None::<u64>);
/// assert_eq!(
///     c.to_string(),
///     "cargo neuron-tune check --kernel add --params bufs=2,tile=128 --chip 'my chips/c.toml'"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine {
    line: String,
}

impl CommandLine {
    /// `cargo neuron-tune SUBCOMMAND`. The subcommand is literal words (`check`, `baseline
    /// save`), written as they are: never a value.
    pub fn new(subcommand: &'static str) -> CommandLine {
        CommandLine { line: format!("cargo neuron-tune {subcommand}") }
    }

    /// A positional argument (quoted when it needs it).
    pub fn arg(mut self, value: impl fmt::Display) -> CommandLine {
        self.line.push(' ');
        self.line.push_str(&quote(&value.to_string()));
        self
    }

    /// `NAME VALUE` (the value quoted when it needs it; the name is a literal flag).
    pub fn flag(mut self, name: &'static str, value: impl fmt::Display) -> CommandLine {
        self.line.push(' ');
        self.line.push_str(name);
        self.arg(value)
    }

    /// `NAME VALUE` when there is a value, else nothing.
    pub fn opt_flag(self, name: &'static str, value: Option<impl fmt::Display>) -> CommandLine {
        match value {
            Some(v) => self.flag(name, v),
            None => self,
        }
    }

    /// `NAME VALUE` once per value (a repeatable flag).
    pub fn flags<I>(self, name: &'static str, values: I) -> CommandLine
    where
        I: IntoIterator,
        I::Item: fmt::Display,
    {
        values.into_iter().fold(self, |c, v| c.flag(name, v))
    }

    /// `NAME` when `on` (a flag without a value).
    pub fn switch(mut self, name: &'static str, on: bool) -> CommandLine {
        if on {
            self.line.push(' ');
            self.line.push_str(name);
        }
        self
    }

    /// The run's package selection as it was given: `--manifest-path`, each `-p` and each
    /// `--exclude` (`gate`'s `baseline save` selects what the gate did).
    pub fn selection(self, cargo: &CargoFlags) -> CommandLine {
        self.opt_flag("--manifest-path", cargo.manifest_path.as_ref().map(|p| p.display()))
            .flags("-p", &cargo.packages)
            .flags("--exclude", &cargo.exclude)
    }

    /// One package of the run's workspace: the run's `--manifest-path` (if it had one) and
    /// `-p PACKAGE`, so the command finds that package's kernel from where the run was
    /// started, and never another package's kernel of the same name.
    pub fn package(self, cargo: &CargoFlags, package: &str) -> CommandLine {
        self.opt_flag("--manifest-path", cargo.manifest_path.as_ref().map(|p| p.display()))
            .flag("-p", package)
    }

    /// `--chip` for a chip a record names (a tuned record, a baseline entry): a built-in by
    /// its name; a chip file by its file name, `NAME.toml` (a chip file's name is its
    /// file's stem, [`crate::select::chip_spec`]). Records do not keep the file's
    /// directory: [`chip_file_hint`] says so beside the command.
    pub fn record_chip(self, chip: &str) -> CommandLine {
        if neuron_sim::Chip::builtin(chip).is_some() {
            self.flag("--chip", chip)
        } else {
            self.flag("--chip", format!("{chip}.toml"))
        }
    }

    /// The run's flags that decide what is built and where: `--features`,
    /// `--all-features`, `--no-default-features`, `--profile` (a debug build's overflow
    /// checks can be the fault), `--target-dir` (the same build and store). Not `--locked`
    /// or `--offline`, which change no result.
    pub fn build_flags(self, cargo: &CargoFlags) -> CommandLine {
        self.flags("--features", &cargo.features)
            .switch("--all-features", cargo.all_features)
            .switch("--no-default-features", cargo.no_default_features)
            .opt_flag("--profile", cargo.profile.as_ref())
            .opt_flag("--target-dir", cargo.target_dir.as_ref().map(|p| p.display()))
    }
}

impl fmt::Display for CommandLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line)
    }
}

/// What to add after a command with [`CommandLine::record_chip`]: nothing for a built-in
/// chip; for a chip file, that `--chip` wants the file's path.
pub fn chip_file_hint(chip: &str) -> String {
    if neuron_sim::Chip::builtin(chip).is_some() {
        String::new()
    } else {
        format!(", `--chip` giving the path of the chip file {}", quote(&format!("{chip}.toml")))
    }
}

/// One argument as a POSIX shell reads it back unchanged: as it is when it has nothing a
/// shell would act on, else quoted by `shlex`.
///
/// Bare: ASCII letters and digits and `+-./:@]_` (what `shlex` leaves bare), and also `=`
/// and `,` except at the start: in an argument after the command name neither means
/// anything to a shell (`=` only makes an assignment before the command name, and `,` only
/// matters inside braces, which are quoted), so `--params a=1,b=2` stays as typed. A word
/// starting with `=` is quoted (zsh expands `=cmd`), and so is the empty string (`''`).
pub fn quote(arg: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "+-./:@]_=,".contains(c);
    if !arg.is_empty() && !arg.starts_with('=') && arg.chars().all(plain) {
        return Cow::Borrowed(arg);
    }
    // Only a nul byte is refused, which no argument of a process holds; a printed command
    // keeps it rather than fail.
    shlex::Quoter::new().allow_nul(true).quote(arg).unwrap_or(Cow::Borrowed(arg))
}

#[cfg(test)]
mod tests {
    use super::{quote, CommandLine};
    use crate::cargo::CargoFlags;

    /// What `sh` makes of `line`'s words: `printf '%s\0'` of them, each ended by a NUL (so a
    /// word may hold a newline).
    fn shell_words(line: &str) -> Vec<String> {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\0' {line}"))
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let mut words: Vec<String> = text.split('\0').map(String::from).collect();
        assert_eq!(words.pop().as_deref(), Some(""), "every word ends with a NUL: {text:?}");
        words
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any argument (a process's arguments hold no NUL) reads back through `sh` as the
        /// one word it was, and is left bare exactly when every character is one no shell
        /// treats specially (and it neither is empty nor starts with `=`).
        #[test]
        fn any_argument_reads_back_through_sh_unchanged(
            arg in "[ -~\t\n\u{e9}\u{4e2d}]{0,12}"
        ) {
            let quoted = quote(&arg);
            proptest::prop_assert_eq!(shell_words(&quoted), vec![arg.clone()]);
            let bare_chars = arg.chars().all(|c| c.is_ascii_alphanumeric() || "+-./:@]_=,".contains(c));
            let bare = !arg.is_empty() && !arg.starts_with('=') && bare_chars;
            proptest::prop_assert_eq!(quoted == arg, bare, "{:?} quoted as {:?}", arg, quoted);
        }
    }

    #[test]
    fn plain_arguments_are_left_as_they_are() {
        for plain in [
            "a=1,b=2",
            "bufs=3,cols_per_tile=512,dtype=bf16",
            "target/e2e/my-chip_v2.toml",
            "/abs/path/Cargo.toml",
            "neuron-fixtures-kernels",
            "pkg@0.1.0",
            "trn2",
            "31006",
            "-1.5e+3",
        ] {
            assert_eq!(quote(plain), plain);
            assert_eq!(shell_words(plain), [plain], "sh reads {plain} as itself");
        }
    }

    #[test]
    fn arguments_a_shell_would_change_are_quoted_and_read_back_unchanged() {
        let awkward = [
            "my chips/c.toml",
            "it's",
            "say \"hi\"",
            "$HOME",
            "a$b",
            "",
            "=ls",
            "*.toml",
            "a;b",
            "a|b&c",
            "~/chip.toml",
            "a\\b",
            "tab\there",
            "{a,b}",
            "bang!",
            "`date`",
            "#comment",
            "(x)",
            "line\nbreak",
        ];
        for a in awkward {
            let q = quote(a);
            assert_ne!(q, a, "{a:?} needs quoting");
            assert_eq!(shell_words(&q), [a], "{a:?} as {q}");
        }
        // Whether non-ASCII text is quoted is shlex's choice; either way it reads back.
        assert_eq!(shell_words(&quote("naïve café")), ["naïve café"]);
        assert_eq!(quote(""), "''");
        assert_eq!(quote("my chips/c.toml"), "'my chips/c.toml'");
        assert_eq!(quote("$HOME"), "'$HOME'");
    }

    #[test]
    fn a_command_line_quotes_each_value_and_no_flag_name() {
        let c = CommandLine::new("check")
            .flag("--kernel", "add")
            .flag("--params", "bufs=2,tile=128")
            .flag("--seed", 31_u64)
            .opt_flag("--chip", Some("dir with space/my chip.toml"))
            .opt_flag("--shape", None::<&str>)
            .flags("--model", ["a b", "c"])
            .switch("--recheck", true)
            .switch("--force", false)
            .arg("it's");
        let line = c.to_string();
        assert_eq!(
            line,
            "cargo neuron-tune check --kernel add --params bufs=2,tile=128 --seed 31 --chip \
             'dir with space/my chip.toml' --model 'a b' --model c --recheck \"it's\""
        );
        let words = shell_words(&line);
        assert_eq!(words[10], "dir with space/my chip.toml");
        assert_eq!(words.last().unwrap(), "it's");
        assert_eq!(words.len(), 17, "{words:?}");
    }

    #[test]
    fn cargo_flags_are_carried_as_the_run_had_them() {
        let cargo = CargoFlags {
            manifest_path: Some("my crates/k/Cargo.toml".into()),
            packages: vec!["a".into(), "b c".into()],
            exclude: vec!["x".into()],
            features: vec!["f1 f2".into()],
            no_default_features: true,
            profile: Some("dev".into()),
            target_dir: Some("t".into()),
            locked: true,
            ..Default::default()
        };
        assert_eq!(
            CommandLine::new("baseline save").selection(&cargo).to_string(),
            "cargo neuron-tune baseline save --manifest-path 'my crates/k/Cargo.toml' -p a \
             -p 'b c' --exclude x"
        );
        assert_eq!(
            CommandLine::new("check").package(&cargo, "k").build_flags(&cargo).to_string(),
            "cargo neuron-tune check --manifest-path 'my crates/k/Cargo.toml' -p k --features \
             'f1 f2' --no-default-features --profile dev --target-dir t"
        );
        // Nothing given, nothing added.
        let none = CargoFlags::default();
        let c = CommandLine::new("check").package(&none, "k").build_flags(&none).selection(&none);
        assert_eq!(c.to_string(), "cargo neuron-tune check -p k");
    }
}
