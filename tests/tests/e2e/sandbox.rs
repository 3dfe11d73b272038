//! The transformation sandbox seen from outside: what its child can reach once
//! confined, what `/proc` shows of a live one, each tenant's share of the
//! pool, and what a caller who may not read variables gets from a try.
//! Transformations run in children of the real binary, so these drive a
//! `hookgate serve` process.

use std::time::{Duration, Instant};

use hookgate_tests::{
    app::TestApp,
    process::{hookgate, Served},
};
use reqwest::Method;
use serde_json::{json, Value};

/// One native call that loops in C, where QuickJS never checks its deadline:
/// the child is killed at the wall-clock limit.
const NATIVE_LOOP: &str =
    "function handler(w) { w.payload = Array.prototype.join.call({ length: 2 ** 53 }, ''); return w; }";

/// A tenant allowed transformations, with an application and an endpoint.
async fn tenant_with_endpoint(app: &TestApp) -> (String, String, String) {
    let t = app.create_tenant("Sandboxed").await;
    let (id, key) = (t["id"].as_str().unwrap().to_owned(), t["apiKey"].as_str().unwrap().to_owned());
    let on = app.admin(Method::PATCH, &format!("/admin/v1/tenant/{id}")).json(&json!({"transformations": true}));
    assert_eq!(on.send().await.unwrap().status(), 200);
    let created = app.api(&key, Method::POST, "/api/v1/app").json(&json!({"name": "A"})).send().await.unwrap();
    let app_id = created.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let ep = app.api(&key, Method::POST, &format!("/api/v1/app/{app_id}/endpoint"));
    let ep = ep.json(&json!({"url": "http://127.0.0.1:9/hook"})).send().await.unwrap();
    assert_eq!(ep.status(), 201);
    let ep_id = ep.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    (key, app_id, ep_id)
}

/// The pids of `parent`'s live sandbox children.
fn sandboxes_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent pid is the second field after the command's closing parenthesis.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains("transform-sandbox") {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
async fn once_confined_a_sandbox_child_can_open_no_file_no_socket_and_start_nothing() {
    let out = hookgate(&[("HOOKGATE_MASTER_KEY", "not-for-the-child")])
        .args(["transform-sandbox", "--probe"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Unconfined, the same attempts succeed: what the probe tries is real.
    for what in ["parentEnviron", "inetSocket", "unixSocket"] {
        assert_eq!(seen["before"][what], "ok", "before confinement, {what}: {seen}");
    }
    let after = seen["after"].as_object().unwrap();
    assert_eq!(after.len(), 9, "{seen}");
    for (what, said) in after {
        assert!(said.as_str().is_some_and(|s| s.contains("not permitted")), "once confined, {what}: {said}");
    }
    let namespaces = seen["namespaces"].as_str().unwrap();
    assert!(["user, network, ipc", "network, ipc", "none"].contains(&namespaces), "{seen}");
    eprintln!("the sandbox's namespaces on this kernel: {namespaces}");
}

#[tokio::test]
async fn a_pooled_sandbox_child_has_no_new_privileges_a_seccomp_filter_only_its_pipes_and_no_environment() {
    let app = TestApp::spawn().await;
    let served = Served::start(&app.env, "api").await;
    let (key, app_id, ep_id) = tenant_with_endpoint(&app).await;
    // Saving checks the code in a child of the API's pool, kept for the next run.
    let patch = app.http.patch(served.url(&format!("/api/v1/app/{app_id}/endpoint/{ep_id}/transformation")));
    let saved = patch.bearer_auth(&key).json(&json!({"code": "function handler(w) { return w }", "enabled": true}));
    assert_eq!(saved.send().await.unwrap().status(), 204);
    let parent = served.child.id().unwrap();
    let children = sandboxes_of(parent);
    assert_eq!(children.len(), 1, "one child kept in the pool: {children:?}");
    let child = children[0];
    let status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap();
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).map(str::to_owned);
    assert_eq!(field("NoNewPrivs:").as_deref(), Some("1"), "{status}");
    assert_eq!(field("Seccomp:").as_deref(), Some("2"), "filter mode: {status}");
    // No capability, even in its own user namespace (where it starts with all).
    assert_eq!(field("CapEff:").as_deref(), Some("0000000000000000"), "{status}");
    assert_eq!(field("CapPrm:").as_deref(), Some("0000000000000000"), "{status}");
    let mut fds: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{child}/fd"))
        .unwrap()
        .flatten()
        .map(|e| {
            (e.file_name().to_string_lossy().into_owned(), std::fs::read_link(e.path()).unwrap().display().to_string())
        })
        .collect();
    fds.sort();
    assert_eq!(fds.len(), 2, "stdin and stdout only: {fds:?}");
    assert!(fds[0].0 == "0" && fds[1].0 == "1" && fds.iter().all(|(_, to)| to.starts_with("pipe:")), "{fds:?}");
    let environ = std::fs::read(format!("/proc/{child}/environ")).unwrap();
    assert!(environ.is_empty(), "no environment: {}", String::from_utf8_lossy(&environ));
    let net = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{child}/limits")).unwrap();
    let limit = |name: &str| {
        limits.lines().find(|l| l.starts_with(name)).map(|l| l.split_whitespace().rev().nth(2).unwrap_or("").to_owned())
    };
    assert_eq!(limit("Max open files").as_deref(), Some("2"), "{limits}");
    assert_eq!(limit("Max core file size").as_deref(), Some("0"), "{limits}");
    assert_eq!(limit("Max processes").as_deref(), Some("0"), "{limits}");
    eprintln!("network namespace: parent {:?}, child {:?}", net(parent), net(child));
}

#[tokio::test]
async fn one_tenants_runaway_tries_neither_make_anothers_saves_fail_nor_run_forever() {
    let app = TestApp::spawn().await;
    let served = Served::start(&app.env, "api").await;
    let (noisy_key, noisy_app, noisy_ep) = tenant_with_endpoint(&app).await;
    let (quiet_key, quiet_app, quiet_ep) = tenant_with_endpoint(&app).await;
    let try_url = served.url(&format!("/api/v1/app/{noisy_app}/endpoint/{noisy_ep}/transformation/try"));
    let body = json!({"code": NATIVE_LOOP, "eventType": "a.b", "payload": {}});
    let started = Instant::now();
    let tries: Vec<_> =
        (0..20).map(|_| tokio::spawn(app.http.post(&try_url).bearer_auth(&noisy_key).json(&body).send())).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Meanwhile the quiet tenant saves code (checked in the same pool), twice.
    let patch = served.url(&format!("/api/v1/app/{quiet_app}/endpoint/{quiet_ep}/transformation"));
    for n in 0..2 {
        let code = format!("function handler(w) {{ w.payload.n = {n}; return w }}");
        let saved = app.http.patch(&patch).bearer_auth(&quiet_key).json(&json!({"code": code, "enabled": true}));
        let saved = saved.send().await.unwrap();
        // Before each tenant had a share, these waited behind the noisy tries and were answered 409 busy.
        assert_eq!(saved.status(), 204, "{}", saved.text().await.unwrap());
    }
    let mut said = Vec::new();
    for t in tries {
        let answer = t.await.unwrap().unwrap();
        assert_eq!(answer.status(), 200);
        said.push(answer.json::<Value>().await.unwrap()["error"].as_str().unwrap_or_default().to_owned());
    }
    // One at a time (its share), each killed at the wall limit after a second:
    // the rest wait behind their own and are answered busy, not run.
    let killed = said.iter().filter(|e| e.contains("ran past")).count();
    let busy = said.iter().filter(|e| e.contains("busy")).count();
    let resting = said.iter().filter(|e| e.contains("again and again")).count();
    assert!((1..=3).contains(&killed) && killed + busy + resting == 20, "{said:?}");
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    // Killed three times, the code rests: answered at once, not killed again.
    let mut kills = killed;
    let mut rested = false;
    for _ in 0..4 {
        let again = app.http.post(&try_url).bearer_auth(&noisy_key).json(&body).send().await.unwrap();
        let error = again.json::<Value>().await.unwrap()["error"].as_str().unwrap_or_default().to_owned();
        rested = error.contains("again and again");
        if rested {
            break;
        }
        kills += usize::from(error.contains("ran past"));
    }
    assert!(rested && kills == 3, "rested {rested} after {kills} kills");
    // Changing the code by a character does not get round it (it did when the
    // rest was kept by code).
    let changed = json!({"code": format!("{NATIVE_LOOP} // again"), "eventType": "a.b", "payload": {}});
    let again = app.http.post(&try_url).bearer_auth(&noisy_key).json(&changed).send().await.unwrap();
    assert!(again.json::<Value>().await.unwrap()["error"].as_str().unwrap().contains("again and again"));
    // The other tenant's tries run.
    let quiet_try = served.url(&format!("/api/v1/app/{quiet_app}/endpoint/{quiet_ep}/transformation/try"));
    let fine = json!({"code": "function handler(w) { return w }", "eventType": "a.b", "payload": {"x": 1}});
    let ran = app.http.post(&quiet_try).bearer_auth(&quiet_key).json(&fine).send().await.unwrap();
    assert_eq!(ran.json::<Value>().await.unwrap()["payload"], json!({"x": 1}));
}

#[tokio::test]
async fn tries_are_rate_limited_per_tenant() {
    let app = TestApp::spawn().await;
    let served = Served::start(&app.env, "api").await;
    let (key, app_id, ep_id) = tenant_with_endpoint(&app).await;
    let (other, other_app, other_ep) = tenant_with_endpoint(&app).await;
    let url = |a: &str, e: &str| served.url(&format!("/api/v1/app/{a}/endpoint/{e}/transformation/try"));
    let body = json!({"code": "function handler(w) { return w }", "eventType": "a.b", "payload": {}});
    let mut statuses = Vec::new();
    for _ in 0..61 {
        statuses.push(app.http.post(url(&app_id, &ep_id)).bearer_auth(&key).json(&body).send().await.unwrap());
    }
    assert!(statuses[..60].iter().all(|r| r.status() == 200));
    let last = statuses.pop().unwrap();
    assert_eq!(last.status(), 429);
    assert!(last.headers()["retry-after"].to_str().unwrap().parse::<u64>().unwrap() >= 1);
    let theirs = app.http.post(url(&other_app, &other_ep)).bearer_auth(&other).json(&body).send().await.unwrap();
    assert_eq!(theirs.status(), 200, "another tenant's tries are its own");
    // The tenant's portal links count apart: a customer cannot spend the
    // tenant's tries, nor the tenant its customers'.
    let access = app.api(&key, Method::POST, &format!("/api/v1/auth/app-portal-access/{app_id}"));
    let access: Value = access.json(&json!({})).send().await.unwrap().json().await.unwrap();
    let portal = access["token"].as_str().unwrap();
    let theirs = app.http.post(url(&app_id, &ep_id)).bearer_auth(portal).json(&body).send().await.unwrap();
    assert_eq!(theirs.status(), 200, "the portal's tries are its own");
}

#[tokio::test]
async fn a_caller_who_sees_variables_redacted_can_neither_try_nor_save_code_that_reads_them() {
    let app = TestApp::spawn().await;
    let served = Served::start(&app.env, "api").await;
    let (key, app_id, ep_id) = tenant_with_endpoint(&app).await;
    let path = format!("/api/v1/app/{app_id}/endpoint/{ep_id}/transformation");
    let vars = json!({"code": "function handler(w) { return w }", "variables": {"token": "s3cret"}});
    assert_eq!(app.http.patch(served.url(&path)).bearer_auth(&key).json(&vars).send().await.unwrap().status(), 204);
    let leak =
        json!({"code": "function handler(w) { w.payload = w.variables; return w }", "eventType": "a.b", "payload": {}});
    let tried = |token: String| {
        let req = app.http.post(served.url(&format!("{path}/try"))).bearer_auth(token).json(&leak);
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    // The tenant sees its own variables.
    assert_eq!(tried(key.clone()).await["payload"], json!({"token": "s3cret"}));
    // A managing portal link (values hidden: the tenant does not show header values).
    let access = app.api(&key, Method::POST, &format!("/api/v1/auth/app-portal-access/{app_id}"));
    let access: Value = access.json(&json!({})).send().await.unwrap().json().await.unwrap();
    let portal = access["token"].as_str().unwrap().to_owned();
    let shown = app.http.get(served.url(&path)).bearer_auth(&portal).send().await.unwrap();
    assert_eq!(shown.json::<Value>().await.unwrap()["variables"], json!({"token": "[redacted]"}));
    // Before, the same link read them in clear through a try.
    assert_eq!(tried(portal).await["payload"], json!({"token": "[redacted]"}));
    // An application integration's key is such a link too.
    let made = app.api(&key, Method::POST, &format!("/api/v1/app/{app_id}/integration"));
    let made: Value = made.json(&json!({"name": "zapier"})).send().await.unwrap().json().await.unwrap();
    let key_of =
        app.api(&key, Method::GET, &format!("/api/v1/app/{app_id}/integration/{}/key", made["id"].as_str().unwrap()));
    let integration: Value = key_of.send().await.unwrap().json().await.unwrap();
    assert_eq!(tried(integration["key"].as_str().unwrap().to_owned()).await["payload"], json!({"token": "[redacted]"}));
    // Nor can it save code that reads them, to be run on the next delivery
    // (before, this answered 204 and the next delivery carried the token)...
    let portal = access["token"].as_str().unwrap().to_owned();
    let save = |token: &str, body: Value| app.http.patch(served.url(&path)).bearer_auth(token).json(&body).send();
    let leaky = json!({"code": "function handler(w) { w.payload = w.variables; return w }", "enabled": true});
    let refused = save(&portal, leaky.clone()).await.unwrap();
    assert_eq!(refused.status(), 403);
    assert!(refused.text().await.unwrap().contains("variables are hidden"));
    let got = app.http.get(served.url(&path)).bearer_auth(&key).send().await.unwrap();
    assert_eq!(got.json::<Value>().await.unwrap()["code"], "function handler(w) { return w }", "nothing saved");
    // ...unless it gives the variables too: they replace the hidden ones.
    let mut own = leaky;
    own["variables"] = json!({"token": "mine"});
    assert_eq!(save(&portal, own).await.unwrap().status(), 204);
    let got = app.http.get(served.url(&path)).bearer_auth(&key).send().await.unwrap();
    assert_eq!(got.json::<Value>().await.unwrap()["variables"], json!({"token": "mine"}));
}

#[tokio::test]
async fn a_sandbox_child_serves_one_scope_only() {
    let app = TestApp::spawn().await;
    let served = Served::start(&app.env, "api").await;
    let parent = served.child.id().unwrap();
    let (a_key, a_app, a_ep) = tenant_with_endpoint(&app).await;
    let (b_key, b_app, b_ep) = tenant_with_endpoint(&app).await;
    let try_as = |key: String, a: &str, e: &str| {
        let url = served.url(&format!("/api/v1/app/{a}/endpoint/{e}/transformation/try"));
        let body = json!({"code": "function handler(w) { return w }", "eventType": "a.b", "payload": {}});
        let req = app.http.post(url).bearer_auth(key).json(&body);
        async move { assert_eq!(req.send().await.unwrap().status(), 200) }
    };
    try_as(a_key.clone(), &a_app, &a_ep).await;
    let after_a = sandboxes_of(parent);
    assert_eq!(after_a.len(), 1);
    // Before, the child that had run A's code (its variables still in its
    // memory) took B's next.
    try_as(b_key.clone(), &b_app, &b_ep).await;
    let after_b = sandboxes_of(parent);
    assert_eq!(after_b.len(), 2, "B got a child of its own: {after_b:?}");
    try_as(a_key.clone(), &a_app, &a_ep).await;
    assert_eq!(sandboxes_of(parent), after_b, "A's child is kept for A");
    // A customer of A's, with a portal link that sees A's variables redacted,
    // gets a child apart from the one that ran A's own tries: the pool of two
    // retires the oldest for it.
    let access = app.api(&a_key, Method::POST, &format!("/api/v1/auth/app-portal-access/{a_app}"));
    let access: Value = access.json(&json!({})).send().await.unwrap().json().await.unwrap();
    try_as(access["token"].as_str().unwrap().to_owned(), &a_app, &a_ep).await;
    let after_portal = sandboxes_of(parent);
    let fresh: Vec<_> = after_portal.iter().filter(|pid| !after_b.contains(pid)).collect();
    assert_eq!(fresh.len(), 1, "a child was started for the portal: {after_b:?} then {after_portal:?}");
    assert!(after_portal.contains(&after_a[0]), "A's own child is kept, not handed to the portal: {after_portal:?}");
}

#[tokio::test]
async fn async_code_and_import_are_answered_in_words_and_the_child_lives() {
    let app = TestApp::spawn().await;
    let served = Served::start(&app.env, "api").await;
    let (key, app_id, ep_id) = tenant_with_endpoint(&app).await;
    let path = format!("/api/v1/app/{app_id}/endpoint/{ep_id}/transformation");
    let save = |code: &str| {
        app.http.patch(served.url(&path)).bearer_auth(&key).json(&json!({"code": code, "enabled": true})).send()
    };
    let refused = save("async function handler(w) { return w }").await.unwrap();
    assert_eq!(refused.status(), 422);
    assert!(refused.text().await.unwrap().contains("Promise"));
    assert_eq!(save("function handler(w) { import('x'); return w }").await.unwrap().status(), 204);
    let try_it = |code: &str| {
        let req = app.http.post(served.url(&format!("{path}/try"))).bearer_auth(&key);
        req.json(&json!({"code": code, "eventType": "a.b", "payload": {"a": 1}})).send()
    };
    let before = sandboxes_of(served.child.id().unwrap());
    for code in ["function handler(w) { import('x'); return w }", "function handler(w) { (async () => 1)(); return w }"]
    {
        let ran: Value = try_it(code).await.unwrap().json().await.unwrap();
        // Before Promise was registered, each of these aborted the child: "process stopped".
        assert_eq!(ran["payload"], json!({"a": 1}), "{code}: {ran}");
    }
    assert_eq!(sandboxes_of(served.child.id().unwrap()), before, "the same child answered, none was started");
}
