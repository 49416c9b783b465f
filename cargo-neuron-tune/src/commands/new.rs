//! `cargo neuron-tune new NAME --template T`: scaffold a kernel in the current crate.
//!
//! Writes `src/NAME.rs` (a complete kernel: parameters, validity rule, shapes, small-shape
//! strategy, body, CPU reference, work), declares the module, registers the kernel in the
//! crate's harness binary and adds its search space to `Cargo.toml`. The result builds and
//! passes `check` unchanged; it is a starting point to edit. All-or-nothing: every change
//! is computed before the first is written (a failure leaves the crate as it was), and a
//! retry never declares the module twice. In a crate that is not a kernel crate yet, it
//! says to run `cargo neuron-tune init`.

use super::edits::{read, Edits};
use crate::cli::Template;
use crate::exit::{fail, Exit, Failure};
use crate::output::{Event, Reporter};
use std::path::Path;

fn camel(name: &str) -> String {
    name.split('_').filter(|s| !s.is_empty()).map(|s| s[..1].to_uppercase() + &s[1..]).collect()
}

/// What a template may import from `neuron_sim` and `neuron_tune_harness`: each module
/// imports the names its body uses, so a new kernel builds without unused-import warnings.
const SIM_NAMES: [&str; 9] =
    ["Act", "ActArgs", "Alu", "Chip", "Dtype", "Hbm", "Nc", "Scalar", "SimResult"];
const HARNESS_NAMES: [&str; 6] = ["Kernel", "ParamSpec", "Params", "Shape", "TensorSpec", "Work"];

/// Whether `word` occurs in `text` as a whole identifier.
fn uses(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// Which bytes of the Rust source `src` are code: `false` inside comments (line, block —
/// nested —, doc), string literals (plain, byte, raw, C) and char literals. A scanner of its
/// own rather than `syn` (not a dependency of this crate; lexing is all that is needed, and
/// the file must be edited byte for byte, keeping the user's text).
fn code_bytes(src: &str) -> Vec<bool> {
    let b = src.as_bytes();
    let mut code = vec![true; b.len()];
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let at = |i: usize, s: &str| b[i..].starts_with(s.as_bytes());
    let mut i = 0;
    while i < b.len() {
        let start = i;
        // A literal's prefix (`r`, `b`, `br`, `c`, `cr`) only where an identifier cannot
        // end in it.
        let prefixed = i == 0 || !ident(b[i - 1]);
        let prefix = ["br", "cr", "r", "b", "c"]
            .into_iter()
            .find(|p| {
                prefixed && at(i, p) && matches!(b.get(i + p.len()), Some(b'"' | b'#' | b'\''))
            })
            .unwrap_or("");
        let raw = prefix.ends_with('r');
        let after = i + prefix.len();
        let hashes = b[after..].iter().take_while(|&&c| c == b'#').count();
        if at(i, "//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            let mut depth = 0;
            while i < b.len() {
                if at(i, "/*") {
                    (depth, i) = (depth + 1, i + 2);
                } else if at(i, "*/") {
                    (depth, i) = (depth - 1, i + 2);
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if raw && b.get(after + hashes) == Some(&b'"') {
            let close = format!("\"{}", "#".repeat(hashes));
            i = after + hashes + 1;
            i = src[i..].find(&close).map_or(b.len(), |e| i + e + close.len());
        } else if !raw && b.get(after) == Some(&b'"') {
            i = after + 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if (prefix.is_empty() || prefix == "b") && b.get(after) == Some(&b'\'') {
            // A char literal (`'x'`, `'\n'`, `'\u{..}'`, `'"'`), or a lifetime or label,
            // which is code.
            let c = after + 1;
            let end = match b.get(c) {
                Some(b'\\') => {
                    let rest = b.get(c + 2..).unwrap_or_default();
                    rest.iter().position(|&x| x == b'\'').map(|e| c + 2 + e + 1)
                }
                Some(_) => {
                    let len = src[c..].chars().next().map_or(1, char::len_utf8);
                    (b.get(c + len) == Some(&b'\'')).then_some(c + len + 1)
                }
                None => None,
            };
            match end {
                Some(end) => i = end,
                None => {
                    i = after + 1;
                    continue;
                }
            }
        } else {
            i += 1;
            continue;
        }
        let end = i.min(b.len());
        code[start..end].iter_mut().for_each(|c| *c = false);
        i = end;
    }
    code
}

/// Where the list of `harness_main!(kernels: [...])` is in the harness source `src`: the
/// byte after its `[` and the byte of its `]`. Only code counts: an invocation in a comment
/// or a string (`// harness_main!(kernels: [old::Thing]);`) is not the harness's.
fn kernel_list(src: &str) -> Option<(usize, usize)> {
    let code = code_bytes(src);
    let b = src.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    // The next code byte at or after `i` that is not white space.
    let next = |mut i: usize| {
        while i < b.len() && (!code[i] || b[i].is_ascii_whitespace()) {
            i += 1;
        }
        i
    };
    let word = |i: usize, w: &str| {
        b[i..].starts_with(w.as_bytes())
            && code[i..i + w.len()].iter().all(|&c| c)
            && (i == 0 || !ident(b[i - 1]))
            && !b.get(i + w.len()).is_some_and(|&c| ident(c))
    };
    let call =
        (0..b.len()).find(|&i| word(i, "harness_main") && b.get(next(i + 12)) == Some(&b'!'))?;
    let args = (call..b.len()).find(|&i| code[i] && matches!(b[i], b'(' | b'[' | b'{'))?;
    let open = (args..b.len()).find(|&i| {
        word(i, "kernels") && b.get(next(i + 7)) == Some(&b':') && {
            let j = next(next(i + 7) + 1);
            b.get(j) == Some(&b'[')
        }
    })?;
    let open = next(next(open + 7) + 1) + 1;
    let mut depth = 0;
    let close = (open..b.len()).find(|&i| {
        if code[i] {
            match b[i] {
                b'[' | b'(' | b'{' => depth += 1,
                b']' | b')' | b'}' if depth == 0 => return true,
                b']' | b')' | b'}' => depth -= 1,
                _ => {}
            }
        }
        false
    })?;
    (b[close] == b']').then_some((open, close))
}

/// Names the kernel's type (`camel(name)`) must not be, for the module template `t` makes to
/// compile: every type or value name its code uses unqualified — its imports (`Kernel`,
/// `Dtype`…: `pub struct Dtype;` beside `use neuron_sim::Dtype` is E0255) and the standard
/// prelude's (`Vec`, `Ok`…, which the struct would shadow) — read from the module's code
/// itself, so the list cannot drift from the templates; and `Strategy`, the proptest
/// trait the glob-imported prelude brings, whose methods (`prop_map`, `boxed`) would leave
/// scope with its name.
fn taken_names(t: Template) -> std::collections::BTreeSet<String> {
    let module = format!("{}{}", prelude(body(t)), body(t).replace("__NAME__", ""));
    let code = code_bytes(&module);
    let b = module.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut names = std::collections::BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        let end = (i..b.len()).find(|&j| !ident(b[j])).unwrap_or(b.len());
        let path_tail = i >= 2 && &b[i - 2..i] == b"::";
        if end > i && code[i] && b[i].is_ascii_uppercase() && !path_tail {
            names.insert(module[i..end].to_string());
        }
        i = end.max(i + 1);
    }
    if uses(&module, "BoxedStrategy") {
        names.insert("Strategy".to_string());
    }
    names
}

/// Why kernel `name` of template `t` would not compile in a crate whose library root is
/// `lib_src` (in directory `src`), if it would not.
fn name_collision(
    name: &str,
    t: Template,
    lib: Option<(&Path, &str)>,
    src: &Path,
) -> Option<String> {
    let ty = camel(name);
    if !ty.starts_with(|c: char| c.is_ascii_uppercase()) || ty == "Self" {
        return Some(format!("makes the type name `{ty}`, which is not one Rust allows"));
    }
    if taken_names(t).contains(&ty) {
        return Some(format!(
            "makes the type `{ty}`, a name the {} template's code already uses (an import or \
             a prelude name)",
            format!("{t:?}").to_lowercase()
        ));
    }
    if name == "tests" {
        return Some(
            "is the `#[cfg(test)] mod tests` of a library (`cargo new --lib` writes one)".into(),
        );
    }
    if src.join(name).join("mod.rs").exists() {
        return Some(format!("is the module {}", src.join(name).join("mod.rs").display()));
    }
    // A module of that name already in the library root, other than a bare `mod name;`
    // (which `new` completes: an earlier attempt's, or one written by hand).
    let (lib_path, lib) = lib?;
    let code = code_bytes(lib);
    let declared = lib.match_indices("mod ").any(|(i, _)| {
        let rest = lib[i + 4..].trim_start();
        code[i]
            && (i == 0 || !lib.as_bytes()[i - 1].is_ascii_alphanumeric())
            && rest.strip_prefix(name).is_some_and(|r| {
                let r = r.trim_start();
                !r.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                    && r.starts_with('{')
            })
    });
    declared.then(|| format!("is a module already written in {}", lib_path.display()))
}

/// The `use` lines of a template's body.
fn prelude(body: &str) -> String {
    let list = |names: &[&str]| -> String {
        let used: Vec<&str> = names.iter().copied().filter(|n| uses(body, n)).collect();
        match used.as_slice() {
            [one] => one.to_string(),
            _ => format!("{{{}}}", used.join(", ")),
        }
    };
    let mut out = format!("use neuron_sim::{};\n", list(&SIM_NAMES));
    // The proptest prelude: the small-shape strategies.
    if uses(body, "BoxedStrategy") {
        out.push_str("use neuron_tune_harness::proptest::prelude::*;\n");
    }
    out.push_str(&format!("use neuron_tune_harness::{};\n", list(&HARNESS_NAMES)));
    out
}

/// The new kernel's module: a doc line, the `use` lines its body needs, the template with
/// the kernel's names in it.
fn module_source(name: &str, t: Template) -> String {
    format!(
        "//! Kernel `{name}` (from the `{t:?}` template of cargo neuron-tune new): edit \
         freely.\n\n{}\n{}",
        prelude(body(t)),
        body(t).replace("__NAME__", &camel(name)).replace("__name__", name)
    )
}

fn body(t: Template) -> &'static str {
    // Each template is a Rust file of its own, so rustfmt and an editor read it as code:
    // `__NAME__` (the type) and `__name__` (the kernel's name) are valid identifiers.
    match t {
        Template::Elementwise => include_str!("../../templates/elementwise.rs"),
        Template::Reduction => include_str!("../../templates/reduction.rs"),
        Template::Gemm => include_str!("../../templates/gemm.rs"),
        Template::Attention => include_str!("../../templates/attention.rs"),
    }
}

fn space(t: Template) -> &'static str {
    match t {
        Template::Elementwise => "space = { bufs = [1, 2, 3], cols_per_tile = [256, 512, 1024] }",
        Template::Reduction => "space = { bufs = [1, 2, 3] }",
        Template::Gemm => "space = { tile_n = [128, 256, 512], bufs = [1, 2, 3] }",
        Template::Attention => "space = { bufs = [1, 2] }",
    }
}

/// Scaffold kernel `name` into the crate at `manifest` (default: the nearest Cargo.toml).
pub fn new_kernel(
    name: &str,
    t: Template,
    manifest: Option<&Path>,
    out: &Reporter,
) -> Result<Exit, Failure> {
    if let Err(why) = kernel_name_ok(name) {
        return Err(fail(Exit::Config, format!("kernel name `{name}` {why}")));
    }
    let given = manifest;
    let (manifest, pkg) = package_at(manifest)?;
    let pkg = &pkg;
    let not_yet = |why: String| {
        fail(
            Exit::Config,
            format!(
                "{}: {why}: not a kernel crate yet; run `cargo neuron-tune init` first",
                manifest.display()
            ),
        )
    };
    let harness = pkg
        .metadata
        .get("neuron-tune")
        .and_then(|n| n.get("harness"))
        .and_then(|h| h.as_str())
        .ok_or_else(|| not_yet("no [package.metadata.neuron-tune] harness = \"<bin>\"".into()))?;
    let bin = pkg
        .targets
        .iter()
        .find(|t| t.name == harness)
        .ok_or_else(|| not_yet(format!("its harness binary `{harness}` is not a target")))?;
    let lib = pkg.targets.iter().find(|t| t.is_lib());
    let dir = manifest.parent().expect("a manifest has a directory");
    let module = dir.join("src").join(format!("{name}.rs"));
    if module.exists() {
        return Err(fail(Exit::Config, format!("{} already exists", module.display())));
    }
    let lib_src = match lib {
        Some(l) => Some((l.src_path.as_std_path(), read(l.src_path.as_std_path())?)),
        None => None,
    };
    if let Some(why) =
        name_collision(name, t, lib_src.as_ref().map(|(p, s)| (*p, s.as_str())), &dir.join("src"))
    {
        let suggestion = format!("{name}_kernel");
        let also = match name_collision(&suggestion, t, None, &dir.join("src")) {
            None => format!(" (such as `{suggestion}`)"),
            Some(_) => String::new(),
        };
        return Err(fail(
            Exit::Config,
            format!(
                "kernel name `{name}` {why}: the new module would not compile; choose another \
                 name{also}"
            ),
        ));
    }
    let (ty, source) = (camel(name), module_source(name, t));
    // Every change is computed before any is written: all of them happen, or none.
    let mut edits = Edits::default();
    edits.create(&module, source)?;
    // Declare the module where the harness can reach it (once: a declaration left by an
    // earlier attempt is kept, never repeated).
    let bin_path = bin.src_path.as_std_path();
    let mut bin_src = read(bin_path)?;
    let path_in_bin = match lib {
        Some(l) => {
            let lib_path = l.src_path.as_std_path();
            if lib_path.parent() != Some(dir.join("src").as_path()) {
                return Err(fail(
                    Exit::Config,
                    format!("the library root {} is not in src/", lib_path.display()),
                ));
            }
            let mut lib_src = lib_src.clone().map(|(_, s)| s).unwrap_or_default();
            if !declares_module(&lib_src, name) {
                if !lib_src.is_empty() && !lib_src.ends_with('\n') {
                    lib_src.push('\n');
                }
                lib_src.push_str(&format!("\npub mod {name};\n"));
                edits.change(lib_path, lib_src)?;
            }
            format!("{}::{name}::{ty}", l.name.replace('-', "_"))
        }
        None => {
            if !declares_module(&bin_src, name) {
                bin_src = format!("#[path = \"{}\"]\nmod {name};\n{bin_src}", module.display());
            }
            format!("{name}::{ty}")
        }
    };
    // The invocation in code, never one in a comment or a string (which would be edited
    // while the real list stays without the kernel).
    let (open, close) = kernel_list(&bin_src).ok_or_else(|| {
        fail(
            Exit::Config,
            format!(
                "{}: no `harness_main!(kernels: [...])` to register the kernel in (outside \
                 comments and strings); nothing was changed",
                bin_path.display()
            ),
        )
    })?;
    if !bin_src[open..close].contains(&path_in_bin) {
        // Appended, so kernels stay in the order they were made: `[a::A, b::B]`.
        let listed = bin_src[open..close].trim_end();
        let entry = match listed {
            "" => path_in_bin,
            l if l.ends_with(',') => format!(" {path_in_bin}"),
            _ => format!(", {path_in_bin}"),
        };
        bin_src.insert_str(open + listed.len(), &entry);
    }
    edits.change(bin_path, bin_src)?;
    let toml = read(&manifest)?;
    edits.change(
        &manifest,
        with_space(&toml, name, space(t))
            .map_err(|e| fail(Exit::Config, format!("{}: {e}", manifest.display())))?,
    )?;
    edits.apply()?;
    out.event(&Event::New {
        kernel: name.to_string(),
        template: format!("{t:?}").to_lowercase(),
        module: module.clone(),
    });
    out.result(format!(
        "     Created kernel `{name}` in {} (registered in {}, space in {})",
        module.display(),
        bin_path.display(),
        manifest.display()
    ));
    // From where `new` ran: its --manifest-path, as given, and the package (another crate
    // of the workspace may have a kernel of that name).
    let next = crate::command_line::CommandLine::new("check")
        .opt_flag("--manifest-path", given.map(Path::display))
        .flag("-p", &pkg.name)
        .flag("--kernel", name);
    out.result(format!("             next: {next}"));
    Ok(Exit::Ok)
}

/// Does `src` already declare `mod name;` (public or not)?
fn declares_module(src: &str, name: &str) -> bool {
    let code = code_bytes(src);
    let mut at = 0;
    src.split_inclusive('\n').any(|line| {
        let start = at + (line.len() - line.trim_start().len());
        at += line.len();
        if !code.get(start).copied().unwrap_or(false) {
            return false;
        }
        let l = line.trim();
        let l = l.strip_prefix("pub ").unwrap_or(l);
        l.strip_prefix("mod ").is_some_and(|rest| rest.trim_end_matches(';').trim() == name)
    })
}

/// The manifest `toml` with `[package.metadata.neuron-tune.kernels.NAME]` holding `space`
/// (a `space = {...}` line), unless the kernel already has a table there: the user's
/// table wins, and a second one would make the manifest invalid.
fn with_space(toml: &str, name: &str, space: &str) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = toml.parse().map_err(|e| format!("{e}"))?;
    let snippet: toml_edit::DocumentMut = space.parse().expect("the templates' spaces parse");
    let kernels =
        super::init::table_at(&mut doc, &["package", "metadata", "neuron-tune", "kernels"])?;
    if !kernels.contains_key(name) {
        let mut table = toml_edit::Table::new();
        for (k, v) in snippet.iter() {
            table.insert(k, v.clone());
        }
        kernels.insert(name, toml_edit::Item::Table(table));
    }
    Ok(doc.to_string())
}

/// The package whose manifest is `manifest` (default: the nearest `Cargo.toml` in this
/// directory or above it, as cargo finds it), canonical path and metadata (`cargo metadata
/// --no-deps`); a workspace root without a package is refused.
pub fn package_at(
    manifest: Option<&Path>,
) -> Result<(std::path::PathBuf, cargo_metadata::Package), Failure> {
    match manifest_at(manifest) {
        Some(m) => package_of(&m),
        None => {
            let here = std::env::current_dir().unwrap_or_default();
            Err(fail(
                Exit::Config,
                format!(
                    "no Cargo.toml in {} or any directory above it: run this in a library \
                     crate (`cargo new --lib NAME`), or name one with --manifest-path",
                    here.display()
                ),
            ))
        }
    }
}

/// The manifest [`package_at`] works on: `manifest`, or the nearest `Cargo.toml`.
pub fn manifest_at(manifest: Option<&Path>) -> Option<std::path::PathBuf> {
    let here = std::env::current_dir().ok();
    manifest
        .map(Path::to_path_buf)
        .or_else(|| here?.ancestors().map(|d| d.join("Cargo.toml")).find(|m| m.is_file()))
}

/// The package of manifest `manifest`, as cargo reads it (`cargo metadata --no-deps`).
pub fn package_of(
    manifest: &Path,
) -> Result<(std::path::PathBuf, cargo_metadata::Package), Failure> {
    let meta = cargo_metadata::MetadataCommand::new()
        .cargo_path(crate::cargo::cargo_bin())
        .manifest_path(manifest)
        .no_deps()
        .exec()
        .map_err(|e| {
            fail(
                Exit::Config,
                format!("{}: {}", manifest.display(), crate::cargo::metadata_error(&e)),
            )
        })?;
    let manifest = std::fs::canonicalize(manifest)
        .map_err(|e| fail(Exit::Config, format!("{}: {e}", manifest.display())))?;
    let pkg =
        meta.packages.into_iter().find(|p| p.manifest_path.as_std_path() == manifest).ok_or_else(
            || {
                fail(
                    Exit::Config,
                    format!("{} is not a package manifest (a workspace root?)", manifest.display()),
                )
            },
        )?;
    Ok((manifest, pkg))
}

/// Rust's strict and reserved keywords (2024 edition; weak ones such as `union` are
/// identifiers): a kernel's name is a module's, so it cannot be one (`pub mod fn;` does not
/// compile).
const KEYWORDS: [&str; 51] = [
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// A kernel name `new` can make a module of: snake_case, not a keyword, not `_` alone.
fn kernel_name_ok(name: &str) -> Result<(), &'static str> {
    if name.is_empty()
        || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err("must be snake_case (a-z, 0-9, _; not starting with a digit)");
    }
    if name == "_" || KEYWORDS.contains(&name) {
        return Err(
            "is a Rust keyword: the kernel's module could not be declared (try another name)",
        );
    }
    // `src/main.rs` and `src/lib.rs` are cargo's target roots, not modules.
    if name == "main" || name == "lib" {
        return Err("would be src/main.rs or src/lib.rs, which cargo takes as a crate root");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_template_imports_exactly_what_it_uses() {
        for t in [Template::Elementwise, Template::Reduction, Template::Gemm, Template::Attention] {
            let (body, prelude) = (body(t), prelude(body(t)));
            for name in SIM_NAMES.iter().chain(&HARNESS_NAMES) {
                assert_eq!(uses(&prelude, name), uses(body, name), "{t:?}: {name}\n{prelude}");
            }
        }
        assert!(uses("x: Act::Exp", "Act") && !uses("ActArgs::default()", "Act"));
    }

    #[test]
    fn a_kernel_name_must_make_a_module() {
        for ok in ["my_add", "gemm2", "fn_like", "r", "union"] {
            assert_eq!(kernel_name_ok(ok), Ok(()), "{ok}");
        }
        for bad in ["", "MyAdd", "2gemm", "my-add", "fn", "type", "self", "_", "gen", "main", "lib"]
        {
            assert!(kernel_name_ok(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn comments_strings_and_chars_are_not_code() {
        let src =
            "a // b\nc /* d /* e */ f */ g \"h\\\"i\" j r#\"k\"l\"# m 'n' '\\'' o<'p> b\"q\" r";
        let code: String =
            src.char_indices().filter(|&(i, _)| code_bytes(src)[i]).map(|(_, c)| c).collect();
        let kept: Vec<&str> = code.split_whitespace().collect();
        assert_eq!(kept, ["a", "c", "g", "j", "m", "o<'p>", "r"], "{code:?}");
        // Cut short anywhere, it still scans (a file being edited).
        for end in (0..src.len()).filter(|&e| src.is_char_boundary(e)) {
            code_bytes(&src[..end]);
        }
        code_bytes("'\\");
    }

    #[test]
    fn the_kernel_list_is_the_invocation_in_code_not_in_a_comment_or_string() {
        let src = "//! Uses `harness_main!(kernels: [x::X])`.\n\
                   // harness_main!(kernels: [old::Thing]);\n\
                   /* harness_main!(kernels: [a::A]) */\n\
                   const S: &str = \"harness_main!(kernels: [s::S])\";\n\
                   neuron_tune_harness::harness_main!(\n    kernels : [k::K, m::M(vec![1])],\n);\n";
        let (open, close) = kernel_list(src).unwrap();
        assert_eq!(&src[open..close], "k::K, m::M(vec![1])");
        assert_eq!(kernel_list("// harness_main!(kernels: [])\nfn main() {}\n"), None);
        let (open, close) = kernel_list("harness_main!(kernels: []);").unwrap();
        assert_eq!(open, close);
        assert!(!declares_module("// pub mod my_add;\n/* mod my_add; */\n", "my_add"));
    }

    #[test]
    fn a_kernel_type_may_not_take_a_name_its_template_uses() {
        let src = Path::new("/nonexistent/src");
        for t in [Template::Elementwise, Template::Reduction, Template::Gemm, Template::Attention] {
            let taken = taken_names(t);
            // Every name the template imports is taken, and what the body uses of the
            // standard prelude and of proptest's.
            for name in
                SIM_NAMES.iter().chain(&HARNESS_NAMES).filter(|n| uses(&prelude(body(t)), n))
            {
                assert!(taken.contains(*name), "{t:?}: {name} in {taken:?}");
            }
            for name in ["Vec", "Ok", "Strategy", "BoxedStrategy", "Kernel", "Shape"] {
                assert!(taken.contains(name), "{t:?}: {name} in {taken:?}");
            }
            // Words of its comments and strings, and enum variants behind a path, are not.
            for name in ["Bf16", "Multiply", "C", "O", "Change"] {
                assert!(!taken.contains(name), "{t:?}: {name} in {taken:?}");
            }
            for bad in [
                "kernel", "params", "chip", "dtype", "nc", "work", "shape", "strategy", "vec",
                "ok", "tests", "self_", "_1", "__",
            ] {
                assert!(name_collision(bad, t, None, src).is_some(), "{t:?}: {bad}");
            }
            for ok in ["my_add", "gemm", "attention", "kernel_2", "softmax"] {
                assert_eq!(name_collision(ok, t, None, src), None, "{t:?}: {ok}");
            }
        }
        let why = name_collision("scalar", Template::Gemm, None, src);
        assert_eq!(why, None, "the gemm template does not use Scalar");
        assert!(name_collision("scalar", Template::Elementwise, None, src).is_some());
        let lib = "pub fn helper() {}\n#[cfg(test)]\nmod checks {\n}\npub mod done;\n";
        let lib = Some((Path::new("/x/src/lib.rs"), lib));
        assert!(name_collision("checks", Template::Gemm, lib, src).unwrap().contains("lib.rs"));
        assert_eq!(name_collision("done", Template::Gemm, lib, src), None);
    }

    #[test]
    fn a_module_is_declared_once() {
        assert!(declares_module("//! x\n\npub mod my_add;\n", "my_add"));
        assert!(declares_module("mod my_add ;", "my_add"));
        assert!(!declares_module("pub mod my_add_two;\n", "my_add"));
    }

    #[test]
    fn the_space_goes_into_the_metadata_once_keeping_comments() {
        let toml =
            "[package]\nname = \"k\" # mine\n\n[package.metadata.neuron-tune]\nharness = \"h\"\n";
        let once = with_space(toml, "my_add", space(Template::Elementwise)).unwrap();
        assert!(once.contains("# mine"), "{once}");
        assert!(
            once.contains("[package.metadata.neuron-tune.kernels.my_add]\nspace = {"),
            "{once}"
        );
        let twice = with_space(&once, "my_add", space(Template::Gemm)).unwrap();
        assert_eq!(once, twice);
        assert!(twice.parse::<toml::Table>().is_ok());
    }

    /// What `new` writes reads as `cargo fmt` would write it (rustfmt's defaults, as in a
    /// new crate), so the user's first `cargo fmt` changes nothing they did not write.
    #[test]
    fn every_template_is_written_as_rustfmt_formats_it() {
        use std::io::Write;
        // rustfmt's defaults, not this repository's rustfmt.toml.
        let defaults = tempfile::tempdir().unwrap();
        let config = defaults.path().join("rustfmt.toml");
        std::fs::write(&config, "").unwrap();
        for t in [Template::Elementwise, Template::Reduction, Template::Gemm, Template::Attention] {
            let source = super::module_source("my_kernel", t);
            let mut rustfmt = std::process::Command::new("rustfmt")
                .args(["--edition", "2021", "--emit", "stdout", "--quiet", "--config-path"])
                .arg(&config)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("rustfmt (the toolchain's) runs");
            rustfmt.stdin.take().unwrap().write_all(source.as_bytes()).unwrap();
            let out = rustfmt.wait_with_output().unwrap();
            assert!(out.status.success(), "{t:?} does not parse:\n{source}");
            assert_eq!(String::from_utf8(out.stdout).unwrap(), source, "{t:?}");
        }
    }
}
