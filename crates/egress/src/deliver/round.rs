//! Round robin over the endpoints with deliveries waiting: in what order a claim
//! asks them, and when they are listed again.
//!
//! Listing is an index probe per endpoint per partition, over index entries that
//! churn with every claim: a few milliseconds under load. So a listing is kept
//! while claims come back full and reused in turn, and read again when it is
//! older than [`RELIST`] or a claim came back short (a queue ran dry, or one the
//! listing does not know may be waiting).

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use hookgate_shared::store::{
    deliveries::Claimed,
    queues::{self, Listed, Queue},
    StoreError,
};

use super::shares;

/// Most endpoints one listing holds: the next listing goes on from where this
/// one stopped.
const LIST: i64 = 512;
/// How long a listing is reused while claims come back full.
const RELIST: Duration = Duration::from_millis(25);

#[derive(Default)]
pub(super) struct Round {
    /// The endpoints with something due, in the order the next claim asks them.
    listed: Vec<Listed>,
    listed_at: Option<Instant>,
    /// The last endpoint the listing looked at (due or not), and whether it
    /// stopped at its limit (more endpoints wait past it).
    last_looked: Option<Queue>,
    truncated: bool,
    /// Where the next listing starts: after the last endpoint a claim was given
    /// anything by, or, if none was, after the last one looked at.
    cursor: Option<Queue>,
    /// The last claim got less than it asked for.
    short: bool,
}

impl Round {
    fn stale(&self) -> bool {
        self.short || self.listed_at.is_none_or(|t| t.elapsed() >= RELIST)
    }

    /// The endpoints to ask, in turn: listed again from the cursor round to
    /// where it began if the listing is stale, else the kept one from the cursor on.
    pub(super) async fn queues(&mut self, conn: &hookgate_shared::db::Client) -> Result<&[Listed], StoreError> {
        if self.stale() {
            let (mut listed, mut last, looked) = queues::list(conn, self.cursor.as_ref(), None, LIST).await?;
            self.truncated = looked == LIST;
            if !self.truncated && self.cursor.is_some() {
                let (wrapped, wrapped_last, more) =
                    queues::list(conn, None, self.cursor.as_ref(), LIST - looked).await?;
                self.truncated = more == LIST - looked;
                listed.extend(wrapped);
                last = wrapped_last.or(last);
            }
            self.listed = listed;
            self.last_looked = last;
            self.listed_at = Some(Instant::now());
        } else if let Some(at) = self.cursor.as_ref().and_then(|c| self.listed.iter().position(|l| &l.queue == c)) {
            self.listed.rotate_left(at + 1);
        }
        Ok(&self.listed)
    }

    /// Notes what a claim asked for and got: where the next one starts, and
    /// whether the listing is still good.
    pub(super) fn claimed(&mut self, wants: &[(Queue, i64)], claimed: &[Claimed]) {
        let asked: i64 = wants.iter().map(|(_, n)| n).sum();
        self.short = (claimed.len() as i64) < asked || wants.is_empty();
        let served: HashSet<Queue> = claimed.iter().map(shares::queue_of).collect();
        self.cursor = match wants.iter().rev().find(|(q, _)| served.contains(q)) {
            Some((q, _)) => Some(q.clone()),
            // Nothing given: on past everything this listing looked at, so the
            // next one looks at the others first.
            None => self.last_looked.clone().or(self.cursor.take()),
        };
    }

    /// Whether the last listing found any endpoint with something due.
    pub(super) fn any_listed(&self) -> bool {
        !self.listed.is_empty()
    }
}
