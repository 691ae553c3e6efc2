//! The series of one (target, connection) and the handle its task records through.
//!
//! Series with fixed label values live in one table ([`Layout`]): one atomic cell each, and each
//! row says when its series is first written ([`Birth`]). Counters and gauges an operator reads
//! from the start (sessions, requests, drift, fingerprints) are at 0 from the start, as Prometheus
//! conventions ask, and so is every counter an alert fires on at its *first* increase
//! (unannounced changes, TTL violations, duplicate tools): a series born at 1 would hide that
//! increase from `increase()`. Counters of anomalies that alert only when they go on (cursor
//! errors, loop caps, refresh failures, expiries) or that no alert reads are written from their
//! first event: a healthy connection never has them, and at 0 they were a third of its bytes
//! (the choice and its test: docs/scaling.md, tests/monitoring.rs). Series labelled by `method`,
//! or by `reason` of a request or walk, are created on first use for the same reason. Latency
//! histograms and session failures by reason are the target's (see [`super::TargetMetrics`]):
//! per connection they were most of the exposition's bytes.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::TargetMetrics;
use super::lists::ListSeries;
use crate::probe::Trigger;
use crate::telemetry::families as m;
use exposition::Kind;
use exposition::{self as expo, Exposition, Slot, Value};
use exposition::{Cell, Lazy};
use mcp_client::listing::changes::CHANGE_KINDS;
use mcp_client::listing::items::{Drift, ItemSet};
use mcp_client::listing::list::List;
use mcp_client::listing::walker::{WalkError, WalkReport};
use mcp_client::mcp::{Era, Reason, ServerInfo};

const REFRESH_TRIGGERS: [Trigger; 4] = [
    Trigger::Initial,
    Trigger::Notification,
    Trigger::Reconnect,
    Trigger::StreamGap,
];

const DRIFT_KINDS: [&str; 3] = ["missing", "extra", "changed"];

/// When a fixed series is first written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Birth {
    /// At 0 from the start: what is read from the start, and what an alert fires on at its
    /// first increase.
    AtStart,
    /// A counter written from its first event ([`Value::from_first_event`]).
    FirstEvent,
    /// A gauge left out until first set (a fact not known yet, not a 0).
    FirstSet,
}

/// One fixed series: its family, at most one extra label, and when it is first written.
struct Row {
    slot: Slot,
    kind: Kind,
    extra: Option<(&'static str, &'static str)>,
    birth: Birth,
}

/// Where each fixed series of a connection sits in its cell table. Blocks (one row per label
/// value) are in the order of their `ALL` arrays, so `block + index` finds a value's row.
struct Layout {
    rows: Vec<Row>,
    up: usize,
    sessions_started: usize,
    session_expiries: usize,
    ping_failures: usize,
    capable: usize,
    stream_up: usize,
    stream_reconnects: usize,
    list_changed: usize,
    tools_list_requests: usize,
    walks: usize,
    pages: usize,
    tools: usize,
    cursor_errors: usize,
    loop_cap_hits: usize,
    repeated_cursors: usize,
    duplicate_tools: usize,
    long_names: usize,
    fingerprint: usize,
    drift: usize,
    tool_changes: usize,
    checks: usize,
    check_failures: usize,
    unannounced: usize,
    without_change: usize,
    ttl_violations: usize,
    rejected_tools: usize,
    listing_ttl: usize,
    listing_public: usize,
    scope_mixed: usize,
    refreshes: usize,
    refresh_failures: usize,
    last_refresh: usize,
    legacy_path: usize,
    cache_stale: usize,
    cache_promised: usize,
}

#[derive(Default)]
struct Builder {
    rows: Vec<Row>,
}

impl Builder {
    fn row(
        &mut self,
        family: &'static str,
        extra: Option<(&'static str, &'static str)>,
        birth: Birth,
    ) -> usize {
        let def = m::find(family).expect("catalog family");
        assert!(
            birth != Birth::FirstEvent || def.kind == Kind::Counter,
            "{family}: only counters are written from their first event"
        );
        assert!(
            birth != Birth::FirstSet || def.kind == Kind::Gauge,
            "{family}: only gauges wait to be set"
        );
        self.rows.push(Row {
            slot: m::slot(family),
            kind: def.kind,
            extra,
            birth,
        });
        self.rows.len() - 1
    }

    /// A series at 0 from the start.
    fn one(&mut self, family: &'static str) -> usize {
        self.row(family, None, Birth::AtStart)
    }

    /// A counter written from its first event.
    fn event(&mut self, family: &'static str) -> usize {
        self.row(family, None, Birth::FirstEvent)
    }

    /// A gauge left out until first set.
    fn absent(&mut self, family: &'static str) -> usize {
        self.row(family, None, Birth::FirstSet)
    }

    /// One row per value of `key`, all born alike; returns the first.
    fn block(
        &mut self,
        family: &'static str,
        key: &'static str,
        values: impl IntoIterator<Item = &'static str>,
        birth: Birth,
    ) -> usize {
        let first = self.rows.len();
        for v in values {
            self.row(family, Some((key, v)), birth);
        }
        first
    }
}

fn layout() -> &'static Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let mut b = Builder::default();
        let triggers = |ts: &[Trigger]| ts.iter().map(|t| t.as_str()).collect::<Vec<_>>();
        let refresh = triggers(&REFRESH_TRIGGERS);
        use Birth::{AtStart, FirstEvent};
        Layout {
            up: b.one(m::CONNECTION_UP),
            sessions_started: b.one(m::SESSIONS_STARTED),
            // McpProbeSessionExpiryStorm reads a rate held for 15 minutes.
            session_expiries: b.event(m::SESSION_EXPIRIES),
            ping_failures: b.event(m::PING_FAILURES),
            capable: b.one(m::LIST_CHANGED_CAPABLE),
            stream_up: b.one(m::STREAM_UP),
            stream_reconnects: b.event(m::STREAM_RECONNECTS),
            list_changed: b.one(m::LIST_CHANGED),
            tools_list_requests: b.one(m::TOOLS_LIST_REQUESTS),
            walks: b.block(m::WALKS, "trigger", triggers(&Trigger::ALL), FirstEvent),
            pages: b.one(m::PAGES),
            tools: b.block(m::TOOLS, "view", ["server", "cache"], AtStart),
            // McpProbeCursorErrors and McpProbePaginationLoop hold for 10 minutes.
            cursor_errors: b.event(m::CURSOR_ERRORS),
            loop_cap_hits: b.event(m::LOOP_CAP_HITS),
            repeated_cursors: b.event(m::REPEATED_CURSORS),
            // McpProbeDuplicateTools fires on the first two in 30 minutes.
            duplicate_tools: b.one(m::DUPLICATE_TOOLS),
            long_names: b.event(m::LONG_NAMES),
            fingerprint: b.block(m::FINGERPRINT, "view", ["server", "cache"], AtStart),
            drift: b.block(m::DRIFT, "kind", DRIFT_KINDS, AtStart),
            tool_changes: b.block(m::TOOL_CHANGES, "change", CHANGE_KINDS, FirstEvent),
            checks: b.one(m::CONSISTENCY_CHECKS),
            check_failures: b.event(m::CONSISTENCY_CHECK_FAILURES),
            // McpProbeUnannouncedToolChanges and McpProbeTtlPromiseBroken fire on the first.
            unannounced: b.one(m::UNANNOUNCED),
            without_change: b.event(m::WITHOUT_CHANGE),
            ttl_violations: b.one(m::TTL_VIOLATIONS),
            rejected_tools: b.event(m::REJECTED_TOOLS),
            listing_ttl: b.one(m::LISTING_TTL),
            listing_public: b.one(m::LISTING_PUBLIC),
            scope_mixed: b.event(m::SCOPE_MIXED),
            refreshes: b.block(m::REFRESHES, "trigger", refresh.clone(), FirstEvent),
            // McpProbeCacheRefreshFailing holds for 10 minutes.
            refresh_failures: b.block(m::REFRESH_FAILURES, "trigger", refresh, FirstEvent),
            last_refresh: b.one(m::LAST_REFRESH),
            legacy_path: b.absent(m::LEGACY_PATH),
            cache_stale: b.one(m::CACHE_STALE),
            cache_promised: b.absent(m::CACHE_PROMISED),
            rows: std::mem::take(&mut b.rows),
        }
    })
}

/// The state of one connection's series, owned by its target.
pub(super) struct ConnSeries {
    /// `target="…",connection="…"`, escaped once.
    labels: String,
    cells: Box<[Cell]>,
    /// Label text of `mcp_probe_session_info` while a session is open.
    info: Mutex<Option<String>>,
    requests: Lazy<&'static str, Cell>,
    request_failures: Lazy<(&'static str, &'static str), Cell>,
    walk_failures: Lazy<(&'static str, &'static str), Cell>,
    /// The other lists' series (see [`super::lists`]).
    lists: ListSeries,
}

impl ConnSeries {
    pub(super) fn new(target: &str, index: u16) -> Self {
        let cells = layout()
            .rows
            .iter()
            .map(|r| match r.birth {
                Birth::FirstSet => Cell::absent(),
                Birth::AtStart | Birth::FirstEvent => Cell::default(),
            })
            .collect();
        ConnSeries {
            labels: expo::labels([("target", target), ("connection", &index.to_string())]),
            cells,
            info: Mutex::new(None),
            requests: Lazy::default(),
            request_failures: Lazy::default(),
            walk_failures: Lazy::default(),
            lists: ListSeries::default(),
        }
    }

    fn cell(&self, i: usize) -> &Cell {
        &self.cells[i]
    }

    pub(super) fn render(&self, out: &mut Exposition) {
        let l = &self.labels;
        for (row, cell) in layout().rows.iter().zip(self.cells.iter()) {
            let value = match row.birth {
                Birth::FirstEvent => Value::from_first_event(cell),
                Birth::AtStart | Birth::FirstSet => Value::of(row.kind, cell.raw()),
            };
            if let Some(v) = value {
                let extra = row.extra.as_slice();
                out.sample(row.slot, l, extra, v);
            }
        }
        if let Some(info) = self.info.lock().expect("metrics lock poisoned").as_deref() {
            out.sample(m::slot(m::SESSION_INFO), info, &[], Value::Float(1.0));
        }
        let requests = m::slot(m::REQUESTS);
        self.requests.each(|method, c| {
            out.sample(requests, l, &[("method", method)], Value::Count(c.raw()))
        });
        let failures = m::slot(m::REQUEST_FAILURES);
        self.request_failures.each(|(method, reason), c| {
            let extra = [("method", method), ("reason", reason)];
            out.sample(failures, l, &extra, Value::Count(c.raw()))
        });
        let walk_failures = m::slot(m::WALK_FAILURES);
        self.walk_failures.each(|(trigger, reason), c| {
            let extra = [("trigger", trigger), ("reason", reason)];
            out.sample(walk_failures, l, &extra, Value::Count(c.raw()))
        });
        self.lists.render(l, out);
    }
}

/// Metrics of one (target, connection): the handle a connection task records through.
pub struct ConnMetrics {
    target: Arc<TargetMetrics>,
    index: u16,
}

impl ConnMetrics {
    pub(super) fn new(target: Arc<TargetMetrics>, index: u16) -> Self {
        ConnMetrics { target, index }
    }

    fn series(&self) -> &ConnSeries {
        self.target.conn(self.index)
    }

    fn cell(&self, i: usize) -> &Cell {
        self.series().cell(i)
    }

    /// The target's series (probes, readiness).
    pub fn target(&self) -> &TargetMetrics {
        &self.target
    }

    /// One request or notification sent by the client, with how it ended.
    pub fn request(&self, method: &'static str, elapsed: Duration, outcome: Result<(), Reason>) {
        if self.request_untimed(method, outcome) {
            self.target.request_duration(method, elapsed);
        }
    }

    /// A request counted (and its failure by reason) but not timed by method. Each round trip
    /// is timed at most once, in the histogram of what a client waits for, and a histogram is
    /// 13 series a target: the liveness check in `mcp_probe_ping_duration_seconds` (which the
    /// alerts read), a tool list's pages in its walk's `mcp_probe_tools_list_walk_duration_seconds`,
    /// and the other lists' pages not at all (the tool list's walks measure the same server).
    /// Returns whether it succeeded.
    pub fn request_untimed(&self, method: &'static str, outcome: Result<(), Reason>) -> bool {
        let s = self.series();
        s.requests.with(method, |c| c.add(1));
        if let Err(reason) = outcome {
            s.request_failures
                .with((method, reason.as_str()), |c| c.add(1));
        }
        outcome.is_ok()
    }

    pub fn session_opened(&self, era: Era, info: &ServerInfo) {
        let l = layout();
        self.cell(l.sessions_started).add(1);
        self.cell(l.capable).set_flag(info.list_changed);
        let s = self.series();
        let session = expo::labels([
            ("era", era.as_str()),
            ("protocol_version", &info.protocol_version),
            ("server_name", &info.name),
            ("server_version", &info.version),
        ]);
        *s.info.lock().expect("metrics lock poisoned") = Some(format!("{},{session}", s.labels));
    }

    /// The session is gone (failure, expiry or shutdown).
    pub fn session_closed(&self) {
        *self.series().info.lock().expect("metrics lock poisoned") = None;
        self.target.set_walk_ok(self.index, false);
        self.stream(false);
        self.set_up(false);
    }

    pub fn session_failed(&self, reason: Reason) {
        self.target.session_failed(reason);
    }

    pub fn session_expired(&self) {
        self.cell(layout().session_expiries).add(1);
    }

    pub fn set_up(&self, up: bool) {
        self.cell(layout().up).set_flag(up);
        self.target.set_connection_up(self.index, up);
    }

    pub fn ping(&self, result: Result<Duration, ()>) {
        match result {
            Ok(d) => self.target.ping_duration(d),
            Err(()) => self.cell(layout().ping_failures).add(1),
        }
    }

    pub fn stream(&self, up: bool) {
        self.cell(layout().stream_up).set_flag(up);
    }

    pub fn stream_reconnected(&self) {
        self.cell(layout().stream_reconnects).add(1);
    }

    pub fn list_changed(&self, n: u64) {
        self.cell(layout().list_changed).add(n);
    }

    pub fn tools_list_request(&self) {
        self.cell(layout().tools_list_requests).add(1);
    }

    pub fn walk_started(&self, trigger: Trigger) {
        self.cell(layout().walks + trigger.index()).add(1);
    }

    /// A walk ended; records its anomalies and, when it completed, the server view.
    pub fn walk_finished(&self, trigger: Trigger, report: &WalkReport, elapsed: Duration) {
        let l = layout();
        self.cell(l.duplicate_tools)
            .add(u64::from(report.duplicates));
        self.cell(l.long_names).add(u64::from(report.long_names));
        self.cell(l.rejected_tools).add(u64::from(report.rejected));
        self.target.set_walk_ok(self.index, report.result.is_ok());
        match &report.result {
            Ok(walk) => {
                self.target.walk_duration(elapsed);
                self.cell(l.pages).set(f64::from(walk.pages));
                self.cell(l.tools).set(walk.items.len() as f64);
                self.cell(l.fingerprint)
                    .set(walk.items.fingerprint() as f64);
                let cache = walk.cache.unwrap_or_default();
                self.cell(l.listing_ttl).set(cache.hint.ttl.as_secs_f64());
                self.cell(l.listing_public).set_flag(cache.hint.public);
                if cache.mixed_scope {
                    self.cell(l.scope_mixed).add(1);
                }
            }
            Err(e) => {
                if e.is_cursor_error() {
                    self.cell(l.cursor_errors).add(1);
                }
                match e {
                    WalkError::LoopCap => self.cell(l.loop_cap_hits).add(1),
                    WalkError::RepeatedCursor => self.cell(l.repeated_cursors).add(1),
                    _ => {}
                }
                self.series()
                    .walk_failures
                    .with((trigger.as_str(), e.reason()), |c| c.add(1));
            }
        }
    }

    pub fn cache_view(&self, cache: &ItemSet) {
        let l = layout();
        self.cell(l.tools + 1).set(cache.len() as f64);
        self.cell(l.fingerprint + 1).set(cache.fingerprint() as f64);
    }

    pub fn drift(&self, drift: &Drift) {
        let counts = [drift.missing.len(), drift.extra.len(), drift.changed.len()];
        for (i, n) in counts.into_iter().enumerate() {
            self.cell(layout().drift + i).set(n as f64);
        }
    }

    /// Tool changes between two listings, counted per [`CHANGE_KINDS`].
    pub fn tool_changes(&self, counts: [u64; 5]) {
        for (i, n) in counts.into_iter().enumerate() {
            self.cell(layout().tool_changes + i).add(n);
        }
    }

    pub fn consistency_check(&self, completed: bool) {
        let l = layout();
        self.cell(l.checks).add(1);
        if !completed {
            self.cell(l.check_failures).add(1);
        }
    }

    pub fn unannounced_change(&self) {
        self.cell(layout().unannounced).add(1);
    }

    /// What a legacy-era client of this modern server hears (`None`: not served, no series).
    pub fn legacy_path(&self, hears: Option<bool>) {
        if let Some(hears) = hears {
            self.cell(layout().legacy_path).set_flag(hears);
        }
    }

    /// The contract's verdict: whether the server promises anything, and whether a promise is
    /// broken now.
    pub fn contract(&self, promised: bool, stale: bool) {
        let l = layout();
        self.cell(l.cache_promised).set_flag(promised);
        self.cell(l.cache_stale).set_flag(stale);
    }

    pub fn ttl_violation(&self) {
        self.cell(layout().ttl_violations).add(1);
    }

    pub fn list_changed_without_change(&self) {
        self.cell(layout().without_change).add(1);
    }

    /// `list` (a list other than the tools) is no longer watched: its series disappear. They
    /// appear with its first listing that holds an item.
    pub fn list_unwatched(&self, list: List) {
        self.series().lists.unwatch(list);
    }

    /// Notifications announcing a change to `list` (the tools' are [`Self::list_changed`]).
    pub fn list_notifications(&self, list: List, n: u64) {
        self.series().lists.with(list, |c| c.notifications(n));
    }

    /// A walk of `list` ended.
    pub fn list_walk_finished(&self, list: List, report: &WalkReport) {
        let lists = &self.series().lists;
        if report.result.as_ref().is_ok_and(|w| !w.items.is_empty()) {
            lists.listed(list);
        }
        lists.with(list, |c| match &report.result {
            Ok(walk) => c.server_view(&walk.items),
            Err(e) => c.walk_failed(e.reason()),
        });
    }

    pub fn list_cache_view(&self, list: List, cache: &ItemSet) {
        self.series().lists.with(list, |c| c.cache_view(cache));
    }

    pub fn list_drift(&self, list: List, drift: &Drift) {
        self.series().lists.with(list, |c| c.drift(drift));
    }

    /// Item changes of `list` between two listings, counted per [`CHANGE_KINDS`].
    pub fn list_changes(&self, list: List, counts: [u64; 5]) {
        self.series().lists.with(list, |c| c.changes(counts));
    }

    pub fn list_unannounced(&self, list: List) {
        self.series().lists.with(list, |c| c.unannounced());
    }

    pub fn list_ttl_violation(&self, list: List) {
        self.series().lists.with(list, |c| c.ttl_violation());
    }

    pub fn list_stale(&self, list: List, stale: bool) {
        self.series().lists.with(list, |c| c.stale(stale));
    }

    pub fn cache_refresh(&self, trigger: Trigger, ok: bool) {
        let Some(i) = REFRESH_TRIGGERS.iter().position(|t| *t == trigger) else {
            return;
        };
        let l = layout();
        if ok {
            self.cell(l.refreshes + i).add(1);
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            self.cell(l.last_refresh).set(now.as_secs_f64());
        } else {
            self.cell(l.refresh_failures + i).add(1);
        }
    }
}
