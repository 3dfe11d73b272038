//! The `sources` table: a tenant's receiving addresses, one provider each.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::{GenericClient, Row};

use super::{
    page::{Order, Page, PageRequest, Walk},
    StoreError,
};
use crate::{
    ids::{AppId, SourceId, TenantId},
    source::{verify_json, KeySpec, Mode, Provider},
};

#[derive(Debug, Clone)]
pub struct Source {
    pub tenant_id: TenantId,
    pub id: SourceId,
    pub name: String,
    pub provider: Provider,
    /// Set with provider `none`: the tenant confirmed that nothing is verified.
    pub allow_unverified: bool,
    /// The URL the provider signs (Twilio, Square, HubSpot); `None`: the URL Hookgate shows.
    pub public_url: Option<String>,
    pub secret: Option<Vec<u8>>,
    pub old_secret: Option<Vec<u8>>,
    pub old_secret_until: Option<DateTime<Utc>>,
    pub idempotency: KeySpec,
    pub mode: Mode,
    pub app_id: AppId,
    pub event_type_path: Option<String>,
    /// The source's own retention (its dedupe window); `None` follows the tenant's.
    pub retention_days: Option<i32>,
    /// The tenant's `inboundDays`; `None` follows the operator's default.
    pub tenant_inbound_days: Option<i32>,
    pub disabled: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Set on an ingest source (the Svix Ingest view, `store::ingest_sources`).
    pub ingest: Option<IngestFacet>,
}

/// What an ingest source has besides a source's fields.
#[derive(Debug, Clone)]
pub struct IngestFacet {
    /// The type, as the SDK names it.
    pub type_name: String,
    pub uid: Option<String>,
    pub metadata: Value,
    /// The type's settings that are no secret (a cron source's schedule and payload).
    pub config: Value,
    /// The current token of its `ingestUrl`, sealed with the tenant's key.
    pub token: Vec<u8>,
    /// The current token's hash (`ApiKeyHasher`), which a request's is compared with.
    pub token_hash: Vec<u8>,
    /// Tokens rotated out, each accepted until its time.
    pub old_tokens: Vec<OldToken>,
}

/// A token rotated out: its hash, and until when it is accepted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OldToken {
    /// The token's hash, in hex.
    pub hash: String,
    pub until: DateTime<Utc>,
}

/// The writable fields of a source (the secret is set apart).
#[derive(Debug, Clone)]
pub struct SourceFields {
    pub name: String,
    pub provider: Provider,
    pub allow_unverified: bool,
    pub public_url: Option<String>,
    pub idempotency: KeySpec,
    pub mode: Mode,
    pub app_id: AppId,
    pub event_type_path: Option<String>,
    /// `None` follows the tenant's retention.
    pub retention_days: Option<i32>,
    pub disabled: bool,
}

const COLUMNS: &str = "tenant_id, id, name, provider, secret, old_secret, old_secret_until, verify, idempotency,
    mode, app_id, event_type_path, retention_days, disabled, created_at, updated_at, ingest_type, uid, metadata,
    ingest_token, ingest_token_hash, ingest_old_tokens, ingest_config";

/// The select list: the columns of `sources` as `table` names it, and the tenant's
/// inbound retention.
pub(super) fn columns(table: &str) -> String {
    let cols = COLUMNS.split(',').map(|c| format!("{table}.{}", c.trim())).collect::<Vec<_>>().join(", ");
    format!("{cols}, (SELECT ti.inbound_days FROM tenants ti WHERE ti.id = {table}.tenant_id) AS tenant_inbound_days")
}

impl Source {
    /// Days its inbound events are kept, which is also its dedupe window: its own
    /// setting, else its tenant's, else `default` (the operator's).
    pub fn retention(&self, default: i32) -> i32 {
        self.retention_days.or(self.tenant_inbound_days).unwrap_or(default)
    }
}

/// Parses a stored row; the API validated every value before it was written.
pub(super) fn from_row(r: &Row) -> Result<Source, StoreError> {
    let id = SourceId::from_db(r.get("id"));
    let corrupt = |e: String| StoreError::Corrupt(format!("source {id}: {e}"));
    let verify: Value = r.get("verify");
    let provider = Provider::parse(r.get("provider"), verify.get("hmac")).map_err(corrupt)?;
    let idempotency: Option<Value> = r.get("idempotency");
    Ok(Source {
        tenant_id: TenantId::from_db(r.get("tenant_id")),
        name: r.get("name"),
        provider,
        allow_unverified: verify.get("allowUnverified").and_then(Value::as_bool).unwrap_or(false),
        // Written without query or fragment (parse_public_url); cut here too, so a value
        // stored otherwise cannot double the query it is given.
        public_url: verify
            .get("publicUrl")
            .and_then(Value::as_str)
            .and_then(|u| u.split(['?', '#']).next())
            .map(str::to_owned),
        secret: r.get("secret"),
        old_secret: r.get("old_secret"),
        old_secret_until: r.get("old_secret_until"),
        idempotency: KeySpec::parse(idempotency.as_ref()).map_err(corrupt)?,
        mode: Mode::parse(r.get("mode")).map_err(corrupt)?,
        app_id: AppId::from_db(r.get("app_id")),
        event_type_path: r.get("event_type_path"),
        retention_days: r.get("retention_days"),
        tenant_inbound_days: r.get("tenant_inbound_days"),
        disabled: r.get("disabled"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
        ingest: ingest_from_row(r).map_err(corrupt)?,
        id,
    })
}

/// The ingest facet of a row, if it is an ingest source's.
fn ingest_from_row(r: &Row) -> Result<Option<IngestFacet>, String> {
    let Some(type_name) = r.get::<_, Option<String>>("ingest_type") else { return Ok(None) };
    let (Some(token), Some(token_hash)) = (r.get("ingest_token"), r.get("ingest_token_hash")) else {
        return Err("an ingest source without its token".into());
    };
    let old: Value = r.get("ingest_old_tokens");
    Ok(Some(IngestFacet {
        type_name,
        uid: r.get("uid"),
        metadata: r.get("metadata"),
        config: r.get("ingest_config"),
        token,
        token_hash,
        old_tokens: serde_json::from_value(old).map_err(|e| format!("old ingest tokens: {e}"))?,
    }))
}

/// The stored forms of the typed fields: provider name, `verify`, `idempotency`, mode.
pub(super) fn stored(f: &SourceFields) -> (&'static str, Value, Option<Value>, &'static str) {
    (
        f.provider.name(),
        verify_json(&f.provider, f.public_url.as_deref(), f.allow_unverified),
        f.idempotency.to_json(),
        f.mode.as_str(),
    )
}

pub async fn insert(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &SourceId,
    f: &SourceFields,
    sealed_secret: Option<&[u8]>,
) -> Result<Source, StoreError> {
    insert_row(db, tenant, id, f, sealed_secret, None).await
}

/// What an ingest source (`store::ingest_sources`) has besides a source's fields, as written.
pub struct IngestFields<'a> {
    pub type_name: &'a str,
    pub uid: Option<&'a str>,
    pub metadata: &'a Value,
    /// The type's settings that are no secret.
    pub config: &'a Value,
}

/// A token as written: sealed (to show the `ingestUrl` again) and hashed (to check a request's).
pub struct NewToken<'a> {
    pub sealed: &'a [u8],
    pub hash: &'a [u8],
}

/// A source's row, with what an ingest source adds (`store::ingest_sources`) or
/// without (a plain source: no ingest type, uid, token or settings).
pub(super) async fn insert_row(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &SourceId,
    f: &SourceFields,
    sealed_secret: Option<&[u8]>,
    ingest: Option<(&IngestFields<'_>, &NewToken<'_>)>,
) -> Result<Source, StoreError> {
    let sql = format!(
        "INSERT INTO sources (tenant_id, id, name, provider, secret, verify, idempotency, mode, app_id,
            event_type_path, retention_days, disabled, ingest_type, uid, metadata, ingest_token, ingest_token_hash,
            ingest_config)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, COALESCE($15, '{{}}'::jsonb), $16, $17,
            COALESCE($18, '{{}}'::jsonb))
         RETURNING {}",
        columns("sources")
    );
    let (provider, verify, idempotency, mode) = stored(f);
    let (fields, token) = (ingest.map(|i| i.0), ingest.map(|i| i.1));
    let row = db
        .query_one(
            &sql,
            &[
                &tenant.as_str(),
                &id.as_str(),
                &f.name,
                &provider,
                &sealed_secret,
                &verify,
                &idempotency,
                &mode,
                &f.app_id.as_str(),
                &f.event_type_path,
                &f.retention_days,
                &f.disabled,
                &fields.map(|i| i.type_name),
                &fields.and_then(|i| i.uid),
                &fields.map(|i| i.metadata),
                &token.map(|t| t.sealed),
                &token.map(|t| t.hash),
                &fields.map(|i| i.config),
            ],
        )
        .await?;
    from_row(&row)
}

pub async fn get(db: &impl GenericClient, tenant: &TenantId, id: &SourceId) -> Result<Option<Source>, StoreError> {
    let sql = format!("SELECT {} FROM sources WHERE tenant_id = $1 AND id = $2", columns("sources"));
    db.query_opt(&sql, &[&tenant.as_str(), &id.as_str()]).await?.as_ref().map(from_row).transpose()
}

/// The source, its row locked until the caller's transaction ends (a PATCH's
/// read, merge and write, so a concurrent PATCH of another field is kept).
pub async fn get_for_update(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &SourceId,
) -> Result<Option<Source>, StoreError> {
    let sql = format!("SELECT {} FROM sources WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE", columns("sources"));
    db.query_opt(&sql, &[&tenant.as_str(), &id.as_str()]).await?.as_ref().map(from_row).transpose()
}

/// The one lookup that does not start from a tenant: `/in/{source_id}` names only
/// the source. Returns a live source of a live, enabled tenant.
pub async fn resolve(db: &impl GenericClient, source_id: &SourceId) -> Result<Option<Source>, StoreError> {
    let cols = columns("s");
    let sql = format!(
        "SELECT {cols} FROM sources s JOIN tenants t ON t.id = s.tenant_id
         WHERE s.id = $1 AND NOT s.disabled AND NOT t.disabled AND t.deleted_at IS NULL"
    );
    db.query_opt(&sql, &[&source_id.as_str()]).await?.as_ref().map(from_row).transpose()
}

pub async fn list(db: &impl GenericClient, tenant: &TenantId, page: &PageRequest) -> Result<Page<Source>, StoreError> {
    let Walk { key, cmp, dir } = page.walk(Order::Ascending);
    let sql = format!(
        "SELECT {} FROM sources WHERE tenant_id = $1 AND ($2::text IS NULL OR id {cmp} $2) ORDER BY id {dir} LIMIT $3",
        columns("sources")
    );
    let rows = db.query(&sql, &[&tenant.as_str(), &key, &page.fetch_limit()]).await?;
    let sources = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
    Ok(Page::from_rows(sources, page, |s| s.id.to_string()))
}

pub async fn replace(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &SourceId,
    f: &SourceFields,
    caches: &impl super::Forget,
) -> Result<Option<Source>, StoreError> {
    let sql = format!(
        "UPDATE sources SET name = $3, provider = $4, verify = $5, idempotency = $6, mode = $7, app_id = $8,
            event_type_path = $9, retention_days = $10, disabled = $11, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 RETURNING {}",
        columns("sources")
    );
    let (provider, verify, idempotency, mode) = stored(f);
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
                &f.app_id.as_str(),
                &f.event_type_path,
                &f.retention_days,
                &f.disabled,
            ],
        )
        .await?;
    caches.forget_source(id);
    row.as_ref().map(from_row).transpose()
}

/// Deletes a source with its dedupe keys and inbound events. The source goes
/// first: that waits for every admission that locked it (`store::parents`), and
/// none writes under it after, so the statements after it, each with a later
/// snapshot, see every key and event written under it.
pub async fn delete(
    db: &mut impl GenericClient,
    tenant: &TenantId,
    id: &SourceId,
    caches: &impl super::Forget,
) -> Result<bool, StoreError> {
    let tx = db.transaction().await?;
    let args: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&tenant.as_str(), &id.as_str()];
    let n = tx.execute("DELETE FROM sources WHERE tenant_id = $1 AND id = $2", &args).await?;
    if n == 1 {
        tx.execute("DELETE FROM inbound_keys WHERE tenant_id = $1 AND source_id = $2", &args).await?;
        tx.execute("DELETE FROM inbound_events WHERE tenant_id = $1 AND source_id = $2", &args).await?;
    }
    tx.commit().await?;
    caches.forget_source(id);
    Ok(n == 1)
}

/// Makes `new_secret` current; the current one is still accepted until `old_until`.
pub async fn rotate_secret(
    db: &impl GenericClient,
    tenant: &TenantId,
    id: &SourceId,
    new_secret: &[u8],
    old_until: DateTime<Utc>,
    caches: &impl super::Forget,
) -> Result<bool, StoreError> {
    let n = db
        .execute(
            "UPDATE sources SET old_secret = secret, old_secret_until = $4, secret = $3, updated_at = now()
             WHERE tenant_id = $1 AND id = $2",
            &[&tenant.as_str(), &id.as_str(), &new_secret, &old_until],
        )
        .await?;
    caches.forget_source(id);
    Ok(n == 1)
}
