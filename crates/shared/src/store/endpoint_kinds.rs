//! The schema's `endpoint_kinds`, which `endpoints.kind` references: written
//! from the kinds table (`status::EndpointKind`) by every run of `hookgate migrate`.

use tokio_postgres::Client;

use super::StoreError;

/// Writes the endpoint kinds this release knows into `endpoint_kinds` (which
/// `endpoints.kind` references), once migration 0049 has made it: adding a kind
/// to the kinds table needs no migration. Rows are only added, never removed or
/// changed, so an older release running beside this one (or after a rollback)
/// finds every kind it knows, and no row of a kind it does not is orphaned.
pub async fn admit(client: &Client) -> Result<(), StoreError> {
    let exists: bool = client.query_one("SELECT to_regclass('endpoint_kinds') IS NOT NULL", &[]).await?.get(0);
    if !exists {
        return Ok(());
    }
    let kinds = crate::status::EndpointKind::ALL;
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
