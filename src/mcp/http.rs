//! Streamable HTTP, the wire under both legacy versions: POST a message, read the answer as JSON
//! or as an SSE stream, hold the GET stream for server-initiated messages, DELETE at the end.
//!
//! Everything here is bounded: each answer by the caller's deadline and [`Limits`], each SSE event
//! by a size cap, each POST stream by an event count. Redirects are never followed (a redirect to
//! another host would carry the target's credentials there).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{FutureExt, Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::error::{McpError, Reason};
use super::inbox::Inbox;
use super::jsonrpc::{self, Incoming};
use super::sse_lines::{Cursor, EventId, LineFramer, TooLarge};
use crate::net::TargetHttp;

/// Size and count caps on what a server may send.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest JSON body, or sum of SSE bytes in one POST answer.
    pub max_body_bytes: usize,
    /// Largest single SSE event (bytes buffered before an event completes).
    pub max_event_bytes: usize,
    /// Most SSE events in one POST answer before the answer is abandoned.
    pub max_events_per_answer: usize,
}

/// The default cap on one answer: a 14-tool page is ~10 KiB; large catalogs with rich schemas
/// stay far below this.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: MAX_BODY_BYTES,
            max_event_bytes: 4 * 1024 * 1024,
            max_events_per_answer: 4096,
        }
    }
}

impl Limits {
    /// These limits, with one answer held to at most `max_bytes` (body and every event).
    pub fn within(self, max_bytes: usize) -> Limits {
        Limits {
            max_body_bytes: self.max_body_bytes.min(max_bytes),
            max_event_bytes: self.max_event_bytes.min(max_bytes),
            ..self
        }
    }
}

/// DELETE at shutdown must never hold the daemon up.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// Most GETs with `Last-Event-ID` that one POST answer may take (SEP-1699 polling).
pub const MAX_RESUMPTIONS: usize = 3;
/// Wait before resuming when the server sent no `retry`: the SSE standard leaves the first
/// reconnection time to the client ("a few seconds"); a request deadline is a few seconds.
const DEFAULT_RESUME_WAIT: Duration = Duration::from_secs(1);
/// A larger `retry` is cut to this; the caller's request deadline usually cuts it sooner.
const MAX_RESUME_WAIT: Duration = Duration::from_secs(60);

/// Per-session headers the client owns.
#[derive(Debug, Clone, Default)]
pub struct SessionHeaders {
    pub session_id: Option<HeaderValue>,
    pub protocol_version: Option<HeaderValue>,
}

const MCP_SESSION_ID: &str = "mcp-session-id";
const MCP_PROTOCOL_VERSION: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";
const MCP_METHOD: &str = "mcp-method";
const MCP_NAME: &str = "mcp-name";
/// Largest error body read from a 4xx answer of the modern era (a JSON-RPC error object).
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The headers a modern-era (2026-07-28) POST carries besides the configured ones: the version
/// (equal to the one in `_meta`), the method, and for `tools/call`-like methods the name.
#[derive(Debug, Clone)]
pub struct ModernHeaders {
    pub protocol_version: HeaderValue,
    pub method: HeaderValue,
    pub name: Option<HeaderValue>,
    /// `Mcp-Param-*` headers of a `tools/call` (the tool's `x-mcp-header` parameters).
    pub params: Vec<(HeaderName, HeaderValue)>,
}

impl ModernHeaders {
    /// Headers for `method` (and `name`, encoded as the spec's value-encoding section says).
    pub fn new(protocol_version: &'static str, method: &str, name: Option<&str>) -> Self {
        ModernHeaders {
            protocol_version: HeaderValue::from_static(protocol_version),
            method: header_safe(method),
            name: name.map(header_safe),
            params: Vec::new(),
        }
    }
}

/// A header value for `text`: as is when it is plain visible ASCII (spaces inside allowed) and
/// not itself shaped like the sentinel, else `=?base64?…?=` of its UTF-8 bytes.
pub fn header_safe(text: &str) -> HeaderValue {
    use base64::Engine as _;
    let visible = |b: u8| b == b' ' || (0x21..=0x7e).contains(&b);
    let sentinel = text.starts_with("=?base64?") && text.ends_with("?=");
    let padded = text.starts_with(' ') || text.ends_with(' ');
    let plain = !text.is_empty() && text.bytes().all(visible) && !padded && !sentinel;
    let value = if plain {
        text.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
        )
    };
    HeaderValue::from_str(&value).expect("visible ASCII is a valid header value")
}

/// Whether an SSE answer may be resumed with `Last-Event-ID` (legacy sessions), or not at all
/// (the modern era has no resumption: a broken answer is lost and re-issued by the caller).
enum Resume<'a> {
    With(&'a SessionHeaders),
    Never(&'static str),
}

/// A session id the client may send back: visible ASCII only (0x21 to 0x7E), as the spec requires
/// of servers (transports § Session Management).
pub(crate) fn session_id_is_visible_ascii(id: &HeaderValue) -> bool {
    id.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b))
}

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

/// One MCP endpoint, its target's HTTP client and credentials, and its configured headers.
#[derive(Debug)]
pub struct HttpTransport {
    net: Arc<TargetHttp>,
    url: url::Url,
    headers: HeaderMap,
    limits: Limits,
    /// SSE answers whose stream did not end within [`DRAIN_WAIT`] of their response.
    unfinished_answers: AtomicU64,
}

impl HttpTransport {
    /// A transport with no `http_config` (no credentials beyond `headers`, platform roots, no
    /// proxy); see [`HttpTransport::with_net`].
    pub fn new(
        url: url::Url,
        headers: &[(String, String)],
        limits: Limits,
    ) -> Result<Self, McpError> {
        Self::with_net(url, headers, limits, TargetHttp::plain())
    }

    /// `headers` are the configured ones; values are marked sensitive so they never show up in
    /// debug output. Every request goes through `net`, the target's client and credentials.
    pub fn with_net(
        url: url::Url,
        headers: &[(String, String)],
        limits: Limits,
        net: Arc<TargetHttp>,
    ) -> Result<Self, McpError> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| McpError::new(Reason::InvalidResponse, "invalid header name"))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| McpError::new(Reason::InvalidResponse, "invalid header value"))?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        Ok(HttpTransport {
            net,
            url,
            headers: map,
            limits,
            unfinished_answers: AtomicU64::new(0),
        })
    }

    /// The caps every answer is held to.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// How many SSE answers were still open [`DRAIN_WAIT`] after their response (their
    /// connection was closed rather than reused).
    pub fn unfinished_answers(&self) -> u64 {
        self.unfinished_answers.load(Ordering::Relaxed)
    }

    /// The target's client and credentials.
    pub fn net(&self) -> &Arc<TargetHttp> {
        &self.net
    }

    /// Send what `build` makes with the target's client and credentials (see
    /// [`TargetHttp::send`]: `Authorization`, one retry after a refusal the credentials can fix).
    pub(crate) async fn send(
        &self,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, McpError> {
        self.net.send(build).await.map_err(McpError::from_send)
    }

    fn builder(
        &self,
        client: &reqwest::Client,
        method: Method,
        session: &SessionHeaders,
    ) -> reqwest::RequestBuilder {
        let mut b = self.request_to(client, method, self.url.clone());
        if let Some(id) = &session.session_id {
            b = b.header(MCP_SESSION_ID, id.clone());
        }
        if let Some(v) = &session.protocol_version {
            b = b.header(MCP_PROTOCOL_VERSION, v.clone());
        }
        b
    }

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
        let new_session_id = resp.headers().get(MCP_SESSION_ID).cloned();
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

    /// Read an SSE answer until the response to `sent`. When the server ends the stream before
    /// it (2025-11-25 servers may close after a priming event), resume with a GET carrying
    /// `Last-Event-ID` after the `retry` wait, at most [`MAX_RESUMPTIONS`] times. The caps of
    /// [`Limits`] hold for the answer as a whole, across its streams.
    ///
    /// `resume` says with which session headers the resumption GETs go, or why there are none.
    async fn read_sse_answer(
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

    /// Open the GET stream. `None` when the server offers none (405).
    pub async fn open_stream(
        &self,
        session: &SessionHeaders,
    ) -> Result<Option<NotificationStream>, McpError> {
        let resp = self
            .send(|c| {
                self.builder(c, Method::GET, session)
                    .header(ACCEPT, "text/event-stream")
            })
            .await?;
        if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(None);
        }
        check_status(resp.status(), session.session_id.is_some())?;
        if content_kind(resp.headers()) != ContentKind::EventStream {
            return Err(McpError::new(
                Reason::ContentType,
                "GET stream is not text/event-stream",
            ));
        }
        Ok(Some(NotificationStream {
            events: CappedEvents::new(resp, self.limits.max_event_bytes, Cursor::default()),
            ends_on: None,
        }))
    }

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
        let resp = match modern_status(self.send_modern(headers, body).await?).await? {
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
        let resp = match modern_status(self.send_modern(headers, body).await?).await? {
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
    ) -> Result<reqwest::Response, McpError> {
        let body = Bytes::from(body);
        self.send(|c| {
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
        })
        .await
    }

    /// DELETE the session, best effort and briefly.
    pub async fn delete(&self, session: &SessionHeaders) {
        let req = self.send(|c| self.builder(c, Method::DELETE, session));
        if let Ok(Ok(resp)) = tokio::time::timeout(DELETE_TIMEOUT, req).await {
            drain(resp, 64 * 1024).await;
        }
    }

    /// A request to `url` (this endpoint, or the HTTP+SSE message endpoint of the same server)
    /// with the configured headers, for [`HttpTransport::send`]. The caller checks the origin.
    pub(crate) fn request_to(
        &self,
        client: &reqwest::Client,
        method: Method,
        url: url::Url,
    ) -> reqwest::RequestBuilder {
        client.request(method, url).headers(self.headers.clone())
    }
}

/// The server's long-lived stream of notifications and requests: the legacy GET stream, or a
/// modern `subscriptions/listen` stream.
pub struct NotificationStream {
    events: CappedEvents,
    /// The listen request's id: its result is the stream's graceful end.
    ends_on: Option<u64>,
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

impl NotificationStream {
    /// Read until the stream ends, filing every message into `inbox`. Returns why it ended.
    ///
    /// Events at hand are delivered as one burst (see [`Inbox::burst`]): the connection is woken
    /// when the stream has nothing more within [`BURST_SETTLE`] of a `list_changed`, or after
    /// [`MAX_BURST_EVENTS`]. The settle is what makes a burst whole: the HTTP client hands over
    /// one chunk of a read at a time, so the second of two notifications written together may
    /// not be at hand yet when the first is.
    pub async fn run(mut self, inbox: &Inbox) -> StreamEnd {
        let mut burst = inbox.burst();
        let mut held = 0usize;
        let error = loop {
            let at_hand = if held >= MAX_BURST_EVENTS {
                None
            } else if burst.waking() {
                tokio::time::timeout(BURST_SETTLE, self.events.next())
                    .await
                    .ok()
            } else {
                self.events.next().now_or_never()
            };
            let ready = match at_hand {
                Some(event) => {
                    held += 1;
                    event
                }
                None => {
                    burst.flush();
                    held = 0;
                    self.events.next().await
                }
            };
            match ready {
                None => break None,
                Some(Err(e)) => break Some(e),
                Some(Ok(event)) if event.data.is_empty() => {}
                Some(Ok(event)) => match jsonrpc::decode(event.data.as_bytes()) {
                    Ok(msgs) => {
                        let mut ended = false;
                        for m in msgs {
                            match m {
                                Incoming::Response { id, .. }
                                    if self
                                        .ends_on
                                        .is_some_and(|s| jsonrpc::id_matches(&id, s)) =>
                                {
                                    ended = true
                                }
                                m => burst.deliver(m),
                            }
                        }
                        if ended {
                            break None;
                        }
                    }
                    Err(e) => break Some(e),
                },
            }
        };
        StreamEnd {
            error,
            retry: self.events.cursor().retry,
        }
    }
}

/// Most events of a notification stream delivered before the connection is woken, however
/// fast they come: a burst is a few messages written together, not a flood held back.
const MAX_BURST_EVENTS: usize = 64;
/// How long a `list_changed` waits for another one written with it before the connection is
/// woken: two notifications a server writes back to back (a change made in two steps) arrive
/// within microseconds; the cost is this much latency on a refresh.
const BURST_SETTLE: Duration = Duration::from_millis(1);

/// Why a GET stream ended: closed cleanly (`error` none) or broken; and the server's `retry` hint.
#[derive(Debug)]
pub struct StreamEnd {
    pub error: Option<McpError>,
    pub retry: Option<Duration>,
}

/// The response to `sent` in a JSON body (other messages in it go to `inbox`), and its bytes.
async fn json_answer(
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

fn find_response(
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
    super::error::truncate(&id.to_string(), 40)
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
pub(crate) enum ContentKind {
    Json,
    EventStream,
    Other,
}

pub(crate) fn content_kind(headers: &HeaderMap) -> ContentKind {
    match crate::net::body::media_type(headers).as_str() {
        "application/json" => ContentKind::Json,
        "text/event-stream" => ContentKind::EventStream,
        _ => ContentKind::Other,
    }
}

async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Result<Vec<u8>, McpError> {
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

/// Why the byte stream under an SSE parser stopped.
#[derive(Debug)]
enum ByteFault {
    Http(reqwest::Error),
    EventTooLarge(usize),
}

type ByteStream = std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, ByteFault>> + Send>>;

/// An SSE event stream fed whole lines by a [`LineFramer`], so the pending line and event are
/// capped and every byte is parsed once.
pub(crate) struct CappedEvents {
    inner: std::pin::Pin<Box<eventsource_stream::EventStream<ByteStream>>>,
    total: Arc<AtomicUsize>,
    cursor: Arc<Mutex<Cursor>>,
}

impl CappedEvents {
    /// `start` is where an earlier stream of the same answer left off (default for a new one).
    pub(crate) fn new(resp: reqwest::Response, max_event_bytes: usize, start: Cursor) -> Self {
        let total = Arc::new(AtomicUsize::new(0));
        let seen = total.clone();
        let cursor = Arc::new(Mutex::new(start.clone()));
        let latest = cursor.clone();
        let state = (
            Box::pin(resp.bytes_stream()),
            LineFramer::resuming(max_event_bytes, start),
            std::collections::VecDeque::<Bytes>::new(),
            false,
        );
        let lines = futures_util::stream::unfold(
            state,
            move |(mut body, mut framer, mut queue, failed)| {
                let seen = seen.clone();
                let latest = latest.clone();
                async move {
                    loop {
                        if let Some(line) = queue.pop_front() {
                            return Some((Ok(line), (body, framer, queue, failed)));
                        }
                        if failed {
                            return None;
                        }
                        match body.next().await? {
                            Ok(chunk) => {
                                let mut out = Vec::new();
                                let pushed = framer.push(&chunk, &mut out);
                                seen.store(framer.total(), Ordering::Relaxed);
                                if let Some(c) = framer.take_cursor_change() {
                                    *latest.lock().expect("cursor lock") = c;
                                }
                                queue.extend(out);
                                if let Err(TooLarge(cap)) = pushed {
                                    return Some((
                                        Err(ByteFault::EventTooLarge(cap)),
                                        (body, framer, queue, true),
                                    ));
                                }
                            }
                            Err(e) => {
                                return Some((
                                    Err(ByteFault::Http(e)),
                                    (body, framer, queue, true),
                                ));
                            }
                        }
                    }
                }
            },
        );
        let bytes: ByteStream = Box::pin(lines);
        CappedEvents {
            inner: Box::pin(bytes.eventsource()),
            total,
            cursor,
        }
    }

    fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Last event id and `retry` of every line read so far (exact once the stream has ended).
    fn cursor(&self) -> Cursor {
        self.cursor.lock().expect("cursor lock").clone()
    }

    pub(crate) async fn next(&mut self) -> Option<Result<Event, McpError>> {
        let item = self.inner.next().await?;
        Some(item.map_err(|e| match e {
            EventStreamError::Transport(ByteFault::Http(e)) => McpError::from_reqwest(&e),
            EventStreamError::Transport(ByteFault::EventTooLarge(cap)) => {
                McpError::new(Reason::BodyTooLarge, format!("SSE event over {cap} bytes"))
            }
            EventStreamError::Utf8(_) => {
                McpError::new(Reason::InvalidJson, "SSE data is not UTF-8")
            }
            EventStreamError::Parser(_) => McpError::new(Reason::InvalidResponse, "malformed SSE"),
        }))
    }
}

#[cfg(test)]
mod tests {
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
