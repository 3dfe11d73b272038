//! The schema's `endpoint_kinds`, which `endpoints.kind` references: the kinds
//! of the kinds table (`status::EndpointKind`) the database admits.
//!
//! A kind is admitted like a contract migration runs: on a new installation at
//! once, on one in use by the workers once no connected process of an older
//! release, which would take such a row for an HTTP endpoint, is left
//! (`contract::run`; each process announces the kinds it knows). So a release
//! with a new kind needs no migration of its own, and until its kind is
//! admitted, creating an endpoint of it answers 409 (`StoreError::KindNotAdmitted`).

use tokio_postgres::Client;

use super::StoreError;
use crate::status::EndpointKind;

/// The codes of this release's kinds that `endpoint_kinds` lacks; none before
/// migration 0049 has made the table (the CHECK of 0032 stands until then).
pub async fn missing(client: &Client) -> Result<Vec<i16>, StoreError> {
    let exists: bool = client.query_one("SELECT to_regclass('endpoint_kinds') IS NOT NULL", &[]).await?.get(0);
    if !exists {
        return Ok(Vec::new());
    }
    let codes: Vec<i16> = EndpointKind::ALL.iter().map(|k| k.code()).collect();
    let rows = client
        .query(
            "SELECT c FROM unnest($1::smallint[]) c WHERE NOT EXISTS (SELECT 1 FROM endpoint_kinds k WHERE k.code = c)
             ORDER BY c",
            &[&codes],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Writes the kinds this release knows into `endpoint_kinds`, once migration
/// 0049 has made it. Rows are only added, never removed or changed: a release
/// after a rollback finds every kind it knows.
pub async fn admit(client: &Client) -> Result<(), StoreError> {
    let exists: bool = client.query_one("SELECT to_regclass('endpoint_kinds') IS NOT NULL", &[]).await?.get(0);
    if !exists {
        return Ok(());
    }
    let kinds = EndpointKind::ALL;
    let codes: Vec<i16> = kinds.iter().map(|k| k.code()).collect();
    let names: Vec<&str> = kinds.iter().map(|k| k.type_name().unwrap_or("http")).collect();
    client
        .execute(
            "INSERT INTO endpoint_kinds (code, name) SELECT * FROM unnest($1::smallint[], $2::text[])
             ON CONFLICT (code) DO NOTHING",
            &[&codes, &names],
        )
        .await?;
    Ok(())
}
