//! The protocol's own channel, apart from what kernel code prints.
//!
//! The tool talks to a worker over the worker's stdin and stdout. Kernel code runs in the
//! same process and may print (a `println!` left in a body, a reference or a validity
//! rule); if those bytes reached the protocol stream, every later answer would be read as
//! the answer to another request. So before serving, [`ProtocolChannel::open`] takes the
//! protocol's file descriptors for itself (duplicates of 0 and 1) and points fds 0, 1 and 2
//! elsewhere: stdin at `/dev/null`, stdout and stderr at an anonymous capture file. What
//! kernel code prints while a request is answered is read back from the capture file and
//! sent inside that request's response ([`Response::output`], trimmed), so the user sees it
//! with its variant. The worker's own diagnostics go to the original stderr.
//!
//! This needs `dup`/`dup2`, which the standard library does not expose (hence `libc`); on
//! other platforms the channel is plain stdin/stdout and prints are not isolated.

use neuron_tune_protocol::{Request, Response};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};

/// At most this much captured output per response: the start and the end are kept.
const OUTPUT_LIMIT: usize = 4096;

/// The worker's end of the protocol.
pub struct ProtocolChannel {
    input: Box<dyn BufRead>,
    output: Box<dyn Write>,
    diagnostics: Box<dyn Write>,
    capture: Option<File>,
}

impl ProtocolChannel {
    /// Take stdin/stdout for the protocol and redirect what kernel code prints.
    #[cfg(unix)]
    pub fn open() -> std::io::Result<ProtocolChannel> {
        use std::os::fd::{AsRawFd, FromRawFd};
        // Flush what std buffered for fd 1 before fd 1 changes meaning.
        std::io::stdout().flush()?;
        let dup = |fd: i32| {
            // SAFETY: `dup` of a standard descriptor; the result is checked.
            let new = unsafe { libc::dup(fd) };
            if new < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(new)
            }
        };
        let redirect = |from: &File, to: i32| {
            // SAFETY: `dup2` onto a standard descriptor; both descriptors are open.
            if unsafe { libc::dup2(from.as_raw_fd(), to) } < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let (proto_in, proto_out, real_err) = (dup(0)?, dup(1)?, dup(2)?);
        let capture = tempfile::tempfile()?;
        redirect(&File::open("/dev/null")?, 0)?;
        redirect(&capture, 1)?;
        redirect(&capture, 2)?;
        // SAFETY: the three descriptors were just created by `dup` and are owned here alone.
        let (input, output, diagnostics) = unsafe {
            (File::from_raw_fd(proto_in), File::from_raw_fd(proto_out), File::from_raw_fd(real_err))
        };
        Ok(ProtocolChannel {
            input: Box::new(BufReader::new(input)),
            output: Box::new(std::io::BufWriter::new(output)),
            diagnostics: Box::new(diagnostics),
            capture: Some(capture),
        })
    }

    /// Plain stdin/stdout: prints are not isolated on this platform.
    #[cfg(not(unix))]
    pub fn open() -> std::io::Result<ProtocolChannel> {
        Ok(ProtocolChannel {
            input: Box::new(BufReader::new(std::io::stdin())),
            output: Box::new(std::io::stdout()),
            diagnostics: Box::new(std::io::stderr()),
            capture: None,
        })
    }

    /// The next request (`None` at end of input, `Err` for a line that is not one).
    pub fn read_request(&mut self) -> Option<Result<Request, String>> {
        loop {
            let mut line = String::new();
            match self.input.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) if line.trim().is_empty() => continue,
                Ok(_) => return Some(serde_json::from_str(&line).map_err(|e| e.to_string())),
            }
        }
    }

    pub fn write_response(&mut self, r: &Response) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.output, r)?;
        self.output.write_all(b"\n")?;
        self.output.flush()
    }

    /// A line for whoever reads the worker's stderr (the tool shows it).
    pub fn diagnostic(&mut self, line: &str) {
        let _ = writeln!(self.diagnostics, "{line}");
    }

    /// Run `answer` and attach what it printed to its response.
    pub fn capturing(&mut self, answer: impl FnOnce() -> Response) -> Response {
        let Some(capture) = &self.capture else { return answer() };
        let _ = capture.set_len(0);
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            // fds 1 and 2 share the capture file's offset: rewind it for all three.
            // SAFETY: seeking an open descriptor owned by this struct.
            unsafe { libc::lseek(capture.as_raw_fd(), 0, libc::SEEK_SET) };
        }
        let mut response = answer();
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        response.output = without_proptest_notices(read_trimmed(capture));
        response
    }
}

/// `output` without the lines proptest itself prints during a check ("proptest: Aborting
/// shrinking after …", "proptest: failed to open …"): they are about the check's own
/// settings, not what the kernel printed, which is what `output` reports.
fn without_proptest_notices(text: String) -> String {
    if !text.contains("proptest: ") {
        return text;
    }
    text.split_inclusive('\n').filter(|line| !line.starts_with("proptest: ")).collect()
}

/// The capture file's contents, at most [`OUTPUT_LIMIT`] bytes: the first and the last
/// half of that, cut at character boundaries, with the count of bytes between them. Only
/// those two ends are read, so a kernel that printed gigabytes costs two small reads.
fn read_trimmed(mut capture: impl std::io::Read + std::io::Seek) -> String {
    use std::io::{Read, SeekFrom};
    let len = capture.seek(SeekFrom::End(0)).unwrap_or(0);
    let mut read_at = |at: u64, n: u64| {
        let mut bytes = Vec::new();
        if capture.seek(SeekFrom::Start(at)).is_ok() {
            let _ = (&mut capture).take(n).read_to_end(&mut bytes);
        }
        bytes
    };
    if len <= OUTPUT_LIMIT as u64 {
        return String::from_utf8_lossy(&read_at(0, len)).into_owned();
    }
    let half = (OUTPUT_LIMIT / 2) as u64;
    let is_continuation = |b: &u8| b & 0xC0 == 0x80;
    // The head ends before the character the limit cuts; the tail starts after it.
    let mut head = read_at(0, half + 1);
    let head_end = (0..=half as usize).rev().find(|&i| !head.get(i).is_some_and(is_continuation));
    head.truncate(head_end.unwrap_or(0));
    let tail = read_at(len - half, half);
    let tail = &tail[tail.iter().take_while(|b| is_continuation(b)).count()..];
    format!(
        "{}\n… ({} bytes not shown) …\n{}",
        String::from_utf8_lossy(&head),
        len - head.len() as u64 - tail.len() as u64,
        String::from_utf8_lossy(tail)
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn proptests_own_notices_are_not_the_kernels_output() {
        let captured = "row 3\nproptest: Aborting shrinking after 64 iterations\nproptest: x\nlast";
        assert_eq!(super::without_proptest_notices(captured.into()), "row 3\nlast");
        assert_eq!(super::without_proptest_notices("a\nb\n".into()), "a\nb\n");
    }

    fn trimmed(text: &[u8]) -> String {
        super::read_trimmed(std::io::Cursor::new(text.to_vec()))
    }

    #[test]
    fn output_past_the_limit_keeps_its_first_and_last_halves() {
        let half = super::OUTPUT_LIMIT / 2;
        // At the limit: everything.
        let exact = "x".repeat(super::OUTPUT_LIMIT);
        assert_eq!(trimmed(exact.as_bytes()), exact);
        // 5000 `a` then 5000 `b`: the first 2048 `a`, the last 2048 `b`, and the 10000 − 4096
        // bytes between said. Far past the 1 MiB the old reader stopped at, the tail is still
        // the file's end.
        for (a, b) in [(5000, 5000), (3 << 20, 5000)] {
            let text = format!("{}{}", "a".repeat(a), "b".repeat(b));
            let shown = trimmed(text.as_bytes());
            let not_shown = a + b - 2 * half;
            let want = format!(
                "{}\n… ({not_shown} bytes not shown) …\n{}",
                "a".repeat(half),
                "b".repeat(half)
            );
            assert_eq!(shown, want, "{a} + {b} bytes");
        }
    }

    #[test]
    fn a_character_across_a_cut_is_left_out_whole() {
        let half = super::OUTPUT_LIMIT / 2;
        // `é` is 2 bytes. At bytes half − 1 and half it straddles the head's cut, so the head
        // is the half − 1 `a` before it; mirrored, the tail starts after the one straddling
        // the tail's cut.
        let text =
            format!("{}é{}é{}", "a".repeat(half - 1), "m".repeat(3000), "b".repeat(half - 1));
        let shown = trimmed(text.as_bytes());
        let (head, rest) = shown.split_once('\n').unwrap();
        assert_eq!(head, "a".repeat(half - 1));
        assert!(rest.ends_with(&format!("\n{}", "b".repeat(half - 1))), "{rest}");
        let not_shown = text.len() - 2 * (half - 1);
        assert!(rest.starts_with(&format!("… ({not_shown} bytes not shown) …")), "{rest}");
        assert!(!shown.contains('\u{FFFD}'), "no character is cut in two");
    }
}
