//! What `/proxy` and `/proxy.json` show: per proxy, per session, bounded.
//!
//! Session detail lives here and not in labels (session ids, cursors and arguments never become
//! label values). Rows are capped at [`MAX_ROWS`] per proxy, most recently active first; session
//! ids are not shown (they are bearer-like for some servers); client labels are already safe text.

use std::time::Instant;

use serde::Serialize;

use super::Proxies;

/// Most session rows shown per proxy.
pub const MAX_ROWS: usize = 200;

#[derive(Debug, Clone, Serialize)]
pub struct ProxyStatus {
    pub name: String,
    pub listen: String,
    /// The upstream URL, credentials and query redacted.
    pub upstream: String,
    /// Tools in the proxy's catalog of the upstream (`None` before its first complete walk).
    pub upstream_tools: Option<usize>,
    /// Items of the upstream's other lists in the catalog (lists it declares and walked), by
    /// list.
    pub upstream_lists: std::collections::BTreeMap<&'static str, usize>,
    /// Walks of the upstream's list so far (complete or not).
    pub catalog_walks: u64,
    /// Why the catalog session is down (`reason: detail`, no secrets), if it is.
    pub catalog_failure: Option<String>,
    pub sessions_tracked: usize,
    pub sessions: Vec<SessionRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionRow {
    pub client: String,
    pub age_seconds: u64,
    pub idle_seconds: u64,
    pub tools_list_requests: u16,
    pub pages_seen: u16,
    pub listed: bool,
    /// A nextCursor sent and not (yet) followed.
    pub cursor_outstanding: bool,
    pub cursors_followed: u16,
    pub cursor_errors: u16,
    pub first_page_only: bool,
    pub tool_calls: u32,
    pub stale_tool_calls: u16,
    pub stale_schema_calls: u16,
    /// Answers of the upstream to this session's calls that said the tool does not exist.
    pub unknown_tool_answers: u16,
    /// Seconds since the last list_changed forwarded to this session.
    pub last_list_changed_seconds: Option<u64>,
    /// A list_changed forwarded and no re-list yet.
    pub relist_due: bool,
    pub reconnect_without_list: bool,
    /// The other lists this session listed or used (prompts, resources, resource templates).
    pub lists: Vec<ListRow>,
}

/// What one session did with one of its other lists.
#[derive(Debug, Clone, Serialize)]
pub struct ListRow {
    /// `prompts`, `resources` or `resource_templates`.
    pub list: &'static str,
    pub first_page_only: bool,
    /// `prompts/get` or `resources/read` judged stale.
    pub stale_calls: u16,
}

impl Proxies {
    /// The status of every running proxy.
    pub fn status(&self) -> Vec<ProxyStatus> {
        self.snapshot().iter().map(|sh| sh.status()).collect()
    }
}

impl super::Proxy {
    /// This proxy's status.
    pub fn status(&self) -> ProxyStatus {
        self.shared.status()
    }
}

impl super::Shared {
    fn status(&self) -> ProxyStatus {
        let now = Instant::now();
        let sh = self;
        let table = sh.sessions.lock().expect("sessions lock");
        let mut rows: Vec<(Instant, SessionRow)> = table
            .iter()
            .map(|(_, s)| {
                (
                    s.last_seen,
                    SessionRow {
                        client: s.client.label.to_string(),
                        age_seconds: now.duration_since(s.started).as_secs(),
                        idle_seconds: now.duration_since(s.last_seen).as_secs(),
                        tools_list_requests: s.lists,
                        pages_seen: s.pages,
                        listed: s.lists > 0,
                        cursor_outstanding: s.cursor.is_some(),
                        cursors_followed: s.cursors_followed,
                        cursor_errors: s.cursor_errors,
                        first_page_only: s.first_page_only,
                        tool_calls: s.tool_calls,
                        stale_tool_calls: s.stale_tool_calls,
                        stale_schema_calls: s.stale_schema_calls,
                        unknown_tool_answers: s.unknown_tool_answers,
                        last_list_changed_seconds: s
                            .last_list_changed
                            .map(|t| now.duration_since(t).as_secs()),
                        relist_due: s.relist_due.is_some(),
                        reconnect_without_list: s.reconnect_without_list,
                        lists: s
                            .other_lists
                            .summary()
                            .into_iter()
                            .map(|(list, first_page_only, stale_calls)| ListRow {
                                list: list.as_str(),
                                first_page_only,
                                stale_calls,
                            })
                            .collect(),
                    },
                )
            })
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        rows.truncate(MAX_ROWS);
        ProxyStatus {
            name: sh.config.name.clone(),
            listen: sh.config.listen.to_string(),
            upstream: crate::config::redact_url(&sh.config.upstream),
            upstream_tools: sh.catalog.tools(),
            upstream_lists: sh
                .catalog
                .list_counts()
                .into_iter()
                .map(|(l, n)| (l.as_str(), n))
                .collect(),
            catalog_walks: sh.catalog.walks(),
            catalog_failure: sh.catalog.failure(),
            sessions_tracked: table.len(),
            sessions: rows.into_iter().map(|(_, r)| r).collect(),
        }
    }
}
