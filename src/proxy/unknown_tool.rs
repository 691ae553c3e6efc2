//! The upstream's own word that a called tool does not exist.
//!
//! The proxy's stale-call verdicts compare a call with its catalog; the upstream's answer to the
//! call is a second, independent witness (and the only one while the catalog is down, or when it
//! cannot see what the client sees). The specification says an unknown tool is a JSON-RPC error
//! (-32602, "Unknown tool: NAME" in its example), but the SDKs differ: some answer an `isError`
//! result, each with its own text. So the proxy matches exactly the shapes the SDKs send, read
//! from their sources (docs/proxy.md lists each with its file), and nothing else: an answer of any
//! other shape is not counted, so a tool's own failure is never taken for "no such tool".
//!
//! | SDK | wire shape |
//! |---|---|
//! | specification example, the exporter's lab | error -32602 `Unknown tool: NAME` |
//! | TypeScript `@modelcontextprotocol/server` 2.x `McpServer` | error -32602 `Tool NAME not found` (or `disabled`) |
//! | rmcp 3.x `ToolRouter` | error -32602 `tool not found` |
//! | rmcp 3.x server without `call_tool` | error -32601 `tools/call` |
//! | Python `mcp` 2.x low-level server without a `tools/call` handler | error -32601 `Method not found`, `data` `tools/call` |
//! | Python `mcp` 2.x `MCPServer` | `isError` result, text `Unknown tool: NAME` |
//! | `fastmcp` 4.x | `isError` result, text `Unknown tool: 'NAME'` (Python `repr`) |
//! | TypeScript `@modelcontextprotocol/sdk` 1.x `McpServer` | `isError` result, text `MCP error -32602: Tool NAME not found` (or `disabled`) |

use serde_json::Value;

use mcp_client::mcp::jsonrpc::RpcError;

const INVALID_PARAMS: i64 = -32602;
const METHOD_NOT_FOUND: i64 = -32601;

/// Whether `outcome`, the upstream's answer to a `tools/call` of `tool`, says the tool does not
/// exist, in one of the known SDKs' shapes (see the module docs).
pub fn says_unknown(tool: &str, outcome: &Result<Value, RpcError>) -> bool {
    match outcome {
        Err(e) if e.code == INVALID_PARAMS => {
            e.message == "tool not found"
                || e.message.strip_prefix("Unknown tool: ") == Some(tool)
                || typescript_not_found(&e.message, tool)
        }
        Err(e) if e.code == METHOD_NOT_FOUND => {
            e.message == "tools/call"
                || (e.message == "Method not found"
                    && e.data.as_ref().and_then(Value::as_str) == Some("tools/call"))
        }
        Err(_) => false,
        Ok(result) => {
            if result.get("isError").and_then(Value::as_bool) != Some(true) {
                return false;
            }
            let Some(text) = result
                .get("content")
                .and_then(|c| c.get(0))
                .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
                .and_then(|c| c.get("text"))
                .and_then(Value::as_str)
            else {
                return false;
            };
            match text.strip_prefix("Unknown tool: ") {
                Some(rest) => {
                    rest == tool
                        || rest.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) == Some(tool)
                }
                None => text
                    .strip_prefix("MCP error -32602: ")
                    .is_some_and(|m| typescript_not_found(m, tool)),
            }
        }
    }
}

/// The TypeScript SDKs' `McpServer` message: `Tool NAME not found` or `Tool NAME disabled`.
fn typescript_not_found(message: &str, tool: &str) -> bool {
    message
        .strip_prefix("Tool ")
        .and_then(|m| m.strip_prefix(tool))
        .is_some_and(|rest| rest == " not found" || rest == " disabled")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(code: i64, message: &str, data: Option<Value>) -> Result<Value, RpcError> {
        Err(RpcError {
            code,
            message: message.into(),
            data,
        })
    }

    fn is_error(text: &str) -> Result<Value, RpcError> {
        Ok(json!({"content": [{"type": "text", "text": text}], "isError": true}))
    }

    #[test]
    fn each_sdks_unknown_tool_answer_is_recognised() {
        let t = "search_legacy";
        for (sdk, answer) in [
            (
                "spec, lab",
                error(-32602, "Unknown tool: search_legacy", None),
            ),
            (
                "TS 2.x",
                error(-32602, "Tool search_legacy not found", None),
            ),
            (
                "TS 2.x disabled",
                error(-32602, "Tool search_legacy disabled", None),
            ),
            ("rmcp router", error(-32602, "tool not found", None)),
            ("rmcp no tools", error(-32601, "tools/call", None)),
            (
                "Python mcp runner",
                error(-32601, "Method not found", Some(json!("tools/call"))),
            ),
            (
                "Python mcp MCPServer",
                is_error("Unknown tool: search_legacy"),
            ),
            ("fastmcp", is_error("Unknown tool: 'search_legacy'")),
            (
                "TS 1.x",
                is_error("MCP error -32602: Tool search_legacy not found"),
            ),
            (
                "TS 1.x disabled",
                is_error("MCP error -32602: Tool search_legacy disabled"),
            ),
        ] {
            assert!(says_unknown(t, &answer), "{sdk}: {answer:?}");
        }
    }

    #[test]
    fn other_answers_are_not_taken_for_an_unknown_tool() {
        let t = "search_legacy";
        for answer in [
            // Another tool's name, or the right words for another request.
            error(-32602, "Unknown tool: search_v2", None),
            error(-32602, "Tool search_v2 not found", None),
            error(-32602, "tools/call needs a string name", None),
            error(-32602, "Invalid cursor", None),
            error(-32601, "Method not found", Some(json!("resources/read"))),
            error(-32601, "Method not found", None),
            error(-32603, "Unknown tool: search_legacy", None),
            // A tool's own failure, or a success that mentions the words.
            is_error("search_legacy: backend unavailable"),
            is_error("Unknown tool: 'search_v2'"),
            is_error("MCP error -32602: Invalid arguments for tool search_legacy"),
            Ok(json!({"content": [{"type": "text", "text": "Unknown tool: search_legacy"}]})),
            Ok(
                json!({"content": [{"type": "image", "text": "Unknown tool: search_legacy"}], "isError": true}),
            ),
            Ok(json!({"content": [], "isError": true})),
        ] {
            assert!(!says_unknown(t, &answer), "{answer:?}");
        }
    }
}
