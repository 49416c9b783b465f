//! A pool of harness worker processes.
//!
//! Each worker is a real process (`HARNESS --serve`, started with duct) spoken to over the
//! worker protocol: one JSON request line in, one response line out. A reader thread per
//! worker forwards its stdout lines, so a request can time out: a worker that crashes or
//! exceeds the timeout is killed, its request answered with an error, and a fresh worker
//! takes its place — the run goes on. The tool never links user kernels and never dies
//! with them (DESIGN.md §3).

use neuron_tune_harness::protocol::{self, Response};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// One live worker process.
struct Worker {
    handle: Arc<duct::ReaderHandle>,
    stdin: os_pipe::PipeWriter,
    lines: mpsc::Receiver<String>,
}

impl Worker {
    fn start(exe: &Path, manifest_dir: &Path) -> Result<Worker, String> {
        let (reader, stdin) = os_pipe::pipe().map_err(|e| e.to_string())?;
        let handle = duct::cmd(exe, ["--serve"])
            .stdin_file(reader)
            .env("NEURON_TUNE_MANIFEST_DIR", manifest_dir)
            .unchecked()
            .reader()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let handle = Arc::new(handle);
        let (tx, lines) = mpsc::channel();
        let h = handle.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(&*h);
            loop {
                let mut line = String::new();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut w = Worker { handle, stdin, lines };
        let hello = w.roundtrip(&protocol::hello(), Duration::from_secs(60))?;
        protocol::check_hello(&hello)?;
        Ok(w)
    }

    fn roundtrip(&mut self, line: &str, timeout: Duration) -> Result<String, String> {
        writeln!(self.stdin, "{line}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("worker stdin closed: {e}"))?;
        match self.lines.recv_timeout(timeout) {
            Ok(l) => Ok(l),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(format!("timed out after {} s", timeout.as_secs()))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err("the worker process died".into()),
        }
    }

    fn kill(&self) {
        let _ = self.handle.kill();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{{\"type\":\"shutdown\"}}");
        self.kill();
    }
}

/// Workers of one harness binary.
pub struct Pool {
    exe: PathBuf,
    manifest_dir: PathBuf,
    jobs: usize,
    timeout: Duration,
}

/// A request's answer, or why there is none.
pub type Answer = Result<Response, String>;

impl Pool {
    pub fn new(exe: &Path, manifest_dir: &Path, jobs: usize, timeout: Duration) -> Pool {
        Pool {
            exe: exe.to_path_buf(),
            manifest_dir: manifest_dir.to_path_buf(),
            jobs: jobs.max(1),
            timeout,
        }
    }

    /// Answer every request (JSON lines), `jobs` at a time; `done(i, answer)` is called as
    /// each finishes (for progress and journaling). Answers come back in request order.
    pub fn run(&self, requests: &[String], done: &(dyn Fn(usize, &Answer) + Sync)) -> Vec<Answer> {
        let next = Mutex::new(0usize);
        let results: Mutex<Vec<Option<Answer>>> = Mutex::new(vec![None; requests.len()]);
        let workers = self.jobs.min(requests.len()).max(1);
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    let mut worker: Option<Worker> = None;
                    loop {
                        let i = {
                            let mut n = next.lock().unwrap();
                            if *n >= requests.len() {
                                break;
                            }
                            *n += 1;
                            *n - 1
                        };
                        let answer = self.answer(&mut worker, &requests[i]);
                        done(i, &answer);
                        results.lock().unwrap()[i] = Some(answer);
                    }
                });
            }
        });
        results
            .into_inner()
            .unwrap()
            .into_iter()
            .map(|a| a.expect("every request answered"))
            .collect()
    }

    fn answer(&self, worker: &mut Option<Worker>, request: &str) -> Answer {
        if worker.is_none() {
            *worker = Some(Worker::start(&self.exe, &self.manifest_dir)?);
        }
        let w = worker.as_mut().expect("started above");
        match w.roundtrip(request, self.timeout) {
            Ok(line) => serde_json::from_str(&line)
                .map_err(|e| format!("bad worker response ({e}): {line}")),
            Err(e) => {
                // Crashed or hung: kill it; the next request gets a fresh worker.
                w.kill();
                *worker = None;
                Err(e)
            }
        }
    }
}
