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
    fn cut(self) -> Self {
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
        let arg = ctx.json_parse(input).catch(&ctx).map_err(fail)?;
        let out: rquickjs::Value = handler.call((arg,)).catch(&ctx).map_err(fail)?;
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

/// A context with the language and the standard objects a handler needs (dates,
/// regular expressions, JSON, Map and Set), and no more: no `Proxy`, `Promise`,
/// typed arrays, `WeakRef` or `performance`. Each is less to attack, and making
/// a context is most of a run's cost (about 83 µs with all of them, 54 µs so).
fn context(rt: &Runtime) -> Result<Context, TransformError> {
    use rquickjs::context::intrinsic::{Date, Eval, Json, MapSet, RegExp, RegExpCompiler};
    Context::custom::<(Date, Eval, RegExpCompiler, RegExp, Json, MapSet)>(rt)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hook() -> Webhook {
        Webhook {
            event_type: "order.paid".into(),
            method: Method::Post,
            url: "https://example.test/hook".into(),
            payload: br#"{"amount":10}"#.to_vec(),
            json: true,
        }
    }

    fn run(code: &str) -> Result<Outcome, TransformError> {
        run_now(code, &json!({"key": "v"}), hook(), 1 << 20)
    }

    #[test]
    fn a_handler_reshapes_the_payload_and_sees_the_event_type_and_variables() {
        let code = "function handler(w) { w.payload = {total: w.payload.amount * 2, type: w.eventType, \
                    key: w.variables.key}; w.method = 'PUT'; w.url = 'https://other.test/x'; return w; }";
        let Ok(Outcome::Send(w)) = run(code) else { panic!("{:?}", run(code)) };
        assert_eq!(w.payload, br#"{"key":"v","total":20,"type":"order.paid"}"#);
        assert_eq!((w.method, w.url.as_str()), (Method::Put, "https://other.test/x"));
    }

    #[test]
    fn cancel_true_sends_nothing() {
        assert_eq!(run("function handler(w) { w.cancel = true; return w; }"), Ok(Outcome::Cancel));
    }

    #[test]
    fn an_endless_loop_ends_at_the_cpu_limit() {
        let start = std::time::Instant::now();
        assert_eq!(run("function handler(w) { for (;;) {} }"), Err(TransformError::TooLong));
        assert!(start.elapsed() < CPU_LIMIT * 10, "{:?}", start.elapsed());
        // Code that loops before any handler is defined is held by the same limit.
        assert_eq!(run("while (true) {}"), Err(TransformError::TooLong));
    }

    #[test]
    fn endless_allocation_ends_at_the_memory_limit() {
        let code = "function handler(w) { const a = []; for (;;) { a.push('x'.repeat(1 << 16) + a.length); } }";
        assert_eq!(run(code), Err(TransformError::TooBig));
    }

    #[test]
    fn deep_recursion_is_refused_not_a_crash() {
        let r = run("function f(n) { return f(n + 1) + 1; } function handler(w) { return f(0); }");
        assert!(matches!(r, Err(TransformError::Threw(_))), "{r:?}");
    }

    #[test]
    fn a_throw_or_a_nonsense_result_is_a_clear_error() {
        let threw = run("function handler(w) { throw new Error('no amount'); }");
        assert!(matches!(&threw, Err(TransformError::Threw(m)) if m.contains("no amount")), "{threw:?}");
        for (code, words) in [
            ("function handler(w) { }", "returned nothing"),
            ("function handler(w) { return 42; }", "webhook object"),
            ("function handler(w) { w.method = 'DELETE'; return w; }", "`method`"),
            ("function handler(w) { w.url = 'ftp://x'; return w; }", "`url`"),
            ("function handler(w) { w.cancel = 'yes'; return w; }", "`cancel`"),
            ("const handler = 3;", "handler"),
            ("var x = ;", "unexpected token"),
        ] {
            let r = run(code);
            assert!(r.as_ref().is_err_and(|e| e.to_string().contains(words)), "{code}: {r:?}");
        }
    }

    #[test]
    fn a_thrown_message_is_cut_at_a_character_with_no_nul_or_address() {
        let long = run(&format!("function handler(w) {{ throw new Error('{}é'); }}", "a".repeat(492)));
        assert!(matches!(&long, Err(TransformError::Threw(m)) if m.len() <= 500), "{long:?}");
        let nul = run("function handler(w) { throw new Error('a\\u0000b'); }");
        assert!(matches!(&nul, Err(TransformError::Threw(m)) if !m.contains('\0') && m.contains("ab")), "{nul:?}");
        let quoted = run("function handler(w) { w.cancel = 'ab'.repeat(400000); return w; }");
        assert!(
            matches!(&quoted, Err(TransformError::Result(m)) if m.len() <= 500 && m.contains("`cancel`")),
            "{quoted:?}"
        );
        let object = run("function handler(w) { throw {x: 1}; }");
        assert!(matches!(&object, Err(TransformError::Threw(m)) if !m.contains("0x7") ), "{object:?}");
    }

    #[test]
    fn no_host_access_is_reachable() {
        for global in [
            "require",
            "process",
            "std",
            "os",
            "setTimeout",
            "fetch",
            "XMLHttpRequest",
            "Proxy",
            "Promise",
            "performance",
        ] {
            let code = format!("function handler(w) {{ w.payload = typeof {global}; return w; }}");
            let Ok(Outcome::Send(w)) = run(&code) else { panic!("{global}") };
            assert_eq!(w.payload, br#""undefined""#, "{global} is defined");
        }
    }

    #[test]
    fn a_body_that_was_not_json_is_handed_over_and_back_as_text() {
        let w = Webhook { payload: b"a=1&b=2".to_vec(), json: false, ..hook() };
        let out = run_now("function handler(w) { w.payload = w.payload + '&c=3'; return w; }", &json!({}), w, 1024);
        let Ok(Outcome::Send(w)) = out else { panic!("{out:?}") };
        assert_eq!((w.payload.as_slice(), w.json), (&b"a=1&b=2&c=3"[..], false));
    }
}
