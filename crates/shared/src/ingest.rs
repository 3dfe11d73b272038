//! Ingest source types as the Svix SDK names them, and what each one is here:
//! the provider that verifies its requests, and the shape of its `config`.

use serde_json::Value;

pub use crate::cron_schedule::{Cron, MOST_CRON_PAYLOAD};
use crate::source::{Algorithm, Encoding, HmacSpec, KeySpec, Provider};

/// A sender that signs the raw body with an HMAC-SHA256 in one header, checked by
/// the generic `hmac` provider; what it needs and what it knows of its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyHmac {
    /// The header carrying the signature.
    pub header: &'static str,
    pub encoding: Encoding,
    /// A prefix before the signature, such as `sha256=`.
    pub prefix: Option<&'static str>,
    /// Whether `config.secret` is required (else, without it, only the token is checked).
    pub required: bool,
    /// The body field holding the sender's stable event id, if it has one (else the body is the key).
    pub id: Option<&'static str>,
    /// The body field holding the event type, if it has one.
    pub event_type: Option<&'static str>,
}

/// How a type's requests are verified, and so what its `config` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Nothing is signed: the `ingestUrl`'s token is the whole credential.
    Generic,
    /// The provider's own scheme with `config.secret`, required.
    Required(&'static Provider),
    /// The provider's own scheme with `config.secret`, optional: without it
    /// only the token is checked (GitHub, HubSpot; Segment signs only when a
    /// shared secret is set).
    Optional(&'static Provider),
    /// No door: Hookgate itself emits `config.payload` on `config.schedule`.
    Cron,
    /// An HMAC-SHA256 of the raw body in one header.
    BodyHmac(BodyHmac),
    /// The provider's scheme with a public key, `config.publicKey` (shown back:
    /// it is public): Telnyx's Ed25519 account key, Orum's RSA key.
    PublicKey(&'static Provider),
    /// `config.secret` (the app secret) and `config.verifyToken` (for the subscription check).
    Meta,
    /// `config.clientId`, which Adobe Sign sends and the answer echoes.
    AdobeSign,
}

/// Every type the SDK (2.9) lists, in its order, with its scheme here.
pub const TYPES: &[(&str, Scheme)] = &[
    ("generic-webhook", Scheme::Generic),
    ("cron", Scheme::Cron),
    ("adobe-sign", Scheme::AdobeSign),
    ("beehiiv", Scheme::Required(&Provider::Svix)),
    ("brex", Scheme::Required(&Provider::Svix)),
    ("checkbook", Scheme::Required(&Provider::Checkbook)),
    ("clerk", Scheme::Required(&Provider::Svix)),
    // DocuSign Connect: `X-DocuSign-Signature-1: <b64 HMAC-SHA256(key, body)>`; no event id.
    (
        "docusign",
        Scheme::BodyHmac(BodyHmac {
            header: "x-docusign-signature-1",
            encoding: Encoding::Base64,
            prefix: None,
            required: false,
            id: None,
            event_type: Some("/event"),
        }),
    ),
    // EasyPost: `X-Hmac-Signature: hmac-sha256-hex=<hex>`; the event's `id` (`evt_…`).
    (
        "easypost",
        Scheme::BodyHmac(BodyHmac {
            header: "x-hmac-signature",
            encoding: Encoding::Hex,
            prefix: Some("hmac-sha256-hex="),
            required: false,
            id: Some("/id"),
            event_type: Some("/description"),
        }),
    ),
    ("github", Scheme::Optional(&Provider::Github)),
    ("guesty", Scheme::Required(&Provider::Svix)),
    ("hubspot", Scheme::Optional(&Provider::Hubspot)),
    ("incident-io", Scheme::Required(&Provider::Svix)),
    ("lithic", Scheme::Required(&Provider::Svix)),
    ("merge", Scheme::Required(&Provider::Merge)),
    ("meta", Scheme::Meta),
    // Nango: `X-Nango-Hmac-Sha256: <hex>`; no event id.
    (
        "nango",
        Scheme::BodyHmac(BodyHmac {
            header: "x-nango-hmac-sha256",
            encoding: Encoding::Hex,
            prefix: None,
            required: true,
            id: None,
            event_type: Some("/type"),
        }),
    ),
    ("nash", Scheme::Required(&Provider::Svix)),
    ("openclaw", Scheme::Required(&Provider::Openclaw)),
    ("orum-io", Scheme::PublicKey(&Provider::OrumIo)),
    ("panda-doc", Scheme::Required(&Provider::PandaDoc)),
    ("port-io", Scheme::Required(&Provider::Port)),
    ("pleo", Scheme::Required(&Provider::Svix)),
    ("psi-fi", Scheme::Required(&Provider::Svix)),
    ("replicate", Scheme::Required(&Provider::Svix)),
    ("resend", Scheme::Required(&Provider::Svix)),
    // Rutter: `X-Rutter-Signature: sha256=<b64>`; no event id.
    (
        "rutter",
        Scheme::BodyHmac(BodyHmac {
            header: "x-rutter-signature",
            encoding: Encoding::Base64,
            prefix: Some("sha256="),
            required: true,
            id: None,
            event_type: Some("/type"),
        }),
    ),
    ("safebase", Scheme::Required(&Provider::Svix)),
    ("sardine", Scheme::Required(&Provider::Svix)),
    ("segment", Scheme::Optional(&Provider::Segment)),
    ("shopify", Scheme::Required(&Provider::Shopify)),
    ("slack", Scheme::Required(&Provider::Slack)),
    ("stripe", Scheme::Required(&Provider::Stripe)),
    ("stych", Scheme::Required(&Provider::Svix)),
    ("svix", Scheme::Required(&Provider::Svix)),
    ("zoom", Scheme::Required(&Provider::Zoom)),
    ("tailscale", Scheme::Required(&Provider::Tailscale)),
    ("telnyx", Scheme::PublicKey(&Provider::Telnyx)),
    ("vapi", Scheme::Required(&Provider::Vapi)),
    ("open-ai", Scheme::Required(&Provider::Svix)),
    ("render", Scheme::Required(&Provider::Svix)),
    // Veriff: `X-HMAC-SIGNATURE: <hex>`; no delivery id common to its webhooks.
    (
        "veriff",
        Scheme::BodyHmac(BodyHmac {
            header: "x-hmac-signature",
            encoding: Encoding::Hex,
            prefix: None,
            required: true,
            id: None,
            event_type: None,
        }),
    ),
    ("airwallex", Scheme::Required(&Provider::Airwallex)),
    // VGS: its `config` is the `whsec_` secret of the Svix scheme, as for the
    // other Svix senders (docs/ingest.md says what is and is not confirmed).
    ("vgs", Scheme::Required(&Provider::Svix)),
];

/// An ingest source's type: its SDK name and its scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestType {
    pub name: &'static str,
    pub scheme: Scheme,
}

/// What a source of a type is made of here: its provider, the secret its
/// `config` gave (`None`: nothing is signed, or an optional secret was left out),
/// and the settings that are no secret, stored and shown back as `config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub provider: Provider,
    pub secret: Option<String>,
    pub shown: Value,
    /// How a new source of the type keys its events.
    pub idempotency: KeySpec,
    /// Where a new source of the type reads its events' type.
    pub event_type_path: Option<&'static str>,
    /// The token of the sender's subscription check (Meta's), if the config gave one.
    pub verify_token: Option<String>,
}

impl Resolved {
    fn new(provider: Provider, secret: Option<String>) -> Resolved {
        Resolved {
            provider,
            secret,
            shown: Value::Object(Default::default()),
            idempotency: KeySpec::Provider,
            event_type_path: None,
            verify_token: None,
        }
    }
}

impl IngestType {
    /// The `config` field holding the credential a source of this type checks
    /// requests with (stored sealed, never shown).
    pub fn credential_field(&self) -> &'static str {
        match self.scheme {
            Scheme::PublicKey(_) => "publicKey",
            Scheme::AdobeSign => "clientId",
            _ => "secret",
        }
    }

    /// A type by its SDK name; an error naming the known ones otherwise.
    pub fn parse(name: &str) -> Result<IngestType, String> {
        TYPES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(name, scheme)| IngestType { name, scheme: *scheme })
            .ok_or_else(|| format!("`type`: unknown source type `{name}` (one of: {})", names().join(", ")))
    }

    /// The provider and secret of a source of this type with this `config`;
    /// an error naming the field that is wrong.
    pub fn resolve(&self, config: &Value) -> Result<Resolved, String> {
        let Some(config) = config.as_object() else {
            return Err("`config` must be an object".into());
        };
        let secret = match config.get("secret") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Some(_) => return Err("`config.secret` must be a non-empty string".into()),
        };
        let required = |provider: Provider| match &secret {
            Some(s) => Ok(Resolved::new(provider, Some(s.clone()))),
            None => Err(format!("`config.secret` is required for a `{}` source", self.name)),
        };
        // Without its optional secret, a source checks only the token, as a generic one.
        let optional = |provider: Provider| match &secret {
            Some(s) => Resolved::new(provider, Some(s.clone())),
            None => Resolved::new(Provider::None, None),
        };
        match self.scheme {
            Scheme::Generic if secret.is_some() => Err(
                "`config.secret`: a `generic-webhook` source checks no signature (its URL's token is its credential)"
                    .into(),
            ),
            Scheme::Generic => Ok(Resolved::new(Provider::None, None)),
            Scheme::Cron => {
                let cron = Cron::parse(config)?;
                let schedule = config.get("schedule").and_then(Value::as_str).unwrap_or_default();
                Ok(Resolved { shown: cron.shown(schedule), ..Resolved::new(Provider::None, None) })
            }
            Scheme::BodyHmac(b) => {
                let spec = HmacSpec {
                    header: b.header.into(),
                    algorithm: Algorithm::Sha256,
                    encoding: b.encoding,
                    prefix: b.prefix.map(str::to_owned),
                };
                let mut r = if b.required { required(Provider::Hmac(spec))? } else { optional(Provider::Hmac(spec)) };
                if let Some(id) = b.id {
                    r.idempotency = KeySpec::JsonPointer(id.into());
                }
                r.event_type_path = b.event_type;
                Ok(r)
            }
            Scheme::Required(provider) => required(provider.clone()),
            Scheme::Optional(provider) => Ok(optional(provider.clone())),
            Scheme::Meta => {
                let verify_token = match config.get("verifyToken") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(t)) if !t.is_empty() && t.len() <= 256 => Some(t.clone()),
                    Some(_) => return Err("`config.verifyToken` must be 1 to 256 characters".into()),
                };
                Ok(Resolved { verify_token, ..required(Provider::Meta)? })
            }
            Scheme::AdobeSign => match config.get("clientId") {
                Some(Value::String(id)) if !id.trim().is_empty() => {
                    Ok(Resolved::new(Provider::AdobeSign, Some(id.trim().to_owned())))
                }
                _ => {
                    Err("`config.clientId` is required for an `adobe-sign` source: the application's client id".into())
                }
            },
            Scheme::PublicKey(provider) => match config.get("publicKey") {
                Some(Value::String(k)) if !k.trim().is_empty() => Ok(Resolved {
                    shown: serde_json::json!({ "publicKey": k.trim() }),
                    ..Resolved::new(provider.clone(), Some(k.trim().to_owned()))
                }),
                _ => {
                    Err(format!("`config.publicKey` is required for a `{}` source: the sender's public key", self.name))
                }
            },
        }
    }
}

/// The SDK names of every type.
pub fn names() -> Vec<&'static str> {
    TYPES.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_type_the_sdk_lists_is_known_by_name_once() {
        assert_eq!(TYPES.len(), 44);
        let mut seen = std::collections::HashSet::new();
        for (name, _) in TYPES {
            assert!(seen.insert(name), "{name} twice");
            assert_eq!(IngestType::parse(name).unwrap().name, *name);
        }
        assert!(IngestType::parse("stripe ").unwrap_err().contains("unknown source type"));
    }

    #[test]
    fn a_signing_type_needs_its_secret_and_an_optional_one_falls_back_to_the_token() {
        let svix = IngestType::parse("clerk").unwrap();
        assert!(svix.resolve(&json!({})).unwrap_err().contains("`config.secret` is required"));
        let r = svix.resolve(&json!({"secret": "whsec_abc"})).unwrap();
        assert_eq!((r.provider, r.secret.as_deref()), (Provider::Svix, Some("whsec_abc")));
        let github = IngestType::parse("github").unwrap();
        assert_eq!(github.resolve(&json!({})).unwrap().provider, Provider::None);
        assert_eq!(github.resolve(&json!({"secret": "s"})).unwrap().provider, Provider::Github);
        assert!(svix.resolve(&json!([])).unwrap_err().contains("must be an object"));
        assert!(svix.resolve(&json!({"secret": 5})).unwrap_err().contains("non-empty string"));
        let vgs = IngestType::parse("vgs").unwrap();
        assert_eq!(vgs.resolve(&json!({"secret": "whsec_abc"})).unwrap().provider, Provider::Svix);
        let orum = IngestType::parse("orum-io").unwrap().resolve(&json!({"publicKey": "k"})).unwrap();
        assert_eq!((orum.provider, orum.shown), (Provider::OrumIo, json!({"publicKey": "k"})));
        assert!(IngestType::parse("telnyx").unwrap().resolve(&json!({})).unwrap_err().contains("config.publicKey"));
        let generic = IngestType::parse("generic-webhook").unwrap();
        assert!(generic.resolve(&json!({"secret": "s"})).unwrap_err().contains("checks no signature"));
    }

    #[test]
    fn a_cron_schedule_has_five_fields_or_a_name_and_its_payload_is_required() {
        let cron = IngestType::parse("cron").unwrap();
        let r = cron.resolve(&json!({"schedule": "*/5 * * * *", "payload": "{}"})).unwrap();
        assert_eq!(r.shown, json!({"schedule": "*/5 * * * *", "payload": "{}", "contentType": "application/json"}));
        assert!(cron.resolve(&json!({"schedule": "@hourly", "payload": "x", "contentType": "text/plain"})).is_ok());
        for bad in ["* * * * * *", "61 * * * *", "", "@every 1s"] {
            let e = cron.resolve(&json!({"schedule": bad, "payload": "{}"})).unwrap_err();
            assert!(e.contains("config.schedule"), "{bad}: {e}");
        }
        assert!(cron.resolve(&json!({"schedule": "* * * * *"})).unwrap_err().contains("config.payload"));
        let big = "x".repeat(MOST_CRON_PAYLOAD + 1);
        assert!(cron.resolve(&json!({"schedule": "* * * * *", "payload": big})).unwrap_err().contains("at most"));
    }
}
