//! Healing (`heal: true`, off by default): the version check neither side has to build.
//!
//! Everything else in the proxy is passive: it forwards and counts. Healing is the one part that
//! *acts* on the wire, so it is its own module, enabled per proxy, and touches the forwarder only
//! through two hooks ([`refuse`] before a request goes upstream, [`tap`] on an SSE answer):
//!
//! - **Tell a stale session.** A session's complete `tools/list` walk leaves an order-free
//!   fingerprint of what it saw ([`super::seen::Seen`], the catalog's [`super::upstream_tools::listing_fingerprint`]). When the
//!   catalog's own walk finds the upstream's list changed (a new [`Listing`] generation), every
//!   session that listed something else and has an open stream gets one
//!   `notifications/tools/list_changed` of the proxy's own, once per generation: on the legacy
//!   GET stream of its `Mcp-Session-Id`, or on a modern `subscriptions/listen` stream that asked
//!   for `toolsListChanged` (tagged with that listen request's id as `subscriptionId`). A stream
//!   opened later by a session still stale and not yet told gets it then. The frame is put
//!   between two of the upstream's events, never inside one: only while the stream's reader is at
//!   an event boundary ([`super::observe::SseReader::at_event_boundary`]). A session without an
//!   open stream gets nothing.
//! - **Refuse a call of a removed tool.** A `tools/call` (a single request) of a tool the catalog
//!   listed and no longer lists is answered by the proxy, never reaching the upstream: `-32602`
//!   `Unknown tool: NAME (the server's tool list changed; re-list with tools/list)`, as SDK
//!   servers answer an unknown tool (HTTP 200 in the legacy era, 400 in 2026-07-28 where a
//!   -32602 comes with 400). A call of a tool the catalog lists goes on without delay; for one it
//!   does not, the verdict is the catalog's, re-walked first when [`Catalog::judge`]
//!   would (a walk under way, or evidence of a change), waiting at most [`REFUSE_WAIT`]; on any
//!   doubt (no catalog, a failed walk, the wait ran out, a name never listed, no judging permit)
//!   the call is forwarded as usual.
//!
//! Bounds: one queue of at most [`QUEUE`] frames per tapped stream, at most [`MAX_STREAMS`]
//! tapped streams per proxy (more are forwarded untapped), a session is told at most once per
//! catalog generation; the state per session is three integers.
//!
//! [`Catalog::judge`]: super::upstream_tools::Catalog::judge

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::Shared;
use super::exchange::Exchange;
use super::labels::Client;
use super::observe::Asked;
use super::upstream_tools::Verdict;
use mcp_client::mcp::jsonrpc::Incoming;

/// Longest a call waits for the catalog walk that decides whether it is refused.
pub const REFUSE_WAIT: Duration = Duration::from_secs(2);
/// Frames queued per tapped stream (a session is told once per change: more would be a burst
/// of changes the stream is too slow to take, and the latest frame says the same).
pub const QUEUE: usize = 4;
/// Streams tapped at once per proxy (each is an open client connection anyway).
pub const MAX_STREAMS: usize = 65_536;

const INVALID_PARAMS: i64 = -32602;
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// One tapped stream in the registry.
struct Entry {
    key: Box<str>,
    tx: mpsc::Sender<Bytes>,
    frame: Bytes,
}

/// The tapped streams of one proxy.
#[derive(Default)]
pub struct Heal {
    streams: Mutex<HashMap<u64, Entry>>,
    next: AtomicU64,
}

/// The proxy's own frames for one client stream; dropped with the stream, which leaves the
/// registry then.
pub struct Tap {
    sh: Arc<Shared>,
    id: u64,
    rx: mpsc::Receiver<Bytes>,
    client: Arc<Client>,
}

impl Tap {
    /// A frame to send now, if one is queued and the stream is `at_boundary`; the stream is woken
    /// when one is queued later (only polled at a boundary: a partial upstream event is finished
    /// first, its next bytes wake the stream anyway).
    pub fn poll_frame(&mut self, cx: &mut Context<'_>, at_boundary: bool) -> Option<Bytes> {
        if !at_boundary {
            return None;
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(frame)) => {
                self.client.series.heal_notification();
                Some(frame)
            }
            _ => None,
        }
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.sh
            .heal
            .streams
            .lock()
            .expect("heal lock")
            .remove(&self.id);
    }
}

/// The `list_changed` event the proxy sends: on a modern listen stream, tagged with the listen
/// request's id.
pub fn frame(subscription: Option<&Value>) -> Bytes {
    let message = match subscription {
        None => json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        Some(id) => json!({
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {SUBSCRIPTION_ID: id}},
        }),
    };
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// Tap the answer about to stream back, if healing may write to it: a legacy GET stream of the
/// MCP path with a session, or a modern `subscriptions/listen` that asked for
/// `toolsListChanged`, answered with a stream. A session already stale is told at once.
pub(super) fn tap(
    sh: &Arc<Shared>,
    method: &Method,
    mcp_path: bool,
    ex: &Exchange,
    messages: &[Incoming],
    streamed: bool,
) -> Option<Tap> {
    if !sh.config.heal || !streamed {
        return None;
    }
    let key = ex.key.as_deref()?;
    let subscription = if *method == Method::GET && mcp_path {
        None
    } else if *method == Method::POST {
        Some(listen_id(messages)?)
    } else {
        return None;
    };
    let (tx, rx) = mpsc::channel(QUEUE);
    let id = sh.heal.next.fetch_add(1, Ordering::Relaxed);
    {
        let mut streams = sh.heal.streams.lock().expect("heal lock");
        if streams.len() >= MAX_STREAMS {
            return None;
        }
        streams.insert(
            id,
            Entry {
                key: key.into(),
                tx,
                frame: frame(subscription.as_ref()),
            },
        );
    }
    tell(sh, Some(id));
    Some(Tap {
        sh: sh.clone(),
        id,
        rx,
        client: ex.client.clone(),
    })
}

/// The id of the exchange's `subscriptions/listen` request, if it asked for tool list changes.
fn listen_id(messages: &[Incoming]) -> Option<Value> {
    messages.iter().find_map(|m| match m {
        Incoming::Request { id, method, params } if method == "subscriptions/listen" => params
            .as_ref()
            .and_then(|p| p.pointer("/notifications/toolsListChanged"))
            .and_then(Value::as_bool)
            .filter(|on| *on)
            .map(|_| id.clone()),
        _ => None,
    })
}

/// Tell the stale sessions with a tapped stream (`only`: just that stream) of the catalog's
/// current list, once per generation and session.
fn tell(sh: &Shared, only: Option<u64>) {
    let now = sh.catalog.listing();
    if now.generation == 0 {
        return;
    }
    let streams: Vec<(Box<str>, mpsc::Sender<Bytes>, Bytes)> = {
        let streams = sh.heal.streams.lock().expect("heal lock");
        streams
            .iter()
            .filter(|(id, _)| only.is_none_or(|o| o == **id))
            .map(|(_, e)| (e.key.clone(), e.tx.clone(), e.frame.clone()))
            .collect()
    };
    if streams.is_empty() {
        return;
    }
    let mut table = sh.sessions.lock().expect("sessions lock");
    for (key, tx, frame) in streams {
        let Some(session) = table.get_mut(&key) else {
            continue;
        };
        if session.heal.stale(now) && tx.try_send(frame).is_ok() {
            session.heal.tell(now);
        }
    }
}

/// Tell stale sessions each time the catalog's list changes, until `stop`.
pub(super) async fn run(sh: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut changes = sh.catalog.listing_changes();
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                tell(&sh, None);
            }
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// The proxy's own answer to the exchange, if it is a `tools/call` of a tool the upstream no
/// longer lists (see the module docs for when it is not refused).
pub(super) async fn refuse(sh: &Shared, ex: &Exchange, messages: &[Incoming]) -> Option<Response> {
    // An HTTP+SSE session's answers belong on its GET stream, where the proxy writes nothing.
    if !sh.config.heal
        || ex
            .key
            .as_deref()
            .is_some_and(super::exchange::is_stream_key)
    {
        return None;
    }
    let ([request], [Incoming::Request { id, .. }]) = (&ex.requests[..], messages) else {
        return None;
    };
    let Asked::ToolsCall { tool, arguments } = &request.asked else {
        return None;
    };
    // A listed tool goes on at once (a removal not yet learnt is the upstream's to answer); so
    // does a name never listed (a tool added a moment ago, a typo).
    if sh.catalog.lists(tool) || !sh.catalog.listed_before(tool) {
        return None;
    }
    let _permit = sh.judging.clone().try_acquire_owned().ok()?;
    let (verdict, fresh) = sh
        .catalog
        .judge_fresh(tool, arguments, ex.started, REFUSE_WAIT)
        .await;
    if verdict != Verdict::StaleTool || !fresh {
        return None;
    }
    ex.client.series.heal_refused();
    ex.client.series.stale_tool(&sh.catalog.tool_label(tool));
    Some(unknown_tool(id, tool, ex.modern))
}

/// `-32602 Unknown tool` with the request's id: HTTP 200 in the legacy era, 400 in the modern
/// one (where a JSON-RPC error comes with a 4xx, as SDK servers send it).
fn unknown_tool(id: &Value, tool: &str, modern: bool) -> Response {
    let message = format!(
        "Unknown tool: {} (the server's tool list changed; re-list with tools/list)",
        mcp_client::text::bounded(tool, 200)
    );
    let body =
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": INVALID_PARAMS, "message": message}});
    let status = if modern {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_client::mcp::jsonrpc;

    #[test]
    fn the_frame_is_one_sse_event_and_a_modern_one_carries_the_subscription_id() {
        let legacy = frame(None);
        assert_eq!(
            &legacy[..],
            b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
        );
        for id in [json!(4), json!("listen-1")] {
            let f = frame(Some(&id));
            let text = std::str::from_utf8(&f).expect("UTF-8");
            assert!(text.starts_with("event: message\ndata: ") && text.ends_with("}\n\n"));
            assert_eq!(text.matches('\n').count(), 3, "one data line: {text}");
            let data = text.lines().nth(1).expect("data line");
            let msg = &jsonrpc::decode(&data.as_bytes()["data: ".len()..]).expect("JSON-RPC")[0];
            let Incoming::Notification { method, params } = msg else {
                panic!("a notification: {msg:?}");
            };
            assert_eq!(method, "notifications/tools/list_changed");
            assert_eq!(
                params.as_ref().expect("params")["_meta"][SUBSCRIPTION_ID],
                id
            );
        }
    }

    #[test]
    fn only_a_listen_that_asked_for_tool_changes_is_tapped() {
        let listen = |filter: Value| Incoming::Request {
            id: json!(7),
            method: "subscriptions/listen".into(),
            params: Some(json!({"notifications": filter})),
        };
        assert_eq!(
            listen_id(&[listen(json!({"toolsListChanged": true}))]),
            Some(json!(7))
        );
        assert_eq!(
            listen_id(&[listen(json!({"toolsListChanged": false}))]),
            None
        );
        assert_eq!(listen_id(&[listen(json!({}))]), None);
    }

    #[test]
    fn the_refusal_is_32602_with_the_request_id_200_legacy_400_modern() {
        let r = unknown_tool(&json!(9), "search_legacy", false);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(
            unknown_tool(&json!(9), "x", true).status(),
            StatusCode::BAD_REQUEST
        );
    }
}
