//! Property tests: no provider request, however malformed, makes a verifier, the
//! key extractors or the event-type reader panic. Run briefly by `make test`.

use std::collections::HashMap;

use proptest::prelude::*;

use crate::{
    extract::{event_type, key_value, KeySpec},
    verify::{preset, verify, Algorithm, Certificates, Encoding, HmacSpec, Provider, Request},
};

/// Header names the verifiers and extractors read, plus one they do not.
const NAMES: &[&str] = &[
    "stripe-signature",
    "x-hub-signature-256",
    "x-hub-signature",
    "x-shopify-hmac-sha256",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "x-twilio-signature",
    "i-twilio-idempotency-token",
    "x-square-hmacsha256-signature",
    "paddle-signature",
    "paypal-transmission-id",
    "paypal-transmission-time",
    "paypal-transmission-sig",
    "paypal-cert-url",
    "paypal-auth-algo",
    "x-twilio-email-event-webhook-signature",
    "x-twilio-email-event-webhook-timestamp",
    "x-signature-ed25519",
    "x-signature-timestamp",
    "authorization",
    "x-gitlab-token",
    "idempotency-key",
    "x-hubspot-signature-v3",
    "x-hubspot-request-timestamp",
    "x-zm-signature",
    "x-zm-request-timestamp",
    "linear-signature",
    "linear-delivery",
    "typeform-signature",
    "calendly-webhook-signature",
    "x-wc-webhook-signature",
    "x-github-hook-id",
    "x-github-delivery",
    "x-github-event",
    "x-shopify-webhook-id",
    "x-shopify-topic",
    "x-sig",
    "x-other",
];

fn headers() -> impl Strategy<Value = HashMap<String, String>> {
    let value = prop_oneof![
        any::<String>(),
        "(t=[0-9]{0,12},)?(v1=[0-9a-f]{0,64}[, ]?){0,3}",
        "ts=[0-9]{0,12};(h1=[0-9a-f]{0,64};?){0,3}",
        "(v1a?,[A-Za-z0-9+/=]{0,90} ?){0,3}",
        "(sha1|sha256)=[0-9a-fA-F]{0,70}",
        "v0=[0-9a-f]{0,70}",
        "[0-9a-f]{0,130}",
        "[A-Za-z0-9+/=]{0,120}",
        "Basic [A-Za-z0-9+/=]{0,40}",
        "https?://(127\\.0\\.0\\.1|api\\.paypal\\.com)(:[0-9]{0,6})?/[a-z/]{0,20}",
        "-?[0-9]{0,20}",
    ];
    proptest::collection::hash_map(proptest::sample::select(NAMES).prop_map(str::to_owned), value, 0..8)
}

fn provider() -> impl Strategy<Value = Provider> {
    let hmac = ("x-sig|x-other", any::<bool>(), any::<bool>(), proptest::option::of(any::<String>())).prop_map(
        |(header, sha512, base64, prefix)| {
            Provider::Hmac(HmacSpec {
                header,
                algorithm: if sha512 { Algorithm::Sha512 } else { Algorithm::Sha256 },
                encoding: if base64 { Encoding::Base64 } else { Encoding::Hex },
                prefix,
            })
        },
    );
    let named = proptest::sample::select(Provider::NAMES)
        .prop_filter_map("hmac needs a spec", |name| Provider::parse(name, None).ok());
    prop_oneof![named, hmac]
}

fn secret() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "whsec_[A-Za-z0-9+/=]{0,44}",
        "whpk_[A-Za-z0-9+/=]{0,44}",
        "[0-9a-f]{64}",
        "[a-z]{1,8}:[a-z]{1,8}",
    ]
}

fn key_spec() -> impl Strategy<Value = KeySpec> {
    prop_oneof![
        Just(KeySpec::Provider),
        Just(KeySpec::Provider),
        any::<String>().prop_map(KeySpec::Header),
        "/?[a-z0-9/~]{0,12}".prop_map(KeySpec::JsonPointer),
        proptest::collection::vec("/?[a-z0-9/]{0,8}", 0..4).prop_map(KeySpec::Fields),
        Just(KeySpec::Body(true)),
        Just(KeySpec::Disabled(true)),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        r#"\{"id": ?"[^"]{0,20}", ?"type": ?"[^"]{0,20}"(, "event_id": [0-9a-z"]{0,10})?\}"#
            .prop_map(String::into_bytes),
        r#"\{"event": ?"endpoint\.url_validation", ?"payload": ?\{"plainToken": ?"[^"]{0,80}"\}\}"#
            .prop_map(String::into_bytes),
        r#"\{"type": ?(0|1|2|"url_verification"), ?"challenge": ?"[a-z]{0,9}"(, "event": \{\})?\}"#
            .prop_map(String::into_bytes),
        r#"\{"signature": ?\{"timestamp": ?"[0-9]{0,10}", ?"token": ?"[a-z]{0,10}", ?"signature": ?"[0-9a-f]{0,64}"\}\}"#
            .prop_map(String::into_bytes),
        "(webhook_id=[0-9]{0,22}|[a-zA-Z]{1,8}=[^&]{0,10}(&[a-zA-Z]{1,8}=[^&]{0,10}){0,4})".prop_map(String::into_bytes),
    ]
}

fn url() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "https?://[a-z.]{0,12}(:[0-9]{1,5})?/[a-z/]{0,10}(\\?[a-zA-Z0-9=&%]{0,30})?"]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_request_makes_a_verifier_or_a_handshake_panic(
        p in provider(),
        secrets in proptest::collection::vec(secret(), 0..3),
        h in headers(),
        b in body(),
        url in url(),
        now in any::<i64>(),
    ) {
        // Only loopback is on this list; the generated certificate URLs name
        // 127.0.0.1 or PayPal, so nothing but loopback is ever fetched.
        let certs = Certificates::new(&["http://127.0.0.1:9/".into()], std::time::Duration::from_millis(50));
        let req = Request { provider: &p, headers: &h, body: &b, method: "POST", url: &url, now };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let _ = rt.block_on(verify(&req, &secrets, &certs));
        let preset = preset(&p);
        if let Some(ping) = preset.unsigned_ping {
            let _ = ping(&req);
        }
        if let Some(handshake) = preset.handshake {
            if let Some(answer) = handshake(&req, &secrets) {
                prop_assert!((200..500).contains(&answer.status));
            }
        }
    }

    #[test]
    fn no_request_makes_the_key_or_event_type_readers_panic(
        p in provider(),
        spec in key_spec(),
        h in headers(),
        b in body(),
        path in proptest::option::of("/?[a-z0-9/~]{0,12}"),
    ) {
        let req = Request { provider: &p, headers: &h, body: &b, method: "POST", url: "", now: 0 };
        let _ = key_value(&spec, &req);
        let t = event_type(path.as_deref(), &req);
        // The event type is always filterable: the charset of a uid, bounded.
        prop_assert!(!t.is_empty() && t.len() <= 256);
        prop_assert!(t.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c)), "{t}");
    }
}
