//! Forwarding one HTTP exchange faithfully, and noting what it carried.
//!
//! The request goes upstream as the client sent it (method, path, query, headers including
//! `Authorization`, `Mcp-Session-Id`, `Last-Event-ID`, `MCP-Protocol-Version`, `Mcp-Param-*`;
//! hop-by-hop headers excepted), the answer comes back with its status and headers, and its body
//! is streamed chunk by chunk: an SSE event leaves as soon as it arrives; the copy shown to
//! [`observe`](super::observe) never holds it back. Only a few things are answered by the proxy
//! itself, each counted by reason: a path it does not forward (404, see [`super::paths`]), a body
//! over `max_request_bytes` (413), a body that is not JSON-RPC (400 with -32700 / -32600), an
//! upstream that cannot be reached (502), whose answer cannot be read (502, saying what was wrong
//! with it: a client's operator must be able to tell a dead server from a broken one), or that
//! does not answer within `upstream_timeout` (504). Header values are never logged.
//!
//! Time budgets: an upstream has `upstream_timeout` for the head of its answer and, unless the
//! answer is a stream (SSE), for its whole body (a body cut at the deadline ends the client's
//! connection, so it cannot be taken for a complete answer). A stream ends cleanly when the
//! upstream sends nothing for `stream_idle_timeout` (the client may resume it with
//! `Last-Event-ID`). Neither holds a connection, and its two descriptors, for ever.
//!
//! This file is the handler itself: the proxy's own answers and the upstream request. What the
//! exchange means for its session is [`super::requests`]'s and [`super::answers`]'s job, and
//! the answer's body, with its time budget, is [`super::relay`]'s.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::Shared;
use super::exchange::is_stream_key;
use super::relay::{Kind, Observed, Observer};
use super::upstream::{end_to_end, upstream_request};
use crate::proxy::metrics::Rejected;
use mcp_client::mcp::jsonrpc;

const SESSION: &str = "mcp-session-id";
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error answered by the proxy itself.
fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Why an upstream request failed, for the client and the counter: the transport's error read
/// down to what the upstream did.
fn upstream_failure(e: &reqwest::Error) -> (Rejected, &'static str) {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_parse_too_large() {
                return (
                    Rejected::UpstreamInvalidResponse,
                    "the MCP server's answer could not be read: its header section is too large (too many or too long headers)",
                );
            }
            if h.is_parse() || h.is_parse_status() {
                return (
                    Rejected::UpstreamInvalidResponse,
                    "the MCP server's answer could not be read: it is not a valid HTTP response",
                );
            }
            if h.is_incomplete_message() {
                return (
                    Rejected::UpstreamInvalidResponse,
                    "the MCP server closed the connection before its answer was complete",
                );
            }
        }
        source = err.source();
    }
    (
        Rejected::UpstreamUnavailable,
        "the proxy could not reach the MCP server",
    )
}

/// The answer to a path the proxy does not forward.
fn unknown_path() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "not found: this proxy forwards only its MCP endpoint\n",
    )
        .into_response()
}

/// The axum handler of every path and method.
pub(super) async fn handle(State(sh): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if !sh.paths.allows(parts.uri.path()) {
        sh.metrics.rejected(Rejected::UnknownPath);
        return unknown_path();
    }
    let started = Instant::now();
    let session_id = parts
        .headers
        .get(SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut messages = Vec::new();
    let body = if parts.method == Method::POST {
        let bytes = match axum::body::to_bytes(body, sh.config.max_request_bytes).await {
            Ok(b) => b,
            Err(_) => {
                sh.metrics.rejected(Rejected::BodyTooLarge);
                return rpc_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    INVALID_REQUEST,
                    "request body over the proxy's max_request_bytes",
                );
            }
        };
        match jsonrpc::decode(&bytes) {
            Ok(m) => messages = m,
            Err(e) => {
                sh.metrics.rejected(Rejected::InvalidJson);
                let (code, what) = if e.reason == mcp_client::mcp::Reason::InvalidJson {
                    (PARSE_ERROR, "Parse error: the body is not JSON")
                } else {
                    (
                        INVALID_REQUEST,
                        "Invalid Request: not a JSON-RPC 2.0 message",
                    )
                };
                return rpc_error(StatusCode::BAD_REQUEST, code, what);
            }
        }
        Some(bytes)
    } else {
        let _ = body;
        None
    };
    let exchange = sh.exchange(&parts, session_id.as_deref(), &messages, started);
    if let Some(answer) = super::heal::refuse(&sh, &exchange, &messages).await {
        return answer;
    }
    let exchange = match super::flatten::try_flatten(&sh, &parts, exchange, &messages).await {
        Ok(answer) => return answer,
        Err(exchange) => exchange,
    };
    // An HTTP+SSE POST is answered on its session's GET stream, often before its own `202`
    // (the SDK servers write the answer first): its requests are accounted before it leaves,
    // so that answer is read after them (a page's fresh nextCursor is not taken for one the
    // request abandoned). Its status settles nothing else: the session is the stream's.
    let on_stream = exchange.key.as_deref().is_some_and(is_stream_key);
    let exchange = if on_stream {
        sh.settle(
            &parts.method,
            None,
            None,
            reqwest::StatusCode::ACCEPTED,
            exchange,
        )
    } else {
        exchange
    };
    let mut upstream = upstream_request(&sh, parts.method.clone(), &parts);
    if let Some(b) = body {
        upstream = upstream.body(b);
    }
    let budget = sh.config.upstream_timeout;
    let deadline = tokio::time::Instant::now() + budget;
    let resp = match tokio::time::timeout_at(deadline, upstream.send()).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            let (why, what) = upstream_failure(&e);
            sh.metrics.rejected(why);
            tracing::debug!(proxy = %sh.config.name, reason = why.as_str(), error = %mcp_client::text::bounded(&e.without_url().to_string(), 200), "upstream request failed");
            return rpc_error(StatusCode::BAD_GATEWAY, INTERNAL_ERROR, what);
        }
        Err(_) => {
            sh.metrics.rejected(Rejected::UpstreamTimeout);
            return rpc_error(
                StatusCode::GATEWAY_TIMEOUT,
                INTERNAL_ERROR,
                &format!(
                    "the MCP server did not answer within the proxy's upstream_timeout ({})",
                    humantime::format_duration(budget)
                ),
            );
        }
    };
    let status = resp.status();
    let new_session = resp
        .headers()
        .get(SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let exchange = if on_stream {
        exchange
    } else {
        sh.settle(
            &parts.method,
            session_id.as_deref(),
            new_session,
            status,
            exchange,
        )
    };
    let mut out = Response::builder().status(status.as_u16());
    for (name, value) in end_to_end(resp.headers()) {
        out = out.header(name, value);
    }
    let learn_endpoints = parts.method == Method::GET && sh.paths.is_mcp(parts.uri.path());
    let kind = Kind::of(&resp, &exchange);
    let heal = super::heal::tap(
        &sh,
        &parts.method,
        sh.paths.is_mcp(parts.uri.path()),
        &exchange,
        &messages,
        matches!(kind, Kind::Sse(_)) && status.is_success(),
    );
    let observer = Observer::new(sh, exchange, kind, learn_endpoints);
    let observed = Observed::new(resp, deadline, heal, observer);
    out.body(Body::from_stream(observed))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}
