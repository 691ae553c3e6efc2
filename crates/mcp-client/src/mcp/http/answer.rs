//! What an HTTP answer says, whatever the exchange: its status as a [`Reason`], its content kind,
//! its body read under a cap (or drained so the connection is reused), and the response to our
//! request among the JSON-RPC messages it holds. Shared by the POSTs, the GET streams, the
//! HTTP+SSE transport and the proxy, so each reads an answer the same way.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::Limits;
use crate::mcp::error::{McpError, Reason};
use crate::mcp::inbox::Inbox;
use crate::mcp::jsonrpc::{self, Incoming};

/// The response to `sent` in a JSON body (other messages in it go to `inbox`), and its bytes.
pub(super) async fn json_answer(
    resp: reqwest::Response,
    sent: u64,
    inbox: &Inbox,
    limits: Limits,
) -> Result<(Result<Value, jsonrpc::RpcError>, usize), McpError> {
    let body = read_capped(resp, limits.max_body_bytes).await?;
    let outcome = find_response(jsonrpc::decode(&body)?, sent, inbox)?
        .ok_or_else(|| McpError::new(Reason::InvalidResponse, "JSON body holds no response"))?;
    Ok((outcome, body.len()))
}

pub(super) fn find_response(
    msgs: Vec<Incoming>,
    sent: u64,
    inbox: &Inbox,
) -> Result<Option<Result<Value, jsonrpc::RpcError>>, McpError> {
    let mut found = None;
    for msg in msgs {
        match msg {
            Incoming::Response { id, outcome } if found.is_none() => {
                if !jsonrpc::id_matches(&id, sent) {
                    return Err(McpError::new(
                        Reason::InvalidResponse,
                        format!(
                            "response id {} does not match request id {sent}",
                            jsonrpc_id(&id)
                        ),
                    ));
                }
                found = Some(outcome);
            }
            other => inbox.deliver(other),
        }
    }
    Ok(found)
}

fn jsonrpc_id(id: &Value) -> String {
    crate::mcp::error::truncate(&id.to_string(), 40)
}

pub(crate) fn check_status(status: StatusCode, had_session: bool) -> Result<(), McpError> {
    let code = status.as_u16();
    let reason = match code {
        200..=299 => return Ok(()),
        300..=399 => Reason::Redirect,
        401 | 403 => Reason::Auth,
        404 if had_session => Reason::SessionExpired,
        400..=499 => Reason::Http4xx,
        _ => Reason::Http5xx,
    };
    Err(McpError::http(reason, code))
}

#[derive(Debug, PartialEq, Eq)]
pub enum ContentKind {
    Json,
    EventStream,
    Other,
}

pub fn content_kind(headers: &HeaderMap) -> ContentKind {
    match crate::net::body::media_type(headers).as_str() {
        "application/json" => ContentKind::Json,
        "text/event-stream" => ContentKind::EventStream,
        _ => ContentKind::Other,
    }
}

pub(super) async fn read_capped(
    mut resp: reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, McpError> {
    crate::net::body::read_capped(&mut resp, cap)
        .await
        .map_err(|e| McpError::from_reqwest(&e))?
        .ok_or_else(|| McpError::new(Reason::BodyTooLarge, format!("body over {cap} bytes")))
}

pub(crate) async fn drain(mut resp: reqwest::Response, cap: usize) {
    let mut seen = 0usize;
    while let Ok(Some(chunk)) = resp.chunk().await {
        seen += chunk.len();
        if seen > cap {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::{CONTENT_TYPE, HeaderValue};

    use super::*;

    #[test]
    fn statuses_map_to_reasons() {
        assert!(check_status(StatusCode::OK, true).is_ok());
        let r = |s: u16, sess| {
            check_status(StatusCode::from_u16(s).unwrap(), sess)
                .unwrap_err()
                .reason
        };
        assert_eq!(r(404, true), Reason::SessionExpired);
        assert_eq!(r(404, false), Reason::Http4xx);
        assert_eq!(r(401, false), Reason::Auth);
        assert_eq!(r(403, true), Reason::Auth);
        assert_eq!(r(302, false), Reason::Redirect);
        assert_eq!(r(400, true), Reason::Http4xx);
        assert_eq!(r(503, true), Reason::Http5xx);
    }

    #[test]
    fn content_types_are_matched_by_essence() {
        let mut h = HeaderMap::new();
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("Application/JSON; charset=utf-8"),
        );
        assert_eq!(content_kind(&h), ContentKind::Json);
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        assert_eq!(content_kind(&h), ContentKind::EventStream);
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
        assert_eq!(content_kind(&h), ContentKind::Other);
    }
}
