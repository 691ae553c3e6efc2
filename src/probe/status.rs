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
//! (tool names, server name and version, error and event details) passes [`crate::text::bounded`]
//! (a byte cap, control and bidi characters escaped), names per drift kind and events per
//! connection are capped in count, and the rendered page and JSON have a byte cap of their own
//! ([`MAX_RESPONSE_BYTES`]). Nothing here holds a secret: URLs are redacted, error details never
//! carry header values.

mod json;
pub mod verdict;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::Trigger;
use super::changes::{PinsView, TargetChanges, ToolChange};
use super::contract::Contract;
use super::legacy_watch::LegacyVerdict;
use super::toolset::{Drift, ToolSet};
use crate::config::TargetConfig;
use crate::mcp::{Era, ServerInfo};
use crate::text;
pub use verdict::Severity;

/// Tool changes kept per connection (the newest); each shows at most
/// [`crate::probe::changes::SHOWN_FINDINGS`] findings of a few hundred bytes.
pub const CHANGES_PER_CONNECTION: usize = 10;
/// Events kept per connection; older ones are dropped.
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

fn now() -> String {
    stamp(SystemTime::now())
}

fn stamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// A server-supplied string as it is kept: at most `max` bytes, control and bidi characters
/// escaped.
fn keep(s: &str, max: usize) -> String {
    text::bounded(s, max).into_owned()
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
    fn from(d: &Drift) -> Self {
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
    fn cut(&mut self, n: usize) {
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
    pub replaced_at: Option<String>,
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
    pub broken_since: Option<String>,
}

/// What a 2025-era client of this modern server hears (connection 0 of a modern session).
#[derive(Debug, Clone, Serialize)]
pub struct LegacyClientsStatus {
    /// `true`, `false`, or absent until measured (as `mcp_probe_legacy_path_hears_changes`).
    pub hears: Option<bool>,
    /// `declares_none`, `no_stream`, `stream_silent`, `delivered`, `untested` or `not_served`.
    pub cause: &'static str,
    pub detail: &'static str,
    pub at: String,
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
    /// Since when the cache has differed from the server; absent while it matches.
    pub stale_since: Option<String>,
    /// The server's promise to caching clients, and whether it is broken now.
    pub contract: ContractStatus,
    /// What a 2025-era client of this modern server hears; absent where not measured.
    pub legacy_clients: Option<LegacyClientsStatus>,
    /// Refresh walks (every trigger but `audit`) that failed since the cache was last replaced.
    pub refresh_failures: u32,
    /// The newest tool changes between two listings, with their classified differences
    /// (oldest first, at most [`CHANGES_PER_CONNECTION`]).
    pub changes: VecDeque<ToolChangeStatus>,
    /// The latest event of each kind, kept when the timeline has scrolled past it.
    pub last_events: BTreeMap<&'static str, Event>,
    /// Oldest first.
    pub events: VecDeque<Event>,
}

impl ConnStatus {
    fn new(connection: u16, at: &str) -> Self {
        ConnStatus {
            connection,
            state: ConnState::Connecting,
            state_since: at.to_string(),
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
            changes: VecDeque::new(),
            last_events: BTreeMap::new(),
            events: VecDeque::new(),
        }
    }

    /// The latest event of `kind`.
    pub fn last(&self, kind: &str) -> Option<&Event> {
        self.last_events.get(kind)
    }

    /// Keep the newest `events` entries and `names` names per drift kind: the light form
    /// `/status.json` falls back to when the whole does not fit.
    fn trim(&mut self, events: usize, names: usize) {
        let drop = self.events.len().saturating_sub(events);
        self.events.drain(..drop);
        self.drift.cut(names);
        let drop = self
            .changes
            .len()
            .saturating_sub(names.min(CHANGES_PER_CONNECTION));
        self.changes.drain(..drop);
    }
}

/// One tool change as the status page keeps it: when, and the classified difference.
#[derive(Debug, Clone, Serialize)]
pub struct ToolChangeStatus {
    pub at: String,
    #[serde(flatten)]
    pub change: ToolChange,
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

/// When the target's judgement last changed: the sticky "since" facts.
#[derive(Debug, Clone)]
struct Since {
    up: (bool, String),
    ready: (bool, String),
    severity: (Severity, String),
}

impl Since {
    fn update(&mut self, v: &verdict::Verdict, at: &str) {
        fn flip<T: PartialEq>(slot: &mut (T, String), value: T, at: &str) {
            if slot.0 != value {
                *slot = (value, at.to_string());
            }
        }
        flip(&mut self.up, v.up, at);
        flip(&mut self.ready, v.ready, at);
        flip(&mut self.severity, v.severity, at);
    }

    /// When the condition `severity` names began: down since the target stopped being up, not
    /// ready since it stopped being ready, stale since the first connection's cache fell
    /// behind; otherwise since the target reached this severity.
    fn of(&self, severity: Severity, conns: &[&ConnStatus]) -> String {
        match severity {
            Severity::Down => self.up.1.clone(),
            Severity::NotReady => self.ready.1.clone(),
            Severity::Stale => conns
                .iter()
                .filter_map(|c| c.contract.broken_since.clone())
                .min()
                .unwrap_or_else(|| self.severity.1.clone()),
            Severity::AtRisk | Severity::NoPromise | Severity::Healthy => self.severity.1.clone(),
        }
    }
}

/// One target.
#[derive(Debug)]
pub struct TargetStatus {
    pub name: String,
    /// Redacted.
    pub url: String,
    pub connections: Vec<Mutex<ConnStatus>>,
    pub probes: Mutex<Vec<ProbeStatus>>,
    /// Locked before any connection (see [`TargetStatus::judge`]).
    since: Mutex<Since>,
    /// The target's shared change state, for its pins (set once by the supervisor).
    changes: std::sync::OnceLock<Arc<TargetChanges>>,
}

impl TargetStatus {
    fn new(t: &TargetConfig) -> Self {
        let at = now();
        TargetStatus {
            name: t.name.clone(),
            url: t.endpoint.to_string(),
            connections: (0..t.settings.connections)
                .map(|i| Mutex::new(ConnStatus::new(i, &at)))
                .collect(),
            probes: Mutex::new(
                t.probes
                    .iter()
                    .map(|p| ProbeStatus {
                        tool: keep(&p.tool, MAX_NAME),
                        interval_seconds: p.interval.as_secs_f64(),
                        last_run_at: None,
                        success: false,
                        reason: None,
                        detail: None,
                        duration_seconds: None,
                    })
                    .collect(),
            ),
            since: Mutex::new(Since {
                up: (false, at.clone()),
                ready: (false, at.clone()),
                severity: (Severity::Down, at),
            }),
            changes: std::sync::OnceLock::new(),
        }
    }

    /// Show this target's pins (see [`TargetChanges::view`]).
    pub fn set_changes(&self, changes: Arc<TargetChanges>) {
        let _ = self.changes.set(changes);
    }

    /// A handle for connection `index`.
    pub fn connection(self: &Arc<Self>, index: u16) -> ConnStatusHandle {
        ConnStatusHandle {
            target: self.clone(),
            index,
        }
    }

    /// Judge the target as it is now, record when its judgement changed, and hand everything to
    /// `f`. Locks the "since" facts, then every connection in order, then the probes; nothing
    /// else takes two of these locks, so this cannot deadlock with a connection's writes.
    fn judge<R>(
        &self,
        f: impl FnOnce(&verdict::Verdict, String, &[&ConnStatus], &[ProbeStatus]) -> R,
    ) -> R {
        let mut since = lock(&self.since);
        let guards: Vec<MutexGuard<'_, ConnStatus>> = self.connections.iter().map(lock).collect();
        let conns: Vec<&ConnStatus> = guards.iter().map(|g| &**g).collect();
        let probes = lock(&self.probes);
        let at = SystemTime::now();
        let v = verdict::assess(&conns, &probes, at);
        since.update(&v, &stamp(at));
        let began = since.of(v.severity, &conns);
        f(&v, began, &conns, &probes)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().expect("status lock poisoned")
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
    /// Some targets were trimmed or left out to keep the JSON under [`MAX_RESPONSE_BYTES`].
    pub truncated: bool,
    /// Targets sent in their light form (newest events and a few drift names only).
    pub targets_trimmed: usize,
    /// Targets left out (the healthiest, at the end of the order).
    pub targets_omitted: usize,
    /// Worst first (see [`Severity`]), then by name.
    pub targets: Vec<TargetSnapshot>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetSnapshot {
    pub name: String,
    pub url: String,
    /// `down`, `not_ready`, `stale`, `at_risk`, `no_promise` or `healthy`.
    pub severity: Severity,
    /// Some connection is up (as `mcp_probe_up`).
    pub up: bool,
    /// Up with a complete last walk and every probe passing on the current session (as
    /// `mcp_probe_ready`). A stale cache does not make a target unready; see `stale`.
    pub ready: bool,
    /// Some connection's correct client holds a stale list: a promise of its era broken (see
    /// `connections[].contract`; the drift of a notification-driven cache is
    /// `connections[].drift`).
    pub stale: bool,
    /// When the condition `severity` names began (see docs/health.md).
    pub since: String,
    /// Why, in words, worst first; at most [`verdict::MAX_CAUSES`] entries.
    pub causes: Vec<String>,
    /// This target is in its light form (see [`Snapshot::targets_trimmed`]).
    pub trimmed: bool,
    pub connections: Vec<ConnStatus>,
    pub probes: Vec<ProbeStatus>,
    /// The pinned baseline against connection 0's listing; absent without `pins:`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pins: Option<PinsView>,
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

    /// A consistent copy of everything, worst targets first.
    pub fn snapshot(&self) -> Snapshot {
        let targets: Vec<Arc<TargetStatus>> = self
            .targets
            .read()
            .expect("status lock poisoned")
            .values()
            .cloned()
            .collect();
        let mut targets: Vec<TargetSnapshot> = targets
            .iter()
            .map(|t| {
                t.judge(|v, since, conns, probes| TargetSnapshot {
                    name: t.name.clone(),
                    url: t.url.clone(),
                    severity: v.severity,
                    up: v.up,
                    ready: v.ready,
                    stale: v.stale,
                    since,
                    causes: v.causes.clone(),
                    trimmed: false,
                    connections: conns.iter().map(|c| (*c).clone()).collect(),
                    probes: probes.to_vec(),
                    pins: t.changes.get().and_then(|c| c.view()),
                })
            })
            .collect();
        // Stable: equal severities keep the name order of the map.
        targets.sort_by_key(|t| t.severity);
        Snapshot {
            version: env!("CARGO_PKG_VERSION"),
            generated_at: now(),
            truncated: false,
            targets_trimmed: 0,
            targets_omitted: 0,
            targets,
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
        let r = self
            .target
            .connections
            .get(self.index as usize)
            .map(|c| f(&mut lock(c)));
        self.rejudge();
        r
    }

    /// Record when the target's judgement changes, as it changes (not when someone looks).
    fn rejudge(&self) {
        self.target.judge(|_, _, _, _| ());
    }

    fn push(s: &mut ConnStatus, kind: &'static str, detail: &str) {
        if s.events.len() >= EVENTS_PER_CONNECTION {
            s.events.pop_front();
        }
        let e = Event {
            at: now(),
            kind,
            detail: keep(detail, MAX_DETAIL),
        };
        s.last_events.insert(kind, e.clone());
        s.events.push_back(e);
    }

    /// Append a timeline entry.
    pub fn event(&self, kind: &'static str, detail: impl Into<String>) {
        let detail = detail.into();
        self.with(|s| Self::push(s, kind, &detail));
    }

    pub fn state(&self, state: ConnState) {
        self.with(|s| Self::set_state(s, state));
    }

    fn set_state(s: &mut ConnStatus, state: ConnState) {
        if s.state != state {
            s.state = state;
            s.state_since = now();
        }
    }

    /// A session opened. The connection stays `connecting` until a first request on the session
    /// is answered and [`ConnStatusHandle::state`] says `Up` (as `mcp_probe_up`).
    pub fn session_opened(&self, era: Era, info: &ServerInfo, trigger: Trigger) {
        let state = ConnState::Connecting;
        self.with(|s| {
            let protocol_version = keep(&info.protocol_version, MAX_LABEL);
            let detail = format!(
                "protocol {protocol_version}, listChanged {}{}",
                info.list_changed,
                if trigger == Trigger::Reconnect {
                    " (reconnect: re-listing)"
                } else {
                    ""
                }
            );
            s.session = Some(SessionStatus {
                era: era.as_str(),
                protocol_version,
                server_name: keep(&info.name, MAX_LABEL),
                server_version: keep(&info.version, MAX_LABEL),
                opened_at: now(),
                capabilities: Capabilities {
                    tools: info.tools,
                    list_changed: info.list_changed,
                },
            });
            Self::push(s, "session_opened", &detail);
            Self::set_state(s, state);
        });
    }

    /// The session ended (`kind` = `session_expired`, `session_closed`, …) or failed to open.
    pub fn session_ended(&self, kind: &'static str, detail: impl Into<String>) {
        let detail = detail.into();
        self.with(|s| {
            s.session = None;
            s.notification_stream = false;
            Self::push(s, kind, &detail);
            Self::set_state(s, ConnState::Down);
        });
    }

    pub fn stream(&self, up: bool, detail: &str) {
        self.with(|s| {
            if s.notification_stream != up {
                s.notification_stream = up;
                let kind = if up { "stream_opened" } else { "stream_lost" };
                Self::push(s, kind, detail);
            }
        });
    }

    pub fn list_changed(&self, n: u64) {
        self.with(|s| {
            s.list_changed_received += n;
            Self::push(s, "list_changed", &format!("{n} notification(s) received"));
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
                Err((p, e)) => (*p, None, Some(keep(e, MAX_DETAIL))),
            };
            if error.is_some() && trigger.refreshes_cache() {
                s.refresh_failures += 1;
            }
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
                    &format!("trigger {}: {e}", trigger.as_str()),
                ),
                None if trigger != Trigger::Audit => Self::push(
                    s,
                    "walk_finished",
                    &format!(
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
            s.refresh_failures = 0;
            Self::push(
                s,
                "cache_replaced",
                &format!("{} tools after {} walk", tools.len(), trigger.as_str()),
            );
        });
    }

    /// Tools changed between two listings: kept (bounded) and one timeline entry.
    pub fn tool_changes(&self, changes: Vec<ToolChange>) {
        self.with(|s| {
            let at = now();
            let mut summary: Vec<String> = Vec::new();
            for c in changes.iter().take(5) {
                summary.push(format!("{} {}", keep(&c.tool, MAX_NAME), c.change));
            }
            if changes.len() > 5 {
                summary.push(format!("and {} more", changes.len() - 5));
            }
            Self::push(s, "tool_changed", &summary.join(", "));
            let skip = changes.len().saturating_sub(CHANGES_PER_CONNECTION);
            for c in changes.into_iter().skip(skip) {
                if s.changes.len() == CHANGES_PER_CONNECTION {
                    s.changes.pop_front();
                }
                s.changes.push_back(ToolChangeStatus {
                    at: at.clone(),
                    change: c.shown(),
                });
            }
        });
    }

    /// The drift after a walk; a change of drift is a timeline entry.
    pub fn drift(&self, drift: &Drift) {
        let d = DriftStatus::from(drift);
        self.with(|s| {
            let changed = s.drift.counts != d.counts
                || s.drift.missing != d.missing
                || s.drift.extra != d.extra
                || s.drift.changed != d.changed;
            if changed {
                let detail = if d.is_empty() {
                    "cache matches the server again".to_string()
                } else {
                    // The detail is cut at MAX_DETAIL anyway: a few names say enough.
                    const NAMES: usize = 5;
                    format!(
                        "missing [{}] extra [{}] changed [{}]",
                        text::list(&d.missing, NAMES),
                        text::list(&d.extra, NAMES),
                        text::list(&d.changed, NAMES)
                    )
                };
                Self::push(s, "drift", &detail);
            }
            match (d.is_empty(), &s.stale_since) {
                (true, _) => s.stale_since = None,
                (false, None) => s.stale_since = Some(now()),
                (false, Some(_)) => {}
            }
            s.drift = d;
        });
    }

    /// The connection judged by its server's contract; the moment it breaks is kept.
    pub fn contract(&self, contract: &Contract, broken: bool) {
        self.with(|s| {
            let c = &mut s.contract;
            let words = contract.words();
            if c.words.as_deref() != Some(words.as_str()) {
                c.words = Some(words);
            }
            c.promise = Some(contract.promise());
            c.ttl_seconds = contract.ttl.as_secs_f64();
            match (broken, c.broken) {
                (true, false) => {
                    c.broken_since = Some(now());
                    Self::push(
                        s,
                        "promise_broken",
                        "a promise to caching clients is broken: correct clients hold a stale list",
                    );
                }
                (false, true) => {
                    c.broken_since = None;
                    Self::push(
                        s,
                        "promise_kept",
                        "correct clients hold the current list again",
                    );
                }
                _ => {}
            }
            s.contract.broken = broken;
        });
    }

    /// What the legacy watch measured; a change of verdict is a timeline entry.
    pub fn legacy_clients(&self, verdict: LegacyVerdict) {
        self.with(|s| {
            let before = s.legacy_clients.as_ref().map(|l| l.cause);
            let measured = ["delivered", "stream_silent"];
            if verdict == LegacyVerdict::Untested && before.is_some_and(|b| measured.contains(&b)) {
                // A new legacy session, not yet tested: the last measurement still stands.
                return;
            }
            if before != Some(verdict.as_str()) && verdict.hears() == Some(false) {
                Self::push(s, "legacy_clients_deaf", verdict.words());
            }
            s.legacy_clients = Some(LegacyClientsStatus {
                hears: verdict.hears(),
                cause: verdict.as_str(),
                detail: verdict.words(),
                at: now(),
            });
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
        let mut probes = lock(&self.target.probes);
        let Some(p) = probes.get_mut(index) else {
            return;
        };
        let was = (p.last_run_at.is_some(), p.success, p.reason);
        p.last_run_at = Some(now());
        p.duration_seconds = Some(elapsed.as_secs_f64());
        p.success = result.is_ok();
        (p.reason, p.detail) = match &result {
            Ok(()) => (None, None),
            Err((r, d)) => (Some(*r), Some(keep(d, MAX_DETAIL))),
        };
        let flipped = was != (true, p.success, p.reason);
        let line = match &p.reason {
            None => ("probe_passed", p.tool.clone()),
            Some(r) => (
                "probe_failed",
                format!("{}: {r}: {}", p.tool, p.detail.as_deref().unwrap_or("")),
            ),
        };
        drop(probes);
        if flipped {
            self.event(line.0, line.1);
        } else {
            self.rejudge();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
