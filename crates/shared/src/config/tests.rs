//! The configuration's tests: what loads, what is refused and why, and the
//! reference in docs/configuration.md against the settings table.

use super::*;

const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn minimal() -> Vec<(&'static str, &'static str)> {
    vec![("DATABASE_URL", "postgres://u@127.0.0.1/db"), ("HOOKGATE_MASTER_KEY", KEY)]
}

#[test]
fn defaults_apply_when_only_the_required_settings_are_given() {
    let c = Config::from_sources(None, &env(&minimal())).unwrap();
    assert_eq!(c.listen, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(c.retry_schedule.len(), 7);
    assert_eq!(c.retry_schedule[1], Duration::from_secs(300));
    assert_eq!(c.sync_lease, Duration::from_secs(60));
    assert!(c.redis_url.is_none());
    assert_eq!(c.log_format, LogFormat::Text);
    assert_eq!(c.default_signature_type, crate::endpoint_secret::SignatureType::Hmac256);
}

/// Whole seconds: a lease longer than the timeout is at least
/// `LEASE_MARGIN` longer, which is all the check holds (the margin a FIFO
/// turn should have to write its result is only warned about, by the
/// FIFO runner: its own tests).
#[test]
fn a_lease_not_longer_than_the_egress_timeout_is_refused_naming_both() {
    for (lease, ok) in [("15", false), ("14", false), ("16", true)] {
        let mut pairs = minimal();
        pairs.push(("HOOKGATE_EGRESS_TIMEOUT_SECS", "15"));
        pairs.push(("HOOKGATE_DELIVERY_LEASE_SECS", lease));
        match Config::from_sources(None, &env(&pairs)) {
            Ok(c) => assert!(ok && c.delivery_lease >= c.egress_timeout + LEASE_MARGIN, "lease {lease} taken"),
            Err(e) => {
                let text = e.to_string();
                assert!(!ok, "lease {lease} refused: {text}");
                assert!(text.contains("HOOKGATE_DELIVERY_LEASE_SECS") && text.contains("HOOKGATE_EGRESS_TIMEOUT_SECS"));
            }
        }
    }
}

#[test]
fn a_missing_database_url_is_named_in_the_error() {
    let e = Config::from_sources(None, &env(&[("HOOKGATE_MASTER_KEY", KEY)])).unwrap_err();
    assert!(e.to_string().contains("DATABASE_URL"), "{e}");
}

#[test]
fn a_master_key_of_the_wrong_length_is_named_in_the_error() {
    let mut pairs = minimal();
    pairs[1] = ("HOOKGATE_MASTER_KEY", "c2hvcnQ=");
    let e = Config::from_sources(None, &env(&pairs)).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("HOOKGATE_MASTER_KEY") && text.contains("32 bytes"), "{text}");
}

#[test]
fn the_environment_overrides_the_file() {
    let dir = std::env::temp_dir().join(format!("hg-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hookgate.toml");
    std::fs::write(&path, "listen = \"127.0.0.1:9000\"\nsync_lease_secs = 10\nretry_schedule = [1, 2]\n").unwrap();
    let mut pairs = minimal();
    pairs.push(("HOOKGATE_SYNC_LEASE_SECS", "20"));
    pairs.push(("HOOKGATE_DEFAULT_SIGNATURE_TYPE", "ed25519"));
    let c = Config::from_sources(Some(&path), &env(&pairs)).unwrap();
    assert_eq!(c.default_signature_type, crate::endpoint_secret::SignatureType::Ed25519);
    assert_eq!(c.listen.port(), 9000);
    assert_eq!(c.sync_lease, Duration::from_secs(20));
    assert_eq!(c.retry_schedule, vec![Duration::from_secs(1), Duration::from_secs(2)]);
}

#[test]
fn sentinel_and_cluster_together_are_refused_and_sentinels_may_be_many() {
    let mut pairs = minimal();
    pairs.push(("REDIS_URL", "redis://127.0.0.1:26379/,redis://127.0.0.1:26380/"));
    pairs.push(("HOOKGATE_REDIS_SENTINEL_MASTER", "mymaster"));
    let c = Config::from_sources(None, &env(&pairs)).unwrap();
    assert_eq!(c.redis_sentinel_master.as_deref(), Some("mymaster"));
    pairs.push(("HOOKGATE_REDIS_CLUSTER", "true"));
    let e = Config::from_sources(None, &env(&pairs)).unwrap_err();
    assert!(e.to_string().contains("HOOKGATE_REDIS_SENTINEL_MASTER"), "{e}");
}

#[test]
fn sentinel_or_cluster_urls_of_mixed_tls_modes_are_refused() {
    for urls in ["rediss://127.0.0.1:1/#insecure,rediss://127.0.0.1:2/", "rediss://127.0.0.1:1/,redis://127.0.0.1:2/"] {
        let mut pairs = minimal();
        pairs.push(("REDIS_URL", urls));
        pairs.push(("HOOKGATE_REDIS_SENTINEL_MASTER", "mymaster"));
        let e = Config::from_sources(None, &env(&pairs)).unwrap_err();
        assert!(e.to_string().contains("REDIS_URL") && e.to_string().contains("mixes"), "{e}");
    }
}

#[test]
fn the_public_url_loses_its_trailing_slash_and_must_be_a_plain_http_url() {
    let mut pairs = minimal();
    pairs.push(("HOOKGATE_PUBLIC_URL", "https://hooks.example.com:8443/"));
    let c = Config::from_sources(None, &env(&pairs)).unwrap();
    assert_eq!(c.public_url.as_deref(), Some("https://hooks.example.com:8443"));
    for bad in [
        "hooks.example.com",
        "ftp://hooks.example.com",
        "https://u@hooks.example.com",
        "https://:s3cret@hooks.example.com",
        "https://h.example/?a=1",
        "https://h.example/gw",
    ] {
        let mut pairs = minimal();
        pairs.push(("HOOKGATE_PUBLIC_URL", bad));
        let e = Config::from_sources(None, &env(&pairs)).unwrap_err();
        assert!(e.to_string().contains("HOOKGATE_PUBLIC_URL"), "{bad}: {e}");
    }
}

#[test]
fn an_unknown_key_in_the_file_is_refused() {
    let dir = std::env::temp_dir().join(format!("hg-config-u-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hookgate.toml");
    std::fs::write(&path, "lisen = \"127.0.0.1:9000\"\n").unwrap();
    let e = Config::from_sources(Some(&path), &env(&minimal())).unwrap_err();
    assert!(e.to_string().contains("lisen"), "{e}");
}

#[test]
fn bad_values_name_their_setting() {
    for (var, value) in [
        ("HOOKGATE_LISTEN", "nowhere"),
        ("HOOKGATE_RETRY_SCHEDULE", "5,soon"),
        ("HOOKGATE_EGRESS_ALLOW_NETWORKS", "127.0.0.1/99"),
        ("HOOKGATE_LOG_FORMAT", "xml"),
        ("HOOKGATE_ADMIN_TOKEN", "short"),
        ("HOOKGATE_DEFAULT_SIGNATURE_TYPE", "rsa"),
    ] {
        let mut pairs = minimal();
        pairs.push((var, value));
        let e = Config::from_sources(None, &env(&pairs)).unwrap_err();
        assert!(e.to_string().contains(var), "{var}: {e}");
    }
}

mod docs {
    use super::super::SETTINGS;

    /// The configuration reference must name every setting with its real default.
    #[test]
    fn docs_configuration_lists_every_setting_with_its_default() {
        let doc = include_str!("../../../../docs/configuration.md");
        for s in SETTINGS {
            let row = doc
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", s.key)))
                .unwrap_or_else(|| panic!("docs/configuration.md has no row for `{}`", s.key));
            assert!(row.contains(&format!("`{}`", s.env)), "{row}");
            match s.default {
                Some("") => assert!(row.contains("(empty)"), "{row}"),
                Some(d) => assert!(row.contains(&format!("| `{d}` |")), "default of {}: {row}", s.key),
                None => assert!(row.contains("| — |"), "{row}"),
            }
        }
        // The settings table ends where the OpenTelemetry variables (the SDK's own) begin.
        let settings = doc.split("### OpenTelemetry").next().unwrap_or_default();
        let rows = settings.lines().filter(|l| l.starts_with("| `")).count();
        assert_eq!(rows, SETTINGS.len(), "the doc lists settings the code does not have");
    }
}

#[test]
fn an_smtp_url_is_read_with_its_tls_and_credentials_and_a_password_never_goes_in_clear_off_this_host() {
    let load = |url: &str| {
        let mut pairs = minimal();
        pairs.push(("HOOKGATE_SMTP_URL", url));
        Config::from_sources(None, &env(&pairs))
    };
    let c = load("smtp://alerts%40agency:p%40ss@mail.example.com").unwrap().smtp.unwrap();
    assert_eq!((c.host.as_str(), c.port, c.tls), ("mail.example.com", 587, SmtpTls::StartTls));
    assert_eq!(c.credentials, Some(("alerts@agency".to_owned(), "p@ss".to_owned())));
    assert!(!format!("{c:?}").contains("p@ss"), "the password never reaches a log line");
    let c = load("smtps://mail.example.com").unwrap().smtp.unwrap();
    assert_eq!((c.port, c.tls, c.credentials), (465, SmtpTls::Implicit, None));
    assert_eq!(load("smtp://127.0.0.1:2525?tls=none").unwrap().smtp.unwrap().tls, SmtpTls::None);
    for (bad, says) in [
        ("smtp://u:p@mail.example.com?tls=none", "loopback"),
        ("http://mail.example.com", "smtp://"),
        ("smtp://u@mail.example.com", "without a password"),
        ("smtps://mail.example.com?tls=none", "unknown option"),
    ] {
        let e = load(bad).err().unwrap_or_else(|| panic!("{bad} accepted")).to_string();
        assert!(e.contains("HOOKGATE_SMTP_URL") && e.contains(says), "{bad}: {e}");
        assert!(!e.contains(":p@"), "{bad}: the URL is not echoed: {e}");
    }
    assert!(load("smtp://mail.example.com").is_ok());
    assert!(Config::from_sources(None, &env(&minimal())).unwrap().smtp.is_none());
}
