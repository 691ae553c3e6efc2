//! The modern era's (2026-07-28) POSTs: a request whose 4xx may carry a JSON-RPC error as its
//! answer, with the method and name headers and no resumption, and the `subscriptions/listen`
//! request read up to its acknowledgement. Apart from the legacy POST because the eras disagree
//! on status, headers and broken streams.

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::answer::{
    ContentKind, check_status, content_kind, find_response, json_answer, read_capped,
};
use super::capped_events::CappedEvents;
use super::headers::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, ModernHeaders, SessionHeaders};
use super::notification_stream::NotificationStream;
use super::sse_answer::Resume;
use super::{HttpTransport, Limits};
use crate::mcp::error::{McpError, Reason};
use crate::mcp::inbox::Inbox;
use crate::mcp::jsonrpc::{self, Incoming};
use crate::mcp::sse_lines::Cursor;
use crate::target_http::Route;

/// Largest error body read from a 4xx answer of the modern era (a JSON-RPC error object).
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

impl HttpTransport {
    /// POST one modern-era (2026-07-28) request and wait for its answer. Unlike the legacy era,
    /// a JSON-RPC error may come with a 4xx status (the spec's error table: 400 for invalid
    /// params, 404 for an unimplemented method), so the body of a 4xx is read as the answer when
    /// it holds one; a 4xx without one is an HTTP failure as before. An SSE answer that breaks is
    /// lost (no resumption in this era): the caller re-issues it as a new request.
    pub async fn post_modern(
        &self,
        headers: &ModernHeaders,
        body: Vec<u8>,
        sent: u64,
        inbox: &Inbox,
        limits: Limits,
    ) -> Result<(Result<Value, jsonrpc::RpcError>, usize), McpError> {
        let resp = match modern_status(self.send_modern(headers, body, Route::Pool).await?).await? {
            Answer::Status(resp) => resp,
            Answer::Error(err, bytes) => return Ok((Err(err), bytes)),
        };
        if resp.status() == StatusCode::ACCEPTED {
            return Err(McpError::new(
                Reason::InvalidResponse,
                "202 Accepted for a request that needs a response",
            ));
        }
        match content_kind(resp.headers()) {
            ContentKind::Json => json_answer(resp, sent, inbox, limits).await,
            ContentKind::EventStream => {
                let never = Resume::Never("the SSE answer ended before the response");
                self.read_sse_answer(never, resp, sent, inbox, limits).await
            }
            ContentKind::Other => Err(McpError::new(
                Reason::ContentType,
                "answer is neither application/json nor text/event-stream",
            )),
        }
    }

    /// Open a `subscriptions/listen` stream (2026-07-28): POST the listen request and read its
    /// SSE answer up to the server's `notifications/subscriptions/acknowledged`, which says
    /// whether tool list changes will be sent. The returned stream carries the notifications and
    /// ends cleanly on the listen request's own result (the spec's graceful close). The caller
    /// bounds the wait for the acknowledgement with its timeout.
    pub async fn open_listen(
        &self,
        headers: &ModernHeaders,
        body: Vec<u8>,
        sent: u64,
        inbox: &Inbox,
    ) -> Result<Listening, McpError> {
        let resp =
            match modern_status(self.send_modern(headers, body, Route::OwnSocket).await?).await? {
                Answer::Status(resp) => resp,
                Answer::Error(err, _) => return Err(err.into()),
            };
        match content_kind(resp.headers()) {
            ContentKind::EventStream => {}
            ContentKind::Json => {
                let body = read_capped(resp, self.limits.max_body_bytes).await?;
                return match find_response(jsonrpc::decode(&body)?, sent, inbox)? {
                    Some(Err(err)) => Err(err.into()),
                    _ => Err(McpError::new(
                        Reason::StreamClosed,
                        "subscriptions/listen answered at once instead of opening a stream",
                    )),
                };
            }
            ContentKind::Other => {
                return Err(McpError::new(
                    Reason::ContentType,
                    "subscriptions/listen answer is not text/event-stream",
                ));
            }
        }
        let mut events = CappedEvents::new(resp, self.limits.max_event_bytes, Cursor::default());
        for _ in 0..self.limits.max_events_per_answer {
            let Some(event) = events.next().await else {
                break;
            };
            let event = event?;
            if event.data.is_empty() {
                continue;
            }
            for msg in jsonrpc::decode(event.data.as_bytes())? {
                match msg {
                    Incoming::Notification { method, params }
                        if method == "notifications/subscriptions/acknowledged" =>
                    {
                        let tools_list_changed = params
                            .as_ref()
                            .and_then(|p| p.pointer("/notifications/toolsListChanged"))
                            .and_then(Value::as_bool)
                            .unwrap_or(false);
                        return Ok(Listening {
                            stream: NotificationStream {
                                events,
                                ends_on: Some(sent),
                            },
                            tools_list_changed,
                        });
                    }
                    Incoming::Response { id, outcome } if jsonrpc::id_matches(&id, sent) => {
                        return Err(match outcome {
                            Err(err) => err.into(),
                            Ok(_) => McpError::new(
                                Reason::StreamClosed,
                                "subscriptions/listen ended before it was acknowledged",
                            ),
                        });
                    }
                    other => inbox.deliver(other),
                }
            }
        }
        Err(McpError::new(
            Reason::StreamClosed,
            "subscriptions/listen stream ended without an acknowledgement",
        ))
    }

    async fn send_modern(
        &self,
        headers: &ModernHeaders,
        body: Vec<u8>,
        route: Route,
    ) -> Result<reqwest::Response, McpError> {
        let body = Bytes::from(body);
        let build = |c: &reqwest::Client| {
            let mut b = self
                .builder(c, Method::POST, &SessionHeaders::default())
                .header(ACCEPT, "application/json, text/event-stream")
                .header(CONTENT_TYPE, "application/json")
                .header(MCP_PROTOCOL_VERSION, headers.protocol_version.clone())
                .header(MCP_METHOD, headers.method.clone());
            if let Some(name) = &headers.name {
                b = b.header(MCP_NAME, name.clone());
            }
            for (k, v) in &headers.params {
                b = b.header(k.clone(), v.clone());
            }
            b.body(body.clone())
        };
        self.send_by(build, route).await
    }
}

/// An acknowledged `subscriptions/listen` stream.
pub struct Listening {
    pub stream: NotificationStream,
    /// Whether the server honours `toolsListChanged` (its acknowledgement echoes it).
    pub tools_list_changed: bool,
}

/// What a modern-era POST's status said: go on reading, or the JSON-RPC error its 4xx carried.
enum Answer {
    Status(reqwest::Response),
    Error(jsonrpc::RpcError, usize),
}

/// Success passes; a 4xx whose JSON body holds a JSON-RPC error is that error (whatever its
/// id: servers answer unparseable requests with a null or made-up id); anything else fails by
/// its status.
async fn modern_status(resp: reqwest::Response) -> Result<Answer, McpError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(Answer::Status(resp));
    }
    let failed = check_status(status, false).expect_err("not a success");
    if !status.is_client_error() || content_kind(resp.headers()) != ContentKind::Json {
        return Err(failed);
    }
    let body = read_capped(resp, MAX_ERROR_BODY_BYTES).await?;
    match jsonrpc::error_in(&body) {
        Some(err) => Ok(Answer::Error(err, body.len())),
        None => Err(failed),
    }
}
