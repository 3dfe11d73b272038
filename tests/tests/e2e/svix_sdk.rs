//! The official Rust SDK (`svix` crate) drives the send API unchanged:
//! applications, endpoints, messages, attempts and portal access, and the
//! messages it makes verify with the crate's own verifier.

use std::time::Duration;

use hookgate_tests::{sink::Sink, TestApp};
use svix::api::{MessageAttemptListByMsgOptions, Svix, SvixOptions};
use svix::error::Error;
use svix::models::{
    AppPortalAccessIn, ApplicationIn, ApplicationPatch, EndpointIn, EventTypeIn, MessageIn, MessageStatus,
};
use svix::webhooks::Webhook;

fn client(app: &TestApp, token: &str) -> Svix {
    let options = SvixOptions { server_url: Some(app.url("")), num_retries: Some(0), ..SvixOptions::default() };
    Svix::new(token.to_owned(), Some(options))
}

/// The HTTP status of an SDK error.
fn status(e: Error) -> u16 {
    match e {
        Error::Http(c) => c.status.as_u16(),
        Error::Validation(c) => c.status.as_u16(),
        other => panic!("not an HTTP error: {other}"),
    }
}

#[tokio::test]
async fn the_official_rust_sdk_sends_a_message_that_its_own_verifier_accepts() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let svix = client(&app, &t.key);
    let sink = Sink::start().await;

    let mut new_app = ApplicationIn::new("Shop".to_owned());
    new_app.uid = Some("shop".to_owned());
    let made = svix.application().create(new_app, None).await.unwrap();
    assert!(made.id.starts_with("app_"));
    assert_eq!(svix.application().get("shop".to_owned()).await.unwrap().id, made.id, "found by uid");
    let patched = svix
        .application()
        .patch(made.id.clone(), ApplicationPatch { name: Some("Shop 2".to_owned()), ..ApplicationPatch::default() })
        .await
        .unwrap();
    assert_eq!(patched.name, "Shop 2");
    let listed = svix.application().list(None).await.unwrap();
    assert_eq!(listed.data.iter().map(|a| a.id.clone()).collect::<Vec<_>>(), vec![made.id.clone()]);

    // An endpoint may subscribe only to event types the tenant has, as in Svix.
    svix.event_type().create(EventTypeIn::new("invoice.paid".to_owned(), "paid".to_owned()), None).await.unwrap();
    let mut ep_in = EndpointIn::new(sink.url.clone());
    ep_in.event_types = Some(["invoice.paid".to_owned()].into());
    ep_in.headers = Some([("X-Team".to_owned(), "billing".to_owned())].into());
    let ep = svix.endpoint().create(made.id.clone(), ep_in, None).await.unwrap();
    assert_eq!(ep.event_types.as_ref().map(|t| t.len()), Some(1));
    let secret = svix.endpoint().get_secret(made.id.clone(), ep.id.clone()).await.unwrap().key;
    assert!(secret.starts_with("whsec_"));

    let skipped = MessageIn::new("invoice.void".to_owned(), serde_json::json!({"n": 0}));
    svix.message().create(made.id.clone(), skipped, None).await.unwrap();
    let msg_in = MessageIn::new("invoice.paid".to_owned(), serde_json::json!({"invoice": "inv-1", "amount": 12}));
    let msg = svix.message().create(made.id.clone(), msg_in, None).await.unwrap();
    assert!(msg.id.starts_with("msg_"));

    let got = sink.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 1, "the endpoint's filter keeps invoice.void out");
    let r = &got[0];
    assert_eq!(r.header("webhook-id"), Some(msg.id.as_str()));
    assert_eq!(r.header("x-team"), Some("billing"), "the headers given at creation are sent");
    let mut headers = reqwest::header::HeaderMap::new();
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        headers.insert(name, r.header(name).unwrap().parse().unwrap());
    }
    Webhook::new(&secret).unwrap().verify(&r.body, &headers).expect("the crate's verifier accepts it");
    let tampered = [r.body.as_slice(), b" "].concat();
    assert!(Webhook::new(&secret).unwrap().verify(&tampered, &headers).is_err());

    let attempts = async {
        loop {
            let page = svix
                .message_attempt()
                .list_by_msg(made.id.clone(), msg.id.clone(), Some(MessageAttemptListByMsgOptions::default()))
                .await
                .unwrap();
            if let Some(a) = page.data.into_iter().find(|a| a.status == MessageStatus::Success) {
                return a;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let attempt = tokio::time::timeout(Duration::from_secs(20), attempts).await.expect("a successful attempt");
    assert_eq!(attempt.endpoint_id, ep.id);
    assert_eq!(attempt.response_status_code, 200);
}

#[tokio::test]
async fn a_portal_token_from_the_rust_sdk_reaches_its_own_application_only() {
    let app = TestApp::spawn().await;
    let t = app.tenant().await;
    let svix = client(&app, &t.key);
    let mine = svix.application().create(ApplicationIn::new("Mine".to_owned()), None).await.unwrap();
    let other = svix.application().create(ApplicationIn::new("Other".to_owned()), None).await.unwrap();
    let access =
        svix.authentication().app_portal_access(mine.id.clone(), AppPortalAccessIn::new(), None).await.unwrap();
    assert!(access.url.contains(&access.token));

    let portal = client(&app, &access.token);
    let made = portal.endpoint().create(mine.id.clone(), EndpointIn::new("http://127.0.0.1:9/hook".into()), None).await;
    assert!(made.is_ok(), "the customer manages its own endpoints: {made:?}");
    let theirs = portal.endpoint().list(other.id.clone(), None).await.unwrap_err();
    assert_eq!(status(theirs), 404, "another application is not there for the token, as Svix answers");
    let publish = MessageIn::new("a.b".to_owned(), serde_json::json!({}));
    assert_eq!(status(portal.message().create(mine.id.clone(), publish, None).await.unwrap_err()), 403);
    assert_eq!(status(portal.application().list(None).await.unwrap_err()), 403);
    // A bad request is a validation error the SDK types, never a 5xx.
    let bad = svix.endpoint().create(mine.id.clone(), EndpointIn::new("not a url".into()), None).await.unwrap_err();
    assert_eq!(status(bad), 422);
}
