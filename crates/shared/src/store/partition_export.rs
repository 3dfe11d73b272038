//! A detached partition's rows as JSON, one object per row, for the cold
//! archive; and the bounds a partition carries with it once detached.
//!
//! Byte columns (`payload`) are base64; an attempt's recorded headers are in
//! their full form (`attempt_headers`). Rows of an application whose erasure is
//! requested, or done (its application row is gone), are left out: an erased
//! customer is in no archive written after the request, even from a table that
//! a failed archive kept detached while the erasure finished. Expunged content is already gone from the rows
//! (a `null` payload, an `EXPUNGED` response), so it is never archived.

use chrono::{DateTime, Utc};
use futures_util::{Stream, StreamExt};
use tokio_postgres::GenericClient;

use super::{partitions::checked, StoreError};

/// The archive's column list of a family: every column, bytes as base64.
fn select(table: &str) -> &'static str {
    match table {
        "messages" | "inbound_events" => {
            "(to_jsonb(t) - 'payload') || jsonb_build_object('payload', encode(t.payload, 'base64'))"
        }
        _ => "to_jsonb(t)",
    }
}

/// Streams the rows of the table `name` (a partition of `family`, detached or
/// not) as JSON text, in id order.
pub async fn rows(
    db: &impl GenericClient,
    family: &str,
    name: &str,
) -> Result<impl Stream<Item = Result<String, StoreError>>, StoreError> {
    let key = if matches!(family, "deliveries" | "attempts") { "msg_id" } else { "id" };
    let sql = format!(
        "SELECT ({})::text FROM {} t
         WHERE EXISTS (SELECT 1 FROM applications a WHERE a.tenant_id = t.tenant_id AND a.id = t.app_id)
           AND NOT EXISTS (SELECT 1 FROM erasures x WHERE x.tenant_id = t.tenant_id AND x.app_id = t.app_id)
         ORDER BY t.{key}",
        select(checked(family)?),
        checked(name)?
    );
    let stream = db.query_raw(&sql, std::iter::empty::<&str>()).await?;
    let attempts = family == "attempts";
    Ok(stream.map(move |r| {
        r.map(|row| row.get::<_, String>(0))
            .map(|text| if attempts { full_headers(text) } else { text })
            .map_err(StoreError::from)
    }))
}

/// An attempt's row with its recorded headers in the full form, as the API shows
/// them: the archive is read without a database (`hookgate archive show`), so it
/// keeps no form only the store can read back.
fn full_headers(text: String) -> String {
    let Ok(serde_json::Value::Object(mut row)) = serde_json::from_str::<serde_json::Value>(&text) else { return text };
    let (Some(headers), Some(msg)) = (row.remove("request_headers"), row.get("msg_id").and_then(|m| m.as_str())) else {
        return text;
    };
    let full = super::attempt_headers::read(headers, msg);
    row.insert("request_headers".into(), full);
    serde_json::Value::Object(row).to_string()
}

/// Writes a partition's family and bounds on its table, where they stay once it
/// is detached (a round that dies between detach and drop leaves them to the next).
pub async fn label(
    db: &impl GenericClient,
    name: &str,
    family: &str,
    from: Option<DateTime<Utc>>,
    to: DateTime<Utc>,
) -> Result<(), StoreError> {
    let from = from.map(|f| f.to_rfc3339()).unwrap_or_default();
    let text = format!("hookgate {} {from} {}", checked(family)?, to.to_rfc3339());
    db.batch_execute(&format!("COMMENT ON TABLE {} IS '{text}'", checked(name)?)).await?;
    Ok(())
}

/// The family and bounds [`label`] wrote on a table, if it did.
pub async fn labelled(
    db: &impl GenericClient,
    name: &str,
) -> Result<Option<(String, Option<DateTime<Utc>>, DateTime<Utc>)>, StoreError> {
    let row = db.query_one("SELECT obj_description(to_regclass($1), 'pg_class')", &[&name]).await?;
    let Some(text): Option<String> = row.get(0) else { return Ok(None) };
    let parts: Vec<&str> = text.split(' ').collect();
    let parse = |s: &str| DateTime::parse_from_rfc3339(s).map(|d| d.with_timezone(&Utc)).ok();
    Ok(match parts.as_slice() {
        ["hookgate", family, from, to] => parse(to).map(|to| (family.to_string(), parse(from), to)),
        _ => None,
    })
}
