//! Timestamps from clients, held to the range the store can keep (1970 to 9999):
//! chrono parses years from -262143, which Postgres refuses (a 500) and whose
//! arithmetic panics; such a value is refused here, at the edge, as bad input.

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Deserializer};

fn in_range<E: serde::de::Error>(t: DateTime<Utc>) -> Result<DateTime<Utc>, E> {
    match (1970..=9999).contains(&t.year()) {
        true => Ok(t),
        false => Err(E::custom(format!("timestamp {t} is outside the years 1970 to 9999"))),
    }
}

/// `?since=&until=`: a window of time a query asks about, either end open.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Window {
    #[serde(default, deserialize_with = "opt")]
    pub since: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "opt")]
    pub until: Option<DateTime<Utc>>,
}

/// `#[serde(deserialize_with = "crate::when::at")]`
pub fn at<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    in_range(DateTime::<Utc>::deserialize(d)?)
}

/// `#[serde(default, deserialize_with = "crate::when::opt")]`
pub fn opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    Option::<DateTime<Utc>>::deserialize(d)?.map(in_range).transpose()
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize, Debug)]
    struct Q {
        #[serde(default, deserialize_with = "super::opt")]
        since: Option<chrono::DateTime<chrono::Utc>>,
    }

    #[test]
    fn years_the_store_cannot_keep_are_refused_and_the_rest_pass() {
        let parse = |s: &str| serde_json::from_str::<Q>(s);
        assert!(parse(r#"{"since": "-262143-01-01T00:00:00Z"}"#).is_err());
        assert!(parse(r#"{"since": "1969-12-31T23:59:59Z"}"#).is_err());
        assert!(parse(r#"{"since": "2026-12-03T00:00:00Z"}"#).unwrap().since.is_some());
        assert!(parse("{}").unwrap().since.is_none());
    }
}
