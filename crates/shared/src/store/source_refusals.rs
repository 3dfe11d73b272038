//! The `source_refusals` table: the requests a source refused, its newest 100
//! (Svix's ingest log).

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::GenericClient;

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::ids::{SourceId, TenantId};

/// The most refusals kept per source.
pub const KEPT: i64 = 100;

/// One refused request.
#[derive(Debug, Clone)]
pub struct Refused {
    pub id: String,
    pub source_id: SourceId,
    pub status_code: i16,
    pub error_text: String,
    pub headers: Value,
    pub payload: String,
    pub created_at: DateTime<Utc>,
}

/// A new log id: `log` and the 22 base-62 digits of a ULID, so ids sort as they were made.
pub fn log_id() -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut n = u128::from(ulid::Ulid::new());
    let mut out = [b'0'; 22];
    for d in out.iter_mut().rev() {
        *d = DIGITS[(n % 62) as usize];
        n /= 62;
    }
    format!("log{}", String::from_utf8_lossy(&out))
}

/// Whether `id` has the shape of a log id (an iterator of this list).
pub fn is_log_id(id: &str) -> bool {
    id.strip_prefix("log").is_some_and(|d| d.len() == 22 && d.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Records one refusal and trims the source to its newest [`KEPT`] (the delete
/// does not see the row this statement adds: it keeps one fewer of the rest).
pub async fn insert(db: &impl GenericClient, tenant: &TenantId, r: &Refused) -> Result<(), StoreError> {
    db.execute(
        "WITH added AS (
            INSERT INTO source_refusals (tenant_id, source_id, id, status_code, error_text, headers, payload)
            SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM sources WHERE tenant_id = $1 AND id = $2)
         )
         DELETE FROM source_refusals WHERE tenant_id = $1 AND source_id = $2 AND id < (
            SELECT id FROM source_refusals WHERE tenant_id = $1 AND source_id = $2
            ORDER BY id DESC OFFSET $8::bigint - 2 LIMIT 1)",
        &[&tenant.as_str(), &r.source_id.as_str(), &r.id, &r.status_code, &r.error_text, &r.headers, &r.payload, &KEPT],
    )
    .await?;
    Ok(())
}

/// A page of the source's refusals, newest first unless asked otherwise.
pub async fn list(
    db: &impl GenericClient,
    tenant: &TenantId,
    source: &SourceId,
    page: &PageRequest,
) -> Result<Page<Refused>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Descending);
    let sql = format!(
        "SELECT id, source_id, status_code, error_text, headers, payload, created_at FROM source_refusals
         WHERE tenant_id = $1 AND source_id = $2 AND ($3::text IS NULL OR id {cmp} $3)
         ORDER BY id {dir} LIMIT $4"
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &source.as_str(), &key, &page.fetch_limit()]).await?;
    let refused = rows
        .iter()
        .map(|r| Refused {
            id: r.get("id"),
            source_id: SourceId::from_db(r.get("source_id")),
            status_code: r.get("status_code"),
            error_text: r.get("error_text"),
            headers: r.get("headers"),
            payload: r.get("payload"),
            created_at: r.get("created_at"),
        })
        .collect();
    Ok(Page::from_rows(refused, page, |r| r.id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ids_have_svixs_shape_and_sort_as_they_were_made() {
        let a = log_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = log_id();
        assert!(is_log_id(&a) && is_log_id(&b), "{a} {b}");
        assert_eq!(a.len(), 25);
        assert!(a < b);
        assert!(!is_log_id("log123") && !is_log_id("msg_0123456789012345678901"));
    }
}
