//! PayPal: `PAYPAL-TRANSMISSION-SIG`, a base64 SHA256withRSA signature over
//! `<transmission id>|<transmission time>|<webhook id>|<CRC32 of the body>`, made
//! with the certificate `PAYPAL-CERT-URL` names. The source's secret is its
//! webhook id. The certificate is fetched only from a URL under an allow-listed
//! prefix (`HOOKGATE_PAYPAL_CERT_URLS`, PayPal's API hosts over HTTPS by default),
//! without following redirects, bounded in time and size, and cached for a day;
//! the trust in it is the allow-listed host's TLS certificate. The event's `id` is
//! the key (the same on PayPal's retries), `event_type` the type.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use base64::{engine::general_purpose::STANDARD, Engine};
use hookgate_egress::fetch::{FetchError, Fetcher};
use rustls_pki_types::{pem::PemObject, CertificateDer};

use super::scheme::header;
use super::{Check, KeyRule, Preset, Request, TypeRule, VerifyError};

pub const PRESET: Preset = Preset {
    check: Check::Certificate,
    key: KeyRule::Pointer("/id"),
    event_type: TypeRule::Pointer("/event_type"),
    handshake: None,
    unsigned_ping: None,
};

const SIG: &str = "paypal-transmission-sig";
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
            Err(FetchError::Unavailable(e)) => Err(VerifyError::CertificateUnavailable(e)),
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
    let (id, time) = (header(req.headers, "paypal-transmission-id")?, header(req.headers, "paypal-transmission-time")?);
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

pub async fn verify(req: &Request<'_>, webhook_ids: &[String], certs: &Certificates) -> Result<(), VerifyError> {
    header(req.headers, "paypal-transmission-id")?;
    header(req.headers, "paypal-transmission-time")?;
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
        let req = Request { provider: &p, headers: &hs, body: BODY, method: "POST", url: "", now: 0 };
        let started = Instant::now();
        assert!(matches!(verify(&req, &["W".into()], &certs).await, Err(VerifyError::Certificate(_))));
        assert!(started.elapsed() < Duration::from_millis(500), "refused before any connection");
    }
}
