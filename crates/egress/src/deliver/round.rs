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
    queues::{self, Queue},
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
    /// The listing, in the order the next claim asks it.
    listed: Vec<Queue>,
    listed_at: Option<Instant>,
    /// The listing stopped at its limit: more endpoints wait past its end.
    truncated: bool,
    /// The last endpoint a claim was given anything by; the next listing starts after it.
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
    pub(super) async fn queues(&mut self, conn: &hookgate_shared::db::Client) -> Result<&[Queue], StoreError> {
        if self.stale() {
            let mut listed = queues::list(conn, self.cursor.as_ref(), None, LIST).await?;
            self.truncated = listed.len() as i64 == LIST;
            if !self.truncated && self.cursor.is_some() {
                let left = LIST - listed.len() as i64;
                listed.extend(queues::list(conn, None, self.cursor.as_ref(), left).await?);
            }
            self.listed = listed;
            self.listed_at = Some(Instant::now());
        } else if let Some(at) = self.cursor.as_ref().and_then(|c| self.listed.iter().position(|q| q == c)) {
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
            // Nothing given: go on past this listing if it stopped at its limit.
            None if self.truncated => self.listed.last().cloned(),
            None => self.cursor.take(),
        };
    }

    /// Whether the last listing found any endpoint with deliveries waiting.
    pub(super) fn any_listed(&self) -> bool {
        !self.listed.is_empty()
    }
}
