//! Client sessions the proxy tracks: what each did with its tool list, bounded in number and in
//! size, forgotten when idle.
//!
//! A session is a legacy `Mcp-Session-Id`, or (modern era, no sessions) one client identity:
//! its reported name and credentials. Everything kept per session is a few counters, flags and
//! instants (no cursor text, no arguments: a cursor is kept as a digest) so an idle session costs
//! well under 4 KiB; see the size test. At `max_sessions` the idlest session is dropped to make
//! room (a hostile client opening sessions cannot grow memory), and a periodic sweep ends
//! sessions idle longer than `session_idle_timeout` and settles the deadlines that passed
//! (a cursor not followed within `cursor_grace`, no re-list within `relist_grace`).
//!
//! A legacy session evicted at the cap is also ended at the upstream (queued here, sent as
//! `DELETE` by the proxy): otherwise a client opening sessions without end would fill the
//! upstream's own session cap through the proxy and lock every other client out. The upstream
//! then holds at most `max_sessions` sessions opened through the proxy. A session only idle is
//! forgotten, not ended: a client may hold a quiet GET stream for hours, and `last_seen` moves
//! only with requests.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::labels::Client;
use super::observe::{Asked, Pending};
use crate::proxy::metrics::{ClientEvent, Ended, ProxyMetrics};

/// One tracked session.
pub struct Session {
    pub client: Arc<Client>,
    /// The key is a session the upstream issued (`Mcp-Session-Id`), not a modern identity: it
    /// is ended at the upstream when the proxy stops tracking it.
    pub upstream: bool,
    pub started: Instant,
    pub last_seen: Instant,
    /// tools/list requests (pages asked for).
    pub lists: u16,
    /// tools/list answers received (pages seen).
    pub pages: u16,
    pub tool_calls: u32,
    /// The nextCursor last sent to this session and when, while not followed.
    pub cursor: Option<(u64, Instant)>,
    pub cursors_followed: u16,
    pub cursor_errors: u16,
    pub first_page_only: bool,
    /// A list_changed forwarded and not yet followed by a re-list.
    pub relist_due: Option<Instant>,
    pub last_list_changed: Option<Instant>,
    pub without_relist: u16,
    pub reconnect_without_list: bool,
    pub stale_tool_calls: u16,
    pub stale_schema_calls: u16,
    /// Answers of the upstream to this session's `tools/call` that said the tool does not exist.
    pub unknown_tool_answers: u16,
    /// Tools listed so far in the walk this session is on (a `tools/list` without a cursor, then
    /// the cursors it was sent), while it is on one: its complete walk is compared with the
    /// catalog by number of tools (a count, not a copy of the list).
    pub walk: Option<u16>,
    /// The list it last saw whole and the change it was last told of (`heal` only).
    pub heal: super::seen::Seen,
    /// Its prompts, resources and resource templates (cursors, re-lists, stale uses), allocated
    /// on first use.
    pub other_lists: super::list_track::Tracks,
    /// When the listing this session holds stops being fresh: its pages' `ttlMs` (the earliest
    /// of its walk) from their arrival, for a 2026-07-28 listing; none for a legacy one, whose
    /// contract is to cache until `list_changed`.
    pub fresh_until: Option<Instant>,
    /// Requests of an HTTP+SSE session (2024-11-05) sent by POST and answered on its GET
    /// stream, kept to read those answers: at most [`MAX_STREAM_PENDING`], oldest dropped first,
    /// without the call arguments.
    pub stream_pending: Vec<StreamPending>,
}

/// Most requests of one HTTP+SSE session awaiting their answer on its stream.
pub const MAX_STREAM_PENDING: usize = 16;

/// A request of an HTTP+SSE session whose answer comes on the session's GET stream.
pub struct StreamPending {
    pub pending: Pending,
    pub started: Instant,
}

impl StreamPending {
    /// `r`, sent at `started`, kept without a call's arguments (judged when it was sent).
    pub fn of(r: &Pending, started: Instant) -> StreamPending {
        let asked = match &r.asked {
            Asked::ToolsCall { tool, .. } => Asked::ToolsCall {
                tool: tool.clone(),
                arguments: serde_json::Value::Null,
            },
            Asked::Use { list, .. } => Asked::Use {
                list: *list,
                key: None,
            },
            other => other.clone(),
        };
        StreamPending {
            pending: Pending {
                id: r.id.clone(),
                method: r.method,
                asked,
            },
            started,
        }
    }
}

impl Session {
    fn new(client: Arc<Client>, now: Instant) -> Self {
        Session {
            client,
            upstream: false,
            started: now,
            last_seen: now,
            lists: 0,
            pages: 0,
            tool_calls: 0,
            cursor: None,
            cursors_followed: 0,
            cursor_errors: 0,
            first_page_only: false,
            relist_due: None,
            last_list_changed: None,
            without_relist: 0,
            reconnect_without_list: false,
            stale_tool_calls: 0,
            stale_schema_calls: 0,
            unknown_tool_answers: 0,
            walk: None,
            fresh_until: None,
            stream_pending: Vec::new(),
            heal: super::seen::Seen::default(),
            other_lists: super::list_track::Tracks::default(),
        }
    }

    /// A 2026-07-28 listing page arrived at `now` with `ttl_ms` (missing or negative is 0): the
    /// session's listing is fresh until the earliest expiry of its walk's pages. A legacy page
    /// (`ttl_ms` none) makes the listing one that never expires by time.
    pub fn listed(&mut self, first_page: bool, ttl_ms: Option<i64>, now: Instant) {
        self.fresh_until = ttl_ms.map(|ms| {
            let until = now + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
            match self.fresh_until {
                Some(held) if !first_page => held.min(until),
                _ => until,
            }
        });
    }

    /// A `tools/call` at `now`: was it made with a listing expired longer than `grace` ago?
    pub fn listing_expired(&self, now: Instant, grace: Duration) -> bool {
        self.fresh_until.is_some_and(|f| now > f + grace)
    }

    /// Remember a request whose answer comes on the session's stream (bounded).
    pub fn await_on_stream(&mut self, pending: StreamPending) {
        if self.stream_pending.len() >= MAX_STREAM_PENDING {
            self.stream_pending.remove(0);
        }
        self.stream_pending.push(pending);
    }

    /// The request a stream's answer with `id` answers, if remembered.
    pub fn answered_on_stream(&mut self, id: &serde_json::Value) -> Option<StreamPending> {
        let i = self
            .stream_pending
            .iter()
            .position(|p| &p.pending.id == id)?;
        Some(self.stream_pending.remove(i))
    }

    /// The cursor sent to this session was not followed: first-page-only, once per session.
    pub fn cursor_abandoned(&mut self) {
        if self.cursor.take().is_some() && !self.first_page_only {
            self.first_page_only = true;
            self.client.series.event(ClientEvent::FirstPageOnly);
        }
    }

    /// A tools/call (or the grace) came before the re-list a forwarded list_changed asked for.
    pub fn relist_missed(&mut self) {
        if self.relist_due.take().is_some() {
            self.without_relist = self.without_relist.saturating_add(1);
            self.client
                .series
                .event(ClientEvent::NoRelistAfterListChanged);
        }
    }
}

/// The sessions of one proxy.
pub struct Table {
    map: HashMap<Box<str>, Session>,
    max: usize,
    metrics: Arc<ProxyMetrics>,
    /// Upstream sessions dropped from tracking, to be ended at the upstream (see the module
    /// docs); drained by [`Table::take_to_close`] after every change, so it stays short.
    to_close: Vec<Box<str>>,
}

impl Table {
    pub fn new(max: usize, metrics: Arc<ProxyMetrics>) -> Self {
        Table {
            map: HashMap::new(),
            max: max.max(1),
            metrics,
            to_close: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Session> {
        self.map.get_mut(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Session)> {
        self.map.iter().map(|(k, v)| (&**k, v))
    }

    /// The session `key`, started now for `client` if it is new; at the cap the idlest session
    /// makes room (counted).
    pub fn touch(&mut self, key: &str, client: &Arc<Client>, now: Instant) -> &mut Session {
        if !self.map.contains_key(key) {
            if self.map.len() >= self.max {
                self.evict_idlest();
                self.metrics
                    .rejected(crate::proxy::metrics::Rejected::SessionLimit);
            }
            client.series.sessions(1);
            client.series.event(ClientEvent::SessionStarted);
            self.map
                .insert(key.into(), Session::new(client.clone(), now));
        }
        let s = self.map.get_mut(key).expect("inserted above");
        s.last_seen = now;
        s
    }

    fn evict_idlest(&mut self) {
        let idlest = self
            .map
            .iter()
            .min_by_key(|(_, s)| s.last_seen)
            .map(|(k, _)| k.clone());
        if let Some(k) = idlest {
            self.end(&k, Ended::Evicted);
        }
    }

    /// Stop tracking `key` (if tracked), counting why. An upstream session evicted at the cap is
    /// queued to be ended there too; one idle, or one the client or the upstream ended, is not.
    pub fn end(&mut self, key: &str, why: Ended) -> bool {
        match self.map.remove_entry(key) {
            Some((key, s)) => {
                s.client.series.sessions(-1);
                self.metrics.ended(why);
                if s.upstream && why == Ended::Evicted {
                    self.to_close.push(key);
                }
                true
            }
            None => false,
        }
    }

    /// Whether upstream sessions wait to be ended there.
    pub fn has_to_close(&self) -> bool {
        !self.to_close.is_empty()
    }

    /// The upstream sessions dropped since the last call, to end at the upstream.
    pub fn take_to_close(&mut self) -> Vec<Box<str>> {
        std::mem::take(&mut self.to_close)
    }

    /// Settle what passed by `now`: sessions idle past `idle`, cursors not followed within
    /// `cursor_grace`, re-lists missing after `relist_grace`.
    pub fn sweep(
        &mut self,
        now: Instant,
        idle: Duration,
        cursor_grace: Duration,
        relist_grace: Duration,
    ) {
        let mut gone = Vec::new();
        for (k, s) in self.map.iter_mut() {
            if s.cursor
                .is_some_and(|(_, t)| now.duration_since(t) >= cursor_grace)
            {
                s.cursor_abandoned();
            }
            if s.relist_due
                .is_some_and(|t| now.duration_since(t) >= relist_grace)
            {
                s.relist_missed();
            }
            s.other_lists
                .sweep(now, cursor_grace, relist_grace, &s.client);
            if now.duration_since(s.last_seen) >= idle {
                gone.push(k.clone());
            }
        }
        for k in gone {
            self.end(&k, Ended::Idle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::labels::ClientLabels;
    use crate::telemetry::Telemetry;

    #[test]
    fn a_modern_listing_expires_at_its_walks_earliest_ttl_and_a_legacy_one_never() {
        let t0 = Instant::now();
        let secs = Duration::from_secs;
        let t = Telemetry::new();
        let client =
            ClientLabels::new(4, vec![], t.add_proxy("kb"), secs(60)).get_at(Some("c"), t0);
        let mut s = Session::new(client, t0);
        s.listed(true, Some(60_000), t0);
        s.listed(false, Some(10_000), t0 + secs(1));
        assert!(!s.listing_expired(t0 + secs(11), Duration::ZERO));
        assert!(
            s.listing_expired(t0 + secs(12), Duration::ZERO),
            "page 2's ttl"
        );
        assert!(
            !s.listing_expired(t0 + secs(12), secs(5)),
            "within the grace"
        );
        s.listed(true, Some(-5), t0 + secs(20));
        assert!(
            s.listing_expired(t0 + secs(21), Duration::ZERO),
            "negative is 0"
        );
        s.listed(true, None, t0 + secs(30));
        assert!(
            !s.listing_expired(t0 + secs(3600), Duration::ZERO),
            "legacy"
        );
    }

    #[test]
    fn an_idle_session_costs_well_under_4_kib() {
        // The struct plus its key in the map (a session id is ~36 bytes) and the map's own
        // per-entry overhead (hashbrown: one control byte and the slot, at 87.5% load).
        let per_session = std::mem::size_of::<Session>() + std::mem::size_of::<Box<str>>() + 64 + 8;
        eprintln!("per idle session: {per_session} bytes");
        assert!(per_session < 512, "{per_session} bytes");
    }

    #[test]
    fn the_table_is_bounded_and_evicts_the_idlest() {
        let t = Telemetry::new();
        let m = t.add_proxy("p");
        let labels =
            ClientLabels::new(5, vec![], m.clone(), std::time::Duration::from_secs(86_400));
        let c = labels.get(Some("a"));
        let mut table = Table::new(3, m);
        let t0 = Instant::now();
        for i in 0..10u64 {
            table.touch(&format!("s{i}"), &c, t0 + Duration::from_secs(i));
        }
        assert_eq!(table.len(), 3);
        assert!(table.get_mut("s9").is_some() && table.get_mut("s0").is_none());
        table.sweep(
            t0 + Duration::from_secs(100),
            Duration::from_secs(10),
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
        assert!(table.is_empty());
        let text = t.render();
        assert!(
            text.contains("mcp_proxy_sessions_ended_total{proxy=\"p\",reason=\"evicted\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("mcp_proxy_sessions_ended_total{proxy=\"p\",reason=\"idle\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("mcp_proxy_sessions{proxy=\"p\",client=\"a\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn dropped_upstream_sessions_are_queued_to_end_there_and_identities_are_not() {
        let t = Telemetry::new();
        let m = t.add_proxy("p");
        let c = ClientLabels::new(5, vec![], m.clone(), std::time::Duration::from_secs(86_400))
            .get(Some("a"));
        let mut table = Table::new(2, m);
        let t0 = Instant::now();
        table.touch("s0", &c, t0).upstream = true;
        table.touch("client:a:0", &c, t0);
        table.touch("s1", &c, t0 + Duration::from_secs(1)).upstream = true;
        table.touch("s2", &c, t0 + Duration::from_secs(2)).upstream = true;
        let closed: Vec<_> = table
            .take_to_close()
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(closed, ["s0"], "the idlest upstream session is ended there");
        table.end("s1", Ended::Deleted);
        assert!(
            table.take_to_close().is_empty(),
            "a client's DELETE is not sent again"
        );
        table.sweep(
            t0 + Duration::from_secs(100),
            Duration::from_secs(10),
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
        assert!(
            table.take_to_close().is_empty(),
            "an idle session is forgotten, not ended: its client may hold a quiet stream"
        );
    }
}
