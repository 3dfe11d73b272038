//! PayPal: `PAYPAL-TRANSMISSION-SIG`, a base64 SHA256withRSA signature over
//! `<transmission id>|<transmission time>|<webhook id>|<CRC32 of the body>`, made
//! with the certificate `PAYPAL-CERT-URL` names. The source's secret is its
//! webhook id. The certificate is fetched only from a URL under an allow-listed
//! prefix (`HOOKGATE_PAYPAL_CERT_URLS`, PayPal's API hosts over HTTPS by default),
//! without following redirects, bounded in time and size, and cached for a day;
//! the trust in it is the allow-listed host's TLS certificate.
//!
//! The body is covered only by its CRC32, which is linear: anyone who saw one
//! signed request can write any other body with the same CRC32 (a few dozen
//! chosen characters in a JSON string) and the signature still holds. So what
//! is admitted is keyed on what PayPal signs, the transmission id, never on the
//! body's `id`, and the signed transmission time must be within
//! [`TOLERANCE_SECS`] of now: one captured transmission admits one event, once,
//! and only for minutes. (PayPal's retries are new transmissions, with new ids:
//! a tenant dedupes those by the body's `id`, as docs/receiving.md says.)
//! `event_type` is the type.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use base64::{engine::general_purpose::STANDARD, Engine};
use hookgate_egress::fetch::{FetchError, Fetcher};
use rustls_pki_types::{pem::PemObject, CertificateDer};

use super::scheme::{check_timestamp, header, TOLERANCE_SECS};
use super::{Check, DoorRules, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Certificate,
    key: KeyRule::Header(TRANSMISSION_ID),
    event_type: TypeRule::Pointer("/event_type"),
    handshake: None,
    unsigned_ping: None,
    // PayPal covers the body by a CRC32 only, which anyone can match: a rule over
    // the body would admit forged bodies as new events.
    door: DoorRules {
        own_key_only: Some(
            "is keyed by its signed transmission id and takes no other rule \
             (PayPal covers the body by a CRC32, which anyone can match)",
        ),
        ..DoorRules::PLAIN
    },
};

const SIG: &str = "paypal-transmission-sig";
const TRANSMISSION_ID: &str = "paypal-transmission-id";
const TRANSMISSION_TIME: &str = "paypal-transmission-time";
const CERT_URL: &str = "paypal-cert-url";
/// A certificate is a few KiB; anything much larger is not one.
const MAX_CERT_BYTES: usize = 64 * 1024;
const CACHE_FOR: Duration = Duration::from_secs(86_400);
const CACHE_ENTRIES: usize = 256;

/// Fetches a process makes per minute at most: PayPal has a handful of
/// certificates, and unauthenticated requests naming new URLs must not turn
/// Hookgate into a stream of requests to PayPal (whose throttling would then fail
/// every tenant's PayPal source).
const FETCHES_PER_MINUTE: usize = 30;
/// A URL whose fetch failed is not tried again sooner than this.
const RETRY_FAILED_AFTER: Duration = Duration::from_secs(300);
const FAILED_ENTRIES: usize = 1024;

/// Fetched certificates (DER) by URL, with when they were fetched; the times of
/// the last minute's fetches of new URLs; and the new URLs that failed.
#[derive(Default)]
struct Cache {
    entries: HashMap<String, (Arc<Vec<u8>>, Instant)>,
    fetches: std::collections::VecDeque<Instant>,
    /// URLs never fetched successfully, with when they last failed.
    failed: HashMap<String, Instant>,
}

/// PayPal's signing certificates: where they may come from, and those fetched.
pub struct Certificates {
    allowed: Vec<url::Url>,
    fetcher: Fetcher,
    cache: Mutex<Cache>,
}

impl Certificates {
    /// `allowed`: URL prefixes (validated by the configuration); `timeout` bounds a fetch.
    pub fn new(allowed: &[String], timeout: Duration) -> Self {
        Certificates {
            allowed: allowed.iter().filter_map(|p| url::Url::parse(p).ok()).collect(),
            fetcher: Fetcher::new(timeout),
            cache: Mutex::new(Cache::default()),
        }
    }

    /// Whether `url` is under an allowed prefix: same scheme, host and port, and
    /// a path that starts with the prefix's.
    pub fn allows(&self, url: &url::Url) -> bool {
        url.username().is_empty()
            && url.password().is_none()
            // Neither is sent for a certificate; either would make one certificate many cache entries.
            && url[url::Position::BeforeQuery..].is_empty()
            && self.allowed.iter().any(|p| {
                p.scheme() == url.scheme()
                    && p.host_str() == url.host_str()
                    && p.port_or_known_default() == url.port_or_known_default()
                    && url.path().starts_with(p.path())
            })
    }

    /// The certificate (DER) at an allowed URL: cached, or fetched. A URL never
    /// fetched before spends the per-minute budget (and one that just failed is
    /// not tried again for a while), so requests naming ever new URLs cannot starve
    /// the certificates in use: those are refetched when they expire outside the
    /// budget, and served stale if the refetch fails.
    async fn get(&self, url: &url::Url) -> Result<Arc<Vec<u8>>, VerifyError> {
        let key = url.as_str().to_owned();
        let stale = {
            let mut cache = self.cache.lock().expect("cache lock");
            match cache.entries.get(&key) {
                Some((der, at)) if at.elapsed() < CACHE_FOR => return Ok(der.clone()),
                Some((der, _)) => Some(der.clone()),
                None => {
                    if cache.failed.get(&key).is_some_and(|at| at.elapsed() < RETRY_FAILED_AFTER) {
                        return Err(VerifyError::CertificateUnavailable("this certificate URL failed just now".into()));
                    }
                    while cache.fetches.front().is_some_and(|t| t.elapsed() > Duration::from_secs(60)) {
                        cache.fetches.pop_front();
                    }
                    if cache.fetches.len() >= FETCHES_PER_MINUTE {
                        let spent = "too many new certificate URLs this minute";
                        return Err(VerifyError::CertificateUnavailable(spent.into()));
                    }
                    cache.fetches.push_back(Instant::now());
                    None
                }
            }
        };
        let fetched = match self.fetcher.get(url, MAX_CERT_BYTES).await {
            Ok(pem) => parse(&pem),
            Err(FetchError::Unavailable(e)) => {
                // The caller is unauthenticated: what failed, and where, is for the operator's log only.
                tracing::warn!(url = %url, error = %e, "a PayPal signing certificate could not be fetched");
                Err(VerifyError::CertificateUnavailable("its host did not answer".into()))
            }
            Err(FetchError::TooLarge(_)) => {
                Err(VerifyError::Certificate(format!("`{CERT_URL}` is not a certificate (too large)")))
            }
        };
        let mut cache = self.cache.lock().expect("cache lock");
        let der = match (fetched, stale) {
            (Ok(der), _) => Arc::new(der),
            // The certificate in use stays in use while its host is away.
            (Err(_), Some(stale)) => return Ok(stale),
            (Err(e), None) => {
                if cache.failed.len() >= FAILED_ENTRIES {
                    cache.failed.retain(|_, at| at.elapsed() < RETRY_FAILED_AFTER);
                    if cache.failed.len() >= FAILED_ENTRIES {
                        cache.failed.clear();
                    }
                }
                cache.failed.insert(key, Instant::now());
                return Err(e);
            }
        };
        if cache.entries.len() >= CACHE_ENTRIES && !cache.entries.contains_key(&key) {
            // The oldest goes: a flood of new URLs (bounded by the fetch budget) cannot
            // empty the cache of the certificates in use.
            let oldest = cache.entries.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                cache.entries.remove(&k);
            }
        }
        cache.failed.remove(&key);
        cache.entries.insert(key, (der.clone(), Instant::now()));
        Ok(der)
    }
}

/// The first certificate of a PEM file, as DER, checked to parse. The file must
/// be certificates and nothing else: a page that merely contains one is refused.
fn parse(pem: &[u8]) -> Result<Vec<u8>, VerifyError> {
    let bad = || VerifyError::Certificate(format!("`{CERT_URL}` does not name a usable certificate"));
    let text = std::str::from_utf8(pem).map_err(|_| bad())?;
    let only_certificates = text.lines().map(str::trim).all(|l| {
        l.is_empty()
            || l == "-----BEGIN CERTIFICATE-----"
            || l == "-----END CERTIFICATE-----"
            || l.bytes().all(|c| c.is_ascii_alphanumeric() || b"+/=".contains(&c))
    });
    if !only_certificates || !text.trim_start().starts_with("-----BEGIN CERTIFICATE-----") {
        return Err(bad());
    }
    let der = CertificateDer::from_pem_slice(pem).map_err(|_| bad())?;
    webpki::EndEntityCert::try_from(&der).map_err(|_| bad())?;
    Ok(der.as_ref().to_vec())
}

/// What the signature covers, for one webhook id.
fn signed(id: &str, time: &str, webhook_id: &str, body: &[u8]) -> String {
    format!("{id}|{time}|{webhook_id}|{}", crc32fast::hash(body))
}

/// Checks a signature against a certificate (DER) for any of the webhook ids.
fn check_with(der: &[u8], req: &Request, webhook_ids: &[String], sig: &[u8]) -> Result<(), VerifyError> {
    let (id, time) = (header(req.headers, TRANSMISSION_ID)?, header(req.headers, TRANSMISSION_TIME)?);
    let der = CertificateDer::from(der);
    let cert = webpki::EndEntityCert::try_from(&der).map_err(|_| VerifyError::Certificate("bad certificate".into()))?;
    let ok = webhook_ids.iter().any(|w| {
        let msg = signed(id, time, w, req.body);
        cert.verify_signature(webpki::ring::RSA_PKCS1_2048_8192_SHA256, msg.as_bytes(), sig).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(SIG.into()))
    }
}

/// Refuses a transmission time that is not RFC 3339 or is further than
/// [`TOLERANCE_SECS`] from now: a captured request is worth minutes, not ever.
fn check_time(req: &Request) -> Result<(), VerifyError> {
    let time = header(req.headers, TRANSMISSION_TIME)?;
    let at = chrono::DateTime::parse_from_rfc3339(time.trim())
        .map_err(|_| VerifyError::Malformed(TRANSMISSION_TIME.into()))?;
    check_timestamp(at.timestamp(), req.now, TOLERANCE_SECS)
}

pub async fn verify(req: &Request<'_>, webhook_ids: &[String], certs: &Certificates) -> Result<(), VerifyError> {
    header(req.headers, TRANSMISSION_ID)?;
    // Before any certificate is fetched: a stale capture costs nothing.
    check_time(req)?;
    if let Some(algo) = req.headers.get("paypal-auth-algo") {
        if algo.trim() != "SHA256withRSA" {
            return Err(VerifyError::Malformed("paypal-auth-algo".into()));
        }
    }
    let sig = STANDARD.decode(header(req.headers, SIG)?).map_err(|_| VerifyError::Malformed(SIG.into()))?;
    let url = url::Url::parse(header(req.headers, CERT_URL)?).map_err(|_| VerifyError::Malformed(CERT_URL.into()))?;
    if !certs.allows(&url) {
        return Err(VerifyError::Certificate(format!(
            "`{CERT_URL}` is not under an allowed prefix (HOOKGATE_PAYPAL_CERT_URLS); it was not fetched"
        )));
    }
    let der = certs.get(&url).await?;
    check_with(&der, req, webhook_ids, &sig)
}

#[cfg(test)]
mod tests {
    use super::super::scheme::testing::h;
    use super::super::Provider;
    use super::*;

    /// A self-signed RSA test certificate and a signature made with its key
    /// (`tests/vectors/paypal-test.*`, made with openssl: see the README there).
    const CERT: &str = include_str!("../../../../tests/vectors/paypal-test-cert.pem");
    const SIGNATURE: &str = include_str!("../../../../tests/vectors/paypal-test-signature.b64");
    const BODY: &[u8] = include_bytes!("../../../../tests/vectors/paypal-test-body.json");

    fn headers() -> std::collections::HashMap<String, String> {
        h(&[
            ("paypal-transmission-id", "69cd13f0-d67a-11e5-baa3-778b53f4ae55"),
            ("paypal-transmission-time", "2016-02-18T20:01:35Z"),
            ("paypal-auth-algo", "SHA256withRSA"),
            ("paypal-cert-url", "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77"),
        ])
    }

    #[test]
    fn a_signature_made_with_the_certificates_key_verifies_for_its_webhook_id_only() {
        let der = parse(CERT.as_bytes()).unwrap();
        let sig = STANDARD.decode(SIGNATURE.trim()).unwrap();
        let hs = headers();
        let p = Provider::Paypal;
        let req = |body| Request { provider: &p, headers: &hs, body, method: "POST", url: "", now: 0 };
        assert_eq!(check_with(&der, &req(BODY), &["1JE4291016473214C".into()], &sig), Ok(()));
        assert!(check_with(&der, &req(BODY), &["1JE4291016473214D".into()], &sig).is_err());
        assert!(check_with(&der, &req(b"{}"), &["1JE4291016473214C".into()], &sig).is_err());
        assert!(parse(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").is_err());
        let page = format!("<html>\n{CERT}\n</html>");
        assert!(parse(page.as_bytes()).is_err(), "a page that contains a certificate is not one");
    }

    /// A body of the form `{"id":"<id>","pad":"<64 chars>"}` whose CRC32 is
    /// `target`: the CRC is linear, so choosing each padding character between
    /// two that differ in one bit solves 32 equations over GF(2). What an
    /// attacker does with one captured PayPal request.
    fn forge(id: &str, target: u32) -> Vec<u8> {
        let body = |mask: u64| {
            let pad: String = (0..64).map(|i| if mask >> i & 1 == 1 { 'c' } else { 'a' }).collect();
            format!(r#"{{"id":"{id}","event_type":"PAYMENT.SALE.COMPLETED","pad":"{pad}"}}"#).into_bytes()
        };
        let base = crc32fast::hash(&body(0));
        let mut basis: [Option<(u32, u64)>; 32] = [None; 32];
        for i in 0..64 {
            let mut v = (crc32fast::hash(&body(1 << i)) ^ base, 1u64 << i);
            for bit in (0..32).rev() {
                if v.0 >> bit & 1 == 1 {
                    match basis[bit] {
                        Some(b) => v = (v.0 ^ b.0, v.1 ^ b.1),
                        None => {
                            basis[bit] = Some(v);
                            break;
                        }
                    }
                }
            }
        }
        let (mut want, mut mask) = (base ^ target, 0u64);
        for bit in (0..32).rev() {
            if want >> bit & 1 == 1 {
                let b = basis[bit].expect("64 random columns span the 32 bits");
                want ^= b.0;
                mask ^= b.1;
            }
        }
        body(mask)
    }

    #[test]
    fn a_forged_body_with_the_captured_crc_verifies_but_is_the_captured_transmission() {
        use crate::extract::{key_value, KeySpec};
        let der = parse(CERT.as_bytes()).unwrap();
        let sig = STANDARD.decode(SIGNATURE.trim()).unwrap();
        let hs = headers();
        let p = Provider::Paypal;
        let forged = forge("WH-FORGED", crc32fast::hash(BODY));
        assert_eq!(crc32fast::hash(&forged), crc32fast::hash(BODY));
        let req = |body| Request { provider: &p, headers: &hs, body, method: "POST", url: "", now: 1_455_825_695 };
        // The signature cannot tell them apart: that is PayPal's scheme.
        assert_eq!(check_with(&der, &req(&forged), &["1JE4291016473214C".into()], &sig), Ok(()));
        // But the key is the signed transmission id, so the forgery is a duplicate
        // of the captured event, never a new one.
        let key = |body| key_value(&KeySpec::Provider, &req(body)).unwrap().unwrap();
        assert_eq!(key(&forged), key(BODY));
        assert_eq!(key(BODY).1, b"69cd13f0-d67a-11e5-baa3-778b53f4ae55");
        assert_eq!(check_time(&req(BODY)), Ok(()));
    }

    proptest::proptest! {
        /// Whatever body an attacker writes, and whenever it is sent, a captured
        /// transmission admits one event at most, and only within the tolerance.
        #[test]
        fn a_captured_transmission_admits_no_other_event_and_expires(
            id in "[A-Za-z0-9-]{1,40}",
            late in -100_000i64..100_000,
        ) {
            use crate::extract::{key_value, KeySpec};
            let hs = headers();
            let p = Provider::Paypal;
            let signed_at = 1_455_825_695; // 2016-02-18T20:01:35Z, the header's time
            let forged = forge(&id, crc32fast::hash(BODY));
            proptest::prop_assert_eq!(crc32fast::hash(&forged), crc32fast::hash(BODY));
            let req = |body| Request { provider: &p, headers: &hs, body, method: "POST", url: "", now: signed_at + late };
            proptest::prop_assert_eq!(
                key_value(&KeySpec::Provider, &req(&forged)).unwrap(),
                key_value(&KeySpec::Provider, &req(BODY)).unwrap()
            );
            let fresh = late.abs() <= TOLERANCE_SECS;
            proptest::prop_assert_eq!(check_time(&req(&forged)).is_ok(), fresh);
        }
    }

    #[test]
    fn a_transmission_time_that_is_not_rfc_3339_is_malformed() {
        let p = Provider::Paypal;
        for bad in ["yesterday", "1455825695", "2016-02-18 20:01:35"] {
            let mut hs = headers();
            hs.insert(TRANSMISSION_TIME.into(), bad.into());
            let req = Request { provider: &p, headers: &hs, body: BODY, method: "POST", url: "", now: 1_455_825_695 };
            assert_eq!(check_time(&req), Err(VerifyError::Malformed(TRANSMISSION_TIME.into())), "{bad}");
        }
    }

    #[test]
    fn only_urls_under_an_allowed_prefix_are_fetched() {
        let certs =
            Certificates::new(&["https://api.paypal.com/v1/notifications/certs/".into()], Duration::from_secs(1));
        let ok = |u: &str| certs.allows(&url::Url::parse(u).unwrap());
        assert!(ok("https://api.paypal.com/v1/notifications/certs/CERT-1"));
        assert!(ok("https://API.paypal.com:443/v1/notifications/certs/CERT-1"));
        for bad in [
            "http://api.paypal.com/v1/notifications/certs/CERT-1",
            "https://api.paypal.com.evil.example/v1/notifications/certs/CERT-1",
            "https://api.paypal.com@evil.example/v1/notifications/certs/CERT-1",
            "https://evil.example/?https://api.paypal.com/v1/notifications/certs/",
            "https://api.paypal.com:8443/v1/notifications/certs/CERT-1",
            "https://api.paypal.com/v2/other",
            "https://user@api.paypal.com/v1/notifications/certs/CERT-1",
            "https://api.paypal.com/v1/notifications/certs/CERT-1#2",
            "https://api.paypal.com/v1/notifications/certs/CERT-1?x=1",
        ] {
            assert!(!ok(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_certificate_url_off_the_list_is_refused_without_a_fetch() {
        let certs = Certificates::new(&["https://api.paypal.com/".into()], Duration::from_secs(1));
        let mut hs = headers();
        hs.insert("paypal-transmission-sig".into(), "AAAA".into());
        hs.insert("paypal-cert-url".into(), "https://127.0.0.1:9/cert.pem".into());
        let p = Provider::Paypal;
        let req = Request { provider: &p, headers: &hs, body: BODY, method: "POST", url: "", now: 1_455_825_695 };
        let started = Instant::now();
        assert!(matches!(verify(&req, &["W".into()], &certs).await, Err(VerifyError::Certificate(_))));
        assert!(started.elapsed() < Duration::from_millis(500), "refused before any connection");
    }
}
