//! A dual-era Streamable HTTP MCP server with fault knobs: the demo's knowledge base, the
//! tests' peer, and `mcp_exporter lab`. This module is the server's face: the running [`Lab`]
//! and its routes, which serve the legacy era (sessions, GET stream) and hand 2026-07-28
//! requests on the same endpoint to [`super::modern`]; what both eras share (the profiles, the
//! sessions, the change feed) is [`super::state`], below both.
//!
//! Each *profile* is one endpoint (`/<profile>/mcp`) in front of the same tool backend, the way
//! several gateways front one server. A profile's [`Behaviour`] says what that gateway does
//! wrong. What a knob fakes stays inside what the spec lets a server (or a lossy proxy) do:
//! 405 on GET means "no stream" (transports § GET), 404 ends a session (§ Session Management),
//! a server without `listChanged` sends no notifications (lifecycle § Capability Negotiation).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::behaviour::{Behaviour, Era};
use super::modern;
use super::state::{
    Feed, KEEPALIVE, LEGACY_VERSIONS, LabState, ResumeCounts, announcements, change_feed,
    message_stream, origin_ok, reply, rpc_error, rpc_result, served, served_listing, status,
};

/// A running lab server.
pub struct Lab {
    state: Arc<LabState>,
    addr: SocketAddr,
    /// TCP connections accepted since the start (for the benches' new-connection counts).
    accepted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
    background: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.task.abort();
        for t in self.background.lock().expect("lab lock").drain(..) {
            t.abort();
        }
    }
}

impl Lab {
    /// Serve `profiles` on `addr` (use port 0 for any free port).
    pub async fn start(
        addr: SocketAddr,
        profiles: Vec<(String, Behaviour)>,
    ) -> std::io::Result<Lab> {
        let (generation, _) = watch::channel(0u64);
        let listen_ends = profiles
            .iter()
            .map(|(name, _)| (name.clone(), watch::channel(0u64).0))
            .collect();
        let state = Arc::new(LabState {
            profiles: profiles.into_iter().collect(),
            generation,
            listen_ends,
            peers: Mutex::new(HashMap::new()),
            modern_requests: Mutex::new(HashMap::new()),
            listens: Arc::new(AtomicUsize::new(0)),
            sessions: Mutex::new(HashMap::new()),
            replay_bytes: AtomicUsize::new(0),
            next_session: AtomicU64::new(1),
            initializes: Mutex::new(HashMap::new()),
            deletes: Mutex::new(HashMap::new()),
            resumes: Mutex::new(HashMap::new()),
            profile_state: Mutex::new(HashMap::new()),
            tools_list_calls: AtomicU64::new(0),
            tools_calls: AtomicU64::new(0),
            tools_list_in_flight: AtomicU64::new(0),
            tools_list_max_in_flight: AtomicU64::new(0),
        });
        let app = Router::new()
            .route(
                "/{profile}/mcp",
                post(handle_post).get(handle_get).delete(handle_delete),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        let listener = listener.tap_io(move |_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        let task = tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            let _ = axum::serve(listener, app).await;
        });
        Ok(Lab {
            state,
            addr,
            accepted,
            task,
            background: Mutex::new(Vec::new()),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint URL of a profile.
    pub fn url(&self, profile: &str) -> url::Url {
        url::Url::parse(&format!("http://{}/{profile}/mcp", self.addr)).expect("valid URL")
    }

    /// Redeploy the backend: the tool list moves to the next generation and every profile that
    /// delivers notifications sends `list_changed`.
    pub fn churn(&self) {
        self.state.redeploy();
    }

    pub fn generation(&self) -> u64 {
        *self.state.generation.borrow()
    }

    /// Churn every `period` until the lab is dropped.
    pub fn spawn_churn(&self, period: Duration) {
        let state = self.state.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            loop {
                tick.tick().await;
                state.redeploy();
            }
        });
        self.background
            .lock()
            .expect("lab lock")
            .push(task.abort_handle());
    }

    /// End every session of `profile` every `period` until the lab is dropped (F6).
    pub fn spawn_expiry(&self, profile: &str, period: Duration) {
        let state = self.state.clone();
        let profile = profile.to_string();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            loop {
                tick.tick().await;
                state.expire(&profile);
            }
        });
        self.background
            .lock()
            .expect("lab lock")
            .push(task.abort_handle());
    }

    /// End every session of a profile: later requests with those ids get 404 and streams close;
    /// its modern `subscriptions/listen` streams end gracefully.
    pub fn expire_sessions(&self, profile: &str) {
        self.state.expire(profile);
    }

    /// How many modern-era (2026-07-28) requests a profile has received, refused ones included.
    pub fn modern_requests(&self, profile: &str) -> u64 {
        *self
            .state
            .modern_requests
            .lock()
            .expect("lab lock")
            .get(profile)
            .unwrap_or(&0)
    }

    /// How many sessions of a profile clients ended with DELETE.
    pub fn deletes(&self, profile: &str) -> u64 {
        *self
            .state
            .deletes
            .lock()
            .expect("lab lock")
            .get(profile)
            .unwrap_or(&0)
    }

    /// How many `initialize` requests a profile has answered.
    pub fn initializes(&self, profile: &str) -> u64 {
        *self
            .state
            .initializes
            .lock()
            .expect("lab lock")
            .get(profile)
            .unwrap_or(&0)
    }

    /// SSE polling seen by a profile with `resumable_posts`.
    pub fn resume_counts(&self, profile: &str) -> ResumeCounts {
        self.state.resume_counts(profile, |_| ())
    }

    /// `tools/call` requests answered, over all profiles.
    pub fn tools_calls(&self) -> u64 {
        self.state.tools_calls.load(Ordering::Relaxed)
    }

    /// TCP connections accepted since the lab started.
    pub fn connections_accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// `tools/list` requests answered, all profiles.
    pub fn tools_list_calls(&self) -> u64 {
        self.state.tools_list_calls.load(Ordering::Relaxed)
    }

    /// `tools/list` requests being answered now (waiting out `page_delay`), all profiles.
    pub fn tools_list_in_flight(&self) -> u64 {
        self.state.tools_list_in_flight.load(Ordering::Relaxed)
    }

    /// The most `tools/list` requests that were ever being answered at the same time.
    pub fn tools_list_max_in_flight(&self) -> u64 {
        self.state.tools_list_max_in_flight.load(Ordering::Relaxed)
    }
}

async fn handle_post(
    State(state): State<Arc<LabState>>,
    Path(profile): Path<String>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(b) = state.profiles.get(&profile).cloned() else {
        return status(StatusCode::NOT_FOUND, "no such endpoint");
    };
    if !origin_ok(&headers) {
        return status(StatusCode::FORBIDDEN, "Forbidden: invalid Origin");
    }
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(rpc_error(&Value::Null, -32700, "Parse error")),
        )
            .into_response();
    };
    if b.era == Era::Modern || modern::requested(&headers, &msg) {
        return modern::post(&state, &profile, &b, &headers, &msg, peer).await;
    }
    if let Some(v) = headers.get("mcp-protocol-version")
        && !LEGACY_VERSIONS.iter().any(|s| v == *s)
    {
        return status(
            StatusCode::BAD_REQUEST,
            "Bad Request: unsupported MCP-Protocol-Version",
        );
    }
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let id = msg.get("id").cloned();
    let params = msg.get("params").cloned().unwrap_or(json!({}));
    if method == "initialize" {
        let Some(id) = id else {
            return status(StatusCode::BAD_REQUEST, "initialize needs an id");
        };
        return state.initialize(&profile, &b, &id, &params);
    }
    let session = match state.session(&headers, &profile) {
        Ok(s) => s,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(id) = id.filter(|_| !method.is_empty()) else {
        // A notification, or a response to one of our requests.
        return StatusCode::ACCEPTED.into_response();
    };
    tokio::time::sleep(b.answer_delay).await;
    let answer = match method {
        "ping" => rpc_result(&id, json!({})),
        "tools/call" => match state.tools_call(&b, session.instance, &params) {
            Ok(result) => rpc_result(&id, result),
            Err((code, message)) => rpc_error(&id, code, &message),
        },
        m => match served_listing(&b, m) {
            Some(list) => match state
                .list(&profile, &b, list, session.instance, &params, false)
                .await
            {
                Ok(result) => rpc_result(&id, result),
                Err(Some(message)) => rpc_error(&id, -32602, message),
                Err(None) => {
                    return status(StatusCode::SERVICE_UNAVAILABLE, "backend unavailable");
                }
            },
            // Resource not found is -32002 in the legacy era.
            None => match state.item_call(&b, session.instance, m, &params, -32002) {
                Some(Ok(result)) => rpc_result(&id, result),
                Some(Err((code, message))) => rpc_error(&id, code, &message),
                None => rpc_error(&id, -32601, "Method not found"),
            },
        },
    };
    let mut announce = false;
    if b.sse_responses && b.list_changed_in_answers && b.list_changed_capability {
        let now = *state.generation.borrow();
        let mut sessions = state.sessions.lock().expect("lab lock");
        if let Some(s) = sessions.get_mut(&session.id).filter(|s| s.announced < now) {
            s.announced = now;
            announce = true;
        }
    }
    if !b.resumable_posts && !announce {
        return reply(&b, answer);
    }
    let mut messages = Vec::new();
    if announce {
        messages.extend(announcements(served(&b), None));
    }
    messages.push(answer.to_string());
    if b.resumable_posts {
        return state.prime(&profile, &session.id, messages);
    }
    message_stream(&messages)
}

/// A GET or DELETE that carries nothing of a legacy session (no `Mcp-Session-Id`, no
/// `Last-Event-ID`) on an endpoint that serves the modern era: that era has neither, so 405
/// (streamable-http § Backward Compatibility); a modern-only endpoint answers every GET and
/// DELETE so. Anything legacy about it (and every request to a legacy-only endpoint) gets the
/// legacy answer, e.g. 400 for a resumption without its session id.
fn without_legacy_session(b: &Behaviour, headers: &HeaderMap) -> bool {
    let legacy = headers.contains_key("mcp-session-id") || headers.contains_key("last-event-id");
    b.era == Era::Modern || (b.era == Era::Dual && !legacy)
}

async fn handle_get(
    State(state): State<Arc<LabState>>,
    Path(profile): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(b) = state.profiles.get(&profile).cloned() else {
        return status(StatusCode::NOT_FOUND, "no such endpoint");
    };
    if !b.get_stream || without_legacy_session(&b, &headers) {
        return status(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    }
    let session = match state.session(&headers, &profile) {
        Ok(s) => s,
        Err(refusal) => return refusal.into_response(),
    };
    if let Some(last) = headers.get("last-event-id") {
        return state.replay(&profile, &session.id, last);
    }
    let mut closed = session.closed;
    let ended = async move {
        while !*closed.borrow_and_update() {
            if closed.changed().await.is_err() {
                return;
            }
        }
    };
    let notify = b.list_changed_capability && b.deliver_list_changed;
    // A legacy stream just ends with its session: no final message. Each change is announced
    // for every list served, the tools first.
    let announced = announcements(served(&b), None);
    let events = change_feed(&state, &b, notify, ended)
        .take_while(|feed| std::future::ready(matches!(feed, Feed::ListChanged)))
        .flat_map(move |_| {
            futures_util::stream::iter(
                announced
                    .clone()
                    .into_iter()
                    .map(|m| Ok::<_, Infallible>(Event::default().event("message").data(m))),
            )
        });
    Sse::new(events.boxed())
        .keep_alive(KeepAlive::new().interval(KEEPALIVE))
        .into_response()
}

async fn handle_delete(
    State(state): State<Arc<LabState>>,
    Path(profile): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(b) = state.profiles.get(&profile)
        && without_legacy_session(b, &headers)
    {
        return status(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    }
    match state.session(&headers, &profile) {
        Ok(session) => {
            if let Some(s) = state.sessions.lock().expect("lab lock").remove(&session.id) {
                let _ = s.closed.send(true);
                state
                    .replay_bytes
                    .fetch_sub(s.replay_bytes, Ordering::Relaxed);
            }
            *state
                .deletes
                .lock()
                .expect("lab lock")
                .entry(profile)
                .or_default() += 1;
            StatusCode::OK.into_response()
        }
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{REPLAY_SESSION_BYTES, bytes_of};

    #[tokio::test]
    async fn the_replay_store_keeps_a_session_within_its_byte_budget() {
        let b = Behaviour {
            resumable_posts: true,
            ..Behaviour::default()
        };
        let lab = Lab::start(SocketAddr::from(([127, 0, 0, 1], 0)), vec![("p".into(), b)])
            .await
            .expect("lab starts");
        let state = &lab.state;
        let b = state.profiles["p"].clone();
        let resp = state.initialize("p", &b, &json!(0), &json!({}));
        let sid = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let answer = "x".repeat(60 * 1024);
        for _ in 0..10 {
            state.prime("p", &sid, vec![answer.clone()]);
        }
        let kept = {
            let sessions = state.sessions.lock().unwrap();
            let s = &sessions[&sid];
            assert!(s.replay_bytes <= REPLAY_SESSION_BYTES, "{}", s.replay_bytes);
            assert_eq!(s.replay_bytes, bytes_of(&s.replay[0].1) * s.replay.len());
            assert_eq!(s.replay.back().map(|(n, _)| *n), Some(11), "newest kept");
            s.replay_bytes
        };
        assert_eq!(state.replay_bytes.load(Ordering::Relaxed), kept);
        assert_eq!(lab.resume_counts("p").primed, 11);
        lab.expire_sessions("p");
        assert_eq!(state.replay_bytes.load(Ordering::Relaxed), 0);
    }
}
