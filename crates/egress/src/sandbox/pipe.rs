//! Talking to one sandbox child: starting it, writing a job and reading its
//! answer, all within the run's wall-clock limit, whatever the child does.
//!
//! The child runs a tenant's code and may be the tenant's by now (a QuickJS
//! bug), so it is not trusted to read its job, to answer, or to answer briefly:
//! the parent's end of each pipe is non-blocking, every wait is a `poll` bounded
//! by what is left of [`WALL_LIMIT`], and at most `cap` bytes of answer are read.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Answer, READY, SUBCOMMAND, WALL_LIMIT};

/// Longest a child may take to start and confine itself.
const START_LIMIT: Duration = Duration::from_secs(5);
use crate::transform::TransformError;

/// How an exchange ended without an answer.
pub(super) enum Ended {
    /// Past the wall limit: the child is killed (dropped).
    Killed,
    /// It could not be asked, or it died or said nothing usable.
    Failed(TransformError),
}

/// A child and the parent's ends of its pipes; killed and reaped when dropped.
pub(super) struct Sandboxed {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    /// Jobs it has answered.
    pub(super) jobs: u32,
}

impl Drop for Sandboxed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sandboxed {
    /// Starts a child with no environment, and waits until it says it is
    /// confined and ready (at most [`START_LIMIT`]).
    pub(super) fn start(exe: Option<&PathBuf>) -> Result<Sandboxed, TransformError> {
        let exe = exe.ok_or_else(|| TransformError::Engine("the executable cannot be found".into()))?;
        let mut child = Command::new(exe)
            .arg(SUBCOMMAND)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| TransformError::Engine(format!("the sandbox could not start: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TransformError::Engine("the sandbox has no pipes".into()));
        };
        let mut sb = Sandboxed { child, stdin, stdout, jobs: 0 };
        for fd in [sb.stdin.as_raw_fd(), sb.stdout.as_raw_fd()] {
            nonblocking(fd).map_err(|e| TransformError::Engine(format!("the sandbox's pipes: {e}")))?;
        }
        let not_ready = |why: &str| TransformError::Engine(format!("the sandbox did not start: {why}"));
        let said = sb.line(READY.len() + 1, Instant::now(), START_LIMIT).map_err(|e| match e {
            Ended::Killed => not_ready("it was not ready in time"),
            Ended::Failed(_) => not_ready("it could not confine itself"),
        })?;
        if said != READY.as_bytes() {
            return Err(not_ready("it said something else"));
        }
        Ok(sb)
    }

    /// Writes the whole job, by the wall limit counted from `started`.
    pub(super) fn send(&mut self, mut line: &[u8], started: Instant) -> Result<(), Ended> {
        while !line.is_empty() {
            match self.stdin.write(line) {
                Ok(0) => return Err(Ended::Failed(TransformError::Died)),
                Ok(n) => line = &line[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let left = WALL_LIMIT.checked_sub(started.elapsed()).ok_or(Ended::Killed)?;
                    if !ready(self.stdin.as_raw_fd(), libc::POLLOUT, left) {
                        return Err(Ended::Killed);
                    }
                }
                // Its end is closed: it died (while idle, say).
                Err(_) => return Err(Ended::Failed(TransformError::Died)),
            }
        }
        Ok(())
    }

    /// Reads one answer line of at most `cap` bytes, by the wall limit.
    pub(super) fn answer(&mut self, cap: usize, started: Instant) -> Result<Answer, Ended> {
        let buf = self.line(cap, started, WALL_LIMIT)?;
        self.jobs += 1;
        serde_json::from_slice::<Answer>(&buf)
            .map_err(|e| Ended::Failed(TransformError::Result(format!("the sandbox's answer: {e}"))))
    }

    /// One line (its newline included) of at most `cap` bytes, by `limit` from `started`.
    fn line(&mut self, cap: usize, started: Instant, limit: Duration) -> Result<Vec<u8>, Ended> {
        let mut buf = Vec::new();
        loop {
            let left = limit.checked_sub(started.elapsed()).ok_or(Ended::Killed)?;
            if !ready(self.stdout.as_raw_fd(), libc::POLLIN, left) {
                return Err(Ended::Killed);
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = match self.stdout.read(&mut chunk) {
                Ok(0) => return Err(Ended::Failed(TransformError::Died)),
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => continue,
                Err(e) => return Err(Ended::Failed(TransformError::Engine(format!("the sandbox: {e}")))),
            };
            buf.extend_from_slice(&chunk[..n]);
            if buf.last() == Some(&b'\n') {
                break;
            }
            if buf.len() > cap {
                return Err(Ended::Failed(TransformError::Result("the output is larger than a body may be".into())));
            }
        }
        Ok(buf)
    }
}

fn nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns, with integer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `fd` is ready for `events` (or has closed) within `wait`; a signal
/// interrupting the wait does not end it.
fn ready(fd: RawFd, events: i16, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd { fd, events, revents: 0 };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: poll reads and writes the one pollfd it is given.
        let got = unsafe { libc::poll(&mut pfd, 1, ms) };
        let interrupted = got < 0 && std::io::Error::last_os_error().kind() == ErrorKind::Interrupted;
        if !interrupted || left.is_zero() {
            return got > 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "child" that never reads its job nor answers: what a child taken over
    /// by the tenant's code could be.
    fn deaf() -> Sandboxed {
        let mut child = Command::new("sleep").arg("5").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        for fd in [stdin.as_raw_fd(), stdout.as_raw_fd()] {
            nonblocking(fd).unwrap();
        }
        Sandboxed { child, stdin, stdout, jobs: 0 }
    }

    #[test]
    fn a_child_that_will_not_read_its_job_is_given_up_at_the_wall_limit() {
        // A job larger than the pipe holds: a blocking write waited until the
        // child went (5 s here, forever for one that never does).
        let started = Instant::now();
        let line = vec![b'x'; 1 << 20];
        assert!(matches!(deaf().send(&line, started), Err(Ended::Killed)));
        assert!(started.elapsed() < WALL_LIMIT + Duration::from_millis(500), "{:?}", started.elapsed());
    }

    #[test]
    fn a_child_that_never_answers_is_given_up_at_the_wall_limit() {
        let started = Instant::now();
        let mut sb = deaf();
        sb.send(b"{}\n", started).ok().expect("a short job fits in the pipe");
        assert!(matches!(sb.answer(1 << 20, started), Err(Ended::Killed)));
        assert!(started.elapsed() < WALL_LIMIT + Duration::from_millis(500), "{:?}", started.elapsed());
    }
}
