//! One place where what happens to a connection is recorded: each event goes to the metrics,
//! the status page and (rate-limited, see [`super::repeats`]) the log together, so the three
//! views cannot disagree. The connection's state machine decides; this module only tells.
//!
//! Log lines carry no target or connection fields of their own: the connection task runs inside
//! a tracing span that has them, so no line can lack them.

use std::sync::Arc;
use std::time::Duration;

use super::Trigger;
use super::changes::ToolChange;
use super::channel::ChannelEvent;
use super::contract::Contract;
use super::functional::Failed;
use super::legacy_watch::LegacyVerdict;
use super::repeats::{Repeats, name_list};
use super::status::{ConnState, ConnStatusHandle};
use super::toolset::{Drift, ToolSet};
use super::walker::WalkReport;
use crate::mcp::{Client, McpError, Reason};
use crate::telemetry::ConnMetrics;

/// How much of a stdio server's stderr the status page shows when its process ends.
const STDERR_SHOWN: usize = 1024;

/// The failing streaks whose log lines are rate-limited, one per kind of event.
#[derive(Default)]
struct Logs {
    session: Repeats,
    walk: Repeats,
    drift: Repeats,
    unannounced: Repeats,
    rejected: Repeats,
    probes: Vec<Repeats>,
}

/// The recording side of one connection.
pub struct Events {
    pub metrics: Arc<ConnMetrics>,
    status: ConnStatusHandle,
    logs: Logs,
    /// The last verdict recorded: (promised, stale), so flips are logged once.
    judged: Option<(bool, bool)>,
}

impl Events {
    pub fn new(metrics: ConnMetrics, status: ConnStatusHandle, probes: usize) -> Self {
        Events {
            metrics: Arc::new(metrics),
            status,
            logs: Logs {
                probes: (0..probes).map(|_| Repeats::default()).collect(),
                ..Logs::default()
            },
            judged: None,
        }
    }

    pub fn session_opened(&self, client: &Client, trigger: Trigger) {
        let info = client.info();
        self.metrics.session_opened(client.era(), info);
        self.status.session_opened(client.era(), info, trigger);
        tracing::debug!(era = client.era().as_str(), protocol_version = %info.protocol_version, "session opened");
    }

    pub fn session_failed(&self, e: &McpError) {
        self.metrics.session_failed(e.reason);
        self.status
            .session_ended("session_failed", format!("{}: {}", e.reason, e.detail));
    }

    pub fn session_closed(&self, probes: bool) {
        self.metrics.session_closed();
        if probes {
            self.metrics.target().probes_down();
        }
    }

    /// The server forgot the session; a new one opens after `retry_in`.
    pub fn session_expired(&mut self, retry_in: Duration) {
        self.metrics.session_expired();
        self.status.session_ended(
            "session_expired",
            format!("HTTP 404 on the session id; opening a new session in {retry_in:?}"),
        );
        if let Some(repeated) = self.logs.session.failed(Reason::SessionExpired.as_str()) {
            tracing::warn!(reason = %Reason::SessionExpired, retry_in = ?retry_in, repeated, "session expired; re-initializing");
        }
    }

    /// The session failed (or could not open); a new one opens after `retry_in`.
    pub fn session_dead(&mut self, e: &McpError, retry_in: Duration) {
        self.status.session_ended(
            "session_closed",
            format!("{}: {}; retry in {retry_in:?}", e.reason, e.detail),
        );
        if let Some(repeated) = self.logs.session.failed(e.reason.as_str()) {
            tracing::warn!(reason = %e.reason, error = %e.detail, retry_in = ?retry_in, repeated, "session failed");
        }
    }

    /// The session answered: up, and whatever failed before has recovered.
    pub fn up(&mut self) {
        self.metrics.set_up(true);
        self.status.state(ConnState::Up);
        if let Some(failures) = self.logs.session.recovered() {
            tracing::info!(failures, "session works again");
        }
    }

    pub fn liveness(&self, result: Result<Duration, &McpError>) {
        match result {
            Ok(d) => self.metrics.ping(Ok(d)),
            Err(e) => {
                self.metrics.ping(Err(()));
                self.metrics.set_up(false);
                self.status.state(ConnState::Unresponsive);
                self.status
                    .event("ping_failed", format!("{}: {}", e.reason, e.detail));
            }
        }
    }

    pub fn channel(&self, client: &Client, event: &ChannelEvent) {
        let name = client.channel_name();
        match event {
            ChannelEvent::Opened {
                after_gap,
                reconnected,
                tools_list_changed,
            } => {
                self.metrics.stream(*tools_list_changed);
                if *reconnected {
                    self.metrics.stream_reconnected();
                }
                let detail = match (tools_list_changed, after_gap) {
                    (false, _) => {
                        format!("{name} open, but the server does not honour toolsListChanged")
                    }
                    (true, true) => {
                        format!("{name} re-opened; re-listing for changes missed in the gap")
                    }
                    (true, false) => format!("{name} open"),
                };
                self.status.stream(*tools_list_changed, &detail);
            }
            ChannelEvent::Unavailable => {
                self.metrics.stream(false);
                let why = match client.era() {
                    crate::mcp::Era::Legacy => "server offers no GET stream (405)",
                    crate::mcp::Era::Modern => "server does not implement subscriptions/listen",
                };
                self.status.event("stream_lost", why);
            }
            ChannelEvent::Lost { error, .. } => {
                self.metrics.stream(false);
                let why = error.as_ref().map_or(format!("{name} ended"), |e| {
                    format!("{}: {}", e.reason, e.detail)
                });
                self.status.stream(false, &why);
                if let Some(e) = error {
                    tracing::debug!(reason = %e.reason, "notification channel lost");
                }
            }
            ChannelEvent::Closed(e) => {
                self.metrics.stream(false);
                let tail = client
                    .stderr_tail(STDERR_SHOWN)
                    .filter(|t| !t.is_empty())
                    .map(|t| format!("; stderr: {t}"))
                    .unwrap_or_default();
                self.status.stream(
                    false,
                    &format!(
                        "{} ended: {}: {}{tail}",
                        client.channel_name(),
                        e.reason,
                        e.detail
                    ),
                );
            }
            ChannelEvent::Expired => {}
        }
    }

    pub fn list_changed(&self, n: u64) {
        self.metrics.list_changed(n);
        self.status.list_changed(n);
    }

    pub fn walk_started(&self, trigger: Trigger) {
        self.metrics.walk_started(trigger);
        self.status.walk_started(trigger);
    }

    /// A walk ended (its report is recorded whole; the caller applies the listing).
    pub fn walk_finished(&mut self, trigger: Trigger, report: &WalkReport, elapsed: Duration) {
        self.metrics.walk_finished(trigger, report, elapsed);
        let outcome = match &report.result {
            Ok(w) => Ok((w.pages, w.tools.len())),
            Err(e) => Err((report.requests, e.to_string())),
        };
        self.status.walk_finished(trigger, outcome, elapsed);
        if report.rejected > 0 {
            if let Some(repeated) = self.logs.rejected.failed("x_mcp_header") {
                tracing::warn!(
                    tools = report.rejected,
                    repeated,
                    "tools dropped from the listing: invalid x-mcp-header annotations"
                );
            }
        } else if report.answered > 0 {
            self.logs.rejected.recovered();
        }
        match &report.result {
            Err(e) => {
                if let Some(repeated) = self.logs.walk.failed(e.reason()) {
                    tracing::warn!(trigger = trigger.as_str(), reason = e.reason(), error = %e, repeated, "walk failed");
                }
                if trigger.refreshes_cache() {
                    self.metrics.cache_refresh(trigger, false);
                } else {
                    self.metrics.consistency_check(false);
                }
            }
            Ok(_) => {
                if let Some(failures) = self.logs.walk.recovered() {
                    tracing::info!(failures, "walks complete again");
                }
            }
        }
    }

    pub fn cache_replaced(&self, trigger: Trigger, tools: &ToolSet, unchanged: bool) {
        if trigger == Trigger::Notification && unchanged {
            self.metrics.list_changed_without_change();
        }
        self.metrics.cache_view(tools);
        self.metrics.cache_refresh(trigger, true);
        self.status.cache_replaced(trigger, tools);
    }

    /// Tools changed between this connection's last two listings: counted by class, shown per
    /// tool on the status page, and logged (breaking and unknown ones by name).
    pub fn tool_changes(&self, changes: Vec<ToolChange>) {
        self.metrics.tool_changes(super::changes::counts(&changes));
        let named = |class: &str| -> Vec<String> {
            changes
                .iter()
                .filter(|c| c.change == class)
                .map(|c| c.tool.clone())
                .collect()
        };
        let (breaking, unknown) = (named("breaking"), named("unknown"));
        if !breaking.is_empty() || !unknown.is_empty() {
            tracing::info!(
                breaking = %name_list(&breaking),
                unknown = %name_list(&unknown),
                "tool definitions changed"
            );
        }
        self.status.tool_changes(changes);
    }

    pub fn audited(&self) {
        self.metrics.consistency_check(true);
    }

    pub fn drift(&mut self, drift: &Drift) {
        self.metrics.drift(drift);
        self.status.drift(drift);
        if drift.is_empty() {
            self.logs.unannounced.recovered();
            if self.logs.drift.recovered().is_some() {
                tracing::info!("cache matches the server again");
            }
        }
    }

    /// An audit started a new divergence.
    pub fn diverged(&mut self, drift: &Drift) {
        if let Some(repeated) = self.logs.drift.failed("drift") {
            tracing::info!(
                missing = %name_list(&drift.missing),
                extra = %name_list(&drift.extra),
                changed = %name_list(&drift.changed),
                repeated,
                "cache differs from server"
            );
        }
    }

    pub fn unannounced(&mut self, grace: Duration) {
        self.metrics.unannounced_change();
        self.status.event(
            "unannounced_change",
            format!(
                "the server's list changed and no list_changed arrived within {}",
                humantime::format_duration(grace)
            ),
        );
        if let Some(repeated) = self.logs.unannounced.failed("unannounced") {
            tracing::warn!(
                repeated,
                "server list changed without list_changed within notification_grace"
            );
        }
    }

    /// What a 2025-era client of this modern server hears (measured by the legacy watch).
    pub fn legacy_path(&self, verdict: LegacyVerdict) {
        self.metrics.legacy_path(verdict.hears());
        self.status.legacy_clients(verdict);
        if verdict.hears() == Some(false) {
            tracing::info!(
                cause = verdict.as_str(),
                "legacy-era clients of this server never hear tool list changes"
            );
        }
    }

    /// The connection judged by its server's contract: what is promised, and whether a promise
    /// is broken now (a correct client holds a stale list). Logged when either flips.
    pub fn judged(&mut self, contract: &Contract, stale: bool) {
        self.metrics.contract(contract.promised(), stale);
        self.status.contract(contract, stale);
        let now = (contract.promised(), stale);
        let was = self.judged.replace(now);
        if was.map(|(_, s)| s) != Some(stale) && (stale || was.is_some()) {
            if stale {
                tracing::warn!(
                    promise = contract.promise(),
                    "a promise to caching clients is broken: correct clients hold a stale tool list"
                );
            } else {
                tracing::info!("no promise to caching clients is broken any more");
            }
        }
        if was.map(|(p, _)| p) != Some(contract.promised()) && !contract.promised() {
            tracing::info!(contract = %contract.words(), "the server promises caching clients nothing");
        }
    }

    pub fn ttl_violation(&self, ttl: Duration) {
        self.metrics.ttl_violation();
        self.status.event(
            "ttl_violation",
            format!(
                "the server's list changed while its previous listing promised freshness for {} (ttlMs), without list_changed",
                humantime::format_duration(ttl)
            ),
        );
    }

    pub fn probe_done(
        &mut self,
        index: usize,
        tool: &str,
        elapsed: Duration,
        verdict: Result<(), Failed>,
    ) {
        let log = &mut self.logs.probes[index];
        match &verdict {
            Err((reason, detail)) => {
                if let Some(repeated) = log.failed(reason.as_str()) {
                    tracing::warn!(tool = %tool, reason = reason.as_str(), error = %detail, repeated, "functional probe failed");
                }
            }
            Ok(()) => {
                if let Some(failures) = log.recovered() {
                    tracing::info!(tool = %tool, failures, "functional probe passes again");
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
}
