//! The error of every store call.

/// What went wrong talking to Postgres, in terms callers can map to HTTP.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Postgres cannot be reached or a pooled connection was not available in time.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A statement ran past its bound: Postgres's `statement_timeout`, or
    /// Hookgate's own ([`crate::db::bounded`]). Answered like an outage (503).
    #[error("database step timed out: {0}")]
    TimedOut(String),
    /// A row or table lock held elsewhere outlasted the lock timeout (55P03):
    /// often one row's doing (the delivery recorder sets such a batch apart).
    /// Answered like an outage (503).
    #[error("database lock not granted in time: {0}")]
    Locked(String),
    #[error("invalid database configuration: {0}")]
    Config(tokio_postgres::Error),
    /// `DATABASE_URL`'s TLS settings cannot be used; the message names the setting.
    #[error("{0}")]
    Tls(String),
    #[error("database pool: {0}")]
    Pool(String),
    /// Postgres ended this statement to settle a race (a deadlock, a
    /// serialization failure): the same statement again succeeds. Answered like an
    /// outage (503) if it keeps happening.
    #[error("database race lost: {0}")]
    LostRace(String),
    /// A unique constraint said no; the string names the constraint.
    #[error("conflict on {0}")]
    Conflict(String),
    #[error("migration {version} failed: {source}")]
    Migration { version: String, source: tokio_postgres::Error },
    #[error("migration {0} was changed after it was applied")]
    MigrationChanged(String),
    #[error("database error: {}", with_causes(.0))]
    Db(tokio_postgres::Error),
    /// Postgres refused a text value it cannot store (a NUL, `\u0000`): bad input,
    /// answered 422, and one row's doing in a batch.
    #[error("a text value contains a NUL character (\\u0000), which cannot be stored")]
    InvalidText,
    /// The schema does not admit this kind of endpoint yet: a release's new kind
    /// is admitted (`store::endpoint_kinds`) once no process of an older release,
    /// which would not know it, is connected. Answered 409.
    #[error(
        "this kind of endpoint is not admitted by the database yet: it is once no process of the previous release \
         is connected (an upgrade in progress)"
    )]
    KindNotAdmitted,
    /// A stored value that no longer parses into its type (written by hand, say).
    #[error("stored value is invalid: {0}")]
    Corrupt(String),
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        if let Some(db) = e.as_db_error() {
            if *db.code() == tokio_postgres::error::SqlState::UNIQUE_VIOLATION {
                return StoreError::Conflict(db.constraint().unwrap_or("unique key").to_owned());
            }
            // `endpoints.kind` of a kind not admitted yet: by `endpoint_kinds`, or by
            // the CHECK that stands before contract 0050.
            let constraint = db.constraint().unwrap_or_default();
            let fk = *db.code() == tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION;
            let check = *db.code() == tokio_postgres::error::SqlState::CHECK_VIOLATION;
            // (A shard of a distributed table names it with a suffix.)
            if (fk && constraint.starts_with("endpoints_kind_is_a_kind"))
                || (check && constraint.starts_with("endpoints_kind_known"))
            {
                return StoreError::KindNotAdmitted;
            }
            // Admin shutdown, crash recovery, too many connections: the database is
            // there but cannot serve us now.
            // 22P05 (untranslatable character) and 22021 (not in the repertoire): a NUL.
            if matches!(db.code().code(), "22P05" | "22021") {
                return StoreError::InvalidText;
            }
            // 57014: canceled by statement_timeout; 55P03: by lock_timeout.
            if db.code().code() == "57014" {
                return StoreError::TimedOut(e.to_string());
            }
            if db.code().code() == "55P03" {
                return StoreError::Locked(e.to_string());
            }
            // 40P01 (deadlock) and 40001 (serialization): this attempt lost a race the
            // database settled; the same statement again succeeds.
            if matches!(db.code().code(), "40P01" | "40001") {
                return StoreError::LostRace(with_causes(&e));
            }
            let class = &db.code().code()[..2];
            if matches!(class, "08" | "53" | "57") {
                return StoreError::Unavailable(with_causes(&e));
            }
            return StoreError::Db(e);
        }
        // No server error: the connection itself failed or closed.
        StoreError::Unavailable(with_causes(&e))
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        StoreError::Unavailable(with_causes(&e))
    }
}

impl StoreError {
    /// Whether the answer is "retry later" (503): an outage, a timeout, a lock not
    /// granted in time or a lost race. The API and publishing map errors by it.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable(_) | StoreError::TimedOut(_) | StoreError::Locked(_) | StoreError::LostRace(_)
        )
    }

    /// Whether running the same statement again is the remedy (a deadlock).
    pub fn is_lost_race(&self) -> bool {
        matches!(self, StoreError::LostRace(_))
    }

    pub fn is_timeout(&self) -> bool {
        matches!(self, StoreError::TimedOut(_))
    }

    /// Whether a lock held elsewhere was waited on past the lock timeout.
    pub fn is_locked(&self) -> bool {
        matches!(self, StoreError::Locked(_))
    }

    /// Whether a foreign key said no: the row referred to went meanwhile.
    pub fn is_gone_reference(&self) -> bool {
        matches!(self, StoreError::Db(e) if e.code() == Some(&tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION))
    }
}

/// An error's message with its causes: tokio-postgres says only "db error" or
/// "error performing TLS handshake" at the top; the reason (Postgres's own
/// message, a refused certificate) is in the source chain.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}
