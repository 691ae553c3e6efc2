//! How a connection task records what happens to it: state changes, sessions, walks, cache
//! replacements, drift, the contract's verdict, the legacy watch and probe results.
//!
//! Each write goes through a [`ConnStatusHandle`], which bounds every server-supplied string as it
//! is stored, keeps the timeline and the latest event of each kind, turns changes (not steady
//! states) into timeline entries, and re-judges the target after every write so the "since" facts
//! are the moments things changed.

use std::sync::Arc;
use std::time::Duration;

use super::board::lock;
use super::{
    CHANGES_PER_CONNECTION, CacheStatus, Capabilities, ConnState, ConnStatus, DriftStatus,
    EVENTS_PER_CONNECTION, Event, LIST_DRIFT_NAMES, LegacyClientsStatus, ListStatus, MAX_DETAIL,
    MAX_LABEL, MAX_NAME, SessionStatus, Stamp, TargetStatus, ToolChangeStatus, WalkStatus, keep,
};
use crate::probe::Trigger;
use crate::probe::contract::Contract;
use crate::probe::legacy_watch::LegacyVerdict;
use mcp_client::listing::changes::ToolChange;
use mcp_client::listing::items::{Drift, ItemSet};
use mcp_client::listing::list::List;
use mcp_client::mcp::{Era, ServerInfo};
use mcp_client::text;

impl TargetStatus {
    /// A handle for connection `index`.
    pub fn connection(self: &Arc<Self>, index: u16) -> ConnStatusHandle {
        ConnStatusHandle {
            target: self.clone(),
            index,
        }
    }
}

/// What one connection task writes through.
pub struct ConnStatusHandle {
    target: Arc<TargetStatus>,
    index: u16,
}

/// The first five changes by key and class, and how many more.
fn summary(changes: &[ToolChange]) -> String {
    let mut summary: Vec<String> = changes
        .iter()
        .take(5)
        .map(|c| format!("{} {}", keep(&c.tool, MAX_NAME), c.change))
        .collect();
    if changes.len() > 5 {
        summary.push(format!("and {} more", changes.len() - 5));
    }
    summary.join(", ")
}

impl ConnStatusHandle {
    fn with<R>(&self, f: impl FnOnce(&mut ConnStatus) -> R) -> Option<R> {
        let r = self.target.connections.get(self.index as usize).map(|c| {
            let mut s = lock(c);
            let r = f(&mut s);
            s.fit(self.target.fleet.share());
            r
        });
        self.rejudge();
        r
    }

    /// Record when the target's judgement changes, as it changes (not when someone looks).
    fn rejudge(&self) {
        self.target.judge(|_, _, _, _| ());
    }

    fn push(s: &mut ConnStatus, kind: &'static str, detail: &str) {
        let e = Event {
            at: Stamp::now(),
            kind,
            detail: keep(detail, MAX_DETAIL),
        };
        s.last_events.insert(e.clone());
        s.events.push(e, EVENTS_PER_CONNECTION);
    }

    /// Watch another list (`on`), or stop: its entry appears or goes.
    pub fn list_watched(&self, list: List, on: bool) {
        self.with(|s| {
            let at = s.lists.iter().position(|l| l.list == list.as_str());
            match (on, at) {
                (true, None) => {
                    s.lists.push(ListStatus::new(list.as_str()));
                    s.lists.sort_by_key(|l| l.list.parse::<List>().ok());
                    // Three at most, kept for the session's life: no room for a fourth.
                    s.lists.shrink_to_fit();
                }
                (false, Some(i)) => {
                    s.lists.remove(i);
                }
                _ => {}
            }
        });
    }

    /// Record on another list's entry, when it is watched.
    fn with_list(&self, list: List, f: impl FnOnce(&mut ListStatus)) {
        self.with(|s| {
            if let Some(l) = s.lists.iter_mut().find(|l| l.list == list.as_str()) {
                f(l);
            }
        });
    }

    /// A complete walk of another list (`cache`: it refreshed the cache too).
    pub fn list_walked(&self, list: List, server: usize, cache: Option<usize>) {
        self.with_list(list, |l| {
            l.server = Some(server);
            if cache.is_some() {
                l.cache = cache;
            }
        });
    }

    pub fn list_drift(&self, list: List, drift: &Drift) {
        let mut d = DriftStatus::from(drift);
        d.cut(LIST_DRIFT_NAMES);
        self.with_list(list, |l| l.drift = d);
    }

    pub fn list_judged(&self, list: List, promise: &'static str, stale: bool) {
        self.with_list(list, |l| {
            l.promise = Some(promise);
            l.stale = stale;
        });
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
            s.state_since = Stamp::now();
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
                opened_at: Stamp::now(),
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
                finished_at: Stamp::now(),
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

    pub fn cache_replaced(&self, trigger: Trigger, tools: &ItemSet) {
        self.with(|s| {
            s.cache = CacheStatus {
                tools: Some(tools.len()),
                replaced_at: Some(Stamp::now()),
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
            let at = Stamp::now();
            Self::push(s, "tool_changed", &summary(&changes));
            let skip = changes.len().saturating_sub(CHANGES_PER_CONNECTION);
            for c in changes.into_iter().skip(skip) {
                let change = ToolChangeStatus {
                    at,
                    change: c.shown(),
                };
                s.changes.push(change, CHANGES_PER_CONNECTION);
            }
        });
    }

    /// Items of another list changed between two listings: one timeline entry naming the list
    /// (the classified differences are the tool list's alone to keep).
    pub fn list_changes(&self, list: List, changes: &[ToolChange]) {
        self.with(|s| {
            Self::push(
                s,
                "list_items_changed",
                &format!("{list}: {}", summary(changes)),
            )
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
                (false, None) => s.stale_since = Some(Stamp::now()),
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
                    c.broken_since = Some(Stamp::now());
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
                at: Stamp::now(),
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
        p.last_run_at = Some(Stamp::now());
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
