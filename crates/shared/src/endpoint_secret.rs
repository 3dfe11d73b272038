//! An endpoint's signing secret, of either kind Svix serves: `whsec_` (HMAC-SHA256,
//! signatures `v1,`) or `whsk_` (Ed25519, signatures `v1a,`, shown as its `whpk_`
//! public key), and which kind a generated one is (`HOOKGATE_DEFAULT_SIGNATURE_TYPE`).

use crate::{whsec, whsk};

/// The kind of secret an endpoint gets when it is given none: Svix's
/// `default_signature_type`, spelt as Svix spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignatureType {
    #[default]
    Hmac256,
    Ed25519,
}

impl std::str::FromStr for SignatureType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hmac256" | "hmac" => Ok(SignatureType::Hmac256),
            "ed25519" => Ok(SignatureType::Ed25519),
            other => Err(format!("`{other}`: expected hmac256 or ed25519")),
        }
    }
}

/// Why a given endpoint secret cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    #[error(transparent)]
    Hmac(#[from] whsec::BadSecret),
    #[error(transparent)]
    Ed25519(#[from] whsk::BadKey),
}

/// An endpoint's signing secret, opened.
#[derive(Clone)]
pub enum EndpointSecret {
    /// The HMAC-SHA256 key a `whsec_` secret holds.
    Hmac(Vec<u8>),
    Ed25519(whsk::SigningKey),
}

impl std::fmt::Debug for EndpointSecret {
    // Never the key: a secret must not reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndpointSecret::Hmac(_) => f.write_str("Hmac(..)"),
            EndpointSecret::Ed25519(k) => write!(f, "Ed25519({})", k.public_text()),
        }
    }
}

impl EndpointSecret {
    /// A fresh secret of the kind asked for.
    pub fn generate(kind: SignatureType) -> Self {
        match kind {
            SignatureType::Hmac256 => Self::hmac_text(&whsec::generate_secret()),
            SignatureType::Ed25519 => EndpointSecret::Ed25519(whsk::SigningKey::generate()),
        }
    }

    /// A secret a caller gave (an endpoint's `secret`, a rotation's `key`): `whsk_`
    /// for Ed25519, `whpk_` refused (it cannot sign), anything else read as
    /// `whsec_` with its prefix optional, as Svix reads it.
    pub fn parse(given: &str) -> Result<Self, SecretError> {
        if given.starts_with(whsk::SECRET_PREFIX) || given.starts_with(whsk::PUBLIC_PREFIX) {
            return Ok(EndpointSecret::Ed25519(whsk::SigningKey::parse(given)?));
        }
        Ok(Self::hmac_text(&whsec::normalise_secret(given)?))
    }

    /// The secret a caller gave ([`Self::parse`]), or a new one of `kind` (the
    /// operator's default) when none was given.
    pub fn given_or_new(given: Option<&str>, kind: SignatureType) -> Result<Self, SecretError> {
        match given {
            Some(k) => Self::parse(k),
            None => Ok(Self::generate(kind)),
        }
    }

    /// A secret as it was stored (its text, opened). A `whsec_` one is read as
    /// the signer always read it, without the length rule a given one is held
    /// to, so that no secret stored before that rule stops signing.
    pub fn from_stored(text: &str) -> Result<Self, SecretError> {
        if text.starts_with(whsk::SECRET_PREFIX) {
            return Ok(EndpointSecret::Ed25519(whsk::SigningKey::parse(text)?));
        }
        Ok(EndpointSecret::Hmac(whsec::key_bytes(text)?))
    }

    fn hmac_text(normalised: &str) -> Self {
        EndpointSecret::Hmac(whsec::key_bytes(normalised).expect("a normalised secret is base64"))
    }

    pub fn kind(&self) -> SignatureType {
        match self {
            EndpointSecret::Hmac(_) => SignatureType::Hmac256,
            EndpointSecret::Ed25519(_) => SignatureType::Ed25519,
        }
    }

    /// The secret's text, `whsec_…` or `whsk_…`: what is sealed at rest and
    /// nowhere else (an environment export seals it again, for transit).
    pub fn secret_text(&self) -> String {
        match self {
            EndpointSecret::Hmac(key) => whsec::text(key),
            EndpointSecret::Ed25519(k) => k.to_text(),
        }
    }

    /// What `GET …/secret` answers: a `whsec_` secret itself (a receiver needs it
    /// to verify), or an Ed25519 key's `whpk_` public key, never its secret half.
    pub fn shown(&self) -> String {
        match self {
            EndpointSecret::Hmac(key) => whsec::text(key),
            EndpointSecret::Ed25519(k) => k.public_text(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVIX_KEY: &str =
        "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";

    #[test]
    fn a_whsk_secret_is_ed25519_kept_whole_and_shown_as_its_whpk_public_key() {
        let s = EndpointSecret::parse(SVIX_KEY).unwrap();
        assert_eq!(s.kind(), SignatureType::Ed25519);
        assert_eq!(s.secret_text(), SVIX_KEY);
        assert_eq!(s.shown(), "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=");
        assert!(!format!("{s:?}").contains("6Xb/"), "Debug never shows the secret half");
        let stored = EndpointSecret::from_stored(&s.secret_text()).unwrap();
        assert_eq!(stored.secret_text(), SVIX_KEY);
    }

    #[test]
    fn a_whsec_secret_is_hmac_with_its_prefix_optional_and_shown_as_itself() {
        let body = "C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
        for given in [body.to_owned(), format!("whsec_{body}")] {
            let s = EndpointSecret::parse(&given).unwrap();
            assert_eq!(s.kind(), SignatureType::Hmac256);
            assert_eq!((s.secret_text(), s.shown()), (format!("whsec_{body}"), format!("whsec_{body}")));
        }
        assert_eq!(EndpointSecret::parse("whsec_short").err(), Some(SecretError::Hmac(whsec::BadSecret)));
    }

    #[test]
    fn a_whpk_public_key_or_a_bad_whsk_key_is_refused_as_ed25519_not_as_whsec() {
        let e = EndpointSecret::parse("whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=").unwrap_err();
        assert_eq!(e, SecretError::Ed25519(whsk::BadKey::PublicKeyGiven));
        assert!(e.to_string().contains("public key"), "{e}");
        let e = EndpointSecret::parse("whsk_AAAA").unwrap_err();
        assert_eq!(e, SecretError::Ed25519(whsk::BadKey::WrongLength(3)));
    }

    #[test]
    fn a_generated_secret_is_of_the_kind_asked_and_reads_back_from_its_stored_text() {
        for kind in [SignatureType::Hmac256, SignatureType::Ed25519] {
            let s = EndpointSecret::generate(kind);
            assert_eq!(s.kind(), kind);
            let back = EndpointSecret::from_stored(&s.secret_text()).unwrap();
            assert_eq!((back.kind(), back.secret_text()), (kind, s.secret_text()));
            assert_eq!(EndpointSecret::parse(&s.secret_text()).unwrap().secret_text(), s.secret_text());
        }
        assert!(EndpointSecret::generate(SignatureType::Hmac256).shown().starts_with("whsec_"));
        assert!(EndpointSecret::generate(SignatureType::Ed25519).shown().starts_with("whpk_"));
    }

    #[test]
    fn the_signature_type_reads_svixs_names_and_refuses_others() {
        assert_eq!("hmac256".parse(), Ok(SignatureType::Hmac256));
        assert_eq!("hmac".parse(), Ok(SignatureType::Hmac256));
        assert_eq!(" Ed25519 ".parse(), Ok(SignatureType::Ed25519));
        assert!("rsa".parse::<SignatureType>().unwrap_err().contains("hmac256 or ed25519"));
        assert_eq!(SignatureType::default(), SignatureType::Hmac256);
    }
}
