//! `hookgate archive list|show`: reads the cold archive back for an audit ("was
//! event X received in March, and what did we answer?") without a database.

use base64::Engine;
use clap::Subcommand;
use hookgate_shared::archive::{Archive, Manifest};
use serde_json::Value;

#[derive(Subcommand)]
pub enum ArchiveCommand {
    /// List the archived partitions: family, partition, bounds, rows.
    List {
        /// The archive (as the server's HOOKGATE_ARCHIVE_URL).
        #[arg(long, env = "HOOKGATE_ARCHIVE_URL")]
        archive: String,
    },
    /// Print archived rows as JSON Lines, a payload also as text when it is text.
    /// With --id and no --partition, only the partitions whose days hold that id's
    /// time are read.
    Show {
        #[arg(long, env = "HOOKGATE_ARCHIVE_URL")]
        archive: String,
        /// inbound_events, messages, deliveries or attempts (all if unset).
        #[arg(long)]
        family: Option<String>,
        /// One partition, e.g. inbound_events_p20260315.
        #[arg(long)]
        partition: Option<String>,
        /// Rows whose id, message id or event id is this.
        #[arg(long)]
        id: Option<String>,
        /// Rows whose idempotency key (inbound `key`, message `idempotency_key`) is this.
        #[arg(long)]
        key: Option<String>,
        #[arg(long)]
        tenant: Option<String>,
        /// Rows whose JSON or payload text contains this.
        #[arg(long)]
        contains: Option<String>,
    },
}

/// Whether an archived partition may hold a row made at the time `id` carries.
fn may_hold(m: &Manifest, id: &str) -> bool {
    let Some(at) = hookgate_shared::ids::made_at(id) else { return true };
    m.from.is_none_or(|f| f <= at) && m.to.is_none_or(|t| at < t)
}

/// A row as printed: its payload decoded beside its base64 when it is UTF-8.
fn shown(mut row: Value) -> Value {
    let text = row
        .get("payload")
        .and_then(Value::as_str)
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok());
    if let (Some(text), Some(obj)) = (text, row.as_object_mut()) {
        obj.insert("payloadText".into(), Value::String(text));
    }
    row
}

fn matches(row: &Value, id: Option<&str>, key: Option<&str>, tenant: Option<&str>, contains: Option<&str>) -> bool {
    let field = |name: &str| row.get(name).and_then(Value::as_str);
    id.is_none_or(|id| ["id", "msg_id", "event_id"].iter().any(|f| field(f) == Some(id)))
        && key.is_none_or(|k| ["key", "idempotency_key"].iter().any(|f| field(f) == Some(k)))
        && tenant.is_none_or(|t| field("tenant_id") == Some(t))
        && contains.is_none_or(|c| row.to_string().contains(c))
}

pub async fn run(cmd: ArchiveCommand) -> anyhow::Result<()> {
    match cmd {
        ArchiveCommand::List { archive } => {
            let archive = Archive::open(&archive)?;
            for m in archive.list().await? {
                let day = |d: Option<chrono::DateTime<chrono::Utc>>| d.map(|d| d.to_rfc3339()).unwrap_or("-".into());
                println!(
                    "{}\t{}\t{}\t{}\t{} rows\t{} bytes",
                    m.family,
                    m.partition,
                    day(m.from),
                    day(m.to),
                    m.rows,
                    m.bytes
                );
            }
        }
        ArchiveCommand::Show { archive, family, partition, id, key, tenant, contains } => {
            let archive = Archive::open(&archive)?;
            let chosen: Vec<Manifest> = archive
                .list()
                .await?
                .into_iter()
                .filter(|m| family.as_deref().is_none_or(|f| m.family == f))
                .filter(|m| partition.as_deref().is_none_or(|p| m.partition == p))
                .filter(|m| partition.is_some() || id.as_deref().is_none_or(|id| may_hold(m, id)))
                .collect();
            for m in &chosen {
                for row in archive.read(m).await? {
                    if matches(&row, id.as_deref(), key.as_deref(), tenant.as_deref(), contains.as_deref()) {
                        let mut row = shown(row);
                        if let Some(obj) = row.as_object_mut() {
                            obj.insert("archivedIn".into(), Value::String(m.partition.clone()));
                        }
                        println!("{row}");
                    }
                }
            }
        }
    }
    Ok(())
}
