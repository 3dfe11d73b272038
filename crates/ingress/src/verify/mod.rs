//! Signature verification of provider webhooks, over the raw body bytes, with
//! constant-time comparison. One file per provider holds its [`Preset`]: the
//! signature check, the stable id, the event type and any handshake; [`preset`]
//! is the table that lists them. During a secret rotation every valid secret is
//! tried, and any one signature in a header that carries several may match.

mod airwallex;
mod basic_auth;
mod bitbucket;
mod calendly;
mod checkbook;
mod discord;
mod generic;
mod github;
mod gitlab;
mod hubspot;
mod intercom;
mod linear;
mod mailgun;
mod merge;
mod meta;
mod orum;
mod paddle;
mod pandadoc;
pub mod paypal;
mod port;
mod scheme;
mod segment;
mod sendgrid;
mod shopify;
mod slack;
mod square;
mod standard;
mod stripe;
mod svix;
mod tailscale;
mod telnyx;
mod token;
mod twilio;
mod typeform;
mod woocommerce;
mod zoom;

pub use hookgate_shared::source::{Algorithm, Encoding, HmacSpec, Provider};
pub use orum::rsa_public_key;
pub use paypal::Certificates;
pub use scheme::{ed25519_key_ok, TOLERANCE_SECS};
pub use sendgrid::p256_key_ok;
pub(crate) use token::matches as token_matches;

use crate::key::{KeyKind, KeyMissing};

/// Where a verifier reads headers from; lower-case names.
pub trait Headers {
    fn get(&self, name: &str) -> Option<&str>;
}

impl Headers for actix_web::http::header::HeaderMap {
    fn get(&self, name: &str) -> Option<&str> {
        actix_web::http::header::HeaderMap::get(self, name).and_then(|v| v.to_str().ok())
    }
}

impl Headers for std::collections::HashMap<String, String> {
    fn get(&self, name: &str) -> Option<&str> {
        std::collections::HashMap::get(self, name).map(String::as_str)
    }
}

/// A provider's request, as its verifier sees it.
pub struct Request<'a> {
    pub provider: &'a Provider,
    pub headers: &'a dyn Headers,
    pub body: &'a [u8],
    pub method: &'a str,
    /// The URL the provider posted to, query included, as it signs it.
    pub url: &'a str,
    /// Unix seconds.
    pub now: i64,
}

/// Why a request is refused; each says what a tenant can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("missing signature header `{0}`")]
    MissingHeader(String),
    #[error("the `{0}` header is malformed")]
    Malformed(String),
    #[error("no signature in `{0}` matches the source's secret")]
    Mismatch(String),
    #[error("the signed timestamp is more than {0} seconds away from now")]
    Timestamp(i64),
    /// The signed bytes cannot be split into their parts one way only (Checkbook's
    /// body and nonce, signed with nothing between them).
    #[error("{0}")]
    Ambiguous(&'static str),
    /// PayPal: the certificate URL is not on the allow-list, or is not a certificate.
    #[error("{0}")]
    Certificate(String),
    /// PayPal: the allow-listed certificate host did not answer; the provider retries.
    #[error("the signing certificate could not be fetched: {0}")]
    CertificateUnavailable(String),
}

impl VerifyError {
    pub fn code(&self) -> &'static str {
        match self {
            VerifyError::Timestamp(_) => "timestamp_out_of_tolerance",
            VerifyError::CertificateUnavailable(_) => "certificate_unavailable",
            _ => "invalid_signature",
        }
    }
}

/// An answer to a provider's set-up request (a URL challenge, a ping), given
/// instead of admitting anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    pub status: u16,
    pub body: Option<HandshakeBody>,
}

/// What a handshake answers, in the provider's own shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum HandshakeBody {
    /// Slack's `url_verification`: the challenge, echoed.
    Challenge { challenge: String },
    /// Zoom's `endpoint.url_validation`: the token, and its HMAC with the secret.
    #[serde(rename_all = "camelCase")]
    Token { encrypted_token: String, plain_token: String },
    /// Discord's interaction PING, answered with a PONG (`{"type": 1}`).
    Pong {
        #[serde(rename = "type")]
        kind: u8,
    },
    /// An unsigned ping a provider sends before it signs (`{"status": "ping"}`).
    Ping { status: &'static str },
    /// A malformed handshake, refused as any request is (`{code, detail}`).
    Refused { code: &'static str, detail: &'static str },
}

/// How a provider's requests are checked.
pub enum Check {
    Sync(fn(&Request, &[String]) -> Result<(), VerifyError>),
    /// PayPal: a certificate fetched from an allow-listed host signs.
    Certificate,
    Nothing,
}

/// A provider's own rule for its key: the value and its kind, or what is missing.
pub type KeyFn = fn(&Request) -> Result<(KeyKind, Vec<u8>), KeyMissing>;

/// A provider's answer to a verified set-up request, if this is one.
pub type HandshakeFn = fn(&Request, &[String]) -> Option<Handshake>;

/// Where a provider's stable id is, the default idempotency key.
pub enum KeyRule {
    Header(&'static str),
    Pointer(&'static str),
    /// No stable id of its own: the body itself.
    Body,
    Custom(KeyFn),
}

/// Where a provider's event type is.
pub enum TypeRule {
    Header(&'static str),
    Pointer(&'static str),
    Custom(fn(&Request) -> Option<String>),
    None,
}

/// Everything Hookgate knows of one provider.
pub struct Preset {
    pub check: Check,
    pub key: KeyRule,
    pub event_type: TypeRule,
    /// A set-up request, answered after its signature is verified, admitting nothing.
    pub handshake: Option<HandshakeFn>,
    /// An unsigned ping the provider sends once to test the URL (WooCommerce),
    /// answered 200 before verification; it carries nothing and admits nothing.
    pub unsigned_ping: Option<fn(&Request) -> bool>,
    /// What it needs of Hookgate's door beyond a signed `POST`.
    pub door: DoorRules,
}

/// What a provider needs of Hookgate's door beyond a signed `POST`: each its own,
/// set in the provider's file, read by the door and the API.
pub struct DoorRules {
    /// The only key its sources may have, and why: its own ([`KeyRule`]), when a
    /// rule over the body would admit forged events (PayPal).
    pub own_key_only: Option<&'static str>,
    /// Its sender checks the URL with a `GET` before it sends (Meta's
    /// `hub.challenge`, Adobe Sign's client id), answered by `door::subscribe`;
    /// only an ingest source's URL answers it.
    pub url_check: Option<UrlCheckFn>,
    /// A request header echoed on the answer of each admitted event (Adobe
    /// Sign takes a notification as delivered only with its client id echoed).
    pub echo_header: Option<&'static str>,
}

impl DoorRules {
    /// A signed `POST`, and nothing more.
    pub const PLAIN: DoorRules = DoorRules { own_key_only: None, url_check: None, echo_header: None };
}

/// A sender's check of a URL before it sends: the request's query and headers,
/// and whether a value presented is the source's verify token or its secret.
pub struct UrlCheck<'a> {
    pub query: &'a str,
    pub headers: &'a dyn Headers,
    pub verify_token: &'a dyn Fn(&str) -> bool,
    /// Opens the source's secrets only when asked (an error: they cannot be opened).
    pub secret: &'a dyn Fn(&str) -> Result<bool, String>,
}

/// The answer to a sender's check of the URL.
pub enum UrlAnswer {
    /// Echoed as text (`text/plain`, not sniffed).
    Text(String),
    /// A JSON body, with a header echoed.
    Json { header: (&'static str, String), body: serde_json::Value },
}

/// Why a sender's check of the URL is refused.
pub enum UrlRefused {
    /// The check is malformed (a 400, saying what is missing).
    Malformed(String),
    /// The token or id presented is not the source's (a 403).
    NotOurs(String),
    /// The source's secrets could not be opened (a 500).
    Broken(String),
}

/// A provider's answer to a sender's check of the URL.
pub type UrlCheckFn = fn(&UrlCheck<'_>) -> Result<UrlAnswer, UrlRefused>;

/// The table of providers.
pub fn preset(p: &Provider) -> &'static Preset {
    match p {
        Provider::Stripe => &stripe::PRESET,
        Provider::Github => &github::PRESET,
        Provider::Shopify => &shopify::PRESET,
        Provider::Slack => &slack::PRESET,
        Provider::StandardWebhooks => &standard::PRESET,
        Provider::Svix => &svix::PRESET,
        Provider::Twilio => &twilio::PRESET,
        Provider::Square => &square::PRESET,
        Provider::Paddle => &paddle::PRESET,
        Provider::Paypal => &paypal::PRESET,
        Provider::Sendgrid => &sendgrid::PRESET,
        Provider::Discord => &discord::PRESET,
        Provider::Mailgun => &mailgun::PRESET,
        Provider::BasicAuth => &basic_auth::PRESET,
        Provider::Gitlab => &gitlab::PRESET,
        Provider::Bitbucket => &bitbucket::PRESET,
        Provider::Hubspot => &hubspot::PRESET,
        Provider::Intercom => &intercom::PRESET,
        Provider::Zoom => &zoom::PRESET,
        Provider::Linear => &linear::PRESET,
        Provider::Typeform => &typeform::PRESET,
        Provider::Calendly => &calendly::PRESET,
        Provider::Woocommerce => &woocommerce::PRESET,
        Provider::Telnyx => &telnyx::PRESET,
        Provider::OrumIo => &orum::PRESET,
        Provider::Checkbook => &checkbook::PRESET,
        Provider::Tailscale => &tailscale::PRESET,
        Provider::Airwallex => &airwallex::PRESET,
        Provider::Port => &port::PRESET,
        Provider::Merge => &merge::PRESET,
        Provider::Segment => &segment::PRESET,
        Provider::Openclaw => &token::OPENCLAW,
        Provider::Vapi => &token::VAPI,
        Provider::Meta => &meta::PRESET,
        Provider::AdobeSign => &token::ADOBE_SIGN,
        Provider::PandaDoc => &pandadoc::PRESET,
        Provider::Hmac(_) => &generic::PRESET,
        Provider::None => &generic::NONE,
    }
}

/// Verifies a request against any of `secrets` (the secrets or public keys as the
/// tenant gave them).
pub async fn verify(req: &Request<'_>, secrets: &[String], certs: &Certificates) -> Result<(), VerifyError> {
    match preset(req.provider).check {
        Check::Sync(check) => check(req, secrets),
        Check::Certificate => paypal::verify(req, secrets, certs).await,
        Check::Nothing => Ok(()),
    }
}
