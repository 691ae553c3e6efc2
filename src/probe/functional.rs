//! Functional probes: "listed" is not "usable".
//!
//! A tool can be in the list while its backend is down. A probe calls one configured tool with
//! `tools/call` on the connection's session and checks the result. Three layers, three signals:
//! liveness (`mcp_probe_up`: session + ping), readiness (`mcp_probe_ready`: plus a complete
//! walk and every probe passing), and the functional result per tool.
//!
//! **Side-effect guard.** A monitor must never change what it watches. A tool is called only
//! when the server's latest full listing hints it `readOnlyHint: true` and not
//! `destructiveHint: true`, unless the probe sets `allow_side_effects`. The annotations are only
//! known after listing, so the guard runs before every call; a refused call counts as a failed
//! run with reason `side_effect_guard`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::config::{Expect, ProbeConfig};
use mcp_client::listing::items::ItemSet;
use mcp_client::mcp::{McpError, Reason};

/// The fixed `reason` label set of `mcp_probe_tool_probe_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeFailure {
    /// No result within the probe's `timeout`.
    Timeout,
    /// The request did not get through (connect, TLS, HTTP status, broken stream, …).
    Transport,
    /// A JSON-RPC error (other than unknown tool) or a malformed result.
    ProtocolError,
    /// The server does not have the tool: gone from its listing, or the call says unknown tool.
    UnknownTool,
    /// The tool ran and reported failure (`isError: true`).
    ToolError,
    /// The result did not contain what `expect` asks for.
    Expectation,
    /// HTTP 401 or 403.
    Auth,
    /// Not called: the tool is not hinted read-only and `allow_side_effects` is not set.
    SideEffectGuard,
}

impl ProbeFailure {
    pub const ALL: [ProbeFailure; 8] = [
        ProbeFailure::Timeout,
        ProbeFailure::Transport,
        ProbeFailure::ProtocolError,
        ProbeFailure::UnknownTool,
        ProbeFailure::ToolError,
        ProbeFailure::Expectation,
        ProbeFailure::Auth,
        ProbeFailure::SideEffectGuard,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProbeFailure::Timeout => "timeout",
            ProbeFailure::Transport => "transport",
            ProbeFailure::ProtocolError => "protocol_error",
            ProbeFailure::UnknownTool => "unknown_tool",
            ProbeFailure::ToolError => "tool_error",
            ProbeFailure::Expectation => "expectation",
            ProbeFailure::Auth => "auth",
            ProbeFailure::SideEffectGuard => "side_effect_guard",
        }
    }
}

/// A failed run: the label value and a detail for logs and the status page.
pub type Failed = (ProbeFailure, String);

/// When each of a connection's probes is due: all at once when a session starts, then each on
/// its own interval. Runs are one at a time, the most overdue first.
pub struct ProbeClock {
    due: Vec<tokio::time::Instant>,
}

impl ProbeClock {
    pub fn new(probes: usize) -> Self {
        ProbeClock {
            due: vec![tokio::time::Instant::now(); probes],
        }
    }

    /// When the next probe is due (none without probes).
    pub fn next_at(&self) -> Option<tokio::time::Instant> {
        self.due.iter().min().copied()
    }

    /// The most overdue probe.
    pub fn take_due(&self) -> Option<usize> {
        (0..self.due.len()).min_by_key(|i| self.due[*i])
    }

    /// Probe `index` started now; next due after `interval`.
    pub fn ran(&mut self, index: usize, interval: Duration) {
        self.due[index] = tokio::time::Instant::now() + interval;
    }
}

/// Whether the probe may call its tool, judged on the server's latest full listing.
pub fn guard(probe: &ProbeConfig, server: &ItemSet) -> Result<(), Failed> {
    if !server.contains(&probe.tool) {
        return Err((
            ProbeFailure::UnknownTool,
            format!("{} is not in the server's tool list", probe.tool),
        ));
    }
    if !probe.allow_side_effects && !server.is_read_only(&probe.tool) {
        return Err((
            ProbeFailure::SideEffectGuard,
            format!(
                "{} is not annotated readOnlyHint: true without destructiveHint: true; \
                 not called (set allow_side_effects: true to call it anyway)",
                probe.tool
            ),
        ));
    }
    Ok(())
}

/// The `tools/call` params of a probe.
pub fn call_params(probe: &ProbeConfig) -> Value {
    json!({"name": probe.tool, "arguments": probe.arguments})
}

/// Fold the answer of a `tools/call` (bounded by the probe's timeout) into a verdict.
pub fn judge(
    answer: Result<Result<Value, McpError>, tokio::time::error::Elapsed>,
    expect: &Expect,
    timeout: Duration,
) -> Result<(), Failed> {
    match answer {
        Err(_) => Err((
            ProbeFailure::Timeout,
            format!("no result within {}", humantime::format_duration(timeout)),
        )),
        Ok(Err(e)) => Err(classify(&e)),
        Ok(Ok(result)) => check_result(&result, expect),
    }
}

/// The probe reason of a failed request.
pub fn classify(e: &McpError) -> Failed {
    let reason = match e.reason {
        Reason::Timeout => ProbeFailure::Timeout,
        Reason::Auth => ProbeFailure::Auth,
        Reason::JsonrpcError if e.rpc_code == Some(-32602) && mentions_unknown_tool(&e.detail) => {
            ProbeFailure::UnknownTool
        }
        Reason::JsonrpcError
        | Reason::InvalidJson
        | Reason::InvalidResponse
        | Reason::ContentType
        | Reason::BodyTooLarge
        | Reason::UnsupportedVersion => ProbeFailure::ProtocolError,
        Reason::Dns
        | Reason::Connect
        | Reason::Tls
        | Reason::Transport
        | Reason::SessionExpired
        | Reason::Http4xx
        | Reason::Http5xx
        | Reason::Redirect
        | Reason::StreamClosed => ProbeFailure::Transport,
    };
    (reason, format!("{}: {}", e.reason, e.detail))
}

/// -32602 is also "invalid arguments"; servers word unknown tools as "Unknown tool: x" (the
/// specification's example) or "Tool x not found" (TypeScript SDK).
fn mentions_unknown_tool(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("tool") && (m.contains("unknown") || m.contains("not found"))
}

/// Check a `CallToolResult` against `isError` and the expectations.
pub fn check_result(result: &Value, expect: &Expect) -> Result<(), Failed> {
    let Some(content) = result.get("content").and_then(Value::as_array) else {
        return Err((
            ProbeFailure::ProtocolError,
            "CallToolResult without a content array".into(),
        ));
    };
    let text: Vec<&str> = content
        .iter()
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        // Python SDK servers report unknown tools this way.
        let first = text.first().copied().unwrap_or("");
        let reason = if mentions_unknown_tool(first) {
            ProbeFailure::UnknownTool
        } else {
            ProbeFailure::ToolError
        };
        return Err((
            reason,
            format!("isError: true: {}", mcp_client::mcp::truncate(first, 200)),
        ));
    }
    if let Some(want) = &expect.text_contains
        && !text.iter().any(|t| t.contains(want.as_str()))
    {
        return Err((
            ProbeFailure::Expectation,
            format!("no text content contains {want:?}"),
        ));
    }
    if !expect.structured.is_empty() {
        let Some(sc) = result.get("structuredContent") else {
            return Err((
                ProbeFailure::Expectation,
                "no structuredContent in the result".into(),
            ));
        };
        for (pointer, want) in &expect.structured {
            match sc.pointer(pointer) {
                Some(got) if got == want => {}
                Some(got) => {
                    return Err((
                        ProbeFailure::Expectation,
                        format!(
                            "structuredContent{pointer} is {}, expected {want}",
                            mcp_client::mcp::truncate(&got.to_string(), 100)
                        ),
                    ));
                }
                None => {
                    return Err((
                        ProbeFailure::Expectation,
                        format!("structuredContent has no {pointer}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(tool: &str, allow: bool) -> ProbeConfig {
        ProbeConfig {
            tool: tool.into(),
            arguments: Default::default(),
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(5),
            expect: Expect::default(),
            allow_side_effects: allow,
        }
    }

    fn server() -> ItemSet {
        let mut s = ItemSet::new();
        s.insert_tool("kb_stats".into(), 1, true);
        s.insert_tool("kb_delete".into(), 2, false);
        s
    }

    #[test]
    fn the_guard_calls_only_read_only_tools_unless_allowed() {
        assert!(guard(&probe("kb_stats", false), &server()).is_ok());
        let (r, _) = guard(&probe("kb_delete", false), &server()).unwrap_err();
        assert_eq!(r, ProbeFailure::SideEffectGuard);
        assert!(guard(&probe("kb_delete", true), &server()).is_ok());
        let (r, _) = guard(&probe("search_legacy", true), &server()).unwrap_err();
        assert_eq!(r, ProbeFailure::UnknownTool);
    }

    #[test]
    fn results_are_classified() {
        let ok = json!({"content": [{"type": "text", "text": "ok: 14 tools"}], "structuredContent": {"status": "ok"}});
        let mut e = Expect {
            text_contains: Some("ok".into()),
            structured: [("/status".to_string(), json!("ok"))].into(),
        };
        assert!(check_result(&ok, &e).is_ok());
        e.structured.insert("/status".into(), json!("degraded"));
        assert_eq!(
            check_result(&ok, &e).unwrap_err().0,
            ProbeFailure::Expectation
        );
        let err =
            json!({"content": [{"type": "text", "text": "backend unavailable"}], "isError": true});
        assert_eq!(
            check_result(&err, &Expect::default()).unwrap_err().0,
            ProbeFailure::ToolError
        );
        let py = json!({"content": [{"type": "text", "text": "Unknown tool: x"}], "isError": true});
        assert_eq!(
            check_result(&py, &Expect::default()).unwrap_err().0,
            ProbeFailure::UnknownTool
        );
        assert_eq!(
            check_result(&json!({}), &Expect::default()).unwrap_err().0,
            ProbeFailure::ProtocolError
        );
    }

    #[test]
    fn request_errors_map_to_probe_reasons() {
        let mut unknown = McpError::rpc(-32602, "Unknown tool: search_legacy");
        assert_eq!(classify(&unknown).0, ProbeFailure::UnknownTool);
        unknown = McpError::rpc(-32602, "Invalid arguments: top_k");
        assert_eq!(classify(&unknown).0, ProbeFailure::ProtocolError);
        assert_eq!(
            classify(&McpError::new(Reason::Auth, "401")).0,
            ProbeFailure::Auth
        );
        assert_eq!(
            classify(&McpError::new(Reason::Http5xx, "503")).0,
            ProbeFailure::Transport
        );
    }
}
