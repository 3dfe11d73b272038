//! The portal's branding as a tenant sets it, parsed at the edge: every value
//! ends up in a page or in a `Content-Security-Policy` header, so each is held to
//! a shape that cannot break out of either.

use hookgate_shared::{
    http::ApiError,
    store::portals::{PortalSettings, Theme},
};
use serde::Deserialize;
use url::{Host, Url};

/// A tenant's portal settings, as a PUT gives them (each checked before it is kept).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = PortalSettingsIn)]
pub(crate) struct SettingsIn {
    display_name: Option<String>,
    logo_url: Option<String>,
    primary_color: Option<String>,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    theme: Theme,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    frame_ancestors: Vec<String>,
    #[serde(default, deserialize_with = "crate::patch::null_as_default")]
    show_header_values: bool,
}

const MAX_ANCESTORS: usize = 16;

impl SettingsIn {
    pub(crate) fn parse(self) -> Result<PortalSettings, ApiError> {
        let invalid = |m: &str| Err(ApiError::Validation(m.into()));
        let display_name = self.display_name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty());
        if display_name.as_ref().is_some_and(|n| n.chars().count() > 80 || n.chars().any(char::is_control)) {
            return invalid("`displayName` must be at most 80 characters, without control characters");
        }
        let logo_url = match self.logo_url.filter(|u| !u.is_empty()) {
            Some(u) => Some(logo(&u)?),
            None => None,
        };
        if let Some(c) = &self.primary_color {
            let hex = c.strip_prefix('#').unwrap_or("");
            if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return invalid("`primaryColor` must be a colour as #rrggbb");
            }
        }
        if self.frame_ancestors.len() > MAX_ANCESTORS {
            return invalid("`frameAncestors` may hold at most 16 origins");
        }
        let frame_ancestors = self.frame_ancestors.iter().map(|o| origin(o)).collect::<Result<Vec<_>, _>>()?;
        Ok(PortalSettings {
            display_name,
            logo_url,
            primary_color: self.primary_color.map(|c| c.to_ascii_lowercase()),
            theme: self.theme,
            frame_ancestors,
            show_header_values: self.show_header_values,
        })
    }
}

fn is_loopback(u: &Url) -> bool {
    match u.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A host that can stand in a Content-Security-Policy source as it is: an IP
/// address, or a name of letters, digits, dots and hyphens. The URL parser lets
/// `;`, `,`, `*` and quotes through in names, and each would change the policy.
fn plain_host(u: &Url) -> bool {
    match u.host() {
        Some(Host::Domain(d)) => {
            !d.is_empty() && d.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        }
        Some(Host::Ipv4(_) | Host::Ipv6(_)) => true,
        None => false,
    }
}

/// An `https` image URL (plain `http` only on loopback, for development).
fn logo(raw: &str) -> Result<String, ApiError> {
    let bad = || ApiError::Validation("`logoUrl` must be an https URL of at most 2048 characters".into());
    let u = Url::parse(raw).map_err(|_| bad())?;
    let scheme_ok = u.scheme() == "https" || (u.scheme() == "http" && is_loopback(&u));
    if raw.len() > 2048 || !scheme_ok || !plain_host(&u) || !u.username().is_empty() || u.password().is_some() {
        return Err(bad());
    }
    Ok(u.to_string())
}

/// An origin, `https://host[:port]` (or `http` on loopback), nothing after it:
/// what `frame-ancestors` takes, serialised by the URL parser so that no
/// character of the input reaches the header unchecked.
fn origin(raw: &str) -> Result<String, ApiError> {
    let bad = || {
        ApiError::Validation(format!(
            "`frameAncestors` holds `{}`: each must be an origin such as https://app.example.com",
            raw.chars().take(100).collect::<String>()
        ))
    };
    let u = Url::parse(raw).map_err(|_| bad())?;
    let scheme_ok = u.scheme() == "https" || (u.scheme() == "http" && is_loopback(&u));
    let bare = u.path() == "/" && u[url::Position::AfterPath..].is_empty() && u.username().is_empty();
    if !scheme_ok || !bare || !plain_host(&u) || u.password().is_some() {
        return Err(bad());
    }
    Ok(u.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> Result<PortalSettings, ApiError> {
        serde_json::from_value::<SettingsIn>(v).expect("shape").parse()
    }

    #[test]
    fn origins_are_normalised_and_anything_else_is_refused() {
        let s = parse(serde_json::json!({"frameAncestors": ["https://App.Example.com/", "http://127.0.0.1:8080"]}))
            .unwrap();
        assert_eq!(s.frame_ancestors, ["https://app.example.com", "http://127.0.0.1:8080"]);
        for bad in [
            "https://a.example/path",
            "http://a.example",
            "https://a.example?x=1",
            "javascript:alert(1)",
            "https://a.example; script-src *",
            "'self'",
            "*",
            "https://a.example;sandbox",
            "https://a.example%3Bsandbox",
            "https://a.example,b.example",
            "https://*",
            "https://*.com",
            "https://a'b.example",
        ] {
            assert!(parse(serde_json::json!({ "frameAncestors": [bad] })).is_err(), "{bad}");
        }
    }

    #[test]
    fn colours_logos_and_names_are_held_to_their_shapes() {
        let s = parse(serde_json::json!({"primaryColor": "#AABBCC", "logoUrl": "https://cdn.example/l.png",
            "displayName": " Acme ", "theme": "dark"}))
        .unwrap();
        assert_eq!(s.primary_color.as_deref(), Some("#aabbcc"));
        assert_eq!(s.display_name.as_deref(), Some("Acme"));
        assert_eq!(s.theme, Theme::Dark);
        assert!(parse(serde_json::json!({"primaryColor": "red"})).is_err());
        for bad in ["https://cdn.example;frame-ancestors/l.png", "https://cdn,example/l.png", "https://*.example/l.png"]
        {
            assert!(parse(serde_json::json!({ "logoUrl": bad })).is_err(), "{bad}");
        }
        assert!(parse(serde_json::json!({"primaryColor": "#12345g"})).is_err());
        assert!(parse(serde_json::json!({"logoUrl": "javascript:alert(1)"})).is_err());
        assert!(parse(serde_json::json!({"logoUrl": "http://cdn.example/l.png"})).is_err());
        assert!(parse(serde_json::json!({"displayName": "a\u{7}b"})).is_err());
        assert!(serde_json::from_value::<SettingsIn>(serde_json::json!({"theme": "neon"})).is_err());
    }
}
