//! The report model: rows with a status, what the server said about itself, one summary per
//! walk, and the verdict and exit code they add up to. Kept apart from the run (which fills it)
//! and from `report` (which renders it), so the schema `docs/check.md` documents lives in one
//! place.

use serde::Serialize;

/// The verdict of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Info,
    Warn,
    Fail,
    /// The check could not run (unreachable, no session, refused by the guard).
    Error,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Info => "INFO",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Error => "ERROR",
        }
    }
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRow {
    pub id: &'static str,
    pub status: Status,
    pub detail: String,
}

/// What `initialize` (or `server/discover`) and the notification channel told us.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSummary {
    pub name: String,
    pub version: String,
    pub protocol_version: String,
    /// `capabilities.tools` is present.
    pub tools: bool,
    /// `capabilities.tools.listChanged` is true.
    pub tools_list_changed: bool,
    /// What the notification channel is: `GET stream` (legacy), `listen stream`
    /// (2026-07-28 `subscriptions/listen`), `session channel` (stdio, HTTP+SSE).
    pub channel: &'static str,
    /// The notification channel opened (`false`: refused or an error; `null`: not tried).
    pub notification_stream: Option<bool>,
    /// Every list the server declares (`tools`, `prompts`, `resources`,
    /// `resource_templates`): what `check` walks and `pin` pins.
    pub lists: Vec<&'static str>,
}

/// One walk of `tools/list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WalkSummary {
    /// Why it ran: `first`, `second`, `list_changed`.
    pub walk: &'static str,
    /// Tools on each page served, in order.
    pub pages: Vec<u32>,
    /// Distinct tools (a complete walk) or tools served before the walk stopped.
    pub tools: u32,
    pub complete: bool,
}

/// The walks of one list other than tools (whose walks are [`Report::walks`], as ever).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListSummary {
    /// `prompts`, `resources` or `resource_templates`.
    pub list: &'static str,
    pub walks: Vec<ItemWalk>,
}

/// One walk of a list other than tools: a [`WalkSummary`] that counts items, not tools.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemWalk {
    /// `first` or `second`.
    pub walk: &'static str,
    /// Items on each page served, in order.
    pub pages: Vec<u32>,
    /// Distinct items (complete walk) or items served before the walk stopped.
    pub items: u32,
    pub complete: bool,
}

/// The whole result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub url_redacted: String,
    pub server: Option<ServerSummary>,
    pub checks: Vec<CheckRow>,
    pub walks: Vec<WalkSummary>,
    /// Each other list the server declares, in [`mcp_client::listing::list::List::ALL`] order.
    pub lists: Vec<ListSummary>,
}

/// The overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Warn,
    Fail,
    Error,
}

impl Report {
    pub(super) fn new(endpoint: &crate::config::Endpoint) -> Report {
        Report {
            url_redacted: endpoint.to_string(),
            server: None,
            checks: Vec::new(),
            walks: Vec::new(),
            lists: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, status: Status, id: &'static str, detail: impl Into<String>) {
        self.checks.push(CheckRow {
            id,
            status,
            detail: detail.into(),
        });
    }

    /// A FAIL outranks an ERROR: the server was reached and a correct client would hit that
    /// problem, whatever else could not be checked.
    pub fn verdict(&self) -> Verdict {
        let any = |s: Status| self.checks.iter().any(|c| c.status == s);
        if any(Status::Fail) {
            Verdict::Fail
        } else if any(Status::Error) {
            Verdict::Error
        } else if any(Status::Warn) {
            Verdict::Warn
        } else {
            Verdict::Pass
        }
    }

    /// 0: a correct client is fine (warnings allowed); 1: it hits a problem; 2: not checked.
    pub fn exit_code(&self) -> u8 {
        match self.verdict() {
            Verdict::Pass | Verdict::Warn => 0,
            Verdict::Fail => 1,
            Verdict::Error => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_outranks_error_and_warnings_exit_zero() {
        let url = url::Url::parse("http://u:pw@h/mcp?token=x").unwrap();
        let mut r = Report::new(&crate::config::Endpoint::http(url));
        assert_eq!(r.url_redacted, "http://u:<redacted>@h/mcp?<redacted>");
        r.row(Status::Pass, "ping", "");
        r.row(Status::Info, "capabilities", "");
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Pass, 0));
        r.row(Status::Warn, "tool_names", "");
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Warn, 0));
        r.row(Status::Error, "call", "");
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Error, 2));
        r.row(Status::Fail, "tools_list", "");
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Fail, 1));
    }
}
