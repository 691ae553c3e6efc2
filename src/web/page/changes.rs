//! The status page's view of tool definition changes: per connection, the newest changes with
//! their classified differences (rule, JSON path, before and after); per target, the pins.
//! Every value was bounded and escaped for display when it was stored (see
//! [`mcp_client::listing::changes::paths`]); here it is only HTML-escaped.

use super::{Page, escape, names, or_else};
use crate::probe::change_watch::PinsView;
use crate::probe::status::{Stamp, ToolChangeStatus};
use mcp_client::listing::changes::{Finding, ToolChange};

fn class_cell(change: &str) -> &'static str {
    match change {
        "breaking" | "removed" => " class=\"bad\"",
        "unknown" => " class=\"warn\"",
        _ => "",
    }
}

fn finding(f: &Finding) -> String {
    format!(
        "<li><code>{}</code> {} <small>({})</small>: <code>{}</code> → <code>{}</code></li>",
        escape(&f.path),
        f.rule,
        f.class.as_str(),
        escape(f.before.as_deref().unwrap_or("—")),
        escape(f.after.as_deref().unwrap_or("—")),
    )
}

fn findings(c: &ToolChange) -> String {
    if c.findings.is_empty() {
        return String::new();
    }
    let mut out = String::from("<ul class=\"causes\">");
    for f in &c.findings {
        out.push_str(&finding(f));
    }
    if c.more > 0 {
        out.push_str(&format!("<li>… and {} more</li>", c.more));
    }
    out.push_str("</ul>");
    out
}

fn row(at: Stamp, c: &ToolChange) -> String {
    format!(
        "<tr><td>{}</td><td><code>{}</code></td><td{}>{}</td><td class=\"cause\">{}</td></tr>\n",
        at,
        escape(&c.tool),
        class_cell(c.change),
        c.change,
        findings(c)
    )
}

/// A connection's newest tool changes, newest first.
pub(super) fn tool_changes<'a>(
    p: &mut Page,
    changes: impl DoubleEndedIterator<Item = &'a ToolChangeStatus>,
) {
    let mut rows = changes.rev().map(|c| row(c.at, &c.change)).peekable();
    if rows.peek().is_none() {
        return;
    }
    p.table(
        "<table><tr><th>Time</th><th>Tool</th><th>Change</th><th>What changed (path, rule, \
         before → after)</th></tr>\n",
        rows,
    );
}

/// One pinned item that is not served as pinned: its key, the class, and what differs.
fn mismatch_row(c: &ToolChange) -> String {
    let what = if c.change == "removed" {
        "not listed".to_string()
    } else {
        findings(c)
    };
    format!(
        "<tr><td><code>{}</code></td><td{}>{}{}</td><td class=\"cause\">{what}</td></tr>\n",
        escape(&c.tool),
        class_cell(c.change),
        c.change,
        if c.description_changed {
            " · <b>description changed</b>"
        } else {
            ""
        },
    )
}

/// The target's pins: the file, whether it reads, mismatches and unpinned tools, and a line
/// (with its mismatches) per other list the file pins.
pub(super) fn pins(p: &mut Page, v: &PinsView) {
    let state = match (&v.error, v.valid) {
        (Some(e), _) => format!(
            "<span class=\"bad\">refused</span>: {} <small>(the last good pins stay in force)</small>",
            escape(e)
        ),
        (None, true) => "<span class=\"ok\">read</span>".into(),
        (None, false) => "<span class=\"bad\">not read</span>".into(),
    };
    let head = format!(
        "<h3>Pins</h3>\n<p><code>{}</code> · {state} · {} pinned · unpinned: {}</p>\n",
        escape(&v.file),
        v.pinned,
        names(&v.unpinned, v.unpinned_total),
    );
    if !p.add(&head) {
        return;
    }
    p.table(
        "<table><tr><th>Tool</th><th>Against its pin</th><th>What differs</th></tr>\n",
        or_else(
            v.mismatched.is_empty(),
            "<tr><td colspan=\"3\">every pinned tool is served as pinned</td></tr>\n",
            v.mismatched.iter().map(mismatch_row),
        ),
    );
    for l in &v.lists {
        let head = format!(
            "<p>{}: {} pinned · {} differ or are gone · {} unpinned</p>\n",
            l.list, l.pinned, l.mismatched_total, l.unpinned_total
        );
        if !p.add(&head) {
            return;
        }
        if !l.mismatched.is_empty() {
            p.table(
                "<table><tr><th>Item</th><th>Against its pin</th><th>What differs</th></tr>\n",
                l.mismatched.iter().map(mismatch_row),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_client::listing::changes::classify;
    use serde_json::json;

    #[test]
    fn changes_show_path_rule_and_escaped_values() {
        let before = json!({"name": "t", "description": "ok", "inputSchema": {"type": "object"}});
        let after = json!({"name": "t", "description": "<script>x</script>", "inputSchema": {"type": "object", "required": ["q"]}});
        let c = classify(&before, &after);
        let change = ToolChange {
            tool: "t<b>".into(),
            change: c.class().unwrap().as_str(),
            findings: c.findings,
            more: 0,
            description_changed: c.description_changed,
        };
        let kept = [ToolChangeStatus {
            at: Stamp::of(humantime::parse_rfc3339("2026-12-04T10:00:00Z").unwrap()),
            change,
        }];
        let mut p = Page {
            h: String::new(),
            cut: false,
        };
        tool_changes(&mut p, kept.iter());
        assert!(
            p.h.contains("<code>$.inputSchema.required</code> required_added"),
            "{}",
            p.h
        );
        assert!(
            p.h.contains("t&lt;b&gt;") && !p.h.contains("<script>"),
            "{}",
            p.h
        );
        assert!(p.h.contains("class=\"bad\">breaking"), "{}", p.h);
    }
}
