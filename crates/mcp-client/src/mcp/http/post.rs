//! The legacy-era POST exchange: send one message with the session's headers and take its
//! answer, 202, JSON or an SSE stream, apart from the modern era's so each era's rules (session
//! ids, resumption) stay in one place.

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::answer::{ContentKind, check_status, content_kind, drain, json_answer};
use super::headers::{MCP_SESSION_ID, SessionHeaders, owned_value, session_id_is_visible_ascii};
use super::sse_answer::Resume;
use super::{HttpTransport, Limits};
use crate::mcp::error::{McpError, Reason};
use crate::mcp::inbox::Inbox;
use crate::mcp::jsonrpc;

/// What a POST came back with.
#[derive(Debug)]
pub enum PostReply {
    /// 202: the notification or response was accepted.
    Accepted,
    /// The JSON-RPC response to our request, with the session id header if the server set one.
    Response {
        outcome: Result<Value, jsonrpc::RpcError>,
        session_id: Option<HeaderValue>,
        /// Bytes the server sent for this answer (the JSON body, or every SSE byte read).
        bytes: usize,
    },
}

impl HttpTransport {
    /// POST one message. For a request (`expect_id` set) wait for its response, filing every other
    /// message met on the way into `inbox`. The caller bounds the whole exchange with a timeout.
    pub async fn post(
        &self,
        session: &SessionHeaders,
        body: Vec<u8>,
        expect_id: Option<u64>,
        inbox: &Inbox,
    ) -> Result<PostReply, McpError> {
        self.post_within(session, body, expect_id, inbox, self.limits)
            .await
    }

    /// [`HttpTransport::post`] under tighter `limits` (a walk's remaining listing budget): an
    /// answer over them fails with `body_too_large` before it is parsed, or read whole.
    pub async fn post_within(
        &self,
        session: &SessionHeaders,
        body: Vec<u8>,
        expect_id: Option<u64>,
        inbox: &Inbox,
        limits: Limits,
    ) -> Result<PostReply, McpError> {
        let body = Bytes::from(body);
        let resp = self
            .send(|c| {
                self.builder(c, Method::POST, session)
                    .header(ACCEPT, "application/json, text/event-stream")
                    .header(CONTENT_TYPE, "application/json")
                    .body(body.clone())
            })
            .await?;
        check_status(resp.status(), session.session_id.is_some())?;
        let new_session_id = resp.headers().get(MCP_SESSION_ID).map(owned_value);
        let Some(sent) = expect_id else {
            // Body (if any) of an accepted notification is irrelevant; drain a bounded amount so
            // the connection can be reused.
            drain(resp, limits.max_body_bytes).await;
            return Ok(PostReply::Accepted);
        };
        if resp.status() == StatusCode::ACCEPTED {
            return Err(McpError::new(
                Reason::InvalidResponse,
                "202 Accepted for a request that needs a response",
            ));
        }
        let (outcome, bytes) = match content_kind(resp.headers()) {
            ContentKind::Json => json_answer(resp, sent, inbox, limits).await?,
            ContentKind::EventStream => {
                // The answer to `initialize` is resumed inside the session it just opened: a GET
                // without that id is refused by a stateful server. Any other answer is resumed
                // with the caller's headers unless the server named a session on it.
                let resume_as = match &new_session_id {
                    None => Some(session.clone()),
                    Some(id) if session_id_is_visible_ascii(id) => Some(SessionHeaders {
                        session_id: Some(id.clone()),
                        protocol_version: session.protocol_version.clone(),
                    }),
                    Some(_) => None,
                };
                let resume = match &resume_as {
                    Some(session) => Resume::With(session),
                    None => Resume::Never(
                        "session id is not visible ASCII; cannot resume the SSE answer",
                    ),
                };
                self.read_sse_answer(resume, resp, sent, inbox, limits)
                    .await?
            }
            ContentKind::Other => {
                return Err(McpError::new(
                    Reason::ContentType,
                    "answer is neither application/json nor text/event-stream",
                ));
            }
        };
        Ok(PostReply::Response {
            outcome,
            session_id: new_session_id,
            bytes,
        })
    }
}
