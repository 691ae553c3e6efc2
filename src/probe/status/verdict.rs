//! A first look that says why: each target judged from what the board already holds.
//!
//! Severity, worst first (the order of the status page and `/status.json`):
//!
//! 1. `down` — no connection is up (as `mcp_probe_up` = 0): no session, or pings fail.
//! 2. `not_ready` — up, but no up connection has a complete last walk, or a functional probe has
//!    not passed on the current session (as `mcp_probe_ready` = 0).
//! 3. `stale` — ready, but a correct client of some connection's era holds the wrong tools: a
//!    promise of the era is broken (legacy: the cache differs from the server; 2026-07-28: a
//!    change inside a fresh `ttlMs`, or a declared `listChanged` not delivered; see
//!    [`crate::probe::contract`]). Readiness does not cover this (docs/health.md says why); the
//!    page never shows it green.
//! 4. `at_risk` — ready and current, but the next change will not reach a client in time: no
//!    `listChanged` capability, no notification stream, failing re-lists, or one of several
//!    connections not up.
//! 5. `no_promise` — a 2026-07-28 server that promises caching clients nothing (no
//!    `listChanged`, `ttlMs` 0): not stale, since its clients must re-list before every use, but
//!    a client that caches anyway is stale after each change.
//! 6. `healthy` — none of the above.
//!
//! Every finding is a cause with the severity it stands for; the target's severity is that of
//! its worst cause, and the causes are listed worst first (the same cause on several connections
//! once, naming them).

use std::time::SystemTime;

use serde::Serialize;

use super::{ConnState, ConnStatus, ProbeStatus, Stamp};
use mcp_client::text;

/// Causes kept per target, worst first; the rest are counted in a last entry. The first one or
/// two say why; a long list is what the details below the summary are for.
pub const MAX_CAUSES: usize = 4;
/// Connections named in one cause before the rest are counted.
const MAX_CONNECTIONS_NAMED: usize = 4;

/// How bad a target is; the derived order is worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Down,
    NotReady,
    Stale,
    AtRisk,
    NoPromise,
    Healthy,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Down => "down",
            Severity::NotReady => "not_ready",
            Severity::Stale => "stale",
            Severity::AtRisk => "at_risk",
            Severity::NoPromise => "no_promise",
            Severity::Healthy => "healthy",
        }
    }

    /// For people: `not ready`, `at risk`.
    pub fn words(self) -> &'static str {
        match self {
            Severity::NotReady => "not ready",
            Severity::AtRisk => "at risk",
            Severity::NoPromise => "no promise",
            s => s.as_str(),
        }
    }
}

/// The judgement of one target.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub severity: Severity,
    pub up: bool,
    pub ready: bool,
    pub stale: bool,
    pub causes: Vec<String>,
}

/// One finding: its severity, the words, and the connection it was found on.
struct Finding {
    severity: Severity,
    text: String,
    connection: u16,
}

/// Judge a target from its connections and probes; `now` dates the "3 min ago" of the causes.
pub fn assess(conns: &[&ConnStatus], probes: &[ProbeStatus], now: SystemTime) -> Verdict {
    let up = conns.iter().any(|c| c.state == ConnState::Up);
    let walked = conns.iter().any(|c| is_up(c) && walk_complete(c));
    let passing = |p: &ProbeStatus| probe_passing(p, conns.first().copied());
    let ready = walked && probes.iter().all(passing);
    let stale = conns.iter().any(|c| c.contract.broken);

    let mut found = Vec::new();
    let mut note = |severity, c: &ConnStatus, text: String| {
        found.push(Finding {
            severity,
            text,
            connection: c.connection,
        })
    };
    for c in conns {
        if !is_up(c) {
            let severity = if up { Severity::AtRisk } else { Severity::Down };
            note(severity, c, not_up(c));
        } else if !walked {
            note(Severity::NotReady, c, walk_trouble(c, now));
        }
        if c.contract.broken {
            note(Severity::Stale, c, stale_cause(c, now));
        } else if is_up(c) && promises_nothing(c) {
            note(Severity::NoPromise, c, no_promise(c));
        } else if is_up(c) {
            for r in risks(c, now) {
                note(Severity::AtRisk, c, r);
            }
        }
    }
    let mut causes: Vec<(Severity, String)> = group(found, conns.len());
    if up {
        for p in probes.iter().filter(|p| !passing(p)) {
            causes.push((Severity::NotReady, probe_trouble(p)));
        }
    }
    causes.sort_by_key(|(s, _)| *s);
    let severity = causes.first().map_or(Severity::Healthy, |(s, _)| *s);
    Verdict {
        severity,
        up,
        ready,
        stale,
        causes: cap(causes.into_iter().map(|(_, t)| t).collect()),
    }
}

fn is_up(c: &ConnStatus) -> bool {
    c.state == ConnState::Up
}

/// As `mcp_probe_ready` counts a walk: complete, and on the current session (a new session
/// starts over at "no complete walk").
fn walk_complete(c: &ConnStatus) -> bool {
    c.last_walk
        .as_ref()
        .is_some_and(|w| w.complete && on_this_session(c, w.finished_at))
}

/// `at` is during the connection's current session.
fn on_this_session(c: &ConnStatus, at: Stamp) -> bool {
    c.session.as_ref().is_some_and(|s| at >= s.opened_at)
}

/// As `mcp_probe_ready` counts a probe: it passed, on the session connection 0 (which runs the
/// probes) has now; a new session starts every probe over at "not passing" until it runs again.
fn probe_passing(p: &ProbeStatus, conn0: Option<&ConnStatus>) -> bool {
    p.success
        && p.last_run_at
            .zip(conn0)
            .is_some_and(|(ran, c)| on_this_session(c, ran))
}

/// Why a connection is not up.
fn not_up(c: &ConnStatus) -> String {
    let last_of = |kinds: &[&str]| {
        kinds
            .iter()
            .filter_map(|k| c.last(k))
            .max_by(|a, b| a.at.cmp(&b.at))
            .map(|e| e.detail.clone())
    };
    match c.state {
        ConnState::Down => {
            match last_of(&["session_failed", "session_expired", "session_closed"]) {
                Some(d) => format!("session failing: {d}"),
                None => "session failing".into(),
            }
        }
        ConnState::Unresponsive => match last_of(&["ping_failed"]) {
            Some(d) => format!("pings failing: {d}"),
            None => "pings failing".into(),
        },
        ConnState::Connecting if c.session.is_some() => {
            "session opened, waiting for its first answer".into()
        }
        ConnState::Connecting => "connecting: no session yet".into(),
        ConnState::Up => "up".into(),
    }
}

/// Why an up connection has no complete walk.
fn walk_trouble(c: &ConnStatus, now: SystemTime) -> String {
    match &c.last_walk {
        Some(_) if c.refresh_failures > 0 => relists_failed(c, now),
        Some(w) if !w.complete && on_this_session(c, w.finished_at) => format!(
            "tools/list walk failing: {}",
            w.error.as_deref().unwrap_or("incomplete")
        ),
        _ => "first tools/list walk on this session not complete yet".into(),
    }
}

/// `2 re-lists failed since list_changed 40 s ago: http_status: HTTP 503`.
fn relists_failed(c: &ConnStatus, now: SystemTime) -> String {
    let n = c.refresh_failures;
    let mut s = format!("{n} re-list{} failed", if n == 1 { "" } else { "s" });
    if let Some(e) = c.last("list_changed") {
        s.push_str(&format!(" since list_changed {}", ago(e.at, now)));
    }
    if let Some(e) = c.last_walk.as_ref().and_then(|w| w.error.as_deref()) {
        s.push_str(&format!(": {e}"));
    }
    s
}

/// A 2026-07-28 session whose server promises caching clients nothing (a legacy server that
/// declares no `listChanged` is judged by drift and named as a risk instead: its clients cache
/// anyway).
fn promises_nothing(c: &ConnStatus) -> bool {
    c.contract.promise == Some("none") && c.session.as_ref().is_some_and(|s| s.era == "modern")
}

/// What a server that promises nothing means, and what a caching client would hold now.
fn no_promise(c: &ConnStatus) -> String {
    let mut s = crate::probe::contract::NO_PROMISE.to_string();
    let d = &c.drift.counts;
    if d.total() > 0 {
        s.push_str(&format!(
            "; a copy cached since the last announced change differs now by {}",
            drift_words(c)
        ));
    }
    s
}

/// `1 extra, 1 missing`.
fn drift_words(c: &ConnStatus) -> String {
    let d = &c.drift.counts;
    let by: Vec<String> = [
        (d.extra, "extra"),
        (d.missing, "missing"),
        (d.changed, "changed"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, k)| format!("{n} {k}"))
    .collect();
    by.join(", ")
}

/// Why a connection's correct client is stale (the promise broken), and by how much its cache
/// differs.
fn stale_cause(c: &ConnStatus, now: SystemTime) -> String {
    let broken_since = c.contract.broken_since;
    let since = |e: &&super::Event| broken_since.is_some_and(|s| e.at >= s);
    let ttl_broken = c.last("ttl_violation").filter(since);
    let unannounced = c
        .last("unannounced_change")
        .filter(|e| c.stale_since.is_some_and(|s| e.at >= s));
    let why = if c.refresh_failures > 0 {
        relists_failed(c, now)
    } else if let Some(w) = capability_or_stream(c) {
        w
    } else if let Some(e) = unannounced {
        format!("unannounced change {}", ago(e.at, now))
    } else if let Some(e) = ttl_broken {
        format!(
            "the list changed inside a fresh ttlMs promise without list_changed {}",
            ago(e.at, now)
        )
    } else {
        "cache behind the server, refresh pending".into()
    };
    if c.drift.is_empty() {
        return why;
    }
    format!("{why}; cache differs: {}", drift_words(c))
}

/// What keeps a change from being announced to this connection, if anything.
fn capability_or_stream(c: &ConnStatus) -> Option<String> {
    let s = c.session.as_ref()?;
    if !s.capabilities.list_changed {
        return Some("no listChanged capability".into());
    }
    if !c.notification_stream {
        let why = c
            .last("stream_lost")
            .map_or("not open", |e| e.detail.as_str());
        return Some(format!("no notification stream: {why}"));
    }
    None
}

/// What will make an up connection's (current) cache stale at the next change.
fn risks(c: &ConnStatus, now: SystemTime) -> Vec<String> {
    let mut out = Vec::new();
    if c.refresh_failures > 0 {
        out.push(relists_failed(c, now));
    }
    if let Some(w) = capability_or_stream(c) {
        out.push(w);
    }
    out
}

fn probe_trouble(p: &ProbeStatus) -> String {
    match (&p.last_run_at, p.reason) {
        (None, _) => format!("probe {} not run yet", p.tool),
        (Some(_), Some(r)) if !p.success => format!("probe {} failing: {r}", p.tool),
        (Some(_), _) => format!("probe {} not run on this session yet", p.tool),
    }
}

/// One entry per distinct (severity, text), naming the connections it was found on unless it
/// is every connection of the target.
fn group(found: Vec<Finding>, connections: usize) -> Vec<(Severity, String)> {
    let mut groups: Vec<(Severity, String, Vec<String>)> = Vec::new();
    for f in found {
        let n = f.connection.to_string();
        match groups
            .iter_mut()
            .find(|(s, t, _)| *s == f.severity && *t == f.text)
        {
            Some((_, _, on)) => on.push(n),
            None => groups.push((f.severity, f.text, vec![n])),
        }
    }
    groups
        .into_iter()
        .map(|(s, t, on)| {
            let text = match on.len() {
                n if n == connections => t,
                1 => format!("connection {}: {t}", on[0]),
                _ => format!(
                    "connections {}: {t}",
                    text::list(&on, MAX_CONNECTIONS_NAMED)
                ),
            };
            (s, text)
        })
        .collect()
}

fn cap(mut causes: Vec<String>) -> Vec<String> {
    if causes.len() > MAX_CAUSES {
        let more = causes.len() - (MAX_CAUSES - 1);
        causes.truncate(MAX_CAUSES - 1);
        causes.push(format!("… and {more} more"));
    }
    causes
}

/// `12 s ago`, `3 min ago`, `2 h ago`, `4 d ago`.
pub fn ago(at: Stamp, now: SystemTime) -> String {
    let s = now.duration_since(at.time()).unwrap_or_default().as_secs();
    match s {
        0..60 => format!("{s} s ago"),
        60..3600 => format!("{} min ago", s / 60),
        3600..86400 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86400),
    }
}
