//! Alert e-mails: one SMTP client per process, built from the operator's
//! `HOOKGATE_SMTP_URL` (STARTTLS or TLS with rustls, AUTH), each send bounded.

use std::time::Duration;

use hookgate_shared::config::{Smtp, SmtpTls};
use lettre::{
    message::{header::ContentType, Mailbox},
    transport::smtp::{
        authentication::Credentials,
        client::{Certificate, Tls, TlsParameters},
    },
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
};

/// The longest one SMTP exchange (connect, TLS, AUTH, the message) may take.
const SEND_BOUND: Duration = Duration::from_secs(20);

/// Why an e-mail did not go.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// The server refused it for good (5xx), or no address could be used: retrying cannot help.
    #[error("{0}")]
    Permanent(String),
    /// The server was unreachable, timed out or answered 4xx: worth trying later.
    #[error("{0}")]
    Transient(String),
}

/// The SMTP client and the `From`.
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl Mailer {
    /// Builds the client (no connection yet); an unreadable CA file or `From` is an error.
    pub fn new(s: &Smtp) -> Result<Mailer, String> {
        let from: Mailbox = s.from.parse().map_err(|e| format!("HOOKGATE_ALERT_FROM `{}`: {e}", s.from))?;
        let mut params = TlsParameters::builder(s.host.clone());
        if let Some(path) = &s.ca_file {
            let pem = std::fs::read(path).map_err(|e| format!("HOOKGATE_SMTP_CA_FILE `{path}`: {e}"))?;
            let cert = Certificate::from_pem(&pem).map_err(|e| format!("HOOKGATE_SMTP_CA_FILE `{path}`: {e}"))?;
            params = params.add_root_certificate(cert);
        }
        let params = params.build().map_err(|e| format!("the SMTP client's TLS settings: {e}"))?;
        let tls = match s.tls {
            SmtpTls::StartTls => Tls::Required(params),
            SmtpTls::Implicit => Tls::Wrapper(params),
            SmtpTls::None => Tls::None,
        };
        let mut b = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(s.host.clone())
            .port(s.port)
            .tls(tls)
            .timeout(Some(Duration::from_secs(10)));
        if let Some((user, pass)) = &s.credentials {
            b = b.credentials(Credentials::new(user.clone(), pass.clone()));
        }
        Ok(Mailer { transport: b.build(), from })
    }

    /// Sends `subject` and `body` (plain text) to the comma-separated `to`; an
    /// address that does not parse is left out (all of them: permanent).
    pub async fn send(&self, to: &str, subject: &str, body: &str) -> Result<(), MailError> {
        let mut m = Message::builder().from(self.from.clone()).subject(subject).header(ContentType::TEXT_PLAIN);
        let mut any = false;
        for a in to.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            if let Ok(mb) = a.parse::<Mailbox>() {
                m = m.to(mb);
                any = true;
            }
        }
        if !any {
            return Err(MailError::Permanent("no usable address".into()));
        }
        let message = m.body(body.to_owned()).map_err(|e| MailError::Permanent(e.to_string()))?;
        match tokio::time::timeout(SEND_BOUND, self.transport.send(message)).await {
            Err(_) => Err(MailError::Transient(format!("the SMTP server took over {}s", SEND_BOUND.as_secs()))),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) if e.is_permanent() => Err(MailError::Permanent(e.to_string())),
            Ok(Err(e)) => Err(MailError::Transient(e.to_string())),
        }
    }
}
