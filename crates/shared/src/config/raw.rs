//! The settings as strings, merged from the file, the environment and the
//! defaults, before validation: each read names its setting in an error.

use std::{collections::HashMap, path::Path, time::Duration};

use super::{ConfigError, Setting, SETTINGS};

/// Raw string values by file key, after merging file, environment and defaults.
pub(super) struct Raw(pub(super) HashMap<&'static str, String>);

impl Raw {
    fn setting(key: &str) -> &'static Setting {
        SETTINGS.iter().find(|s| s.key == key).expect("setting is declared in SETTINGS")
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    pub(super) fn required(&self, key: &str) -> Result<&str, ConfigError> {
        let s = Self::setting(key);
        self.get(key).ok_or(ConfigError::Missing { key: s.key, env: s.env })
    }

    pub(super) fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
        let s = Self::setting(key);
        ConfigError::Invalid { key: s.key, env: s.env, reason: reason.into() }
    }

    pub(super) fn parse<T: std::str::FromStr>(&self, key: &str) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        let v = self.required(key)?;
        v.trim().parse().map_err(|e: T::Err| Self::invalid(key, format!("`{v}`: {e}")))
    }

    pub(super) fn secs(&self, key: &str) -> Result<Duration, ConfigError> {
        self.parse::<u64>(key).map(Duration::from_secs)
    }

    pub(super) fn millis(&self, key: &str) -> Result<Duration, ConfigError> {
        self.parse::<u64>(key).map(Duration::from_millis)
    }
}

pub(super) fn read_table(path: &Path) -> Result<toml::Table, ConfigError> {
    let err = |reason: String| ConfigError::File { path: path.display().to_string(), reason };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    text.parse::<toml::Table>().map_err(|e| err(e.to_string()))
}

/// A TOML value as the string the environment would have given.
pub(super) fn toml_to_string(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(items) => items.iter().map(toml_to_string).collect::<Vec<_>>().join(","),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        // Dates and tables are no setting's type; validation names the setting.
        _ => "<unsupported TOML value>".to_owned(),
    }
}

pub(super) fn parse_list<T>(s: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(|p| item(p).map_err(|e| format!("`{p}`: {e}"))).collect()
}
