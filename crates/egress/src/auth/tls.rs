//! An endpoint's client certificate (mTLS) and server CA: checked when set, and
//! applied to the client its deliveries go through.

use reqwest::{Certificate, ClientBuilder, Identity};

/// The longest PEM text accepted for an identity or a CA.
pub const LONGEST_PEM: usize = 64 * 1024;
/// The most certificates a server CA may hold.
const MOST_ROOTS: usize = 16;

/// What TLS with an endpoint uses beyond the defaults.
#[derive(Debug, Clone)]
pub struct Tls {
    /// PEM: a private key and its certificate chain, the leaf first.
    identity: Option<Vec<u8>>,
    /// PEM: the roots the endpoint's certificate must chain to, in place of the system's.
    roots: Option<String>,
}

impl Tls {
    /// Both as stored (checked when they were set; checked again, since a stored
    /// value is only as good as the release that wrote it).
    pub fn new(identity: Option<Vec<u8>>, roots: Option<String>) -> Result<Self, String> {
        if let Some(pem) = &identity {
            check_identity(pem)?;
        }
        if let Some(pem) = &roots {
            check_ca(pem)?;
        }
        Ok(Tls { identity, roots })
    }

    /// The builder with the identity and the roots (and, with roots, none of the system's).
    pub fn apply(&self, mut builder: ClientBuilder) -> Result<ClientBuilder, String> {
        if let Some(pem) = &self.identity {
            builder = builder.identity(Identity::from_pem(pem).map_err(|e| format!("the client certificate: {e}"))?);
        }
        if let Some(pem) = &self.roots {
            builder = builder.tls_built_in_root_certs(false);
            for cert in roots(pem)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(builder)
    }
}

fn roots(pem: &str) -> Result<Vec<Certificate>, String> {
    let certs =
        Certificate::from_pem_bundle(pem.as_bytes()).map_err(|_| "`cert` is not PEM certificates".to_owned())?;
    match certs.len() {
        0 => Err("`cert` holds no PEM certificate".into()),
        n if n > MOST_ROOTS => Err(format!("`cert` holds {n} certificates; at most {MOST_ROOTS}")),
        _ => Ok(certs),
    }
}

/// A server CA: one or more PEM certificates, each one parsed.
pub fn check_ca(pem: &str) -> Result<(), String> {
    if pem.len() > LONGEST_PEM {
        return Err(format!("`cert` is longer than {} KiB", LONGEST_PEM / 1024));
    }
    let certs = roots(pem)?;
    // A client with them is built once here, so a certificate it cannot use is
    // refused now rather than at every attempt.
    certs
        .into_iter()
        .fold(reqwest::Client::builder().tls_built_in_root_certs(false), |b, c| b.add_root_certificate(c))
        .build()
        .map(drop)
        .map_err(|e| format!("`cert` cannot be used as a root: {}", root_cause(&e)))
}

/// An identity: a private key (PKCS#8, PKCS#1 or SEC1) and its certificate chain,
/// in PEM, the key matching the first certificate.
pub fn check_identity(pem: &[u8]) -> Result<(), String> {
    if pem.len() > LONGEST_PEM {
        return Err(format!("`identity` is longer than {} KiB", LONGEST_PEM / 1024));
    }
    let identity = Identity::from_pem(pem)
        .map_err(|_| "`identity` must hold a PEM private key and a PEM certificate".to_owned())?;
    // Building a client loads the key and checks it against the certificate.
    reqwest::Client::builder()
        .identity(identity)
        .build()
        .map(drop)
        .map_err(|e| format!("`identity` cannot be used: {}", root_cause(&e)))
}

fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
