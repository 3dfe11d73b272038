//! Endpoint transformations: a tenant's JavaScript `handler(webhook)` run on each
//! delivery before it is signed, in QuickJS with hard limits.
//!
//! Each run gets a fresh runtime (nothing carries over between deliveries, or
//! between tenants), a memory cap, a stack cap and an interrupt that ends it at
//! its CPU deadline. QuickJS itself has no I/O, no timers and no way to reach the
//! host: only the language and its standard objects (`JSON`, `Math`, `Date`, …).
//! Runs happen in child processes ([`crate::sandbox`]), a few at a time: the
//! deadline (CPU time) stops what QuickJS can interrupt, and the child is killed
//! for what it cannot (one native call looping on its own).

use std::time::Duration;

use rquickjs::{CatchResultExt, Context, Function, Runtime};
use serde_json::{json, Value};

/// Most CPU time a run may use.
pub const CPU_LIMIT: Duration = Duration::from_millis(100);
/// Most memory a run's heap may hold.
pub const MEMORY_LIMIT: usize = 16 << 20;
/// Deepest its stack may grow (QuickJS counts it apart from the heap).
const STACK_LIMIT: usize = 256 << 10;
/// Longest URL a transformation may set.
const MOST_URL: usize = 2048;

/// What a transformation sees and may change.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Webhook {
    pub event_type: String,
    pub method: Method,
    pub url: String,
    /// The body as it will be sent (base64 between Hookgate and its sandboxes).
    #[serde(with = "base64_bytes")]
    pub payload: Vec<u8>,
    /// Whether `payload` is JSON (a message's usual body); otherwise the handler
    /// sees it as a string.
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Method {
    Post,
    Put,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Post => "POST",
            Method::Put => "PUT",
        }
    }
}

/// What became of the webhook.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Outcome {
    Send(Webhook),
    /// The handler set `cancel = true`: nothing is sent.
    Cancel,
}

/// Why a run gave nothing to send. The text goes to the attempt log and the portal.
#[derive(Debug, thiserror::Error, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum TransformError {
    #[error("the transformation ran past its {}ms limit", CPU_LIMIT.as_millis())]
    TooLong,
    #[error("the transformation used more than its {} MiB of memory", MEMORY_LIMIT >> 20)]
    TooBig,
    #[error("the transformation threw: {0}")]
    Threw(String),
    #[error("the transformation's result is unusable: {0}")]
    Result(String),
    #[error("the transformation could not be run: {0}")]
    Engine(String),
    /// Its process stopped mid-run: its memory ran out, or it was killed.
    #[error("the transformation's process stopped (out of memory, or killed)")]
    Died,
    /// Every sandbox stayed busy past the wait: not the code's doing.
    #[error("the transformations' sandboxes are busy; tried again later")]
    Busy,
    /// The code was killed at the wall-clock limit again and again: it is not
    /// run again for this many seconds.
    #[error("the transformation was stopped at its time limit again and again; it is not run for another {0}s")]
    Resting(u64),
}

/// `Vec<u8>` as base64 text: a third larger, where JSON's array of numbers is
/// three to four times larger.
mod base64_bytes {
    use base64::{engine::general_purpose::STANDARD, Engine};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        STANDARD.decode(text.as_bytes()).map_err(serde::de::Error::custom)
    }
}

impl TransformError {
    /// Whether the code is to blame: its attempt fails. Otherwise (the engine
    /// could not start, every sandbox busy) nothing was tried.
    pub fn is_the_codes(&self) -> bool {
        !matches!(self, TransformError::Engine(_) | TransformError::Busy)
    }

    /// The same, its words held to 500 bytes (a value a handler returned can be
    /// quoted in them).
    pub(crate) fn cut(self) -> Self {
        match self {
            TransformError::Result(m) => TransformError::Result(shown(&m)),
            TransformError::Threw(m) => TransformError::Threw(shown(&m)),
            TransformError::Engine(m) => TransformError::Engine(shown(&m)),
            e => e,
        }
    }
}

/// CPU time this thread has used: what the deadline counts, so a run on a busy
/// machine is not cut short by time it spent waiting for a core.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the struct it is given and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// A runtime with the run's limits (memory, stack, the CPU deadline from now), a
/// context in it, and the deadline. The runtime must outlive the context.
fn limited() -> Result<(Runtime, Context, Duration), TransformError> {
    let engine = |e: rquickjs::Error| TransformError::Engine(e.to_string());
    let rt = Runtime::new().map_err(engine)?;
    rt.set_memory_limit(MEMORY_LIMIT);
    rt.set_max_stack_size(STACK_LIMIT);
    let deadline = thread_cpu() + CPU_LIMIT;
    rt.set_interrupt_handler(Some(Box::new(move || thread_cpu() >= deadline)));
    let ctx = context(&rt)?;
    Ok((rt, ctx, deadline))
}

/// One run, on this thread.
pub fn run_now(code: &str, variables: &Value, webhook: Webhook, max_body: usize) -> Result<Outcome, TransformError> {
    run_uncut(code, variables, webhook, max_body).map_err(TransformError::cut)
}

fn run_uncut(code: &str, variables: &Value, webhook: Webhook, max_body: usize) -> Result<Outcome, TransformError> {
    let (_rt, ctx, deadline) = limited()?;
    let input = input(&webhook, variables)?;
    let result = ctx.with(|ctx| -> Result<Option<String>, TransformError> {
        let fail = |e: rquickjs::CaughtError<'_>| thrown(e.to_string(), deadline);
        ctx.eval::<(), _>(code).catch(&ctx).map_err(fail)?;
        let handler: Function = ctx
            .globals()
            .get("handler")
            .map_err(|_| TransformError::Result("the code defines no function `handler(webhook)`".into()))?;
        if is_async(&handler) {
            return Err(TransformError::Result(ASYNC.into()));
        }
        let arg = ctx.json_parse(input).catch(&ctx).map_err(fail)?;
        let out: rquickjs::Value = handler.call((arg,)).catch(&ctx).map_err(fail)?;
        if out.is_promise() {
            return Err(TransformError::Result(ASYNC.into()));
        }
        if out.is_undefined() {
            return Err(TransformError::Result("`handler` returned nothing: return the webhook".into()));
        }
        let text = ctx.json_stringify(out).catch(&ctx).map_err(fail)?;
        text.map(|s| s.to_string().map_err(|e| TransformError::Result(e.to_string()))).transpose()
    });
    // A run that hit the memory cap may leave QuickJS unable to say so cleanly.
    let text = result.map_err(|e| match e {
        TransformError::Engine(m) | TransformError::Threw(m) if m.contains("out of memory") => TransformError::TooBig,
        e => e,
    })?;
    let text = text.ok_or_else(|| TransformError::Result("`handler` returned no JSON value".into()))?;
    // Refused before it is parsed: a small heap can stringify to text that
    // parses into far more memory (a long array of zeros).
    if text.len() > max_body.saturating_mul(2) + 64 * 1024 {
        return Err(TransformError::Result(format!("the result is larger than the {max_body} bytes a body may have")));
    }
    output(&text, webhook, max_body)
}

/// What a handler that returns a Promise is told: its result would be `{}`.
const ASYNC: &str = "`handler` returned a Promise: handlers run to their end at once, so they are not `async`; \
                     return the webhook itself";

/// A context with the language and the standard objects a handler needs (dates,
/// regular expressions, JSON, Map and Set), and no more: no `Proxy`, typed
/// arrays, `WeakRef` or `performance`. Each is less to attack, and making a
/// context is most of a run's cost (about 83 µs with all of them, 54 µs so).
///
/// `Promise` is there although nothing awaits one (no job ever runs): `async`
/// functions and `import()` make promises, and QuickJS aborts the process on
/// an object of a class the context never registered. With it, `import()`
/// rejects (there is no loader) and an `async` handler is refused by name.
fn context(rt: &Runtime) -> Result<Context, TransformError> {
    use rquickjs::context::intrinsic::{Date, Eval, Json, MapSet, Promise, RegExp, RegExpCompiler};
    Context::custom::<(Date, Eval, RegExpCompiler, RegExp, Json, MapSet, Promise)>(rt)
        .map_err(|e| TransformError::Engine(e.to_string()))
}

/// Whether `code` runs and defines `handler`, under the same limits as a run:
/// what saving a transformation checks, so a typo is refused then rather than
/// failing every delivery after.
pub fn check(code: &str) -> Result<(), TransformError> {
    let (_rt, ctx, deadline) = limited()?;
    ctx.with(|ctx| {
        ctx.eval::<(), _>(code).catch(&ctx).map_err(|e| thrown(e.to_string(), deadline))?;
        match ctx.globals().get::<_, Function>("handler") {
            Ok(handler) if is_async(&handler) => Err(TransformError::Result(ASYNC.into())),
            Ok(_) => Ok(()),
            Err(_) => Err(TransformError::Result("the code defines no function `handler(webhook)`".into())),
        }
    })
}

/// What a thrown error means: past the deadline, the interrupt threw it.
fn thrown(message: String, deadline: Duration) -> TransformError {
    if message.contains("out of memory") {
        TransformError::TooBig
    } else if thread_cpu() >= deadline || message.contains("interrupted") {
        TransformError::TooLong
    } else {
        TransformError::Threw(shown(&message))
    }
}

/// A thrown message as the attempt log keeps it: at most 500 bytes (cut at a
/// character), no NUL (Postgres keeps none), and no heap address QuickJS put in
/// it (`Object(0x7f…)`): the tenant learns nothing of the host's memory layout.
fn shown(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(512));
    let mut rest = message;
    while let Some(at) = rest.find("0x") {
        out.push_str(&rest[..at]);
        let hex = rest[at + 2..].find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(rest.len() - at - 2);
        out.push_str(if hex > 0 { "0x…" } else { "0x" });
        rest = &rest[at + 2 + hex..];
    }
    out.push_str(rest);
    let mut out: String = out.chars().filter(|c| *c != '\0').collect();
    if out.len() > 500 {
        let cut = (0..=500).rev().find(|i| out.is_char_boundary(*i)).unwrap_or(0);
        out.truncate(cut);
    }
    out
}

/// The handler's argument, as JSON text.
fn input(w: &Webhook, variables: &Value) -> Result<String, TransformError> {
    let payload = if w.json {
        serde_json::from_slice::<Value>(&w.payload).unwrap_or_else(|_| Value::String(lossy(&w.payload)))
    } else {
        Value::String(lossy(&w.payload))
    };
    let arg = json!({
        "eventType": w.event_type,
        "method": w.method.as_str(),
        "url": w.url,
        "payload": payload,
        "cancel": false,
        "variables": variables,
    });
    serde_json::to_string(&arg).map_err(|e| TransformError::Engine(e.to_string()))
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The webhook the handler returned, checked.
fn output(text: &str, before: Webhook, max_body: usize) -> Result<Outcome, TransformError> {
    let bad = |m: String| Err(TransformError::Result(m));
    let Ok(Value::Object(mut out)) = serde_json::from_str::<Value>(text) else {
        return bad("`handler` must return the webhook object".into());
    };
    match out.get("cancel") {
        None | Some(Value::Bool(false)) | Some(Value::Null) => {}
        Some(Value::Bool(true)) => return Ok(Outcome::Cancel),
        Some(other) => return bad(format!("`cancel` must be true or false, not {other}")),
    }
    let method = match out.get("method") {
        None => before.method,
        Some(Value::String(m)) if m.eq_ignore_ascii_case("POST") => Method::Post,
        Some(Value::String(m)) if m.eq_ignore_ascii_case("PUT") => Method::Put,
        Some(other) => return bad(format!("`method` must be \"POST\" or \"PUT\", not {other}")),
    };
    let url = match out.get("url") {
        None => before.url.clone(),
        Some(Value::String(u)) if u.len() <= MOST_URL => match url::Url::parse(u) {
            Ok(p) if matches!(p.scheme(), "http" | "https") && p.host().is_some() => u.clone(),
            _ => return bad(format!("`url` must be an absolute http(s) URL, not {u:?}")),
        },
        Some(Value::String(_)) => return bad(format!("`url` is longer than {MOST_URL} characters")),
        Some(other) => return bad(format!("`url` must be a string, not {other}")),
    };
    let (payload, json) = match out.remove("payload") {
        None => (before.payload.clone(), before.json),
        // A body that was not JSON stays text when the handler hands back text.
        Some(Value::String(s)) if !before.json => (s.into_bytes(), false),
        Some(v) => (serde_json::to_vec(&v).map_err(|e| TransformError::Result(e.to_string()))?, true),
    };
    if payload.len() > max_body {
        return bad(format!("the payload is {} bytes, over the {max_body} a body may have", payload.len()));
    }
    Ok(Outcome::Send(Webhook { event_type: before.event_type, method, url, payload, json }))
}

/// A sandbox child's answer checked again in the parent: the child runs the
/// tenant's code and may be the tenant's (a QuickJS bug), so what it says a
/// run made is held to what `output` lets a handler make.
pub fn trusted(outcome: Outcome, event_type: &str, max_body: usize) -> Result<Outcome, TransformError> {
    let Outcome::Send(w) = outcome else { return Ok(Outcome::Cancel) };
    let bad = |m: &str| Err(TransformError::Result(format!("the sandbox answered {m}")));
    let url_ok = w.url.len() <= MOST_URL
        && url::Url::parse(&w.url).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
    if w.event_type != event_type {
        bad("another event type")
    } else if w.payload.len() > max_body {
        bad("a body larger than a body may be")
    } else if !url_ok {
        bad("a URL that is not absolute http(s)")
    } else if w.json && serde_json::from_slice::<serde::de::IgnoredAny>(&w.payload).is_err() {
        bad("a body marked as JSON that is not")
    } else {
        Ok(Outcome::Send(w))
    }
}

/// Whether `f` was declared `async` (its constructor is `AsyncFunction` or
/// `AsyncGeneratorFunction`): refused when saved, as its result is a Promise.
fn is_async(f: &Function) -> bool {
    let name = f
        .get::<_, rquickjs::Object>("constructor")
        .and_then(|c| c.get::<_, rquickjs::Coerced<String>>("name"))
        .map(|n| n.0)
        .unwrap_or_default();
    name.starts_with("Async")
}

#[cfg(test)]
mod tests;
