//! Property tests: the SSRF classifier judges every address, IPv4 the same in
//! each of its IPv6 embeddings, and no URL or response body makes the guard or the
//! attempt's record panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use crate::{
    deliver::send::response_text,
    signing::signature_header,
    ssrf::{classify, Guard},
};

/// `::a.b.c.d` and `::ffff:0:a.b.c.d`: the embeddings `to_ipv6_mapped` does not make.
fn embedded(v4: Ipv4Addr, translated: bool) -> Ipv6Addr {
    let [a, b, c, d] = v4.octets();
    let tag = if translated { 0xffff } else { 0 };
    Ipv6Addr::new(0, 0, 0, 0, tag, 0, u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]))
}

proptest! {
    #[test]
    fn an_ipv4_address_is_judged_alike_in_every_ipv6_embedding(raw in any::<u32>()) {
        let v4 = Ipv4Addr::from(raw);
        let class = classify(IpAddr::V4(v4));
        prop_assert_eq!(classify(IpAddr::V6(v4.to_ipv6_mapped())), class);
        prop_assert_eq!(classify(IpAddr::V6(embedded(v4, true))), class);
        // `::` and `::1` are IPv6's own unspecified and loopback; both are refused anyway.
        if raw > 1 {
            prop_assert_eq!(classify(IpAddr::V6(embedded(v4, false))), class);
        } else {
            prop_assert!(classify(IpAddr::V6(embedded(v4, false))).is_some());
        }
    }

    #[test]
    fn every_address_gets_a_verdict_and_a_refusal_names_its_class(raw in any::<u128>()) {
        let addr = IpAddr::V6(Ipv6Addr::from(raw));
        let verdict = Guard::default().check(addr);
        prop_assert_eq!(verdict.is_err(), classify(addr).is_some());
        if let Err(b) = verdict {
            prop_assert!(b.to_string().contains(b.class));
        }
    }

    #[test]
    fn no_url_makes_the_guard_panic(s in any::<String>(), host in "[a-z0-9.:\\[\\]-]{0,40}") {
        for candidate in [s, format!("http://{host}/x")] {
            if let Ok(url) = url::Url::parse(&candidate) {
                let _ = Guard::default().check_url(&url);
            }
        }
    }

    #[test]
    fn any_response_body_is_kept_as_storable_text(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        prop_assert!(!response_text(&body).contains('\0'));
    }

    #[test]
    fn any_key_and_body_sign(keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..3),
                             id in any::<String>(), ts in any::<i64>(), body in proptest::collection::vec(any::<u8>(), 0..128)) {
        let secrets: Vec<_> = keys.into_iter().map(crate::signing::EndpointSecret::Hmac).collect();
        let header = signature_header(&secrets, &id, ts, &body);
        prop_assert_eq!(header.split(' ').count(), secrets.len());
    }
}
