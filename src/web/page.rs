//! The status page: server-rendered HTML from the same snapshot as `/status.json`.
//!
//! No scripts and no build step: the page is read during incidents, often through a proxy or a
//! port-forward, and must work in any browser. It refreshes itself every few seconds.

use std::fmt::Write;

use crate::probe::status::{ConnStatus, ProbeStatus, Snapshot, TargetSnapshot};

/// Seconds between automatic reloads of the page.
const REFRESH_SECONDS: u32 = 10;

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.25em .5em;\
text-align:left;vertical-align:top}th{background:#f3f3f3}code{font-size:.95em}\
.bad{color:#b00020;font-weight:600}.ok{color:#1b5e20}.warn{color:#8a5a00}\
h2{margin-top:1.5em;border-bottom:1px solid #ddd}small{color:#666}";

pub fn render(s: &Snapshot) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>MCP Exporter</title><style>{STYLE}</style></head><body>\n\
         <h1>MCP Exporter</h1>\n<p>Version {} · generated {} · refreshes every {REFRESH_SECONDS} s · \
         <a href=\"/metrics\">/metrics</a> · <a href=\"/status.json\">/status.json</a></p>\n",
        escape(s.version),
        escape(&s.generated_at)
    );
    summary(&mut h, s);
    for t in &s.targets {
        target(&mut h, t);
    }
    h.push_str("</body></html>\n");
    h
}

fn summary(h: &mut String, s: &Snapshot) {
    h.push_str(
        "<h2>Targets</h2>\n<table><tr><th>Target</th><th>URL</th><th>Connections</th>\
         <th>Stale cache (extra / missing / changed)</th><th>Probes</th></tr>\n",
    );
    if s.targets.is_empty() {
        h.push_str("<tr><td colspan=\"5\">no targets configured</td></tr>\n");
    }
    for t in &s.targets {
        let states: Vec<String> = t
            .connections
            .iter()
            .map(|c| format!("{}: {}", c.connection, state_word(c)))
            .collect();
        let (x, m, c) = t.connections.iter().fold((0, 0, 0), |(x, m, c), k| {
            (
                x + k.drift.extra.len(),
                m + k.drift.missing.len(),
                c + k.drift.changed.len(),
            )
        });
        let drift_class = if x + m + c > 0 { "bad" } else { "ok" };
        let passing = t.probes.iter().filter(|p| p.success).count();
        let probe_class = if passing == t.probes.len() {
            "ok"
        } else {
            "bad"
        };
        let _ = writeln!(
            h,
            "<tr><td><a href=\"#target-{n}\">{n}</a></td><td><code>{}</code></td><td>{}</td>\
             <td class=\"{drift_class}\">{x} / {m} / {c}</td><td class=\"{probe_class}\">{passing} of {} passing</td></tr>",
            escape(&t.url),
            escape(&states.join(", ")),
            t.probes.len(),
            n = escape(&t.name),
        );
    }
    h.push_str("</table>\n");
}

fn state_word(c: &ConnStatus) -> String {
    serde_json::to_value(c.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn target(h: &mut String, t: &TargetSnapshot) {
    let _ = writeln!(
        h,
        "<h2 id=\"target-{n}\">{n}</h2>\n<p><code>{}</code></p>",
        escape(&t.url),
        n = escape(&t.name)
    );
    if !t.probes.is_empty() {
        probes(h, &t.probes);
    }
    for c in &t.connections {
        connection(h, c);
    }
}

fn probes(h: &mut String, probes: &[ProbeStatus]) {
    h.push_str(
        "<h3>Functional probes</h3>\n<table><tr><th>Tool</th><th>Result</th><th>Reason</th>\
         <th>Detail</th><th>Duration</th><th>Last run</th></tr>\n",
    );
    for p in probes {
        let (class, word) = match (&p.last_run_at, p.success) {
            (None, _) => ("warn", "not run yet"),
            (Some(_), true) => ("ok", "pass"),
            (Some(_), false) => ("bad", "fail"),
        };
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td class=\"{class}\">{word}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            escape(&p.tool),
            p.reason.unwrap_or(""),
            escape(p.detail.as_deref().unwrap_or("")),
            p.duration_seconds
                .map(|d| format!("{:.0} ms", d * 1000.0))
                .unwrap_or_default(),
            escape(p.last_run_at.as_deref().unwrap_or("")),
        );
    }
    h.push_str("</table>\n");
}

fn names(list: &[String]) -> String {
    if list.is_empty() {
        return "—".into();
    }
    list.iter()
        .map(|n| format!("<code>{}</code>", escape(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn connection(h: &mut String, c: &ConnStatus) {
    let _ = writeln!(
        h,
        "<h3>Connection {} — {} <small>since {}</small></h3>",
        c.connection,
        state_word(c),
        escape(&c.state_since)
    );
    h.push_str("<table>\n");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(h, "<tr><th>{k}</th><td>{v}</td></tr>");
    };
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
                    escape(&s.opened_at)
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
                escape(&w.finished_at)
            ),
            Some(w) => format!(
                "<span class=\"bad\">{} walk failed after {} request(s): {}</span> at {}",
                w.trigger,
                w.pages,
                escape(w.error.as_deref().unwrap_or("")),
                escape(&w.finished_at)
            ),
        },
    );
    row(
        "Cache",
        match (&c.cache.tools, &c.cache.replaced_at) {
            (Some(n), Some(at)) => format!(
                "{n} tools, replaced {} by a {} walk",
                escape(at),
                c.cache.replaced_by.unwrap_or("?")
            ),
            _ => "empty (no refresh walk completed yet)".into(),
        },
    );
    let stale = if c.drift.extra.is_empty() {
        String::new()
    } else {
        " class=\"bad\"".into()
    };
    row(
        "Drift: extra",
        format!(
            "<span{stale}>{}</span> <small>in the cache, gone from the server: calls fail</small>",
            names(&c.drift.extra)
        ),
    );
    row(
        "Drift: missing",
        format!(
            "{} <small>on the server, unknown to the client</small>",
            names(&c.drift.missing)
        ),
    );
    row(
        "Drift: changed",
        format!(
            "{} <small>same name, new definition</small>",
            names(&c.drift.changed)
        ),
    );
    if c.drift.omitted > 0 {
        row("Drift: omitted", format!("{} more names", c.drift.omitted));
    }
    h.push_str("</table>\n<table><tr><th>Time</th><th>Event</th><th>Detail</th></tr>\n");
    if c.events.is_empty() {
        h.push_str("<tr><td colspan=\"3\">no events yet</td></tr>\n");
    }
    for e in c.events.iter().rev() {
        let class = match e.kind {
            "walk_failed" | "session_failed" | "session_closed" | "unannounced_change"
            | "probe_failed" | "ping_failed" | "stream_lost" => " class=\"bad\"",
            "drift" => " class=\"warn\"",
            _ => "",
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td{class}>{}</td><td>{}</td></tr>",
            escape(&e.at),
            e.kind,
            escape(&e.detail)
        );
    }
    h.push_str("</table>\n");
}
