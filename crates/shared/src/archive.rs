//! The cold archive: before a partition is dropped, its rows are written, one
//! JSON object per line, compressed with zstd, to a directory or an S3-compatible
//! bucket (`HOOKGATE_ARCHIVE_URL`: `file:///var/lib/hookgate/archive` or
//! `s3://bucket/prefix`, with the standard `AWS_*` variables), followed by a
//! manifest that says what the object holds. `hookgate archive list|show` reads
//! them back for an audit.
//!
//! Layout: `<family>/<partition>.jsonl.zst` and `<family>/<partition>.manifest.json`.
//! The manifest is written last, so an archive without one is incomplete (a
//! round that died midway) and is written again before the partition goes.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures_util::{Stream, StreamExt, TryStreamExt};
use object_store::{path::Path, ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};

/// What went wrong with the archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("HOOKGATE_ARCHIVE_URL: {0}")]
    Config(String),
    #[error("archive storage: {0}")]
    Store(#[from] object_store::Error),
    #[error("archive data: {0}")]
    Data(String),
    #[error(transparent)]
    Db(#[from] crate::store::StoreError),
}

/// What one archived partition holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format: String,
    pub family: String,
    pub partition: String,
    /// The partition's bounds: ids made from `from` (none: the oldest rows) until `to`.
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub rows: u64,
    /// The object's name, size and SHA-256, compressed.
    pub object: String,
    pub bytes: u64,
    pub sha256: String,
    pub archived_at: DateTime<Utc>,
}

const FORMAT: &str = "hookgate-archive/1: JSON Lines, zstd; byte columns base64";

/// An archive, local or in a bucket.
#[derive(Clone)]
pub struct Archive {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    url: String,
    /// For `file://`: the directory, whose files are made readable by the
    /// process's user only (archives hold payloads; the umask may be 022).
    local: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive").field("url", &self.url).finish()
    }
}

/// Makes `dir` (and its parents) if missing, readable by the process's user
/// alone (0700). One that exists is left as the operator made it (a volume's root
/// may belong to another user, or be read-only for `hookgate archive list`), with
/// a warning if others may read it: the objects in it are 0600 either way.
fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {
            if meta.permissions().mode() & 0o077 != 0 {
                tracing::warn!(dir = %dir.display(), "the archive directory may be read by others than Hookgate's user: make it 0700");
            }
            Ok(())
        }
        _ => std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir),
    }
}

impl Archive {
    /// Opens `file:///dir` (made if missing) or `s3://bucket/prefix`.
    pub fn open(url: &str) -> Result<Self, ArchiveError> {
        let (store, prefix): (Arc<dyn ObjectStore>, Path) = if let Some(dir) = url.strip_prefix("file://") {
            if !dir.starts_with('/') {
                return Err(ArchiveError::Config(format!("`{url}`: a file:// URL needs an absolute path")));
            }
            private_dir(std::path::Path::new(dir)).map_err(|e| ArchiveError::Config(format!("`{dir}`: {e}")))?;
            let local = object_store::local::LocalFileSystem::new_with_prefix(dir)
                .map_err(|e| ArchiveError::Config(format!("`{dir}`: {e}")))?;
            (Arc::new(local), Path::default())
        } else if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(ArchiveError::Config(format!("`{url}`: no bucket")));
            }
            let s3 = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .build()
                .map_err(|e| ArchiveError::Config(e.to_string()))?;
            (Arc::new(s3), Path::from(prefix.trim_matches('/')))
        } else {
            return Err(ArchiveError::Config(format!("`{url}`: expected file:///path or s3://bucket/prefix")));
        };
        let local = url.strip_prefix("file://").map(std::path::PathBuf::from);
        Ok(Archive { store, prefix, url: url.to_owned(), local })
    }

    fn path(&self, family: &str, name: &str) -> Path {
        self.prefix.clone().join(family).join(name)
    }

    /// Whether a partition's archive is complete (its manifest exists).
    pub async fn has(&self, family: &str, partition: &str) -> Result<bool, ArchiveError> {
        match self.store.head(&self.path(family, &format!("{partition}.manifest.json"))).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `rows` (JSON objects as text) as one partition's archive: the data
    /// in parts as it streams, the manifest after it.
    pub async fn write(
        &self,
        family: &str,
        partition: &str,
        bounds: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
        rows: impl Stream<Item = Result<String, crate::store::StoreError>>,
    ) -> Result<Manifest, ArchiveError> {
        let object = format!("{partition}.jsonl.zst");
        let upload = self.store.put_multipart(&self.path(family, &object)).await?;
        let mut out = WriteMultipart::new(upload);
        let (mut hash, mut bytes) = (Sha256::new(), 0u64);
        let streamed = stream(rows, &mut out, &mut hash, &mut bytes).await;
        let count = match streamed {
            Ok(count) => count,
            Err(e) => {
                // Parts already uploaded are released, not left to accrue.
                if let Err(abort) = out.abort().await {
                    tracing::warn!(error = %abort, object = %object, "could not abort a failed archive upload");
                }
                return Err(e);
            }
        };
        out.finish().await?;
        self.restrict(family, &object)?;
        let manifest = Manifest {
            format: FORMAT.into(),
            family: family.into(),
            partition: partition.into(),
            from: bounds.0,
            to: bounds.1,
            rows: count,
            object,
            bytes,
            sha256: hex::encode(hash.finalize()),
            archived_at: Utc::now(),
        };
        let json = serde_json::to_vec_pretty(&manifest).map_err(|e| ArchiveError::Data(e.to_string()))?;
        let name = format!("{partition}.manifest.json");
        self.store.put(&self.path(family, &name), PutPayload::from(json)).await?;
        self.restrict(family, &name)?;
        Ok(manifest)
    }

    /// A local archive's object and its family's directory: the process's user only.
    fn restrict(&self, family: &str, name: &str) -> Result<(), ArchiveError> {
        use std::os::unix::fs::PermissionsExt;
        let Some(dir) = &self.local else { return Ok(()) };
        let family_dir = dir.join(self.prefix.as_ref()).join(family);
        let set = |p: &std::path::Path, mode| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
                .map_err(|e| ArchiveError::Config(format!("`{}`: {e}", p.display())))
        };
        set(&family_dir, 0o700)?;
        set(&family_dir.join(name), 0o600)
    }

    /// Every complete archive, by family and partition.
    pub async fn list(&self) -> Result<Vec<Manifest>, ArchiveError> {
        let objects: Vec<_> = self.store.list(Some(&self.prefix)).try_collect().await?;
        let mut out = Vec::new();
        for o in objects.iter().filter(|o| o.location.as_ref().ends_with(".manifest.json")) {
            let body = self.store.get(&o.location).await?.bytes().await?;
            out.push(serde_json::from_slice(&body).map_err(|e| ArchiveError::Data(format!("{}: {e}", o.location)))?);
        }
        out.sort_by(|a: &Manifest, b| (&a.family, &a.partition).cmp(&(&b.family, &b.partition)));
        Ok(out)
    }

    /// The rows of one archived partition, checked against its manifest.
    pub async fn read(&self, m: &Manifest) -> Result<Vec<serde_json::Value>, ArchiveError> {
        let body = self.store.get(&self.path(&m.family, &m.object)).await?.bytes().await?;
        if hex::encode(Sha256::digest(&body)) != m.sha256 {
            return Err(ArchiveError::Data(format!("{}: its SHA-256 is not the manifest's", m.object)));
        }
        let text = zstd::stream::decode_all(&body[..]).map_err(|e| ArchiveError::Data(e.to_string()))?;
        let rows = text
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).map_err(|e| ArchiveError::Data(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        if rows.len() as u64 != m.rows {
            return Err(ArchiveError::Data(format!("{}: {} rows, the manifest says {}", m.object, rows.len(), m.rows)));
        }
        Ok(rows)
    }
}

/// Compresses `rows` as JSON Lines into `out`, hashing and counting what is
/// shipped; returns how many rows.
async fn stream(
    rows: impl Stream<Item = Result<String, crate::store::StoreError>>,
    out: &mut WriteMultipart,
    hash: &mut Sha256,
    bytes: &mut u64,
) -> Result<u64, ArchiveError> {
    let data = |e: std::io::Error| ArchiveError::Data(e.to_string());
    let mut encoder = zstd::stream::Encoder::new(Vec::new(), 3).map_err(data)?;
    let mut ship = |buf: &mut Vec<u8>, out: &mut WriteMultipart| {
        hash.update(&buf[..]);
        *bytes += buf.len() as u64;
        out.write(buf);
        buf.clear();
    };
    let mut rows = std::pin::pin!(rows);
    let mut count = 0u64;
    while let Some(row) = rows.next().await {
        let row = row?;
        std::io::Write::write_all(&mut encoder, row.as_bytes()).map_err(data)?;
        std::io::Write::write_all(&mut encoder, b"\n").map_err(data)?;
        count += 1;
        if encoder.get_ref().len() >= 4 << 20 {
            ship(encoder.get_mut(), out);
            out.wait_for_capacity(4).await?;
        }
    }
    let mut tail = encoder.finish().map_err(data)?;
    ship(&mut tail, out);
    Ok(count)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[tokio::test]
    async fn a_local_archive_is_readable_by_the_processs_user_only() {
        let dir = std::env::temp_dir().join(format!("hookgate-archive-mode-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let archive = Archive::open(&format!("file://{}", dir.display())).unwrap();
        let rows = futures_util::stream::iter(vec![Ok(r#"{"id":"msg_1"}"#.to_owned())]);
        archive.write("messages", "messages_p20260101", (None, None), rows).await.unwrap();
        let mode = |p: std::path::PathBuf| std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(dir.clone()), 0o700, "the archive's directory, made by Hookgate");
        assert_eq!(mode(dir.join("messages")), 0o700);
        assert_eq!(mode(dir.join("messages/messages_p20260101.jsonl.zst")), 0o600);
        assert_eq!(mode(dir.join("messages/messages_p20260101.manifest.json")), 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
