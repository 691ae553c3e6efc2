//! The status page: server-rendered HTML from the same snapshot as `/status.json`.
//!
//! No scripts and no build step: the page is read during incidents, often through a proxy or a
//! port-forward, and must work in any browser. It refreshes itself every few seconds.
//!
//! The first screen answers "what is wrong, since when, and why": the summary lists targets worst
//! first (the snapshot's order), each with its severity, up/ready, whether its cache is stale (a
//! stale cache is never shown green, even on a ready target), its causes and the sticky "since"
//! fact. The details follow in the same order, so when the page reaches its byte cap
//! ([`MAX_RESPONSE_BYTES`]) it is the healthiest targets' details that are left out, at an element
//! boundary, with a notice.

use std::fmt::Write;
use std::time::SystemTime;

use crate::probe::status::verdict::ago;
use crate::probe::status::{
    ConnStatus, ListStatus, MAX_RESPONSE_BYTES, ProbeStatus, Snapshot, Stamp, TargetSnapshot,
};

/// Seconds between automatic reloads of the page.
const REFRESH_SECONDS: u32 = 10;
/// Bytes held back for what always closes the page: an open table's end, the truncation notice
/// and `</body></html>`.
const TAIL: usize = 1024;

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.25em .5em;\
text-align:left;vertical-align:top}th{background:#f3f3f3}code{font-size:.95em}\
.bad{color:#b00020;font-weight:600}.ok{color:#1b5e20}.warn{color:#8a5a00;font-weight:600}\
.sev{display:inline-block;padding:0 .45em;border-radius:.25em;color:#fff;font-weight:600;\
font-size:.9em;white-space:nowrap}.sev.down{background:#b00020}.sev.not_ready{background:#c43e00}\
.sev.stale{background:#9a6700}.sev.at_risk{background:#6b6b00}.sev.no_promise{background:#455a64}\
.sev.healthy{background:#1b5e20}\
h2{margin-top:1.5em;border-bottom:1px solid #ddd}small{color:#666}ul.causes{margin:.25em 0}\
td.since{white-space:nowrap}td.cause{min-width:16em}td ul.causes{margin:0;padding-left:1.1em}";

/// The page under construction: pieces are added whole or not at all, so the byte cap never
/// cuts inside an element.
struct Page {
    h: String,
    /// A piece did not fit: nothing more is added, except what [`TAIL`] holds back.
    cut: bool,
}

impl Page {
    /// Add `piece` if it fits under the cap; false (and nothing more from now on) if not.
    fn add(&mut self, piece: &str) -> bool {
        if !self.cut && self.h.len() + piece.len() + TAIL <= MAX_RESPONSE_BYTES {
            self.h.push_str(piece);
            true
        } else {
            self.cut = true;
            false
        }
    }

    /// A table: `head` (the opening tag and header row), then as many rows as fit, closed
    /// either way. The number of rows added (`None`: not even the head fitted); [`Page::cut`]
    /// says whether everything did.
    fn table(&mut self, head: &str, rows: impl IntoIterator<Item = String>) -> Option<usize> {
        if !self.add(head) {
            return None;
        }
        let mut n = 0;
        for row in rows {
            if !self.add(&row) {
                break;
            }
            n += 1;
        }
        self.h.push_str("</table>\n");
        Some(n)
    }
}

/// `placeholder` when `rows` is empty, else `rows`.
fn or_else<'a>(
    empty: bool,
    placeholder: &'a str,
    rows: impl Iterator<Item = String> + 'a,
) -> impl Iterator<Item = String> + 'a {
    empty
        .then(|| placeholder.to_string())
        .into_iter()
        .chain(rows)
}

pub fn render(s: &Snapshot) -> String {
    let now = s.generated_at.time();
    let mut p = Page {
        h: String::with_capacity(16 * 1024),
        cut: false,
    };
    p.add(&format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>MCP Exporter</title><style>{STYLE}</style></head><body>\n\
         <h1>MCP Exporter</h1>\n<p>Version {} · generated {} · refreshes every {REFRESH_SECONDS} s · \
         worst targets first · \
         <a href=\"/metrics\">/metrics</a> · <a href=\"/status.json\">/status.json</a></p>\n",
        escape(s.version),
        escape(&s.generated_at.to_string())
    ));
    let shown = summary(&mut p, s, now);
    let mut detailed = 0;
    for t in &s.targets {
        if !target(&mut p, t, s.generated_at, now) {
            break;
        }
        detailed += 1;
    }
    if p.cut {
        let _ = writeln!(
            p.h,
            "<p class=\"bad\" id=\"truncated\">This page reached its {} KiB cap: the summary shows \
             {shown} of {n} targets, the details {detailed} of {n}. The rest is left out; \
             <a href=\"/metrics\">/metrics</a> has every target.</p>",
            MAX_RESPONSE_BYTES / 1024,
            n = s.targets.len(),
        );
    }
    p.h.push_str("</body></html>\n");
    p.h
}

/// `22:04:13 UTC`, with the date when it is not the day of `generated_at`.
fn clock(at: Stamp, generated_at: Stamp) -> String {
    let text = at.to_string();
    match (text.get(..10), text.get(11..19)) {
        (Some(_), Some(time)) if at.same_utc_day(generated_at) => format!("{time} UTC"),
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => text,
    }
}

/// `stale since 22:04:13 UTC` and `3 min ago`, escaped.
fn since(t: &TargetSnapshot, generated_at: Stamp, now: SystemTime) -> (String, String) {
    (
        escape(&format!(
            "{} since {}",
            t.severity.words(),
            clock(t.since, generated_at)
        )),
        escape(&ago(t.since, now)),
    )
}

fn sev_badge(t: &TargetSnapshot) -> String {
    format!(
        "<span class=\"sev {}\">{}</span>",
        t.severity.as_str(),
        t.severity.words()
    )
}

fn yes_no(v: bool, yes: &str, no: &str) -> String {
    let (class, word) = if v { ("ok", yes) } else { ("bad", no) };
    format!("<td class=\"{class}\">{word}</td>")
}

/// The cache column: a stale cache is a warning whatever else holds; never green.
fn cache_cell(t: &TargetSnapshot) -> &'static str {
    if t.stale {
        "<td class=\"warn\">stale</td>"
    } else if t.severity == crate::probe::status::Severity::NoPromise {
        "<td>no promise: clients re-list before use</td>"
    } else if t.connections.iter().any(|c| c.cache.tools.is_some()) {
        "<td class=\"ok\">current</td>"
    } else {
        "<td>no cache yet</td>"
    }
}

/// The summary table; returns how many targets it shows.
fn summary(p: &mut Page, s: &Snapshot, now: SystemTime) -> usize {
    let rows = s
        .targets
        .iter()
        .map(|t| summary_row(t, s.generated_at, now));
    let shown = p.table(
        "<h2>Targets</h2>\n<table id=\"summary\"><tr><th>Target</th><th>Status</th><th>Up</th>\
         <th>Ready</th><th>Cache</th><th>Cause</th><th>Since</th><th>Connections</th>\
         <th>Drift (extra / missing / changed)</th><th>Probes</th></tr>\n",
        or_else(
            s.targets.is_empty(),
            "<tr><td colspan=\"10\">no targets configured</td></tr>\n",
            rows,
        ),
    );
    shown.unwrap_or(0).min(s.targets.len())
}

fn summary_row(t: &TargetSnapshot, generated_at: Stamp, now: SystemTime) -> String {
    let states: Vec<String> = t
        .connections
        .iter()
        .map(|c| format!("{}: {}", c.connection, c.state.as_str()))
        .collect();
    let (x, m, c) = t.connections.iter().fold((0, 0, 0), |(x, m, c), k| {
        let n = &k.drift.counts;
        (x + n.extra, m + n.missing, c + n.changed)
    });
    let drift_class = if x + m + c > 0 { "warn" } else { "ok" };
    let passing = t.probes.iter().filter(|p| p.success).count();
    let probe_class = if passing == t.probes.len() {
        "ok"
    } else {
        "bad"
    };
    let causes = if t.causes.is_empty() {
        "—".to_string()
    } else {
        causes_list(&t.causes)
    };
    // The Status column names the severity; the Since column is its time.
    let (since, ago) = (
        escape(&clock(t.since, generated_at)),
        escape(&ago(t.since, now)),
    );
    format!(
        "<tr class=\"target\"><td><a href=\"#target-{n}\">{n}</a></td><td>{}</td>{}{}{}\
         <td class=\"cause\">{causes}</td><td class=\"since\">{since}<br><small>{ago}</small></td><td>{}</td>\
         <td class=\"{drift_class}\">{x} / {m} / {c}</td>\
         <td class=\"{probe_class}\">{passing} of {} passing</td></tr>\n",
        sev_badge(t),
        yes_no(t.up, "up", "down"),
        yes_no(t.ready, "ready", "not ready"),
        cache_cell(t),
        escape(&states.join(", ")),
        t.probes.len(),
        n = escape(&t.name),
    )
}

fn causes_list(causes: &[String]) -> String {
    let mut out = String::from("<ul class=\"causes\">");
    for c in causes {
        let _ = write!(out, "<li>{}</li>", escape(c));
    }
    out.push_str("</ul>");
    out
}

/// One target's details; false when the page ran out of room.
fn target(p: &mut Page, t: &TargetSnapshot, generated_at: Stamp, now: SystemTime) -> bool {
    let (since, ago) = since(t, generated_at, now);
    let mut head = format!(
        "<h2 id=\"target-{n}\">{n} {}</h2>\n<p><b>{since}</b> <small>({ago})</small> · {} · {} · \
         cache {}</p>\n",
        sev_badge(t),
        if t.up { "up" } else { "down" },
        if t.ready { "ready" } else { "not ready" },
        if t.stale {
            "<span class=\"warn\">stale</span>"
        } else {
            "current"
        },
        n = escape(&t.name),
    );
    if !t.causes.is_empty() {
        head.push_str(&causes_list(&t.causes));
        head.push('\n');
    }
    let _ = writeln!(head, "<p><code>{}</code></p>", escape(&t.url));
    if !p.add(&head) {
        return false;
    }
    if !t.probes.is_empty() {
        probes(p, &t.probes);
    }
    if let Some(pins) = &t.pins {
        changes::pins(p, pins);
    }
    for c in &t.connections {
        connection(p, c, generated_at, now);
    }
    !p.cut
}

fn probes(p: &mut Page, probes: &[ProbeStatus]) {
    let rows = probes.iter().map(|p| {
        let (class, word) = match (&p.last_run_at, p.success) {
            (None, _) => ("warn", "not run yet"),
            (Some(_), true) => ("ok", "pass"),
            (Some(_), false) => ("bad", "fail"),
        };
        format!(
            "<tr><td><code>{}</code></td><td class=\"{class}\">{word}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>\n",
            escape(&p.tool),
            p.reason.unwrap_or(""),
            escape(p.detail.as_deref().unwrap_or("")),
            p.duration_seconds
                .map(|d| format!("{:.0} ms", d * 1000.0))
                .unwrap_or_default(),
            escape(&p.last_run_at.map(|t| t.to_string()).unwrap_or_default()),
        )
    });
    p.table(
        "<h3>Functional probes</h3>\n<table><tr><th>Tool</th><th>Result</th><th>Reason</th>\
         <th>Detail</th><th>Duration</th><th>Last run</th></tr>\n",
        rows,
    );
}

/// Up to [`crate::probe::status::MAX_DRIFT_NAMES`] names, then `… and N more` for the
/// `total - list.len()` left out.
fn names(list: &[String], total: usize) -> String {
    if total == 0 {
        return "—".into();
    }
    let mut out = list
        .iter()
        .map(|n| format!("<code>{}</code>", escape(n)))
        .collect::<Vec<_>>()
        .join(", ");
    let more = total.saturating_sub(list.len());
    if more > 0 {
        let _ = write!(out, " … and {more} more");
    }
    out
}

fn connection(p: &mut Page, c: &ConnStatus, generated_at: Stamp, now: SystemTime) {
    let heading = format!(
        "<h3>Connection {} — {} <small>since {}</small></h3>\n",
        c.connection,
        c.state.as_str(),
        c.state_since
    );
    if !p.add(&heading) {
        return;
    }
    let mut rows = Vec::new();
    let mut row = |k: &str, v: String| rows.push(format!("<tr><th>{k}</th><td>{v}</td></tr>\n"));
    match &c.session {
        Some(s) => {
            row(
                "Session",
                format!(
                    "{} era, protocol <code>{}</code>, server {} {} (opened {})",
                    s.era,
                    escape(&s.protocol_version),
                    escape(&s.server_name),
                    escape(&s.server_version),
                    s.opened_at
                ),
            );
            row(
                "Capabilities",
                format!(
                    "tools: {}, tools.listChanged: {}",
                    s.capabilities.tools, s.capabilities.list_changed
                ),
            );
        }
        None => row("Session", "none".into()),
    }
    row(
        "Notification stream",
        format!(
            "{} · list_changed received: {}",
            if c.notification_stream {
                "open"
            } else {
                "not open"
            },
            c.list_changed_received
        ),
    );
    if let Some(words) = &c.contract.words {
        let class = if c.contract.broken { "warn" } else { "ok" };
        let state = if c.contract.broken { "broken" } else { "kept" };
        let state = match c.contract.promise {
            Some("none") => String::new(),
            _ => format!(" · <span class=\"{class}\">{state}</span>"),
        };
        row("Promise", format!("{}{state}", escape(words)));
    }
    if let Some(l) = &c.legacy_clients {
        let class = match l.hears {
            Some(true) => "ok",
            Some(false) => "warn",
            None => "",
        };
        row(
            "2025-era clients",
            format!("<span class=\"{class}\">{}</span>", escape(l.detail)),
        );
    }
    row(
        "Last walk",
        match &c.last_walk {
            None => "none yet".into(),
            Some(w) if w.complete => format!(
                "{} walk, {} page(s), {} tools, {:.0} ms, at {}",
                w.trigger,
                w.pages,
                w.tools.unwrap_or(0),
                w.duration_seconds * 1000.0,
                w.finished_at
            ),
            Some(w) => format!(
                "<span class=\"bad\">{} walk failed after {} request(s): {}</span> at {}",
                w.trigger,
                w.pages,
                escape(w.error.as_deref().unwrap_or("")),
                w.finished_at
            ),
        },
    );
    if c.refresh_failures > 0 {
        row(
            "Re-lists failed",
            format!(
                "<span class=\"bad\">{}</span> since the cache was last replaced",
                c.refresh_failures
            ),
        );
    }
    row(
        "Cache",
        match (&c.cache.tools, c.cache.replaced_at) {
            (Some(n), Some(at)) => format!(
                "{n} tools, replaced {} by a {} walk",
                at,
                c.cache.replaced_by.unwrap_or("?")
            ),
            _ => "empty (no refresh walk completed yet)".into(),
        },
    );
    if let Some(at) = c.stale_since {
        row(
            "Stale since",
            format!(
                "<span class=\"warn\">{}</span> <small>({})</small>",
                escape(&clock(at, generated_at)),
                escape(&ago(at, now))
            ),
        );
    }
    let stale = if c.drift.counts.extra == 0 {
        String::new()
    } else {
        " class=\"bad\"".into()
    };
    row(
        "Drift: extra",
        format!(
            "<span{stale}>{}</span> <small>in the cache, gone from the server: calls fail</small>",
            names(&c.drift.extra, c.drift.counts.extra)
        ),
    );
    row(
        "Drift: missing",
        format!(
            "{} <small>on the server, unknown to the client</small>",
            names(&c.drift.missing, c.drift.counts.missing)
        ),
    );
    row(
        "Drift: changed",
        format!(
            "{} <small>same name, new definition</small>",
            names(&c.drift.changed, c.drift.counts.changed)
        ),
    );
    for l in &c.lists {
        row(&format!("List: {}", l.list), list_cell(l));
    }
    if !c.last_events.is_empty() {
        let mut latest: Vec<_> = c.last_events.values().collect();
        latest.sort_by_key(|e| std::cmp::Reverse(e.at));
        row(
            "Latest of each event",
            latest
                .iter()
                .map(|e| format!("{} {}", e.kind, escape(&ago(e.at, now))))
                .collect::<Vec<_>>()
                .join(" · "),
        );
    }
    p.table("<table>\n", rows);
    changes::tool_changes(p, c.changes.iter());
    p.table(
        "<table><tr><th>Time</th><th>Event</th><th>Detail</th></tr>\n",
        or_else(
            c.events.is_empty(),
            "<tr><td colspan=\"3\">no events yet</td></tr>\n",
            c.events.iter().rev().map(event_row),
        ),
    );
}

/// Another list of a connection in one cell: listed and cached items, the drift by kind (its
/// extra items first: what clients still offer), the promise and whether it is broken.
fn list_cell(l: &ListStatus) -> String {
    let count = |n: Option<usize>| n.map_or("?".to_string(), |n| n.to_string());
    let d = &l.drift;
    let drift = if d.is_empty() {
        "<span class=\"ok\">cache matches the server</span>".to_string()
    } else {
        format!(
            "<span class=\"bad\">extra {}</span> · missing {} · changed {}",
            names(&d.extra, d.counts.extra),
            names(&d.missing, d.counts.missing),
            names(&d.changed, d.counts.changed)
        )
    };
    let promise = match (l.promise, l.stale) {
        (None, _) => String::new(),
        (Some(p), true) => format!(" · promise {p}: <span class=\"warn\">broken</span>"),
        (Some(p), false) => format!(" · promise {p}"),
    };
    format!(
        "{} listed, {} cached · {drift}{promise}",
        count(l.server),
        count(l.cache)
    )
}

fn event_row(e: &crate::probe::status::Event) -> String {
    let class = match e.kind {
        "walk_failed" | "session_failed" | "session_closed" | "unannounced_change"
        | "probe_failed" | "ping_failed" | "stream_lost" => " class=\"bad\"",
        "drift" | "tool_changed" => " class=\"warn\"",
        _ => "",
    };
    format!(
        "<tr><td>{}</td><td{class}>{}</td><td>{}</td></tr>\n",
        e.at,
        e.kind,
        escape(&e.detail)
    )
}

mod changes;
#[cfg(test)]
mod tests;
