//! Property tests: no provider request, however malformed, makes a verifier, the
//! key extractors or the event-type reader panic. Run briefly by `make test`.

use std::collections::HashMap;

use proptest::prelude::*;

use crate::{
    extract::{event_type, key_value, KeySpec},
    verify::{verify, Algorithm, Encoding, HmacSpec, Provider},
};

/// Header names the verifiers and extractors read, plus one they do not.
const NAMES: &[&str] = &[
    "stripe-signature",
    "x-hub-signature-256",
    "x-shopify-hmac-sha256",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
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
        "(v1,[A-Za-z0-9+/=]{0,50} ?){0,3}",
        "sha256=[0-9a-fA-F]{0,70}",
        "v0=[0-9a-f]{0,70}",
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
    prop_oneof![
        Just(Provider::Stripe),
        Just(Provider::Github),
        Just(Provider::Shopify),
        Just(Provider::Slack),
        Just(Provider::StandardWebhooks),
        Just(Provider::None),
        hmac,
    ]
}

fn key_spec() -> impl Strategy<Value = KeySpec> {
    prop_oneof![
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
    ]
}

proptest! {
    #[test]
    fn no_request_makes_a_verifier_panic(
        p in provider(),
        secrets in proptest::collection::vec(any::<String>(), 0..3),
        h in headers(),
        b in body(),
        now in any::<i64>(),
    ) {
        let _ = verify(&p, &secrets, &h, &b, now);
    }

    #[test]
    fn no_request_makes_the_key_or_event_type_readers_panic(
        p in provider(),
        spec in key_spec(),
        h in headers(),
        b in body(),
        path in proptest::option::of("/?[a-z0-9/~]{0,12}"),
    ) {
        let _ = key_value(&p, &spec, &h, &b);
        let t = event_type(&p, path.as_deref(), &h, &b);
        // The event type is always filterable: the charset of a uid, bounded.
        prop_assert!(!t.is_empty() && t.len() <= 256);
        prop_assert!(t.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c)), "{t}");
    }
}
