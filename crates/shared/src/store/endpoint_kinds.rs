//! The schema's `endpoint_kinds`, which `endpoints.kind` references: the kinds
//! of the kinds table (`status::EndpointKind`) the database admits.
//!
//! A kind is admitted like a contract migration runs: on a new installation at
//! once, on one in use by the workers once no connected process of an older
//! release, which would take such a row for an HTTP endpoint, is left
//! (`contract::run`; each process announces the kinds it knows). So a release
//! with a new kind needs no migration of its own, and until its kind is
//! admitted, creating an endpoint of it answers 409 (`StoreError::KindNotAdmitted`).

use tokio_postgres::{Client, GenericClient};

use super::StoreError;
use crate::status::EndpointKind;

/// Whether migration 0050 has made `endpoint_kinds` (before it, the CHECK of
/// 0032 says which kinds the schema admits).
async fn made(db: &impl GenericClient) -> Result<bool, StoreError> {
    Ok(db.query_one("SELECT to_regclass('endpoint_kinds') IS NOT NULL", &[]).await?.get(0))
}

/// The codes of this release's kinds that `endpoint_kinds` lacks; none before
/// migration 0050 has made the table (the CHECK of 0032 stands until then).
pub async fn missing(client: &Client) -> Result<Vec<i16>, StoreError> {
    if !made(client).await? {
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

/// The highest code `endpoint_kinds` admits, if the table is there: a process
/// refuses to start when it is above the kinds it knows (a newer release has
/// admitted a kind whose rows this one would take for something else).
pub async fn newest(client: &Client) -> Result<Option<i16>, StoreError> {
    if !made(client).await? {
        return Ok(None);
    }
    Ok(client.query_one("SELECT max(code) FROM endpoint_kinds", &[]).await?.get(0))
}

/// Whether the schema admits `kind` now: a row of `endpoint_kinds`, or, before
/// migration 0050 has made it, a code the CHECK of 0032 admits (0 to 8). Asked
/// before a destination is written, so that one of a kind not admitted yet is
/// answered 409 whatever the database's error would say (Citus drops a shard's
/// constraint name).
pub async fn admitted(db: &impl GenericClient, kind: EndpointKind) -> Result<bool, StoreError> {
    if !made(db).await? {
        return Ok((0..=8).contains(&kind.code()));
    }
    let sql = "SELECT EXISTS (SELECT 1 FROM endpoint_kinds WHERE code = $1)";
    Ok(db.query_one(sql, &[&kind.code()]).await?.get(0))
}

/// Writes the kinds this release knows into `endpoint_kinds`, once migration
/// 0050 has made it. Rows are only added, never removed or changed. A release
/// that does not know an admitted kind refuses to start (from this one on):
/// rolling back past a kind's admission means rolling forward again.
pub async fn admit(client: &Client) -> Result<(), StoreError> {
    if !made(client).await? {
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
