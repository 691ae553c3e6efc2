//! One long-lived probe connection: the reference client's state machine.
//!
//! ```text
//! open session ──► open stream ──► walk (initial | reconnect) ──► loop {
//!     list_changed          → walk(notification)      (single-flight: one more walk if mid-walk)
//!     stream ended          → re-open with backoff → walk(stream_gap)
//!     audit tick            → walk(audit), diff against the cache, never written into it
//!     ping tick             → liveness; repeated failure → new session
//!     404 on any request    → session expired → new session → walk(reconnect)
//!     probe due (conn. 0)   → side-effect guard → tools/call → judge (after the first walk)
//! }
//! ```
//!
//! A session is *up* only once a request after `initialize` has been answered (a page, a ping or
//! a tool call): a server that accepts `initialize` and then answers nothing, or 404 to
//! everything, never shows as up. Likewise the reconnect backoff is reset only by such an
//! answer, so a server whose sessions die right after opening is retried ever more slowly
//! (exponential, with jitter) instead of a hundred times a second.
//!
//! Repeated failures are logged once per change of state (see [`super::repeats`]).
//!
//! Everything that waits (walks, pings, stream (re)opens) is a future the loop polls beside the
//! others, so a slow server never stops the connection from hearing a notification, and each
//! connection is its own task, so it never delays another.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{MissedTickBehavior, sleep_until};

use super::Trigger;
use super::backoff::Backoff;
use super::functional::{self, Failed};
use super::repeats::{Repeats, name_list};
use super::status::{ConnState, ConnStatusHandle};
use super::toolset::{Drift, ToolSet};
use super::walker::{self, Pager, WalkLimits, WalkReport};
use crate::config::{Endpoint, HttpTransportKind, ProbeConfig, TargetConfig};
use crate::mcp::http::StreamEnd;
use crate::mcp::{HttpTransport, Inbox, Limits, McpError, Reason, Session};
use crate::telemetry::ConnMetrics;

/// Consecutive failed pings after which the session is considered dead and re-opened.
const PING_FAILURES_BEFORE_RECONNECT: u32 = 3;
/// Shortest and longest wait honoured from an SSE `retry` field.
const MIN_STREAM_RETRY: Duration = Duration::from_millis(100);
const MAX_STREAM_RETRY: Duration = Duration::from_secs(60);

type Slot<T> = Option<Pin<Box<dyn Future<Output = T> + Send>>>;

/// Poll an optional future; pending forever when the slot is empty.
async fn poll_slot<T>(slot: &mut Slot<T>) -> T {
    match slot {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn sleep_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// A spawned task that is aborted when its owner lets go of it: a session's stream reader must
/// not outlive the session.
struct OwnedTask<T>(JoinHandle<T>);

impl<T> Drop for OwnedTask<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> OwnedTask<T> {
    fn spawn(fut: impl Future<Output = T> + Send + 'static) -> Self
    where
        T: Send + 'static,
    {
        OwnedTask(tokio::spawn(fut))
    }

    async fn join(&mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

/// A finished probe run: its index, how long it took, the verdict.
type ProbeRun = (usize, Duration, Result<(), Failed>);

/// Why a session ended.
enum SessionEnd {
    Shutdown,
    Expired,
    Dead(McpError),
}

/// The failing streaks whose log lines are rate-limited, one per kind of event.
#[derive(Default)]
struct Logs {
    session: Repeats,
    walk: Repeats,
    drift: Repeats,
    unannounced: Repeats,
    probes: Vec<Repeats>,
}

/// A server change seen by the audit and not yet announced.
struct Divergence {
    server_fingerprint: u64,
    deadline: tokio::time::Instant,
    notifications_before: u64,
    counted: bool,
}

/// The state one connection task owns.
pub struct Connection {
    config: TargetConfig,
    metrics: Arc<ConnMetrics>,
    status: ConnStatusHandle,
    /// The functional probes this connection runs (connection 0 runs the target's probes).
    probes: Vec<ProbeConfig>,
    transport: Arc<HttpTransport>,
    /// What a correct client holds: changed only by refresh walks.
    cache: Option<ToolSet>,
    /// The last complete walk of any trigger.
    server: Option<ToolSet>,
    divergence: Option<Divergence>,
    sessions: u64,
    /// Whether the current session has answered a request after `initialize`.
    alive: bool,
    logs: Logs,
    /// Wait before the first session, so that many targets starting together are spread out.
    start_delay: Duration,
    index: u16,
}

/// Counts every `tools/list` page through the connection's metrics.
struct SessionPager {
    session: Arc<Session>,
    metrics: Arc<ConnMetrics>,
}

impl Pager for SessionPager {
    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(serde_json::Value, usize), McpError> {
        self.metrics.tools_list_request();
        let params = cursor.map(|c| serde_json::json!({ "cursor": c }));
        timed(
            &self.metrics,
            "tools/list",
            self.session.request_within("tools/list", params, max_bytes),
        )
        .await
    }
}

/// Run a request and record it.
async fn timed<T>(
    metrics: &ConnMetrics,
    method: &'static str,
    fut: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let start = Instant::now();
    let r = fut.await;
    metrics.request(
        method,
        start.elapsed(),
        r.as_ref().map(|_| ()).map_err(|e| e.reason),
    );
    r
}

/// The URL to open a Streamable HTTP transport on: `auto` speaks Streamable HTTP only in this
/// build (no fallback yet). The other transports are configured but not built yet.
fn streamable_url(config: &TargetConfig) -> Result<url::Url, McpError> {
    match &config.endpoint {
        Endpoint::Http {
            url,
            transport: HttpTransportKind::Auto | HttpTransportKind::StreamableHttp,
        } => Ok(url.clone()),
        Endpoint::Http {
            transport: HttpTransportKind::Sse,
            ..
        } => Err(McpError::new(
            Reason::Transport,
            "HTTP+SSE targets are not supported by this build yet",
        )),
        Endpoint::Command(_) => Err(McpError::new(
            Reason::Transport,
            "stdio targets are not supported by this build yet",
        )),
    }
}

impl Connection {
    pub fn new(
        config: TargetConfig,
        index: u16,
        metrics: ConnMetrics,
        status: ConnStatusHandle,
    ) -> Result<Self, McpError> {
        let headers: Vec<(String, String)> = config
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_string()))
            .collect();
        let transport = HttpTransport::new(streamable_url(&config)?, &headers, Limits::default())?;
        let probes = if index == 0 {
            config.probes.clone()
        } else {
            Vec::new()
        };
        let logs = Logs {
            probes: probes.iter().map(|_| Repeats::default()).collect(),
            ..Logs::default()
        };
        Ok(Connection {
            config,
            metrics: Arc::new(metrics),
            status,
            probes,
            transport: Arc::new(transport),
            cache: None,
            server: None,
            divergence: None,
            sessions: 0,
            alive: false,
            logs,
            start_delay: Duration::ZERO,
            index,
        })
    }

    /// Open the first session only after `delay`.
    pub fn starting_after(mut self, delay: Duration) -> Self {
        self.start_delay = delay;
        self
    }

    /// Run until `shutdown` turns true.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut backoff = Backoff::default();
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(self.start_delay) => {}
        }
        loop {
            if *shutdown.borrow() {
                return;
            }
            let (inbox, requests) = Inbox::new();
            let inbox = Arc::new(inbox);
            let opened = tokio::select! {
                _ = shutdown.changed() => return,
                r = timed(&self.metrics, "initialize", Session::open(
                    self.transport.clone(),
                    self.config.protocol_version.offer(),
                    inbox.clone(),
                    self.config.request_timeout,
                )) => r,
            };
            let end = match opened {
                Ok(session) => {
                    let session = Arc::new(session);
                    self.metrics.session_opened(session.era(), session.info());
                    tracing::debug!(target = %self.config.name, connection = self.index, protocol_version = %session.info().protocol_version, "session opened");
                    let trigger = if self.sessions == 0 {
                        Trigger::Initial
                    } else {
                        Trigger::Reconnect
                    };
                    self.status
                        .session_opened(session.era(), session.info(), trigger);
                    self.sessions += 1;
                    // Not up until this session answers a request after initialize.
                    self.alive = false;
                    let responder = spawn_responder(session.clone(), requests);
                    let end = self
                        .run_session(&session, &inbox, trigger, &mut shutdown)
                        .await;
                    drop(responder);
                    if self.alive {
                        // The session worked: whatever ended it is news, not a storm.
                        backoff.reset();
                    }
                    self.metrics.session_closed();
                    if !self.probes.is_empty() {
                        self.metrics.target().probes_down();
                    }
                    if matches!(end, SessionEnd::Shutdown) {
                        session.close().await;
                    }
                    end
                }
                Err(e) => {
                    self.metrics.session_failed(e.reason);
                    self.status
                        .session_ended("session_failed", format!("{}: {}", e.reason, e.detail));
                    SessionEnd::Dead(e)
                }
            };
            let delay = match end {
                SessionEnd::Shutdown => return,
                SessionEnd::Expired => {
                    self.metrics.session_expired();
                    // Re-initialize at once after a session that worked; sessions that expire
                    // before answering anything back off (a load balancer without affinity).
                    let d = if backoff.attempts() == 0 {
                        backoff.next_delay();
                        Duration::ZERO
                    } else {
                        backoff.next_delay()
                    };
                    self.status.session_ended(
                        "session_expired",
                        format!("HTTP 404 on the session id; opening a new session in {d:?}"),
                    );
                    if let Some(repeated) =
                        self.logs.session.failed(Reason::SessionExpired.as_str())
                    {
                        tracing::warn!(target = %self.config.name, connection = self.index, reason = %Reason::SessionExpired, retry_in = ?d, repeated, "session expired; re-initializing");
                    }
                    d
                }
                SessionEnd::Dead(e) => {
                    let d = backoff.next_delay();
                    self.status.session_ended(
                        "session_closed",
                        format!("{}: {}; retry in {d:?}", e.reason, e.detail),
                    );
                    if let Some(repeated) = self.logs.session.failed(e.reason.as_str()) {
                        tracing::warn!(target = %self.config.name, connection = self.index, reason = %e.reason, error = %e.detail, retry_in = ?d, repeated, "session failed");
                    }
                    d
                }
            };
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    async fn run_session(
        &mut self,
        session: &Arc<Session>,
        inbox: &Arc<Inbox>,
        first: Trigger,
        shutdown: &mut watch::Receiver<bool>,
    ) -> SessionEnd {
        // The stream is opened before the first walk, so a change during the walk is heard.
        let mut stream: Option<OwnedTask<StreamEnd>> = None;
        let mut stream_open: Slot<Result<Option<crate::mcp::http::NotificationStream>, McpError>> =
            None;
        let mut stream_retry_at: Option<tokio::time::Instant> = None;
        let mut stream_backoff = Backoff::default();
        let mut stream_reopening = false;
        match session.open_stream().await {
            Ok(Some(s)) => {
                self.metrics.stream(true);
                self.status.stream(true, "GET stream open");
                let inbox = inbox.clone();
                stream = Some(OwnedTask::spawn(async move { s.run(&inbox).await }));
            }
            Ok(None) => {
                self.metrics.stream(false);
                self.status
                    .event("stream_lost", "server offers no GET stream (405)");
            }
            Err(e) if e.reason == Reason::SessionExpired => return SessionEnd::Expired,
            Err(e) => {
                tracing::debug!(target = %self.config.name, reason = %e.reason, "notification stream did not open");
                self.metrics.stream(false);
                stream_retry_at = Some(tokio::time::Instant::now() + stream_backoff.next_delay());
            }
        }

        let mut pending: Option<Trigger> = Some(first);
        let mut refresh_retry_at: Option<tokio::time::Instant> = None;
        let mut refresh_backoff = Backoff::default();
        let mut audit_due = false;
        let mut walk: Slot<(Trigger, WalkReport, Duration)> = None;
        let mut ping: Slot<Result<Duration, McpError>> = None;
        let mut ping_failures = 0u32;
        let mut seen_notifications = inbox.list_changed_count();
        let mut probe_due: Vec<tokio::time::Instant> =
            vec![tokio::time::Instant::now(); self.probes.len()];
        let mut probe: Slot<ProbeRun> = None;

        let start = tokio::time::Instant::now();
        let mut ping_tick =
            tokio::time::interval_at(start + self.config.ping_interval, self.config.ping_interval);
        ping_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut audit_tick = tokio::time::interval_at(
            start + self.config.audit_interval,
            self.config.audit_interval,
        );
        audit_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);

        loop {
            if walk.is_none() {
                let next = if refresh_retry_at.is_none() {
                    pending.take()
                } else {
                    None
                };
                let next = next.or_else(|| {
                    audit_due.then(|| {
                        audit_due = false;
                        Trigger::Audit
                    })
                });
                if let Some(trigger) = next {
                    walk = Some(self.start_walk(session, trigger));
                }
            }
            // Probes start once a complete listing tells the guard what the tools are.
            let probe_at = (probe.is_none() && self.server.is_some())
                .then(|| probe_due.iter().min().copied())
                .flatten();
            let grace_at = self
                .divergence
                .as_ref()
                .filter(|d| !d.counted)
                .map(|d| d.deadline);
            tokio::select! {
                _ = shutdown.changed() => return SessionEnd::Shutdown,
                _ = inbox.list_changed() => {
                    let now = inbox.list_changed_count();
                    self.metrics.list_changed(now - seen_notifications);
                    self.status.list_changed(now - seen_notifications);
                    seen_notifications = now;
                    // Coalesce: whatever walk is pending covers this notification too.
                    pending.get_or_insert(Trigger::Notification);
                    refresh_retry_at = None;
                }
                (trigger, report, elapsed) = poll_slot(&mut walk) => {
                    walk = None;
                    let expired = report.result.as_ref().err()
                        .and_then(|e| e.mcp_error())
                        .is_some_and(|e| e.reason == Reason::SessionExpired);
                    if report.answered > 0 {
                        self.confirm_alive();
                    }
                    let ok = self.on_walk(trigger, report, elapsed, pending.is_some(), inbox.list_changed_count());
                    if expired {
                        return SessionEnd::Expired;
                    }
                    if trigger.refreshes_cache() {
                        if ok {
                            refresh_backoff.reset();
                        } else {
                            // Retry the refresh (F5), unless a newer trigger is already pending.
                            pending.get_or_insert(trigger);
                            refresh_retry_at = Some(tokio::time::Instant::now() + refresh_backoff.next_delay());
                        }
                    }
                }
                _ = sleep_opt(refresh_retry_at) => refresh_retry_at = None,
                _ = audit_tick.tick() => audit_due = true,
                _ = ping_tick.tick(), if ping.is_none() => {
                    let s = session.clone();
                    let m = self.metrics.clone();
                    ping = Some(Box::pin(async move {
                        let t = Instant::now();
                        timed(&m, "ping", s.request("ping", None)).await.map(|_| t.elapsed())
                    }));
                }
                r = poll_slot(&mut ping) => {
                    ping = None;
                    match r {
                        Ok(d) => {
                            ping_failures = 0;
                            self.metrics.ping(Ok(d));
                            // Up again even after a failed ping earlier in this session.
                            self.up();
                        }
                        Err(e) => {
                            self.metrics.ping(Err(()));
                            self.metrics.set_up(false);
                            self.status.state(ConnState::Unresponsive);
                            self.status.event("ping_failed", format!("{}: {}", e.reason, e.detail));
                            if e.reason == Reason::SessionExpired {
                                return SessionEnd::Expired;
                            }
                            ping_failures += 1;
                            if ping_failures >= PING_FAILURES_BEFORE_RECONNECT {
                                return SessionEnd::Dead(e);
                            }
                        }
                    }
                }
                end = async { stream.as_mut().expect("guarded").join().await }, if stream.is_some() => {
                    stream = None;
                    self.metrics.stream(false);
                    let end = end.unwrap_or(StreamEnd { error: None, retry: None });
                    let why = end.error.as_ref().map_or("stream ended".to_string(), |e| format!("{}: {}", e.reason, e.detail));
                    self.status.stream(false, &why);
                    if let Some(e) = &end.error {
                        if e.reason == Reason::SessionExpired {
                            return SessionEnd::Expired;
                        }
                        tracing::debug!(target = %self.config.name, reason = %e.reason, "notification stream broke");
                    }
                    let delay = end
                        .retry
                        .map(|r| r.clamp(MIN_STREAM_RETRY, MAX_STREAM_RETRY))
                        .unwrap_or_else(|| stream_backoff.next_delay());
                    stream_retry_at = Some(tokio::time::Instant::now() + delay);
                    stream_reopening = true;
                }
                _ = sleep_opt(stream_retry_at), if stream_open.is_none() => {
                    stream_retry_at = None;
                    let s = session.clone();
                    stream_open = Some(Box::pin(async move { s.open_stream().await }));
                }
                r = poll_slot(&mut stream_open) => {
                    stream_open = None;
                    match r {
                        Ok(Some(s)) => {
                            self.metrics.stream(true);
                            self.status.stream(true, "GET stream re-opened; re-listing for changes missed in the gap");
                            if stream_reopening {
                                self.metrics.stream_reconnected();
                            }
                            stream_backoff.reset();
                            let inbox = inbox.clone();
                            stream = Some(OwnedTask::spawn(async move { s.run(&inbox).await }));
                            // Notifications sent while the stream was down are lost: re-list.
                            pending.get_or_insert(Trigger::StreamGap);
                        }
                        Ok(None) => self.metrics.stream(false),
                        Err(e) if e.reason == Reason::SessionExpired => return SessionEnd::Expired,
                        Err(_) => {
                            stream_retry_at = Some(tokio::time::Instant::now() + stream_backoff.next_delay());
                        }
                    }
                }
                _ = sleep_opt(grace_at) => self.grace_expired(inbox.list_changed_count()),
                _ = sleep_opt(probe_at) => {
                    let now = tokio::time::Instant::now();
                    let Some(i) = (0..probe_due.len()).min_by_key(|i| probe_due[*i]) else { continue };
                    let p = self.probes[i].clone();
                    probe_due[i] = now + p.interval;
                    match self.server.as_ref().map(|s| functional::guard(&p, s)) {
                        Some(Err(refused)) => self.probe_done(i, Duration::ZERO, Err(refused)),
                        _ => probe = Some(self.start_probe(session, i, p)),
                    }
                }
                (i, elapsed, verdict) = poll_slot(&mut probe) => {
                    probe = None;
                    if verdict.is_ok() {
                        self.confirm_alive();
                    }
                    self.probe_done(i, elapsed, verdict);
                }
            }
        }
    }

    /// The session answered a request after `initialize`: up, the first time in a session (a
    /// failed ping later takes that back until a ping passes again).
    fn confirm_alive(&mut self) {
        if !self.alive {
            self.up();
        }
    }

    /// The session is up: it answered, and whatever failed before has recovered.
    fn up(&mut self) {
        self.alive = true;
        self.metrics.set_up(true);
        self.status.state(ConnState::Up);
        if let Some(failures) = self.logs.session.recovered() {
            tracing::info!(target = %self.config.name, connection = self.index, failures, "session works again");
        }
    }

    fn start_walk(
        &self,
        session: &Arc<Session>,
        trigger: Trigger,
    ) -> Pin<Box<dyn Future<Output = (Trigger, WalkReport, Duration)> + Send>> {
        self.metrics.walk_started(trigger);
        self.status.walk_started(trigger);
        let mut pager = SessionPager {
            session: session.clone(),
            metrics: self.metrics.clone(),
        };
        let limits = WalkLimits {
            max_pages: self.config.max_pages,
            max_bytes: self.config.max_listing_bytes,
        };
        Box::pin(async move {
            let t = Instant::now();
            let report = walker::walk(&mut pager, limits).await;
            (trigger, report, t.elapsed())
        })
    }

    /// Apply a finished walk. Returns whether it completed.
    fn on_walk(
        &mut self,
        trigger: Trigger,
        report: WalkReport,
        elapsed: Duration,
        notified_meanwhile: bool,
        notifications: u64,
    ) -> bool {
        self.metrics.walk_finished(trigger, &report, elapsed);
        let outcome = match &report.result {
            Ok(w) => Ok((w.pages, w.tools.len())),
            Err(e) => Err((report.requests, e.to_string())),
        };
        self.status.walk_finished(trigger, outcome, elapsed);
        let walk = match report.result {
            Ok(w) => w,
            Err(e) => {
                if let Some(repeated) = self.logs.walk.failed(e.reason()) {
                    tracing::warn!(target = %self.config.name, connection = self.index, trigger = trigger.as_str(), reason = e.reason(), error = %e, repeated, "walk failed");
                }
                if trigger.refreshes_cache() {
                    self.metrics.cache_refresh(trigger, false);
                } else {
                    self.metrics.consistency_check(false);
                }
                return false;
            }
        };
        if let Some(failures) = self.logs.walk.recovered() {
            tracing::info!(target = %self.config.name, connection = self.index, failures, "walks complete again");
        }
        if trigger.refreshes_cache() {
            if trigger == Trigger::Notification && self.cache.as_ref() == Some(&walk.tools) {
                self.metrics.list_changed_without_change();
            }
            self.metrics.cache_view(&walk.tools);
            self.metrics.cache_refresh(trigger, true);
            self.status.cache_replaced(trigger, &walk.tools);
            self.cache = Some(walk.tools.clone());
        } else {
            self.metrics.consistency_check(true);
        }
        self.server = Some(walk.tools);
        let drift = self.drift();
        self.metrics.drift(&drift);
        self.status.drift(&drift);
        if drift.is_empty() {
            self.divergence = None;
            self.logs.unannounced.recovered();
            if self.logs.drift.recovered().is_some() {
                tracing::info!(target = %self.config.name, connection = self.index, "cache matches the server again");
            }
        } else if trigger == Trigger::Audit && !notified_meanwhile {
            self.diverged(&drift, notifications);
        }
        true
    }

    fn start_probe(
        &self,
        session: &Arc<Session>,
        index: usize,
        p: ProbeConfig,
    ) -> Pin<Box<dyn Future<Output = ProbeRun> + Send>> {
        let s = session.clone();
        let m = self.metrics.clone();
        Box::pin(async move {
            let t = Instant::now();
            let call = timed(
                &m,
                "tools/call",
                s.request("tools/call", Some(functional::call_params(&p))),
            );
            let answer = tokio::time::timeout(p.timeout, call).await;
            let verdict = functional::judge(answer, &p.expect, p.timeout);
            (index, t.elapsed(), verdict)
        })
    }

    fn probe_done(&mut self, index: usize, elapsed: Duration, verdict: Result<(), Failed>) {
        let (name, tool) = (&self.config.name, &self.probes[index].tool);
        let log = &mut self.logs.probes[index];
        match &verdict {
            Err((reason, detail)) => {
                if let Some(repeated) = log.failed(reason.as_str()) {
                    tracing::warn!(target = %name, tool = %tool, reason = reason.as_str(), error = %detail, repeated, "functional probe failed");
                }
            }
            Ok(()) => {
                if let Some(failures) = log.recovered() {
                    tracing::info!(target = %name, tool = %tool, failures, "functional probe passes again");
                }
            }
        }
        self.metrics.target().probe_result(
            index,
            elapsed,
            verdict.as_ref().map(|_| ()).map_err(|(r, _)| r.as_str()),
        );
        self.status
            .probe(index, elapsed, verdict.map_err(|(r, d)| (r.as_str(), d)));
    }

    fn drift(&self) -> Drift {
        match (&self.server, &self.cache) {
            (Some(s), Some(c)) => ToolSet::diff(s, c),
            (Some(s), None) => ToolSet::diff(s, &ToolSet::new()),
            _ => Drift::default(),
        }
    }

    /// The audit found the cache behind the server: start the grace period for this server list.
    fn diverged(&mut self, drift: &Drift, notifications: u64) {
        let fp = self
            .server
            .as_ref()
            .map(ToolSet::fingerprint)
            .unwrap_or_default();
        match &mut self.divergence {
            Some(d) if d.server_fingerprint == fp => return,
            // Changed again within the grace of an earlier change: the clock of the first change
            // keeps running (a list that churns faster than the grace is still unannounced).
            Some(d) if !d.counted => {
                d.server_fingerprint = fp;
                return;
            }
            _ => {}
        }
        if let Some(repeated) = self.logs.drift.failed("drift") {
            tracing::info!(
                target = %self.config.name,
                connection = self.index,
                missing = %name_list(&drift.missing),
                extra = %name_list(&drift.extra),
                changed = %name_list(&drift.changed),
                repeated,
                "cache differs from server"
            );
        }
        self.divergence = Some(Divergence {
            server_fingerprint: fp,
            deadline: tokio::time::Instant::now() + self.config.notification_grace,
            notifications_before: notifications,
            counted: false,
        });
    }

    fn grace_expired(&mut self, notifications_now: u64) {
        let Some(d) = self.divergence.as_mut() else {
            return;
        };
        let announced = notifications_now > d.notifications_before;
        if announced {
            self.divergence = None;
            return;
        }
        d.counted = true;
        self.metrics.unannounced_change();
        self.status.event(
            "unannounced_change",
            format!(
                "the server's list changed and no list_changed arrived within {}",
                humantime::format_duration(self.config.notification_grace)
            ),
        );
        if let Some(repeated) = self.logs.unannounced.failed("unannounced") {
            tracing::warn!(target = %self.config.name, connection = self.index, repeated, "server list changed without list_changed within notification_grace");
        }
    }
}

fn spawn_responder(
    session: Arc<Session>,
    mut requests: tokio::sync::mpsc::Receiver<crate::mcp::inbox::ServerRequest>,
) -> OwnedTask<()> {
    OwnedTask::spawn(async move {
        while let Some(req) = requests.recv().await {
            let _ = session.answer(&req.id, &req.method).await;
        }
    })
}
