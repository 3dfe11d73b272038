//! TLS to Postgres as libpq reads it from `DATABASE_URL`: `sslmode`
//! (`disable|allow|prefer|require|verify-ca|verify-full`), `sslrootcert` (a PEM
//! file, or `system` for the operating system's roots), and `sslcert`/`sslkey`
//! for a client certificate. rustls does the work; no OpenSSL is needed to build.
//!
//! tokio-postgres itself knows only `disable|prefer|require`, so the TLS settings
//! are taken out of the URL here and turned into a rustls configuration.

use std::sync::Arc;

use rustls::{
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    client::WebPkiServerVerifier,
    crypto::{ring, CryptoProvider},
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName, UnixTime},
    CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::store::StoreError;

/// What `sslmode` asks of the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Encrypt, trust any certificate (`prefer`, `require`, as libpq without a root certificate).
    Nothing,
    /// The chain must lead to a trusted root; the name is not checked (`verify-ca`).
    Chain,
    /// Chain and host name (`verify-full`).
    Full,
}

/// The TLS settings of one `DATABASE_URL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub check: Check,
    /// How `sslmode` was written, for messages.
    pub sslmode: String,
    pub root_cert: Option<String>,
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
}

/// Splits a `postgres://` URL into the URL tokio-postgres accepts and the TLS
/// settings. A key-value connection string is passed through unchanged.
pub fn split(url: &str) -> Result<(String, TlsSettings), StoreError> {
    let mut s = TlsSettings {
        mode: SslMode::Prefer,
        check: Check::Nothing,
        sslmode: "prefer".into(),
        root_cert: None,
        client_cert: None,
        client_key: None,
    };
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let Some((base, query)) = url.split_once('?').filter(|_| is_url) else { return Ok((url.to_owned(), s)) };
    let mut kept = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "sslmode" => s.sslmode = v.into_owned(),
            "sslrootcert" => s.root_cert = Some(v.into_owned()),
            "sslcert" => s.client_cert = Some(v.into_owned()),
            "sslkey" => s.client_key = Some(v.into_owned()),
            _ => {
                kept.append_pair(&k, &v);
            }
        }
    }
    (s.mode, s.check) = match s.sslmode.as_str() {
        "disable" => (SslMode::Disable, Check::Nothing),
        // libpq's `allow` tries without TLS first; tokio-postgres can only try TLS first.
        "allow" | "prefer" => (SslMode::Prefer, Check::Nothing),
        "require" => (SslMode::Require, Check::Nothing),
        "verify-ca" => (SslMode::Require, Check::Chain),
        "verify-full" => (SslMode::Require, Check::Full),
        other => {
            return Err(StoreError::Tls(format!(
                "DATABASE_URL: sslmode `{other}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
            )))
        }
    };
    // As libpq: a root certificate given with `prefer` or `require` is checked as `verify-ca`.
    if s.check == Check::Nothing && s.mode != SslMode::Disable && s.root_cert.is_some() {
        s.check = Check::Chain;
    }
    if s.client_cert.is_some() != s.client_key.is_some() {
        return Err(StoreError::Tls("DATABASE_URL: sslcert and sslkey must be given together".into()));
    }
    let rest = kept.finish();
    let url = if rest.is_empty() { base.to_owned() } else { format!("{base}?{rest}") };
    Ok((url, s))
}

/// The rustls connector for these settings. Reads every file now, so a missing or
/// unreadable one fails at start, naming its setting.
pub fn connector(s: &TlsSettings) -> Result<MakeRustlsConnect, StoreError> {
    connector_with(s, || roots(s.root_cert.as_deref()))
}

/// The connector for a database a tenant names (a Postgres destination):
/// `sslmode` as libpq reads it, the roots from PEM text the tenant gave (never a
/// file of this host), or the system's; no client certificate.
pub fn tenant_connector(s: &TlsSettings, root_pem: Option<&str>) -> Result<MakeRustlsConnect, StoreError> {
    if s.root_cert.is_some() || s.client_cert.is_some() {
        return Err(StoreError::Tls("certificate files cannot be named here".into()));
    }
    let s = TlsSettings {
        check: if s.check == Check::Nothing && s.mode != SslMode::Disable && root_pem.is_some() {
            Check::Chain
        } else {
            s.check
        },
        ..s.clone()
    };
    connector_with(&s, || match root_pem {
        None => roots(None),
        Some(pem) => {
            let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::Tls(format!("sslRootCert: {e}")))?;
            let mut roots = RootCertStore::empty();
            if roots.add_parsable_certificates(certs).0 == 0 {
                return Err(StoreError::Tls("sslRootCert holds no certificate".into()));
            }
            Ok(roots)
        }
    })
}

fn connector_with(
    s: &TlsSettings,
    roots: impl FnOnce() -> Result<RootCertStore, StoreError>,
) -> Result<MakeRustlsConnect, StoreError> {
    let provider = Arc::new(ring::default_provider());
    let inner = match s.check {
        Check::Nothing => None,
        Check::Chain | Check::Full => {
            let roots = roots()?;
            let v = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| StoreError::Tls(format!("DATABASE_URL: sslrootcert: {e}")))?;
            Some(v)
        }
    };
    let verifier = Arc::new(Verifier { check: s.check, inner, provider: provider.clone(), sslmode: s.sslmode.clone() });
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match (&s.client_cert, &s.client_key) {
        (Some(cert), Some(key)) => {
            let certs = CertificateDer::pem_file_iter(cert)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| StoreError::Tls(format!("DATABASE_URL: sslcert `{cert}`: {e}")))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| StoreError::Tls(format!("DATABASE_URL: sslkey `{key}`: {e}")))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| StoreError::Tls(format!("DATABASE_URL: sslcert/sslkey: {e}")))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The trusted roots: the PEM file `sslrootcert` names, or the system's.
fn roots(root_cert: Option<&str>) -> Result<RootCertStore, StoreError> {
    let mut roots = RootCertStore::empty();
    match root_cert {
        None | Some("system") => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(StoreError::Tls(
                    "DATABASE_URL: sslrootcert: no system root certificates found; name a PEM file".into(),
                ));
            }
        }
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| StoreError::Tls(format!("DATABASE_URL: sslrootcert `{path}`: {e}")))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(StoreError::Tls(format!("DATABASE_URL: sslrootcert `{path}` holds no certificate")));
            }
        }
    }
    Ok(roots)
}

/// Checks the server's certificate as `sslmode` asks, and says which setting
/// refused it.
#[derive(Debug)]
struct Verifier {
    check: Check,
    inner: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
    sslmode: String,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(inner) = &self.inner else { return Ok(ServerCertVerified::assertion()) };
        match inner.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Ok(v) => Ok(v),
            // The chain is checked before the name: a name error means the chain held.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Chain => Ok(ServerCertVerified::assertion()),
            Err(e) => Err(rustls::Error::General(format!(
                "Postgres's certificate refused under sslmode={} (see sslrootcert in DATABASE_URL): {e}",
                self.sslmode
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_settings_are_taken_out_of_the_url_and_the_rest_is_kept() {
        let (url, s) =
            split("postgres://u:p@db:5432/x?sslmode=verify-full&application_name=a&sslrootcert=%2Fca.pem").unwrap();
        assert_eq!(url, "postgres://u:p@db:5432/x?application_name=a");
        assert_eq!((s.mode, s.check), (SslMode::Require, Check::Full));
        assert_eq!(s.root_cert.as_deref(), Some("/ca.pem"));
    }

    #[test]
    fn each_sslmode_maps_as_libpq_reads_it() {
        let mode = |m: &str| split(&format!("postgres://h/d?sslmode={m}")).map(|(_, s)| (s.mode, s.check));
        assert_eq!(mode("disable").unwrap(), (SslMode::Disable, Check::Nothing));
        assert_eq!(mode("prefer").unwrap(), (SslMode::Prefer, Check::Nothing));
        assert_eq!(mode("require").unwrap(), (SslMode::Require, Check::Nothing));
        assert_eq!(mode("verify-ca").unwrap(), (SslMode::Require, Check::Chain));
        assert!(mode("verify-everything").unwrap_err().to_string().contains("sslmode"));
        let (_, s) = split("postgres://h/d?sslmode=require&sslrootcert=/ca.pem").unwrap();
        assert_eq!(s.check, Check::Chain, "a root certificate makes require check the chain, as libpq does");
        let (url, s) = split("postgres://h/d").unwrap();
        assert_eq!((url.as_str(), s.mode), ("postgres://h/d", SslMode::Prefer));
    }

    #[test]
    fn a_missing_file_is_named_with_its_setting() {
        let (_, s) = split("postgres://h/d?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem").unwrap();
        let e = connector(&s).err().expect("refused").to_string();
        assert!(e.contains("sslrootcert") && e.contains("/nonexistent/ca.pem"), "{e}");
        assert!(split("postgres://h/d?sslcert=/c.pem").unwrap_err().to_string().contains("sslkey"));
    }
}
