//! JSON-RPC 2.0 framing: what the client sends and how a server message is read.
//!
//! Decoding is strict about shape (a response must carry exactly one of `result` / `error`) and
//! lenient about what the spec lets servers add (unknown fields are ignored).

use serde_json::{Map, Value, json};

use super::error::{McpError, Reason};

/// One message from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to one of our requests.
    Response {
        id: Value,
        outcome: Result<Value, RpcError>,
    },
    /// A notification (no id).
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A request from the server to us (ping, sampling, roots …).
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// `error.data`, kept for the errors whose data the client reads (-32022's `supported`).
    pub data: Option<Value>,
}

impl From<RpcError> for McpError {
    fn from(e: RpcError) -> Self {
        McpError::rpc(e.code, &e.message)
    }
}

/// Standard codes used by this client.
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// Encode a request.
pub fn request(id: u64, method: &str, params: Option<Value>) -> Vec<u8> {
    let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(p) = params {
        msg["params"] = p;
    }
    serde_json::to_vec(&msg).expect("a JSON value always serializes")
}

/// Encode a notification.
pub fn notification(method: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method}))
        .expect("a JSON value always serializes")
}

/// Encode a response to a server request.
pub fn response(id: &Value, outcome: Result<Value, RpcError>) -> Vec<u8> {
    let msg = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})
        }
    };
    serde_json::to_vec(&msg).expect("a JSON value always serializes")
}

/// Decode one body or SSE `data` payload: a single message or (2025-03-26) a batch array.
pub fn decode(text: &[u8]) -> Result<Vec<Incoming>, McpError> {
    let value: Value = serde_json::from_slice(text)
        .map_err(|e| McpError::new(Reason::InvalidJson, format!("not JSON: {e}")))?;
    match value {
        Value::Array(items) => {
            if items.is_empty() {
                return Err(McpError::new(
                    Reason::InvalidResponse,
                    "empty JSON-RPC batch",
                ));
            }
            items.into_iter().map(decode_one).collect()
        }
        other => Ok(vec![decode_one(other)?]),
    }
}

fn decode_one(value: Value) -> Result<Incoming, McpError> {
    let Value::Object(mut obj) = value else {
        return Err(invalid("JSON-RPC message is not an object"));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("missing jsonrpc: \"2.0\""));
    }
    let id = obj.remove("id");
    let method = match obj.remove("method") {
        Some(Value::String(m)) => Some(m),
        Some(_) => return Err(invalid("method is not a string")),
        None => None,
    };
    let params = obj.remove("params");
    match (id, method) {
        // MCP request ids are strings or integers, never null: such a request cannot be answered.
        (Some(id), Some(_)) if !(id.is_string() || id.is_i64() || id.is_u64()) => {
            Err(invalid("request id is neither a string nor an integer"))
        }
        (Some(id), Some(method)) => Ok(Incoming::Request { id, method, params }),
        (None, Some(method)) => Ok(Incoming::Notification { method, params }),
        (Some(id), None) => Ok(Incoming::Response {
            id,
            outcome: decode_outcome(obj)?,
        }),
        (None, None) => {
            // An error response to a message whose id could not be read has no id (or null).
            Err(invalid("message has neither id nor method"))
        }
    }
}

fn decode_outcome(mut obj: Map<String, Value>) -> Result<Result<Value, RpcError>, McpError> {
    match (obj.remove("result"), obj.remove("error")) {
        (Some(result), None) => Ok(Ok(result)),
        (None, Some(Value::Object(err))) => {
            let code = err
                .get("code")
                .and_then(Value::as_i64)
                .ok_or_else(|| invalid("error object without integer code"))?;
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let data = err.get("data").cloned();
            Ok(Err(RpcError {
                code,
                message,
                data,
            }))
        }
        (None, Some(_)) => Err(invalid("error is not an object")),
        (Some(_), Some(_)) => Err(invalid("response has both result and error")),
        (None, None) => Err(invalid("response has neither result nor error")),
    }
}

fn invalid(detail: &str) -> McpError {
    McpError::new(Reason::InvalidResponse, detail)
}

/// The JSON-RPC error object in an HTTP error body, read leniently: servers answer requests they
/// could not parse with a null, missing or made-up id, and that is still their answer.
pub fn error_in(body: &[u8]) -> Option<RpcError> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let msg = match value {
        Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        other => other,
    };
    let mut obj = match msg {
        Value::Object(obj) => obj,
        _ => return None,
    };
    obj.remove("result");
    decode_outcome(obj).ok()?.err()
}

/// Whether a response id is the one we sent (servers may echo it as a number or, wrongly, a string).
pub fn id_matches(id: &Value, sent: u64) -> bool {
    id.as_u64() == Some(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_three_kinds() {
        let r = decode(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        assert_eq!(
            r,
            vec![Incoming::Response {
                id: json!(1),
                outcome: Ok(json!({}))
            }]
        );
        let n =
            decode(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#).unwrap();
        assert!(
            matches!(&n[0], Incoming::Notification { method, .. } if method == "notifications/tools/list_changed")
        );
        let q = decode(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#).unwrap();
        assert!(matches!(&q[0], Incoming::Request { method, .. } if method == "ping"));
    }

    #[test]
    fn decodes_errors_and_batches() {
        let e = decode(
            br#"[{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid cursor"}}]"#,
        )
        .unwrap();
        assert_eq!(
            e,
            vec![Incoming::Response {
                id: json!(2),
                outcome: Err(RpcError {
                    code: INVALID_PARAMS,
                    message: "Invalid cursor".into(),
                    data: None,
                })
            }]
        );
    }

    #[test]
    fn rejects_malformed_messages_with_reasons() {
        assert_eq!(decode(b"{nope").unwrap_err().reason, Reason::InvalidJson);
        for bad in [
            &br#"[]"#[..],
            br#"42"#,
            br#"{"id":1,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1}}"#,
            br#"{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}"#,
            br#"{"jsonrpc":"2.0","method":3}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
        ] {
            assert_eq!(decode(bad).unwrap_err().reason, Reason::InvalidResponse);
        }
    }

    #[test]
    fn ids_match_only_our_integer() {
        assert!(id_matches(&json!(7), 7));
        assert!(!id_matches(&json!("7"), 7));
        assert!(!id_matches(&json!(8), 7));
    }
}
