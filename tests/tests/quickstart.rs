//! The README's "Quickstart on your own crate", run as written: the commands are read from
//! the README itself, so the document and the test cannot drift apart.
//!
//! They run in a temporary directory outside this workspace (under the system's temp dir),
//! with `cargo neuron-tune` resolved through PATH to the copy `cargo install` put there —
//! no alias or setting of this repository's `.cargo/config.toml` reaches the new crate but
//! its build dir and profiles (below). What the test adds, all invisible to the commands'
//! meaning: `--root <tmp>/root --debug` to `cargo install` (not the user's ~/.cargo, and no
//! release build), `--profile dev` to `check` and `bench`, the tests' shared target dir
//! through `CARGO_TARGET_DIR` and the repository's build dir and profiles in
//! `<tmp>/.cargo/config.toml` (dependencies build once, not again for this crate),
//! `CARGO_NET_OFFLINE`, and this repository's Cargo.lock copied into the new crate right
//! after `cargo new` (so its dependencies resolve offline to the versions already here).

use neuron_tune_tests::{cargo, events, root, shared_build_config, test_target_dir};
use std::path::{Path, PathBuf};

/// The shell lines of the first ```sh block after `heading` in the README.
fn readme_block(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme.split(heading).nth(1).unwrap_or_else(|| panic!("no `{heading}`"));
    let block = section.split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    block
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[test]
fn the_readme_quickstart_works_on_a_fresh_crate_outside_the_workspace() {
    let lines = readme_block("## Quickstart on your own crate");
    let joined = lines.join("\n");
    for must in ["--path cargo-neuron-tune", "cargo new --lib", "neuron-tune init"] {
        assert!(joined.contains(must), "the quickstart runs `{must}`:\n{joined}");
    }
    let tmp = std::env::temp_dir().join(format!("neuron-tune-quickstart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join(".cargo")).unwrap();
    std::fs::write(tmp.join(".cargo").join("config.toml"), shared_build_config()).unwrap();
    let install_root = tmp.join("root");
    let path = std::env::join_paths(
        std::iter::once(install_root.join("bin"))
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    // The quickstart starts in a checkout (for `cargo install --path`); `cargo new` then
    // makes the crate beside nothing of ours: the first `cd` after install goes to `tmp`.
    let mut cwd: PathBuf = root();
    let mut installed = false;
    let mut ran = Vec::new();
    for line in &lines {
        for command in line.split("&&").map(str::trim) {
            let words: Vec<&str> = command.split_whitespace().collect();
            if words[0] == "cd" {
                cwd = cwd.join(words[1]);
                continue;
            }
            assert_eq!(words[0], "cargo", "the quickstart runs only cargo: {command}");
            let mut args: Vec<String> = words[1..].iter().map(|s| s.to_string()).collect();
            match args.first().map(String::as_str) {
                Some("install") => {
                    args.extend(["--root".into(), install_root.display().to_string()]);
                    args.push("--debug".into());
                }
                Some("new") => {
                    // Leave the checkout: the new crate goes into the temporary directory.
                    assert!(installed, "the quickstart installs before `cargo new`");
                    cwd = tmp.clone();
                }
                Some("neuron-tune")
                    if matches!(args.get(1).map(String::as_str), Some("check" | "bench")) =>
                {
                    args.extend(["--profile".into(), "dev".into()]);
                }
                _ => {}
            }
            let out = cargo()
                .args(&args)
                .current_dir(&cwd)
                .env("PATH", &path)
                .env("CARGO_TARGET_DIR", test_target_dir())
                .env("CARGO_NET_OFFLINE", "true")
                .output()
                .expect("cargo runs");
            let (stdout, stderr) =
                (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(
                out.status.success(),
                "`{command}` (as `cargo {}` in {}) failed: {:?}\n{stdout}\n{stderr}",
                args.join(" "),
                cwd.display(),
                out.status.code()
            );
            ran.push((command.to_string(), stdout.into_owned(), stderr.into_owned()));
            match args.first().map(String::as_str) {
                Some("install") => installed = true,
                Some("new") => {
                    let name = args.iter().skip(1).find(|a| !a.starts_with('-')).unwrap();
                    let krate = tmp.join(name);
                    std::fs::copy(root().join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();
                    assert!(
                        !krate.starts_with(root()),
                        "the crate is outside the workspace: {}",
                        krate.display()
                    );
                }
                _ => {}
            }
        }
    }
    let names: Vec<&str> = ran.iter().map(|(c, ..)| c.as_str()).collect();
    for must in ["init", "new my_add", "check", "bench"] {
        assert!(names.iter().any(|c| c.contains(must)), "ran `{must}`: {names:?}");
    }
    // check and bench saw the new kernel.
    let (_, out, err) = ran.iter().find(|(c, ..)| c.ends_with("bench")).unwrap();
    assert!(out.contains("my_add") || err.contains("my_add"), "{out}\n{err}");
    let krate = cwd;
    assert!(krate.join("src/my_add.rs").is_file(), "{}", krate.display());
    // init is idempotent: a second run changes nothing and says so.
    let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
    let out = cargo()
        .args(["neuron-tune", "init"])
        .current_dir(&krate)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("already a kernel crate"));
    assert_eq!(std::fs::read_to_string(krate.join("Cargo.toml")).unwrap(), manifest);
    let _ = std::fs::remove_dir_all(Path::new(&tmp));
}

/// A crate as `cargo new --lib NAME` makes it (its own workspace, so it is not taken for a
/// member of this one), with this repository's lock file.
fn plain_crate(name: &str, lib: bool) -> PathBuf {
    let dir = neuron_tune_tests::scratch_dir(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             # my comment\n[dependencies]\n\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let (file, src) = if lib {
        ("src/lib.rs", "pub fn add(a: u64, b: u64) -> u64 {\n    a + b\n}\n")
    } else {
        ("src/main.rs", "fn main() {}\n")
    };
    std::fs::write(dir.join(file), src).unwrap();
    dir
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if !p.ends_with("target") {
                    stack.push(p);
                }
            } else {
                files.push((p.clone(), std::fs::read_to_string(&p).unwrap_or_default()));
            }
        }
    }
    files.sort();
    files
}

/// `cargo-neuron-tune neuron-tune ARGS` as cargo runs it (init and new build nothing, so no
/// target-dir or profile flags). Returns (exit code, stdout, stderr).
fn cli(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(neuron_tune_tests::cli_exe())
        .arg("neuron-tune")
        .args(args)
        .output()
        .expect("the CLI runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn new_outside_a_kernel_crate_says_to_run_init_and_init_then_new_work() {
    let dir = plain_crate("firstuse", true);
    let manifest = dir.join("Cargo.toml");
    let m = manifest.to_str().unwrap();
    let before = snapshot(&dir);
    let (code, _, err) = cli(&["new", "my_add", "--manifest-path", m]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("run `cargo neuron-tune init` first"), "{err}");
    assert_eq!(snapshot(&dir), before, "a refused new changes nothing");

    let (code, out, err) = cli(&["init", "--manifest-path", m]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Initialized firstuse"), "{out}");
    let toml = std::fs::read_to_string(&manifest).unwrap();
    assert!(toml.contains("# my comment\n[dependencies]\nneuron-sim = { path = "), "{toml}");
    assert!(toml.contains("[package.metadata.neuron-tune]\nharness = \"neuron-tune-harness\""));
    assert!(dir.join("src/bin/neuron-tune-harness.rs").is_file());
    let after_init = snapshot(&dir);
    let (code, out, _) = cli(&["init", "--manifest-path", m]);
    assert_eq!(code, 0);
    assert!(out.contains("already a kernel crate"), "{out}");
    assert_eq!(snapshot(&dir), after_init, "init twice changes nothing");
    // A script is told too: one `init` event, here saying nothing changed.
    let (code, out, err) = cli(&["init", "--manifest-path", m, "--message-format", "json"]);
    assert_eq!(code, 0, "{err}");
    let init = events(&out, "init");
    assert_eq!(init.len(), 1, "{out}");
    assert_eq!(
        (&init[0]["changed"], &init[0]["harness"]),
        (&false.into(), &"neuron-tune-harness".into())
    );

    // A declaration left behind by hand (or by an old failed attempt) is not repeated.
    let lib = dir.join("src/lib.rs");
    std::fs::write(&lib, format!("{}\npub mod my_add;\n", std::fs::read_to_string(&lib).unwrap()))
        .unwrap();
    let (code, _, err) = cli(&["new", "my_add", "--manifest-path", m]);
    assert_eq!(code, 0, "{err}");
    let lib_src = std::fs::read_to_string(&lib).unwrap();
    assert_eq!(lib_src.matches("mod my_add;").count(), 1, "{lib_src}");
    let bin = dir.join("src/bin/neuron-tune-harness.rs");
    assert!(std::fs::read_to_string(&bin).unwrap().contains("firstuse::my_add::MyAdd"));

    // From a directory inside the crate, without --manifest-path, the crate is found as
    // cargo finds it: the nearest Cargo.toml above.
    let out = std::process::Command::new(neuron_tune_tests::cli_exe())
        .args(["neuron-tune", "new", "my_sub"])
        .current_dir(dir.join("src"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.join("src/my_sub.rs").is_file());
    assert!(std::fs::read_to_string(&bin).unwrap().contains("firstuse::my_sub::MySub"));

    // A failure after the first change leaves every file as it was.
    std::fs::write(&bin, "fn main() {}\n").unwrap();
    let before = snapshot(&dir);
    let (code, _, err) = cli(&["new", "my_sum", "--template", "reduction", "--manifest-path", m]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("harness_main!"), "{err}");
    assert_eq!(snapshot(&dir), before, "a failed new changes nothing");
}

/// Outside any crate (no Cargo.toml here or above), `init` says where it looked.
#[test]
fn init_outside_any_crate_says_where_it_looked() {
    let dir = std::env::temp_dir().join(format!("neuron-tune-nocrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    assert!(!dir.ancestors().any(|d| d.join("Cargo.toml").is_file()), "{}", dir.display());
    let out = std::process::Command::new(neuron_tune_tests::cli_exe())
        .args(["neuron-tune", "init"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("no Cargo.toml in {}", dir.display())), "{err}");
    assert!(err.contains("cargo new --lib"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn init_refuses_a_crate_without_a_library() {
    let dir = plain_crate("binonly", false);
    let before = snapshot(&dir);
    let (code, _, err) =
        cli(&["init", "--manifest-path", dir.join("Cargo.toml").to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a library crate") && err.contains("cargo new --lib"), "{err}");
    assert_eq!(snapshot(&dir), before);
}

/// `init --git` takes only a URL cargo takes: anything else is refused (exit 2) with what a
/// git URL looks like, writing nothing (it used to write it, and then cargo could not read
/// the manifest at all).
#[test]
fn init_refuses_a_git_url_cargo_would_not_take_and_writes_nothing() {
    let dir = plain_crate("badgit", true);
    let m = dir.join("Cargo.toml");
    let m = m.to_str().unwrap();
    let before = snapshot(&dir);
    for (url, says) in [
        ("github.com/org/neuron-tune", "https://github.com/ORG/REPO"),
        ("not a url", "https://github.com/ORG/REPO"),
        ("git@github.com:org/neuron-tune", "try ssh://git@github.com/org/neuron-tune"),
        // A URL of the right shape that cargo still refuses (its port): cargo reads the
        // edited manifest before init says it is done.
        ("https://github.com:port/org/neuron-tune", "invalid port"),
    ] {
        let (code, out, err) = cli(&["init", "--git", url, "--manifest-path", m]);
        assert_eq!(code, 2, "{url}: {out}\n{err}");
        assert!(err.contains(says) && err.contains("nothing was changed"), "{url}: {err}");
        assert_eq!(snapshot(&dir), before, "{url}: nothing written");
    }
}

/// A manifest whose neuron-tune dependencies cargo cannot read (what `init --git` with a
/// URL without a scheme used to write) is repaired by `init --path` (or `--git`).
#[test]
fn init_repairs_dependencies_cargo_cannot_read() {
    let dir = plain_crate("repairme", true);
    let manifest = dir.join("Cargo.toml");
    let m = manifest.to_str().unwrap();
    let (code, _, err) = cli(&["init", "--manifest-path", m]);
    assert_eq!(code, 0, "{err}");
    let good = std::fs::read_to_string(&manifest).unwrap();
    let broken: String = good
        .lines()
        .map(|l| match l.split_once(" = ") {
            Some((k @ ("neuron-sim" | "neuron-tune-harness"), _)) => {
                format!("{k} = {{ git = \"github.com/org/neuron-tune\" }}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    assert_ne!(broken, good);
    std::fs::write(&manifest, &broken).unwrap();
    let (code, _, err) = cli(&["list", "--manifest-path", m]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("relative URL without a base"), "{err}");
    let (code, out, err) = cli(&["init", "--path", root().to_str().unwrap(), "--manifest-path", m]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Repaired"), "{out}");
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), good, "the entries init writes");
    // Damage elsewhere is not ours to repair: said as cargo says it, the file untouched.
    let elsewhere = good.replace("[dependencies]", "[dependencies]\nserde = { git = \"x y\" }");
    std::fs::write(&manifest, &elsewhere).unwrap();
    let (code, _, err) = cli(&["init", "--manifest-path", m]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.matches("error:").count(), 1, "{err}");
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), elsewhere);
}

/// `new` registers the kernel in the harness's real invocation, never in one a comment or a
/// string holds (which left the kernel unregistered and its space in Cargo.toml).
#[test]
fn new_registers_the_kernel_in_the_invocation_not_in_a_comment() {
    let dir = plain_crate("commented", true);
    let m = dir.join("Cargo.toml");
    let m = m.to_str().unwrap();
    let (code, _, err) = cli(&["init", "--manifest-path", m]);
    assert_eq!(code, 0, "{err}");
    let bin = dir.join("src/bin/neuron-tune-harness.rs");
    let src = std::fs::read_to_string(&bin).unwrap();
    let commented = src.replace(
        "neuron_tune_harness::harness_main!",
        "// harness_main!(kernels: [old::Thing]);\n/* harness_main!(kernels: [a::B]) */\n\
         const NOTE: &str = \"harness_main!(kernels: [s::S])\";\n\
         neuron_tune_harness::harness_main!",
    );
    assert_ne!(commented, src);
    std::fs::write(&bin, &commented).unwrap();
    let (code, _, err) = cli(&["new", "foo", "--manifest-path", m]);
    assert_eq!(code, 0, "{err}");
    let after = std::fs::read_to_string(&bin).unwrap();
    assert_eq!(
        after,
        commented.replace(
            "harness_main!(kernels: []);",
            "harness_main!(kernels: [commented::foo::Foo]);"
        ),
    );
    // Without a real invocation: refused, nothing written.
    std::fs::write(&bin, "// harness_main!(kernels: [old::Thing]);\nfn main() {}\n").unwrap();
    let before = snapshot(&dir);
    let (code, _, err) = cli(&["new", "bar", "--manifest-path", m]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("outside comments and strings"), "{err}");
    assert_eq!(snapshot(&dir), before);
}

/// A kernel whose type would take a name its template imports (`new kernel`: `pub struct
/// Kernel` beside `use neuron_tune_harness::Kernel`, E0255), or whose module would be the
/// library's tests, is refused before anything is written, naming the collision.
#[test]
fn new_refuses_a_name_whose_module_would_not_compile() {
    let dir = plain_crate("collide", true);
    let m = dir.join("Cargo.toml");
    let m = m.to_str().unwrap();
    let (code, _, err) = cli(&["init", "--manifest-path", m]);
    assert_eq!(code, 0, "{err}");
    let lib = dir.join("src/lib.rs");
    let lib_src = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(&lib, format!("{lib_src}\nmod helpers {{\n}}\n")).unwrap();
    let before = snapshot(&dir);
    for (name, template, says) in [
        ("kernel", "elementwise", "`Kernel`"),
        ("shape", "gemm", "`Shape`"),
        ("params", "reduction", "`Params`"),
        ("dtype", "attention", "`Dtype`"),
        ("strategy", "elementwise", "`Strategy`"),
        ("tests", "elementwise", "#[cfg(test)] mod tests"),
        ("helpers", "elementwise", "lib.rs"),
    ] {
        let (code, _, err) = cli(&["new", name, "--template", template, "--manifest-path", m]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(says) && err.contains("choose another name"), "{name}: {err}");
        assert_eq!(snapshot(&dir), before, "{name}: nothing written");
    }
    let (_, _, err) = cli(&["new", "kernel", "--manifest-path", m]);
    assert!(err.contains("(such as `kernel_kernel`)"), "{err}");
}
