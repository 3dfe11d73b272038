//! One token request to an endpoint's OAuth 2 token server (RFC 6749 §4.4 and §6,
//! RFC 7523 for `clientSecretJwt`), through the SSRF-guarded client.

use std::time::Duration;

use base64::{
    engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD},
    Engine,
};
use reqwest::header::{HeaderMap, HeaderValue};
use ring::{rand::SystemRandom, signature::RsaKeyPair};
use serde_json::Value;

use super::{AuthMethod, GrantType, OauthSecrets, OauthSettings};
use crate::deliver::send::{self, Sender};

/// A token the server gave.
#[derive(Clone)]
pub struct Fetched {
    pub token: String,
    /// How long it is valid, as the server says (`expires_in`), else [`UNSAID_LIFETIME`].
    pub lifetime: Duration,
    /// A new refresh token, when the server rotates them.
    pub refresh_token: Option<String>,
}

/// Never the tokens themselves.
impl std::fmt::Debug for Fetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetched").field("lifetime", &self.lifetime).finish_non_exhaustive()
    }
}

/// How long a token whose answer gives no `expires_in` is kept (it is dropped
/// sooner if the endpoint refuses it with 401).
pub const UNSAID_LIFETIME: Duration = Duration::from_secs(3600);
/// The longest lifetime believed: a token is asked for again at least daily.
const LONGEST_LIFETIME: Duration = Duration::from_secs(86_400);
/// The longest access token kept (it goes in a header).
const LONGEST_TOKEN: usize = 8192;
/// How much of a refusing token server's answer the attempt's reason quotes.
const QUOTED: usize = 300;
/// The JWT assertion's lifetime when `jwtParams.tokenExpirySecs` is left out.
const ASSERTION_LIFETIME: u64 = 300;

/// The RSA key of `jwtParams.secretBase64`: base64 of a PEM text or of DER bytes
/// (PKCS#8 or PKCS#1).
pub fn rsa_key(b64: &str) -> Result<RsaKeyPair, String> {
    let bad = || "`jwtParams.secretBase64` is not base64 of an RSA private key (PEM or DER, PKCS#8 or PKCS#1)";
    let raw = STANDARD.decode(b64.trim()).or_else(|_| URL_SAFE.decode(b64.trim())).map_err(|_| bad().to_owned())?;
    let der: Vec<u8> = if raw.starts_with(b"-----BEGIN") {
        use rustls_pki_types::{pem::PemObject, PrivateKeyDer};
        match PrivateKeyDer::from_pem_slice(&raw).map_err(|_| bad().to_owned())? {
            PrivateKeyDer::Pkcs8(k) => k.secret_pkcs8_der().to_vec(),
            PrivateKeyDer::Pkcs1(k) => k.secret_pkcs1_der().to_vec(),
            _ => return Err(bad().to_owned()),
        }
    } else {
        raw
    };
    RsaKeyPair::from_pkcs8(&der).or_else(|_| RsaKeyPair::from_der(&der)).map_err(|e| format!("{}: {e}", bad()))
}

/// The client's assertion: a JWT signed RS256 by its key, for the token URL.
fn assertion(settings: &OauthSettings, secrets: &OauthSecrets) -> Result<String, String> {
    let key = rsa_key(secrets.jwt_key_base64.as_deref().unwrap_or_default())?;
    let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
    if let Some(kid) = &settings.jwt_key_id {
        header["kid"] = Value::String(kid.clone());
    }
    let now = chrono::Utc::now().timestamp();
    let claims = serde_json::json!({
        "iss": settings.client_id,
        "sub": settings.client_id,
        "aud": settings.token_url,
        "jti": ulid::Ulid::new().to_string(),
        "iat": now,
        "exp": now + settings.jwt_expiry_secs.unwrap_or(ASSERTION_LIFETIME) as i64,
    });
    let signed =
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(&ring::signature::RSA_PKCS1_SHA256, &SystemRandom::new(), signed.as_bytes(), &mut signature)
        .map_err(|_| "signing the client assertion failed".to_owned())?;
    Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

fn form_encoded(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The token request's headers and form body.
pub fn request(settings: &OauthSettings, secrets: &OauthSecrets) -> Result<(HeaderMap, String), String> {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    match settings.grant_type {
        GrantType::ClientCredentials => form.append_pair("grant_type", "client_credentials"),
        GrantType::RefreshToken => form
            .append_pair("grant_type", "refresh_token")
            .append_pair("refresh_token", secrets.refresh_token.as_deref().unwrap_or_default()),
    };
    if let Some(scopes) = settings.scopes.as_ref().filter(|s| !s.is_empty()) {
        form.append_pair("scope", &scopes.join(" "));
    }
    let mut headers = HeaderMap::new();
    for (k, v) in secrets.extra_headers.iter().flatten() {
        send::header(&mut headers, k, v);
    }
    match settings.auth_method {
        // RFC 6749 §2.3.1: each part form-encoded, then base64.
        AuthMethod::ClientSecretBasic => {
            let pair = format!(
                "{}:{}",
                form_encoded(&settings.client_id),
                form_encoded(secrets.client_secret.as_deref().unwrap_or_default())
            );
            let value = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(pair)))
                .map_err(|_| "the client id and secret make no valid header".to_owned())?;
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        AuthMethod::ClientSecretPost => {
            form.append_pair("client_id", &settings.client_id);
            if let Some(secret) = &secrets.client_secret {
                form.append_pair("client_secret", secret);
            }
        }
        AuthMethod::ClientSecretJwt => {
            form.append_pair("client_id", &settings.client_id)
                .append_pair("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
                .append_pair("client_assertion", &assertion(settings, secrets)?);
        }
    }
    for (k, v) in settings.extra_params.iter().flatten() {
        form.append_pair(k, v);
    }
    send::header(&mut headers, "content-type", "application/x-www-form-urlencoded");
    send::header(&mut headers, "accept", "application/json");
    Ok((headers, form.finish()))
}

/// Asks the token server for a token within `bound`; the error is the reason an
/// attempt records.
pub async fn fetch(
    sender: &Sender,
    settings: &OauthSettings,
    secrets: &OauthSecrets,
    bound: Duration,
) -> Result<Fetched, String> {
    let (headers, body) = request(settings, secrets)?;
    let answered = sender
        .exchange(reqwest::Method::POST, &settings.token_url, headers, body.clone().into(), bound)
        .await
        .map_err(|sent| format!("the OAuth token request failed: {}", sent.body))?;
    if !(200..300).contains(&answered.status) {
        // A private token server (an allow-list opened it) is named by status only, as attempts are.
        let quoted: String = match answered.private && !sender.records_private() {
            true => String::new(),
            false => format!(": {}", redacted(&answered.body, secrets, &body)),
        };
        return Err(format!("the OAuth token server answered {}{quoted}", answered.status));
    }
    parse(&answered.body)
}

/// The start of a refusing token server's answer, as an attempt quotes it, with
/// what Hookgate sent that authenticates blanked out: a server that echoes the
/// request must not put the client's secret where a portal link reads it.
fn redacted(answer: &[u8], secrets: &OauthSecrets, request: &str) -> String {
    let mut text: String = String::from_utf8_lossy(answer).chars().take(QUOTED).collect();
    let assertion = url::form_urlencoded::parse(request.as_bytes())
        .find(|(k, _)| k == "client_assertion")
        .map(|(_, v)| v.into_owned());
    let sent = [secrets.client_secret.clone(), secrets.refresh_token.clone(), assertion];
    let headers = secrets.extra_headers.iter().flatten().map(|(_, v)| Some(v.clone()));
    for secret in sent.into_iter().chain(headers).flatten().filter(|s| s.len() >= 4) {
        text = text.replace(&secret, "[redacted]");
        // Echoed form-encoded, as it was sent.
        text = text.replace(&form_encoded(&secret), "[redacted]");
    }
    text
}

/// RFC 6750's `b64token`: what a bearer token may hold.
fn b64token(t: &str) -> bool {
    let body = t.trim_end_matches('=');
    !body.is_empty() && body.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// Reads a token response (RFC 6749 §5.1).
pub fn parse(body: &[u8]) -> Result<Fetched, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|_| "the OAuth token server's answer is not JSON".to_owned())?;
    let token = v["access_token"].as_str().ok_or("the OAuth token server's answer has no `access_token`")?;
    if token.len() > LONGEST_TOKEN || !b64token(token) {
        return Err("the OAuth token server's `access_token` is not a bearer token (RFC 6750's characters)".into());
    }
    if let Some(kind) = v["token_type"].as_str() {
        // Not quoted: the answer of a private server is not repeated.
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err("the OAuth token server gave a token of a type other than bearer, which is not sent".into());
        }
    }
    let seconds = match &v["expires_in"] {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    let lifetime = match seconds {
        // Clamped before it is made a Duration: a lifetime past `Duration`'s range would panic.
        Some(s) if s.is_finite() && s >= 1.0 => Duration::from_secs_f64(s.min(LONGEST_LIFETIME.as_secs_f64())),
        Some(_) => return Err("the OAuth token server's `expires_in` is not a positive number".into()),
        None => UNSAID_LIFETIME,
    };
    let refresh_token = v["refresh_token"].as_str().filter(|t| !t.is_empty()).map(str::to_owned);
    if refresh_token.as_ref().is_some_and(|t| t.len() > LONGEST_TOKEN) {
        return Err("the OAuth token server's `refresh_token` is longer than 8 KiB".into());
    }
    Ok(Fetched { token: token.to_owned(), lifetime, refresh_token })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_answer_is_read_with_its_lifetime_and_a_rotated_refresh_token() {
        let f =
            parse(br#"{"access_token":"abc","token_type":"Bearer","expires_in":"120","refresh_token":"r2"}"#).unwrap();
        assert_eq!(
            (f.token.as_str(), f.lifetime, f.refresh_token.as_deref()),
            ("abc", Duration::from_secs(120), Some("r2"))
        );
        assert_eq!(parse(br#"{"access_token":"abc"}"#).unwrap().lifetime, UNSAID_LIFETIME);
        assert!(parse(br#"{"access_token":"abc","token_type":"mac"}"#).unwrap_err().contains("bearer"));
        assert!(parse(br#"{"token":"abc"}"#).unwrap_err().contains("access_token"));
        assert!(parse(b"{\"access_token\":\"a\\nb\"}").is_err(), "a token that cannot go in a header");
        assert!(parse(b"{\"access_token\":\"a\\tb\"}").is_err(), "nor one outside RFC 6750's characters");
        assert!(parse(br#"{"access_token":"abc","expires_in":-5}"#).is_err());
        let leak = parse(br#"{"access_token":"abc","token_type":"db-password=hunter2"}"#).unwrap_err();
        assert!(!leak.contains("hunter2"), "the server's text is not quoted: {leak}");
    }

    #[test]
    fn a_lifetime_past_what_a_duration_holds_is_held_to_a_day_rather_than_panicking() {
        for huge in [&b"1e20"[..], b"18446744073709551615", b"\"1e300\""] {
            let body = [&br#"{"access_token":"abc","expires_in":"#[..], huge, b"}"].concat();
            assert_eq!(parse(&body).unwrap().lifetime, LONGEST_LIFETIME);
        }
    }

    #[test]
    fn a_refusing_servers_echo_of_the_client_secret_is_blanked_in_the_reason() {
        let secrets = OauthSecrets { client_secret: Some("s3cr:et".into()), ..Default::default() };
        let quoted = redacted(b"bad client_secret=s3cr%3Aet or s3cr:et", &secrets, "");
        assert_eq!(quoted, "bad client_secret=[redacted] or [redacted]");
    }
}
