//! The handles one connection task records through.
//!
//! Series with fixed label values are registered up front (so they exist at 0 from the start,
//! as Prometheus conventions ask), and so is `mcp_probe_session_failures_total` for every
//! reason; the other series labelled by `reason` or `method` are registered on first use, since
//! most of their combinations never happen.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metrics::{Counter, Gauge, Histogram, Recorder};

use super::catalog as m;
use super::{METADATA, TargetMetrics, key};
use crate::mcp::{Era, Reason, ServerInfo};
use crate::probe::Trigger;
use crate::probe::toolset::{Drift, ToolSet};
use crate::probe::walker::{WalkError, WalkReport};

/// Metrics of one (target, connection).
pub struct ConnMetrics {
    target: Arc<TargetMetrics>,
    index: u16,
    up: Gauge,
    sessions_started: Counter,
    session_expiries: Counter,
    ping_duration: Histogram,
    ping_failures: Counter,
    capable: Gauge,
    stream_up: Gauge,
    stream_reconnects: Counter,
    list_changed: Counter,
    tools_list_requests: Counter,
    walks: [Counter; 5],
    walk_duration: Histogram,
    pages: Gauge,
    tools_server: Gauge,
    tools_cache: Gauge,
    cursor_errors: Counter,
    loop_cap_hits: Counter,
    repeated_cursors: Counter,
    duplicate_tools: Counter,
    long_names: Counter,
    fp_server: Gauge,
    fp_cache: Gauge,
    drift: [Gauge; 3],
    checks: Counter,
    check_failures: Counter,
    unannounced: Counter,
    without_change: Counter,
    ttl_violations: Counter,
    rejected_tools: Counter,
    listing_ttl: Gauge,
    listing_public: Gauge,
    scope_mixed: Counter,
    refreshes: [Counter; 4],
    refresh_failures: [Counter; 4],
    last_refresh: Gauge,
}

const REFRESH_TRIGGERS: [Trigger; 4] = [
    Trigger::Initial,
    Trigger::Notification,
    Trigger::Reconnect,
    Trigger::StreamGap,
];

impl ConnMetrics {
    pub(super) fn new(target: Arc<TargetMetrics>, index: u16) -> Self {
        let base = vec![
            ("target", target.name.clone()),
            ("connection", index.to_string()),
        ];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut l = base.clone();
            l.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
            l
        };
        let r = &target.recorder;
        let counter = |name, extra: &[(&'static str, &'static str)]| {
            let c = r.register_counter(&key(name, &with(extra)), &METADATA);
            c.absolute(0);
            c
        };
        let gauge = |name, extra: &[(&'static str, &'static str)]| {
            let g = r.register_gauge(&key(name, &with(extra)), &METADATA);
            g.set(0.0);
            g
        };
        let histogram = |name| target.histogram(&key(name, &with(&[])));
        // Sessions can fail for any reason of the fixed set: every series exists from the start,
        // so dashboards and alerts see 0, not "no data" (other failure series are lazy: their
        // method x reason x trigger combinations would multiply the series per connection).
        for reason in Reason::ALL {
            let _ = counter(m::SESSION_FAILURES, &[("reason", reason.as_str())]);
        }
        let by_trigger = |name, t: Trigger| counter(name, &[("trigger", t.as_str())]);
        ConnMetrics {
            up: gauge(m::CONNECTION_UP, &[]),
            sessions_started: counter(m::SESSIONS_STARTED, &[]),
            session_expiries: counter(m::SESSION_EXPIRIES, &[]),
            ping_duration: histogram(m::PING_DURATION),
            ping_failures: counter(m::PING_FAILURES, &[]),
            capable: gauge(m::LIST_CHANGED_CAPABLE, &[]),
            stream_up: gauge(m::STREAM_UP, &[]),
            stream_reconnects: counter(m::STREAM_RECONNECTS, &[]),
            list_changed: counter(m::LIST_CHANGED, &[]),
            tools_list_requests: counter(m::TOOLS_LIST_REQUESTS, &[]),
            walks: Trigger::ALL.map(|t| by_trigger(m::WALKS, t)),
            walk_duration: histogram(m::WALK_DURATION),
            pages: gauge(m::PAGES, &[]),
            tools_server: gauge(m::TOOLS, &[("view", "server")]),
            tools_cache: gauge(m::TOOLS, &[("view", "cache")]),
            cursor_errors: counter(m::CURSOR_ERRORS, &[]),
            loop_cap_hits: counter(m::LOOP_CAP_HITS, &[]),
            repeated_cursors: counter(m::REPEATED_CURSORS, &[]),
            duplicate_tools: counter(m::DUPLICATE_TOOLS, &[]),
            long_names: counter(m::LONG_NAMES, &[]),
            fp_server: gauge(m::FINGERPRINT, &[("view", "server")]),
            fp_cache: gauge(m::FINGERPRINT, &[("view", "cache")]),
            drift: ["missing", "extra", "changed"].map(|k| gauge(m::DRIFT, &[("kind", k)])),
            checks: counter(m::CONSISTENCY_CHECKS, &[]),
            check_failures: counter(m::CONSISTENCY_CHECK_FAILURES, &[]),
            unannounced: counter(m::UNANNOUNCED, &[]),
            without_change: counter(m::WITHOUT_CHANGE, &[]),
            ttl_violations: counter(m::TTL_VIOLATIONS, &[]),
            rejected_tools: counter(m::REJECTED_TOOLS, &[]),
            listing_ttl: gauge(m::LISTING_TTL, &[]),
            listing_public: gauge(m::LISTING_PUBLIC, &[]),
            scope_mixed: counter(m::SCOPE_MIXED, &[]),
            refreshes: REFRESH_TRIGGERS.map(|t| by_trigger(m::REFRESHES, t)),
            refresh_failures: REFRESH_TRIGGERS.map(|t| by_trigger(m::REFRESH_FAILURES, t)),
            last_refresh: gauge(m::LAST_REFRESH, &[]),
            target,
            index,
        }
    }

    /// The target's series (probes, readiness).
    pub fn target(&self) -> &TargetMetrics {
        &self.target
    }

    fn labels(&self, extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        let mut l = vec![
            ("target", self.target.name.clone()),
            ("connection", self.index.to_string()),
        ];
        l.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        l
    }

    fn lazy_counter(&self, name: &'static str, extra: &[(&'static str, &str)]) -> Counter {
        self.target
            .recorder
            .register_counter(&key(name, &self.labels(extra)), &METADATA)
    }

    /// One request or notification sent by the client, with how it ended.
    pub fn request(&self, method: &'static str, elapsed: Duration, outcome: Result<(), Reason>) {
        self.lazy_counter(m::REQUESTS, &[("method", method)])
            .increment(1);
        match outcome {
            Ok(()) => self
                .target
                .histogram(&key(
                    m::REQUEST_DURATION,
                    &self.labels(&[("method", method)]),
                ))
                .record(elapsed.as_secs_f64()),
            Err(reason) => self
                .lazy_counter(
                    m::REQUEST_FAILURES,
                    &[("method", method), ("reason", reason.as_str())],
                )
                .increment(1),
        }
    }

    pub fn session_opened(&self, era: Era, info: &ServerInfo) {
        self.sessions_started.increment(1);
        self.capable.set(if info.list_changed { 1.0 } else { 0.0 });
        self.target.set_info(
            self.index,
            Some(self.labels(&[
                ("era", era.as_str()),
                ("protocol_version", &info.protocol_version),
                ("server_name", &info.name),
                ("server_version", &info.version),
            ])),
        );
    }

    /// The session is gone (failure, expiry or shutdown).
    pub fn session_closed(&self) {
        self.target.set_info(self.index, None);
        self.target.set_walk_ok(self.index, false);
        self.stream(false);
        self.set_up(false);
    }

    pub fn session_failed(&self, reason: Reason) {
        self.lazy_counter(m::SESSION_FAILURES, &[("reason", reason.as_str())])
            .increment(1);
    }

    pub fn session_expired(&self) {
        self.session_expiries.increment(1);
    }

    pub fn set_up(&self, up: bool) {
        self.up.set(if up { 1.0 } else { 0.0 });
        self.target.set_connection_up(self.index, up);
    }

    pub fn ping(&self, result: Result<Duration, ()>) {
        match result {
            Ok(d) => self.ping_duration.record(d.as_secs_f64()),
            Err(()) => self.ping_failures.increment(1),
        }
    }

    pub fn stream(&self, up: bool) {
        self.stream_up.set(if up { 1.0 } else { 0.0 });
    }

    pub fn stream_reconnected(&self) {
        self.stream_reconnects.increment(1);
    }

    pub fn list_changed(&self, n: u64) {
        self.list_changed.increment(n);
    }

    pub fn tools_list_request(&self) {
        self.tools_list_requests.increment(1);
    }

    pub fn walk_started(&self, trigger: Trigger) {
        self.walks[trigger.index()].increment(1);
    }

    /// A walk ended; records its anomalies and, when it completed, the server view.
    pub fn walk_finished(&self, trigger: Trigger, report: &WalkReport, elapsed: Duration) {
        self.duplicate_tools.increment(u64::from(report.duplicates));
        self.long_names.increment(u64::from(report.long_names));
        self.rejected_tools.increment(u64::from(report.rejected));
        self.target.set_walk_ok(self.index, report.result.is_ok());
        match &report.result {
            Ok(walk) => {
                self.walk_duration.record(elapsed.as_secs_f64());
                self.pages.set(f64::from(walk.pages));
                self.tools_server.set(walk.tools.len() as f64);
                self.fp_server.set(walk.tools.fingerprint() as f64);
                let cache = walk.cache.unwrap_or_default();
                self.listing_ttl.set(cache.hint.ttl.as_secs_f64());
                self.listing_public
                    .set(if cache.hint.public { 1.0 } else { 0.0 });
                if cache.mixed_scope {
                    self.scope_mixed.increment(1);
                }
            }
            Err(e) => {
                if e.is_cursor_error() {
                    self.cursor_errors.increment(1);
                }
                match e {
                    WalkError::LoopCap => self.loop_cap_hits.increment(1),
                    WalkError::RepeatedCursor => self.repeated_cursors.increment(1),
                    _ => {}
                }
                self.lazy_counter(
                    m::WALK_FAILURES,
                    &[("trigger", trigger.as_str()), ("reason", e.reason())],
                )
                .increment(1);
            }
        }
    }

    pub fn cache_view(&self, cache: &ToolSet) {
        self.tools_cache.set(cache.len() as f64);
        self.fp_cache.set(cache.fingerprint() as f64);
    }

    pub fn drift(&self, drift: &Drift) {
        for (g, n) in
            self.drift
                .iter()
                .zip([drift.missing.len(), drift.extra.len(), drift.changed.len()])
        {
            g.set(n as f64);
        }
    }

    pub fn consistency_check(&self, completed: bool) {
        self.checks.increment(1);
        if !completed {
            self.check_failures.increment(1);
        }
    }

    pub fn unannounced_change(&self) {
        self.unannounced.increment(1);
    }

    /// What a legacy-era client of this modern server hears (`None`: not served, no series).
    pub fn legacy_path(&self, hears: Option<bool>) {
        if let Some(hears) = hears {
            self.target
                .recorder
                .register_gauge(&key(m::LEGACY_PATH, &self.labels(&[])), &METADATA)
                .set(if hears { 1.0 } else { 0.0 });
        }
    }

    pub fn ttl_violation(&self) {
        self.ttl_violations.increment(1);
    }

    pub fn list_changed_without_change(&self) {
        self.without_change.increment(1);
    }

    pub fn cache_refresh(&self, trigger: Trigger, ok: bool) {
        let Some(i) = REFRESH_TRIGGERS.iter().position(|t| *t == trigger) else {
            return;
        };
        if ok {
            self.refreshes[i].increment(1);
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            self.last_refresh.set(now.as_secs_f64());
        } else {
            self.refresh_failures[i].increment(1);
        }
    }
}
