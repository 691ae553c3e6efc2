//! A small MCP server on the HTTP+SSE transport of 2024-11-05, written from the spec text because
//! no Rust SDK serves it: `GET /sse` opens an event stream whose first event is `endpoint` (the
//! session's message URL, relative, in the Python SDK's shape `/messages/?session_id=<hex>`);
//! `POST` there takes one JSON-RPC message and answers `202 Accepted`; every server message,
//! responses included, goes out as a `message` event on that session's stream. The content type
//! carries `; charset=utf-8`, as Python's does.
//!
//! The test drives it: announce a list change, send any event, drop every stream, or hand out an
//! endpoint on another origin (the one fault a spec-following server never commits).
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// What the peer does differently.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Send an `endpoint` on another origin (another host) instead of its own.
    pub foreign_endpoint: bool,
    /// Accept POSTs with `200 OK` instead of `202 Accepted`.
    pub accept_with_200: bool,
    /// Hold each POST's `202` this long after its answer went out on the stream (the order the
    /// Python SDK's `SseServerTransport` often takes, made certain).
    pub accept_after: std::time::Duration,
}

/// Tool names served, two per page.
pub const TOOLS: [&str; 3] = ["alpha", "beta", "gamma"];
const PAGE_SIZE: usize = 2;

#[derive(Default)]
struct Peer {
    options: Options,
    sessions: Mutex<HashMap<String, mpsc::Sender<Bytes>>>,
    /// Streams of forgotten sessions, kept open.
    orphans: Mutex<Vec<mpsc::Sender<Bytes>>>,
    next_session: AtomicU64,
    /// (method, `Authorization` value) of every HTTP request received.
    seen: Mutex<Vec<(String, Option<String>)>>,
    /// JSON-RPC messages received, in order.
    received: Mutex<Vec<Value>>,
}

/// A running peer on a loopback port.
pub struct SsePeer {
    pub url: url::Url,
    peer: Arc<Peer>,
}

impl SsePeer {
    pub async fn start(options: Options) -> SsePeer {
        let peer = Arc::new(Peer {
            options,
            ..Peer::default()
        });
        let app = axum::Router::new()
            .route("/sse", get(open_stream))
            .route("/messages/", post(take_message))
            .with_state(peer.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        SsePeer {
            url: url::Url::parse(&format!("http://{addr}/sse")).unwrap(),
            peer,
        }
    }

    /// Open sessions (streams not yet dropped).
    pub fn sessions(&self) -> usize {
        self.peer.sessions.lock().unwrap().len()
    }

    /// Send one SSE event with this `data` on every open stream.
    pub async fn send_event(&self, event: &str, data: &str) {
        let frame = Bytes::from(format!("event: {event}\ndata: {data}\n\n"));
        let streams: Vec<_> = self
            .peer
            .sessions
            .lock()
            .unwrap()
            .values()
            .cloned()
            .collect();
        for s in streams {
            let _ = s.send(frame.clone()).await;
        }
    }

    /// `notifications/tools/list_changed` on every open stream.
    pub async fn announce_list_changed(&self) {
        self.send_event(
            "message",
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
        )
        .await;
    }

    /// End every stream (the server lost its sessions).
    pub fn drop_streams(&self) {
        self.peer.sessions.lock().unwrap().clear();
    }

    /// Forget every session but keep its stream open: POSTs to it get 404.
    pub fn forget_sessions(&self) {
        let streams: Vec<_> = self
            .peer
            .sessions
            .lock()
            .unwrap()
            .drain()
            .map(|(_, s)| s)
            .collect();
        self.peer.orphans.lock().unwrap().extend(streams);
    }

    /// (HTTP method, Authorization header) of every request so far.
    pub fn seen(&self) -> Vec<(String, Option<String>)> {
        self.peer.seen.lock().unwrap().clone()
    }

    /// The JSON-RPC messages received so far.
    pub fn received(&self) -> Vec<Value> {
        self.peer.received.lock().unwrap().clone()
    }
}

fn record(peer: &Peer, method: &str, headers: &HeaderMap) {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    peer.seen.lock().unwrap().push((method.to_string(), auth));
}

async fn open_stream(State(peer): State<Arc<Peer>>, headers: HeaderMap) -> Response {
    record(&peer, "GET", &headers);
    let id = format!(
        "{:032x}",
        peer.next_session.fetch_add(1, Ordering::Relaxed) + 0xabc
    );
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let endpoint = if peer.options.foreign_endpoint {
        format!("http://other.invalid/messages/?session_id={id}")
    } else {
        format!("/messages/?session_id={id}")
    };
    tx.send(Bytes::from(format!(
        "event: endpoint\ndata: {endpoint}\n\n"
    )))
    .await
    .unwrap();
    peer.sessions.lock().unwrap().insert(id, tx);
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        let frame = rx.recv().await?;
        Some((Ok::<_, Infallible>(frame), rx))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

async fn take_message(
    State(peer): State<Arc<Peer>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    record(&peer, "POST", &headers);
    let stream = query
        .get("session_id")
        .and_then(|id| peer.sessions.lock().unwrap().get(id).cloned());
    let Some(stream) = stream else {
        return (StatusCode::NOT_FOUND, "Could not find session").into_response();
    };
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "Could not parse message").into_response();
    };
    peer.received.lock().unwrap().push(msg.clone());
    if let (Some(id), Some(method)) = (msg.get("id"), msg.get("method").and_then(Value::as_str)) {
        let answer = match answer(method, &msg) {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        };
        let _ = stream
            .send(Bytes::from(format!("event: message\ndata: {answer}\n\n")))
            .await;
    }
    tokio::time::sleep(peer.options.accept_after).await;
    if peer.options.accept_with_200 {
        return (StatusCode::OK, "OK").into_response();
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

fn answer(method: &str, msg: &Value) -> Result<Value, (i64, &'static str)> {
    match method {
        "initialize" => Ok(json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "sse-peer", "version": "1"},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => {
            let start = match msg["params"]["cursor"].as_str() {
                None => 0,
                Some(c) => c
                    .strip_prefix("after-")
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n <= TOOLS.len())
                    .ok_or((-32602, "Invalid cursor"))?,
            };
            let end = (start + PAGE_SIZE).min(TOOLS.len());
            let tools: Vec<Value> = TOOLS[start..end]
                .iter()
                .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                .collect();
            let mut result = json!({ "tools": tools });
            if end < TOOLS.len() {
                result["nextCursor"] = json!(format!("after-{end}"));
            }
            Ok(result)
        }
        _ => Err((-32601, "Method not found")),
    }
}
