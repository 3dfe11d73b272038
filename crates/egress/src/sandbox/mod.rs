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
//! A child serves one [`Scope`] only: one application of one tenant, and apart
//! for a caller who sees its variables redacted. It is kept between runs of
//! that scope and never given another's, so what one run leaves in its memory
//! (a variable, a payload) is within reach only of code of the same scope: not
//! of another tenant, nor of a tenant's customer writing code in the portal of
//! another application. The parent trusts nothing a child says: it starts the
//! run's clock only once the child says it is confined and ready, writes the
//! job and reads the answer within the wall limit, and checks the answer again
//! as a handler's result is ([`pipe`]).
//!
//! The worker and the API have pools of their own, so a tenant trying code in
//! the portal cannot hold up deliveries. Within a pool each tenant has a share
//! ([`shares`]): its runs wait behind its own, and an endpoint (or, in the API,
//! a tenant) whose runs are killed at the wall limit again and again rests. A
//! run waits for a place at most [`MOST_WAIT`], then is answered busy (a
//! delivery is then due again, not failed).

mod child;
mod pipe;
mod shares;

pub use child::{confine, probe, protect_parent, serve, Namespaces};

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Semaphore;

use hookgate_shared::ids::{AppId, EndpointId, TenantId};

use crate::transform::{Outcome, TransformError, Webhook};
use pipe::{Ended, Sandboxed};
use shares::{Shares, Strikes};

/// The hidden subcommand a child runs.
pub const SUBCOMMAND: &str = "transform-sandbox";
/// What a child writes once it is confined, before its first job.
const READY: &str = "\"ready\"\n";
/// Longest a run may take on the clock before its child is killed: the run's own
/// CPU deadline is 100 ms; the rest is slack for a busy machine.
pub const WALL_LIMIT: Duration = Duration::from_secs(1);
/// Longest a run waits for a free sandbox.
pub const MOST_WAIT: Duration = Duration::from_secs(2);
/// Address space of a child: about 30 MB at start, QuickJS's 16 MiB heap, and a
/// run's input and output (each bounded by the body size).
const ADDRESS_SPACE: u64 = 512 << 20;
/// Jobs a child answers before it is retired for a fresh one: within its
/// lifetime's CPU ([`child::CPU_SECS`]) even if every job took the whole wall
/// limit, and a bound on how long anything a run left behind in it lasts.
const MOST_JOBS: u32 = 500;
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

/// Whom a run is for: what its child may be shared with, whose share of the pool
/// it takes, and what a kill at the wall limit counts against.
pub struct Scope<'a> {
    pub tenant: &'a TenantId,
    pub app: &'a AppId,
    /// Its kills count against the endpoint (deliveries, tries and checks alike).
    pub endpoint: &'a EndpointId,
    /// The caller sees the endpoint's variables as `[redacted]` (a portal link,
    /// an integration key): its runs get children of their own.
    pub redacted: bool,
}

impl Scope<'_> {
    /// Children are kept and reused by this.
    fn lane(&self) -> String {
        format!("{}/{}/{}", self.tenant, self.app, if self.redacted { "redacted" } else { "full" })
    }
}

/// A pool of sandboxes: at most `slots` runs at a time, children kept between
/// runs of the scope each serves.
pub struct Sandbox {
    exe: Option<PathBuf>,
    slots: Arc<Semaphore>,
    most: usize,
    idle: Arc<Mutex<Vec<(String, Sandboxed)>>>,
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

    /// Runs `code`'s handler on `webhook` for `scope`.
    pub async fn run(
        &self,
        scope: &Scope<'_>,
        code: Arc<str>,
        variables: Arc<Value>,
        webhook: Webhook,
        max_body: usize,
    ) -> Result<Outcome, TransformError> {
        let event_type = webhook.event_type.clone();
        let job = Job { code: code.to_string(), variables: (*variables).clone(), webhook: Some(webhook), max_body };
        match self.ask(scope, job).await? {
            Some(outcome) => crate::transform::trusted(outcome, &event_type, max_body),
            None => Err(TransformError::Result("the sandbox answered a run as a check".into())),
        }
    }

    /// Whether `code` runs and defines `handler` (what saving checks).
    pub async fn check(&self, scope: &Scope<'_>, code: &str) -> Result<(), TransformError> {
        let job = Job { code: code.to_owned(), variables: Value::Null, webhook: None, max_body: 0 };
        match self.ask(scope, job).await? {
            None => Ok(()),
            Some(_) => Err(TransformError::Result("the sandbox answered a check as a run".into())),
        }
    }

    async fn ask(&self, scope: &Scope<'_>, job: Job) -> Answer {
        let tenant = scope.tenant.as_str().to_owned();
        let counted = scope.endpoint.to_string();
        let lane = scope.lane();
        if let Some(rest) = self.strikes.resting(&tenant, &counted) {
            return Err(TransformError::Resting(rest.as_secs().max(1)));
        }
        let waited = std::time::Instant::now();
        let Some(place) = self.shares.enter(&tenant, MOST_WAIT).await else { return Err(TransformError::Busy) };
        let left = MOST_WAIT.saturating_sub(waited.elapsed());
        let slot = tokio::time::timeout(left, self.slots.clone().acquire_owned()).await;
        let Ok(Ok(slot)) = slot else { return Err(TransformError::Busy) };
        let mut line = serde_json::to_vec(&job).map_err(|e| TransformError::Engine(e.to_string()))?;
        line.push(b'\n');
        // A body in base64 inside JSON, and room for the rest of the answer.
        let cap = job.max_body * 2 + 64 * 1024;
        let (exe, idle, most, strikes) = (self.exe.clone(), self.idle.clone(), self.most, self.strikes.clone());
        // Blocking I/O on a thread of the blocking pool: no runtime's reactor owns
        // the pipes, so any runtime of the process may use the pool. Dropped
        // before it ends, the exchange still ends within the wall limit, and
        // holds its slot and its tenant's place until then.
        tokio::task::spawn_blocking(move || {
            let answer = exchange(exe, &idle, most, &lane, &line, cap);
            if let Err(Ended::Killed) = answer {
                strikes.killed(&tenant, &counted);
            }
            drop((slot, place));
            answer.map_err(|e| match e {
                Ended::Killed => TransformError::TooLong,
                Ended::Failed(e) => e,
            })?
        })
        .await
        .map_err(|e| TransformError::Engine(e.to_string()))?
        // What a child says went wrong is quoted in the attempt log: held to
        // what the child itself would have let through (500 bytes, no NUL).
        .map_err(TransformError::cut)
    }
}

/// One job with the lane's pooled child or a fresh one; the child goes back to
/// the pool, as the lane's, only after a whole answer. The run's clock starts
/// once its child is ready: a slow start is not the code's doing.
fn exchange(
    exe: Option<PathBuf>,
    idle: &Mutex<Vec<(String, Sandboxed)>>,
    most: usize,
    lane: &str,
    line: &[u8],
    cap: usize,
) -> Result<Answer, Ended> {
    let pooled = {
        let mut idle = idle.lock().expect("sandbox pool");
        let found = idle.iter().rposition(|(l, _)| l == lane);
        found.map(|i| idle.remove(i).1)
    };
    let sent = pooled.map(|mut sb| {
        let started = std::time::Instant::now();
        sb.send(line, started).map(|()| (sb, started))
    });
    let (sb, started) = match sent {
        Some(Ok(sent)) => sent,
        Some(Err(Ended::Killed)) => return Err(Ended::Killed),
        // None pooled, or it died while idle: a fresh one takes the job.
        Some(Err(Ended::Failed(_))) | None => {
            let mut sb = Sandboxed::start(exe.as_ref()).map_err(Ended::Failed)?;
            let started = std::time::Instant::now();
            sb.send(line, started)?;
            (sb, started)
        }
    };
    let mut sb = sb;
    let answer = sb.answer(cap, started)?;
    if sb.jobs >= MOST_JOBS {
        return Ok(answer);
    }
    // Back to the pool as the lane's; the oldest other child goes if it is full.
    let gone = {
        let mut idle = idle.lock().expect("sandbox pool");
        idle.push((lane.to_owned(), sb));
        (idle.len() > most).then(|| idle.remove(0))
    };
    drop(gone);
    Ok(answer)
}
