//! The modern era (2026-07-28) on a lab endpoint, beside the legacy sessions of
//! [`super::server`]: the same catalog, pages and fault knobs, served statelessly.
//!
//! A dual-era server picks the era per request (versioning § Backward Compatibility): a request
//! that carries the per-request `_meta` protocol version, or an `MCP-Protocol-Version` header
//! naming no legacy version, is modern; `initialize` opens a legacy session. Every modern request
//! is validated the way streamable-http § Server Validation says (headers against body, required
//! `_meta`, the version), and refusals are HTTP 4xx with a JSON-RPC error body so a client can
//! tell "modern, but wrong" from "not modern at all". Change notifications flow only on
//! `subscriptions/listen` streams (patterns/subscriptions), fed by the same change feed as the
//! legacy GET stream, so the stream fault knobs (lost, spurious, cut by a proxy) apply to both.
//!
//! The version list is the lab's own, not the client's: the lab is an independent peer.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::behaviour::{Behaviour, Era, Instances};
use super::state::{
    Feed, KEEPALIVE, LEGACY_VERSIONS, LabState, MAX_LISTENS, announcements, capabilities,
    change_feed, reply, rpc_error, rpc_result, served, served_listing, server_info, status,
};
use mcp_client::listing::list::List;

/// The modern versions the lab serves.
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const HEADER_MISMATCH: i64 = -32020;
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Longest piece of a client's header or body value echoed in an error message.
const ECHO_CHARS: usize = 64;

/// Whether a POST is a modern-era request.
pub(super) fn requested(headers: &HeaderMap, msg: &Value) -> bool {
    let meta_version = msg
        .pointer("/params/_meta")
        .and_then(|m| m.get(PROTOCOL_VERSION))
        .is_some();
    let modern_header = headers
        .get("mcp-protocol-version")
        .is_some_and(|v| !LEGACY_VERSIONS.iter().any(|l| v == *l));
    meta_version || modern_header
}

/// The versions an endpoint serving `era` names in `supportedVersions` and -32022: every one it
/// serves, modern first (a dual-era server serves the legacy ones on the same URL).
pub fn supported(era: Era) -> Vec<&'static str> {
    let mut versions = MODERN_VERSIONS.to_vec();
    if era.serves_legacy() {
        versions.extend(LEGACY_VERSIONS);
    }
    versions
}

fn echo(s: &str) -> String {
    s.chars().take(ECHO_CHARS).collect()
}

/// A JSON-RPC error with its HTTP status.
fn refuse(code: StatusCode, id: &Value, error: i64, message: &str) -> Response {
    (code, axum::Json(rpc_error(id, error, message))).into_response()
}

fn mismatch(id: &Value, message: &str) -> Response {
    refuse(
        StatusCode::BAD_REQUEST,
        id,
        HEADER_MISMATCH,
        &format!("Header mismatch: {message}"),
    )
}

/// -32022 with the versions this endpoint serves and the one the client asked for.
fn unsupported_version(id: &Value, era: Era, requested: &str, message: &str) -> Response {
    let mut body = rpc_error(id, UNSUPPORTED_PROTOCOL_VERSION, message);
    body["error"]["data"] = json!({"supported": supported(era), "requested": requested});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// What a legacy-only server answers a modern request: the Python SDK 1.x reads only the
/// `MCP-Protocol-Version` header and the session id, and refuses with 400 and -32600 under the
/// id `"server-error"`. Not a recognized modern error, so a dual-era client falls back.
fn legacy_only(headers: &HeaderMap) -> Response {
    let message = match headers.get("mcp-protocol-version") {
        Some(v) if !LEGACY_VERSIONS.iter().any(|l| v == *l) => format!(
            "Bad Request: Unsupported protocol version: {}. Supported versions: {}",
            echo(v.to_str().unwrap_or("?")),
            LEGACY_VERSIONS.join(", ")
        ),
        _ => "Bad Request: Missing session ID".to_string(),
    };
    refuse(
        StatusCode::BAD_REQUEST,
        &json!("server-error"),
        INVALID_REQUEST,
        &message,
    )
}

/// A header value as text: `Mcp-Name` may carry the `=?base64?…?=` sentinel, which the server
/// decodes before comparing (streamable-http § Value Encoding). `None`: not valid text.
fn header_text(v: &HeaderValue) -> Option<String> {
    let raw = v.to_str().ok()?;
    match raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(encoded) => String::from_utf8(base64_decode(encoded)?).ok(),
        None => Some(raw.to_string()),
    }
}

/// Standard-alphabet base64 with optional padding.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// A complete result as the modern era sends it: `resultType`, the server's identity in
/// `_meta`, and, for a cacheable result, the profile's `ttlMs` and `cacheScope`.
fn complete(mut result: Value, cacheable: Option<&Behaviour>) -> Value {
    result["resultType"] = json!("complete");
    if !result.get("_meta").is_some_and(Value::is_object) {
        result["_meta"] = json!({});
    }
    result["_meta"][SERVER_INFO] = server_info();
    if let Some(b) = cacheable {
        result["ttlMs"] = json!(b.ttl_ms);
        result["cacheScope"] = json!(b.cache_scope.as_str());
    }
    result
}

/// Serve one POST on an endpoint whose era is `b.era`: modern requests (and, on a modern-only
/// endpoint, everything).
pub(super) async fn post(
    state: &Arc<LabState>,
    profile: &str,
    b: &Behaviour,
    headers: &HeaderMap,
    msg: &Value,
    peer: SocketAddr,
) -> Response {
    if requested(headers, msg) {
        *state
            .modern_requests
            .lock()
            .expect("lab lock")
            .entry(profile.to_string())
            .or_default() += 1;
    }
    if b.era == Era::Legacy {
        return legacy_only(headers);
    }
    let id = msg.get("id").cloned();
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            &id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid Request: a request or notification needs a method",
        );
    };
    let Some(id) = id else {
        // This era defines no client notifications over HTTP; accept and ignore them.
        return StatusCode::ACCEPTED.into_response();
    };
    let params = msg.get("params").cloned().unwrap_or(json!({}));
    if method == "initialize" && !requested(headers, msg) {
        // A modern-only server names what it serves in its refusal of `initialize`: legacy
        // clients have no other diagnostic (versioning § Backward Compatibility).
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        return unsupported_version(
            &id,
            b.era,
            &echo(asked),
            "Unsupported protocol version: this endpoint serves only 2026-07-28 and has no initialize",
        );
    }
    if let Some(refusal) = refusal(b, headers, &id, method, &params) {
        return refusal;
    }
    tokio::time::sleep(b.answer_delay).await;
    let instance = match b.instances {
        Instances::PinnedDivergent => state.peer_instance(profile, peer),
        _ => 0,
    };
    match method {
        "server/discover" => {
            let result = json!({
                "supportedVersions": supported(b.era),
                "capabilities": capabilities(b),
            });
            reply(b, rpc_result(&id, complete(result, Some(b))))
        }
        "tools/call" => match state.tools_call(b, instance, &params) {
            Ok(result) => reply(b, rpc_result(&id, complete(result, None))),
            Err((code, message)) => refuse(StatusCode::BAD_REQUEST, &id, code, &message),
        },
        "subscriptions/listen" => listen(state, profile, b, &id, &params),
        m => match served_listing(b, m) {
            Some(list) => match state
                .list(profile, b, list, instance, &params, b.empty_cursor)
                .await
            {
                Ok(result) => reply(b, rpc_result(&id, complete(result, Some(b)))),
                Err(Some(message)) => refuse(StatusCode::BAD_REQUEST, &id, INVALID_PARAMS, message),
                Err(None) => status(StatusCode::SERVICE_UNAVAILABLE, "backend unavailable"),
            },
            // Resource not found became -32602 in this era.
            None => match state.item_call(b, instance, m, &params, INVALID_PARAMS) {
                // `resources/read` results are cacheable (ttlMs, cacheScope), prompts are not.
                Some(Ok(result)) => {
                    let cacheable = (m == "resources/read").then_some(b);
                    reply(b, rpc_result(&id, complete(result, cacheable)))
                }
                Some(Err((code, message))) => refuse(StatusCode::BAD_REQUEST, &id, code, &message),
                // `ping` and `initialize` are gone in this era: unimplemented methods are 404.
                None => refuse(
                    StatusCode::NOT_FOUND,
                    &id,
                    METHOD_NOT_FOUND,
                    "Method not found",
                ),
            },
        },
    }
}

/// Server Validation, the refusal of a request that breaks it: the version header and `_meta`
/// must agree and name a served version, the required `_meta` fields must be there, and
/// `Mcp-Method` (and `Mcp-Name` for `tools/call`) must match the body.
fn refusal(
    b: &Behaviour,
    headers: &HeaderMap,
    id: &Value,
    method: &str,
    params: &Value,
) -> Option<Response> {
    let meta = params.get("_meta");
    let Some(header) = headers.get("mcp-protocol-version") else {
        return Some(mismatch(id, "missing MCP-Protocol-Version header"));
    };
    let Ok(header) = header.to_str() else {
        return Some(mismatch(id, "MCP-Protocol-Version is not ASCII"));
    };
    let version = meta
        .and_then(|m| m.get(PROTOCOL_VERSION))
        .and_then(Value::as_str);
    if let Some(version) = version
        && header != version
    {
        return Some(mismatch(
            id,
            &format!(
                "MCP-Protocol-Version header value '{}' does not match body value '{}'",
                echo(header),
                echo(version)
            ),
        ));
    }
    // The header alone names the version of a request without `_meta` (a legacy request on a
    // modern-only endpoint): an unserved one is answered with what is served.
    if !MODERN_VERSIONS.contains(&header) {
        return Some(unsupported_version(
            id,
            b.era,
            &echo(header),
            "Unsupported protocol version",
        ));
    }
    if version.is_none() {
        return Some(refuse(
            StatusCode::BAD_REQUEST,
            id,
            INVALID_PARAMS,
            &format!("Invalid params: missing _meta[\"{PROTOCOL_VERSION}\"]"),
        ));
    }
    if !meta
        .and_then(|m| m.get(CLIENT_CAPABILITIES))
        .is_some_and(Value::is_object)
    {
        return Some(refuse(
            StatusCode::BAD_REQUEST,
            id,
            INVALID_PARAMS,
            &format!("Invalid params: missing _meta[\"{CLIENT_CAPABILITIES}\"]"),
        ));
    }
    match headers.get("mcp-method").map(|v| v.to_str()) {
        None => return Some(mismatch(id, "missing Mcp-Method header")),
        Some(Ok(m)) if m == method => {}
        Some(m) => {
            return Some(mismatch(
                id,
                &format!(
                    "Mcp-Method header value '{}' does not match body value '{}'",
                    echo(m.unwrap_or("?")),
                    echo(method)
                ),
            ));
        }
    }
    // `Mcp-Name` mirrors `params.name` (`tools/call`, `prompts/get`) or `params.uri`
    // (`resources/read`).
    let named = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(field) = named {
        let body = params.get(field).and_then(Value::as_str).unwrap_or("");
        match headers.get("mcp-name").map(header_text) {
            None => return Some(mismatch(id, "missing Mcp-Name header")),
            Some(Some(name)) if name == body => {}
            Some(name) => {
                return Some(mismatch(
                    id,
                    &format!(
                        "Mcp-Name header value '{}' does not match body value '{}'",
                        echo(name.as_deref().unwrap_or("?")),
                        echo(body)
                    ),
                ));
            }
        }
    }
    None
}

/// `subscriptions/listen`: an SSE stream that stays open. First the acknowledgement with the
/// honoured subset of the filter (`toolsListChanged`, and `promptsListChanged` and
/// `resourcesListChanged` for a profile that serves those lists, each only when the profile
/// declares `listChanged`), then a `list_changed` per honoured list as the change feed says,
/// every message tagged with the listen request's id; when the server ends the subscription (session expiry's modern
/// counterpart) the listen result, then the end. A profile without a notification channel
/// (`get_stream: false`, F3) does not implement the method.
fn listen(
    state: &Arc<LabState>,
    profile: &str,
    b: &Behaviour,
    id: &Value,
    params: &Value,
) -> Response {
    let Some(filter) = params.get("notifications").filter(|f| f.is_object()) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            id,
            INVALID_PARAMS,
            "Invalid params: subscriptions/listen needs params.notifications",
        );
    };
    if !b.get_stream {
        return refuse(
            StatusCode::NOT_FOUND,
            id,
            METHOD_NOT_FOUND,
            "Method not found",
        );
    }
    let Some(open) = OpenListen::claim(&state.listens) else {
        return status(StatusCode::SERVICE_UNAVAILABLE, "too many listen streams");
    };
    // The lists whose changes the filter asks for and the profile declares `listChanged` on.
    let wanted: Vec<List> = served(b)
        .filter(|l| {
            b.list_changed_capability && filter.get(l.listen_filter()) == Some(&json!(true))
        })
        .collect();
    let mut honoured = json!({});
    for l in &wanted {
        honoured[l.listen_filter()] = json!(true);
    }
    let tag = json!({ SUBSCRIPTION_ID: id });
    let ack = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": tag, "notifications": honoured},
    });
    let changed = announcements(wanted.iter().copied(), Some(&json!({"_meta": tag})));
    let closed = rpc_result(id, json!({"resultType": "complete", "_meta": tag})).to_string();
    let mut ends = state.listen_ends[profile].subscribe();
    ends.borrow_and_update();
    let ended = async move {
        let _ = ends.changed().await;
    };
    let notify = !wanted.is_empty() && b.deliver_list_changed;
    let feed = change_feed(state, b, notify, ended).flat_map(move |feed| {
        let _open = &open;
        let data = match feed {
            Feed::ListChanged => changed.clone(),
            Feed::Ended => vec![closed.clone()],
        };
        futures_util::stream::iter(
            data.into_iter()
                .map(|d| Ok::<_, Infallible>(Event::default().data(d))),
        )
    });
    let events = futures_util::stream::once(async move {
        Ok::<_, Infallible>(Event::default().data(ack.to_string()))
    })
    .chain(feed);
    let mut resp = Sse::new(events.boxed())
        .keep_alive(KeepAlive::new().interval(KEEPALIVE))
        .into_response();
    resp.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// One open listen stream, counted against [`MAX_LISTENS`] until it is dropped with its stream.
struct OpenListen(Arc<AtomicUsize>);

impl OpenListen {
    fn claim(open: &Arc<AtomicUsize>) -> Option<OpenListen> {
        if open.fetch_add(1, Ordering::Relaxed) >= MAX_LISTENS {
            open.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(OpenListen(open.clone()))
    }
}

impl Drop for OpenListen {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_names_decode_and_garbage_does_not() {
        let v = HeaderValue::from_static("=?base64?a2Jfc3RhdHM=?=");
        assert_eq!(header_text(&v).as_deref(), Some("kb_stats"));
        let v = HeaderValue::from_static("kb_stats");
        assert_eq!(header_text(&v).as_deref(), Some("kb_stats"));
        assert_eq!(header_text(&HeaderValue::from_static("=?base64?*?=")), None);
    }

    #[test]
    fn modern_is_chosen_by_meta_or_a_non_legacy_header() {
        let mut h = HeaderMap::new();
        let legacy = json!({"method": "tools/list", "params": {}});
        assert!(!requested(&h, &legacy));
        let modern = json!({"params": {"_meta": {PROTOCOL_VERSION: "2026-07-28"}}});
        assert!(requested(&h, &modern));
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2025-11-25"),
        );
        assert!(!requested(&h, &legacy));
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        assert!(requested(&h, &legacy));
    }

    #[test]
    fn listen_streams_are_capped_and_released_on_drop() {
        let open = Arc::new(AtomicUsize::new(MAX_LISTENS - 1));
        let last = OpenListen::claim(&open).expect("one left");
        assert!(OpenListen::claim(&open).is_none());
        assert_eq!(open.load(Ordering::Relaxed), MAX_LISTENS);
        drop(last);
        assert!(OpenListen::claim(&open).is_some());
        assert_eq!(open.load(Ordering::Relaxed), MAX_LISTENS - 1);
    }

    #[test]
    fn a_dual_era_endpoint_names_every_version_it_serves() {
        assert_eq!(
            supported(Era::Dual),
            ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
        );
        assert_eq!(supported(Era::Modern), ["2026-07-28"]);
    }
}
