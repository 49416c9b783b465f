//! `cargo neuron-tune init`: make a library crate a kernel crate.
//!
//! Adds to its `Cargo.toml` (edited with `toml_edit`, so the user's formatting and comments
//! stay) the dependencies `neuron-sim` and `neuron-tune-harness`, the harness binary
//! `[[bin]] neuron-tune-harness` (written to `src/bin/neuron-tune-harness.rs`, registering no
//! kernel yet) and `[package.metadata.neuron-tune] harness = "neuron-tune-harness"`; after
//! that `cargo neuron-tune new NAME --template T` adds kernels. All changes are made, or none.
//!
//! Where the two crates come from: they are not on crates.io. By default they are path
//! dependencies on the checkout this tool was built from (`cargo install --path` and
//! `cargo install --git` both build from sources that stay on disk: the checkout, or
//! cargo's git checkout under `$CARGO_HOME/git/checkouts`); `--path DIR` names another
//! checkout and `--git URL` (optionally `--rev`) makes them git dependencies instead.

use super::edits::{read, Edits};
use crate::exit::{fail, Exit, Failure};
use crate::output::Reporter;
use crate::store::write_atomic;
use std::path::{Path, PathBuf};

/// The harness binary `init` adds.
pub const HARNESS: &str = "neuron-tune-harness";

/// Where the neuron-tune crates a kernel crate depends on come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A checkout of the neuron-tune repository (its root: `sim/`, `harness/`).
    Path(PathBuf),
    /// A git repository of neuron-tune, optionally at a revision.
    Git { url: String, rev: Option<String> },
}

impl Source {
    /// The sources this binary was built from, if they are still there.
    pub fn built_from() -> Option<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
        is_checkout(root).then(|| root.to_path_buf())
    }

    /// The dependency entry of crate `dir` (`sim` or `harness`).
    fn dependency(&self, dir: &str) -> toml_edit::InlineTable {
        let mut t = toml_edit::InlineTable::new();
        match self {
            Source::Path(root) => {
                t.insert("path", root.join(dir).to_string_lossy().into_owned().into());
            }
            Source::Git { url, rev } => {
                t.insert("git", url.as_str().into());
                if let Some(rev) = rev {
                    t.insert("rev", rev.as_str().into());
                }
            }
        }
        t
    }
}

fn is_checkout(root: &Path) -> bool {
    root.join("sim/Cargo.toml").is_file() && root.join("harness/Cargo.toml").is_file()
}

/// Resolve the `--path` / `--git` / `--rev` options to a [`Source`].
pub fn source(
    path: Option<&Path>,
    git: Option<&str>,
    rev: Option<&str>,
) -> Result<Source, Failure> {
    match (path, git) {
        (Some(p), _) => {
            let root = std::fs::canonicalize(p)
                .map_err(|e| fail(Exit::Config, format!("--path {}: {e}", p.display())))?;
            if !is_checkout(&root) {
                return Err(fail(
                    Exit::Config,
                    format!(
                        "--path {}: not a neuron-tune checkout (no sim/Cargo.toml and harness/Cargo.toml)",
                        p.display()
                    ),
                ));
            }
            Ok(Source::Path(root))
        }
        (None, Some(url)) => match git_url_problem(url) {
            Some(why) => {
                Err(fail(Exit::Config, format!("--git {url}: {why}; nothing was changed")))
            }
            None => Ok(Source::Git { url: url.to_string(), rev: rev.map(str::to_string) }),
        },
        (None, None) => Source::built_from().map(Source::Path).ok_or_else(|| {
            fail(
                Exit::Config,
                format!(
                    "the neuron-tune sources this tool was built from ({}) are gone: pass \
                     --path DIR (a checkout) or --git URL to say where neuron-sim and \
                     neuron-tune-harness come from",
                    Path::new(env!("CARGO_MANIFEST_DIR"))
                        .parent()
                        .unwrap_or(Path::new("?"))
                        .display()
                ),
            )
        }),
    }
}

/// Why cargo would refuse `url` as a dependency's `git`, if it would. Cargo parses it as a
/// URL that has a scheme and a hierarchical part (`scheme://…`, or `scheme:/…`):
/// `github.com/org/repo` is "relative URL without a base", the scp-like
/// `git@github.com:org/repo` is too (cargo suggests `ssh://git@github.com/org/repo`), and
/// `foo:bar` is "cannot-be-a-base". The check after writing (`cargo metadata` on the edited
/// manifest) catches whatever else cargo refuses.
fn git_url_problem(url: &str) -> Option<String> {
    let shape = "a git URL has a scheme, such as https://github.com/ORG/REPO, \
                 ssh://git@github.com/ORG/REPO or file:///path/to/repo";
    let scheme_end = url.find(':');
    let scheme = scheme_end.map_or("", |e| &url[..e]);
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if url.chars().any(char::is_whitespace) {
        return Some(format!("not a URL (it has white space): {shape}"));
    }
    if scheme_ok && url[scheme.len() + 1..].starts_with('/') {
        return None;
    }
    // `user@host:path`, as scp and git spell it: cargo wants it as ssh://user@host/path.
    if let Some((user_host, path)) = url.split_once(':').filter(|(h, _)| h.contains('@')) {
        return Some(format!(
            "cargo does not take the scp-like form `{url}`: try ssh://{user_host}/{}",
            path.trim_start_matches('/')
        ));
    }
    Some(format!("not a URL cargo takes: {shape}"))
}

/// The table at `path` in `doc`, created (as implicit tables, which print no header of
/// their own) where missing.
pub fn table_at<'d>(
    doc: &'d mut toml_edit::DocumentMut,
    path: &[&str],
) -> Result<&'d mut toml_edit::Table, String> {
    let mut table = doc.as_table_mut();
    let mut at = String::new();
    for key in path {
        at = if at.is_empty() { key.to_string() } else { format!("{at}.{key}") };
        let item = table.entry(key).or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        });
        table = item.as_table_mut().ok_or_else(|| format!("`{at}` is not a table"))?;
    }
    Ok(table)
}

/// Put `source`'s entries in place of the neuron-sim and neuron-tune-harness dependencies of
/// `manifest`, which cargo cannot read, and keep them if cargo then reads it (the package);
/// otherwise the manifest is put back as it was and `None` says the damage is elsewhere.
fn repair(manifest: &Path, source: &Source) -> Option<(PathBuf, cargo_metadata::Package)> {
    let before = std::fs::read_to_string(manifest).ok()?;
    let mut doc: toml_edit::DocumentMut = before.parse().ok()?;
    let deps = doc.get_mut("dependencies")?.as_table_like_mut()?;
    let mut replaced = false;
    for (name, krate) in [("neuron-sim", "sim"), ("neuron-tune-harness", "harness")] {
        if let Some(item) = deps.get_mut(name) {
            *item = toml_edit::value(source.dependency(krate));
            replaced = true;
        }
    }
    if !replaced {
        return None;
    }
    write_atomic(manifest, doc.to_string().as_bytes()).ok()?;
    match super::new::package_of(manifest) {
        Ok(found) => Some(found),
        Err(_) => {
            // The original text back; if even that fails, say so rather than hide it.
            if let Err(e) = write_atomic(manifest, before.as_bytes()) {
                eprintln!("error: restoring {}: {e:#}", manifest.display());
            }
            None
        }
    }
}

/// The harness binary's source: the kernels `new` adds go into the list.
const HARNESS_SRC: &str =
    "//! The harness binary that cargo neuron-tune builds and runs: `cargo neuron-tune new`\n\
//! registers each new kernel in the list below.\n\n\
neuron_tune_harness::harness_main!(kernels: []);\n";

/// Make the library crate at `manifest` (default: the nearest Cargo.toml) a kernel crate.
pub fn init(
    manifest: Option<&Path>,
    source: &Source,
    out: &Reporter,
) -> Result<crate::exit::Exit, Failure> {
    let (manifest, pkg, repaired) = match super::new::package_at(manifest) {
        Ok((m, p)) => (m, p, false),
        // Cargo cannot read the manifest: perhaps because of our own entries (an earlier
        // `init --git` with a URL cargo refuses); replaced, it may read again.
        Err(e) => match super::new::manifest_at(manifest).and_then(|m| repair(&m, source)) {
            Some((m, p)) => (m, p, true),
            None => return Err(e),
        },
    };
    let pkg = &pkg;
    let from = match source {
        Source::Path(p) => p.display().to_string(),
        Source::Git { url, rev: Some(r) } => format!("{url} at {r}"),
        Source::Git { url, rev: None } => url.clone(),
    };
    if repaired {
        out.status(format!(
            "    Repaired {}: cargo could not read its neuron-sim and neuron-tune-harness \
             dependencies; they now come from {from}",
            manifest.display()
        ));
    }
    if let Some(h) =
        pkg.metadata.get("neuron-tune").and_then(|n| n.get("harness")).and_then(|h| h.as_str())
    {
        if repaired {
            out.event(&crate::output::Event::Init {
                package: pkg.name.to_string(),
                manifest: manifest.clone(),
                harness: h.to_string(),
                changed: true,
            });
            out.result(format!(
                "     Repaired {}'s dependencies on neuron-sim and neuron-tune-harness (from \
                 {from}); it was a kernel crate already (harness `{h}`)",
                pkg.name
            ));
            return Ok(Exit::Ok);
        }
        out.event(&crate::output::Event::Init {
            package: pkg.name.to_string(),
            manifest: manifest.clone(),
            harness: h.to_string(),
            changed: false,
        });
        out.result(format!(
            "     {} is already a kernel crate (harness `{h}`): nothing changed",
            pkg.name
        ));
        out.result("             next: cargo neuron-tune new NAME --template elementwise");
        return Ok(Exit::Ok);
    }
    if !pkg.targets.iter().any(|t| t.is_lib()) {
        return Err(fail(
            Exit::Config,
            format!(
                "{}: `{}` is not a library crate: init makes a library crate a kernel crate \
                 (its kernels live in the library); create one with `cargo new --lib NAME`",
                manifest.display(),
                pkg.name
            ),
        ));
    }
    let dir = manifest.parent().expect("a manifest has a directory");
    let bin_rel = format!("src/bin/{HARNESS}.rs");
    let bin_path = dir.join(&bin_rel);
    if pkg.targets.iter().any(|t| t.name == HARNESS) {
        return Err(fail(
            Exit::Config,
            format!(
                "{}: it already has a target `{HARNESS}` but no [package.metadata.neuron-tune]: \
                 add `harness = \"{HARNESS}\"` there by hand if it is a harness binary",
                manifest.display()
            ),
        ));
    }
    let toml = read(&manifest)?;
    let mut doc: toml_edit::DocumentMut =
        toml.parse().map_err(|e| fail(Exit::Config, format!("{}: {e}", manifest.display())))?;
    let at = |e: String| fail(Exit::Config, format!("{}: {e}", manifest.display()));
    let deps = table_at(&mut doc, &["dependencies"]).map_err(at)?;
    deps.set_implicit(false);
    for (name, krate) in [("neuron-sim", "sim"), ("neuron-tune-harness", "harness")] {
        if !deps.contains_key(name) {
            deps.insert(name, toml_edit::value(source.dependency(krate)));
        }
    }
    let mut bin = toml_edit::Table::new();
    bin.insert("name", toml_edit::value(HARNESS));
    bin.insert("path", toml_edit::value(bin_rel.as_str()));
    match doc.entry("bin").or_insert(toml_edit::Item::ArrayOfTables(Default::default())) {
        toml_edit::Item::ArrayOfTables(a) => a.push(bin),
        _ => return Err(at("`bin` is not an array of tables ([[bin]])".into())),
    }
    let nt = table_at(&mut doc, &["package", "metadata", "neuron-tune"]).map_err(at)?;
    nt.set_implicit(false);
    nt.insert("harness", toml_edit::value(HARNESS));
    let mut edits = Edits::default();
    edits.change(&manifest, doc.to_string())?;
    edits.create(&bin_path, HARNESS_SRC.to_string())?;
    edits.apply()?;
    // Cargo must still read the manifest (a dependency it refuses would break every cargo
    // command in the crate); if it does not, the crate is put back as it was.
    if let Err(e) = super::new::package_of(&manifest) {
        let restored = write_atomic(&manifest, toml.as_bytes())
            .and_then(|()| std::fs::remove_file(&bin_path).map_err(Into::into));
        let outcome = match restored {
            Ok(()) => "nothing was changed".to_string(),
            Err(r) => format!("and restoring it failed: {r:#}"),
        };
        return Err(fail(
            Exit::Config,
            format!("cargo could not read the edited manifest ({}); {outcome}", e.message),
        ));
    }
    out.event(&crate::output::Event::Init {
        package: pkg.name.to_string(),
        manifest: manifest.clone(),
        harness: HARNESS.to_string(),
        changed: true,
    });
    out.result(format!(
        "  Initialized {} as a kernel crate: neuron-sim and neuron-tune-harness from {from}, \
         harness binary {}",
        pkg.name,
        bin_path.display()
    ));
    out.result("             next: cargo neuron-tune new NAME --template elementwise");
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_and_git_dependencies() {
        let p = Source::Path("/n".into()).dependency("sim").to_string();
        assert_eq!(p.trim(), r#"{ path = "/n/sim" }"#);
        let g = Source::Git { url: "https://x/y".into(), rev: Some("abc".into()) };
        assert_eq!(
            g.dependency("harness").to_string().trim(),
            r#"{ git = "https://x/y", rev = "abc" }"#
        );
    }

    #[test]
    fn a_git_url_is_one_cargo_takes() {
        for ok in ["https://github.com/org/neuron-tune", "ssh://git@github.com/org/x", "file:///r"]
        {
            assert_eq!(git_url_problem(ok), None, "{ok}");
        }
        for bad in ["github.com/org/neuron-tune", "not a url", "foo:bar", "", "://x"] {
            let why = git_url_problem(bad).unwrap_or_else(|| panic!("{bad} taken"));
            assert!(why.contains("https://github.com/ORG/REPO"), "{bad}: {why}");
        }
        let scp = git_url_problem("git@github.com:org/neuron-tune").unwrap();
        assert!(scp.contains("try ssh://git@github.com/org/neuron-tune"), "{scp}");
        let err = source(None, Some("github.com/org/neuron-tune"), None).unwrap_err();
        assert_eq!(err.exit, Exit::Config);
    }

    #[test]
    fn the_tool_knows_the_checkout_it_was_built_from() {
        let root = Source::built_from().expect("tests run in the checkout");
        assert!(root.join("harness/Cargo.toml").is_file());
    }

    #[test]
    fn table_at_creates_implicit_tables_and_refuses_a_value() {
        let mut doc: toml_edit::DocumentMut = "[package]\nname = \"x\"\n".parse().unwrap();
        table_at(&mut doc, &["package", "metadata", "neuron-tune"])
            .unwrap()
            .insert("harness", toml_edit::value("h"));
        assert!(
            doc.to_string().contains("[package.metadata.neuron-tune]\nharness = \"h\""),
            "{doc}"
        );
        assert!(!doc.to_string().contains("[package.metadata]\n"), "{doc}");
        assert!(table_at(&mut doc, &["package", "name", "x"]).is_err());
    }
}
