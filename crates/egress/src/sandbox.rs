//! Transformations run in child processes of their own (`hookgate
//! transform-sandbox`), so that a run can always be stopped.
//!
//! QuickJS checks its deadline between bytecode steps, not inside one native
//! call: `Array.prototype.join` on an object claiming a length of 2^53 loops in C
//! and never looks. A thread cannot be stopped from outside, a process can: a run
//! past [`WALL_LIMIT`] is answered as too long and its child killed (a fresh one
//! is started for the next). Each child has no environment (no master key, no
//! database URL), a capped address space, an alarm per job, and reads one
//! job per line on stdin, answering one line on stdout. The parent reads at most
//! a body's worth of answer, so a handler's output cannot take its memory either.
//!
//! The worker and the API have pools of their own, so a tenant trying code in
//! the portal cannot hold up deliveries; a run waits for a slot at most
//! [`MOST_WAIT`], then is answered busy (a delivery is then due again, not failed).

use std::io::{BufRead, Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::transform::{self, Outcome, TransformError, Webhook};

/// The hidden subcommand a child runs.
pub const SUBCOMMAND: &str = "transform-sandbox";
/// Longest a run may take on the clock before its child is killed: the run's own
/// CPU deadline is 100 ms; the rest is slack for a busy machine.
pub const WALL_LIMIT: Duration = Duration::from_secs(1);
/// Longest a run waits for a free sandbox.
pub const MOST_WAIT: Duration = Duration::from_secs(2);
/// Address space of a child: about 30 MB at start, QuickJS's 16 MiB heap, and a
/// run's input and output (each bounded by the body size).
const ADDRESS_SPACE: u64 = 512 << 20;
/// A child that outlives a job by this much on the clock ends itself.
const ALARM_SECS: u32 = 3;

#[derive(Serialize, Deserialize)]
struct Job {
    code: String,
    variables: Value,
    /// `None`: only check that the code runs and defines `handler`.
    webhook: Option<Webhook>,
    max_body: usize,
}

type Answer = Result<Option<Outcome>, TransformError>;

/// A child waiting for its next job; killed and reaped when dropped.
struct Sandboxed {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

impl Drop for Sandboxed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A pool of sandboxes: at most `slots` runs at a time, children kept between runs.
pub struct Sandbox {
    exe: Option<PathBuf>,
    slots: Arc<Semaphore>,
    most: usize,
    idle: Arc<Mutex<Vec<Sandboxed>>>,
}

impl Sandbox {
    fn new(slots: usize) -> Self {
        Sandbox {
            exe: std::env::current_exe().ok(),
            slots: Arc::new(Semaphore::new(slots)),
            most: slots,
            idle: Default::default(),
        }
    }

    /// The delivery worker's pool: two runs at once.
    pub fn for_worker() -> &'static Sandbox {
        static POOL: OnceLock<Sandbox> = OnceLock::new();
        POOL.get_or_init(|| Sandbox::new(2))
    }

    /// The API's pool (saving checks, the portal's tries): one run at once.
    pub fn for_api() -> &'static Sandbox {
        static POOL: OnceLock<Sandbox> = OnceLock::new();
        POOL.get_or_init(|| Sandbox::new(1))
    }

    /// Runs `code`'s handler on `webhook`.
    pub async fn run(
        &self,
        code: Arc<str>,
        variables: Arc<Value>,
        webhook: Webhook,
        max_body: usize,
    ) -> Result<Outcome, TransformError> {
        let job = Job { code: code.to_string(), variables: (*variables).clone(), webhook: Some(webhook), max_body };
        match self.ask(job).await? {
            Some(outcome) => Ok(outcome),
            None => Err(TransformError::Engine("the sandbox answered a run as a check".into())),
        }
    }

    /// Whether `code` runs and defines `handler` (what saving checks).
    pub async fn check(&self, code: &str) -> Result<(), TransformError> {
        let job = Job { code: code.to_owned(), variables: Value::Null, webhook: None, max_body: 0 };
        self.ask(job).await.map(|_| ())
    }

    async fn ask(&self, job: Job) -> Answer {
        let slot = tokio::time::timeout(MOST_WAIT, self.slots.clone().acquire_owned()).await;
        let Ok(Ok(slot)) = slot else { return Err(TransformError::Busy) };
        let mut line = serde_json::to_vec(&job).map_err(|e| TransformError::Engine(e.to_string()))?;
        line.push(b'\n');
        // A body in base64 inside JSON, and room for the rest of the answer.
        let cap = job.max_body * 2 + 64 * 1024;
        let (exe, idle, most) = (self.exe.clone(), self.idle.clone(), self.most);
        // Blocking I/O on a thread of the blocking pool: no runtime's reactor owns
        // the pipes, so any runtime of the process may use the pool. Dropped
        // before it ends, the exchange still ends within the wall limit, and
        // holds its slot until then.
        tokio::task::spawn_blocking(move || {
            let answer = exchange(exe, &idle, most, &line, cap);
            drop(slot);
            answer
        })
        .await
        .map_err(|e| TransformError::Engine(e.to_string()))?
    }
}

/// One job with a pooled child or a fresh one; the child goes back to the pool
/// only after a whole answer.
fn exchange(exe: Option<PathBuf>, idle: &Mutex<Vec<Sandboxed>>, most: usize, line: &[u8], cap: usize) -> Answer {
    let pooled = idle.lock().expect("sandbox pool").pop();
    let mut sb = match pooled {
        Some(mut sb) => match sb.stdin.write_all(line).and_then(|()| sb.stdin.flush()) {
            Ok(()) => sb,
            // It died while idle: a fresh one takes the job.
            Err(_) => start(exe.as_ref(), line)?,
        },
        None => start(exe.as_ref(), line)?,
    };
    let started = Instant::now();
    let mut buf = Vec::new();
    loop {
        let Some(left) = WALL_LIMIT.checked_sub(started.elapsed()) else { return Err(TransformError::TooLong) };
        if !readable(&sb.stdout, left) {
            // Past the limit: `sb` is dropped, so killed and reaped.
            return Err(TransformError::TooLong);
        }
        let mut chunk = [0u8; 64 * 1024];
        let n = sb.stdout.read(&mut chunk).map_err(|e| TransformError::Engine(format!("the sandbox: {e}")))?;
        if n == 0 {
            return Err(TransformError::Died);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.last() == Some(&b'\n') {
            break;
        }
        if buf.len() > cap {
            return Err(TransformError::Result("the output is larger than a body may be".into()));
        }
    }
    let answer = serde_json::from_slice::<Answer>(&buf)
        .map_err(|e| TransformError::Engine(format!("the sandbox's answer: {e}")))?;
    let mut idle = idle.lock().expect("sandbox pool");
    if idle.len() < most {
        idle.push(sb);
    }
    answer
}

/// Starts a child and gives it `line`.
fn start(exe: Option<&PathBuf>, line: &[u8]) -> Result<Sandboxed, TransformError> {
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
    let mut sb = Sandboxed { child, stdin, stdout };
    sb.stdin.write_all(line).and_then(|()| sb.stdin.flush()).map_err(|_| TransformError::Died)?;
    Ok(sb)
}

/// Whether `out` has something to read (or has closed) within `wait`; a signal
/// interrupting the wait does not end it.
fn readable(out: &ChildStdout, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let mut fd = libc::pollfd { fd: out.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: poll reads and writes the one pollfd it is given.
        let ready = unsafe { libc::poll(&mut fd, 1, ms) };
        let interrupted = ready < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
        if !interrupted || left.is_zero() {
            return ready > 0;
        }
    }
}

/// The child's side: caps its address space, then answers jobs until stdin ends
/// (its parent gone, the pipe closes), each under an alarm that ends a run the
/// parent has given up on or can no longer stop. (Not `PR_SET_PDEATHSIG`: it
/// follows the thread that started the child, and the blocking pool's threads
/// come and go while their children are pooled.)
pub fn serve() -> std::io::Result<()> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read or write the struct they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_AS, &mut limit) == 0 {
            let cap = ADDRESS_SPACE.min(limit.rlim_max);
            let limit = libc::rlimit { rlim_cur: cap, rlim_max: limit.rlim_max };
            libc::setrlimit(libc::RLIMIT_AS, &limit);
        }
    }
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        // SAFETY: alarm takes a number of seconds; SIGALRM's default ends the process.
        unsafe { libc::alarm(ALARM_SECS) };
        let answer: Answer = match serde_json::from_str::<Job>(&line) {
            Err(e) => Err(TransformError::Engine(format!("a job the sandbox cannot read: {e}"))),
            Ok(Job { code, webhook: None, .. }) => transform::check(&code).map(|()| None),
            Ok(Job { code, variables, webhook: Some(w), max_body }) => {
                transform::run_now(&code, &variables, w, max_body).map(Some)
            }
        };
        // SAFETY: as above; 0 cancels the alarm.
        unsafe { libc::alarm(0) };
        let mut out = serde_json::to_vec(&answer).unwrap_or_else(|_| b"{\"Err\":{\"Engine\":\"unwritable\"}}".to_vec());
        out.push(b'\n');
        stdout.write_all(&out)?;
        stdout.flush()?;
    }
    Ok(())
}
