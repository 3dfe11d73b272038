//! The engine's limits and what a handler can and cannot reach, run in-process.

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
    for global in ["require", "process", "std", "os", "setTimeout", "fetch", "XMLHttpRequest", "Proxy", "performance"] {
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

#[test]
fn async_code_and_import_are_refused_by_name_and_never_abort_the_process() {
    // Each of these aborted the process (QuickJS meeting a Promise, a class the
    // context had not registered) before Promise was added.
    let refused = [
        "async function handler(w) { return w }",
        "var handler = async (w) => w",
        "async function* handler(w) { yield w }",
    ];
    for code in refused {
        let said = |e: TransformError| matches!(e, TransformError::Result(m) if m.contains("Promise"));
        assert!(check(code).is_err_and(said), "saving `{code}`");
        let ran = run(code);
        assert!(ran.is_err(), "running `{code}`: {ran:?}");
    }
    let runs = [
        "function handler(w) { import('fs'); return w }",
        "function handler(w) { const f = async () => 1; f(); return w }",
        "async function* g() {} function handler(w) { g().next(); return w }",
        "function handler(w) { Promise.reject(new Error('x')); return w }",
        "function handler(w) { w.payload.n = String(10n ** 20n); return w }",
        "function* g() { yield 1 } function handler(w) { w.payload.g = [...g()]; return w }",
        "class A { #x = 1; get x() { return this.#x } } function handler(w) { w.payload.a = new A().x; return w }",
    ];
    for code in runs {
        assert!(check(code).is_ok(), "saving `{code}`");
        assert!(matches!(run(code), Ok(Outcome::Send(_))), "running `{code}`: {:?}", run(code));
    }
    // What is left out is simply not there.
    let absent = "function handler(w) { w.payload = [typeof Proxy, typeof WeakRef, typeof Uint8Array, typeof performance]; return w }";
    let Ok(Outcome::Send(w)) = run(absent) else { panic!("runs") };
    assert_eq!(w.payload, br#"["undefined","undefined","undefined","undefined"]"#);
}

#[test]
fn what_a_sandbox_answers_is_held_again_to_what_a_handler_can_make() {
    let ok = Outcome::Send(hook());
    assert!(trusted(ok, "order.paid", 1 << 20).is_ok());
    let cases = [
        (Webhook { event_type: "other.type".into(), ..hook() }, "event type"),
        (Webhook { url: "file:///etc/passwd".into(), ..hook() }, "URL"),
        (Webhook { url: format!("https://a.test/{}", "x".repeat(3000)), ..hook() }, "URL"),
        (Webhook { payload: vec![b'1'; 2048], ..hook() }, "larger"),
        (Webhook { payload: b"{not json".to_vec(), ..hook() }, "JSON"),
    ];
    for (w, said) in cases {
        let e = trusted(Outcome::Send(w), "order.paid", 1024).unwrap_err();
        assert!(matches!(&e, TransformError::Result(m) if m.contains(said)), "{e:?}");
    }
    assert_eq!(trusted(Outcome::Cancel, "order.paid", 0), Ok(Outcome::Cancel));
}
