//! Transformations run in child processes of their own (`hookgate
//! transform-sandbox`), so that a run can always be stopped.
//!
//! QuickJS checks its deadline between bytecode steps, not inside one native
//! call: `Array.prototype.join` on an object claiming a length of 2^53 loops in C
//! and never looks. A thread cannot be stopped from outside, a process can: a run
//! past [`WALL_LIMIT`] is answered as too long and its child killed (a fresh one
//! is started for the next). Each child confines itself before its first job
//! ([`child`]: no descriptors but its pipes, no environment, no network, no
//! system calls but a run's), has an alarm per job, and reads one job per line
//! on stdin, answering one line on stdout. The parent reads at most a body's
//! worth of answer, so a handler's output cannot take its memory either.
//!
//! The worker and the API have pools of their own, so a tenant trying code in
//! the portal cannot hold up deliveries. Within a pool each tenant has a share
//! ([`shares`]): its runs wait behind its own, and code killed at the wall
//! limit again and again rests. A run waits for a place at most [`MOST_WAIT`],
//! then is answered busy (a delivery is then due again, not failed).

mod child;
mod shares;

pub use child::{confine, probe, protect_parent, serve, Namespaces};

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Semaphore;

use hookgate_shared::ids::TenantId;

use crate::transform::{Outcome, TransformError, Webhook};
use shares::{Shares, Strikes};

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
pub(crate) struct Job {
    code: String,
    variables: Value,
    /// `None`: only check that the code runs and defines `handler`.
    webhook: Option<Webhook>,
    max_body: usize,
}

pub(crate) type Answer = Result<Option<Outcome>, TransformError>;

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
    shares: Arc<Shares>,
    strikes: Arc<Strikes>,
}

impl Sandbox {
    /// A pool of `slots` runs at once, at most `each` of them one tenant's.
    fn new(slots: usize, each: usize) -> Self {
        Sandbox {
            exe: std::env::current_exe().ok(),
            slots: Arc::new(Semaphore::new(slots)),
            most: slots,
            idle: Default::default(),
            shares: Shares::new(each),
            strikes: Default::default(),
        }
    }

    /// The delivery worker's pool: three runs at once, two of them one tenant's
    /// at most, so another tenant always finds a sandbox.
    pub fn for_worker() -> &'static Sandbox {
        static POOL: OnceLock<Sandbox> = OnceLock::new();
        POOL.get_or_init(|| Sandbox::new(3, 2))
    }

    /// The API's pool (saving checks, the portal's tries): two runs at once, one
    /// a tenant.
    pub fn for_api() -> &'static Sandbox {
        static POOL: OnceLock<Sandbox> = OnceLock::new();
        POOL.get_or_init(|| Sandbox::new(2, 1))
    }

    /// Runs `tenant`'s `code`'s handler on `webhook`.
    pub async fn run(
        &self,
        tenant: &TenantId,
        code: Arc<str>,
        variables: Arc<Value>,
        webhook: Webhook,
        max_body: usize,
    ) -> Result<Outcome, TransformError> {
        let job = Job { code: code.to_string(), variables: (*variables).clone(), webhook: Some(webhook), max_body };
        match self.ask(tenant, job).await? {
            Some(outcome) => Ok(outcome),
            None => Err(TransformError::Engine("the sandbox answered a run as a check".into())),
        }
    }

    /// Whether `tenant`'s `code` runs and defines `handler` (what saving checks).
    pub async fn check(&self, tenant: &TenantId, code: &str) -> Result<(), TransformError> {
        let job = Job { code: code.to_owned(), variables: Value::Null, webhook: None, max_body: 0 };
        self.ask(tenant, job).await.map(|_| ())
    }

    async fn ask(&self, tenant: &TenantId, job: Job) -> Answer {
        let tenant = tenant.as_str();
        if let Some(rest) = self.strikes.resting(tenant, &job.code) {
            return Err(TransformError::Resting(rest.as_secs().max(1)));
        }
        let waited = std::time::Instant::now();
        let Some(place) = self.shares.enter(tenant, MOST_WAIT).await else { return Err(TransformError::Busy) };
        let left = MOST_WAIT.saturating_sub(waited.elapsed());
        let slot = tokio::time::timeout(left, self.slots.clone().acquire_owned()).await;
        let Ok(Ok(slot)) = slot else { return Err(TransformError::Busy) };
        let mut line = serde_json::to_vec(&job).map_err(|e| TransformError::Engine(e.to_string()))?;
        line.push(b'\n');
        // A body in base64 inside JSON, and room for the rest of the answer.
        let cap = job.max_body * 2 + 64 * 1024;
        let (exe, idle, most) = (self.exe.clone(), self.idle.clone(), self.most);
        let (strikes, tenant, code) = (self.strikes.clone(), tenant.to_owned(), job.code);
        // Blocking I/O on a thread of the blocking pool: no runtime's reactor owns
        // the pipes, so any runtime of the process may use the pool. Dropped
        // before it ends, the exchange still ends within the wall limit, and
        // holds its slot and its tenant's place until then.
        tokio::task::spawn_blocking(move || {
            let answer = exchange(exe, &idle, most, &line, cap);
            if let Err(Killed) = answer {
                strikes.killed(&tenant, &code);
            }
            drop((slot, place));
            answer.unwrap_or(Err(TransformError::TooLong))
        })
        .await
        .map_err(|e| TransformError::Engine(e.to_string()))?
    }
}

/// A run its child was killed for, at the wall limit.
struct Killed;

/// One job with a pooled child or a fresh one; the child goes back to the pool
/// only after a whole answer.
fn exchange(
    exe: Option<PathBuf>,
    idle: &Mutex<Vec<Sandboxed>>,
    most: usize,
    line: &[u8],
    cap: usize,
) -> Result<Answer, Killed> {
    let pooled = idle.lock().expect("sandbox pool").pop();
    let started = match pooled {
        Some(mut sb) => match sb.stdin.write_all(line).and_then(|()| sb.stdin.flush()) {
            Ok(()) => Ok(sb),
            // It died while idle: a fresh one takes the job.
            Err(_) => start(exe.as_ref(), line),
        },
        None => start(exe.as_ref(), line),
    };
    let mut sb = match started {
        Ok(sb) => sb,
        Err(e) => return Ok(Err(e)),
    };
    let started = Instant::now();
    let mut buf = Vec::new();
    loop {
        let Some(left) = WALL_LIMIT.checked_sub(started.elapsed()) else { return Err(Killed) };
        if !readable(&sb.stdout, left) {
            // Past the limit: `sb` is dropped, so killed and reaped.
            return Err(Killed);
        }
        let mut chunk = [0u8; 64 * 1024];
        let n = match sb.stdout.read(&mut chunk) {
            Ok(n) => n,
            Err(e) => return Ok(Err(TransformError::Engine(format!("the sandbox: {e}")))),
        };
        if n == 0 {
            return Ok(Err(TransformError::Died));
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.last() == Some(&b'\n') {
            break;
        }
        if buf.len() > cap {
            return Ok(Err(TransformError::Result("the output is larger than a body may be".into())));
        }
    }
    let answer = serde_json::from_slice::<Answer>(&buf)
        .map_err(|e| TransformError::Engine(format!("the sandbox's answer: {e}")))
        .and_then(|a| a);
    let mut idle = idle.lock().expect("sandbox pool");
    if idle.len() < most {
        idle.push(sb);
    }
    Ok(answer)
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
