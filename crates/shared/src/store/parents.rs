//! The parent rows a statement writes under, locked once per statement: what the
//! hot tables' foreign keys held, before migration 0045 took them away.
//!
//! A statement that inserts into `messages`, `deliveries`, `attempts`,
//! `inbound_events` or `inbound_keys` locks the applications (or sources) it
//! writes under `FOR KEY SHARE` in a CTE of its own and writes only rows whose
//! parent that CTE returned. The lock is the one a foreign key's check took, but
//! once per parent and statement rather than once per row; a deletion of the
//! parent waits for it, and a parent already deleted is not returned, so nothing
//! is written under it. The deletions ([`super::sources::delete`],
//! [`super::erasure::erase_step`]) remove the parent first, then what is under
//! it in a later statement, which sees every row the writers they waited for
//! wrote. `tidy::every_insert_into_a_hot_table_locks_its_parents` holds the rule.

/// The CTE `locked_apps` (column `id`): the applications of the tenant `tenant`
/// (an SQL expression) that column `col` of `rel` names, locked in id order.
pub(super) fn lock_apps(tenant: &str, rel: &str, col: &str) -> String {
    format!(
        "locked_apps AS (
            SELECT a.id FROM applications a WHERE a.tenant_id = {tenant} AND a.id IN (SELECT {col} FROM {rel})
            ORDER BY a.id FOR KEY SHARE
         )"
    )
}

/// The CTE `locked_sources` (column `id`): the sources of the tenant `tenant`
/// that column `col` of `rel` names, locked in id order, after every application
/// of [`lock_apps`]'s CTE (which the statement must define first): applications
/// before sources, whatever order the planner joins them in, as an erasure takes
/// them (`erasure::erase_step`), so the two cannot deadlock.
pub(super) fn lock_sources(tenant: &str, rel: &str, col: &str) -> String {
    format!(
        "locked_sources AS (
            -- An uncorrelated scalar subquery runs once, before the scan: every
            -- application is locked before the first source is.
            SELECT s.id FROM sources s WHERE s.tenant_id = {tenant} AND s.id IN (SELECT {col} FROM {rel})
              AND (SELECT count(*) FROM locked_apps) >= 0
            ORDER BY s.id FOR KEY SHARE
         )"
    )
}

/// The CTE `locked_apps` (columns `tenant_id`, `id`) for a statement whose rows
/// span tenants: the `(tenant, app)` pairs that columns `tenant_col`, `app_col`
/// of `rel` name.
pub(super) fn lock_apps_of_tenants(rel: &str, tenant_col: &str, app_col: &str) -> String {
    format!(
        "locked_apps AS (
            SELECT a.tenant_id, a.id FROM applications a
            WHERE (a.tenant_id, a.id) IN (SELECT {tenant_col}, {app_col} FROM {rel})
            ORDER BY a.tenant_id, a.id FOR KEY SHARE
         )"
    )
}
