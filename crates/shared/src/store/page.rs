//! Svix-style cursor pagination: `limit`, `iterator` (the last id seen), `done`.

use serde::Serialize;

/// The largest page a client may ask for, as Svix.
pub const MAX_LIMIT: i64 = 250;
pub const DEFAULT_LIMIT: i64 = 50;

/// A page request, already bounded.
#[derive(Debug, Clone)]
pub struct PageRequest {
    pub limit: i64,
    /// Return rows with an id after this one.
    pub after: Option<String>,
}

impl PageRequest {
    pub fn new(limit: Option<i64>, iterator: Option<String>) -> Self {
        Self { limit: limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT), after: iterator.filter(|s| !s.is_empty()) }
    }

    /// One row more than the page, to learn whether another page follows.
    pub fn fetch_limit(&self) -> i64 {
        self.limit + 1
    }
}

/// A page of results in the wire shape of Svix's `ListResponse_*`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub data: Vec<T>,
    pub iterator: Option<String>,
    pub prev_iterator: Option<String>,
    pub done: bool,
}

impl<T> Page<T> {
    /// Cuts the extra row fetched by [`PageRequest::fetch_limit`]; `id` reads a row's id.
    pub fn from_rows(mut rows: Vec<T>, req: &PageRequest, id: impl Fn(&T) -> String) -> Self {
        let done = rows.len() as i64 <= req.limit;
        rows.truncate(req.limit as usize);
        let iterator = rows.last().map(&id);
        // Paging backwards is not supported: say so rather than hand out an
        // iterator that would page forwards from the start.
        Page { data: rows, iterator, prev_iterator: None, done }
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            iterator: self.iterator,
            prev_iterator: self.prev_iterator,
            done: self.done,
        }
    }
}
