//! `hookgate import environment`: a document of `environment/export` into a
//! tenant, whichever tenant exported it (the operator's way to copy or move a
//! tenant, within an installation or to another with the same transit key).
//!
//! `hookgate import svix`: copies a Svix environment (event types, applications,
//! endpoints with their signing secrets, headers, filters, throttles, metadata)
//! into a tenant, through the same import as `POST /api/v1/environment/import`.
//!
//! The source is read over Svix's own API with the source's token, so any server
//! that serves it (Svix's cloud, a self-hosted Svix, another Hookgate) can be
//! one. Ids are kept where they are Hookgate's shape and otherwise derived from
//! the source's, always the same way, so running it again updates what the last
//! run made instead of duplicating it.

use std::io::Read;
use std::time::Duration;

use anyhow::{bail, Context};
use base64::{engine::general_purpose::STANDARD, Engine};
use chrono::{DateTime, Utc};
use clap::Args;
use hookgate_api::v1::environment::import::import_document;
use hookgate_api::v1::environment::{purpose, AppDoc, EndpointDoc, Environment, EventTypeDoc, Sealed};
use hookgate_api::v1::expand;
use hookgate_egress::fetch::{FetchError, Fetcher};
use hookgate_shared::{
    crypto::{MasterKey, TransitKey},
    ids::{AppId, EndpointId, TenantId},
    AppState,
};
use serde_json::Value;

#[derive(Args)]
pub struct SvixImport {
    /// The source's API base URL, such as https://api.eu.svix.com.
    #[arg(long)]
    url: String,
    /// An API token of the source environment.
    #[arg(long, env = "SVIX_TOKEN", hide_env_values = true)]
    token: String,
    /// The Hookgate tenant to import into (`tnt_…`).
    #[arg(long)]
    tenant: String,
    /// The most memory the source's answers may take once read, in MiB, all
    /// pages together (each value charged what it holds, not its text).
    #[arg(long, default_value_t = DEFAULT_MOST_MIB, value_parser = clap::value_parser!(u64).range(1..=16384))]
    most_mib: u64,
}

/// What an import reads at most unless told otherwise: a Svix environment at
/// the import's caps (10,000 event types, 20,000 endpoints) is well under it.
const DEFAULT_MOST_MIB: u64 = 256;

#[derive(Args)]
pub struct EnvironmentImport {
    /// The document, as `POST /api/v1/environment/export` answered it.
    #[arg(long)]
    file: std::path::PathBuf,
    /// The Hookgate tenant to import into (`tnt_…`).
    #[arg(long)]
    tenant: String,
    /// The largest document read, in MiB.
    #[arg(long, default_value_t = DEFAULT_MOST_MIB, value_parser = clap::value_parser!(u64).range(1..=16384))]
    most_mib: u64,
}

/// Imports the document, its sealed values opened as the exporting tenant's
/// with this installation's `HOOKGATE_TRANSIT_KEY`; prints the report.
pub async fn run_environment(args: EnvironmentImport, state: AppState) -> anyhow::Result<()> {
    let tenant = live_tenant(&state, &args.tenant).await?;
    let text = read_at_most(&args.file, args.most_mib << 20)
        .with_context(|| format!("--file {} (--most-mib {})", args.file.display(), args.most_mib))?;
    let doc: Environment = serde_json::from_slice(&text).with_context(|| format!("--file {}", args.file.display()))?;
    let sealed_for = doc.tenant.clone().unwrap_or_else(|| tenant.to_string());
    let transit = state.config.transit_key.clone();
    let report = import_document(&state, &tenant, doc, transit.as_ref(), &sealed_for)
        .await
        .map_err(|e| anyhow::anyhow!("the import was refused, and nothing was written: {e}"))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// The file's bytes, up to `most`, whatever the file says its size is (a pipe,
/// or a file under `/proc`, says 0).
fn read_at_most(path: &std::path::Path, most: u64) -> anyhow::Result<Vec<u8>> {
    let mut text = Vec::new();
    std::fs::File::open(path)?.take(most + 1).read_to_end(&mut text)?;
    if text.len() as u64 > most {
        bail!("more than {most} bytes");
    }
    Ok(text)
}

/// The tenant `--tenant` names, if it is live and enabled.
async fn live_tenant(state: &AppState, given: &str) -> anyhow::Result<TenantId> {
    let tenant = TenantId::parse(given).map_err(|e| anyhow::anyhow!("--tenant: {e}"))?;
    let conn = hookgate_shared::db::conn(&state.db).await.context("cannot reach Postgres (DATABASE_URL)")?;
    match hookgate_shared::store::tenants::get(&**conn, &tenant).await? {
        Some(t) if !t.disabled => Ok(tenant),
        Some(_) => bail!("--tenant {tenant} is disabled"),
        None => bail!("--tenant {tenant}: no such tenant"),
    }
}

/// Pages of one list the import reads at most (250 items a page).
const MOST_PAGES: usize = 400;
/// Tries of one request the source refuses for its rate (429) or fails (5xx).
const TRIES: u32 = 5;
/// Whose the values this run seals are (they open only in this run's import).
const SEALED_FOR: &str = "svix-import";
/// The longest the source is read for.
const READING_FOR: Duration = Duration::from_secs(3600);
/// Endpoints one import carries, in all (as `environment/import`).
const MOST_ENDPOINTS: usize = 20_000;

/// Reads the source, imports it, prints the report (JSON) with what was not carried.
pub async fn run(args: SvixImport, state: AppState) -> anyhow::Result<()> {
    let tenant = live_tenant(&state, &args.tenant).await?;
    let source = Source::new(&args.url, &args.token, (args.most_mib << 20) as usize)?;
    // Secrets travel from the source to the import sealed with a key of this run only.
    let transit = TransitKey::from_base64(&MasterKey::generate_base64()).expect("a generated key is valid");
    let mut not_carried = Vec::new();
    let doc = tokio::time::timeout(READING_FOR, read(&source, &transit, &mut not_carried))
        .await
        .map_err(|_| anyhow::anyhow!("reading the source took longer than {} minutes", READING_FOR.as_secs() / 60))??;
    let mut report = import_document(&state, &tenant, doc, Some(&transit), SEALED_FOR)
        .await
        .map_err(|e| anyhow::anyhow!("the import was refused, and nothing was written: {e}"))?;
    if let Some(list) = report["notCarried"].as_array_mut() {
        list.extend(not_carried.into_iter().map(Value::String));
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// The source's API, read with its token, through egress's bounded fetcher.
struct Source {
    base: url::Url,
    token: String,
    http: Fetcher,
    /// Memory the answers may still take once parsed: every page is held until the import.
    budget: expand::Budget,
    most: usize,
}

/// The largest page the import reads from the source.
const MOST_PAGE_BYTES: usize = 16 << 20;

impl Source {
    fn new(url: &str, token: &str, most: usize) -> anyhow::Result<Self> {
        let base = url::Url::parse(url.trim_end_matches('/')).with_context(|| format!("--url `{url}`"))?;
        if !matches!(base.scheme(), "http" | "https") {
            bail!("--url must be an http(s) URL");
        }
        let http = Fetcher::new(Duration::from_secs(30));
        Ok(Source { base, token: token.to_owned(), http, budget: expand::Budget::new(most), most })
    }

    fn over(&self, path: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "GET {path}: the source's answers take more than {} MiB once read, more than --most-mib allows",
            self.most >> 20
        )
    }

    /// One GET, retried a few times on 429 and 5xx; `None` for 404.
    async fn get(&self, path: &str) -> anyhow::Result<Option<Value>> {
        let url = url::Url::parse(&format!("{}{path}", self.base.as_str().trim_end_matches('/')))?;
        for attempt in 1..=TRIES {
            let wait = match self.http.get_authorized(&url, &self.token, MOST_PAGE_BYTES).await {
                Ok(a) if a.status == 404 => return Ok(None),
                Ok(a) if (200..300).contains(&a.status) => {
                    // Parsed within what is left of the budget: a page's text
                    // can grow a hundredfold in memory.
                    return match expand::json(&a.body, &self.budget) {
                        Ok(page) => Ok(Some(page)),
                        Err(e) if e.to_string().contains("expands to more than") => Err(self.over(path)),
                        Err(e) => Err(e).with_context(|| format!("GET {path}: not JSON")),
                    };
                }
                Ok(a) if (a.status == 429 || a.status >= 500) && attempt < TRIES => {
                    a.retry_after.unwrap_or(attempt.into()).min(30)
                }
                Ok(a) => {
                    let body = String::from_utf8_lossy(&a.body).chars().take(300).collect::<String>();
                    bail!("GET {path}: {}: {body}", a.status)
                }
                Err(FetchError::Unavailable(e)) if attempt < TRIES => {
                    tracing::warn!(error = %e, path, "the source did not answer; trying again");
                    attempt.into()
                }
                Err(e) => return Err(e).with_context(|| format!("GET {path}")),
            };
            tokio::time::sleep(Duration::from_secs(wait)).await;
        }
        unreachable!("the last try returns")
    }

    /// Every item of a paged list, up to `most`.
    async fn all(&self, path: &str, most: usize) -> anyhow::Result<Vec<Value>> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        let mut iterator: Option<String> = None;
        for _ in 0..MOST_PAGES {
            let page_path = match &iterator {
                Some(it) => format!("{path}{sep}limit=250&iterator={}", urlencode(it)),
                None => format!("{path}{sep}limit=250"),
            };
            let Some(page) = self.get(&page_path).await? else { bail!("GET {path}: 404") };
            let mut page = page;
            if let Some(Value::Array(data)) = page.get_mut("data").map(Value::take) {
                items.extend(data);
            }
            if items.len() > most {
                bail!("GET {path}: more than {most} items, more than one import carries");
            }
            iterator = page["iterator"].as_str().map(str::to_owned);
            if page["done"].as_bool().unwrap_or(true) || iterator.is_none() {
                return Ok(items);
            }
        }
        bail!("GET {path}: more than {MOST_PAGES} pages")
    }
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The source as an environment document, its secrets sealed with `transit`.
async fn read(source: &Source, transit: &TransitKey, not_carried: &mut Vec<String>) -> anyhow::Result<Environment> {
    let mut event_types = Vec::new();
    for t in source.all("/api/v1/event-type?include_archived=true&with_content=true", 10_000).await? {
        let flags: Vec<String> = strings(&t["featureFlags"]);
        let name = text(&t["name"]);
        if flags.len() > 1 {
            not_carried
                .push(format!("event type `{name}`: feature flags beyond the first ({})", flags[1..].join(", ")));
        }
        event_types.push(EventTypeDoc {
            description: text(&t["description"]),
            archived: t["archived"].as_bool().unwrap_or(false),
            deprecated: t["deprecated"].as_bool().unwrap_or(false),
            schemas: t.get("schemas").filter(|s| !s.is_null()).cloned(),
            feature_flag: t["featureFlag"].as_str().map(str::to_owned).or_else(|| flags.first().cloned()),
            feature_flags: None,
            created_at: None,
            updated_at: None,
            name,
        });
    }
    let mut applications = Vec::new();
    let mut total = 0;
    for a in source.all("/api/v1/app", 1000).await? {
        let source_id = text(&a["id"]);
        let app_id = local_id::<AppId>(&source_id, &a["createdAt"]);
        let mut endpoints = Vec::new();
        let listed = source.all(&format!("/api/v1/app/{source_id}/endpoint"), 1000).await?;
        total += listed.len();
        if total > MOST_ENDPOINTS {
            bail!("the source has more than {MOST_ENDPOINTS} endpoints, more than one import carries");
        }
        for e in listed {
            endpoints.push(endpoint(source, transit, &source_id, &app_id, &e, not_carried).await?);
        }
        applications.push(AppDoc {
            id: Some(app_id),
            uid: a["uid"].as_str().map(str::to_owned),
            name: text(&a["name"]),
            throttle_rate: a["throttleRate"].as_i64().or_else(|| a["rateLimit"].as_i64()),
            metadata: serde_json::from_value(a["metadata"].clone()).unwrap_or_default(),
            endpoints,
        });
    }
    not_carried.push(
        "messages, attempts, transformations, integrations and operational webhooks: configuration only".to_owned(),
    );
    Ok(Environment {
        version: Some(1),
        created_at: Some(Utc::now()),
        tenant: None,
        event_types: Some(event_types),
        settings: None,
        connectors: None,
        applications: Some(applications),
        not_carried: Vec::new(),
    })
}

/// One endpoint of the source, its secret and the header values the source
/// shows sealed for the import.
async fn endpoint(
    source: &Source,
    transit: &TransitKey,
    source_app: &str,
    app_id: &str,
    e: &Value,
    not_carried: &mut Vec<String>,
) -> anyhow::Result<EndpointDoc> {
    let source_id = text(&e["id"]);
    let id = local_id::<EndpointId>(&source_id, &e["createdAt"]);
    let url = text(&e["url"]);
    let seal = |field: &str, bytes: &[u8]| Sealed {
        sealed: STANDARD.encode(transit.seal(&purpose(SEALED_FOR, app_id, &id, &url, field), bytes)),
    };
    let base = format!("/api/v1/app/{source_app}/endpoint/{source_id}");
    let shown = source.get(&format!("{base}/secret")).await?.and_then(|s| s["key"].as_str().map(str::to_owned));
    // An Ed25519 endpoint shows only its `whpk_` public key, which cannot sign.
    let public_only = shown.as_deref().is_some_and(|k| k.starts_with("whpk_"));
    let secret = shown.filter(|_| !public_only).map(|k| seal("secret", k.as_bytes()));
    if public_only {
        not_carried.push(format!(
            "endpoint `{source_id}`: its Ed25519 key (the source shows its public key only); it gets a new one"
        ));
    } else if secret.is_none() {
        not_carried.push(format!("endpoint `{source_id}`: its signing secret could not be read; it gets a new one"));
    }
    let headers = match source.get(&format!("{base}/headers")).await? {
        Some(h) => {
            let hidden = strings(&h["sensitive"]);
            if !hidden.is_empty() {
                not_carried.push(format!(
                    "endpoint `{source_id}`: the values of its headers {} (the source shows them by name only; set them again)",
                    hidden.join(", ")
                ));
            }
            h["headers"]
                .as_object()
                .filter(|m| !m.is_empty())
                .map(|m| seal("headers", Value::Object(m.clone()).to_string().as_bytes()))
        }
        None => None,
    };
    Ok(EndpointDoc {
        id: Some(id),
        uid: e["uid"].as_str().map(str::to_owned),
        description: text(&e["description"]),
        disabled: e["disabled"].as_bool().unwrap_or(false),
        event_types: e.get("filterTypes").or_else(|| e.get("eventTypes")).filter(|v| !v.is_null()).map(strings),
        channels: e.get("channels").filter(|v| !v.is_null()).map(strings),
        throttle_rate: e["throttleRate"].as_i64().or_else(|| e["rateLimit"].as_i64()),
        metadata: serde_json::from_value(e["metadata"].clone()).unwrap_or_default(),
        secret,
        headers,
        url,
        // Svix has no content filter.
        filter: None,
    })
}

/// The source's id if it is one of Hookgate's shape; else one derived from it
/// (the source object's creation time, and a hash of its id), the same on
/// every run.
fn local_id<T: LocalId>(source_id: &str, created: &Value) -> String {
    if T::valid(source_id) {
        return source_id.to_owned();
    }
    let ms = created
        .as_str()
        .and_then(|c| c.parse::<DateTime<Utc>>().ok())
        .and_then(|c| u64::try_from(c.timestamp_millis()).ok())
        .unwrap_or(0);
    T::derived_from(ms, &format!("svix:{source_id}"))
}

/// An id kind the import keeps when the source's is of its shape, and derives otherwise.
trait LocalId {
    fn valid(s: &str) -> bool;
    fn derived_from(ms: u64, seed: &str) -> String;
}

impl LocalId for AppId {
    fn valid(s: &str) -> bool {
        AppId::parse(s).is_ok()
    }
    fn derived_from(ms: u64, seed: &str) -> String {
        AppId::derived(ms, seed).to_string()
    }
}

impl LocalId for EndpointId {
    fn valid(s: &str) -> bool {
        EndpointId::parse(s).is_ok()
    }
    fn derived_from(ms: u64, seed: &str) -> String {
        EndpointId::derived(ms, seed).to_string()
    }
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_id_maps_to_the_same_local_id_every_time_and_a_local_one_is_kept() {
        let created = Value::String("2024-05-01T10:00:00Z".into());
        let a = local_id::<AppId>("app_2bQJtPwGkJ1eZ4d8Xq9cV3mNoRs", &created);
        assert_eq!(a, local_id::<AppId>("app_2bQJtPwGkJ1eZ4d8Xq9cV3mNoRs", &created));
        assert!(AppId::parse(&a).is_ok(), "{a}");
        assert_ne!(a, local_id::<AppId>("app_2bQJtPwGkJ1eZ4d8Xq9cV3mNoRt", &created));
        let mine = AppId::generate().to_string();
        assert_eq!(local_id::<AppId>(&mine, &created), mine);
    }
}

#[cfg(test)]
mod hostile_file {
    use super::*;

    #[test]
    fn a_file_that_says_it_is_empty_is_still_read_only_to_the_limit() {
        // `/proc/self/status` says 0 bytes and holds over a kilobyte, as a pipe
        // (`--file /dev/stdin`) says 0 and holds anything: a check of the
        // file's size let both through.
        let path = std::path::Path::new("/proc/self/status");
        assert_eq!(std::fs::metadata(path).unwrap().len(), 0);
        let err = read_at_most(path, 100).unwrap_err().to_string();
        assert!(err.contains("more than 100 bytes"), "{err}");
        assert!(read_at_most(path, 1 << 20).unwrap().len() > 100);
    }
}

#[cfg(test)]
mod hostile_source {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A "Svix" on 127.0.0.1 whose every page is `page_kb` of data and never the
    /// last; counts the requests it answered.
    async fn endless_source(page_kb: usize) -> (String, Arc<AtomicU32>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let served = Arc::new(AtomicU32::new(0));
        let count = served.clone();
        let item = serde_json::json!({ "id": "x", "description": "y".repeat(1024) });
        let page = serde_json::json!({ "data": vec![item; page_kb], "iterator": "next", "done": false }).to_string();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let (page, count) = (page.clone(), count.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    while let Ok(n) = conn.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        count.fetch_add(1, Ordering::SeqCst);
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            page.len()
                        );
                        if conn.write_all(head.as_bytes()).await.is_err()
                            || conn.write_all(page.as_bytes()).await.is_err()
                        {
                            break;
                        }
                    }
                });
            }
        });
        (url, served)
    }

    #[tokio::test]
    async fn a_source_whose_pages_never_end_is_read_only_to_the_byte_budget() {
        // 300 KB pages (some 900 KB once parsed): without a budget the import
        // read 400 of them before it stopped at its page count.
        let (url, served) = endless_source(300).await;
        let source = Source::new(&url, "token", 1 << 20).unwrap();
        let err = source.all("/api/v1/app", 1_000_000).await.unwrap_err().to_string();
        assert!(err.contains("more than 1 MiB once read"), "{err}");
        let n = served.load(Ordering::SeqCst);
        assert!(n <= 2, "it read {n} pages of 300 KB under a budget of 1 MiB");
    }
}
