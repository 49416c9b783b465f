//! Harness worker processes: one client per process, and a persistent pool of them.
//!
//! A worker is a real process (`HARNESS --serve`, started with duct) spoken to over the
//! worker protocol (`neuron-tune-protocol`). The [`Pool`] starts its workers once for the
//! whole command — lazily, one per job slot, when the slot gets its first request — and
//! takes requests as they come ([`Pool::submit`]); answers come back as they complete
//! ([`Pool::recv`]), which is what a streaming `bench` and an ask/tell search need. A
//! request may be given to one slot ([`Pool::submit_to`]): `tune` sends each part of its
//! correctness checks to the same slot every time, whose worker remembers the inputs and
//! reference outputs of the cases it checked (`neuron_tune_harness::cases`).
//!
//! A worker that crashes or exceeds the timeout is killed and replaced, and its request is
//! retried once on the fresh worker before it is reported: the tool never dies with a
//! kernel (ARCHITECTURE.md, invariants). A worker that crashes or hangs while starting up
//! (before its handshake, running the crate's registration code) is started once more; if
//! that fails too, the command stops with exit 4: the failure is the harness's, never an
//! answer about the request that happened to start it (a search would record it, and a
//! resumed run replay it). A worker that answers something other than the
//! protocol — a line that is not a response, a truncated line, a response to another
//! request's id — is a protocol error: never taken as a result, and fatal to the command,
//! since nothing that worker says can be trusted.

use crate::exit::{fail, Exit, Failure};
use neuron_tune_protocol::{
    check_hello, ErrorInfo, ErrorKind, Request, RequestBody, Response, ResponseBody,
    PROTOCOL_VERSION,
};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

/// A request's answer (never a `ResponseBody::Error`: that is the `Err`).
pub type Answer = Result<ResponseBody, ErrorInfo>;

fn failure(kind: ErrorKind, message: impl Into<String>) -> ErrorInfo {
    ErrorInfo { kind, message: message.into() }
}

/// A line from the worker's stdout; `complete` is false for a last line without its
/// newline (the worker stopped mid-line).
struct Line {
    text: String,
    complete: bool,
}

/// One live worker process.
struct WorkerProcess {
    handle: Arc<duct::ReaderHandle>,
    stdin: os_pipe::PipeWriter,
    lines: mpsc::Receiver<Line>,
    /// "worker 1234 (path/to/harness)", for messages.
    name: String,
}

impl WorkerProcess {
    /// Start a worker and shake hands; `timeout` bounds the handshake as it bounds a
    /// request (a harness whose start-up hangs is killed like a hung request).
    fn start(
        exe: &Path,
        manifest_dir: &Path,
        timeout: Duration,
    ) -> Result<WorkerProcess, ErrorInfo> {
        let cannot = |e: std::io::Error| {
            failure(ErrorKind::Unstartable, format!("cannot start {}: {e}", exe.display()))
        };
        let (reader, stdin) = os_pipe::pipe().map_err(cannot)?;
        let handle = duct::cmd(exe, ["--serve"])
            .stdin_file(reader)
            .env("NEURON_TUNE_MANIFEST_DIR", manifest_dir)
            .unchecked()
            .reader()
            .map_err(cannot)?;
        let pid = handle.pids().first().copied().unwrap_or(0);
        let handle = Arc::new(handle);
        let (tx, lines) = mpsc::channel();
        let h = handle.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(&*h);
            loop {
                let mut text = String::new();
                match r.read_line(&mut text) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let complete = text.ends_with('\n');
                        if tx.send(Line { text, complete }).is_err() || !complete {
                            break;
                        }
                    }
                }
            }
        });
        let mut w = WorkerProcess {
            handle,
            stdin,
            lines,
            name: format!("worker {pid} ({})", exe.display()),
        };
        let hello = w
            .roundtrip(
                &Request { id: 0, body: RequestBody::Hello { protocol: PROTOCOL_VERSION } },
                timeout,
            )
            .map_err(|e| ErrorInfo { message: format!("starting up: {}", e.message), ..e })?;
        check_hello(&hello).map_err(|e| failure(ErrorKind::ProtocolMismatch, e))?;
        Ok(w)
    }

    fn pid(&self) -> u32 {
        self.handle.pids().first().copied().unwrap_or(0)
    }

    /// Send `req`, wait for its response.
    fn roundtrip(&mut self, req: &Request, timeout: Duration) -> Result<Response, ErrorInfo> {
        let line = serde_json::to_string(req).expect("requests serialize");
        // A closed input means the process ended (or is ending): say how, as for a death
        // while answering.
        writeln!(self.stdin, "{line}").and_then(|_| self.stdin.flush()).map_err(|_| {
            failure(ErrorKind::Crashed, format!("{} died: {}", self.name, self.how_it_died()))
        })?;
        let line = match self.lines.recv_timeout(timeout) {
            Ok(l) => l,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(failure(
                    ErrorKind::Timeout,
                    format!("timed out after {} s ({} killed)", timeout.as_secs(), self.name),
                ))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(failure(
                    ErrorKind::Crashed,
                    format!("{} died: {}", self.name, self.how_it_died()),
                ))
            }
        };
        response_to(req.id, &line.text, line.complete)
            .map_err(|what| failure(ErrorKind::Protocol, format!("{}: {what}", self.name)))
    }

    fn kill(&self) {
        let _ = self.handle.kill();
    }

    /// How the process ended (its output is closed, so it is ending or has ended). Death
    /// by SIGINT is noted as the command's interruption ([`crate::interrupt`]).
    fn how_it_died(&self) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            match self.handle.try_wait() {
                Ok(Some(out)) => {
                    crate::interrupt::note_child_exit(out.status);
                    return describe_exit(out.status);
                }
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => return "its output closed".into(),
            }
        }
    }
}

/// The response to request `id` in a line a worker wrote (`complete`: with its end of line),
/// or the protocol error it is, in words: a line cut short, a line that is not a protocol
/// response, or the response to another request. Never a response to another id.
pub fn response_to(id: u64, text: &str, complete: bool) -> Result<Response, String> {
    if !complete {
        return Err(format!("truncated response to request {id} (no end of line): {}", clip(text)));
    }
    let resp: Response = serde_json::from_str(text).map_err(|e| {
        format!(
            "answered request {id} with a line that is not a protocol response ({e}): {}",
            clip(text)
        )
    })?;
    if resp.id != id {
        return Err(format!("answered request {id} with the response to request {}", resp.id));
    }
    Ok(resp)
}

/// An exit status in words, naming the signal and what it usually means.
fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let what = match sig {
                9 => "SIGKILL — killed from outside, most often by the out-of-memory killer",
                6 => "SIGABRT — aborted (an abort, or a panic while panicking)",
                11 => "SIGSEGV — a segmentation fault",
                7 => "SIGBUS — a bus error",
                4 => "SIGILL — an illegal instruction",
                8 => "SIGFPE — an arithmetic exception",
                15 => "SIGTERM — terminated",
                _ => "a signal",
            };
            return format!("killed by signal {sig} ({what})");
        }
    }
    match status.code() {
        Some(c) => format!("exited with code {c} in the middle of a request"),
        None => "ended without an exit code".into(),
    }
}

fn clip(s: &str) -> String {
    let s = s.trim_end();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let shutdown = Request { id: u64::MAX, body: RequestBody::Shutdown };
        let _ = writeln!(self.stdin, "{}", serde_json::to_string(&shutdown).unwrap_or_default());
        self.kill();
    }
}

/// A finished request.
#[derive(Debug)]
pub struct Done {
    pub id: u64,
    pub answer: Answer,
    /// What kernel code printed while answering (trimmed).
    pub output: String,
    /// `answer` is the failure of a worker to start (twice), not an answer to the request.
    at_startup: bool,
}

struct Job {
    id: u64,
    body: RequestBody,
    /// The job slot that must answer it (`Pool::submit_to`), or any.
    slot: Option<usize>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

/// What a pool tells its owner besides answers.
pub trait PoolEvents: Send + Sync {
    /// A worker process was started.
    fn worker_started(&self, pid: u32);
}

/// The workers of one harness binary, for the whole command.
pub struct Pool {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    done: mpsc::Receiver<Done>,
    threads: Vec<std::thread::JoinHandle<()>>,
    next_id: u64,
    outstanding: usize,
    jobs: usize,
}

impl Pool {
    /// A pool of up to `jobs` workers of `exe`; none starts before it has a request.
    pub fn new(
        exe: &Path,
        manifest_dir: &Path,
        jobs: usize,
        timeout: Duration,
        events: Arc<dyn PoolEvents>,
    ) -> Pool {
        let jobs = jobs.max(1);
        let queue: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let (tx, done) = mpsc::channel();
        let threads = (0..jobs)
            .map(|slot| {
                let (queue, tx, events) = (queue.clone(), tx.clone(), events.clone());
                let (exe, dir) = (exe.to_path_buf(), manifest_dir.to_path_buf());
                std::thread::spawn(move || {
                    serve_slot(slot, &queue, &tx, &*events, &exe, &dir, timeout)
                })
            })
            .collect();
        Pool { queue, done, threads, next_id: 1, outstanding: 0, jobs }
    }

    /// Parallel workers at most.
    pub fn jobs(&self) -> usize {
        self.jobs
    }

    /// Queue a request; its answer comes from [`Pool::recv`] with the returned id.
    pub fn submit(&mut self, body: RequestBody) -> u64 {
        self.queue_job(body, None)
    }

    /// [`Pool::submit`], to be answered by job slot `slot` (modulo the slots), on its
    /// worker, after the slot's earlier requests: the same `slot` for the same kind of
    /// work lets a worker's memory serve it. Answers are the same whichever slot gives
    /// them; only when (and so how soon) can differ.
    pub fn submit_to(&mut self, body: RequestBody, slot: usize) -> u64 {
        self.queue_job(body, Some(slot % self.jobs))
    }

    fn queue_job(&mut self, body: RequestBody, slot: Option<usize>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.outstanding += 1;
        let (lock, cv) = &*self.queue;
        lock.lock().expect("pool queue").jobs.push_back(Job { id, body, slot });
        // A job for one slot wakes every waiting slot: the one woken by `notify_one` might
        // not be the one that may take it.
        if slot.is_some() {
            cv.notify_all();
        } else {
            cv.notify_one();
        }
        id
    }

    /// The next finished request, in completion order (`None` when nothing is outstanding).
    /// A worker that broke the protocol is the command's failure (exit 1), never an answer:
    /// nothing that worker says can be trusted; so are workers that all stopped with
    /// requests unanswered.
    pub fn recv(&mut self) -> Result<Option<Done>, Failure> {
        if self.outstanding == 0 {
            return Ok(None);
        }
        // Polled, so that Ctrl-C ends the wait (answers still in flight are abandoned).
        let done = loop {
            if crate::interrupt::requested() {
                return Err(crate::interrupt::failure());
            }
            match self.done.recv_timeout(Duration::from_millis(100)) {
                // An answer that came with or after Ctrl-C may be the interruption's doing
                // (a worker that died of the same SIGINT answers "crashed"): not used.
                Ok(_) if crate::interrupt::requested() => return Err(crate::interrupt::failure()),
                Ok(done) => break done,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                // Every slot thread is gone with answers owed: nothing will answer them,
                // and a caller must not take a missing answer for a good one.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(fail(
                        Exit::Internal,
                        format!(
                            "the harness workers stopped with {} request(s) unanswered",
                            self.outstanding
                        ),
                    ))
                }
            }
        };
        self.outstanding -= 1;
        match &done.answer {
            Err(e) if done.at_startup => Err(fail(
                Exit::Check,
                format!(
                    "the harness failed twice while starting up ({}: {}): its start-up code \
                     (`harness_main!`, the kernels' constructors) crashed or hung before the \
                     handshake; no variant's result came from it, and everything measured so \
                     far is kept",
                    e.kind,
                    e.message.trim_start_matches("starting up: ")
                ),
            )),
            Err(e) if matches!(e.kind, ErrorKind::Protocol | ErrorKind::ProtocolMismatch) => {
                Err(fail(Exit::Internal, format!("protocol error: {}", e.message)))
            }
            // Not the variant's failure: no answer about it is recorded or journaled.
            Err(e) if e.kind == ErrorKind::Unstartable => Err(fail(
                Exit::Internal,
                format!(
                    "{} (was the harness removed while the command ran, by `cargo clean` or \
                     another build?); everything measured so far is kept: run the command \
                     again",
                    e.message
                ),
            )),
            _ => Ok(Some(done)),
        }
    }

    /// One request, answered (nothing else may be outstanding).
    pub fn request(&mut self, body: RequestBody) -> Result<Done, Failure> {
        debug_assert_eq!(self.outstanding, 0, "request() waits for its own answer only");
        let id = self.submit(body);
        let done = self.recv()?.expect("an answer to the request just submitted");
        debug_assert_eq!(done.id, id);
        Ok(done)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let interrupted = crate::interrupt::requested();
        {
            let (lock, cv) = &*self.queue;
            let mut q = lock.lock().expect("pool queue");
            q.closed = true;
            q.jobs.clear();
            cv.notify_all();
        }
        if interrupted {
            // A slot may still wait on a worker that did not get the SIGINT; the process
            // is ending, and a worker whose input closes exits after its request.
            return;
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One job slot (number `slot`): takes requests (the first queued that any slot or this one
/// may take) until the pool closes, with its own worker process.
fn serve_slot(
    slot: usize,
    queue: &(Mutex<Queue>, Condvar),
    done: &mpsc::Sender<Done>,
    events: &dyn PoolEvents,
    exe: &Path,
    manifest_dir: &Path,
    timeout: Duration,
) {
    let mut worker: Option<WorkerProcess> = None;
    loop {
        let job = {
            let (lock, cv) = queue;
            let mut q = lock.lock().expect("pool queue");
            loop {
                let mine = q.jobs.iter().position(|j| j.slot.is_none_or(|s| s == slot));
                if let Some(job) = mine.and_then(|i| q.jobs.remove(i)) {
                    break job;
                }
                if q.closed {
                    return;
                }
                q = cv.wait(q).expect("pool queue");
            }
        };
        let request = Request { id: job.id, body: job.body };
        let result = answer_with_retry(&mut worker, &request, events, exe, manifest_dir, timeout);
        let (answer, output, at_startup) = match result {
            Ok(Response { body: ResponseBody::Error(e), output, .. }) => (Err(e), output, false),
            Ok(Response { body, output, .. }) => (Ok(body), output, false),
            Err(SlotError::Request(e)) => (Err(e), String::new(), false),
            Err(SlotError::Startup(e)) => (Err(e), String::new(), true),
        };
        if done.send(Done { id: request.id, answer, output, at_startup }).is_err() {
            return;
        }
    }
}

/// Why a slot has no answer to its request.
enum SlotError {
    /// The request crashed or hung (twice), or the worker broke the protocol.
    Request(ErrorInfo),
    /// No worker could be started for it: it crashed or hung before its handshake, twice.
    /// Not an answer about the request.
    Startup(ErrorInfo),
}

/// Whether a failure may be the moment's (a crash, a hang), so trying again can help.
fn worth_retrying(e: &ErrorInfo) -> bool {
    !crate::interrupt::requested() && matches!(e.kind, ErrorKind::Timeout | ErrorKind::Crashed)
}

/// Answer `request` on the slot's worker (started if there is none). A crash or a hang
/// kills the worker, and the request is retried once on a fresh one; any other failure
/// (a protocol error) kills it and is final. Starting a worker has its own retry: a start
/// that crashes or hangs is tried once more.
fn answer_with_retry(
    worker: &mut Option<WorkerProcess>,
    request: &Request,
    events: &dyn PoolEvents,
    exe: &Path,
    manifest_dir: &Path,
    timeout: Duration,
) -> Result<Response, SlotError> {
    let (mut retried, mut start_retried) = (false, false);
    loop {
        let w = match worker {
            Some(w) => w,
            None => match WorkerProcess::start(exe, manifest_dir, timeout) {
                Ok(w) => {
                    events.worker_started(w.pid());
                    worker.insert(w)
                }
                Err(e) if worth_retrying(&e) && !start_retried => {
                    start_retried = true;
                    continue;
                }
                Err(e) if worth_retrying(&e) => return Err(SlotError::Startup(e)),
                // A binary that cannot be spawned, or speaks another protocol: reported by
                // kind ([`Pool::recv`]), not retried.
                Err(e) => return Err(SlotError::Request(e)),
            },
        };
        match w.roundtrip(request, timeout) {
            Ok(r) => return Ok(r),
            Err(e) => {
                w.kill();
                *worker = None;
                if retried || !worth_retrying(&e) {
                    return Err(SlotError::Request(e));
                }
                retried = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Quiet;
    impl PoolEvents for Quiet {
        fn worker_started(&self, _: u32) {}
    }

    /// A harness that cannot be started (removed by `cargo clean` mid-run) stops the
    /// command: it is never an answer about the variant asked (a crash, a failed check),
    /// which a search would record and a resumed run replay.
    #[test]
    fn a_harness_that_cannot_start_is_the_command_s_failure_not_an_answer() {
        let dir = std::env::temp_dir();
        let gone = dir.join(format!("no-such-harness-{}", std::process::id()));
        let mut pool = Pool::new(&gone, &dir, 2, Duration::from_secs(5), Arc::new(Quiet));
        let e = pool.request(RequestBody::List).expect_err("no answer from a missing binary");
        assert_eq!(e.exit, Exit::Internal);
        assert!(e.message.contains("cannot start") && e.message.contains("run the command again"));
        assert!(e.message.contains(&gone.display().to_string()), "{}", e.message);
    }
}
