//! `flatten_pages`: the mitigation for clients that read only the first page.
//!
//! For a client label named in `flatten_pages`, a `tools/list` without a cursor is not forwarded:
//! the proxy walks every page itself, in the client's own session (its headers, so the same
//! session id, credentials and protocol version), with the probe's [`walker`] and its guards
//! (page cap, byte budget, repeated cursor), and answers with one page holding every tool and no
//! `nextCursor`. If the walk fails for any reason the request is forwarded as usual (the client
//! gets the first page) and the failure is counted.

use std::sync::Arc;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::Shared;
use super::exchange::Exchange;
use super::observe::SseReader;
use mcp_client::listing::walker::{self, Pager};
use mcp_client::mcp::jsonrpc::Incoming;
use mcp_client::mcp::{McpError, Reason};

/// The id of the proxy's own `tools/list` requests in a client's session.
const FLATTEN_ID: &str = "mcp-proxy-flatten";

use super::upstream_tools::LIMITS;

/// Answer the exchange with one merged page when its client is flattened and it is a
/// `tools/list` without a cursor; otherwise (or when the walk fails) give the exchange back.
pub(super) async fn try_flatten(
    sh: &Arc<Shared>,
    parts: &Parts,
    ex: Exchange,
    messages: &[Incoming],
) -> Result<Response, Exchange> {
    if !ex.client.flatten || parts.method != Method::POST {
        return Err(ex);
    }
    let [Incoming::Request { id, method, params }] = messages else {
        return Err(ex);
    };
    let has_cursor = params.as_ref().and_then(|p| p.get("cursor")).is_some();
    if method != "tools/list" || has_cursor {
        return Err(ex);
    }
    let mut pager = FlattenPager {
        sh: sh.clone(),
        parts,
        params: params
            .clone()
            .and_then(|p| p.as_object().cloned())
            .unwrap_or_default(),
        tools: Vec::new(),
        first: None,
    };
    let report = walker::walk(&mut pager, LIMITS).await;
    if let Err(e) = &report.result {
        tracing::debug!(proxy = %sh.config.name, error = %e, "flatten_pages: walk failed; forwarding the first page");
        ex.client.series.flattened(false);
        return Err(ex);
    }
    ex.client.series.flattened(true);
    let mut result = pager.first.unwrap_or_default();
    result.remove("nextCursor");
    result.insert("tools".into(), Value::Array(pager.tools));
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let ex = sh.settle(
        &Method::POST,
        session.as_deref(),
        None,
        reqwest::StatusCode::OK,
        ex,
    );
    sh.metrics.duration("tools/list", ex.started.elapsed());
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap_or_default())
}

struct FlattenPager<'a> {
    sh: Arc<Shared>,
    parts: &'a Parts,
    params: Map<String, Value>,
    tools: Vec<Value>,
    /// The first page's result (its other fields are kept in the merged answer).
    first: Option<Map<String, Value>>,
}

impl Pager for FlattenPager<'_> {
    /// One page, the whole exchange (answer head and body) bounded by [`PAGE_TIMEOUT`]: an SSE
    /// answer that only ever sends keep-alives ends here, not at the byte budget.
    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        tokio::time::timeout(PAGE_TIMEOUT, self.page_within(cursor, max_bytes))
            .await
            .map_err(|_| McpError::new(Reason::Timeout, "tools/list timed out"))?
    }
}

/// Time one page of a flattened listing may take, head to last byte.
const PAGE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl FlattenPager<'_> {
    async fn page_within(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        let mut params = self.params.clone();
        if let Some(c) = cursor {
            params.insert("cursor".into(), Value::String(c.to_string()));
        }
        let body =
            json!({"jsonrpc": "2.0", "id": FLATTEN_ID, "method": "tools/list", "params": params});
        let req = super::upstream::upstream_request(&self.sh, Method::POST, self.parts)
            .body(body.to_string());
        let transport =
            |e: reqwest::Error| McpError::new(Reason::Transport, e.without_url().to_string());
        let resp = req.send().await.map_err(transport)?;
        if !resp.status().is_success() {
            return Err(McpError::new(
                if resp.status().is_server_error() {
                    Reason::Http5xx
                } else {
                    Reason::Http4xx
                },
                format!("HTTP {}", resp.status()),
            ));
        }
        let sse = mcp_client::mcp::http::content_kind(resp.headers())
            == mcp_client::mcp::http::ContentKind::EventStream;
        let mut stream = resp.bytes_stream();
        let mut reader = SseReader::default();
        let mut json = Vec::new();
        let mut total = 0usize;
        let mut answer = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(transport)?;
            total += chunk.len();
            if total > max_bytes {
                return Err(McpError::new(
                    Reason::BodyTooLarge,
                    "tools/list answer over the budget",
                ));
            }
            if sse {
                reader.push(&chunk, |m| {
                    if let Incoming::Response { id, outcome } = m
                        && id == FLATTEN_ID
                    {
                        answer = Some(outcome);
                    }
                });
                if answer.is_some() {
                    break;
                }
            } else {
                json.extend_from_slice(&chunk);
            }
        }
        if !sse {
            for m in mcp_client::mcp::jsonrpc::decode(&json)? {
                if let Incoming::Response { outcome, .. } = m {
                    answer = Some(outcome);
                }
            }
        }
        let result = answer
            .ok_or_else(|| McpError::new(Reason::InvalidResponse, "no answer to tools/list"))?
            .map_err(McpError::from)?;
        if let Some(tools) = result.get("tools").and_then(Value::as_array) {
            self.tools.extend(tools.iter().cloned());
        }
        if self.first.is_none() {
            self.first = result.as_object().cloned();
        }
        Ok((result, total))
    }
}
