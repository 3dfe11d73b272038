//! OpenTelemetry traces: with the standard `OTEL_*` variables, an ingress, an API
//! and a worker process export their spans over OTLP/HTTP to a receiver on
//! loopback (a recording sink), and one event is one trace from the request that
//! brought it to the attempt that delivered it, across the three processes.

use std::{collections::HashMap, time::Duration};

use hookgate_gateway::Role;
use hookgate_tests::{
    app::default_env,
    process::Served,
    providers::{now, stripe},
    sink::Sink,
    TestApp, TestDb,
};
use serde_json::{json, Value};

const SECRET: &str = "whsec_otel";

/// One exported span, as OTLP/JSON carries it.
#[derive(Debug, Clone)]
struct Span {
    service: String,
    trace: String,
    id: String,
    parent: String,
    name: String,
    attributes: HashMap<String, Value>,
    links: Vec<(String, String)>,
}

impl Span {
    fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }
}

/// Every span the collector has received so far.
fn spans(collector: &Sink) -> Vec<Span> {
    let mut out = Vec::new();
    for request in collector.received() {
        assert_eq!(request.path, "/v1/traces", "the exporter posts to the OTLP/HTTP traces path");
        let body: Value = serde_json::from_slice(&request.body).expect("OTLP/JSON");
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            let service = rs["resource"]["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["key"] == "service.name")
                .and_then(|a| a["value"]["stringValue"].as_str())
                .unwrap_or_default()
                .to_owned();
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for s in ss["spans"].as_array().into_iter().flatten() {
                    let text = |k: &str| s[k].as_str().unwrap_or_default().to_owned();
                    let attributes = s["attributes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| {
                            let v = &a["value"];
                            let v = v.get("stringValue").or(v.get("intValue")).or(v.get("boolValue")).cloned();
                            (a["key"].as_str().unwrap().to_owned(), v.unwrap_or(Value::Null))
                        })
                        .collect();
                    let links = s["links"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|l| (l["traceId"].as_str().unwrap().to_owned(), l["spanId"].as_str().unwrap().to_owned()))
                        .collect();
                    out.push(Span {
                        service: service.clone(),
                        trace: text("traceId"),
                        id: text("spanId"),
                        parent: text("parentSpanId"),
                        name: text("name"),
                        attributes,
                        links,
                    });
                }
            }
        }
    }
    out
}

/// Waits until the trace `trace` holds a `delivery.attempt` and the request
/// span it began with (each process exports in batches of its own, so the
/// worker's attempt may arrive before the ingress's request); returns all spans.
async fn until_delivered(collector: &Sink, trace: impl Fn(&[Span]) -> Option<String>) -> (String, Vec<Span>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let all = spans(collector);
        if let Some(t) = trace(&all) {
            let has = |name: &str| all.iter().any(|s| s.trace == t && s.name == name);
            if has("delivery.attempt") && (has("POST /in/{source_id}") || has("POST /api/v1/app/{app_id}/msg")) {
                return (t, all);
            }
        }
        assert!(std::time::Instant::now() < deadline, "no delivery.attempt span arrived; spans: {all:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn one<'a>(spans: &'a [Span], trace: &str, name: &str) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| s.trace == trace && s.name == name).collect();
    assert_eq!(found.len(), 1, "one `{name}` span in trace {trace}: {spans:#?}");
    found[0]
}

/// `child`'s chain of parents reaches `ancestor` within the trace.
fn descends(spans: &[Span], child: &Span, ancestor: &Span) -> bool {
    let mut at = child;
    for _ in 0..16 {
        if at.parent == ancestor.id {
            return true;
        }
        match spans.iter().find(|s| s.id == at.parent && s.trace == at.trace) {
            Some(p) => at = p,
            None => return false,
        }
    }
    false
}

#[tokio::test]
async fn one_event_is_one_trace_from_its_request_to_its_delivery_attempt_across_processes() {
    let (collector, endpoint) = (Sink::start().await, Sink::start().await);
    let db = TestDb::new().await;
    let env = default_env(&db);
    let mut traced = env.clone();
    for (k, v) in [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        // Quiet logs do not quiet traces.
        ("RUST_LOG", "error"),
    ] {
        traced.insert(k.into(), v.into());
    }
    let ingress = Served::start(&traced, "ingress").await;
    let api = Served::start(&traced, "api").await;
    let _worker = Served::start(&traced, "worker").await;
    // Set up through an untraced API of its own.
    let setup = TestApp::spawn_role(db, env, Role::Api).await;
    let t = setup.tenant().await;
    let app = t.application().await;
    t.endpoint(&app, &endpoint.url, json!({})).await;
    let body = json!({"name": "s", "provider": "stripe", "secret": SECRET, "appId": app, "mode": "async"});
    let source = t.post("/api/v1/source", body, 201).await["id"].as_str().unwrap().to_owned();
    let http = reqwest::Client::new();

    // 1. POST /in with the caller's traceparent: the trace continues it.
    let (caller_trace, caller_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let event = r#"{"id":"evt_otel_1","type":"charge.succeeded"}"#;
    let res = http
        .post(ingress.url(&format!("/in/{source}")))
        .header("content-type", "application/json")
        .header("stripe-signature", stripe(SECRET, now(), event.as_bytes()))
        .header("traceparent", format!("00-{caller_trace}-{caller_span}-01"))
        .body(event)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let event_id = res.json::<Value>().await.unwrap()["eventId"].as_str().unwrap().to_owned();
    let (trace, all) = until_delivered(&collector, |_| Some(caller_trace.to_owned())).await;
    let request = one(&all, &trace, "POST /in/{source_id}");
    assert_eq!(request.parent, caller_span, "the request span is a child of the caller's");
    assert_eq!(request.service, "hookgate", "OTEL_SERVICE_NAME unset: the service is hookgate");
    assert_eq!(request.attr("http.response.status_code"), Some(&json!("200")), "{request:#?}");
    assert_eq!(request.attr("http.route"), Some(&json!("/in/{source_id}")), "{request:#?}");
    // The source's id is its credential when it checks no signature: no span carries it.
    for span in &all {
        let attrs = serde_json::to_string(&span.attributes).unwrap();
        assert!(!attrs.contains(&source), "span {} carries the source's id: {attrs}", span.name);
    }
    for name in ["ingress.verify", "ingress.admit"] {
        assert!(descends(&all, one(&all, &trace, name), request), "{name} is inside the request");
    }
    let attempt = one(&all, &trace, "delivery.attempt");
    assert!(descends(&all, attempt, one(&all, &trace, "ingress.admit")), "the attempt continues the admission");
    assert_eq!(attempt.attr("http.response.status_code"), Some(&json!("200")));
    assert_eq!(attempt.attr("outcome"), Some(&json!("success")));
    let delivered = endpoint.wait_for(1, Duration::from_secs(5)).await;
    let webhook_id = delivered[0].header("webhook-id").unwrap();
    assert_eq!(attempt.attr("msg"), Some(&json!(webhook_id)), "the attempt names the message it sent");
    // The group commit that wrote it is a span of its own, linked to the admission.
    let admit = one(&all, &trace, "ingress.admit");
    assert!(
        all.iter().any(|s| s.name == "ingress.commit" && s.links.contains(&(trace.clone(), admit.id.clone()))),
        "an ingress.commit span links to the admission"
    );
    // And the attempt links to the claim that picked it up.
    let claims: Vec<&Span> = all.iter().filter(|s| s.name == "delivery.claim").collect();
    assert!(
        attempt.links.iter().any(|(t, id)| claims.iter().any(|c| &c.trace == t && &c.id == id)),
        "the attempt links to an exported delivery.claim span: {attempt:#?} {claims:#?}"
    );
    assert!(!event_id.is_empty());

    // 2. Without a traceparent: a new trace, from the request to the attempt.
    let event = r#"{"id":"evt_otel_2","type":"charge.succeeded"}"#;
    let res = http
        .post(ingress.url(&format!("/in/{source}")))
        .header("content-type", "application/json")
        .header("stripe-signature", stripe(SECRET, now(), event.as_bytes()))
        .body(event)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let fresh = |all: &[Span]| {
        all.iter().find(|s| s.name == "POST /in/{source_id}" && s.trace != caller_trace).map(|s| s.trace.clone())
    };
    let (trace, all) = until_delivered(&collector, fresh).await;
    let request = one(&all, &trace, "POST /in/{source_id}");
    assert!(request.parent.is_empty(), "a request without traceparent starts its trace");
    assert!(descends(&all, one(&all, &trace, "delivery.attempt"), request));

    // 3. The API: a message created with a traceparent is delivered in that trace.
    let api_trace = "0af7651916cd43dd8448eb211c80319c";
    let res = http
        .post(api.url(&format!("/api/v1/app/{app}/msg")))
        .bearer_auth(&t.key)
        .header("traceparent", format!("00-{api_trace}-b7ad6b7169203331-01"))
        .json(&json!({"eventType": "order.paid", "payload": {"n": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let msg = res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let (trace, all) = until_delivered(&collector, |_| Some(api_trace.to_owned())).await;
    let request = one(&all, &trace, "POST /api/v1/app/{app_id}/msg");
    let create = one(&all, &trace, "message.create");
    assert!(descends(&all, create, request));
    let attempt = one(&all, &trace, "delivery.attempt");
    assert!(descends(&all, attempt, create), "the API's message is delivered in its request's trace");
    assert_eq!(attempt.attr("msg"), Some(&json!(msg)));

    // What is stored: the creating span's own traceparent, in the caller's trace;
    // nothing from a process with tracing off (the untraced set-up API).
    let untraced = t.message(&app, "order.paid", json!({"n": 2})).await["id"].as_str().unwrap().to_owned();
    let client = setup.db.client().await;
    let stored = |id: String| {
        let client = &client;
        async move {
            let row = client.query_one("SELECT traceparent FROM messages WHERE id = $1", &[&id]).await.unwrap();
            row.get::<_, Option<String>>(0)
        }
    };
    let traced = stored(msg).await.expect("a traced message keeps its traceparent");
    assert_eq!(traced.len(), 55, "{traced}");
    assert!(traced.starts_with(&format!("00-{api_trace}-")) && traced.ends_with("-01"), "{traced}");
    assert_eq!(traced[36..52], create.id, "the parent is the message.create span");
    assert_eq!(stored(untraced).await, None, "tracing off stores nothing");
}

#[tokio::test]
async fn a_malformed_traceparent_starts_a_new_trace_and_refuses_nothing() {
    let collector = Sink::start().await;
    let db = TestDb::new().await;
    let mut env = default_env(&db);
    env.insert("OTEL_EXPORTER_OTLP_ENDPOINT".into(), collector.url.clone());
    env.insert("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "http/json".into());
    env.insert("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into());
    env.insert("OTEL_RESOURCE_ATTRIBUTES".into(), "service.name=gateway-eu,deployment.environment=test".into());
    let api = Served::start(&env, "api").await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let malformed = [
        "00-not-a-trace-01".to_owned(),
        // Upper-case hex, an all-zero trace id, an unknown version with a bad length,
        // and a valid one buried in a header far too long.
        format!("00-{}-00f067aa0ba902b7-01", trace.to_uppercase()),
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01".to_owned(),
        format!("ff-{trace}-00f067aa0ba902b7-01"),
        format!("00-{trace}-00f067aa0ba902b7-01-{}", "x".repeat(8000)),
    ];
    let http = reqwest::Client::new();
    for value in &malformed {
        let res = http.get(api.url("/openapi.json")).header("traceparent", value).send().await.unwrap();
        assert_eq!(res.status(), 200, "a trace header never refuses a request");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let got = loop {
        let got: Vec<Span> = spans(&collector).into_iter().filter(|s| s.name == "GET /openapi.json").collect();
        if got.len() == malformed.len() {
            break got;
        }
        assert!(std::time::Instant::now() < deadline, "{} of {} spans arrived", got.len(), malformed.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for span in &got {
        assert!(span.parent.is_empty() && span.trace.len() == 32, "a new trace: {span:#?}");
        assert_ne!(span.trace, trace, "the malformed header's trace id is not taken");
        assert_eq!(span.service, "gateway-eu", "service.name from OTEL_RESOURCE_ATTRIBUTES");
    }
    // A method outside the standard ones cannot mint span names.
    let res = http.request(reqwest::Method::from_bytes(b"FOO123").unwrap(), api.url("/healthz")).send().await.unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !spans(&collector).iter().any(|s| s.name.starts_with("_OTHER ")) {
        assert!(std::time::Instant::now() < deadline, "no `_OTHER` span: {:#?}", spans(&collector));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!spans(&collector).iter().any(|s| s.name.contains("FOO123")));
}

#[tokio::test]
async fn an_unsupported_otlp_protocol_stops_the_start_naming_the_variable() {
    let db = TestDb::new().await;
    let env = default_env(&db);
    let mut pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    pairs.push(("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"));
    pairs.push(("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"));
    let out = hookgate_tests::process::hookgate(&pairs).args(["serve"]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"), "{stderr}");
}
