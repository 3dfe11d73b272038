//! Transformations run in child processes of their own (`hookgate
//! transform-sandbox`), so that a run can always be stopped.
//!
//! QuickJS checks its deadline between bytecode steps, not inside one native
//! call: `Array.prototype.join` on an object claiming a length of 2^53 loops in C
//! and never looks. A thread cannot be stopped from outside, a process can: a run
//! past [`WALL_LIMIT`] is answered as too long and its child killed (a fresh one
//! is started for the next). Each child has no environment (no master key, no
//! database URL), a capped address space, and reads one job per line on stdin,
//! answering one line on stdout. The parent reads at most a body's worth of
//! answer, so a handler's output cannot take the parent's memory either.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

use crate::transform::{self, Outcome, TransformError, Webhook, MOST_AT_ONCE};

/// The hidden subcommand a child runs.
pub const SUBCOMMAND: &str = "transform-sandbox";
/// Longest a run may take on the clock before its child is killed: the run's own
/// CPU deadline is 100 ms; the rest is slack for a busy machine's scheduling.
pub const WALL_LIMIT: Duration = Duration::from_secs(1);
/// Address space of a child: its heap is QuickJS's 16 MiB and a run's input and
/// output; the rest is the binary mapped in.
const ADDRESS_SPACE: u64 = 2 << 30;

#[derive(Serialize, Deserialize)]
struct Job {
    code: String,
    variables: Value,
    /// `None`: only check that the code runs and defines `handler`.
    webhook: Option<Webhook>,
    max_body: usize,
}

type Answer = Result<Option<Outcome>, TransformError>;

/// A child waiting for its next job.
struct Sandboxed {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The process's sandboxes: at most [`MOST_AT_ONCE`] runs at a time, children
/// kept between runs.
pub struct Sandbox {
    exe: Option<PathBuf>,
    slots: Semaphore,
    idle: Mutex<Vec<Sandboxed>>,
}

impl Sandbox {
    /// The process's one pool, shared by its worker and its API.
    pub fn shared() -> &'static Sandbox {
        static SHARED: OnceLock<Sandbox> = OnceLock::new();
        SHARED.get_or_init(|| Sandbox {
            exe: std::env::current_exe().ok(),
            slots: Semaphore::new(MOST_AT_ONCE),
            idle: Mutex::new(Vec::new()),
        })
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
        match self.ask(&job).await? {
            Some(outcome) => Ok(outcome),
            None => Err(TransformError::Engine("the sandbox answered a run as a check".into())),
        }
    }

    /// Whether `code` runs and defines `handler` (what saving checks).
    pub async fn check(&self, code: &str) -> Result<(), TransformError> {
        let job = Job { code: code.to_owned(), variables: Value::Null, webhook: None, max_body: 0 };
        self.ask(&job).await.map(|_| ())
    }

    async fn ask(&self, job: &Job) -> Answer {
        let _slot = self.slots.acquire().await.map_err(|e| TransformError::Engine(e.to_string()))?;
        let taken = self.idle.lock().expect("sandbox pool").pop();
        let mut sb = match taken {
            Some(sb) => sb,
            None => self.spawn()?,
        };
        let mut line = serde_json::to_vec(job).map_err(|e| TransformError::Engine(e.to_string()))?;
        line.push(b'\n');
        // Twice a body (JSON escapes) and room for the rest of the answer.
        let cap = (job.max_body as u64) * 2 + 64 * 1024;
        let exchange = async {
            sb.stdin.write_all(&line).await?;
            sb.stdin.flush().await?;
            let mut buf = Vec::new();
            (&mut sb.stdout).take(cap).read_until(b'\n', &mut buf).await?;
            Ok::<_, std::io::Error>(buf)
        };
        match tokio::time::timeout(WALL_LIMIT, exchange).await {
            // Past the limit: the child is dropped, and so killed (`kill_on_drop`).
            Err(_) => Err(TransformError::TooLong),
            Ok(Err(e)) => Err(TransformError::Engine(format!("the sandbox failed: {e}"))),
            // It died mid-run: an allocation the address space refused aborts it.
            Ok(Ok(buf)) if buf.is_empty() => Err(TransformError::TooBig),
            Ok(Ok(buf)) if buf.last() != Some(&b'\n') => {
                Err(TransformError::Result("the output is larger than a body may be".into()))
            }
            Ok(Ok(buf)) => {
                let answer = serde_json::from_slice::<Answer>(&buf)
                    .map_err(|e| TransformError::Engine(format!("the sandbox's answer: {e}")))?;
                self.idle.lock().expect("sandbox pool").push(sb);
                answer
            }
        }
    }

    fn spawn(&self) -> Result<Sandboxed, TransformError> {
        let exe = self.exe.as_ref().ok_or_else(|| TransformError::Engine("the executable cannot be found".into()))?;
        let mut child = Command::new(exe)
            .arg(SUBCOMMAND)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| TransformError::Engine(format!("the sandbox could not start: {e}")))?;
        let stdin = child.stdin.take().ok_or_else(|| TransformError::Engine("no stdin".into()))?;
        let stdout = child.stdout.take().ok_or_else(|| TransformError::Engine("no stdout".into()))?;
        Ok(Sandboxed { _child: child, stdin, stdout: BufReader::new(stdout) })
    }
}

/// The child's side: caps its address space, then answers jobs until stdin ends.
pub fn serve() -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: ADDRESS_SPACE, rlim_max: ADDRESS_SPACE };
    // SAFETY: setrlimit reads the struct it is given and nothing else.
    if unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        let answer: Answer = match serde_json::from_str::<Job>(&line) {
            Err(e) => Err(TransformError::Engine(format!("a job the sandbox cannot read: {e}"))),
            Ok(Job { code, webhook: None, .. }) => transform::check(&code).map(|()| None),
            Ok(Job { code, variables, webhook: Some(w), max_body }) => {
                transform::run_now(&code, &variables, w, max_body).map(Some)
            }
        };
        let mut out = serde_json::to_vec(&answer).unwrap_or_else(|_| b"{\"Err\":{\"Engine\":\"unwritable\"}}".to_vec());
        out.push(b'\n');
        stdout.write_all(&out)?;
        stdout.flush()?;
    }
    Ok(())
}
