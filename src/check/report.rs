//! Rendering a [`Report`]: text for people reading a CI log, JSON for tools.
//!
//! Text is one row per line — status, check id, detail — so a failing CI job shows the reason in
//! its last screen of output, and `grep ^FAIL` works. JSON is the same data with the verdict and
//! exit code, in the stable schema documented in `docs/check.md`. Either way every string that
//! came from the server has its control characters replaced, so a hostile server cannot forge
//! rows or move the cursor of the terminal that reads the log.

use serde::Serialize;

use super::{CheckRow, ListSummary, Report, ServerSummary, Status, Verdict, WalkSummary};

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// The report in `format`, ending with a newline.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Text => text(report),
        Format::Json => json(report),
    }
}

/// The JSON document (schema version 1; see `docs/check.md`).
#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    url_redacted: &'a str,
    server: &'a Option<ServerSummary>,
    checks: &'a [CheckRow],
    walks: &'a [WalkSummary],
    lists: &'a [ListSummary],
    result: Verdict,
    exit_code: u8,
}

pub fn json(report: &Report) -> String {
    let doc = Document {
        schema_version: 1,
        url_redacted: &report.url_redacted,
        server: &report.server,
        checks: &report.checks,
        walks: &report.walks,
        lists: &report.lists,
        result: report.verdict(),
        exit_code: report.exit_code(),
    };
    let mut out = serde_json::to_string_pretty(&doc).expect("a report serializes");
    out.push('\n');
    out
}

pub fn text(report: &Report) -> String {
    let mut out = format!("mcp_exporter check {}\n", report.url_redacted);
    if let Some(s) = &report.server {
        let stream = match s.notification_stream {
            Some(true) => "open",
            Some(false) => "none",
            None => "not tried",
        };
        out.push_str(&format!(
            "server {:?} {:?}, protocol {}, {} {stream}\n",
            s.name,
            s.version,
            clean(&s.protocol_version),
            s.channel
        ));
    }
    out.push('\n');
    let width = report.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in &report.checks {
        out.push_str(&format!(
            "{:<5}  {:<width$}  {}\n",
            c.status.as_str(),
            c.id,
            clean(&c.detail)
        ));
    }
    let count = |s: Status| report.checks.iter().filter(|c| c.status == s).count();
    let verdict = match report.verdict() {
        Verdict::Pass => "pass",
        Verdict::Warn => "pass with warnings",
        Verdict::Fail => "fail",
        Verdict::Error => "error (not fully checked)",
    };
    out.push_str(&format!(
        "\nresult: {verdict}, exit {} ({} pass, {} warn, {} fail, {} info, {} error)\n",
        report.exit_code(),
        count(Status::Pass),
        count(Status::Warn),
        count(Status::Fail),
        count(Status::Info),
        count(Status::Error),
    ));
    out
}

/// One line, whatever the server sent.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            url_redacted: "http://h/mcp?<redacted>".into(),
            server: Some(ServerSummary {
                name: "kb".into(),
                version: "1".into(),
                protocol_version: "2025-11-25".into(),
                tools: true,
                tools_list_changed: true,
                channel: "GET stream",
                notification_stream: Some(true),
                lists: vec!["tools", "prompts"],
            }),
            checks: vec![
                CheckRow {
                    id: "tools_list",
                    status: Status::Pass,
                    detail: "2 page(s) (8 + 6), 14 tools".into(),
                },
                CheckRow {
                    id: "ping",
                    status: Status::Fail,
                    detail: "line one\nFAIL  forged".into(),
                },
            ],
            walks: vec![WalkSummary {
                walk: "first",
                pages: vec![8, 6],
                tools: 14,
                complete: true,
            }],
            lists: vec![ListSummary {
                list: "prompts",
                walks: vec![super::super::ItemWalk {
                    walk: "first",
                    pages: vec![5, 5],
                    items: 10,
                    complete: true,
                }],
            }],
        }
    }

    #[test]
    fn text_has_one_line_per_row_and_a_summary() {
        let t = text(&report());
        let rows: Vec<&str> = t
            .lines()
            .filter(|l| l.starts_with("PASS") || l.starts_with("FAIL"))
            .collect();
        assert_eq!(rows.len(), 2, "{t}");
        assert!(rows[1].contains("line one FAIL  forged"), "{t}");
        assert!(t.ends_with("result: fail, exit 1 (1 pass, 0 warn, 1 fail, 0 info, 0 error)\n"));
    }

    #[test]
    fn json_carries_verdict_and_exit_code() {
        let v: serde_json::Value = serde_json::from_str(&json(&report())).unwrap();
        assert_eq!(v["result"], "fail");
        assert_eq!(v["exit_code"], 1);
        assert_eq!(v["checks"][0]["status"], "pass");
        assert_eq!(v["walks"][0]["pages"], serde_json::json!([8, 6]));
        assert_eq!(v["server"]["notification_stream"], true);
        assert_eq!(v["lists"][0]["walks"][0]["items"], 10);
    }
}
