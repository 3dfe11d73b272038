//! Ingest sources: the rows of `sources` that have an ingest type, found by id or
//! `uid`, with the token of their `ingestUrl` (see `sources.rs` for the rest).

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::{
    page::{Order, Page, PageRequest, Walk},
    sources::{columns, from_row, OldToken, Source, SourceFields},
    StoreError,
};
use crate::ids::{Ref, SourceId, TenantId};

pub use super::sources::{IngestFields, NewToken};

/// Inserts an ingest source: a source's row with what an ingest source adds.
pub async fn insert(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &SourceId,
    f: &SourceFields,
    ingest: &IngestFields<'_>,
    sealed_secret: Option<&[u8]>,
    token: &NewToken<'_>,
) -> Result<Source, StoreError> {
    super::sources::insert_row(db, tenant, id, f, sealed_secret, Some((ingest, token))).await
}

/// An ingest source by id or `uid`.
pub async fn get(db: &impl GenericClient, tenant: &TenantId, id: &Ref<SourceId>) -> Result<Option<Source>, StoreError> {
    by_ref(db, tenant, id, "").await
}

/// [`get`], its row held until the caller's transaction ends (an upsert's or a
/// rotation's read and write).
pub async fn get_for_update(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &Ref<SourceId>,
) -> Result<Option<Source>, StoreError> {
    by_ref(db, tenant, id, "FOR NO KEY UPDATE").await
}

async fn by_ref(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &Ref<SourceId>,
    lock: &str,
) -> Result<Option<Source>, StoreError> {
    let by = if matches!(id, Ref::Id(_)) { "id" } else { "uid" };
    let sql = format!(
        "SELECT {} FROM sources WHERE tenant_id = $1 AND {by} = $2 AND ingest_type IS NOT NULL {lock}",
        columns("sources")
    );
    db.query_opt(&sql, &[&tenant.as_str(), &id.as_str()]).await?.as_ref().map(from_row).transpose()
}

pub async fn list(db: &impl GenericClient, tenant: &TenantId, page: &PageRequest) -> Result<Page<Source>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Ascending);
    let sql = format!(
        "SELECT {} FROM sources WHERE tenant_id = $1 AND ingest_type IS NOT NULL AND ($2::text IS NULL OR id {cmp} $2)
         ORDER BY id {dir} LIMIT $3",
        columns("sources")
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &key, &page.fetch_limit()]).await?;
    let sources = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
    Ok(Page::from_rows(sources, page, |s| s.id.to_string()))
}

/// Replaces an ingest source's fields (and its secret, when `sealed_secret` is
/// given: the previous one's grace ends, as it does when the type changes); its
/// token stays.
pub async fn replace(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &SourceId,
    f: &SourceFields,
    ingest: &IngestFields<'_>,
    sealed_secret: Option<&[u8]>,
    caches: &impl super::Forget,
) -> Result<Option<Source>, StoreError> {
    let sql = format!(
        "UPDATE sources SET name = $3, provider = $4, verify = $5, idempotency = $6, mode = $7,
            secret = CASE WHEN $8::bytea IS NULL AND $4 = 'none' THEN NULL ELSE COALESCE($8, secret) END,
            -- A new secret or a new type ends the previous secret's grace.
            old_secret = CASE WHEN $8::bytea IS NOT NULL OR $4 = 'none' OR ingest_type IS DISTINCT FROM $9
                THEN NULL ELSE old_secret END,
            old_secret_until = CASE WHEN $8::bytea IS NOT NULL OR $4 = 'none' OR ingest_type IS DISTINCT FROM $9
                THEN NULL ELSE old_secret_until END,
            ingest_type = $9, uid = $10, metadata = $11, ingest_config = $12, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND ingest_type IS NOT NULL RETURNING {}",
        columns("sources")
    );
    let (provider, verify, idempotency, mode) = super::sources::stored(f);
    let row = db
        .query_opt(
            &sql,
            &[
                &tenant.as_str(),
                &id.as_str(),
                &f.name,
                &provider,
                &verify,
                &idempotency,
                &mode,
                &sealed_secret,
                &ingest.type_name,
                &ingest.uid,
                ingest.metadata,
                ingest.config,
            ],
        )
        .await?;
    caches.forget_source(id);
    row.as_ref().map(from_row).transpose()
}

/// Makes `token` current and keeps `old` (the tokens still accepted, the one
/// rotated out among them).
pub async fn rotate_token(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &SourceId,
    token: &NewToken<'_>,
    old: &[OldToken],
    caches: &impl super::Forget,
) -> Result<bool, StoreError> {
    let old = serde_json::to_value(old).expect("old tokens serialise");
    let n = db
        .execute(
            "UPDATE sources SET ingest_token = $3, ingest_token_hash = $4, ingest_old_tokens = $5, updated_at = now()
             WHERE tenant_id = $1 AND id = $2 AND ingest_type IS NOT NULL",
            &[&tenant.as_str(), &id.as_str(), &token.sealed, &token.hash, &old],
        )
        .await?;
    caches.forget_source(id);
    Ok(n == 1)
}

/// The tokens rotated out that are still accepted at `now`, with the current one
/// (`current_hash`) added, accepted until `until`.
pub fn after_rotation(
    old: &[OldToken],
    current_hash: &[u8],
    now: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<OldToken> {
    let mut kept: Vec<OldToken> = old.iter().filter(|t| t.until > now).cloned().collect();
    kept.push(OldToken { hash: hex::encode(current_hash), until });
    kept
}

/// Marks `app` as the one holding ingest source `source`'s endpoints.
pub async fn mark_app(
    db: &impl GenericClient,
    tenant: &TenantId,
    app: &crate::ids::AppId,
    source: &SourceId,
) -> Result<(), StoreError> {
    db.execute(
        "UPDATE applications SET ingest_source_id = $3 WHERE tenant_id = $1 AND id = $2",
        &[&tenant.as_str(), &app.as_str(), &source.as_str()],
    )
    .await?;
    Ok(())
}

/// The live cron sources of every tenant (those of enabled, live tenants), which
/// every ingress process ticks for.
pub async fn cron_sources(db: &impl GenericClient) -> Result<Vec<Source>, StoreError> {
    let sql = format!(
        "SELECT {} FROM sources s JOIN tenants t ON t.id = s.tenant_id
         WHERE s.ingest_type = 'cron' AND NOT s.disabled AND NOT t.disabled AND t.deleted_at IS NULL
         ORDER BY s.id",
        columns("s")
    );
    db.query(&sql, &[]).await?.iter().map(from_row).collect()
}

/// How many cron sources the tenant has.
pub async fn count_cron(db: &impl GenericClient, tenant: &TenantId) -> Result<i64, StoreError> {
    let row = db
        .query_one("SELECT count(*) FROM sources WHERE tenant_id = $1 AND ingest_type = 'cron'", &[&tenant.as_str()])
        .await?;
    Ok(row.get(0))
}
