//! Passive mode judged by each era's contract and on every channel, with real peers: the lab
//! (both eras, `ttlMs`, `subscriptions/listen`) behind the proxy, the exporter's own MCP client
//! as the modern and legacy clients (told apart by a header, `client_label: {header: x-client}`),
//! and the HTTP+SSE test peer for the 2024-11-05 transport.
//!
//! - A 2026-07-28 client that calls with a listing past its `ttlMs` is counted; one that calls
//!   while its listing is fresh is not, nor is a legacy client (its contract: cache until
//!   `list_changed`).
//! - A modern client's `list_changed` on its listen stream is forwarded and its re-list timed.
//! - HTTP+SSE POSTs are tied to their session by the message URL's `sessionId`, and their answers
//!   on the GET stream read with them, also when they come well before the POST's `202` (a walk
//!   of every page stays a followed cursor).

mod common;
#[path = "common/sse_peer.rs"]
mod sse_peer;

use std::sync::Arc;
use std::time::Duration;

use common::DEADLINE;
use common::proxy_lab::{ProxyLab, bare_proxy, sse_stream, until_scraped};
use mcp_client::mcp::{Client, Inbox, ProtocolVersion};
use mcp_exporter::config::{ClientLabel, Endpoint, McpProxyConfig, Secret};
use mcp_exporter::proxy::Proxy;
use mcp_exporter::telemetry::Telemetry;
use mcp_lab::Behaviour;
use serde_json::json;

/// The lab's `ttlMs` in the expiry test: long enough that a call right after a listing is
/// certainly inside it, short enough to wait out.
const TTL: Duration = Duration::from_secs(3);

/// A proxy whose `client` label is the `x-client` header, in front of a lab as `behaviour` says.
async fn labelled(behaviour: Behaviour, adjust: impl FnOnce(&mut McpProxyConfig)) -> ProxyLab {
    ProxyLab::with(behaviour, |c| {
        c.client_label = ClientLabel::Header("x-client".into());
        adjust(c);
    })
    .await
}

impl ProxyLab {
    /// A client of `era` through the proxy, labelled `name`.
    async fn client(&self, name: &str, version: &str) -> (Client, Arc<Inbox>) {
        let url = url::Url::parse(&self.url()).expect("URL");
        let net = mcp_client::target_http::TargetHttp::plain();
        let endpoint = Endpoint::http(url);
        let headers = [("x-client".to_string(), Secret::new(name))];
        let dialer =
            mcp_exporter::probe::connection::dialer(&endpoint, &headers, &net).expect("dialer");
        let (inbox, _requests) = Inbox::new();
        let inbox = Arc::new(inbox);
        let pinned = ProtocolVersion::parse(version).expect("version");
        let observe = |_: &'static str, _, _| {};
        let client = Client::connect(&dialer, Some(pinned), inbox.clone(), DEADLINE, &observe)
            .await
            .expect("a session through the proxy");
        (client, inbox)
    }
}

/// Every page of the client's tool list.
async fn walk(client: &Client) -> usize {
    let mut cursor: Option<String> = None;
    let mut tools = 0;
    loop {
        let (page, _) = client
            .tools_list_page(cursor.as_deref(), 1 << 20)
            .await
            .expect("a page");
        tools += page["tools"].as_array().map_or(0, Vec::len);
        match page.get("nextCursor").and_then(|c| c.as_str()) {
            Some(next) => cursor = Some(next.to_string()),
            None => return tools,
        }
    }
}

async fn call(client: &Client, tool: &str) {
    client
        .request("tools/call", Some(json!({"name": tool, "arguments": {}})))
        .await
        .expect("a call");
}

fn c(client: &str) -> [(&'static str, &str); 2] {
    [("proxy", "kb"), ("client", client)]
}

const EXPIRED: &str = "mcp_proxy_expired_listing_calls_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_call_with_a_listing_past_its_ttl_is_counted_and_fresh_or_legacy_ones_are_not() {
    let behaviour = Behaviour {
        ttl_ms: TTL.as_millis() as u64,
        ..Behaviour::default()
    };
    let s = labelled(behaviour, |c| c.ttl_grace = Duration::ZERO).await;
    let (careful, _) = s.client("careful", "2026-07-28").await;
    let (careless, _) = s.client("careless", "2026-07-28").await;
    let (legacy, _) = s.client("legacy", "2025-06-18").await;
    for client in [&careful, &careless, &legacy] {
        assert_eq!(walk(client).await, 14);
    }
    // Inside the listing's ttlMs: a correct use.
    call(&careful, "kb_stats").await;
    // Past it (the lab's TTL from the last page, which the walk above has received).
    tokio::time::sleep(TTL + Duration::from_millis(200)).await;
    call(&careless, "kb_stats").await;
    call(&legacy, "kb_stats").await;
    // The careful client lists again, then calls: fresh again.
    assert_eq!(walk(&careful).await, 14);
    call(&careful, "kb_stats").await;
    let m = s
        .until("the careless client's expired call", |m| {
            m.v(EXPIRED, &c("careless")) == 1.0
        })
        .await;
    assert_eq!(m.v(EXPIRED, &c("careful")), 0.0, "{}", m.text);
    assert_eq!(
        m.v(EXPIRED, &c("legacy")),
        0.0,
        "a legacy client caches until list_changed: {}",
        m.text
    );
    let calls = |client| {
        m.v(
            "mcp_proxy_requests_total",
            &[
                ("proxy", "kb"),
                ("client", client),
                ("method", "tools/call"),
            ],
        )
    };
    assert_eq!(
        (calls("careful"), calls("careless"), calls("legacy")),
        (2.0, 1.0, 1.0)
    );
    s.proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_clients_listen_stream_carries_list_changed_and_its_relist_is_timed() {
    let s = labelled(Behaviour::default(), |_| {}).await;
    let (client, inbox) = s.client("listener", "2026-07-28").await;
    let channel = client
        .open_channel()
        .await
        .expect("listen through the proxy")
        .expect("the lab serves subscriptions/listen");
    assert!(
        channel.tools_list_changed,
        "the lab acknowledges toolsListChanged"
    );
    let reader = {
        let inbox = inbox.clone();
        tokio::spawn(async move { channel.stream.run(&inbox).await })
    };
    assert_eq!(walk(&client).await, 14);
    s.lab.churn();
    s.until("list_changed forwarded on the listen stream", |m| {
        m.v("mcp_proxy_list_changed_forwarded_total", &c("listener")) >= 1.0
    })
    .await;
    assert_eq!(walk(&client).await, 14);
    call(&client, "kb_stats").await;
    let m = s
        .until("the re-list timed", |m| {
            m.v("mcp_proxy_relist_lag_seconds_count", &[("proxy", "kb")]) >= 1.0
        })
        .await;
    let without = |after| {
        m.v(
            "mcp_proxy_sessions_without_relist_total",
            &[("proxy", "kb"), ("client", "listener"), ("after", after)],
        )
    };
    assert_eq!(without("list_changed"), 0.0, "{}", m.text);
    reader.abort();
    s.proxy.stop().await;
}

/// One POST through the proxy, as an HTTP+SSE client sends it (no session header: the session
/// is in the message URL).
async fn post(url: &str, body: serde_json::Value) -> reqwest::StatusCode {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the proxy answers")
        .status()
}

/// A proxy in front of `peer` and one HTTP+SSE session through it, its stream read on: the
/// proxy, its telemetry, the session's message URL and the stream's reader.
async fn sse_session(
    peer: &sse_peer::SsePeer,
) -> (Proxy, Arc<Telemetry>, String, tokio::task::JoinHandle<()>) {
    let (proxy, telemetry) = bare_proxy(peer.url.clone(), |_| {}).await;
    let base = format!("http://{}", proxy.addr());
    let (mut stream, endpoint) = sse_stream(&base).await;
    // The stream is read on (the proxy forwards and observes it as the client takes it).
    let reader = tokio::spawn(async move { while let Ok(Some(_)) = stream.chunk().await {} });
    let messages = format!("{base}{endpoint}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "sse-client", "version": "1"}}});
    assert_eq!(post(&messages, init).await, 202);
    (proxy, telemetry, messages, reader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sse_posts_are_tied_to_their_session_and_answered_on_its_stream() {
    let peer = sse_peer::SsePeer::start(sse_peer::Options::default()).await;
    let (proxy, telemetry, messages, reader) = sse_session(&peer).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(post(&messages, list).await, 202);
    // The page's answer came on the stream and is read as this session's: its cursor is the
    // named client's.
    until_scraped(
        &telemetry,
        "the stream's answer read as the session's",
        |m| m.v("mcp_proxy_cursors_issued_total", &c("sse-client")) == 1.0,
    )
    .await;
    peer.announce_list_changed().await;
    until_scraped(&telemetry, "list_changed forwarded to the session", |m| {
        m.v("mcp_proxy_list_changed_forwarded_total", &c("sse-client")) == 1.0
    })
    .await;
    let relist = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    assert_eq!(post(&messages, relist).await, 202);
    let m = until_scraped(
        &telemetry,
        "the re-list timed and the cursor abandoned",
        |m| {
            m.v("mcp_proxy_relist_lag_seconds_count", &[("proxy", "kb")]) == 1.0
                && m.v("mcp_proxy_first_page_only_sessions_total", &c("sse-client")) == 1.0
        },
    )
    .await;
    let sessions = m.v("mcp_proxy_sessions", &c("sse-client"));
    assert_eq!(sessions, 1.0, "one tracked session: {}", m.text);
    reader.abort();
    proxy.stop().await;
}

/// When the server writes each answer on the stream well before its POST's `202`, a walk of
/// every page is still a followed cursor: the page's fresh nextCursor, read on the stream
/// first, is not taken for one its own request abandoned (it was, before the request side was
/// accounted before the POST left: first-page-only, the follow missed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sse_answers_before_their_202_keep_the_walk() {
    let peer = sse_peer::SsePeer::start(sse_peer::Options {
        accept_after: Duration::from_millis(200),
        ..sse_peer::Options::default()
    })
    .await;
    let (proxy, telemetry, messages, reader) = sse_session(&peer).await;
    for walk in 1..=2u8 {
        let first = json!({"jsonrpc": "2.0", "id": 10 * walk, "method": "tools/list"});
        assert_eq!(post(&messages, first).await, 202);
        let next = json!({"jsonrpc": "2.0", "id": 10 * walk + 1, "method": "tools/list",
            "params": {"cursor": "after-2"}});
        assert_eq!(post(&messages, next).await, 202);
    }
    let m = until_scraped(&telemetry, "both walks' cursors followed", |m| {
        m.v("mcp_proxy_cursors_followed_total", &c("sse-client")) == 2.0
    })
    .await;
    assert_eq!(
        m.v("mcp_proxy_cursors_issued_total", &c("sse-client")),
        2.0,
        "{}",
        m.text
    );
    assert_eq!(
        m.v("mcp_proxy_first_page_only_sessions_total", &c("sse-client")),
        0.0,
        "{}",
        m.text
    );
    reader.abort();
    proxy.stop().await;
}
