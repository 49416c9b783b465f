//! Helpers of the end-to-end tests: build crates with the real cargo, spawn their harness
//! binaries, talk the worker protocol.

use neuron_tune_harness::protocol::{self, Response};
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

/// Target directory for crates built by the tests (shared, so dependencies build once).
pub fn test_target_dir() -> PathBuf {
    root().join("target").join("e2e")
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
    /// Spawn `exe --serve` and do the handshake.
    pub fn start(exe: &Path) -> Worker {
        let mut child = Command::new(exe)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut w = Worker { child, out };
        let hello = w.send(&protocol::hello());
        protocol::check_hello(&hello).unwrap();
        w
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

    /// Send a request and return its `result`, panicking on an error response.
    pub fn result(&mut self, line: &str) -> serde_json::Value {
        let answer = self.send(line);
        match serde_json::from_str(&answer).unwrap() {
            Response::Result { result, .. } => result,
            other => panic!("{other:?}"),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
