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

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::Stream;
use serde_json::{Value, json};

use super::Shared;
use super::exchange::{Exchange, MAX_SESSION_ID_BYTES, is_stream_key, stream_key_of};
use super::labels::Client;
use super::observe::{Asked, JsonBody, Pending, SseReader, client_name, method_label};
use super::sessions::StreamPending;
use super::upstream::{end_to_end, upstream_request};
use crate::mcp::jsonrpc::{self, Incoming};
use crate::proxy::metrics::Rejected;

const SESSION: &str = "mcp-session-id";
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INTERNAL_ERROR: i64 = -32603;

/// Calls judged at once (each holds its arguments while the catalog may walk); past this a
/// call is not judged rather than queued.
pub(super) const MAX_JUDGING: usize = 256;

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
                let (code, what) = if e.reason == crate::mcp::Reason::InvalidJson {
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
            tracing::debug!(proxy = %sh.config.name, reason = why.as_str(), error = %crate::text::bounded(&e.without_url().to_string(), 200), "upstream request failed");
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
    let kind = match crate::mcp::http::content_kind(resp.headers()) {
        crate::mcp::http::ContentKind::EventStream => Kind::Sse(SseReader::default()),
        crate::mcp::http::ContentKind::Json => {
            let asked = |f: fn(&Asked) -> bool| exchange.requests.iter().any(|r| f(&r.asked));
            let keep = if asked(|a| matches!(a, Asked::ToolsList { .. })) {
                super::observe::MAX_OBSERVED_BYTES
            } else if asked(|a| matches!(a, Asked::ToolsCall { .. })) {
                super::observe::MAX_CALL_ANSWER_BYTES
            } else {
                0
            };
            Kind::Json(JsonBody::new(keep, resp.content_length()))
        }
        _ => Kind::None,
    };
    let timer = match kind {
        Kind::Sse(_) => Timer::Idle(sh.config.stream_idle_timeout),
        _ => Timer::Deadline,
    };
    let heal = super::heal::tap(
        &sh,
        &parts.method,
        sh.paths.is_mcp(parts.uri.path()),
        &exchange,
        &messages,
        matches!(kind, Kind::Sse(_)) && status.is_success(),
    );
    let first = match timer {
        Timer::Idle(d) => tokio::time::Instant::now() + d,
        Timer::Deadline => deadline,
    };
    let observed = Observed {
        inner: Box::pin(resp.bytes_stream()),
        timer,
        expires: Box::pin(tokio::time::sleep_until(first)),
        ended: false,
        heal,
        metrics: sh.metrics.clone(),
        obs: Some(Observer {
            sh,
            exchange,
            kind,
            learn_endpoints,
        }),
    };
    out.body(Body::from_stream(observed))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

impl Shared {
    /// Who sent the exchange, and its JSON-RPC (accounted once the upstream's status is known).
    fn exchange(
        &self,
        parts: &axum::http::request::Parts,
        session_id: Option<&str>,
        messages: &[Incoming],
        started: Instant,
    ) -> Exchange {
        let headers = &parts.headers;
        let mut requests = Vec::new();
        let mut notifications = Vec::new();
        let mut reported: Option<String> = None;
        let mut modern = false;
        let version = headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok());
        for m in messages {
            match m {
                Incoming::Request { id, method, params } => {
                    if reported.is_none() {
                        reported = client_name(method, params.as_ref()).map(str::to_string);
                    }
                    modern |= super::observe::modern(version, params.as_ref());
                    requests.push(Pending {
                        id: id.clone(),
                        method: method_label(method),
                        asked: Asked::of(method, params.as_ref()),
                    });
                }
                Incoming::Notification { method, .. } => notifications.push(method_label(method)),
                Incoming::Response { .. } => {}
            }
        }
        if let crate::config::ClientLabel::Header(h) = &self.config.client_label {
            reported = headers
                .get(h.as_str())
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
        }
        // An HTTP+SSE POST names its session in the message URL's query, not in a header.
        let stream = match session_id {
            None if !self.paths.is_mcp(parts.uri.path()) => stream_key_of(parts.uri.query()),
            _ => None,
        };
        let tracked = session_id.or(stream.as_deref()).and_then(|id| {
            let mut t = self.sessions.lock().expect("sessions lock");
            let s = t.get_mut(id)?;
            if stream.is_some() {
                // Its answers come on the session's GET stream, and may come before the POST's
                // own `202`: they are awaited from before the request leaves.
                for r in &requests {
                    s.await_on_stream(StreamPending::of(r, started));
                }
            }
            Some(s.client.clone())
        });
        let client = match (tracked, reported) {
            (Some(c), _) => {
                c.touch(started);
                c
            }
            (None, name) => self.labels.get_at(name.as_deref(), started),
        };
        let key = match session_id {
            None if stream.is_some() => stream,
            Some(id) if id.len() <= MAX_SESSION_ID_BYTES => Some(id.to_string()),
            // A longer id (the spec's are a UUID or a hash) is forwarded, not tracked: what a
            // session costs here stays bounded whatever a client sends.
            Some(_) => None,
            // No session (modern era, or a request before `initialize` answered): one identity
            // per reported name and credentials.
            None if requests.iter().any(|r| r.asked != Asked::Initialize) => {
                let auth = headers
                    .get(header::AUTHORIZATION)
                    .map(|v| super::observe::cursor_digest(&String::from_utf8_lossy(v.as_bytes())))
                    .unwrap_or(0);
                Some(format!("client:{}:{auth:016x}", client.label))
            }
            None => None,
        };
        Exchange {
            client,
            key,
            modern,
            requests,
            notifications,
            started,
        }
    }

    /// Account the exchange now that the upstream answered with `status`: sessions begin,
    /// end, or turn out unknown, and each request is counted.
    pub(super) fn settle(
        &self,
        method: &Method,
        session_id: Option<&str>,
        new_session: Option<String>,
        status: reqwest::StatusCode,
        mut ex: Exchange,
    ) -> Exchange {
        let now = Instant::now();
        let mut table = self.sessions.lock().expect("sessions lock");
        if let (Some(id), true) = (&new_session, session_id.is_none())
            && status.is_success()
        {
            table.touch(id, &ex.client, now).upstream = true;
            ex.key = Some(id.clone());
        }
        if let Some(id) = session_id {
            if status == reqwest::StatusCode::NOT_FOUND {
                if !table.end(id, crate::proxy::metrics::Ended::Expired) {
                    self.metrics.rejected(Rejected::UnknownSession);
                }
                ex.key = None;
            } else if *method == Method::DELETE && status.is_success() {
                table.end(id, crate::proxy::metrics::Ended::Deleted);
                ex.key = None;
            }
        }
        for n in &ex.notifications {
            ex.client.series.request(n);
        }
        let key = match (&ex.key, status.is_success()) {
            (Some(k), true) => k.clone(),
            _ => {
                for r in &ex.requests {
                    ex.client.series.request(r.method);
                }
                self.wake_if_dropped(&table);
                return ex;
            }
        };
        let session = table.touch(&key, &ex.client, now);
        for r in &ex.requests {
            ex.client.series.request(r.method);
            match &r.asked {
                Asked::ToolsList { cursor } => {
                    session.lists = session.lists.saturating_add(1);
                    ex.client.series.tools_list(cursor.is_some());
                    match cursor {
                        Some(c) => {
                            let digest = super::observe::cursor_digest(c);
                            if let Some((d, issued)) = session.cursor
                                && d == digest
                            {
                                // Its walk goes on (a cursor it was not sent ends it below).
                                session.cursor = None;
                                session.cursors_followed =
                                    session.cursors_followed.saturating_add(1);
                                ex.client
                                    .series
                                    .event(crate::proxy::metrics::ClientEvent::CursorFollowed);
                                self.metrics.cursor_age(now.duration_since(issued));
                            } else {
                                session.walk = None;
                            }
                        }
                        None => {
                            session.walk = Some(0);
                            session.cursor_abandoned();
                            if let Some(t) = session.relist_due.take() {
                                self.metrics.relist_lag(now.duration_since(t));
                            }
                        }
                    }
                }
                Asked::ToolsCall { tool, arguments } => {
                    session.tool_calls = session.tool_calls.saturating_add(1);
                    session.cursor_abandoned();
                    session.relist_missed();
                    if session.listing_expired(now, self.config.ttl_grace) {
                        ex.client
                            .series
                            .event(crate::proxy::metrics::ClientEvent::ExpiredListingCall);
                    }
                    if session.lists == 0 && !session.reconnect_without_list {
                        session.reconnect_without_list = true;
                        ex.client
                            .series
                            .event(crate::proxy::metrics::ClientEvent::NoRelistAfterReconnect);
                    }
                    self.judge_later(
                        key.clone(),
                        ex.client.clone(),
                        tool.clone(),
                        arguments.clone(),
                        ex.started,
                    );
                }
                Asked::Initialize | Asked::Other => {}
            }
        }
        self.wake_if_dropped(&table);
        ex
    }

    /// A message on an HTTP+SSE session's GET stream: an answer to a request POSTed before (read
    /// with that request), or a notification, each accounted to the session's client.
    fn on_stream_message(&self, key: &str, message: Incoming) {
        let (client, pending) = {
            let mut table = self.sessions.lock().expect("sessions lock");
            let Some(s) = table.get_mut(key) else {
                return;
            };
            let pending = match &message {
                Incoming::Response { id, .. } => s.answered_on_stream(id),
                _ => None,
            };
            (s.client.clone(), pending)
        };
        let (requests, started) = match pending {
            Some(p) => (vec![p.pending], p.started),
            None => (Vec::new(), Instant::now()),
        };
        let ex = Exchange {
            client,
            key: Some(key.to_string()),
            modern: false,
            requests,
            notifications: Vec::new(),
            started,
        };
        self.on_answer(&ex, message);
    }

    /// Have the sweeper end at the upstream the sessions this exchange made the table drop.
    fn wake_if_dropped(&self, table: &super::sessions::Table) {
        if table.has_to_close() {
            self.dropped.notify_one();
        }
    }

    /// Decide off the request path whether a call is stale (the catalog may walk first).
    fn judge_later(
        self: &Shared,
        key: String,
        client: Arc<Client>,
        tool: String,
        arguments: Value,
        at: Instant,
    ) {
        let Some(me) = self.me.upgrade() else {
            return;
        };
        let Ok(permit) = self.judging.clone().try_acquire_owned() else {
            return;
        };
        tokio::spawn(async move {
            let _permit = permit;
            use super::catalog::Verdict;
            let verdict = me
                .catalog
                .judge(&tool, &arguments, at, std::time::Duration::from_secs(5))
                .await;
            if matches!(verdict, Verdict::Fine | Verdict::Unknown) {
                return;
            }
            let label = me.catalog.tool_label(&tool);
            let mut table = me.sessions.lock().expect("sessions lock");
            let session = table.get_mut(&key);
            match verdict {
                Verdict::StaleTool => {
                    client.series.stale_tool(&label);
                    if let Some(s) = session {
                        s.stale_tool_calls = s.stale_tool_calls.saturating_add(1);
                    }
                }
                _ => {
                    client.series.stale_schema(&label);
                    if let Some(s) = session {
                        s.stale_schema_calls = s.stale_schema_calls.saturating_add(1);
                    }
                }
            }
        });
    }

    /// A message from the upstream in the exchange's answer.
    fn on_answer(&self, ex: &Exchange, message: Incoming) {
        let now = Instant::now();
        match message {
            Incoming::Response { id, outcome } => {
                let Some(r) = ex.requests.iter().find(|r| r.id == id) else {
                    return;
                };
                self.metrics
                    .duration(r.method, now.duration_since(ex.started));
                match &r.asked {
                    Asked::ToolsList { cursor } => {
                        self.on_listing(ex, cursor.is_some(), outcome, now)
                    }
                    Asked::ToolsCall { tool, .. }
                        if super::unknown_tool::says_unknown(tool, &outcome) =>
                    {
                        let label = self.catalog.tool_label(tool);
                        ex.client.series.unknown_tool_answer(&label);
                        let mut table = self.sessions.lock().expect("sessions lock");
                        if let Some(s) = ex.key.as_deref().and_then(|k| table.get_mut(k)) {
                            s.unknown_tool_answers = s.unknown_tool_answers.saturating_add(1);
                        }
                    }
                    _ => {}
                }
            }
            Incoming::Notification { method, .. }
                if method == "notifications/tools/list_changed" =>
            {
                self.catalog.refresh_soon();
                ex.client
                    .series
                    .event(crate::proxy::metrics::ClientEvent::ListChangedForwarded);
                let mut table = self.sessions.lock().expect("sessions lock");
                if let Some(s) = ex.key.as_deref().and_then(|k| table.get_mut(k)) {
                    s.last_list_changed = Some(now);
                    s.relist_due.get_or_insert(now);
                }
            }
            _ => {}
        }
    }
}

impl Shared {
    /// A `tools/list` page (or its error) on its way to the client: the session's cursor and
    /// walk are accounted, and the catalog learns from a page or a complete walk that differs
    /// from it (see [`super::catalog`]).
    fn on_listing(
        &self,
        ex: &Exchange,
        with_cursor: bool,
        outcome: Result<Value, jsonrpc::RpcError>,
        now: Instant,
    ) {
        let walked = {
            let mut table = self.sessions.lock().expect("sessions lock");
            let s = ex.key.as_deref().and_then(|k| table.get_mut(k));
            match (&outcome, s) {
                (Ok(result), Some(s)) => {
                    s.pages = s.pages.saturating_add(1);
                    // Missing or negative is 0 (SEP-2549); legacy listings have no ttl.
                    let ttl_ms = ex.modern.then(|| {
                        result
                            .get("ttlMs")
                            .and_then(Value::as_f64)
                            .map_or(0, |ms| ms.max(0.0) as i64)
                    });
                    s.listed(!with_cursor, ttl_ms, now);
                    let next = result.get("nextCursor").and_then(Value::as_str);
                    if let Some(next) = next {
                        s.cursor = Some((super::observe::cursor_digest(next), now));
                        ex.client
                            .series
                            .event(crate::proxy::metrics::ClientEvent::CursorIssued);
                    }
                    let listed = result
                        .get("tools")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    s.walk = s
                        .walk
                        .map(|n| n.saturating_add(u16::try_from(listed).unwrap_or(u16::MAX)));
                    if self.config.heal {
                        s.heal.answer(!with_cursor, result);
                    }
                    if next.is_none() { s.walk.take() } else { None }
                }
                (Err(_), Some(s)) => {
                    s.walk = None;
                    if with_cursor {
                        s.cursor_errors = s.cursor_errors.saturating_add(1);
                        ex.client
                            .series
                            .event(crate::proxy::metrics::ClientEvent::CursorError);
                    }
                    None
                }
                (_, None) => None,
            }
        };
        let Ok(result) = outcome else {
            return;
        };
        // Comparing the page with the catalog fingerprints each of its tools: off the answer's
        // way (the client's page is held until it is observed), within the judging permits (past
        // them a page teaches nothing rather than queue). Calls judged meanwhile wait for it.
        let asked = ex.started;
        if !self.catalog.older_than(asked) {
            return;
        }
        let (Some(me), Ok(permit)) = (self.me.upgrade(), self.judging.clone().try_acquire_owned())
        else {
            return;
        };
        let comparing = self.catalog.comparing();
        tokio::spawn(async move {
            let _held = (permit, comparing);
            if let Some(tools) = result.get("tools").and_then(Value::as_array)
                && !me.catalog.saw_page(tools, asked)
                && let Some(n) = walked
            {
                me.catalog.saw_walk(usize::from(n), asked);
            }
        });
    }
}

enum Kind {
    Sse(SseReader),
    Json(JsonBody),
    None,
}

struct Observer {
    sh: Arc<Shared>,
    exchange: Exchange,
    kind: Kind,
    /// A GET stream of the MCP path: its `endpoint` events name a message path to forward.
    learn_endpoints: bool,
}

impl Observer {
    fn chunk(&mut self, chunk: &[u8]) {
        match &mut self.kind {
            Kind::Sse(r) => {
                let mut seen = Vec::new();
                r.push(chunk, |m| seen.push(m));
                if let Some(endpoint) = r.take_endpoint()
                    && self.learn_endpoints
                    && let Some(url) = self.sh.paths.learn_endpoint(&endpoint)
                {
                    // This GET stream is an HTTP+SSE session's: its messages answer the POSTs
                    // to the URL it named.
                    self.exchange.key = stream_key_of(url.query());
                }
                for m in seen {
                    match self.exchange.key.as_deref() {
                        Some(k) if is_stream_key(k) => self.sh.on_stream_message(k, m),
                        _ => self.sh.on_answer(&self.exchange, m),
                    }
                }
            }
            Kind::Json(b) => {
                if b.push(chunk) {
                    self.settle_json();
                }
            }
            Kind::None => {}
        }
    }

    /// A JSON answer is complete: account what it answered (once).
    fn settle_json(&mut self) {
        let Kind::Json(b) = std::mem::replace(&mut self.kind, Kind::None) else {
            return;
        };
        let messages = b.messages();
        if messages.is_empty() {
            // Not kept (or not JSON-RPC): its end still times every request it answered.
            let took = self.exchange.started.elapsed();
            for r in &self.exchange.requests {
                self.sh.metrics.duration(r.method, took);
            }
        }
        for m in messages {
            self.sh.on_answer(&self.exchange, m);
        }
    }

    fn finish(mut self) {
        self.settle_json();
    }
}

/// The time budget of an answer's body.
#[derive(Clone, Copy)]
enum Timer {
    /// Not a stream: the whole body by the request's `upstream_timeout` deadline.
    Deadline,
    /// A stream: a byte at least every this long.
    Idle(Duration),
}

/// The upstream's body on its way to the client, shown to the observer chunk by chunk, within
/// its time budget. A body with a length is dropped without being polled to its end: the
/// observer finishes then.
struct Observed {
    inner: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    timer: Timer,
    expires: Pin<Box<tokio::time::Sleep>>,
    /// The budget ran out (or the body ended): nothing more is polled.
    ended: bool,
    /// Healing's frames for this stream, sent between the upstream's events.
    heal: Option<super::heal::Tap>,
    metrics: Arc<crate::proxy::metrics::ProxyMetrics>,
    obs: Option<Observer>,
}

impl Stream for Observed {
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Timer::Idle(d) = self.timer {
                    self.expires.as_mut().reset(tokio::time::Instant::now() + d);
                }
                if let Some(o) = &mut self.obs {
                    o.chunk(&chunk);
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(std::io::Error::other(e)))),
            Poll::Ready(None) => {
                self.ended = true;
                if let Some(o) = self.obs.take() {
                    o.finish();
                }
                Poll::Ready(None)
            }
            Poll::Pending => {
                let this = &mut *self;
                if let (
                    Some(tap),
                    Some(Observer {
                        kind: Kind::Sse(r), ..
                    }),
                ) = (&mut this.heal, &this.obs)
                    && let Some(frame) = tap.poll_frame(cx, r.at_event_boundary())
                {
                    return Poll::Ready(Some(Ok(frame)));
                }
                if self.expires.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.ended = true;
                match self.timer {
                    // A stream quiet for too long ends like any stream: cleanly.
                    Timer::Idle(_) => Poll::Ready(None),
                    // A body cut short must not look complete: the error aborts the connection.
                    Timer::Deadline => {
                        self.metrics.rejected(Rejected::UpstreamTimeout);
                        Poll::Ready(Some(Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the MCP server's answer did not end within upstream_timeout",
                        ))))
                    }
                }
            }
        }
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        if let Some(o) = self.obs.take() {
            o.finish();
        }
    }
}
