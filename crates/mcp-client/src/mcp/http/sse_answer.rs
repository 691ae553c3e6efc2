//! Reading a POST's SSE answer up to the response to our request: resumed with `Last-Event-ID`
//! when the server cuts it early (legacy sessions), held to [`Limits`] across its streams, and
//! read on to its end afterwards so HTTP/1 can reuse the connection. Both eras' POSTs read their
//! SSE answers here.

use std::sync::atomic::Ordering;
use std::time::Duration;

use reqwest::Method;
use reqwest::header::{ACCEPT, HeaderValue};
use serde_json::Value;

use super::answer::{ContentKind, check_status, content_kind, find_response};
use super::capped_events::CappedEvents;
use super::headers::{LAST_EVENT_ID, SessionHeaders};
use super::{HttpTransport, Limits};
use crate::mcp::error::{McpError, Reason};
use crate::mcp::inbox::Inbox;
use crate::mcp::jsonrpc;
use crate::mcp::sse_lines::{Cursor, EventId};

/// Most GETs with `Last-Event-ID` that one POST answer may take (SEP-1699 polling).
pub const MAX_RESUMPTIONS: usize = 3;
/// Wait before resuming when the server sent no `retry`: the SSE standard leaves the first
/// reconnection time to the client ("a few seconds"); a request deadline is a few seconds.
const DEFAULT_RESUME_WAIT: Duration = Duration::from_secs(1);
/// A larger `retry` is cut to this; the caller's request deadline usually cuts it sooner.
const MAX_RESUME_WAIT: Duration = Duration::from_secs(60);

/// Whether an SSE answer may be resumed with `Last-Event-ID` (legacy sessions), or not at all
/// (the modern era has no resumption: a broken answer is lost and re-issued by the caller).
pub(super) enum Resume<'a> {
    With(&'a SessionHeaders),
    Never(&'static str),
}

impl HttpTransport {
    /// Read an SSE answer until the response to `sent`. When the server ends the stream before
    /// it (2025-11-25 servers may close after a priming event), resume with a GET carrying
    /// `Last-Event-ID` after the `retry` wait, at most [`MAX_RESUMPTIONS`] times. The caps of
    /// [`Limits`] hold for the answer as a whole, across its streams.
    ///
    /// `resume` says with which session headers the resumption GETs go, or why there are none.
    pub(super) async fn read_sse_answer(
        &self,
        resume: Resume<'_>,
        resp: reqwest::Response,
        sent: u64,
        inbox: &Inbox,
        limits: Limits,
    ) -> Result<(Result<Value, jsonrpc::RpcError>, usize), McpError> {
        let mut events = CappedEvents::new(resp, limits.max_event_bytes, Cursor::default());
        let mut earlier_bytes = 0usize;
        let mut count = 0usize;
        for resumption in 0..=MAX_RESUMPTIONS {
            if resumption > 0 {
                let cursor = events.cursor();
                let unusable = || {
                    McpError::new(
                        Reason::InvalidResponse,
                        "SSE event id cannot be sent as Last-Event-ID",
                    )
                };
                let last_id = match &cursor.last_id {
                    EventId::Id(id) => HeaderValue::from_str(id).map_err(|_| unusable())?,
                    EventId::Unusable => return Err(unusable()),
                    EventId::None => {
                        return Err(McpError::new(
                            Reason::StreamClosed,
                            "SSE answer ended before the response, with no event id to resume from",
                        ));
                    }
                };
                let session = match resume {
                    Resume::With(session) => session,
                    Resume::Never(why) => return Err(McpError::new(Reason::StreamClosed, why)),
                };
                let wait = cursor
                    .retry
                    .unwrap_or(DEFAULT_RESUME_WAIT)
                    .min(MAX_RESUME_WAIT);
                tracing::debug!(
                    request_id = sent,
                    resumption,
                    wait_ms = wait.as_millis() as u64,
                    "SSE answer closed before the response; resuming with Last-Event-ID"
                );
                tokio::time::sleep(wait).await;
                earlier_bytes += events.total();
                let resp = self.resume(session, last_id).await?;
                events = CappedEvents::new(resp, limits.max_event_bytes, cursor);
            }
            while let Some(event) = events.next().await {
                let event = event?;
                if earlier_bytes + events.total() > limits.max_body_bytes {
                    return Err(McpError::new(
                        Reason::BodyTooLarge,
                        "SSE answer over the size cap",
                    ));
                }
                count += 1;
                if count > limits.max_events_per_answer {
                    return Err(McpError::new(
                        Reason::BodyTooLarge,
                        "SSE answer has too many events",
                    ));
                }
                if event.data.is_empty() {
                    continue; // priming event (2025-11-25) or keep-alive
                }
                if let Some(outcome) =
                    find_response(jsonrpc::decode(event.data.as_bytes())?, sent, inbox)?
                {
                    let bytes = earlier_bytes + events.total();
                    if !read_to_end(&mut events, inbox).await {
                        self.unfinished_answers.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(
                            request_id = sent,
                            "SSE answer not ended right after its response; its connection is dropped"
                        );
                    }
                    return Ok((outcome, bytes));
                }
            }
        }
        Err(McpError::new(
            Reason::StreamClosed,
            format!("SSE answer ended before the response after {MAX_RESUMPTIONS} resumptions"),
        ))
    }

    /// The GET that resumes an answer stream: same session headers, `Last-Event-ID`. The spec
    /// allows only an event stream here; 405 means the server offers no GET at all.
    async fn resume(
        &self,
        session: &SessionHeaders,
        last_id: HeaderValue,
    ) -> Result<reqwest::Response, McpError> {
        let resp = self
            .send(|c| {
                self.builder(c, Method::GET, session)
                    .header(ACCEPT, "text/event-stream")
                    .header(LAST_EVENT_ID, last_id.clone())
            })
            .await?;
        check_status(resp.status(), session.session_id.is_some()).map_err(|e| {
            McpError::new(e.reason, format!("resuming the SSE answer: {}", e.detail))
        })?;
        if content_kind(resp.headers()) != ContentKind::EventStream {
            return Err(McpError::new(
                Reason::ContentType,
                "resumed SSE answer is not text/event-stream",
            ));
        }
        Ok(resp)
    }
}

/// How long an SSE answer's stream is read on after its response, for its end.
const DRAIN_WAIT: Duration = Duration::from_millis(20);
/// Most bytes (and events) read after the response while waiting for the end.
const DRAIN_BYTES: usize = 64 * 1024;
const DRAIN_EVENTS: usize = 64;

/// Read an SSE answer on from its response to its end, filing what follows into `inbox`, so
/// HTTP/1 can return the connection to the pool: a body dropped before its last chunk closes the
/// connection, and the next request opens a new one. The spec asks the server to end the stream
/// with the response, so the end is normally already read or a packet away; a server that keeps
/// it open costs the caller at most [`DRAIN_WAIT`], and at most [`DRAIN_BYTES`] (besides the
/// event cap the answer is already held to). Inline rather than in the background: a walk's
/// next request follows at once and would race a background drain for the connection.
///
/// Returns whether the stream ended cleanly in time.
async fn read_to_end(events: &mut CappedEvents, inbox: &Inbox) -> bool {
    let start = events.total();
    let rest = async {
        for _ in 0..DRAIN_EVENTS {
            let event = match events.next().await {
                None => return true,
                Some(Ok(event)) => event,
                Some(Err(_)) => return false,
            };
            if events.total() - start > DRAIN_BYTES {
                return false;
            }
            if event.data.is_empty() {
                continue;
            }
            match jsonrpc::decode(event.data.as_bytes()) {
                Ok(msgs) => msgs.into_iter().for_each(|m| inbox.deliver(m)),
                Err(_) => return false,
            }
        }
        false
    };
    tokio::time::timeout(DRAIN_WAIT, rest)
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::super::post::PostReply;
    use super::*;

    /// A raw HTTP/1.1 server answering every POST with a chunked SSE stream holding a
    /// notification and the response; the stream then ends (`ends`) or stays open. Returns its
    /// URL and the count of TCP connections it accepted.
    async fn sse_server(ends: bool) -> (url::Url, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One request: headers, then the body its Content-Length announces.
                        let head_end = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        while buf.len() < head_end + len {
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let body: Value =
                            serde_json::from_slice(&buf[head_end..head_end + len]).unwrap();
                        buf.drain(..head_end + len);
                        let note =
                            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#;
                        let answer =
                            serde_json::json!({"jsonrpc":"2.0","id":body["id"],"result":{}});
                        let events = format!("data: {note}\n\ndata: {answer}\n\n");
                        let mut out = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n",
                            events.len()
                        );
                        if !ends {
                            sock.write_all(out.as_bytes()).await.unwrap();
                            // Keep the answer open until the client goes away.
                            let mut rest = [0u8; 64];
                            while matches!(sock.read(&mut rest).await, Ok(n) if n > 0) {}
                            return;
                        }
                        // A trailing notification after the response, then the stream's end.
                        let late = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
                        out.push_str(&format!("{:x}\r\n{late}\r\n0\r\n\r\n", late.len()));
                        if sock.write_all(out.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (
            url::Url::parse(&format!("http://{addr}/mcp")).unwrap(),
            accepted,
        )
    }

    async fn post_three(url: url::Url) -> (HttpTransport, Inbox) {
        let t = HttpTransport::new(url, &[], Limits::default()).unwrap();
        let (inbox, _requests) = Inbox::new();
        for id in 1..=3u64 {
            let body =
                serde_json::to_vec(&serde_json::json!({"jsonrpc":"2.0","id":id,"method":"ping"}))
                    .unwrap();
            let reply = t
                .post(&SessionHeaders::default(), body, Some(id), &inbox)
                .await
                .unwrap();
            assert!(matches!(reply, PostReply::Response { outcome: Ok(_), .. }));
        }
        (t, inbox)
    }

    #[tokio::test]
    async fn sse_answers_read_to_their_end_reuse_one_connection() {
        let (url, accepted) = sse_server(true).await;
        let (t, inbox) = post_three(url).await;
        assert_eq!(
            accepted.load(Ordering::Relaxed),
            1,
            "one kept-alive connection"
        );
        assert_eq!(t.unfinished_answers(), 0);
        assert_eq!(
            inbox.list_changed_count(),
            3,
            "messages after the response are filed"
        );
    }

    #[tokio::test]
    async fn an_sse_answer_left_open_is_dropped_after_its_response() {
        let (url, accepted) = sse_server(false).await;
        let (t, _inbox) = post_three(url).await;
        assert_eq!(t.unfinished_answers(), 3);
        assert_eq!(
            accepted.load(Ordering::Relaxed),
            3,
            "each open answer took its connection"
        );
    }
}
