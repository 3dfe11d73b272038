//! What an endpoint transformation costs a delivery: the same drain as the plain
//! one, through a handler that reshapes every payload, side by side.

use std::sync::Arc;

use serde_json::json;

use crate::{
    bed::{publish, Bed, Tenant},
    report::Row,
};

/// A handler of the usual kind: reads the payload, builds another.
const RESHAPE: &str = "function handler(w) { w.payload = { kind: w.eventType, data: w.payload, at: 1 }; return w; }";

/// Drains `n` messages to an endpoint with a transformation; rows for it and for
/// its cost over `plain_us` (CPU per delivery of the plain drain in this run).
pub async fn run(
    bed: &Bed,
    tenant: &Arc<Tenant>,
    n: usize,
    clients: usize,
    h: f64,
    plain_us: f64,
) -> anyhow::Result<Vec<Row>> {
    // Every bench tenant may: the switch is the operator's.
    bed.psql("UPDATE tenants SET transformations = true")?;
    let app =
        tenant.post("/api/v1/app", json!({"name": "transformed"})).await?["id"].as_str().unwrap_or_default().to_owned();
    let ep = tenant
        .post(&format!("/api/v1/app/{app}/endpoint"), json!({"url": format!("{}/transformed", bed.sink.url)}))
        .await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let res = tenant
        .http
        .patch(format!("{}/api/v1/app/{app}/endpoint/{ep}/transformation", tenant.api))
        .bearer_auth(&tenant.key)
        .json(&json!({"code": RESHAPE, "enabled": true}))
        .send()
        .await?;
    anyhow::ensure!(res.status().is_success(), "transformation not saved: {}", res.status());
    bed.truncate()?;
    eprintln!("egress: {n} messages through a transformation");
    publish(tenant, &app, n, clients).await?;
    let mut rows = Vec::new();
    bed.drain(n, &format!("egress: deliver {n} messages through a transformation"), h, &mut rows).await?;
    if let Some(cpu) = rows.last().and_then(|r| r.cpu.as_ref()) {
        let extra = cpu.total_us - plain_us;
        rows.push(Row {
            name: "transformation: CPU per delivery over the plain drain".into(),
            note: format!(
                "{extra:.0} µs ({:.0} against {plain_us:.0}), the sandboxes' CPU counted; a runaway costs at most 1 s of one core an attempt (100 ms where QuickJS can interrupt it), three at once per process, two of them a tenant's",
                cpu.total_us
            ),
            ..Row::default()
        });
    }
    Ok(rows)
}
