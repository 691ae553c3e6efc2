//! What healing keeps of one session ([`super::heal`]): an order-free fingerprint of the list it
//! last walked whole and the catalog generation it was last told of — two numbers, no copy of the
//! list. A session holds it whether healing is on or not (sixteen bytes), so the session table
//! needs nothing of healing but this.

use serde_json::Value;

use super::upstream_tools::{Listing, listing_fingerprint};
use mcp_client::listing::items::definition_fingerprint;

/// What healing keeps of one session: the list it last saw whole, and the last change it was
/// told of.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    /// The walk under way (a `tools/list` without a cursor, then its cursors): its sum so far.
    walk: Option<u64>,
    /// Fingerprint of the last complete walk.
    listing: Option<u64>,
    /// The catalog generation this session was last told of.
    told: u64,
}

impl Seen {
    /// A `tools/list` page passed to this session (`first`: asked without a cursor; `last`: no
    /// `nextCursor`).
    pub fn page(&mut self, first: bool, tools: &[Value], last: bool) {
        let sum = if first { Some(0) } else { self.walk };
        let Some(sum) = sum else {
            // A page of a walk not seen from its start: it says nothing of the whole list.
            return;
        };
        let sum = sum.wrapping_add(listing_fingerprint(
            tools.iter().map(definition_fingerprint),
        ));
        if last {
            self.walk = None;
            self.listing = Some(sum);
        } else {
            self.walk = Some(sum);
        }
    }

    /// A `tools/list` result passed to this session (`first`: asked without a cursor).
    pub fn answer(&mut self, first: bool, result: &Value) {
        let tools = result.get("tools").and_then(Value::as_array);
        let last = result.get("nextCursor").and_then(Value::as_str).is_none();
        self.page(first, tools.map_or(&[], Vec::as_slice), last);
    }

    /// The session listed another list than `now` and was not told of this generation yet.
    pub fn stale(&self, now: Listing) -> bool {
        now.generation > self.told && self.listing.is_some_and(|l| l != now.fingerprint)
    }

    /// The session was told of `now`'s generation.
    pub fn tell(&mut self, now: Listing) {
        self.told = now.generation;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_session_is_stale_when_its_whole_walk_differs_and_is_told_once() {
        let tool = |n: &str| json!({"name": n, "inputSchema": {"type": "object"}});
        let (a, b, c) = (tool("a"), tool("b"), tool("c"));
        let current = |tools: &[Value], generation| Listing {
            generation,
            fingerprint: listing_fingerprint(tools.iter().map(definition_fingerprint)),
        };
        let mut s = Seen::default();
        assert!(
            !s.stale(current(std::slice::from_ref(&a), 1)),
            "never listed"
        );
        // Two pages, in any order, make the same list as the catalog's.
        s.page(true, std::slice::from_ref(&b), false);
        assert!(
            !s.stale(current(std::slice::from_ref(&a), 1)),
            "the walk is not done"
        );
        s.page(false, std::slice::from_ref(&a), true);
        assert!(!s.stale(current(&[a.clone(), b.clone()], 1)));
        let swapped = current(&[a.clone(), c.clone()], 2);
        assert!(s.stale(swapped));
        s.tell(swapped);
        assert!(!s.stale(swapped), "once per generation");
        // A page of a walk not seen from its start changes nothing; a fresh walk does.
        let mut t = Seen::default();
        t.page(false, std::slice::from_ref(&a), true);
        assert!(t.listing.is_none());
        t.page(true, &[a.clone(), c.clone()], true);
        assert!(!t.stale(swapped));
    }
}
