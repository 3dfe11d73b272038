//! Schemes that sign the body alone: GitHub, Shopify, and the generic `hmac`.

use base64::{engine::general_purpose::STANDARD, Engine};

use super::{ct_eq, header, mac, Algorithm, Encoding, Headers, HmacSpec, VerifyError};

/// `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`.
pub fn github(secrets: &[String], headers: &dyn Headers, body: &[u8]) -> Result<(), VerifyError> {
    let spec = HmacSpec {
        header: "x-hub-signature-256".into(),
        algorithm: Algorithm::Sha256,
        encoding: Encoding::Hex,
        prefix: Some("sha256=".into()),
    };
    generic(&spec, secrets, headers, body)
}

/// `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, body)>`.
pub fn shopify(secrets: &[String], headers: &dyn Headers, body: &[u8]) -> Result<(), VerifyError> {
    let spec = HmacSpec {
        header: "x-shopify-hmac-sha256".into(),
        algorithm: Algorithm::Sha256,
        encoding: Encoding::Base64,
        prefix: None,
    };
    generic(&spec, secrets, headers, body)
}

/// One header, an optional prefix, hex or base64 of HMAC(secret, body).
pub fn generic(spec: &HmacSpec, secrets: &[String], headers: &dyn Headers, body: &[u8]) -> Result<(), VerifyError> {
    // Header names compare case-insensitively; `Headers` takes them lower-cased.
    let value = header(headers, &spec.header.to_ascii_lowercase())?;
    let sig = match &spec.prefix {
        Some(p) => value.strip_prefix(p.as_str()).ok_or_else(|| VerifyError::Malformed(spec.header.clone()))?,
        None => value,
    };
    let presented = match spec.encoding {
        Encoding::Hex => hex::decode(sig.trim()),
        Encoding::Base64 => STANDARD.decode(sig.trim()).map_err(|_| hex::FromHexError::InvalidStringLength),
    }
    .map_err(|_| VerifyError::Malformed(spec.header.clone()))?;
    if secrets.iter().any(|s| ct_eq(&mac(spec.algorithm, s.as_bytes(), &[body]), &presented)) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch(spec.header.clone()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn h(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn github_accepts_its_documented_example_and_refuses_a_changed_body() {
        // GitHub's docs: secret "It's a Secret to Everybody", payload "Hello, World!".
        let headers =
            h(&[("x-hub-signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")]);
        let secrets = vec!["It's a Secret to Everybody".to_owned()];
        assert_eq!(github(&secrets, &headers, b"Hello, World!"), Ok(()));
        assert!(matches!(github(&secrets, &headers, b"Hello, World?"), Err(VerifyError::Mismatch(_))));
        assert!(matches!(github(&secrets, &h(&[]), b"x"), Err(VerifyError::MissingHeader(_))));
    }

    #[test]
    fn any_valid_secret_of_a_rotation_is_accepted() {
        let sig = STANDARD.encode(mac(Algorithm::Sha256, b"old", &[b"body"]));
        let headers = h(&[("x-shopify-hmac-sha256", &sig)]);
        assert_eq!(shopify(&["new".into(), "old".into()], &headers, b"body"), Ok(()));
        assert!(shopify(&["new".into()], &headers, b"body").is_err());
    }

    #[test]
    fn the_generic_hmac_honours_algorithm_encoding_and_prefix() {
        let spec = HmacSpec {
            header: "x-sig".into(),
            algorithm: Algorithm::Sha512,
            encoding: Encoding::Hex,
            prefix: Some("v=".into()),
        };
        let sig = format!("v={}", hex::encode(mac(Algorithm::Sha512, b"k", &[b"b"])));
        assert_eq!(generic(&spec, &["k".into()], &h(&[("x-sig", &sig)]), b"b"), Ok(()));
        let no_prefix = hex::encode(mac(Algorithm::Sha512, b"k", &[b"b"]));
        assert!(matches!(
            generic(&spec, &["k".into()], &h(&[("x-sig", &no_prefix)]), b"b"),
            Err(VerifyError::Malformed(_))
        ));
    }
}
