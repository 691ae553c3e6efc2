//! The HTTP+SSE transport of protocol 2024-11-05 (deprecated since 2025-03-26, still served by
//! the Python and TypeScript SDKs): the client holds one GET event stream, the server's first
//! event (`endpoint`) names where to POST, every client message is one POST there (answered
//! 202), and every server message, responses included, comes back as a `message` event on the
//! one stream. Responses are matched to requests by id in [`Duplex`].
//!
//! The endpoint is used verbatim, resolved against the SSE URL, because the SDKs differ in its
//! shape (`/messages/?session_id=<hex>`, `/messages?sessionId=<uuid>`). It must stay on the SSE
//! URL's origin: the configured headers (auth) go on every POST, and an endpoint elsewhere would
//! carry them to another host. For the same reason redirects are never followed. A lost stream
//! ends the channel: the server keeps its session only as long as the stream, so the owner opens
//! a new one and re-walks.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use url::Url;

use super::duplex::{Duplex, Feed, Outlet};
use super::error::{McpError, Reason};
use super::http::{
    CappedEvents, ContentKind, HttpTransport, Limits, check_status, content_kind, drain,
};
use super::inbox::Inbox;
use super::sse_lines::Cursor;
use crate::net::origin;
use crate::target_http::{Route, TargetHttp};

/// Events (other than comments) a server may send before `endpoint`.
const MAX_EVENTS_BEFORE_ENDPOINT: usize = 16;
/// A POST's answer body is not used; this much is read so the connection can be reused.
const POST_DRAIN_BYTES: usize = 64 * 1024;

/// Open the SSE stream at `url` and wait (at most `timeout`) for its `endpoint` event. `headers`
/// go on the GET and every POST, with the `Authorization` of `net` (the target's client and
/// credentials; a refusal they can fix is retried once); each POST is bounded by `timeout`; each
/// event by `limits.max_body_bytes` (one event is one whole message).
pub async fn connect_sse(
    net: Arc<TargetHttp>,
    url: Url,
    headers: &[(String, String)],
    inbox: Arc<Inbox>,
    limits: Limits,
    timeout: Duration,
) -> Result<Duplex, McpError> {
    let http = Arc::new(HttpTransport::with_net(url.clone(), headers, limits, net)?);
    let opened = tokio::time::timeout(timeout, open(&http, &url, limits.max_body_bytes))
        .await
        .unwrap_or_else(|_| {
            Err(McpError::new(
                Reason::Timeout,
                format!("no endpoint event within {timeout:?}"),
            ))
        })?;
    let (events, endpoint) = opened;
    let (mut duplex, feed) = Duplex::new(
        inbox,
        Poster {
            http,
            endpoint,
            timeout,
        },
    );
    duplex.own(tokio::spawn(read_messages(events, feed)));
    Ok(duplex)
}

/// GET the stream and read up to the `endpoint` event; return the stream and the POST URL.
async fn open(
    http: &HttpTransport,
    url: &Url,
    max_event: usize,
) -> Result<(CappedEvents, Url), McpError> {
    let resp = http
        .send_by(
            |c| {
                http.request_to(c, Method::GET, url.clone())
                    .header(ACCEPT, "text/event-stream")
            },
            Route::OwnSocket,
        )
        .await?;
    check_status(resp.status(), false)?;
    if content_kind(resp.headers()) != ContentKind::EventStream {
        return Err(McpError::new(
            Reason::ContentType,
            "SSE endpoint did not answer with text/event-stream",
        ));
    }
    let mut events = CappedEvents::new(resp, max_event, Cursor::default());
    for _ in 0..MAX_EVENTS_BEFORE_ENDPOINT {
        let event = match events.next().await {
            None => {
                return Err(McpError::new(
                    Reason::StreamClosed,
                    "SSE stream ended before the endpoint event",
                ));
            }
            Some(event) => event?,
        };
        if event.event == "endpoint" {
            let endpoint = message_endpoint(url, &event.data)?;
            return Ok((events, endpoint));
        }
    }
    Err(McpError::new(
        Reason::InvalidResponse,
        format!("no endpoint event among the first {MAX_EVENTS_BEFORE_ENDPOINT} SSE events"),
    ))
}

/// The POST URL named by an `endpoint` event, resolved against the SSE URL; refused when it
/// leaves the SSE URL's origin (scheme, host or port), by the rule every URL a server hands
/// over is held to (`net::origin`).
pub fn message_endpoint(sse_url: &Url, data: &str) -> Result<Url, McpError> {
    let data = data.trim();
    if data.is_empty() {
        return Err(McpError::new(
            Reason::InvalidResponse,
            "endpoint event has no URI",
        ));
    }
    let endpoint = sse_url.join(data).map_err(|e| {
        McpError::new(
            Reason::InvalidResponse,
            format!("endpoint event is not a URI reference: {e}"),
        )
    })?;
    if !origin::same_origin(sse_url, &endpoint) {
        return Err(McpError::new(
            Reason::InvalidResponse,
            format!(
                "endpoint event names another origin ({}); refused so the configured headers \
                 are not sent there",
                origin::shown(&endpoint)
            ),
        ));
    }
    Ok(endpoint)
}

/// Read `message` events into the channel until the stream ends; other event types are ignored.
async fn read_messages(mut events: CappedEvents, feed: Feed) {
    let why = loop {
        match events.next().await {
            None => break McpError::new(Reason::StreamClosed, "server ended the SSE stream"),
            Some(Err(e)) => break e,
            Some(Ok(event)) => {
                if event.event != "message" || event.data.is_empty() {
                    continue;
                }
                if let Err(e) = feed.message(event.data.as_bytes()) {
                    break McpError::new(e.reason, format!("SSE message event: {}", e.detail));
                }
            }
        }
    };
    feed.end(why);
}

/// POSTs each message to the endpoint.
struct Poster {
    http: Arc<HttpTransport>,
    endpoint: Url,
    timeout: Duration,
}

impl Outlet for Poster {
    /// A 404 (the server forgot the session) also ends the channel.
    async fn write(&mut self, body: Vec<u8>, feed: &Feed) -> Result<(), McpError> {
        let body = bytes::Bytes::from(body);
        let post = async {
            let resp = self
                .http
                .send(|c| {
                    self.http
                        .request_to(c, Method::POST, self.endpoint.clone())
                        .header(CONTENT_TYPE, "application/json")
                        .body(body.clone())
                })
                .await?;
            // The endpoint carries the session: a 404 there means the session is gone. 202 is
            // what the spec's SDKs send; any 2xx is taken.
            check_status(resp.status(), true)?;
            drain(resp, POST_DRAIN_BYTES).await;
            Ok(())
        };
        let result = tokio::time::timeout(self.timeout, post)
            .await
            .unwrap_or_else(|_| {
                Err(McpError::new(
                    Reason::Timeout,
                    format!("POST not answered within {:?}", self.timeout),
                ))
            });
        if let Err(e) = &result
            && e.reason == Reason::SessionExpired
        {
            feed.end(e.clone());
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_verbatim_on_the_same_origin() {
        let sse = Url::parse("http://127.0.0.1:8000/sse").unwrap();
        let py = message_endpoint(&sse, "/messages/?session_id=0a1b").unwrap();
        assert_eq!(
            py.as_str(),
            "http://127.0.0.1:8000/messages/?session_id=0a1b"
        );
        let ts = message_endpoint(&sse, "/messages?sessionId=5f0e-11").unwrap();
        assert_eq!(
            ts.as_str(),
            "http://127.0.0.1:8000/messages?sessionId=5f0e-11"
        );
        let rel =
            message_endpoint(&Url::parse("http://h/mcp/sse").unwrap(), "messages?x=1").unwrap();
        assert_eq!(rel.as_str(), "http://h/mcp/messages?x=1");
        let abs = message_endpoint(&sse, "http://127.0.0.1:8000/m?s=1").unwrap();
        assert_eq!(abs.path(), "/m");
    }

    #[test]
    fn endpoints_on_another_origin_are_refused() {
        let sse = Url::parse("https://kb.example/sse").unwrap();
        for other in [
            "https://evil.example/messages",
            "http://kb.example/messages",
            "https://kb.example:8443/messages",
            "//evil.example/messages",
        ] {
            let e = message_endpoint(&sse, other).unwrap_err();
            assert_eq!(e.reason, Reason::InvalidResponse, "{other}");
            assert!(e.detail.contains("another origin"), "{e}");
        }
        assert!(message_endpoint(&sse, "https://kb.example:443/m").is_ok());
        assert_eq!(
            message_endpoint(&sse, "  ").unwrap_err().reason,
            Reason::InvalidResponse
        );
    }
}
