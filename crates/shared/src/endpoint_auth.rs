//! An endpoint's OAuth 2 client as Svix's `EndpointOauthConfigIn` gives it, parsed
//! at the edge into the settings stored in clear and the secrets stored sealed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How the token is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Oauth2GrantTypeInOut)]
pub enum GrantType {
    ClientCredentials,
    RefreshToken,
}

/// How Hookgate authenticates to the token server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Oauth2AuthMethodInOut)]
pub enum AuthMethod {
    /// A JWT signed with the client's RSA key (`client_assertion`).
    ClientSecretJwt,
    /// `Authorization: Basic` with the client id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the request body.
    ClientSecretPost,
}

/// The only algorithm Svix names for `clientSecretJwt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OauthJwsSigningAlgorithm)]
pub enum SigningAlgorithm {
    RS256,
}

/// `jwtParams`: the key that signs the client's assertion.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ClientSecretJwtParamsIn)]
pub struct JwtParamsIn {
    /// The RSA private key, base64 (of its PEM text or its DER bytes, PKCS#8 or PKCS#1).
    pub secret_base64: String,
    pub signing_algorithm: SigningAlgorithm,
    /// Sent as the JWT header's `kid`.
    pub secret_id: Option<String>,
    /// The assertion's lifetime; 300 s when left out.
    pub token_expiry_secs: Option<u64>,
}

/// The OAuth client of an endpoint, as set.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EndpointOauthConfigIn)]
pub struct OauthConfigIn {
    pub grant_type: GrantType,
    pub auth_method: AuthMethod,
    pub jwt_params: Option<JwtParamsIn>,
    pub client_id: String,
    /// For `clientSecretBasic` and `clientSecretPost`.
    pub client_secret: Option<String>,
    pub token_url: String,
    pub scopes: Option<Vec<String>>,
    /// Added to the token request's body.
    pub extra_params: Option<BTreeMap<String, String>>,
    /// For the `refreshToken` grant.
    pub refresh_token: Option<String>,
    /// Added to the token request; stored sealed, as they may carry a credential.
    pub extra_headers: Option<BTreeMap<String, String>>,
}

/// What is stored in clear: nothing that authenticates.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OauthSettings {
    pub grant_type: GrantType,
    pub auth_method: AuthMethod,
    pub client_id: String,
    pub token_url: String,
    pub scopes: Option<Vec<String>>,
    pub extra_params: Option<BTreeMap<String, String>>,
    /// `jwtParams` without the key.
    pub jwt_key_id: Option<String>,
    pub jwt_expiry_secs: Option<u64>,
}

/// What is stored sealed with the tenant's key (its `Debug` shows none of it).
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OauthSecrets {
    pub client_secret: Option<String>,
    pub refresh_token: Option<String>,
    /// `jwtParams.secretBase64` as given.
    pub jwt_key_base64: Option<String>,
    pub extra_headers: Option<BTreeMap<String, String>>,
}

impl std::fmt::Debug for OauthSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OauthSecrets").finish_non_exhaustive()
    }
}

/// An endpoint's OAuth client as answered: never a secret.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EndpointOauthConfigOut)]
pub struct OauthConfigOut {
    pub grant_type: GrantType,
    pub auth_method: AuthMethod,
    pub client_id: String,
    pub token_url: String,
    pub scopes: Option<Vec<String>>,
    pub extra_params: Option<BTreeMap<String, String>>,
    pub extra_headers: Option<BTreeMap<String, String>>,
}

/// Body parameters Hookgate sets itself: `extraParams` may not replace them.
const OWN_PARAMS: &[&str] = &[
    "grant_type",
    "client_id",
    "client_secret",
    "refresh_token",
    "scope",
    "client_assertion",
    "client_assertion_type",
];

/// Token-request headers `extraHeaders` may not set: HTTP's own, and the one the
/// auth method sets.
const OWN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
    "authorization",
    // The operator's proxy authenticates Hookgate, not a tenant.
    "proxy-authorization",
    "proxy-connection",
    "keep-alive",
    "expect",
];
/// The longest header name `extraHeaders` may hold.
const LONGEST_NAME: usize = 256;

const MOST_ITEMS: usize = 20;
const LONGEST: usize = 4096;
/// The longest JWT lifetime accepted (a day).
const LONGEST_ASSERTION: u64 = 86_400;

fn text(field: &str, v: &str) -> Result<(), String> {
    if v.len() > LONGEST {
        return Err(format!("`{field}` is longer than {LONGEST} bytes"));
    }
    if v.chars().any(char::is_control) {
        return Err(format!("`{field}` holds a control character"));
    }
    Ok(())
}

/// An HTTP token (RFC 9110's `tchar`s), as a header's name must be.
fn header_name(k: &str) -> bool {
    !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl OauthConfigIn {
    /// Checks the shape of the settings (the token URL's address and the JWT key
    /// are checked by the caller, which has the guard and the key parser) and
    /// parts them into what is stored in clear and what is sealed.
    pub fn split(self) -> Result<(OauthSettings, OauthSecrets), String> {
        if self.client_id.is_empty() {
            return Err("`clientId` must not be empty".into());
        }
        text("clientId", &self.client_id)?;
        let url = url::Url::parse(&self.token_url).map_err(|e| format!("`tokenUrl` is not a valid URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err("`tokenUrl` must be an absolute http or https URL".into());
        }
        // It is shown, and a client would send it as Basic credentials of its own.
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "`tokenUrl` may not carry a user or password: give them as `clientId` and `clientSecret`".into()
            );
        }
        text("tokenUrl", &self.token_url)?;
        for (field, v) in [("clientSecret", &self.client_secret), ("refreshToken", &self.refresh_token)] {
            if let Some(v) = v {
                text(field, v)?;
            }
        }
        if matches!(self.auth_method, AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost)
            && self.client_secret.as_deref().is_none_or(str::is_empty)
        {
            return Err(
                "`clientSecret` is required for the `clientSecretBasic` and `clientSecretPost` auth methods".into()
            );
        }
        if self.grant_type == GrantType::RefreshToken && self.refresh_token.as_deref().is_none_or(str::is_empty) {
            return Err("`refreshToken` is required for the `refreshToken` grant type".into());
        }
        let jwt = match (self.auth_method, self.jwt_params) {
            (AuthMethod::ClientSecretJwt, None) => {
                return Err("`jwtParams` is required for the `clientSecretJwt` auth method".into())
            }
            (AuthMethod::ClientSecretJwt, Some(j)) => {
                if let Some(id) = &j.secret_id {
                    text("jwtParams.secretId", id)?;
                }
                if j.token_expiry_secs.is_some_and(|s| s == 0 || s > LONGEST_ASSERTION) {
                    return Err(format!("`jwtParams.tokenExpirySecs` must be 1 to {LONGEST_ASSERTION}"));
                }
                if j.secret_base64.len() > 16 * 1024 {
                    return Err("`jwtParams.secretBase64` is longer than 16 KiB".into());
                }
                Some(j)
            }
            (_, _) => None,
        };
        if let Some(scopes) = &self.scopes {
            if scopes.len() > MOST_ITEMS {
                return Err(format!("at most {MOST_ITEMS} `scopes`"));
            }
            if let Some(bad) = scopes.iter().find(|s| s.is_empty() || s.contains(' ') || text("scopes", s).is_err()) {
                return Err(format!("scope `{bad}` is not valid: scopes are non-empty, without spaces"));
            }
        }
        if let Some(params) = &self.extra_params {
            if params.len() > MOST_ITEMS {
                return Err(format!("at most {MOST_ITEMS} `extraParams`"));
            }
            for (k, v) in params {
                text("extraParams", k)?;
                text("extraParams", v)?;
                if k.is_empty() || OWN_PARAMS.contains(&k.as_str()) {
                    return Err(format!("`extraParams` may not set `{k}`: Hookgate sets it"));
                }
            }
        }
        if let Some(headers) = &self.extra_headers {
            if headers.len() > MOST_ITEMS {
                return Err(format!("at most {MOST_ITEMS} `extraHeaders`"));
            }
            for (k, v) in headers {
                if k.len() > LONGEST_NAME {
                    return Err(format!("`extraHeaders`: a name is longer than {LONGEST_NAME} bytes"));
                }
                if !header_name(k) || v.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                    return Err(format!("`extraHeaders`: `{k}` is not a valid header"));
                }
                if OWN_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                    return Err(format!("`extraHeaders` may not set `{k}`: HTTP or the auth method sets it"));
                }
                text("extraHeaders", v)?;
            }
        }
        let settings = OauthSettings {
            grant_type: self.grant_type,
            auth_method: self.auth_method,
            client_id: self.client_id,
            token_url: self.token_url,
            scopes: self.scopes,
            extra_params: self.extra_params,
            jwt_key_id: jwt.as_ref().and_then(|j| j.secret_id.clone()),
            jwt_expiry_secs: jwt.as_ref().and_then(|j| j.token_expiry_secs),
        };
        let secrets = OauthSecrets {
            client_secret: self.client_secret,
            refresh_token: self.refresh_token,
            jwt_key_base64: jwt.map(|j| j.secret_base64),
            extra_headers: self.extra_headers,
        };
        Ok((settings, secrets))
    }
}

impl OauthSettings {
    /// As answered, with the extra headers' names (their values are never
    /// answered: they are sealed as the credentials they may be).
    pub fn shown(&self, extra_headers: Option<BTreeMap<String, String>>) -> OauthConfigOut {
        let extra_headers = extra_headers.map(|h| h.into_keys().map(|k| (k, String::new())).collect());
        OauthConfigOut {
            grant_type: self.grant_type,
            auth_method: self.auth_method,
            client_id: self.client_id.clone(),
            token_url: self.token_url.clone(),
            scopes: self.scopes.clone(),
            extra_params: self.extra_params.clone(),
            extra_headers,
        }
    }
}
