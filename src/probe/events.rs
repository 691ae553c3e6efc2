//! One place where what happens to a connection is recorded: each event goes to the metrics,
//! the status page and (rate-limited, see [`super::repeats`]) the log together, so the three
//! views cannot disagree. The connection's state machine decides; this module only tells.
//!
//! Log lines carry no target or connection fields of their own: the connection task runs inside
//! a tracing span that has them, so no line can lack them.
//!
//! Every line goes through `limited!` with the [`Repeats`] of its kind of event: one line per
//! change of state, a `repeated=N` summary at most every 5 minutes, and at most
//! [`super::repeats::LINES_PER_WINDOW`] lines per kind and window, however often the state
//! changes. The macro is the only way this module writes a line (a test reads the source to
//! make sure), so a new kind of event cannot log without a limiter: with the 12 kinds below, a
//! connection writes at most 12 × 4 lines (plus one per functional probe) per 5 minutes.
//!
//! Events of a list take the list: the tool list's go to its own series and the status page as
//! they always did, the other lists' to the `list`-labelled series (see
//! `crate::probe::metrics`), the status page's event log and one limiter for all of them.

use std::sync::Arc;
use std::time::Duration;

use super::Trigger;
use super::contract::Contract;
use super::functional::Failed;
use super::legacy_watch::LegacyVerdict;
use super::repeats::{Repeats, name_list};
use super::status::{ConnState, ConnStatusHandle};
use crate::probe::metrics::ConnMetrics;
use mcp_client::channel::ChannelEvent;
use mcp_client::listing::changes::ToolChange;
use mcp_client::listing::items::{Drift, ItemSet};
use mcp_client::listing::list::List;
use mcp_client::listing::walker::WalkReport;
use mcp_client::mcp::{Client, McpError, Reason};

/// Write a log line when `$gate` (a [`Repeats`] decision) says so, with its count as `$field`.
macro_rules! limited {
    ($gate:expr, $level:ident, $field:ident, $($rest:tt)+) => {
        if let Some($field) = $gate {
            tracing::$level!($field, $($rest)+);
        }
    };
}

/// How much of a stdio server's stderr the status page shows when its process ends.
const STDERR_SHOWN: usize = 1024;

/// The limiter of each kind of event's log lines: every kind has its own.
#[derive(Default)]
struct Logs {
    opened: Repeats,
    session: Repeats,
    channel: Repeats,
    walk: Repeats,
    changes: Repeats,
    drift: Repeats,
    unannounced: Repeats,
    rejected: Repeats,
    legacy: Repeats,
    stale: Repeats,
    promise: Repeats,
    /// The lists other than the tools (their drift, unannounced changes and verdicts).
    lists: Repeats,
    probes: Vec<Repeats>,
}

/// The recording side of one connection.
pub struct Events {
    pub metrics: Arc<ConnMetrics>,
    status: ConnStatusHandle,
    logs: Logs,
    /// The last verdict recorded: (promised, stale), so flips are logged once.
    judged: Option<(bool, bool)>,
    /// The other lists' last verdicts (stale), by [`List`] order.
    lists_stale: [Option<bool>; 4],
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
            lists_stale: [None; 4],
        }
    }

    pub fn session_opened(&mut self, client: &Client, trigger: Trigger) {
        let info = client.info();
        self.metrics.session_opened(client.era(), info);
        self.status.session_opened(client.era(), info, trigger);
        limited!(self.logs.opened.occurred("opened"), debug, repeated, era = client.era().as_str(), protocol_version = %info.protocol_version, "session opened");
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
        limited!(self.logs.session.failed(Reason::SessionExpired.as_str()), warn, repeated, reason = %Reason::SessionExpired, retry_in = ?retry_in, "session expired; re-initializing");
    }

    /// The session failed (or could not open); a new one opens after `retry_in`.
    pub fn session_dead(&mut self, e: &McpError, retry_in: Duration) {
        self.status.session_ended(
            "session_closed",
            format!("{}: {}; retry in {retry_in:?}", e.reason, e.detail),
        );
        limited!(self.logs.session.failed(e.reason.as_str()), warn, repeated, reason = %e.reason, error = %e.detail, retry_in = ?retry_in, "session failed");
    }

    /// The session answered: up, and whatever failed before has recovered.
    pub fn up(&mut self) {
        self.metrics.set_up(true);
        self.status.state(ConnState::Up);
        limited!(
            self.logs.session.recovered(),
            info,
            failures,
            "session works again"
        );
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

    pub fn channel(&mut self, client: &Client, event: &ChannelEvent) {
        let name = client.channel_name();
        match event {
            ChannelEvent::Opened {
                after_gap,
                reconnected,
                tools_list_changed,
            } => {
                self.metrics.stream(*tools_list_changed);
                self.logs.channel.reset();
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
                    mcp_client::mcp::Era::Legacy => "server offers no GET stream (405)",
                    mcp_client::mcp::Era::Modern => {
                        "server does not implement subscriptions/listen"
                    }
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
                    limited!(self.logs.channel.failed(e.reason.as_str()), debug, repeated, reason = %e.reason, "notification channel lost");
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

    /// A list other than the tools is watched from now on (`on`), or no longer.
    pub fn list_watched(&self, list: List, on: bool) {
        if !on {
            self.metrics.list_unwatched(list);
        }
        self.status.list_watched(list, on);
    }

    pub fn list_changed(&self, list: List, n: u64) {
        if list != List::Tools {
            return self.metrics.list_notifications(list, n);
        }
        self.metrics.list_changed(n);
        self.status.list_changed(n);
    }

    pub fn walk_started(&self, list: List, trigger: Trigger) {
        if list != List::Tools {
            return;
        }
        self.metrics.walk_started(trigger);
        self.status.walk_started(trigger);
    }

    /// A walk ended (its report is recorded whole; the caller applies the listing).
    pub fn walk_finished(
        &mut self,
        list: List,
        trigger: Trigger,
        report: &WalkReport,
        elapsed: Duration,
    ) {
        if list != List::Tools {
            self.metrics.list_walk_finished(list, report);
            if let Ok(w) = &report.result {
                self.status.list_walked(list, w.items.len(), None);
            }
            if let Err(e) = &report.result {
                limited!(self.logs.lists.failed(e.reason()), warn, repeated, list = list.as_str(), trigger = trigger.as_str(), reason = e.reason(), error = %e, "walk failed");
            }
            return;
        }
        self.metrics.walk_finished(trigger, report, elapsed);
        let outcome = match &report.result {
            Ok(w) => Ok((w.pages, w.items.len())),
            Err(e) => Err((report.requests, e.to_string())),
        };
        self.status.walk_finished(trigger, outcome, elapsed);
        if report.rejected > 0 {
            limited!(
                self.logs.rejected.failed("x_mcp_header"),
                warn,
                repeated,
                tools = report.rejected,
                "tools dropped from the listing: invalid x-mcp-header annotations"
            );
        } else if report.answered > 0 {
            self.logs.rejected.recovered();
        }
        match &report.result {
            Err(e) => {
                limited!(self.logs.walk.failed(e.reason()), warn, repeated, trigger = trigger.as_str(), reason = e.reason(), error = %e, "walk failed");
                if trigger.refreshes_cache() {
                    self.metrics.cache_refresh(trigger, false);
                } else {
                    self.metrics.consistency_check(false);
                }
            }
            Ok(_) => {
                limited!(
                    self.logs.walk.recovered(),
                    info,
                    failures,
                    "walks complete again"
                );
            }
        }
    }

    pub fn cache_replaced(&self, list: List, trigger: Trigger, tools: &ItemSet, unchanged: bool) {
        if list != List::Tools {
            self.status
                .list_walked(list, tools.len(), Some(tools.len()));
            return self.metrics.list_cache_view(list, tools);
        }
        if trigger == Trigger::Notification && unchanged {
            self.metrics.list_changed_without_change();
        }
        self.metrics.cache_view(tools);
        self.metrics.cache_refresh(trigger, true);
        self.status.cache_replaced(trigger, tools);
    }

    /// Items changed between this connection's last two listings of `list`: counted by class.
    /// Tools are shown per tool on the status page and logged (breaking and unknown ones by
    /// name; a list that keeps changing is one line, then a summary every 5 minutes); the other
    /// lists get one timeline entry and a line when items went or broke.
    pub fn tool_changes(&mut self, list: List, changes: Vec<ToolChange>) {
        let counts = mcp_client::listing::changes::counts(&changes);
        if list != List::Tools {
            self.metrics.list_changes(list, counts);
            self.status.list_changes(list, &changes);
            let removed = counts[1] + counts[2];
            if removed > 0 {
                limited!(
                    self.logs.lists.occurred("changed"),
                    info,
                    repeated,
                    list = list.as_str(),
                    removed_or_breaking = removed,
                    "list items removed or changed incompatibly"
                );
            }
            return;
        }
        self.metrics.tool_changes(counts);
        let named = |class: &str| -> Vec<String> {
            changes
                .iter()
                .filter(|c| c.change == class)
                .map(|c| c.tool.clone())
                .collect()
        };
        let (breaking, unknown) = (named("breaking"), named("unknown"));
        if !breaking.is_empty() || !unknown.is_empty() {
            limited!(
                self.logs.changes.occurred("changed"),
                info,
                repeated,
                breaking = %name_list(&breaking),
                unknown = %name_list(&unknown),
                "tool definitions changed"
            );
        }
        self.status.tool_changes(changes);
    }

    pub fn audited(&self, list: List) {
        if list == List::Tools {
            self.metrics.consistency_check(true);
        }
    }

    pub fn drift(&mut self, list: List, drift: &Drift) {
        if list != List::Tools {
            self.status.list_drift(list, drift);
            return self.metrics.list_drift(list, drift);
        }
        self.metrics.drift(drift);
        self.status.drift(drift);
        if drift.is_empty() {
            self.logs.unannounced.recovered();
            limited!(
                self.logs.drift.recovered(),
                info,
                failures,
                "cache matches the server again"
            );
        }
    }

    /// An audit started a new divergence.
    pub fn diverged(&mut self, list: List, drift: &Drift) {
        let log = match list {
            List::Tools => &mut self.logs.drift,
            _ => &mut self.logs.lists,
        };
        limited!(
            log.failed("drift"),
            info,
            repeated,
            list = list.as_str(),
            missing = %name_list(&drift.missing),
            extra = %name_list(&drift.extra),
            changed = %name_list(&drift.changed),
            "cache differs from server"
        );
    }

    pub fn unannounced(&mut self, list: List, grace: Duration) {
        let log = match list {
            List::Tools => {
                self.metrics.unannounced_change();
                &mut self.logs.unannounced
            }
            _ => {
                self.metrics.list_unannounced(list);
                &mut self.logs.lists
            }
        };
        self.status.event(
            "unannounced_change",
            format!(
                "the server's {list} list changed and no {} arrived within {}",
                list.changed_notification(),
                humantime::format_duration(grace)
            ),
        );
        limited!(
            log.failed("unannounced"),
            warn,
            repeated,
            list = list.as_str(),
            "server list changed without list_changed within notification_grace"
        );
    }

    /// What a 2025-era client of this modern server hears (measured by the legacy watch).
    pub fn legacy_path(&mut self, verdict: LegacyVerdict) {
        self.metrics.legacy_path(verdict.hears());
        self.status.legacy_clients(verdict);
        if verdict.hears() == Some(false) {
            limited!(
                self.logs.legacy.failed(verdict.as_str()),
                info,
                repeated,
                cause = verdict.as_str(),
                "legacy-era clients of this server never hear tool list changes"
            );
        } else {
            self.logs.legacy.reset();
        }
    }

    /// The connection judged by its server's contract: what is promised, and whether a promise
    /// is broken now (a correct client holds a stale list). Logged when either flips.
    pub fn judged(&mut self, list: List, contract: &Contract, stale: bool) {
        if list != List::Tools {
            self.metrics.list_stale(list, stale);
            self.status.list_judged(list, contract.promise(), stale);
            let was = self.lists_stale[list as usize].replace(stale);
            if was != Some(stale) && (stale || was.is_some()) {
                let words = if stale {
                    "a promise to caching clients is broken: correct clients hold a stale list"
                } else {
                    "no promise to caching clients about this list is broken any more"
                };
                self.status
                    .event("list_cache_stale", format!("{list}: {words}"));
                limited!(
                    self.logs.lists.failed("stale"),
                    warn,
                    repeated,
                    list = list.as_str(),
                    stale,
                    promise = contract.promise(),
                    "{words}"
                );
            }
            return;
        }
        self.metrics.contract(contract.promised(), stale);
        self.status.contract(contract, stale);
        let now = (contract.promised(), stale);
        let was = self.judged.replace(now);
        if was.map(|(_, s)| s) != Some(stale) && (stale || was.is_some()) {
            if stale {
                limited!(
                    self.logs.stale.failed("stale"),
                    warn,
                    repeated,
                    promise = contract.promise(),
                    "a promise to caching clients is broken: correct clients hold a stale tool list"
                );
            } else {
                limited!(
                    self.logs.stale.recovered(),
                    info,
                    failures,
                    "no promise to caching clients is broken any more"
                );
            }
        }
        if was.map(|(p, _)| p) != Some(contract.promised()) {
            if contract.promised() {
                self.logs.promise.reset();
            } else {
                limited!(self.logs.promise.failed("none"), info, repeated, contract = %contract.words(), "the server promises caching clients nothing");
            }
        }
    }

    pub fn ttl_violation(&self, list: List, ttl: Duration) {
        match list {
            List::Tools => self.metrics.ttl_violation(),
            _ => self.metrics.list_ttl_violation(list),
        }
        self.status.event(
            "ttl_violation",
            format!(
                "the server's {list} list changed while its previous listing promised freshness for {} (ttlMs), without list_changed",
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
                limited!(log.failed(reason.as_str()), warn, repeated, tool = %tool, reason = reason.as_str(), error = %detail, "functional probe failed");
            }
            Ok(()) => {
                limited!(log.recovered(), info, failures, tool = %tool, "functional probe passes again");
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::Write;
    use std::sync::Mutex;

    use super::*;
    use crate::config::Config;
    use crate::probe::contract::Contract;
    use crate::probe::functional::ProbeFailure;
    use crate::probe::repeats::LINES_PER_WINDOW;
    use crate::probe::status::StatusBoard;
    use crate::telemetry::Telemetry;
    use mcp_client::mcp::Era;

    /// Log output captured in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn events() -> Events {
        let config = Config::parse(
            "targets:\n  - name: kb\n    url: http://kb.example/mcp\n    probes:\n      - tool: kb_stats\n",
            "test.yml",
            &|_| None,
        )
        .expect("valid");
        let t = &config.targets[0];
        let metrics = Telemetry::new()
            .add_target(&t.name, 1, &["kb_stats".to_string()])
            .connection(0);
        let status = StatusBoard::default().add(t).connection(0);
        Events::new(metrics, status, 1)
    }

    fn change(tool: &str, change: &'static str) -> ToolChange {
        ToolChange {
            tool: tool.into(),
            change,
            findings: Vec::new(),
            more: 0,
            description_changed: false,
        }
    }

    /// Every event that logs, driven many times with its state changing on each round, writes
    /// a bounded number of lines of each message: a kind that logs without its limiter fails.
    #[test]
    fn every_kind_of_event_logs_a_bounded_number_of_lines() {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        const ROUNDS: usize = 2_000;
        tracing::subscriber::with_default(subscriber, || {
            let mut e = events();
            let announce = Contract::new(Era::Legacy, true, Duration::ZERO);
            let silent = Contract::new(Era::Legacy, false, Duration::ZERO);
            let verdicts = [LegacyVerdict::DeclaresNone, LegacyVerdict::NoStream];
            let drift = Drift {
                missing: vec!["a".into()],
                ..Drift::default()
            };
            for i in 0..ROUNDS {
                let flip = i % 2 == 0;
                let reason = if flip {
                    Reason::Timeout
                } else {
                    Reason::Connect
                };
                e.session_expired(Duration::from_secs(1));
                e.session_dead(&McpError::new(reason, "down"), Duration::from_secs(1));
                e.up();
                for list in [List::Tools, List::Prompts] {
                    e.tool_changes(list, vec![change(&format!("t{i}"), "breaking")]);
                }
                for list in [List::Tools, List::Prompts] {
                    e.diverged(list, &drift);
                    e.drift(list, &Drift::default());
                    e.unannounced(list, Duration::from_secs(5));
                    e.judged(list, if flip { &announce } else { &silent }, flip);
                }
                e.legacy_path(verdicts[i % 2]);
                e.legacy_path(LegacyVerdict::Delivered);
                let verdict = if flip {
                    Err((ProbeFailure::Timeout, "slow".to_string()))
                } else {
                    Ok(())
                };
                e.probe_done(0, "kb_stats", Duration::from_millis(1), verdict);
            }
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let mut per_message: BTreeMap<&str, usize> = BTreeMap::new();
        for line in text.lines() {
            let message = line
                .split_once(": ")
                .map_or(line, |(_, rest)| rest)
                .split(" repeated=")
                .next()
                .unwrap_or(line)
                .split(" failures=")
                .next()
                .unwrap_or(line);
            *per_message.entry(message).or_default() += 1;
        }
        assert!(
            per_message.len() >= 8,
            "the events logged what they log: {per_message:#?}"
        );
        // Kinds share nothing but a message may be written by two states of one kind (a
        // failure and its recovery): each kind's lines are within its window's budget.
        let total: usize = per_message.values().sum();
        let kinds = 11 + 1;
        assert!(
            total <= kinds * LINES_PER_WINDOW as usize,
            "{total} lines for {ROUNDS} rounds: {per_message:#?}"
        );
        for (message, n) in &per_message {
            assert!(
                *n <= LINES_PER_WINDOW as usize,
                "{message:?} written {n} times"
            );
        }
    }

    /// The structural half: this module writes log lines only through `limited!`.
    #[test]
    fn no_log_line_bypasses_the_limiter() {
        let source = include_str!("events.rs");
        let code = source.split("#[cfg(test)]").next().unwrap();
        let direct: Vec<&str> = code
            .lines()
            .filter(|l| l.contains("tracing::") && !l.contains("tracing::$level!"))
            .collect();
        assert!(
            direct.is_empty(),
            "log lines without a limiter: {direct:#?}"
        );
        for macro_name in ["info!", "warn!", "debug!", "error!", "trace!", "event!"] {
            let bare = code
                .lines()
                .filter(|l| {
                    let t = l.trim_start();
                    !t.starts_with("//") && t.contains(macro_name) && !t.contains("limited!")
                })
                .count();
            assert_eq!(bare, 0, "a `{macro_name}` outside `limited!`");
        }
    }
}
