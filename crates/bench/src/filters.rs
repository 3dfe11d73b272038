//! What content filters cost the publish: messages created for an application of
//! ten endpoints, without filters and then with one on every endpoint, back to
//! back (each filter passes, so both make the same ten deliveries a message).

use std::{sync::Arc, time::Duration};

use serde_json::json;

use crate::{
    bed::{Bed, Tenant},
    load::closed_loop,
    report::Row,
};

/// A filter of the usual size: two comparisons, one through a nested object.
const FILTER: &str = "k >= 1 and (meta.source == \"bench\" or meta.source == \"other\")";

/// An application of ten endpoints, each with `filter` if given; its id.
async fn app_of_ten(bed: &Bed, tenant: &Tenant, name: &str, filter: Option<&str>) -> anyhow::Result<String> {
    let app = tenant.post("/api/v1/app", json!({ "name": name })).await?["id"].as_str().unwrap_or_default().to_owned();
    for i in 0..10 {
        let body = json!({"url": format!("{}/{name}/{i}", bed.sink.url), "filter": filter});
        tenant.post(&format!("/api/v1/app/{app}/endpoint"), body).await?;
    }
    Ok(app)
}

/// Creation rows for ten endpoints without and with a filter each, and what a
/// filter costs per message in CPU.
pub async fn run(bed: &Bed, tenant: &Arc<Tenant>, clients: usize, duration: Duration) -> anyhow::Result<Vec<Row>> {
    let plain = app_of_ten(bed, tenant, "unfiltered", None).await?;
    let filtered = app_of_ten(bed, tenant, "filtered", Some(FILTER)).await?;
    let mut rows = Vec::new();
    let mut per_message = Vec::new();
    for (app, name) in [(plain, "without filters"), (filtered, "a filter on each")] {
        bed.truncate()?;
        eprintln!("egress: message creation, 10 endpoints, {name}");
        let before = bed.cpu(None).await;
        let (http, url, key) = (bed.http.clone(), bed.api.url(&format!("/api/v1/app/{app}/msg")), tenant.key.clone());
        let created = closed_loop(clients, duration, move |_, _| {
            let body = json!({"eventType": "bench", "payload": {"k": 1, "meta": {"source": "bench"}}});
            let req = http.post(&url).bearer_auth(&key).json(&body);
            async move { req.send().await.is_ok_and(|r| r.status() == 202) }
        })
        .await;
        let cpu = before.per(&bed.cpu(None).await, created.ok);
        per_message.push(cpu.total_us);
        rows.push(Row {
            name: format!("filters: message creation, 10 endpoints, {name}"),
            concurrency: clients,
            rate: created.rate(),
            p50_ms: Some(created.p50_ms()),
            p99_ms: Some(created.p99_ms()),
            note: "created/s, 10 deliveries each".into(),
            cpu: Some(cpu),
            ..Row::default()
        });
    }
    if let [without, with] = per_message[..] {
        rows.push(Row {
            name: "filters: CPU per message of a filter on each of 10 endpoints".into(),
            note: format!(
                "{:.0} µs ({with:.0} against {without:.0}): the payload parsed and the predicate run once per endpoint with a filter, in the publishing statement",
                with - without
            ),
            ..Row::default()
        });
    }
    Ok(rows)
}
