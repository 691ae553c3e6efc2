//! What the status board keeps: each connection's state, session, last walk, cache, drift,
//! contract, changes and timeline, and each functional probe's last run.
//!
//! These are plain data, serialized as they are into `/status.json` and read by the page, so the
//! types live apart from the locks that hold them ([`super::board`]) and the writes that fill
//! them ([`super::record`]). The only logic here is the data's own: drift names capped and
//! escaped as a [`DriftStatus`] is built, and a connection's light form for the JSON cap.

use std::mem::size_of;

use serde::Serialize;

use super::Stamp;
use super::history::{Ring, Weigh};
use super::{CHANGES_PER_CONNECTION, MAX_DRIFT_NAMES, MAX_NAME, keep};
use mcp_client::listing::changes::ToolChange;
use mcp_client::listing::items::Drift;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnState {
    /// Opening a session (first time, or after one ended).
    Connecting,
    /// A session is open and its last ping passed.
    Up,
    /// A session is open but pings fail.
    Unresponsive,
    /// The last attempt failed; waiting (backoff) before the next.
    Down,
}

impl ConnState {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnState::Connecting => "connecting",
            ConnState::Up => "up",
            ConnState::Unresponsive => "unresponsive",
            ConnState::Down => "down",
        }
    }
}

/// The negotiated session.
#[derive(Debug, Clone, Serialize)]
pub struct SessionStatus {
    pub era: &'static str,
    pub protocol_version: String,
    pub server_name: String,
    pub server_version: String,
    pub opened_at: Stamp,
    pub capabilities: Capabilities,
}

#[derive(Debug, Clone, Serialize)]
pub struct Capabilities {
    pub tools: bool,
    pub list_changed: bool,
}

/// The last walk of any trigger.
#[derive(Debug, Clone, Serialize)]
pub struct WalkStatus {
    pub trigger: &'static str,
    pub finished_at: Stamp,
    pub complete: bool,
    /// Pages fetched (requests sent, when incomplete).
    pub pages: u32,
    /// Tools listed (absent when incomplete).
    pub tools: Option<usize>,
    pub duration_seconds: f64,
    /// Why it did not complete (`reason: detail`).
    pub error: Option<String>,
}

/// How many names each drift kind had, before [`MAX_DRIFT_NAMES`] cut the lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DriftCounts {
    pub missing: usize,
    pub extra: usize,
    pub changed: usize,
}

impl DriftCounts {
    pub fn total(&self) -> usize {
        self.missing + self.extra + self.changed
    }
}

/// The cache-vs-server difference by tool name.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DriftStatus {
    /// On the server, not in the cache.
    pub missing: Vec<String>,
    /// In the cache, gone from the server: calls to these fail.
    pub extra: Vec<String>,
    /// Same name, different definition.
    pub changed: Vec<String>,
    /// Names left out of the lists above (a kind had more than [`MAX_DRIFT_NAMES`]).
    pub omitted: usize,
    /// Names of each kind, listed or not.
    pub counts: DriftCounts,
}

impl DriftStatus {
    pub(super) fn from(d: &Drift) -> Self {
        let take = |names: &[String]| -> Vec<String> {
            names
                .iter()
                .take(MAX_DRIFT_NAMES)
                .map(|n| keep(n, MAX_NAME))
                .collect()
        };
        let counts = DriftCounts {
            missing: d.missing.len(),
            extra: d.extra.len(),
            changed: d.changed.len(),
        };
        let mut s = DriftStatus {
            missing: take(&d.missing),
            extra: take(&d.extra),
            changed: take(&d.changed),
            omitted: 0,
            counts,
        };
        s.omitted = counts.total() - s.listed();
        s
    }

    fn listed(&self) -> usize {
        self.missing.len() + self.extra.len() + self.changed.len()
    }

    /// Keep at most `n` names per kind (the counts stay).
    pub(super) fn cut(&mut self, n: usize) {
        for names in [&mut self.missing, &mut self.extra, &mut self.changed] {
            names.truncate(n);
        }
        self.omitted = self.counts.total() - self.listed();
    }

    pub fn is_empty(&self) -> bool {
        self.counts.total() == 0
    }
}

/// What the connection's client holds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CacheStatus {
    pub tools: Option<usize>,
    pub replaced_at: Option<Stamp>,
    pub replaced_by: Option<&'static str>,
}

/// What the server promises a caching client, and whether a promise is broken now
/// (docs/health.md, "The correct client of each era").
#[derive(Debug, Clone, Default, Serialize)]
pub struct ContractStatus {
    /// `announce`, `ttl`, `announce_ttl` or `none`; absent before the first session.
    pub promise: Option<&'static str>,
    /// Freshness the latest listing promised (2026-07-28 `ttlMs`), in seconds.
    pub ttl_seconds: f64,
    /// The promise in words.
    pub words: Option<String>,
    /// A promise of the era is broken now: a correct client holds a stale list (as
    /// `mcp_probe_tool_cache_stale`).
    pub broken: bool,
    /// Since when it has been broken; absent while it holds.
    pub broken_since: Option<Stamp>,
}

/// What a 2025-era client of this modern server hears (connection 0 of a modern session).
#[derive(Debug, Clone, Serialize)]
pub struct LegacyClientsStatus {
    /// `true`, `false`, or absent until measured (as `mcp_probe_legacy_path_hears_changes`).
    pub hears: Option<bool>,
    /// `declares_none`, `no_stream`, `stream_silent`, `delivered`, `untested` or `not_served`.
    pub cause: &'static str,
    pub detail: &'static str,
    pub at: Stamp,
}

/// One entry of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub at: Stamp,
    /// `session_opened`, `session_failed`, `session_expired`, `session_closed`, `stream_opened`,
    /// `stream_lost`, `list_changed`, `walk_started`, `walk_finished`, `walk_failed`,
    /// `cache_replaced`, `drift`, `unannounced_change`, `ping_failed`, `probe_passed`,
    /// `probe_failed`.
    pub kind: &'static str,
    pub detail: String,
}

/// The latest event of each kind, one entry a kind, in the order the kinds first happened.
///
/// A vector searched by kind, not a map: a connection sees a handful of the sixteen kinds, and
/// a B-tree's first node holds eleven (~0.7 KB a connection, mostly empty).
#[derive(Debug, Clone, Default)]
pub struct LastEvents(Vec<Event>);

impl LastEvents {
    /// Keep `e` as the latest of its kind.
    pub fn insert(&mut self, e: Event) {
        match self.0.iter_mut().find(|k| k.kind == e.kind) {
            Some(kept) => *kept = e,
            None => self.0.push(e),
        }
    }

    pub fn get(&self, kind: &str) -> Option<&Event> {
        self.0.iter().find(|e| e.kind == kind)
    }

    pub fn values(&self) -> impl Iterator<Item = &Event> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for LastEvents {
    /// As an object by kind, in the kinds' order (as `/status.json` has always shown it).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut by_kind: Vec<&Event> = self.0.iter().collect();
        by_kind.sort_by_key(|e| e.kind);
        s.collect_map(by_kind.into_iter().map(|e| (e.kind, e)))
    }
}

impl Weigh for Event {
    fn weight(&self) -> usize {
        size_of::<Event>() + self.detail.capacity()
    }
}

/// One connection.
#[derive(Debug, Clone, Serialize)]
pub struct ConnStatus {
    pub connection: u16,
    pub state: ConnState,
    pub state_since: Stamp,
    pub session: Option<SessionStatus>,
    pub notification_stream: bool,
    pub list_changed_received: u64,
    pub last_walk: Option<WalkStatus>,
    pub cache: CacheStatus,
    pub drift: DriftStatus,
    /// Since when the cache has differed from the server; absent while it matches.
    pub stale_since: Option<Stamp>,
    /// The server's promise to caching clients, and whether it is broken now.
    pub contract: ContractStatus,
    /// What a 2025-era client of this modern server hears; absent where not measured.
    pub legacy_clients: Option<LegacyClientsStatus>,
    /// Refresh walks (every trigger but `audit`) that failed since the cache was last replaced.
    pub refresh_failures: u32,
    /// The other lists the connection watches (prompts, resources, resource templates), in
    /// [`mcp_client::listing::list::List`] order; absent for a tools-only server.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lists: Vec<ListStatus>,
    /// The newest tool changes between two listings, with their classified differences
    /// (oldest first, at most [`CHANGES_PER_CONNECTION`] and the connection's share of the
    /// history bytes).
    pub changes: Ring<ToolChangeStatus>,
    /// The latest event of each kind, kept when the timeline has scrolled past it.
    pub last_events: LastEvents,
    /// Oldest first (at most [`super::EVENTS_PER_CONNECTION`] and the connection's share of the
    /// history bytes).
    pub events: Ring<Event>,
}

impl ConnStatus {
    pub(super) fn new(connection: u16, at: Stamp) -> Self {
        ConnStatus {
            connection,
            state: ConnState::Connecting,
            state_since: at,
            session: None,
            notification_stream: false,
            list_changed_received: 0,
            last_walk: None,
            cache: CacheStatus::default(),
            drift: DriftStatus::default(),
            stale_since: None,
            contract: ContractStatus::default(),
            legacy_clients: None,
            refresh_failures: 0,
            lists: Vec::new(),
            changes: Ring::default(),
            last_events: LastEvents::default(),
            events: Ring::default(),
        }
    }

    /// The latest event of `kind`.
    pub fn last(&self, kind: &str) -> Option<&Event> {
        self.last_events.get(kind)
    }

    /// Keep the newest `events` entries and `names` names per drift kind: the light form
    /// `/status.json` falls back to when the whole does not fit.
    pub(super) fn trim(&mut self, events: usize, names: usize) {
        self.events.keep_newest(events);
        self.drift.cut(names);
        for l in &mut self.lists {
            l.drift.cut(names.min(LIST_DRIFT_NAMES));
        }
        self.changes.keep_newest(names.min(CHANGES_PER_CONNECTION));
    }

    /// Hold the timeline and the changes to `share` bytes together (half each), the newest of
    /// each kept whatever it weighs.
    pub(super) fn fit(&mut self, share: usize) {
        self.events.fit(share / 2);
        self.changes.fit(share - share / 2);
    }
}

/// Names each drift kind of another list keeps: the page says which items, the metrics how many.
pub const LIST_DRIFT_NAMES: usize = 10;

/// Another list a connection watches, as the status page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ListStatus {
    /// `prompts`, `resources` or `resource_templates`.
    pub list: &'static str,
    /// Items of the server's latest complete listing.
    pub server: Option<usize>,
    /// Items a correct client holds (after its last refresh).
    pub cache: Option<usize>,
    pub drift: DriftStatus,
    /// What the server promises about this list (`announce`, `ttl`, `announce_ttl`, `none`).
    pub promise: Option<&'static str>,
    /// A promise broken now: a correct client holds a stale copy.
    pub stale: bool,
}

impl ListStatus {
    pub(super) fn new(list: &'static str) -> Self {
        ListStatus {
            list,
            server: None,
            cache: None,
            drift: DriftStatus::default(),
            promise: None,
            stale: false,
        }
    }
}

/// One tool change as the status page keeps it: when, and the classified difference.
#[derive(Debug, Clone, Serialize)]
pub struct ToolChangeStatus {
    pub at: Stamp,
    #[serde(flatten)]
    pub change: ToolChange,
}

impl Weigh for ToolChangeStatus {
    fn weight(&self) -> usize {
        size_of::<ToolChangeStatus>() + self.change.heap_bytes()
    }
}

/// The last run of a functional probe.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeStatus {
    pub tool: String,
    pub interval_seconds: f64,
    pub last_run_at: Option<Stamp>,
    pub success: bool,
    /// Failure reason label (`unknown_tool`, `side_effect_guard`, …).
    pub reason: Option<&'static str>,
    pub detail: Option<String>,
    pub duration_seconds: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_event_of_each_kind_is_kept_once_and_shown_by_kind() {
        let at = Stamp::now();
        let e = |kind, detail: &str| Event {
            at,
            kind,
            detail: detail.into(),
        };
        let mut last = LastEvents::default();
        last.insert(e("walk_finished", "first"));
        last.insert(e("drift", "x"));
        last.insert(e("walk_finished", "second"));
        assert_eq!(last.values().count(), 2);
        assert_eq!(last.get("walk_finished").unwrap().detail, "second");
        assert!(last.get("stream_lost").is_none());
        let json = serde_json::to_value(&last).unwrap();
        let kinds: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(kinds, ["drift", "walk_finished"]);
        assert_eq!(json["walk_finished"]["detail"], "second");
    }
}
