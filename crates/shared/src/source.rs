//! What a source is, as typed values: its provider with the provider's options,
//! its idempotency setting and its mode. Parsed once, where a request or a stored
//! row enters (the API body, the store's row), never compared as strings later.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Options of the generic `hmac` provider.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HmacSpec {
    /// The header carrying the signature.
    pub header: String,
    #[serde(default)]
    pub algorithm: Algorithm,
    #[serde(default)]
    pub encoding: Encoding,
    /// A prefix before the signature, such as `sha256=`.
    #[serde(default)]
    pub prefix: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = HmacAlgorithm)]
pub enum Algorithm {
    #[default]
    Sha256,
    Sha512,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = HmacEncoding)]
pub enum Encoding {
    #[default]
    Hex,
    Base64,
}

/// The providers table: each provider whose name alone says how it verifies,
/// with the name the API and the database use. Adding one is a row here and its
/// file in the ingress crate's `verify` module (see ARCHITECTURE.md).
macro_rules! providers {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// A source's provider, with what its verification needs. Each has one file
        /// in the ingress crate's `verify` module (its signature check, stable id, event type
        /// and handshake); `docs/receiving.md` has a row for each.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Provider {
            $($(#[$doc])* $variant,)*
            Hmac(HmacSpec),
            /// No verification: only with the source's explicit flag.
            None,
        }

        impl Provider {
            pub const NAMES: &'static [&'static str] = &[$($name,)* "hmac", "none"];

            /// A provider its name alone makes (not `hmac`, which needs its spec).
            fn named(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(Provider::$variant),)*
                    "none" => Some(Provider::None),
                    _ => None,
                }
            }

            /// The name the API and the database use.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Provider::$variant => $name,)*
                    Provider::Hmac(_) => "hmac",
                    Provider::None => "none",
                }
            }
        }
    };
}

providers! {
    Stripe = "stripe",
    Github = "github",
    Shopify = "shopify",
    Slack = "slack",
    /// Symmetric (`whsec_`) or asymmetric (`whpk_`, the `v1a` Ed25519 form).
    StandardWebhooks = "standard-webhooks",
    /// Svix-signed senders (Clerk, Resend, …): `svix-*` headers.
    Svix = "svix",
    Twilio = "twilio",
    Square = "square",
    Paddle = "paddle",
    Paypal = "paypal",
    Sendgrid = "sendgrid",
    Discord = "discord",
    Mailgun = "mailgun",
    /// Postmark and any sender that authenticates with `Authorization: Basic`.
    BasicAuth = "basic-auth",
    Gitlab = "gitlab",
    Bitbucket = "bitbucket",
    Hubspot = "hubspot",
    Intercom = "intercom",
    Zoom = "zoom",
    Linear = "linear",
    Typeform = "typeform",
    Calendly = "calendly",
    Woocommerce = "woocommerce",
    /// Ed25519 over `<timestamp>|<body>`, the account's public key in base64.
    Telnyx = "telnyx",
    /// Orum: RSA over the body and its `created_at`, Orum's public key.
    OrumIo = "orum",
    Checkbook = "checkbook",
    Tailscale = "tailscale",
    Airwallex = "airwallex",
    /// Port (port.io).
    Port = "port",
    Merge = "merge",
    Segment = "segment",
    /// A shared token sent as is (OpenClaw's gateway hooks).
    Openclaw = "openclaw",
    /// Vapi's server URL secret, sent as is.
    Vapi = "vapi",
    Meta = "meta",
    /// Adobe Acrobat Sign: its client id, sent as is and echoed.
    AdobeSign = "adobe-sign",
    /// The signature is in the URL's query.
    PandaDoc = "pandadoc",
}

/// What a provider's `secret` is, which decides how it is checked and whether
/// Hookgate can make one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// A shared signing secret; Hookgate can generate one.
    Shared,
    /// A `whsec_` secret (base64 after the prefix).
    Whsec,
    /// A `whsec_` secret, or a `whpk_` Ed25519 public key (Standard Webhooks `v1a`).
    WhsecOrPublicKey,
    /// An Ed25519 public key in hex (Discord's application public key).
    Ed25519Hex,
    /// An Ed25519 public key in base64 (Telnyx's account public key).
    Ed25519Base64,
    /// An ECDSA P-256 public key, base64 DER (SendGrid's verification key).
    P256PublicKey,
    /// An RSA public key of 2048 bits or more, PEM or base64 DER (Orum's).
    RsaPublicKey,
    /// PayPal's webhook id: not a secret, the certificate signs; it binds a
    /// signature to this webhook.
    PaypalWebhookId,
    /// `user:password`, as the sender puts it in `Authorization: Basic`.
    BasicCredentials,
    /// Provider `none`.
    Nothing,
}

impl Provider {
    /// The provider of a `provider` name and its options (`hmac` needs its spec).
    pub fn parse(name: &str, hmac: Option<&Value>) -> Result<Self, String> {
        if let Some(p) = Self::named(name) {
            return Ok(p);
        }
        Ok(match name {
            "hmac" => {
                let spec: HmacSpec = serde_json::from_value(hmac.cloned().unwrap_or_default())
                    .map_err(|e| format!("`hmac` needs {{header, algorithm?, encoding?, prefix?}}: {e}"))?;
                if spec.header.trim().is_empty() {
                    return Err("`hmac.header` must name the signature header".into());
                }
                // Kept as the tenant wrote it (and shown so); verification lower-cases it.
                Provider::Hmac(spec)
            }
            other => return Err(format!("unknown provider `{other}`; expected one of {}", Self::NAMES.join(", "))),
        })
    }

    pub fn hmac(&self) -> Option<&HmacSpec> {
        match self {
            Provider::Hmac(spec) => Some(spec),
            _ => None,
        }
    }

    pub fn needs_secret(&self) -> bool {
        !matches!(self, Provider::None)
    }

    /// What its `secret` holds.
    pub fn secret_kind(&self) -> SecretKind {
        match self {
            Provider::StandardWebhooks => SecretKind::WhsecOrPublicKey,
            Provider::Svix => SecretKind::Whsec,
            Provider::Discord => SecretKind::Ed25519Hex,
            Provider::Telnyx => SecretKind::Ed25519Base64,
            Provider::OrumIo => SecretKind::RsaPublicKey,
            Provider::Sendgrid => SecretKind::P256PublicKey,
            Provider::Paypal => SecretKind::PaypalWebhookId,
            Provider::BasicAuth => SecretKind::BasicCredentials,
            Provider::None => SecretKind::Nothing,
            _ => SecretKind::Shared,
        }
    }

    /// Whether its signature covers the URL the provider posted to, so the
    /// source's `publicUrl` matters.
    pub fn signs_url(&self) -> bool {
        matches!(self, Provider::Twilio | Provider::Square | Provider::Hubspot)
    }

    /// Whether its signature is in the URL's query (PandaDoc's), so the verifier
    /// reads the URL the request came to.
    pub fn reads_query(&self) -> bool {
        matches!(self, Provider::PandaDoc)
    }
}

/// How a source's events are admitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// Admitted at once, delivered by the workers with retries.
    #[default]
    Async,
    /// Forwarded before the provider gets its answer; the provider's retry is the retry.
    Sync,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "async" => Ok(Mode::Async),
            "sync" => Ok(Mode::Sync),
            _ => Err("`mode` must be `async` or `sync`".into()),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Async => "async",
            Mode::Sync => "sync",
        }
    }
}

/// A source's idempotency setting; `null` in the API means [`KeySpec::Provider`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum KeySpec {
    /// The provider's own stable id (the default).
    #[default]
    Provider,
    Header(String),
    JsonPointer(String),
    /// A hash of several JSON fields, for providers without a stable id.
    Fields(Vec<String>),
    /// A hash of the raw body (`{"body": true}`).
    Body(bool),
    /// Every request is admitted (`{"disabled": true}`): for naturally idempotent feeds.
    Disabled(bool),
}

impl KeySpec {
    /// Parses the stored or requested setting; `None` or `null` is the provider's id.
    pub fn parse(v: Option<&Value>) -> Result<Self, String> {
        let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(KeySpec::Provider) };
        if !v.is_object() {
            return Err("`idempotency` must be an object such as {\"header\": NAME}, or null".into());
        }
        let spec: KeySpec = serde_json::from_value(v.clone()).map_err(|_| {
            "`idempotency` must be one of {header: NAME}, {jsonPointer: \"/a/b\"}, {fields: [\"/a\", …]}, \
             {body: true}, {disabled: true}"
                .to_owned()
        })?;
        match &spec {
            KeySpec::Header(h) if h.trim().is_empty() => Err("`idempotency.header` must name a header".into()),
            KeySpec::JsonPointer(p) if !p.starts_with('/') => {
                Err("`idempotency.jsonPointer` must start with `/`".into())
            }
            KeySpec::Fields(f) if f.is_empty() || f.iter().any(|p| !p.starts_with('/')) => {
                Err("`idempotency.fields` must list JSON pointers starting with `/`".into())
            }
            KeySpec::Body(false) | KeySpec::Disabled(false) => Err("use `true`, or leave `idempotency` unset".into()),
            _ => Ok(spec),
        }
    }

    /// The JSON form the API shows and the database keeps; `None` for the default.
    pub fn to_json(&self) -> Option<Value> {
        match self {
            KeySpec::Provider => None,
            other => Some(serde_json::to_value(other).expect("a key spec serialises")),
        }
    }
}

/// Checks a source's `publicUrl`: an absolute http(s) URL, as the provider is
/// told to post to.
pub fn parse_public_url(url: &str) -> Result<String, String> {
    // The value is shown back, cut short: the body may hold a very long one.
    let shown: String = url.chars().take(80).map(|c| if c.is_control() { '?' } else { c }).collect();
    let bad = || format!("`publicUrl` must be the absolute http(s) URL the provider posts to, not `{shown}`");
    if url.len() > 2048 || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad());
    }
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")).ok_or_else(bad)?;
    if rest.is_empty() || rest.starts_with('/') || url.contains('#') || url.contains('?') {
        return Err(bad());
    }
    // Kept as written (it is what the provider signs), but it must be a URL.
    match url::Url::parse(url) {
        Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => Ok(url.to_owned()),
        _ => Err(bad()),
    }
}

/// The stored `verify` column: the provider's options, the URL it signs and the
/// explicit opt-out.
pub fn verify_json(provider: &Provider, public_url: Option<&str>, allow_unverified: bool) -> Value {
    let mut verify = serde_json::Map::new();
    if let Some(h) = provider.hmac() {
        verify.insert("hmac".into(), serde_json::to_value(h).expect("an hmac spec serialises"));
    }
    if let Some(url) = public_url {
        verify.insert("publicUrl".into(), json!(url));
    }
    if allow_unverified {
        verify.insert("allowUnverified".into(), json!(true));
    }
    Value::Object(verify)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idempotency_setting_parses_from_its_json_forms_and_back() {
        assert_eq!(KeySpec::parse(None).unwrap(), KeySpec::Provider);
        assert_eq!(KeySpec::parse(Some(&json!({"header": "X"}))).unwrap(), KeySpec::Header("X".into()));
        assert_eq!(KeySpec::parse(Some(&json!({"jsonPointer": "/a"}))).unwrap(), KeySpec::JsonPointer("/a".into()));
        assert_eq!(KeySpec::parse(Some(&json!({"body": true}))).unwrap(), KeySpec::Body(true));
        assert!(KeySpec::parse(Some(&json!({"jsonPointer": "a"}))).is_err());
        assert!(KeySpec::parse(Some(&json!({"nope": 1}))).is_err());
        let spec = KeySpec::Fields(vec!["/a".into()]);
        assert_eq!(KeySpec::parse(spec.to_json().as_ref()).unwrap(), spec);
        assert_eq!(KeySpec::Provider.to_json(), None);
    }

    #[test]
    fn providers_parse_by_name_and_round_trip_through_their_stored_form() {
        for name in Provider::NAMES {
            let hmac = json!({"header": "X-Sig"});
            let p = Provider::parse(name, Some(&hmac)).unwrap();
            assert_eq!(p.name(), *name);
            let stored = verify_json(&p, None, false);
            assert_eq!(Provider::parse(p.name(), stored.get("hmac")).unwrap(), p);
        }
        assert!(Provider::parse("hmac", None).is_err(), "hmac needs its header");
        assert!(Provider::parse("paypal2", None).unwrap_err().contains("unknown provider"));
        assert!(parse_public_url("https://hooks.example.com:8443/in/src_1").is_ok());
        for bad in [
            "ftp://x/",
            "https:///x",
            "https://x/#f",
            "/in/src",
            "https://a b/",
            "https://@/",
            "https://a:b:c/",
            "https://x/in?a=1",
        ] {
            assert!(parse_public_url(bad).is_err(), "{bad}");
        }
        assert_eq!(Mode::parse("sync"), Ok(Mode::Sync));
        assert!(Mode::parse("SYNC").is_err());
    }
}
