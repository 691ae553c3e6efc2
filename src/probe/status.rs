//! What each connection is doing, for a person during an incident: the status page (`/`) and
//! `/status.json`.
//!
//! Metrics say *that* a cache is stale; this says *which tools* and *what happened when*. Each
//! connection keeps its state, its last walk, the drift by tool name and a bounded timeline of
//! events — list_changed received, walk started and finished, cache replaced, reconnects,
//! errors — so "the notification never arrived" and "it arrived but the re-list failed" read
//! differently. Everything here is bounded (events, names per drift kind, detail length) and
//! nothing here holds a secret: URLs are redacted, error details never carry header values.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::Trigger;
use super::catalog::{Drift, ToolSet};
use crate::config::{TargetConfig, redact_url};
use crate::mcp::{Era, ServerInfo};

/// Events kept per connection; older ones are dropped.
pub const EVENTS_PER_CONNECTION: usize = 100;
/// Tool names kept per drift kind; the rest are counted.
pub const MAX_DRIFT_NAMES: usize = 100;
/// Longest event or error detail kept.
const MAX_DETAIL: usize = 300;

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn bounded(s: &str) -> String {
    if s.len() <= MAX_DETAIL {
        return s.to_string();
    }
    let mut end = MAX_DETAIL;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

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

/// The negotiated session.
#[derive(Debug, Clone, Serialize)]
pub struct SessionStatus {
    pub era: &'static str,
    pub protocol_version: String,
    pub server_name: String,
    pub server_version: String,
    pub opened_at: String,
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
    pub finished_at: String,
    pub complete: bool,
    /// Pages fetched (requests sent, when incomplete).
    pub pages: u32,
    /// Tools listed (absent when incomplete).
    pub tools: Option<usize>,
    pub duration_seconds: f64,
    /// Why it did not complete (`reason: detail`).
    pub error: Option<String>,
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
    /// Names left out because a kind had more than [`MAX_DRIFT_NAMES`].
    pub omitted: usize,
}

impl DriftStatus {
    fn from(d: &Drift) -> Self {
        let mut omitted = 0;
        let mut take = |names: &[String]| {
            omitted += names.len().saturating_sub(MAX_DRIFT_NAMES);
            names.iter().take(MAX_DRIFT_NAMES).cloned().collect()
        };
        DriftStatus {
            missing: take(&d.missing),
            extra: take(&d.extra),
            changed: take(&d.changed),
            omitted,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.changed.is_empty()
    }
}

/// What the connection's client holds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CacheStatus {
    pub tools: Option<usize>,
    pub replaced_at: Option<String>,
    pub replaced_by: Option<&'static str>,
}

/// One entry of the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub at: String,
    /// `session_opened`, `session_failed`, `session_expired`, `session_closed`, `stream_opened`,
    /// `stream_lost`, `list_changed`, `walk_started`, `walk_finished`, `walk_failed`,
    /// `cache_replaced`, `drift`, `unannounced_change`, `ping_failed`, `probe_passed`,
    /// `probe_failed`.
    pub kind: &'static str,
    pub detail: String,
}

/// One connection.
#[derive(Debug, Clone, Serialize)]
pub struct ConnStatus {
    pub connection: u16,
    pub state: ConnState,
    pub state_since: String,
    pub session: Option<SessionStatus>,
    pub notification_stream: bool,
    pub list_changed_received: u64,
    pub last_walk: Option<WalkStatus>,
    pub cache: CacheStatus,
    pub drift: DriftStatus,
    /// Oldest first.
    pub events: VecDeque<Event>,
}

/// The last run of a functional probe.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeStatus {
    pub tool: String,
    pub interval_seconds: f64,
    pub last_run_at: Option<String>,
    pub success: bool,
    /// Failure reason label (`unknown_tool`, `side_effect_guard`, …).
    pub reason: Option<&'static str>,
    pub detail: Option<String>,
    pub duration_seconds: Option<f64>,
}

/// One target.
#[derive(Debug, Serialize)]
pub struct TargetStatus {
    pub name: String,
    /// Redacted.
    pub url: String,
    pub connections: Vec<Mutex<ConnStatus>>,
    pub probes: Mutex<Vec<ProbeStatus>>,
}

impl TargetStatus {
    fn new(t: &TargetConfig) -> Self {
        let at = now();
        TargetStatus {
            name: t.name.clone(),
            url: redact_url(&t.url),
            connections: (0..t.connections)
                .map(|i| {
                    Mutex::new(ConnStatus {
                        connection: i,
                        state: ConnState::Connecting,
                        state_since: at.clone(),
                        session: None,
                        notification_stream: false,
                        list_changed_received: 0,
                        last_walk: None,
                        cache: CacheStatus::default(),
                        drift: DriftStatus::default(),
                        events: VecDeque::new(),
                    })
                })
                .collect(),
            probes: Mutex::new(
                t.probes
                    .iter()
                    .map(|p| ProbeStatus {
                        tool: p.tool.clone(),
                        interval_seconds: p.interval.as_secs_f64(),
                        last_run_at: None,
                        success: false,
                        reason: None,
                        detail: None,
                        duration_seconds: None,
                    })
                    .collect(),
            ),
        }
    }

    /// A handle for connection `index`.
    pub fn connection(self: &Arc<Self>, index: u16) -> ConnStatusHandle {
        ConnStatusHandle {
            target: self.clone(),
            index,
        }
    }
}

/// Every running target, as the supervisor started them.
#[derive(Debug, Default)]
pub struct StatusBoard {
    targets: RwLock<BTreeMap<String, Arc<TargetStatus>>>,
}

/// `/status.json`.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    pub version: &'static str,
    pub generated_at: String,
    pub targets: Vec<TargetSnapshot>,
}

#[derive(Debug, Serialize)]
pub struct TargetSnapshot {
    pub name: String,
    pub url: String,
    pub connections: Vec<ConnStatus>,
    pub probes: Vec<ProbeStatus>,
}

impl StatusBoard {
    pub fn add(&self, t: &TargetConfig) -> Arc<TargetStatus> {
        let s = Arc::new(TargetStatus::new(t));
        self.targets
            .write()
            .expect("status lock poisoned")
            .insert(t.name.clone(), s.clone());
        s
    }

    pub fn remove(&self, name: &str) {
        self.targets
            .write()
            .expect("status lock poisoned")
            .remove(name);
    }

    /// A consistent copy of everything, targets sorted by name.
    pub fn snapshot(&self) -> Snapshot {
        let targets: Vec<Arc<TargetStatus>> = self
            .targets
            .read()
            .expect("status lock poisoned")
            .values()
            .cloned()
            .collect();
        Snapshot {
            version: env!("CARGO_PKG_VERSION"),
            generated_at: now(),
            targets: targets
                .iter()
                .map(|t| TargetSnapshot {
                    name: t.name.clone(),
                    url: t.url.clone(),
                    connections: t
                        .connections
                        .iter()
                        .map(|c| c.lock().expect("status lock poisoned").clone())
                        .collect(),
                    probes: t.probes.lock().expect("status lock poisoned").clone(),
                })
                .collect(),
        }
    }
}

/// What one connection task writes through.
pub struct ConnStatusHandle {
    target: Arc<TargetStatus>,
    index: u16,
}

impl ConnStatusHandle {
    fn with<R>(&self, f: impl FnOnce(&mut ConnStatus) -> R) -> Option<R> {
        self.target
            .connections
            .get(self.index as usize)
            .map(|c| f(&mut c.lock().expect("status lock poisoned")))
    }

    fn push(s: &mut ConnStatus, kind: &'static str, detail: String) {
        if s.events.len() >= EVENTS_PER_CONNECTION {
            s.events.pop_front();
        }
        s.events.push_back(Event {
            at: now(),
            kind,
            detail: bounded(&detail),
        });
    }

    /// Append a timeline entry.
    pub fn event(&self, kind: &'static str, detail: impl Into<String>) {
        let detail = detail.into();
        self.with(|s| Self::push(s, kind, detail));
    }

    pub fn state(&self, state: ConnState) {
        self.with(|s| {
            if s.state != state {
                s.state = state;
                s.state_since = now();
            }
        });
    }

    pub fn session_opened(&self, era: Era, info: &ServerInfo, trigger: Trigger) {
        self.with(|s| {
            s.session = Some(SessionStatus {
                era: era.as_str(),
                protocol_version: info.protocol_version.clone(),
                server_name: info.name.clone(),
                server_version: info.version.clone(),
                opened_at: now(),
                capabilities: Capabilities {
                    tools: info.tools,
                    list_changed: info.list_changed,
                },
            });
            let detail = format!(
                "protocol {}, listChanged {}{}",
                info.protocol_version,
                info.list_changed,
                if trigger == Trigger::Reconnect {
                    " (reconnect: re-listing)"
                } else {
                    ""
                }
            );
            Self::push(s, "session_opened", detail);
        });
        // Up only once the session answers a request after initialize (the connection says so).
    }

    /// The session ended (`kind` = `session_expired`, `session_closed`, …) or failed to open.
    pub fn session_ended(&self, kind: &'static str, detail: impl Into<String>) {
        let detail = detail.into();
        self.with(|s| {
            s.session = None;
            s.notification_stream = false;
            Self::push(s, kind, detail);
        });
        self.state(ConnState::Down);
    }

    pub fn stream(&self, up: bool, detail: &str) {
        self.with(|s| {
            if s.notification_stream != up {
                s.notification_stream = up;
                let kind = if up { "stream_opened" } else { "stream_lost" };
                Self::push(s, kind, detail.to_string());
            }
        });
    }

    pub fn list_changed(&self, n: u64) {
        self.with(|s| {
            s.list_changed_received += n;
            Self::push(s, "list_changed", format!("{n} notification(s) received"));
        });
    }

    pub fn walk_started(&self, trigger: Trigger) {
        // Audits run all the time; only their outcome is worth a line when it matters.
        if trigger != Trigger::Audit {
            self.event("walk_started", format!("trigger {}", trigger.as_str()));
        }
    }

    /// A walk ended; `Ok((pages, tools))` or `Err((requests, reason: detail))`.
    pub fn walk_finished(
        &self,
        trigger: Trigger,
        result: Result<(u32, usize), (u32, String)>,
        elapsed: Duration,
    ) {
        self.with(|s| {
            let (pages, tools, error) = match &result {
                Ok((p, t)) => (*p, Some(*t), None),
                Err((p, e)) => (*p, None, Some(bounded(e))),
            };
            s.last_walk = Some(WalkStatus {
                trigger: trigger.as_str(),
                finished_at: now(),
                complete: error.is_none(),
                pages,
                tools,
                duration_seconds: elapsed.as_secs_f64(),
                error: error.clone(),
            });
            match error {
                Some(e) => Self::push(
                    s,
                    "walk_failed",
                    format!("trigger {}: {e}", trigger.as_str()),
                ),
                None if trigger != Trigger::Audit => Self::push(
                    s,
                    "walk_finished",
                    format!(
                        "trigger {}: {pages} page(s), {} tools in {:.0} ms",
                        trigger.as_str(),
                        tools.unwrap_or(0),
                        elapsed.as_secs_f64() * 1000.0
                    ),
                ),
                None => {}
            }
        });
    }

    pub fn cache_replaced(&self, trigger: Trigger, tools: &ToolSet) {
        self.with(|s| {
            s.cache = CacheStatus {
                tools: Some(tools.len()),
                replaced_at: Some(now()),
                replaced_by: Some(trigger.as_str()),
            };
            Self::push(
                s,
                "cache_replaced",
                format!("{} tools after {} walk", tools.len(), trigger.as_str()),
            );
        });
    }

    /// The drift after a walk; a change of drift is a timeline entry.
    pub fn drift(&self, drift: &Drift) {
        let d = DriftStatus::from(drift);
        self.with(|s| {
            let changed = s.drift.missing != d.missing
                || s.drift.extra != d.extra
                || s.drift.changed != d.changed;
            if changed {
                let detail = if d.is_empty() {
                    "cache matches the server again".to_string()
                } else {
                    format!(
                        "missing [{}] extra [{}] changed [{}]",
                        d.missing.join(", "),
                        d.extra.join(", "),
                        d.changed.join(", ")
                    )
                };
                Self::push(s, "drift", detail);
            }
            s.drift = d;
        });
    }

    /// A probe of this target ran (connection 0 runs them). Pass/fail flips are timeline
    /// entries; steady results are not.
    pub fn probe(
        &self,
        index: usize,
        elapsed: Duration,
        result: Result<(), (&'static str, String)>,
    ) {
        let mut probes = self.target.probes.lock().expect("status lock poisoned");
        let Some(p) = probes.get_mut(index) else {
            return;
        };
        let was = (p.last_run_at.is_some(), p.success, p.reason);
        p.last_run_at = Some(now());
        p.duration_seconds = Some(elapsed.as_secs_f64());
        p.success = result.is_ok();
        (p.reason, p.detail) = match &result {
            Ok(()) => (None, None),
            Err((r, d)) => (Some(*r), Some(bounded(d))),
        };
        let flipped = was != (true, p.success, p.reason);
        let line = match &result {
            Ok(()) => ("probe_passed", p.tool.clone()),
            Err((r, d)) => ("probe_failed", format!("{}: {r}: {}", p.tool, bounded(d))),
        };
        drop(probes);
        if flipped {
            self.event(line.0, line.1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Expect, ProbeConfig, ProtocolChoice};

    fn target() -> TargetConfig {
        TargetConfig {
            name: "kb".into(),
            url: "https://user:pw@kb.example/mcp?key=k".parse().unwrap(),
            protocol_version: ProtocolChoice::Auto,
            headers: vec![],
            connections: 1,
            audit_interval: Duration::from_secs(30),
            ping_interval: Duration::from_secs(15),
            request_timeout: Duration::from_secs(10),
            notification_grace: Duration::from_secs(5),
            max_pages: 64,
            max_listing_bytes: crate::config::DEFAULT_MAX_LISTING_BYTES,
            probes: vec![ProbeConfig {
                tool: "kb_stats".into(),
                arguments: Default::default(),
                interval: Duration::from_secs(60),
                timeout: Duration::from_secs(5),
                expect: Expect::default(),
                allow_side_effects: false,
            }],
        }
    }

    #[test]
    fn events_are_bounded_and_urls_redacted() {
        let board = StatusBoard::default();
        let t = board.add(&target());
        let c = t.connection(0);
        for i in 0..(EVENTS_PER_CONNECTION + 10) {
            c.event("list_changed", format!("n{i}"));
        }
        c.event("walk_failed", "x".repeat(10_000));
        let snap = board.snapshot();
        let conn = &snap.targets[0].connections[0];
        assert_eq!(conn.events.len(), EVENTS_PER_CONNECTION);
        assert_eq!(conn.events[0].detail, "n11");
        assert!(conn.events.back().unwrap().detail.len() <= MAX_DETAIL + 3);
        let json = serde_json::to_string(&snap).unwrap();
        assert!(!json.contains("pw@") && !json.contains("key=k"), "{json}");
    }

    #[test]
    fn drift_names_are_capped_and_changes_logged_once() {
        let board = StatusBoard::default();
        let c = board.add(&target()).connection(0);
        let drift = Drift {
            extra: (0..150).map(|i| format!("t{i}")).collect(),
            ..Drift::default()
        };
        c.drift(&drift);
        c.drift(&drift);
        let conn = &board.snapshot().targets[0].connections[0];
        assert_eq!(conn.drift.extra.len(), MAX_DRIFT_NAMES);
        assert_eq!(conn.drift.omitted, 50);
        assert_eq!(conn.events.iter().filter(|e| e.kind == "drift").count(), 1);
    }

    #[test]
    fn probe_flips_are_logged_steady_results_are_not() {
        let board = StatusBoard::default();
        let c = board.add(&target()).connection(0);
        let ms = Duration::from_millis(3);
        c.probe(0, ms, Ok(()));
        c.probe(0, ms, Ok(()));
        c.probe(0, ms, Err(("unknown_tool", "gone".into())));
        c.probe(0, ms, Err(("unknown_tool", "gone".into())));
        let snap = board.snapshot();
        let kinds: Vec<_> = snap.targets[0].connections[0]
            .events
            .iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, ["probe_passed", "probe_failed"]);
        assert_eq!(snap.targets[0].probes[0].reason, Some("unknown_tool"));
    }
}
