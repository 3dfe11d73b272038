//! Svix-style cursor pagination: `limit`, `iterator` (the last id seen, or `-`
//! and the first id seen to page back), `order`, `done`.

use serde::{Deserialize, Serialize};

/// The largest page a client may ask for, as Svix.
pub const MAX_LIMIT: i64 = 250;
pub const DEFAULT_LIMIT: i64 = 50;

/// The order a list is shown in, by id (ids grow with time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    Ascending,
    Descending,
}

/// Where a page starts: after the row an `iterator` names, or (`-id`, a
/// `prevIterator`) just before it, in the list's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    Next(String),
    Prev(String),
}

impl Cursor {
    /// Reads an iterator as the API takes it; the id itself is checked by the caller.
    pub fn parse(iterator: &str) -> Option<Self> {
        match iterator.strip_prefix('-') {
            _ if iterator.is_empty() => None,
            Some(id) => Some(Cursor::Prev(id.to_owned())),
            None => Some(Cursor::Next(iterator.to_owned())),
        }
    }

    pub fn id(&self) -> &str {
        match self {
            Cursor::Next(id) | Cursor::Prev(id) => id,
        }
    }
}

/// A page request, already bounded.
#[derive(Debug, Clone)]
pub struct PageRequest {
    pub limit: i64,
    pub cursor: Option<Cursor>,
    /// The order the client asked for; `None` takes the list's own.
    pub order: Option<Order>,
}

/// How a store walks its index for one page: rows whose key compares `cmp` with
/// `key`, read in `dir`. A `-id` cursor reads backwards and [`Page::from_rows`]
/// turns the rows round again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk<'a> {
    pub key: Option<&'a str>,
    pub cmp: &'static str,
    pub dir: &'static str,
}

impl PageRequest {
    /// A page of `limit` rows from `iterator` (`-id` pages back), in the list's order.
    pub fn new(limit: Option<i64>, iterator: Option<String>) -> Self {
        Self {
            limit: limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
            cursor: iterator.as_deref().and_then(Cursor::parse),
            order: None,
        }
    }

    /// The page after `last`, for code that walks a whole list itself: the id is
    /// taken as it is, never read as a `-id` (an event type's name may start so).
    pub fn following(limit: i64, last: Option<String>) -> Self {
        Self { limit: limit.clamp(1, MAX_LIMIT), cursor: last.map(Cursor::Next), order: None }
    }

    pub fn ordered(mut self, order: Option<Order>) -> Self {
        self.order = order;
        self
    }

    /// One row more than the page, to learn whether another page follows.
    pub fn fetch_limit(&self) -> i64 {
        self.limit + 1
    }

    /// The walk for a list whose own order is `natural`.
    pub fn walk(&self, natural: Order) -> Walk<'_> {
        let ascending = self.order.unwrap_or(natural) == Order::Ascending;
        let forwards = !self.backwards();
        let (cmp, dir) = if ascending == forwards { (">", "ASC") } else { ("<", "DESC") };
        Walk { key: self.cursor.as_ref().map(Cursor::id), cmp, dir }
    }

    fn backwards(&self) -> bool {
        matches!(self.cursor, Some(Cursor::Prev(_)))
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
    /// Cuts the extra row fetched by [`PageRequest::fetch_limit`]; `id` reads a
    /// row's id. Rows read backwards (a `-id` cursor) are turned round, and
    /// `done` then says nothing comes before them, as Svix answers.
    pub fn from_rows(mut rows: Vec<T>, req: &PageRequest, id: impl Fn(&T) -> String) -> Self {
        let done = rows.len() as i64 <= req.limit;
        rows.truncate(req.limit as usize);
        if req.backwards() {
            rows.reverse();
        }
        let iterator = rows.last().map(&id);
        let prev_iterator = rows.first().map(|r| format!("-{}", id(r)));
        Page { data: rows, iterator, prev_iterator, done }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn req(iterator: Option<&str>, order: Option<Order>) -> PageRequest {
        PageRequest::new(Some(2), iterator.map(str::to_owned)).ordered(order)
    }

    #[test]
    fn a_walk_reads_forwards_in_the_lists_order_and_backwards_from_a_prev_iterator() {
        let asc = Some(Order::Ascending);
        let desc = Some(Order::Descending);
        let w = |i, o, n| {
            let r = req(i, o);
            let w = r.walk(n);
            (w.key.map(str::to_owned), w.cmp, w.dir)
        };
        assert_eq!(w(None, None, Order::Ascending), (None, ">", "ASC"));
        assert_eq!(w(None, None, Order::Descending), (None, "<", "DESC"));
        assert_eq!(w(Some("a_1"), asc, Order::Descending), (Some("a_1".into()), ">", "ASC"));
        assert_eq!(w(Some("a_1"), desc, Order::Ascending), (Some("a_1".into()), "<", "DESC"));
        assert_eq!(w(Some("-a_1"), None, Order::Ascending), (Some("a_1".into()), "<", "DESC"));
        assert_eq!(w(Some("-a_1"), desc, Order::Ascending), (Some("a_1".into()), ">", "ASC"));
    }

    #[test]
    fn a_page_read_backwards_is_turned_round_and_names_both_ends() {
        let page = Page::from_rows(vec![5, 4, 3], &req(Some("-x_6"), None), |n| format!("x_{n}"));
        assert_eq!(page.data, vec![4, 5]);
        assert_eq!(page.iterator.as_deref(), Some("x_5"));
        assert_eq!(page.prev_iterator.as_deref(), Some("-x_4"));
        assert!(!page.done, "a row before x_4 was read, so there is more to page back to");
        let empty = Page::<i32>::from_rows(vec![], &req(None, None), |n| n.to_string());
        assert_eq!((empty.iterator, empty.prev_iterator, empty.done), (None, None, true));
    }
}
