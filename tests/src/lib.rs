//! Helpers of the end-to-end tests: build crates with the real cargo, spawn their harness
//! binaries, talk the worker protocol.

use neuron_tune_protocol::{self as protocol, Request, RequestBody, Response, ResponseBody};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The cargo that runs the tests.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Target directory for crates built by the tests: their binaries and their variant store
/// (`target/e2e/neuron-tune`), apart from a developer's own. Their intermediate units go to
/// the repository's one build dir (`build.build-dir` in `.cargo/config.toml`), shared with
/// `cargo test`'s own build, so dependencies build once.
pub fn test_target_dir() -> PathBuf {
    root().join("target").join("e2e")
}

/// The repository's build dir (made absolute) and profiles from its `.cargo/config.toml`, as
/// the text of a config file: written into `.cargo/` above a crate outside the repository,
/// it lets that crate's builds reuse the units the tests built, as every workspace inside
/// the repository does. Nothing else (no aliases, no environment).
pub fn shared_build_config() -> String {
    let path = root().join(".cargo").join("config.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut config: toml::Table = text.parse().unwrap();
    config.retain(|key, _| key == "build" || key == "profile");
    let build = config.get_mut("build").and_then(toml::Value::as_table_mut).unwrap();
    let dir = build.get("build-dir").and_then(toml::Value::as_str).unwrap();
    let dir = root().join(dir).display().to_string();
    build.insert("build-dir".into(), toml::Value::String(dir));
    assert!(config.contains_key("profile"), "{}: no profiles", path.display());
    toml::to_string(&config).unwrap()
}

/// Build the harness binary of `fixtures/broken/<name>` (its own workspace) and return it,
/// or cargo's stderr if the build fails.
pub fn build_broken(name: &str) -> Result<PathBuf, String> {
    let manifest = root().join("fixtures/broken").join(name).join("Cargo.toml");
    let out = cargo()
        .args(["build", "--message-format=json-render-diagnostics", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(test_target_dir())
        .stderr(Stdio::piped())
        .output()
        .expect("cargo runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    for msg in cargo_metadata::Message::parse_stream(&out.stdout[..]) {
        if let Ok(cargo_metadata::Message::CompilerArtifact(a)) = msg {
            if let Some(exe) = a.executable {
                return Ok(exe.into_std_path_buf());
            }
        }
    }
    Err("cargo reported no executable".into())
}

/// A spawned harness worker.
pub struct Worker {
    pub child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Worker {
    /// Spawn `exe --serve` without a handshake.
    pub fn spawn(exe: &Path) -> Worker {
        let mut child = Command::new(exe)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Worker { child, out }
    }

    /// Spawn `exe --serve` and do the handshake.
    pub fn start(exe: &Path) -> Worker {
        let mut w = Worker::spawn(exe);
        let hello = w.request(0, RequestBody::Hello { protocol: protocol::PROTOCOL_VERSION });
        protocol::check_hello(&hello).unwrap();
        w
    }

    /// Send a request, read its response.
    pub fn request(&mut self, id: u64, body: RequestBody) -> Response {
        let line = serde_json::to_string(&Request { id, body }).unwrap();
        let answer = self.send(&line);
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"))
    }

    /// Send one JSON line, read one back.
    pub fn send(&mut self, line: &str) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        self.out.read_line(&mut answer).unwrap();
        answer
    }

    /// Send a request and return its answer, panicking on an error response.
    pub fn result(&mut self, id: u64, body: RequestBody) -> ResponseBody {
        let r = self.request(id, body);
        assert_eq!(r.id, id, "the response carries its request's id");
        match r.body {
            ResponseBody::Error(e) => panic!("{e}"),
            body => body,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The CLI binary, built once per test process into the tests' target dir.
pub fn cli_exe() -> PathBuf {
    static EXE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    EXE.get_or_init(|| {
        let status = cargo()
            .args(["build", "-q", "-p", "cargo-neuron-tune", "--target-dir"])
            .arg(test_target_dir())
            .current_dir(root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building cargo-neuron-tune failed");
        test_target_dir()
            .join("debug")
            .join(format!("cargo-neuron-tune{}", std::env::consts::EXE_SUFFIX))
    })
    .clone()
}

/// Run `cargo-neuron-tune neuron-tune ARGS` (as cargo would) from the repository root, with
/// harness builds in the tests' target dir and dev profile. Returns (exit code, stdout, stderr).
pub fn cli(args: &[&str]) -> (i32, String, String) {
    cli_env(args, &[])
}

/// [`cli`] with extra environment variables (the workers inherit them).
pub fn cli_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = cli_command(args).envs(env.iter().copied()).output().expect("the CLI runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The command [`cli`] runs, to spawn it yourself.
pub fn cli_command(args: &[&str]) -> Command {
    let mut full: Vec<&str> = vec!["neuron-tune"];
    full.extend_from_slice(args);
    let td = test_target_dir();
    // `new`, `replay`, `chip` and `analyze` build nothing.
    if !matches!(args.first(), Some(&"new") | Some(&"replay") | Some(&"chip") | Some(&"analyze")) {
        full.extend_from_slice(&["--target-dir", td.to_str().unwrap(), "--profile", "dev"]);
    }
    let mut cmd = Command::new(cli_exe());
    cmd.args(&full).current_dir(root());
    cmd
}

/// Run a command line the tool printed for a person to copy (`cargo neuron-tune …`) as a
/// person would: pasted into `sh -c`, in the directory [`cli`] runs the tool in, with
/// `cargo` on the PATH a stand-in that runs the tool under test as cargo runs a subcommand
/// (`cargo-neuron-tune neuron-tune ARGS`). Only the shell reads the words: a value the tool
/// failed to quote breaks here as it would for the person. Returns (exit code, stdout,
/// stderr).
#[cfg(unix)]
pub fn run_printed(command: &str) -> (i32, String, String) {
    use std::os::unix::fs::PermissionsExt;
    let bin = test_target_dir().join("printed-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let shim = bin.join("cargo");
    let exe = cli_exe().display().to_string();
    assert!(!exe.contains('\''), "{exe}");
    // Written to a temporary file and renamed: tests running at once never run a half one.
    let tmp = bin.join(format!("cargo.{}", std::process::id()));
    std::fs::write(
        &tmp,
        format!(
            "#!/bin/sh\n[ \"$1\" = neuron-tune ] && exec '{exe}' \"$@\"\n\
             echo \"this cargo only runs cargo neuron-tune\" >&2\nexit 127\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, &shim).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path)));
    let out = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(root())
        .env("PATH", path.unwrap())
        .env("NO_COLOR", "1")
        .output()
        .expect("sh runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The JSON events of kind `kind` in a `--message-format json` stdout.
/// Every event is checked for keys repeated in one object, which `serde_json::Value` (and
/// Python's `json`) would silently collapse to the last.
pub fn events(stdout: &str, kind: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok().map(|v| (l, v)))
        .filter(|(_, v)| v["event"] == kind)
        .map(|(line, v)| {
            if let Err(e) = serde_json::from_str::<UniqueKeys>(line) {
                panic!("a `{kind}` event repeats a key ({e}): {line}");
            }
            v
        })
        .collect()
}

/// A JSON value that fails to deserialize if any object in it repeats a key.
struct UniqueKeys;

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = UniqueKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<UniqueKeys, A::Error> {
                let mut seen = std::collections::HashSet::new();
                while let Some(key) = m.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(serde::de::Error::custom(format!("key `{key}` twice")));
                    }
                    m.next_value::<UniqueKeys>()?;
                }
                Ok(UniqueKeys)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<UniqueKeys, A::Error> {
                while s.next_element::<UniqueKeys>()?.is_some() {}
                Ok(UniqueKeys)
            }
            fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// `profile` of a DMA-bound GEMM variant of the kernel fixtures: [128 x 128] output tiles
/// with no block reuse, so every operand byte feeds one small matmul, and triple buffering
/// hides the DMA latency: transfers are the limit.
pub const PROFILE_DMA_BOUND_GEMM: [&str; 8] = [
    "profile",
    "-p",
    "neuron-fixtures-kernels",
    "gemm",
    "--shape",
    "small",
    "--params",
    "tile_n=128,block_m=1,block_n=1,k_tiles=8,bufs=3",
];

/// The manifest of `fixtures/broken/<name>`.
pub fn broken_manifest(name: &str) -> String {
    root().join("fixtures/broken").join(name).join("Cargo.toml").to_string_lossy().into_owned()
}

/// [`cli`] with `--message-format json`.
pub fn cli_json(args: &[&str]) -> (i32, String, String) {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--message-format", "json"]);
    cli(&a)
}

/// `cli_json` on the workspace at `ws` (`--manifest-path ws/Cargo.toml`).
pub fn cli_in(ws: &Path, args: &[&str]) -> (i32, String, String) {
    let manifest = ws.join("Cargo.toml");
    let mut a = args.to_vec();
    a.extend(["--manifest-path", manifest.to_str().expect("a UTF-8 path")]);
    cli_json(&a)
}

/// [`cli_in`] that must exit 0: its stdout (JSON events) and stderr.
pub fn cli_in_ok(ws: &Path, args: &[&str]) -> (String, String) {
    let (code, out, err) = cli_in(ws, args);
    assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    (out, err)
}

/// A fresh directory for one test's files.
///
/// Earlier processes' directories of the same name are removed. They must not outlive the
/// next run: a scratch crate is its own workspace inside the shared build dir, so every
/// copy of it has the same build units, and cargo records their sources relative to the
/// build dir's parent — a build of this copy would check an older copy's sources (still
/// there, unchanged) and keep a stale binary.
pub fn scratch_dir(name: &str) -> PathBuf {
    let parent = root().join("target").join("e2e-scratch");
    for old in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
        let file_name = old.file_name();
        let pid = file_name.to_str().and_then(|n| n.strip_prefix(name)?.strip_prefix('-'));
        if pid.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
            let _ = std::fs::remove_dir_all(old.path());
        }
    }
    let d = parent.join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn crate_manifest(name: &str, lib: bool) -> String {
    let r = root();
    format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n[workspace]\n\n\
         [dependencies]\nneuron-sim = {{ path = \"{}\" }}\nneuron-tune-harness = {{ path = \"{}\" }}\n\n\
         [[bin]]\nname = \"harness-{name}\"\npath = \"{}\"\n\n[package.metadata.neuron-tune]\nharness = \"harness-{name}\"\n",
        r.join("sim").display(),
        r.join("harness").display(),
        if lib { "src/bin/harness.rs" } else { "src/main.rs" }
    )
}

/// A kernel crate (its own workspace) with two element-wise kernels, `double` (y = 2x) and
/// `triple` (y = k·x), each with a two-variant space.
pub fn two_kernel_crate(name: &str, k: f32) -> PathBuf {
    let dir = scratch_dir(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let mut manifest = crate_manifest(name, false);
    manifest.push_str("\n[package.metadata.neuron-tune.kernels.double]\nspace = { bufs = [1, 2] }\n\n[package.metadata.neuron-tune.kernels.triple]\nspace = { bufs = [1, 2] }\n");
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let common = std::fs::read_to_string(root().join("fixtures/broken/common.rs")).unwrap();
    let src = format!(
        "{common}\n\
         fn scaled(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm, k: Scalar) -> SimResult<()> {{\n\
             let (rows, cols) = (sh.dim(\"rows\"), sh.dim(\"cols\"));\n\
             let pool = nc.sbuf_pool(\"io\", p.uint(\"bufs\").unwrap() as u32);\n\
             let mut r = 0;\n\
             while r < rows {{\n\
                 let pr = (rows - r).min(128);\n\
                 let t = nc.tile(pool, Dtype::Bf16, &[128, cols])?;\n\
                 let v = t.parts(0..pr as u32);\n\
                 nc.dma(v, x.rows(r..r + pr))?;\n\
                 nc.tensor_scalar(v, v, (Alu::Multiply, k), None)?;\n\
                 nc.dma(y.rows(r..r + pr), v)?;\n\
                 r += pr;\n\
             }}\n\
             Ok(())\n\
         }}\n\
         fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) -> SimResult<()> {{ scaled(nc, p, sh, x, y, Scalar::Imm(2.0)) }}\n\
         {}\n\
         neuron_tune_harness::harness_main!(kernels: [Double, Triple]);\n",
        like_double(
            "triple",
            &format!("scaled(nc, p, s, t[0], t[1], Scalar::Imm({k:?}))"),
            &format!("vec![i[0].iter().map(|v| {k:?} * v).collect()]"),
        )
    );
    std::fs::write(dir.join("src/main.rs"), src).unwrap();
    dir
}

/// Rust source of a kernel `Triple` named `name` with `fixtures/broken/common.rs`'s
/// `Double`'s parameters, shapes, tensors and work, whose `run` body is `run` (an expression
/// of `nc`, `p`, `s` and `t: &[Hbm]`) and whose `reference` is `reference` (of `s` and `i`).
pub fn like_double(name: &str, run: &str, reference: &str) -> String {
    format!(
        "struct Triple;\n\
         impl Kernel for Triple {{\n\
             fn name(&self) -> &str {{ \"{name}\" }}\n\
             fn params(&self) -> Vec<ParamSpec> {{ Double.params() }}\n\
             fn shapes(&self) -> Vec<(String, Shape)> {{ Double.shapes() }}\n\
             fn small_shapes(&self, p: &Params) -> BoxedStrategy<Shape> {{ Double.small_shapes(p) }}\n\
             fn tensors(&self, s: &Shape) -> Vec<TensorSpec> {{ Double.tensors(s) }}\n\
             #[allow(unused_variables)]\n\
             fn run(&self, nc: &mut Nc, p: &Params, s: &Shape, t: &[Hbm]) -> SimResult<()> {{ {run} }}\n\
             #[allow(unused_variables)]\n\
             fn reference(&self, s: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {{ {reference} }}\n\
             fn work(&self, s: &Shape) -> Work {{ Double.work(s) }}\n\
         }}\n"
    )
}

/// A workspace of two member crates in `dir`, each a harness crate on this repository's
/// simulator and harness (with a copy of its lock file): `kernels/`, package `kernels.0`,
/// whose `[package.metadata.neuron-tune]` goes on with `kernels.1` and whose harness is
/// `kernels.2` (with an empty library, for the other to link), and `models/`, package
/// `models.0`, depending on it, whose harness is `models.1`.
pub fn kernels_and_models_workspace(dir: &Path, kernels: [&str; 3], models: [&str; 2]) {
    let r = root();
    let manifest = |name: &str, extra: &str| {
        crate_manifest(name, false).replace("[workspace]\n\n", "") + extra
    };
    let write = |path: &str, text: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("Cargo.toml", "[workspace]\nresolver = \"2\"\nmembers = [\"kernels\", \"models\"]\n");
    std::fs::copy(r.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let [package, metadata, main] = kernels;
    write("kernels/Cargo.toml", &manifest(package, metadata));
    write("kernels/src/main.rs", main);
    let [models, models_main] = models;
    write(
        "kernels/src/lib.rs",
        &format!("//! Linked by `{models}`; the kernels are in the harness.\n"),
    );
    let dependency = format!("\n[dependencies.{package}]\npath = \"../kernels\"\n");
    write("models/Cargo.toml", &manifest(models, &dependency));
    write("models/src/main.rs", models_main);
}

/// A kernel crate `name` in `dir` whose one kernel is `fixtures/broken/common.rs`'s `double`
/// (y = 2x; parameters `bufs` and `cols_per_tile`; shape `small`) with `body` as its body
/// (Rust source defining `fn body(nc: &mut Nc, p: &Params, sh: &Shape, x: Hbm, y: Hbm) ->
/// SimResult<()>`; common.rs's `correct` and `block` are there to call) and `space` (a TOML
/// inline table) as its space. `own_workspace`: a workspace of its own, with a copy of the
/// repository's lock file; else a member of the workspace above `dir`.
pub fn double_crate(dir: &Path, name: &str, space: &str, body: &str, own_workspace: bool) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let mut manifest = crate_manifest(name, false);
    if !own_workspace {
        manifest = manifest.replace("[workspace]\n\n", "");
    }
    manifest
        .push_str(&format!("\n[package.metadata.neuron-tune.kernels.double]\nspace = {space}\n"));
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    if own_workspace {
        std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    }
    let common = std::fs::read_to_string(root().join("fixtures/broken/common.rs")).unwrap();
    let src = format!("{common}\n{body}\nneuron_tune_harness::harness_main!(kernels: [Double]);\n");
    std::fs::write(dir.join("src/main.rs"), src).unwrap();
}

/// A kernel crate (its own workspace) with a library and a harness binary that registers
/// no kernel yet: what `cargo neuron-tune new` starts from.
pub fn empty_kernel_crate(name: &str) -> PathBuf {
    let dir = scratch_dir(name);
    std::fs::create_dir_all(dir.join("src/bin")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), crate_manifest(name, true)).unwrap();
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), "//! My kernels.\n").unwrap();
    std::fs::write(
        dir.join("src/bin/harness.rs"),
        "neuron_tune_harness::harness_main!(kernels: []);\n",
    )
    .unwrap();
    dir
}

/// A git repository (one commit) holding a copy of the fixture workspace — the kernels and
/// the qwen3 model crates, without their tests — whose dependencies on the simulator and
/// the harness point into this repository, so building it rebuilds only the fixtures.
/// Build it with `--target-dir` [`test_target_dir`].
///
/// Its packages' version is unique to the copy (`0.1.0-<name>.<pid>`): cargo names a path
/// package's build units by its path relative to the workspace root, so copies of one
/// version would share units in the shared target dir, and one copy's fingerprints could
/// make another's edited sources look fresh. So are its harness binaries' names
/// (`neuron-tune-harness-<name>`, `qwen3-harness-<name>`): cargo puts each copy's final
/// binaries at one path.
pub fn fixture_workspace(name: &str) -> PathBuf {
    let dir = scratch_dir(name);
    let r = root();
    let root_manifest = std::fs::read_to_string(r.join("Cargo.toml")).unwrap();
    let deps = root_manifest
        .split("[workspace.dependencies]")
        .nth(1)
        .and_then(|s| s.split("\n[").next())
        .unwrap()
        .replace("path = \"", &format!("path = \"{}/", r.display()));
    let tag = name.replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[workspace]\nresolver = \"2\"\nmembers = [\"kernels\", \"qwen3\"]\n\n\
             [workspace.package]\nversion = \"0.1.0-{tag}.{pid}\"\nedition = \"2021\"\nlicense = \"MIT\"\n\n\
             [workspace.dependencies]{deps}\n",
            pid = std::process::id()
        ),
    )
    .unwrap();
    std::fs::copy(r.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    for krate in ["kernels", "qwen3"] {
        let from = r.join("fixtures").join(krate);
        copy_tree(&from.join("src"), &dir.join(krate).join("src"));
        let manifest = std::fs::read_to_string(from.join("Cargo.toml")).unwrap();
        // Its dev-dependencies (the test crates) stay behind with its tests.
        let manifest = match manifest.find("[dev-dependencies]") {
            Some(i) => {
                let rest = &manifest[i + 1..];
                let end = rest.find("\n[").map_or(manifest.len(), |j| i + 1 + j + 1);
                format!("{}{}", &manifest[..i], &manifest[end..])
            }
            None => manifest,
        };
        // Its harness binary gets a name of its own (its `[[bin]]` and `harness =`): the
        // copies build into one target dir, where cargo puts every copy's binary of one
        // name at one path, so a test running its copy's harness could start another's,
        // built from other sources (the copy's edits lost), when tests run in parallel.
        let bin = if krate == "kernels" { "neuron-tune-harness" } else { "qwen3-harness" };
        let quoted = format!("\"{bin}\"");
        assert_eq!(manifest.matches(&quoted).count(), 2, "[[bin]] and harness: {manifest}");
        let manifest = manifest.replace(&quoted, &format!("\"{bin}-{tag}\""));
        std::fs::write(dir.join(krate).join("Cargo.toml"), manifest).unwrap();
    }
    std::fs::write(dir.join(".gitignore"), "/target\n").unwrap();
    // The lock file names the copy's own version, so builds of the commit leave it as is.
    let status = cargo()
        .args(["update", "--workspace", "--offline", "-q"])
        .current_dir(&dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo update --workspace in {}", dir.display());
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "fixtures"]);
    dir
}

/// Run git in `dir` (with a fixed identity), panicking with its stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A file put back as it was (or removed, if it did not exist) when the guard drops: for
/// commands that write into the repository, like `tune` into a crate's tuned database.
pub struct KeepFile(PathBuf, Option<Vec<u8>>);

impl KeepFile {
    /// Remember `path`'s bytes now.
    pub fn new(path: PathBuf) -> KeepFile {
        let bytes = std::fs::read(&path).ok();
        KeepFile(path, bytes)
    }
}

impl Drop for KeepFile {
    fn drop(&mut self) {
        let _ = match &self.1 {
            Some(bytes) => std::fs::write(&self.0, bytes),
            None => std::fs::remove_file(&self.0),
        };
    }
}

/// Build a binary of this workspace into the tests' target directory (debug); its path.
pub fn cargo_build_bin(package: &str, bin: &str) -> PathBuf {
    let status = cargo()
        .args(["build", "-q", "-p", package, "--bin", bin, "--target-dir"])
        .arg(test_target_dir())
        .current_dir(root())
        .status()
        .unwrap();
    assert!(status.success(), "building {bin}");
    test_target_dir().join("debug").join(bin)
}

/// `tune` of `fixtures/broken/noisy`'s kernel `many` (24 evaluations, 2 workers, JSON) with
/// `seed`, and `extra` flags: the runs the tune tests stop, resume and compare.
pub fn tune_args(seed: &str, extra: &[&str]) -> Vec<String> {
    let manifest = broken_manifest("noisy");
    let mut a: Vec<String> =
        ["tune", "--kernel", "many", "--budget", "24", "--seed", seed, "-j", "2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(["--manifest-path".into(), manifest, "--message-format".into(), "json".into()]);
    a
}

/// The final `tune` event of a JSON run's stdout.
pub fn final_event(out: &str) -> serde_json::Value {
    events(out, "tune").pop().unwrap_or_else(|| panic!("no tune event in {out}"))
}

/// A journal's lines that parse (none when the file is missing).
pub fn journal_lines(path: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Parameters as the tool prints them (`k=v,k=v`, by name).
pub fn params_text(p: &serde_json::Value) -> String {
    let o = p.as_object().unwrap();
    let mut kv: Vec<String> = o
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_string)))
        .collect();
    kv.sort();
    kv.join(",")
}
