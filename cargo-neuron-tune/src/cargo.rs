//! Cargo integration: find the kernel crates, build their harness binaries.
//!
//! Discovery goes through `cargo metadata`; a kernel crate is a package with a
//! `[package.metadata.neuron-tune]` table naming its harness target (`harness = "…"`, a
//! `[[bin]]` or a `[[bench]]` with `harness = false`). Builds run `$CARGO build` with the
//! user's cargo flags and the tool's `--color`, `-q` and `-v` ([`CargoOutput`]), and
//! `--message-format=json-render-diagnostics`, so cargo still prints its own diagnostics to
//! stderr while we read the executable's path from its JSON messages. In JSON mode it is
//! `--message-format=json` instead: the compiler's diagnostics arrive as messages, which we
//! print to stderr as cargo would and keep for the `error` event of a failed build.

use crate::cli::ColorWhen;
use anyhow::{bail, Context, Result};
use cargo_metadata::{Message, Metadata, MetadataCommand, Package, TargetKind};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// What a failed `cargo metadata` says, as one message: cargo's own words without its
/// leading `error: ` (ours adds one), and the guess that this is no cargo workspace only
/// when cargo says it found no `Cargo.toml`.
pub fn metadata_error(e: &cargo_metadata::Error) -> String {
    let said = match e {
        cargo_metadata::Error::CargoMetadata { stderr } => stderr.trim(),
        other => return format!("`cargo metadata` failed: {other}"),
    };
    // Cargo's warnings come before its error; the error is what failed.
    let said = said.find("error: ").map_or(said, |i| &said[i..]);
    let said = said.strip_prefix("error: ").unwrap_or(said).trim();
    let guess = match said.contains("could not find `Cargo.toml`") {
        true => " (run it in a cargo workspace, or name one with --manifest-path)",
        false => "",
    };
    format!("`cargo metadata` failed: {said}{guess}")
}

/// Cargo's own flags, spelled as cargo spells them.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct CargoFlags {
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH", help_heading = "Cargo options")]
    pub manifest_path: Option<PathBuf>,
    /// Package(s) with kernels to work on (default: every kernel crate of the workspace);
    /// `*` globs, as in cargo (`-p 'my-kernels-*'`).
    #[arg(short = 'p', long = "package", value_name = "SPEC", help_heading = "Cargo options")]
    pub packages: Vec<String>,
    /// Every package of the workspace: the default without -p, and, as in cargo, what is
    /// selected even when -p is given too.
    #[arg(long, help_heading = "Cargo options")]
    pub workspace: bool,
    /// Packages to leave out of the whole workspace (not with -p; unlike cargo, it needs
    /// no --workspace); `*` globs.
    #[arg(long, value_name = "SPEC", help_heading = "Cargo options", conflicts_with = "packages")]
    pub exclude: Vec<String>,
    /// Space or comma separated features to activate.
    #[arg(short = 'F', long, value_name = "FEATURES", help_heading = "Cargo options")]
    pub features: Vec<String>,
    /// Activate all available features.
    #[arg(long, help_heading = "Cargo options")]
    pub all_features: bool,
    /// Do not activate the `default` feature.
    #[arg(long, help_heading = "Cargo options")]
    pub no_default_features: bool,
    /// Build the harness with the release profile (the default).
    #[arg(short = 'r', long, help_heading = "Cargo options", conflicts_with = "profile")]
    pub release: bool,
    /// Build the harness with this profile [default: release].
    #[arg(long, value_name = "PROFILE-NAME", help_heading = "Cargo options")]
    pub profile: Option<String>,
    /// Parallel jobs of cargo's build of the harnesses, passed to it as `--jobs N`
    /// (default: cargo's own, `CARGO_BUILD_JOBS` or the number of CPUs). Not `-j`, which
    /// sets the harness workers.
    #[arg(long, value_name = "N", help_heading = "Cargo options",
          value_parser = crate::cli::positive::<u32>, allow_negative_numbers = true)]
    pub build_jobs: Option<u32>,
    /// Directory for all generated artifacts (and the variant store).
    #[arg(long, value_name = "DIRECTORY", help_heading = "Cargo options")]
    pub target_dir: Option<PathBuf>,
    /// Require Cargo.lock to be up to date.
    #[arg(long, help_heading = "Cargo options")]
    pub locked: bool,
    /// Run without accessing the network.
    #[arg(long, help_heading = "Cargo options")]
    pub offline: bool,
    /// Equivalent to specifying both --locked and --offline.
    #[arg(long, help_heading = "Cargo options")]
    pub frozen: bool,
    /// `--config KEY=VALUE` arguments for harness builds (set by the tool, not a flag).
    #[arg(skip)]
    pub build_config: Vec<String>,
}

/// How cargo's build of a harness speaks: the tool's global output flags, passed on as
/// cargo's own (they change what is said, never what is built).
#[derive(Clone, Copy, Debug, Default)]
pub struct CargoOutput {
    /// `--color`: `always` and `never` are passed on; `auto` is not, so that cargo decides
    /// for its own stderr as it always does (its `term.color` config, `CARGO_TERM_COLOR`).
    pub color: ColorWhen,
    /// `-q`: no `Compiling`/`Finished` lines (compile errors are still shown).
    pub quiet: bool,
    /// `-v`, `-vv`.
    pub verbose: u8,
    /// Read the compiler's diagnostics from cargo's JSON messages (print them to stderr
    /// ourselves, keep them for [`BuildError::Failed`]) instead of letting cargo render them.
    pub collect_diagnostics: bool,
}

/// A command as one shell line, each word quoted where a shell would change it (what `-v`
/// shows of the cargo it runs).
pub fn command_text(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| crate::command_line::quote(&a.to_string_lossy()).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The cargo that started us (`$CARGO`), or `cargo` from PATH.
pub fn cargo_bin() -> PathBuf {
    std::env::var_os("CARGO").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("cargo"))
}

/// A kernel crate found in the workspace.
#[derive(Clone, Debug)]
pub struct KernelCrate {
    pub package: String,
    pub manifest_path: PathBuf,
    /// The harness target's name and whether it is a bench (else a bin).
    pub harness: String,
    pub harness_is_bench: bool,
}

impl CargoFlags {
    /// Whether every package of the workspace is selected (no -p, or --workspace, and no
    /// --exclude): only then can a command tell that a model is gone from the workspace
    /// rather than in a package it was not asked to look at.
    pub fn selects_every_package(&self) -> bool {
        (self.packages.is_empty() || self.workspace) && self.exclude.is_empty()
    }

    /// Whether the package named `name` is selected: every package but the excluded ones
    /// without -p or with --workspace, else the -p ones.
    pub fn selects(&self, name: &str) -> bool {
        use crate::select::glob;
        if self.packages.is_empty() || self.workspace {
            !self.exclude.iter().any(|e| glob(e, name))
        } else {
            self.packages.iter().any(|p| glob(p, name))
        }
    }

    fn common_args(&self, cmd: &mut Command) {
        if let Some(p) = &self.manifest_path {
            cmd.arg("--manifest-path").arg(p);
        }
        if self.locked {
            cmd.arg("--locked");
        }
        if self.offline {
            cmd.arg("--offline");
        }
        if self.frozen {
            cmd.arg("--frozen");
        }
    }

    /// `cargo metadata` with our flags.
    pub fn metadata(&self) -> Result<Metadata> {
        let mut mc = MetadataCommand::new();
        mc.cargo_path(cargo_bin());
        if let Some(p) = &self.manifest_path {
            mc.manifest_path(p);
        }
        let mut other = Vec::new();
        if self.locked {
            other.push("--locked".to_string());
        }
        if self.offline {
            other.push("--offline".to_string());
        }
        if self.frozen {
            other.push("--frozen".to_string());
        }
        // The features decide the resolve graph: an optional dependency a feature switches
        // on is linked only then, and which crates a model links decides which tuned
        // records it runs (`models::TunedSet`).
        let mut features = Vec::new();
        if !self.features.is_empty() {
            features.extend(["--features".to_string(), self.features.join(",")]);
        }
        if self.all_features {
            features.push("--all-features".into());
        }
        if self.no_default_features {
            features.push("--no-default-features".into());
        }
        mc.other_options(other.iter().chain(&features).cloned().collect::<Vec<_>>());
        match mc.exec() {
            Ok(meta) => Ok(meta),
            // A feature no package has: the graph without it, so that the kernel crates'
            // check says which crate lacks which feature (exit 2), not cargo's metadata error.
            Err(_) if !features.is_empty() => {
                mc.other_options(other);
                mc.exec().map_err(|e| anyhow::anyhow!(metadata_error(&e)))
            }
            Err(e) => Err(anyhow::anyhow!(metadata_error(&e))),
        }
    }

    /// The kernel crates selected by `-p` / `--exclude` (all of the workspace by default).
    pub fn kernel_crates(&self, meta: &Metadata) -> Result<Vec<KernelCrate>> {
        let members: Vec<&Package> = meta.workspace_packages();
        use crate::select::glob;
        for p in &self.packages {
            let matched: Vec<&&Package> =
                members.iter().filter(|m| glob(p, m.name.as_str())).collect();
            if matched.is_empty() {
                bail!("package `{p}` is not a member of the workspace at {}", meta.workspace_root);
            }
            // A glob needs only one kernel crate among what it matches; a name must be one.
            if matched.iter().all(|m| m.metadata.get("neuron-tune").is_none()) {
                let kernel_crates: Vec<&str> = members
                    .iter()
                    .filter(|m| m.metadata.get("neuron-tune").is_some())
                    .map(|m| m.name.as_str())
                    .collect();
                bail!(
                    "package `{p}` is not a kernel crate (it has no [package.metadata.neuron-tune]; \
                     `cargo neuron-tune init` makes it one); kernel crates here: {}",
                    if kernel_crates.is_empty() { "none".into() } else { kernel_crates.join(", ") }
                );
            }
        }
        // Leaving out a package that is not there is a typo that would otherwise select
        // everything silently.
        for e in &self.exclude {
            if !members.iter().any(|m| glob(e, m.name.as_str())) {
                bail!(
                    "--exclude {e}: no package `{e}` in the workspace at {}",
                    meta.workspace_root
                );
            }
        }
        let mut out = Vec::new();
        for pkg in members {
            let Some(nt) = pkg.metadata.get("neuron-tune") else { continue };
            if !self.selects(pkg.name.as_str()) {
                continue;
            }
            let harness = match nt.get("harness") {
                Some(serde_json::Value::String(h)) => h.as_str(),
                Some(_) => bail!("{}", wrong_harness_type(pkg.manifest_path.as_std_path())),
                None => bail!(
                    "{}: [package.metadata.neuron-tune] has no `harness = \"<target>\"` naming the harness binary",
                    pkg.manifest_path
                ),
            };
            let target = pkg.targets.iter().find(|t| t.name == harness).with_context(|| {
                format!(
                    "{}: harness target `{harness}` is not a [[bin]] or [[bench]] of `{}`",
                    pkg.manifest_path, pkg.name
                )
            })?;
            let is_bench = target.kind.contains(&TargetKind::Bench);
            if !is_bench && !target.kind.contains(&TargetKind::Bin) {
                bail!("{}: harness target `{harness}` must be a [[bin]] or a [[bench]] with harness = false", pkg.manifest_path);
            }
            // Each harness is built with `-p <crate> --features …`, so cargo would refuse a
            // feature the crate lacks, after the metadata and as a build failure (exit 3);
            // it is the command line that is wrong (exit 2).
            for f in self.features.iter().flat_map(|f| f.split([',', ' '])) {
                if !f.is_empty() && !f.contains('/') && !pkg.features.contains_key(f) {
                    let mut known: Vec<&str> = pkg.features.keys().map(String::as_str).collect();
                    known.retain(|k| *k != "default");
                    bail!(
                        "--features {f}: kernel crate `{}` has no feature `{f}` ({})",
                        pkg.name,
                        if known.is_empty() {
                            "it declares none".to_string()
                        } else {
                            format!("it has: {}", known.join(", "))
                        }
                    );
                }
            }
            out.push(KernelCrate {
                package: pkg.name.to_string(),
                manifest_path: pkg.manifest_path.clone().into(),
                harness: harness.to_string(),
                harness_is_bench: is_bench,
            });
        }
        Ok(out)
    }

    /// The profile harnesses are built with.
    pub fn profile_name(&self) -> &str {
        self.profile.as_deref().unwrap_or("release")
    }

    /// `--profile NAME` must name a profile cargo knows here, or cargo would refuse it
    /// during the build, which reads as a failed build (exit 3) when it is the command line
    /// that is wrong (exit 2). Known: cargo's built-in profiles, `[profile.*]` of the
    /// workspace's Cargo.toml and of the config files cargo reads (from the directory it
    /// runs in, where harness builds run, up to the root, then `$CARGO_HOME`), and
    /// `CARGO_PROFILE_<NAME>_*` variables. When a file cannot be read as TOML the check
    /// stands aside: cargo says what is wrong with it.
    pub fn check_profile(&self, meta: &Metadata) -> Result<()> {
        let Some(name) = &self.profile else { return Ok(()) };
        let env_prefix = format!("CARGO_PROFILE_{}_", name.to_uppercase().replace('-', "_"));
        if std::env::vars_os().any(|(k, _)| k.to_string_lossy().starts_with(&env_prefix)) {
            return Ok(());
        }
        let manifest = meta.workspace_root.as_std_path().join("Cargo.toml");
        let cwd = std::env::current_dir().unwrap_or_default();
        let Some(known) = defined_profiles(&manifest, &cwd, cargo_home()) else { return Ok(()) };
        if known.contains(name.as_str()) {
            return Ok(());
        }
        bail!(
            "--profile {name}: no such profile (known here: {}; a custom profile is a \
             [profile.{name}] table, with `inherits`, in the workspace's Cargo.toml or a \
             .cargo/config.toml)",
            known.into_iter().collect::<Vec<_>>().join(", ")
        )
    }

    /// The target directory cargo will use.
    pub fn target_dir(&self, meta: &Metadata) -> PathBuf {
        self.target_dir.clone().unwrap_or_else(|| meta.target_directory.clone().into())
    }

    /// The `cargo build` of a crate's harness, as [`CargoFlags::build_harness`] runs it.
    pub fn harness_command(&self, krate: &KernelCrate, how: &CargoOutput) -> Command {
        let mut cmd = Command::new(cargo_bin());
        cmd.arg("build");
        match how.color {
            ColorWhen::Auto => {}
            when => {
                cmd.args(["--color", when.as_str()]);
            }
        }
        if how.quiet {
            cmd.arg("-q");
        }
        if how.verbose > 0 {
            cmd.arg(format!("-{}", "v".repeat(how.verbose.into())));
        }
        self.common_args(&mut cmd);
        for c in &self.build_config {
            cmd.arg("--config").arg(c);
        }
        cmd.arg(match how.collect_diagnostics {
            true => "--message-format=json",
            false => "--message-format=json-render-diagnostics",
        });
        cmd.args(["-p", &krate.package]);
        cmd.arg(if krate.harness_is_bench { "--bench" } else { "--bin" }).arg(&krate.harness);
        match &self.profile {
            Some(p) => {
                cmd.args(["--profile", p]);
            }
            None => {
                cmd.arg("--release");
            }
        }
        if !self.features.is_empty() {
            cmd.arg("--features").arg(self.features.join(","));
        }
        if self.all_features {
            cmd.arg("--all-features");
        }
        if self.no_default_features {
            cmd.arg("--no-default-features");
        }
        if let Some(t) = &self.target_dir {
            cmd.arg("--target-dir").arg(t);
        }
        if let Some(n) = self.build_jobs {
            cmd.arg("--jobs").arg(n.to_string());
        }
        cmd
    }

    /// Build a crate's harness; returns its executable. On a compile error the compiler's
    /// diagnostics have already been printed to stderr (by cargo, or by us when `how`
    /// collects them: then the error holds them too); the error says the build failed.
    pub fn build_harness(
        &self,
        krate: &KernelCrate,
        how: &CargoOutput,
    ) -> Result<PathBuf, BuildError> {
        let mut cmd = self.harness_command(krate, how);
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = cmd.spawn().map_err(|e| BuildError::Spawn(e.to_string()))?;
        let stdout = child.stdout.take().expect("piped");
        // Ctrl-C at a terminal reaches cargo too; a SIGTERM sent to this process alone (CI
        // cancelling a job, `timeout`) does not, and a long build would run to its end
        // before the command could stop: a watcher stops cargo as soon as it is asked to.
        let child = std::sync::Arc::new(std::sync::Mutex::new(child));
        let building = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let watcher = {
            let (child, building) = (child.clone(), building.clone());
            std::thread::spawn(move || {
                while building.load(std::sync::atomic::Ordering::SeqCst) {
                    if crate::interrupt::requested() {
                        let _ = child.lock().expect("cargo's child").kill();
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            })
        };
        let mut exe = None;
        let mut messages = Vec::new();
        for msg in Message::parse_stream(std::io::BufReader::new(stdout)) {
            match msg {
                Ok(Message::CompilerArtifact(a)) if a.target.name == krate.harness => {
                    if let Some(e) = a.executable {
                        exe = Some(e.into_std_path_buf());
                    }
                }
                // Only with `--message-format=json`: `json-render-diagnostics` renders them
                // to stderr itself and sends none.
                Ok(Message::CompilerMessage(m)) => {
                    if let Some(r) = m.message.rendered {
                        // As cargo would show it, as it arrives.
                        eprint!("{r}");
                        messages.push(r);
                    }
                }
                _ => {}
            }
        }
        building.store(false, std::sync::atomic::Ordering::SeqCst);
        let _ = watcher.join();
        let status = child.lock().expect("cargo's child").wait();
        let status = status.map_err(|e| BuildError::Spawn(e.to_string()))?;
        if crate::interrupt::note_child_exit(status) || crate::interrupt::requested() {
            return Err(BuildError::Interrupted);
        }
        if !status.success() {
            return Err(BuildError::Failed {
                package: krate.package.clone(),
                diagnostics: messages,
            });
        }
        exe.ok_or_else(|| BuildError::NoExecutable {
            package: krate.package.clone(),
            target: krate.harness.clone(),
        })
    }
}

/// The error of a `harness` key that is not a string, located as the other metadata errors
/// are (`Cargo.toml:line:column: key: what`), from the manifest's own text.
fn wrong_harness_type(manifest: &std::path::Path) -> String {
    #[derive(serde::Deserialize)]
    struct Manifest {
        package: Option<Package>,
    }
    #[derive(serde::Deserialize)]
    struct Package {
        metadata: Option<Metadata>,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        #[serde(rename = "neuron-tune")]
        neuron_tune: Option<NeuronTune>,
    }
    #[derive(serde::Deserialize)]
    struct NeuronTune {
        harness: Option<toml::Spanned<toml::Value>>,
    }
    let what = "package.metadata.neuron-tune.harness: expected a string naming the harness \
                binary target";
    let text = std::fs::read_to_string(manifest).unwrap_or_default();
    let harness = toml::from_str::<Manifest>(&text)
        .ok()
        .and_then(|m| m.package?.metadata?.neuron_tune?.harness);
    let Some(h) = harness else {
        // cargo read it but we cannot: say what is wrong without a place.
        return format!("{}: {what}", manifest.display());
    };
    let found = match h.get_ref() {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date-time",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    };
    let before = &text[..h.span().start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    format!("{}:{line}:{column}: {what}, found {found}", manifest.display())
}

/// cargo's built-in profiles.
const BUILTIN_PROFILES: [&str; 4] = ["dev", "release", "test", "bench"];

/// `$CARGO_HOME`, or `~/.cargo`.
fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
}

/// The profiles defined for a build of the workspace whose root manifest is `manifest`,
/// run from `cwd`: the built-in ones and every `[profile.NAME]` of the manifest and of the
/// config files cargo reads (`.cargo/config.toml` or `.cargo/config` in `cwd` and each
/// directory above it, then in `cargo_home`). `None` when one of those files cannot be
/// read or parsed.
pub fn defined_profiles(
    manifest: &std::path::Path,
    cwd: &std::path::Path,
    cargo_home: Option<PathBuf>,
) -> Option<std::collections::BTreeSet<String>> {
    let mut known: std::collections::BTreeSet<String> =
        BUILTIN_PROFILES.iter().map(|p| p.to_string()).collect();
    let mut files = vec![manifest.to_path_buf()];
    let dirs = cwd.ancestors().map(|d| d.join(".cargo")).chain(cargo_home);
    for dir in dirs {
        for name in ["config.toml", "config"] {
            let file = dir.join(name);
            if file.is_file() {
                files.push(file);
                break;
            }
        }
    }
    for file in files {
        let text = std::fs::read_to_string(&file).ok()?;
        let table: toml::Table = text.parse().ok()?;
        if let Some(profiles) = table.get("profile").and_then(toml::Value::as_table) {
            known.extend(profiles.keys().cloned());
        }
    }
    Some(known)
}

/// Why a harness could not be built (exit code 3).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("could not run cargo: {0}")]
    Spawn(String),
    /// Ctrl-C during the build (cargo died of it, or the command was interrupted).
    #[error("interrupted while building the harness")]
    Interrupted,
    #[error("building the harness of `{package}` failed (cargo's errors are above)")]
    Failed { package: String, diagnostics: Vec<String> },
    #[error("cargo built `{package}` but reported no executable for target `{target}`")]
    NoExecutable { package: String, target: String },
}

#[cfg(test)]
mod tests {
    use super::{defined_profiles, metadata_error, CargoFlags, CargoOutput, KernelCrate};
    use crate::cli::ColorWhen;

    /// The harness build gets the tool's `--color` (not `auto`: cargo's own choice then),
    /// `-q` and `-v`/`-vv` as cargo's flags, and JSON messages with the diagnostics in
    /// them when the tool collects those.
    #[test]
    fn the_harness_build_speaks_as_the_tool_was_asked_to() {
        let krate = KernelCrate {
            package: "k".into(),
            manifest_path: "k/Cargo.toml".into(),
            harness: "harness".into(),
            harness_is_bench: false,
        };
        let args = |how: CargoOutput| -> Vec<String> {
            let cmd = CargoFlags::default().harness_command(&krate, &how);
            cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect()
        };
        let plain = args(CargoOutput::default());
        assert_eq!(plain[0], "build");
        assert!(plain.contains(&"--message-format=json-render-diagnostics".into()), "{plain:?}");
        for flag in ["--color", "-q", "-v", "-vv"] {
            assert!(!plain.contains(&flag.to_string()), "{flag} in {plain:?}");
        }
        let has = |args: &[String], words: &[&str]| args.windows(words.len()).any(|w| w == words);
        for when in [ColorWhen::Always, ColorWhen::Never] {
            let a = args(CargoOutput { color: when, ..Default::default() });
            assert!(has(&a, &["--color", when.as_str()]), "{a:?}");
        }
        assert!(has(&args(CargoOutput { quiet: true, ..Default::default() }), &["-q"]));
        assert!(has(&args(CargoOutput { verbose: 1, ..Default::default() }), &["-v"]));
        assert!(has(&args(CargoOutput { verbose: 2, ..Default::default() }), &["-vv"]));
        let json = args(CargoOutput { collect_diagnostics: true, ..Default::default() });
        assert!(json.contains(&"--message-format=json".into()), "{json:?}");
        assert!(!json.contains(&"--message-format=json-render-diagnostics".into()), "{json:?}");
    }

    /// `--build-jobs N` reaches cargo as its own `--jobs N`; without it cargo keeps its
    /// default (no `--jobs`, nor the harness workers' `-j`).
    #[test]
    fn build_jobs_reach_cargo_as_its_jobs() {
        let krate = KernelCrate {
            package: "k".into(),
            manifest_path: "k/Cargo.toml".into(),
            harness: "harness".into(),
            harness_is_bench: false,
        };
        let args = |flags: CargoFlags| -> Vec<String> {
            let cmd = flags.harness_command(&krate, &CargoOutput::default());
            cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect()
        };
        let plain = args(CargoFlags::default());
        assert!(!plain.iter().any(|a| a == "--jobs" || a == "-j"), "{plain:?}");
        let two = args(CargoFlags { build_jobs: Some(2), ..Default::default() });
        assert!(two.windows(2).any(|w| w == ["--jobs", "2"]), "{two:?}");
    }

    /// `-p` and `--exclude` take `*` globs, as cargo's do; `-p` without `--workspace`
    /// selects only what it matches.
    #[test]
    fn packages_and_exclusions_match_globs() {
        let flags = |p: &[&str], x: &[&str]| CargoFlags {
            packages: p.iter().map(|s| s.to_string()).collect(),
            exclude: x.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let p = flags(&["neuron-fixtures-*"], &[]);
        assert!(p.selects("neuron-fixtures-kernels") && p.selects("neuron-fixtures-qwen3"));
        assert!(!p.selects("neuron-sim"));
        let exact = flags(&["neuron-fixtures-kernels"], &[]);
        assert!(!exact.selects("neuron-fixtures-kernels-extra"), "a name is no prefix");
        let x = flags(&[], &["*-qwen3"]);
        assert!(x.selects("neuron-fixtures-kernels") && !x.selects("neuron-fixtures-qwen3"));
    }

    #[test]
    fn a_metadata_failure_is_cargo_s_own_sentence_once() {
        let said = |stderr: &str| {
            metadata_error(&cargo_metadata::Error::CargoMetadata { stderr: stderr.into() })
        };
        assert_eq!(
            said("error: manifest path `/n/Cargo.toml` does not exist\n"),
            "`cargo metadata` failed: manifest path `/n/Cargo.toml` does not exist"
        );
        let none =
            said("warning: x\nerror: could not find `Cargo.toml` in `/` or any parent directory\n");
        assert!(
            none.starts_with("`cargo metadata` failed: could not find `Cargo.toml` in `/`"),
            "{none}"
        );
        assert!(none.contains("--manifest-path") && !none.contains("warning"), "{none}");
    }

    #[test]
    fn profiles_are_the_built_in_ones_and_those_the_manifest_and_configs_define() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let sub = ws.join("crates/k");
        std::fs::create_dir_all(sub.join(".cargo")).unwrap();
        std::fs::create_dir_all(ws.join(".cargo")).unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let manifest = ws.join("Cargo.toml");
        std::fs::write(&manifest, "[workspace]\n[profile.fast]\ninherits = \"release\"\n").unwrap();
        std::fs::write(ws.join(".cargo/config.toml"), "[profile.lean]\ninherits = \"dev\"\n")
            .unwrap();
        // A legacy `config` without the extension is read too; in CARGO_HOME as well.
        std::fs::write(sub.join(".cargo/config"), "[profile.sub]\ninherits = \"dev\"\n").unwrap();
        std::fs::write(home.join("config.toml"), "[profile.home]\ninherits = \"dev\"\n").unwrap();
        let known = defined_profiles(&manifest, &sub, Some(home.clone())).unwrap();
        let known: Vec<&str> = known.iter().map(String::as_str).collect();
        assert_eq!(known, ["bench", "dev", "fast", "home", "lean", "release", "sub", "test"]);
        // From the workspace root the subdirectory's config is not read.
        let known = defined_profiles(&manifest, &ws, None).unwrap();
        assert!(!known.contains("sub") && known.contains("lean"), "{known:?}");
        // A file that is not TOML: no judgement (cargo reports it).
        std::fs::write(ws.join(".cargo/config.toml"), "[profile").unwrap();
        assert_eq!(defined_profiles(&manifest, &ws, None), None);
    }
}
