//! The write path every endpoint row shares, whatever it delivers to (an HTTP
//! endpoint, an ingest endpoint, a destination): a new row only within the
//! tenant's `endpointsPerApp` quota, and each change told to the operational
//! webhooks (`endpoint.created`, `.updated`, `.deleted`) in its own commit.

use hookgate_shared::{
    db,
    http::ApiError,
    ids::{AppId, TenantId},
    limits,
    quota::{Exceeded, Limit},
    store::{
        endpoints,
        operational::{self, Notice},
        StoreError,
    },
    AppState,
};

/// Whether a change is told to the operational webhooks (not for their own endpoints).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notify {
    Yes,
    No,
}

/// The tenant's `endpointsPerApp` quota, read before the creation's transaction
/// opens: a read that misses the cache takes a connection of its own, which must
/// not wait behind one held idle in a transaction.
pub(crate) async fn endpoints_cap(state: &AppState, tenant: &TenantId) -> Result<Option<u64>, ApiError> {
    Ok(limits::quotas(state, tenant).await?.limit(Limit::EndpointsPerApp))
}

/// Checks, in `tx` and under the application's lock (so two creations cannot
/// both take the last place), that `app` has room for one more row within
/// `cap` ([`endpoints_cap`]); HTTP endpoints and destinations count alike.
pub(crate) async fn room_for_one_more(
    tx: &impl tokio_postgres::GenericClient,
    state: &AppState,
    tenant: &TenantId,
    app: &AppId,
    cap: Option<u64>,
) -> Result<(), ApiError> {
    let n = endpoints::lock_and_count(tx, tenant, app).await?;
    if let Some(cap) = cap.filter(|cap| n as u64 >= *cap) {
        limits::refused(
            state,
            tenant,
            Exceeded { limit: Limit::EndpointsPerApp, value: cap, retry_after: Default::default() },
        );
        return Err(ApiError::Validation(format!(
            "the application has {n} endpoints and destinations, the most the tenant's quota `endpointsPerApp` \
             allows ({cap}; the operator's default is HOOKGATE_MAX_ENDPOINTS_PER_APP)"
        )));
    }
    Ok(())
}

/// Writes an operational notice in the caller's transaction; whether it made deliveries.
pub(crate) async fn notice(
    tx: &impl tokio_postgres::GenericClient,
    notify: Notify,
    n: Notice,
) -> Result<bool, ApiError> {
    if notify == Notify::No {
        return Ok(false);
    }
    Ok(operational::emit(tx, std::slice::from_ref(&n)).await? > 0)
}

/// Commits `tx`, then wakes the workers if its notice made deliveries (`woke`).
pub(crate) async fn commit(tx: db::Transaction<'_>, state: &AppState, woke: bool) -> Result<(), ApiError> {
    tx.commit().await.map_err(StoreError::from)?;
    if woke {
        state.wake.poke();
    }
    Ok(())
}
