//! Streamable HTTP, the wire under both legacy versions: POST a message, read the answer as JSON
//! or as an SSE stream, hold the GET stream for server-initiated messages, DELETE at the end.
//!
//! Everything here is bounded: each answer by the caller's deadline and [`Limits`], each SSE event
//! by a size cap, each POST stream by an event count. Redirects are never followed (a redirect to
//! another host would carry the target's credentials there).
//!
//! One file per job: `headers` (what a request carries), `answer` (what an answer's status,
//! type and body say), `capped_events` (SSE under caps), `post` (the legacy POST),
//! `sse_answer` (an SSE answer read to its response and its end), `notification_stream` (the
//! GET stream), `modern_post` (the 2026-07-28 POSTs). This file holds the transport itself.

mod answer;
mod capped_events;
mod headers;
mod modern_post;
mod notification_stream;
mod post;
mod sse_answer;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::error::{McpError, Reason};
use crate::target_http::{Route, TargetHttp};

pub use answer::{ContentKind, content_kind};
pub(crate) use answer::{check_status, drain};
pub(crate) use capped_events::CappedEvents;
pub(crate) use headers::session_id_is_visible_ascii;
use headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
pub use headers::{ModernHeaders, SessionHeaders, header_safe};
pub use modern_post::Listening;
pub use notification_stream::{NotificationStream, StreamEnd};
pub use post::PostReply;
pub use sse_answer::MAX_RESUMPTIONS;

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

/// One MCP endpoint, its target's HTTP client and credentials, and its configured headers.
#[derive(Debug)]
pub struct HttpTransport {
    net: Arc<TargetHttp>,
    url: url::Url,
    headers: HeaderMap,
    limits: Limits,
    /// SSE answers whose stream did not end within [`DRAIN_WAIT`](sse_answer::DRAIN_WAIT) of
    /// their response.
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

    /// How many SSE answers were still open [`DRAIN_WAIT`](sse_answer::DRAIN_WAIT) after their
    /// response (their connection was closed rather than reused).
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

    /// [`HttpTransport::send`] the way `route` says ([`TargetHttp::send_by`]: a notification
    /// stream gets a socket of its own, not the pool's).
    pub(crate) async fn send_by(
        &self,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
        route: Route,
    ) -> Result<reqwest::Response, McpError> {
        self.net
            .send_by(build, route)
            .await
            .map_err(McpError::from_send)
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
