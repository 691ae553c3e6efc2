//! One HTTP exchange as the proxy accounts it: who sent it (its client and tracked session), the
//! JSON-RPC requests it carried (kept to read their answers) and its era. Forwarding fills it;
//! `flatten_pages` and healing read it, so it sits below all three.

use std::sync::Arc;
use std::time::Instant;

use super::labels::Client;
use super::observe::Pending;

/// Longest session id tracked (bytes): a longer one is forwarded, not tracked.
pub(super) const MAX_SESSION_ID_BYTES: usize = 256;

/// The exchange's JSON-RPC and who sent it.
pub(super) struct Exchange {
    pub client: Arc<Client>,
    /// The tracked session's key (legacy session id, an HTTP+SSE session as `sse:<id>`, or a
    /// modern client identity).
    pub key: Option<String>,
    /// Made in the 2026-07-28 era: its listings carry a `ttlMs` the client must honour.
    pub modern: bool,
    pub requests: Vec<Pending>,
    pub notifications: Vec<&'static str>,
    pub started: Instant,
}

/// The session key of an HTTP+SSE session (its id in the message URL); apart from legacy
/// `Mcp-Session-Id`s and modern identities by its prefix.
fn stream_key(id: &str) -> String {
    format!("sse:{id}")
}

/// The session key an HTTP+SSE message URL's query names (`sessionId` or `session_id`), if it
/// names one short enough to track: the key of its POSTs and of the GET stream that named it.
pub(super) fn stream_key_of(query: Option<&str>) -> Option<String> {
    super::observe::stream_session(query)
        .filter(|id| id.len() <= MAX_SESSION_ID_BYTES)
        .map(|id| stream_key(&id))
}

pub(super) fn is_stream_key(key: &str) -> bool {
    key.starts_with("sse:")
}
