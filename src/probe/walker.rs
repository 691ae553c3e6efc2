//! The cursor walk: `tools/list` page by page, as a correct client must, with the guards a
//! careless one lacks.
//!
//! - follows `nextCursor` until it is absent (an empty string is a cursor, not the end);
//! - stops at `max_pages` (F10) and on a cursor seen before in this walk (F9);
//! - counts names that appear twice (F11) and keeps the first definition;
//! - an error on a request that carried a cursor is a cursor error (F8).
//!
//! The walker knows nothing about HTTP: it drives a [`Pager`], which is how the property tests
//! feed it arbitrary page sequences.

use std::collections::HashSet;

use serde_json::Value;

use super::catalog::{ToolSet, read_only_hinted, tool_fingerprint};
use crate::mcp::{McpError, Reason};

/// Hard cap on tools in one walk, whatever `max_pages` allows: bounds memory per connection.
pub const MAX_TOOLS_PER_WALK: usize = 10_000;
/// Hard cap on the length of a cursor kept for the repeat check.
const MAX_CURSOR_BYTES: usize = 4096;

/// Fetches one page of `tools/list`.
pub trait Pager {
    fn page(
        &mut self,
        cursor: Option<&str>,
    ) -> impl Future<Output = Result<Value, McpError>> + Send;
}

/// A complete walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    pub tools: ToolSet,
    pub pages: u32,
}

/// Why a walk did not complete.
#[derive(Debug, Clone, PartialEq)]
pub enum WalkError {
    /// A request failed (on the first page, or a cursor error on a later one).
    Request { error: McpError, with_cursor: bool },
    /// The server returned a cursor it had returned before in this walk.
    RepeatedCursor,
    /// `max_pages` pages and still a `nextCursor`.
    LoopCap,
    /// More than [`MAX_TOOLS_PER_WALK`] tools.
    TooManyTools,
}

impl WalkError {
    /// The `reason` label of walk-failure counters.
    pub fn reason(&self) -> &'static str {
        match self {
            WalkError::Request { error, .. } => error.reason.as_str(),
            WalkError::RepeatedCursor => "repeated_cursor",
            WalkError::LoopCap => "loop_cap",
            WalkError::TooManyTools => "too_many_tools",
        }
    }

    /// Whether this is an error on a request carrying a cursor.
    pub fn is_cursor_error(&self) -> bool {
        matches!(
            self,
            WalkError::Request {
                with_cursor: true,
                ..
            }
        )
    }

    /// The wire error, if the walk ended on one.
    pub fn mcp_error(&self) -> Option<&McpError> {
        match self {
            WalkError::Request { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Request { error, with_cursor } => {
                let page = if *with_cursor {
                    "a cursor page"
                } else {
                    "the first page"
                };
                write!(f, "tools/list failed on {page}: {error}")
            }
            WalkError::RepeatedCursor => f.write_str("server repeated a cursor; walk aborted"),
            WalkError::LoopCap => {
                f.write_str("max_pages reached and the server still sent nextCursor")
            }
            WalkError::TooManyTools => write!(f, "more than {MAX_TOOLS_PER_WALK} tools"),
        }
    }
}

/// What one walk did, complete or not: requests sent and duplicate names met count either way.
#[derive(Debug, Clone, PartialEq)]
pub struct WalkReport {
    pub result: Result<Walk, WalkError>,
    /// `tools/list` requests sent (one per page attempted).
    pub requests: u32,
    /// Tool names that appeared more than once.
    pub duplicates: u32,
}

/// Walk the whole list.
pub async fn walk<P: Pager>(pager: &mut P, max_pages: u32) -> WalkReport {
    let mut tools = ToolSet::new();
    let mut seen_cursors: HashSet<String> = HashSet::new();
    let mut cursor: Option<String> = None;
    let mut requests = 0u32;
    let mut duplicates = 0u32;
    let max_pages = max_pages.max(1);
    let report = |result, requests, duplicates| WalkReport {
        result,
        requests,
        duplicates,
    };
    loop {
        if requests >= max_pages {
            return report(Err(WalkError::LoopCap), requests, duplicates);
        }
        requests += 1;
        let with_cursor = cursor.is_some();
        let page = match pager.page(cursor.as_deref()).await {
            Ok(v) => v,
            Err(error) => {
                return report(
                    Err(WalkError::Request { error, with_cursor }),
                    requests,
                    duplicates,
                );
            }
        };
        let parsed = match parse_page(&page) {
            Ok(p) => p,
            Err(error) => {
                return report(
                    Err(WalkError::Request { error, with_cursor }),
                    requests,
                    duplicates,
                );
            }
        };
        for (name, fp, read_only) in parsed.tools {
            if !tools.insert_tool(name, fp, read_only) {
                duplicates += 1;
            }
        }
        if tools.len() > MAX_TOOLS_PER_WALK {
            return report(Err(WalkError::TooManyTools), requests, duplicates);
        }
        match parsed.next_cursor {
            None => {
                let walk = Walk {
                    tools,
                    pages: requests,
                };
                return report(Ok(walk), requests, duplicates);
            }
            Some(next) => {
                if next.len() > MAX_CURSOR_BYTES {
                    let error = McpError::new(Reason::InvalidResponse, "nextCursor over 4 KiB");
                    return report(
                        Err(WalkError::Request { error, with_cursor }),
                        requests,
                        duplicates,
                    );
                }
                if !seen_cursors.insert(next.clone()) {
                    return report(Err(WalkError::RepeatedCursor), requests, duplicates);
                }
                cursor = Some(next);
            }
        }
    }
}

struct Page {
    tools: Vec<(String, u64, bool)>,
    next_cursor: Option<String>,
}

fn parse_page(result: &Value) -> Result<Page, McpError> {
    let bad =
        |what: &str| McpError::new(Reason::InvalidResponse, format!("ListToolsResult: {what}"));
    let list = result
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no tools array"))?;
    let mut tools = Vec::with_capacity(list.len());
    for tool in list {
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("a tool without a string name"))?;
        tools.push((
            name.to_string(),
            tool_fingerprint(tool),
            read_only_hinted(tool),
        ));
    }
    let next_cursor = match result.get("nextCursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(_) => return Err(bad("nextCursor is not a string")),
    };
    Ok(Page { tools, next_cursor })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::VecDeque;

    /// Serves scripted pages and records the cursors it was asked for.
    struct Script {
        pages: VecDeque<Result<Value, McpError>>,
        asked: Vec<Option<String>>,
    }

    impl Pager for Script {
        async fn page(&mut self, cursor: Option<&str>) -> Result<Value, McpError> {
            self.asked.push(cursor.map(str::to_string));
            self.pages
                .pop_front()
                .unwrap_or_else(|| Ok(json!({"tools": [], "nextCursor": "again"})))
        }
    }

    fn tools(names: &[&str]) -> Vec<Value> {
        names
            .iter()
            .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
            .collect()
    }

    fn script(pages: Vec<Result<Value, McpError>>) -> Script {
        Script {
            pages: pages.into(),
            asked: vec![],
        }
    }

    #[tokio::test]
    async fn follows_cursors_to_the_end() {
        let mut s = script(vec![
            Ok(json!({"tools": tools(&["a", "b"]), "nextCursor": "p2"})),
            Ok(json!({"tools": tools(&["c"]), "nextCursor": ""})),
            Ok(json!({"tools": tools(&["d"])})),
        ]);
        let r = walk(&mut s, 64).await;
        let w = r.result.unwrap();
        assert_eq!(w.pages, 3);
        assert_eq!(w.tools.len(), 4);
        assert_eq!(r.requests, 3);
        // An empty cursor is a cursor, and is sent back verbatim.
        assert_eq!(s.asked, vec![None, Some("p2".into()), Some("".into())]);
    }

    #[tokio::test]
    async fn repeated_cursor_aborts() {
        let mut s = script(vec![
            Ok(json!({"tools": tools(&["a"]), "nextCursor": "x"})),
            Ok(json!({"tools": tools(&["b"]), "nextCursor": "x"})),
        ]);
        let r = walk(&mut s, 64).await;
        assert_eq!(r.result, Err(WalkError::RepeatedCursor));
        assert_eq!(r.requests, 2);
    }

    #[tokio::test]
    async fn endless_cursors_hit_the_loop_cap() {
        let mut n = 0;
        let pages = std::iter::from_fn(|| {
            n += 1;
            Some(Ok(json!({"tools": [], "nextCursor": format!("c{n}")})))
        })
        .take(100)
        .collect();
        let mut s = script(pages);
        let r = walk(&mut s, 5).await;
        assert_eq!(r.result, Err(WalkError::LoopCap));
        assert_eq!(r.requests, 5);
    }

    #[tokio::test]
    async fn duplicates_are_counted_and_the_walk_completes() {
        let mut s = script(vec![
            Ok(json!({"tools": tools(&["a", "b"]), "nextCursor": "2"})),
            Ok(json!({"tools": tools(&["b", "c"])})),
        ]);
        let r = walk(&mut s, 64).await;
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.result.unwrap().tools.len(), 3);
    }

    #[tokio::test]
    async fn errors_are_cursor_errors_only_after_the_first_page() {
        let err = || McpError::rpc(-32602, "Invalid cursor");
        let mut first = script(vec![Err(err())]);
        let r = walk(&mut first, 64).await.result.unwrap_err();
        assert!(!r.is_cursor_error());
        assert_eq!(r.reason(), "jsonrpc_error");

        let mut later = script(vec![
            Ok(json!({"tools": tools(&["a"]), "nextCursor": "2"})),
            Err(err()),
        ]);
        let r = walk(&mut later, 64).await.result.unwrap_err();
        assert!(r.is_cursor_error());
    }

    #[tokio::test]
    async fn malformed_pages_are_invalid_responses() {
        for bad in [
            json!({}),
            json!({"tools": [{"description": "no name"}]}),
            json!({"tools": [], "nextCursor": 3}),
        ] {
            let mut s = script(vec![Ok(bad)]);
            let r = walk(&mut s, 64).await.result.unwrap_err();
            assert_eq!(r.reason(), "invalid_response");
        }
    }
}
