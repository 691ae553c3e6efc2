//! What each connection is doing, for a person during an incident: the status page (`/`) and
//! `/status.json`.
//!
//! Metrics say *that* a cache is stale; this says *which tools* and *what happened when*. Each
//! connection keeps its state, its last walk, the drift by tool name and a bounded timeline of
//! events — list_changed received, walk started and finished, cache replaced, reconnects,
//! errors — so "the notification never arrived" and "it arrived but the re-list failed" read
//! differently. The latest event of each kind is kept apart from the timeline, so the fact a
//! first look needs ("stale since 12:03:04", "unannounced change 3 min ago") never scrolls out.
//! Each target is judged ([`verdict`]): a severity, up, ready, stale, the causes in words and
//! since when, worst targets first.
//!
//! Everything here is bounded and clean at the point it is stored: every server-supplied string
//! (tool names, server name and version, error and event details) passes [`mcp_client::text::bounded`]
//! (a byte cap, control and bidi characters escaped), names per drift kind and events per
//! connection are capped in count, a connection's timeline and changes also in bytes (its share
//! of one board-wide figure, [`history`]), and the rendered page and JSON have a byte cap of their own
//! ([`MAX_RESPONSE_BYTES`]). Nothing here holds a secret: URLs are redacted, error details never
//! carry header values.
//!
//! One job per file: `model` is what is kept per connection and per probe, `board` holds it per
//! target under locks and judges it as it changes, `record` is how a connection task writes into
//! it, `history` bounds the timeline and the changes in bytes, `stamp` is when something happened, `snapshot` is the consistent copy the page and the JSON are rendered from, `json` fits that
//! copy under the byte cap, and [`verdict`] is the judgement itself. The bounds every file keeps
//! to are here.

mod board;
mod history;
mod json;
mod model;
mod record;
mod snapshot;
mod stamp;
pub mod verdict;

pub use board::{StatusBoard, TargetStatus};
use mcp_client::text;
pub use model::{
    CacheStatus, Capabilities, ConnState, ConnStatus, ContractStatus, DriftCounts, DriftStatus,
    Event, LIST_DRIFT_NAMES, LegacyClientsStatus, ListStatus, ProbeStatus, SessionStatus,
    ToolChangeStatus, WalkStatus,
};
pub use record::ConnStatusHandle;
pub use snapshot::{Snapshot, TargetSnapshot};
pub use stamp::Stamp;
pub use verdict::Severity;

/// Tool changes kept per connection (the newest); each shows at most
/// [`mcp_client::listing::changes::SHOWN_FINDINGS`] findings of a few hundred bytes.
pub const CHANGES_PER_CONNECTION: usize = 10;
/// Events kept per connection at most; older ones are dropped (and sooner when the connection's
/// share of the history bytes is full, see [`history`]).
pub const EVENTS_PER_CONNECTION: usize = 100;
/// Tool names kept per drift kind; the rest are counted.
pub const MAX_DRIFT_NAMES: usize = 100;
/// Longest event or error detail kept, in bytes: an error's reason and its first sentence or
/// two; 100 events of it stay under 40 KB per connection.
pub const MAX_DETAIL: usize = 300;
/// Longest tool name kept, in bytes: every name the spec allows (1–128 characters of
/// `A-Za-z0-9_-.`) fits whole; a longer one keeps its start and its original length.
pub const MAX_NAME: usize = 160;
/// Longest server name, server version or protocol version kept, in bytes: real ones are short
/// (`kb-lab`, `1.4.0`, `2025-11-25`); these are labels, not documents.
pub const MAX_LABEL: usize = 128;
/// The most `/` or `/status.json` ever sends, in bytes. The page reloads itself every 10 s, often
/// through a port-forward; 1 MiB holds the summary of every target and the details of the worst
/// ones for any realistic fleet, and keeps a hostile server from making each reload megabytes.
pub const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// A server-supplied string as it is kept: at most `max` bytes, control and bidi characters
/// escaped.
fn keep(s: &str, max: usize) -> String {
    text::bounded(s, max).into_owned()
}

#[cfg(test)]
pub(crate) mod tests;
