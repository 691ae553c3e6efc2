//! Healing (`heal: true`) end to end, with real peers: the lab's knowledge-base server behind the
//! proxy, swapping `search_legacy` for `search_v2` without announcing it (a lossy gateway), and
//! raw clients that keep a stale list. The catalog learns of the swap the way it does in passive
//! mode (another client, the official Rust SDK, re-lists); then the stale session is told on its
//! open stream (legacy GET, or a modern `subscriptions/listen` that asked for it) and its call of
//! the removed tool is answered by the proxy. With `heal` off, the same scenario leaves the wire
//! untouched.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::proxy_lab::{PROFILE, ProxyLab, post_legacy};
use common::{DEADLINE, Scrape};
use mcp_exporter::config::McpProxyConfig;
use mcp_exporter::proxy::Proxy;
use mcp_exporter::telemetry::Telemetry;
use mcp_lab::Behaviour;
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use serde_json::{Value, json};

const LIST_CHANGED: &str = "notifications/tools/list_changed";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// A proxy (`heal` as given) in front of a lab that never announces its swaps, with a catalog
/// refresh far away: only a client's re-list shows a swap to the proxy.
async fn healing(heal: bool) -> ProxyLab {
    let unannounced = Behaviour {
        deliver_list_changed: false,
        ..Behaviour::default()
    };
    ProxyLab::with(unannounced, |c| {
        c.catalog_refresh_interval = Duration::from_secs(3600);
        c.heal = heal;
    })
    .await
}

impl ProxyLab {
    /// A silent swap at the upstream, and the catalog taught it by a client that re-lists (the
    /// official Rust SDK, with a session and a GET stream of its own).
    async fn silent_swap_learnt(&self) {
        let walks = self.proxy.status().catalog_walks;
        self.lab.churn();
        let transport =
            rmcp::transport::StreamableHttpClientTransport::from_uri(self.url().to_string());
        let relister = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("relister", "1.0"),
        )
        .serve(transport)
        .await
        .expect("rmcp client connects through the proxy");
        let fresh = relister.list_all_tools().await.expect("re-list");
        assert!(fresh.iter().any(|t| t.name == "search_v2"));
        self.until("the catalog re-walked after the swap", |_| {
            self.proxy.status().catalog_walks > walks
        })
        .await;
        let _ = relister.cancel().await;
    }
}

fn c(client: &str) -> [(&'static str, &str); 2] {
    [("proxy", "kb"), ("client", client)]
}

/// What a stream carried so far, and whether it ended.
#[derive(Default)]
struct Seen {
    bytes: Vec<u8>,
    ended: bool,
}

/// The body of an SSE answer, read in the background.
struct Stream(Arc<Mutex<Seen>>);

impl Stream {
    fn read(mut resp: reqwest::Response) -> Stream {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let out = seen.clone();
        tokio::spawn(async move {
            while let Ok(Some(chunk)) = resp.chunk().await {
                out.lock().unwrap().bytes.extend_from_slice(&chunk);
            }
            out.lock().unwrap().ended = true;
        });
        Stream(seen)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap().bytes).into_owned()
    }

    async fn until(&self, what: &str, cond: impl Fn(&str, bool) -> bool) -> String {
        let start = tokio::time::Instant::now();
        loop {
            let (text, ended) = {
                let s = self.0.lock().unwrap();
                (String::from_utf8_lossy(&s.bytes).into_owned(), s.ended)
            };
            if cond(&text, ended) {
                return text;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "timed out waiting for: {what}\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The JSON-RPC messages of its events (every event's `data` lines joined).
    fn messages(&self) -> Vec<Value> {
        let text = self.text().replace("\r\n", "\n");
        text.split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                serde_json::from_str(&data.join("\n")).ok()
            })
            .collect()
    }

    fn list_changed(&self) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|m| m["method"] == LIST_CHANGED)
            .collect()
    }
}

/// A raw legacy client: its session id, after `initialize` as `name`.
struct Legacy {
    url: String,
    session: String,
}

impl Legacy {
    async fn start(url: &str, name: &str) -> Legacy {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}});
        let resp = post_legacy(url, None, init.to_string()).await;
        let session = resp.headers()["mcp-session-id"]
            .to_str()
            .expect("ASCII")
            .to_string();
        let _ = resp.bytes().await;
        let l = Legacy {
            url: url.to_string(),
            session,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = l.post(&initialized).await.bytes().await;
        l
    }

    async fn post(&self, body: &Value) -> reqwest::Response {
        post_legacy(&self.url, Some(&self.session), body.to_string()).await
    }

    /// Every page of `tools/list`: the names listed.
    async fn list_all(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        for id in 10.. {
            let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
            let page: Value = self
                .post(
                    &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}),
                )
                .await
                .json()
                .await
                .expect("a JSON page");
            let result = &page["result"];
            names.extend(
                result["tools"]
                    .as_array()
                    .expect("tools")
                    .iter()
                    .map(|t| t["name"].as_str().expect("name").to_string()),
            );
            match result["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        names
    }

    async fn get_stream(&self) -> Stream {
        let resp = reqwest::Client::new()
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .await
            .expect("GET stream");
        assert_eq!(resp.status(), 200);
        Stream::read(resp)
    }
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_legacy","arguments":{"query":"q"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_legacy_session_is_told_once_and_its_removed_tool_call_answered_by_the_proxy() {
    let s = healing(true).await;
    let stale = Legacy::start(&s.url(), "stale").await;
    assert!(stale.list_all().await.contains(&"search_legacy".into()));
    let stream = stale.get_stream().await;
    s.silent_swap_learnt().await;
    // Told on its open stream, in an event of its own between the upstream's.
    stream
        .until("the injected list_changed", |t, _| t.contains(LIST_CHANGED))
        .await;
    assert!(
        stream.text().contains(
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
        ),
        "{}",
        stream.text()
    );
    s.until("the notification counted for the stale client", |m| {
        m.v("mcp_proxy_heal_notifications_total", &c("stale")) == 1.0
    })
    .await;
    // Its call of the removed tool is answered by the proxy: the upstream never sees it.
    let calls = s.lab.tools_calls();
    let resp = stale.post(&serde_json::from_str(CALL).unwrap()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let answer: Value = resp.json().await.expect("JSON");
    assert_eq!(answer["id"], 42);
    assert_eq!(answer["error"]["code"], -32602);
    assert_eq!(
        answer["error"]["message"],
        "Unknown tool: search_legacy (the server's tool list changed; re-list with tools/list)"
    );
    assert_eq!(
        s.lab.tools_calls(),
        calls,
        "the upstream never saw the call"
    );
    // A tool still listed is forwarded as ever.
    let stats = json!({"jsonrpc": "2.0", "id": 43, "method": "tools/call", "params": {"name": "kb_stats", "arguments": {}}});
    let answer: Value = stale.post(&stats).await.json().await.expect("JSON");
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(s.lab.tools_calls(), calls + 1);
    let m = s.scrape();
    assert_eq!(
        m.v("mcp_proxy_heal_refused_calls_total", &c("stale")),
        1.0,
        "{}",
        m.text
    );
    assert_eq!(m.v("mcp_proxy_heal_notifications_total", &c("stale")), 1.0);
    assert_eq!(
        m.v("mcp_proxy_heal_notifications_total", &c("relister")),
        0.0,
        "the client that listed the new list is not told"
    );
    // The next swap is told once more (once per change); the stream, ended by the upstream,
    // then holds exactly those two.
    s.silent_swap_learnt().await;
    stream
        .until("the second change told", |t, _| {
            t.matches(LIST_CHANGED).count() >= 2
        })
        .await;
    s.lab.expire_sessions(PROFILE);
    stream.until("the stream ended", |_, ended| ended).await;
    assert_eq!(stream.list_changed().len(), 2, "{}", stream.text());
    assert_eq!(
        s.scrape()
            .v("mcp_proxy_heal_notifications_total", &c("stale")),
        2.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_heal_off_nothing_is_injected_and_the_call_is_forwarded() {
    let s = healing(false).await;
    let stale = Legacy::start(&s.url(), "stale").await;
    assert!(stale.list_all().await.contains(&"search_legacy".into()));
    let stream = stale.get_stream().await;
    s.silent_swap_learnt().await;
    let calls = s.lab.tools_calls();
    let answer: Value = stale
        .post(&serde_json::from_str(CALL).unwrap())
        .await
        .json()
        .await
        .expect("JSON");
    assert_eq!(
        s.lab.tools_calls(),
        calls + 1,
        "the call reached the upstream"
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        !message.contains("re-list"),
        "the upstream's own answer: {answer}"
    );
    s.until("the stale call counted (passive mode)", |m| {
        m.v(
            "mcp_proxy_stale_tool_calls_total",
            &[
                ("proxy", "kb"),
                ("client", "stale"),
                ("tool", "search_legacy"),
            ],
        ) == 1.0
    })
    .await;
    // The upstream ends the stream: everything it carried is the upstream's.
    s.lab.expire_sessions(PROFILE);
    stream.until("the stream ended", |_, ended| ended).await;
    assert!(stream.list_changed().is_empty(), "{}", stream.text());
    let m = s.scrape();
    assert!(
        !m.text.contains("mcp_proxy_heal_"),
        "no heal series with heal off\n{}",
        m.text
    );
}

/// A modern (2026-07-28) request of `method` from client `name`, as the proxy forwards it.
async fn modern(
    url: &str,
    name: &str,
    id: Value,
    method: &str,
    params: Value,
) -> reqwest::Response {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"},
    });
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(tool) = params.get("name").and_then(Value::as_str) {
        r = r.header("mcp-name", tool);
    }
    r.body(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
        .send()
        .await
        .expect("the proxy answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_listen_stream_that_asked_is_told_with_its_subscription_id() {
    let s = healing(true).await;
    let url = s.url();
    // The modern client walks the whole list (two pages).
    let mut cursor: Option<String> = None;
    for id in 1.. {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let page: Value = modern(&url, "modern", json!(id), "tools/list", params)
            .await
            .json()
            .await
            .expect("a JSON page");
        match page["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let listen = |id: Value, tools: bool| {
        let url = url.clone();
        async move {
            let resp = modern(
                &url,
                "modern",
                id,
                "subscriptions/listen",
                json!({"notifications": {"toolsListChanged": tools}}),
            )
            .await;
            assert_eq!(resp.status(), 200);
            let stream = Stream::read(resp);
            stream
                .until("the listen acknowledged", |t, _| {
                    t.contains("notifications/subscriptions/acknowledged")
                })
                .await;
            stream
        }
    };
    let asked = listen(json!("listen-1"), true).await;
    let other = listen(json!(2), false).await;
    s.silent_swap_learnt().await;
    asked
        .until("the injected list_changed", |t, _| t.contains(LIST_CHANGED))
        .await;
    let told = asked.list_changed();
    assert_eq!(told.len(), 1, "{}", asked.text());
    assert_eq!(told[0]["params"]["_meta"][SUBSCRIPTION_ID], "listen-1");
    // The removed tool: -32602 from the proxy, with HTTP 400 as this era's errors come.
    let calls = s.lab.tools_calls();
    let resp = modern(
        &url,
        "modern",
        json!(7),
        "tools/call",
        json!({"name": "search_legacy", "arguments": {"query": "q"}}),
    )
    .await;
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let answer: Value = resp.json().await.expect("JSON");
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], -32602);
    assert_eq!(
        s.lab.tools_calls(),
        calls,
        "the upstream never saw the call"
    );
    let m = s.scrape();
    assert_eq!(
        m.v("mcp_proxy_heal_notifications_total", &c("modern")),
        1.0,
        "{}",
        m.text
    );
    assert_eq!(m.v("mcp_proxy_heal_refused_calls_total", &c("modern")), 1.0);
    // The upstream ends both subscriptions: the one that did not ask carried nothing of ours.
    s.lab.expire_sessions(PROFILE);
    other.until("the stream ended", |_, ended| ended).await;
    assert!(other.list_changed().is_empty(), "{}", other.text());
}

/// A Streamable HTTP server written for this test (the lab writes each event whole): `tools/list`
/// serves `search_legacy` until `swapped`, `search_v2` after, without announcing it, and the one
/// GET stream is whatever bytes the test hands it, so an event can stop halfway.
struct SplitPeer {
    swapped: std::sync::atomic::AtomicBool,
    sessions: std::sync::atomic::AtomicU64,
    stream: Mutex<Option<tokio::sync::mpsc::Receiver<Vec<u8>>>>,
}

async fn split_peer() -> (url::Url, Arc<SplitPeer>, tokio::sync::mpsc::Sender<Vec<u8>>) {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use std::sync::atomic::Ordering;
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let peer = Arc::new(SplitPeer {
        swapped: false.into(),
        sessions: 0.into(),
        stream: Mutex::new(Some(rx)),
    });
    let post = |axum::extract::State(p): axum::extract::State<Arc<SplitPeer>>,
                body: axum::body::Bytes| async move {
        let msg: Value = serde_json::from_slice(&body).expect("JSON");
        let json = |result: Value| {
            let body = json!({"jsonrpc": "2.0", "id": msg["id"], "result": result});
            ([("content-type", "application/json")], body.to_string())
        };
        match msg["method"].as_str().unwrap_or_default() {
            "initialize" => {
                let id = p.sessions.fetch_add(1, Ordering::SeqCst);
                let mut r = json(json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": true}}, "serverInfo": {"name": "split", "version": "1"}})).into_response();
                r.headers_mut()
                    .insert("mcp-session-id", format!("s-{id}").parse().unwrap());
                r
            }
            "tools/list" => {
                let second = if p.swapped.load(Ordering::SeqCst) {
                    "search_v2"
                } else {
                    "search_legacy"
                };
                let tools: Vec<Value> = ["kb_stats", second]
                    .iter()
                    .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                    .collect();
                json(json!({"tools": tools})).into_response()
            }
            "tools/call" => json(json!({"content": []})).into_response(),
            _ if msg.get("id").is_none() => StatusCode::ACCEPTED.into_response(),
            _ => json(json!({})).into_response(),
        }
    };
    let get = |axum::extract::State(p): axum::extract::State<Arc<SplitPeer>>,
               headers: HeaderMap| async move {
        let rx = headers
            .get("mcp-session-id")
            .filter(|_| {
                headers
                    .get("accept")
                    .is_some_and(|a| a == "text/event-stream")
            })
            .and_then(|_| p.stream.lock().unwrap().take());
        let Some(rx) = rx else {
            return StatusCode::METHOD_NOT_ALLOWED.into_response();
        };
        let body = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
        });
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(axum::body::Body::from_stream(body))
            .unwrap()
    };
    let app = axum::Router::new()
        .route("/mcp", axum::routing::post(post).get(get))
        .with_state(peer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (
        url::Url::parse(&format!("http://{addr}/mcp")).expect("url"),
        peer,
        tx,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_injected_event_waits_for_the_upstream_event_in_flight_to_end() {
    let (upstream, peer, events) = split_peer().await;
    let telemetry = Telemetry::new();
    let mut config = McpProxyConfig::new("kb", "127.0.0.1:0".parse().expect("address"), upstream);
    config.catalog_refresh_interval = Duration::from_secs(3600);
    config.heal = true;
    let proxy = Proxy::start(config, telemetry.clone())
        .await
        .expect("proxy starts");
    let start = tokio::time::Instant::now();
    while proxy.status().upstream_tools != Some(2) {
        assert!(start.elapsed() < DEADLINE, "the catalog walked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let url = format!("http://{}/mcp", proxy.addr());
    let stale = Legacy::start(&url, "stale").await;
    assert!(stale.list_all().await.contains(&"search_legacy".into()));
    let stream = stale.get_stream().await;
    // The upstream's event stops halfway: its first line, no blank line yet.
    let first =
        "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",";
    events.send(first.as_bytes().to_vec()).await.unwrap();
    stream
        .until("the first half forwarded", |t, _| t == first)
        .await;
    // The swap, learnt from another session's listing.
    let walks = proxy.status().catalog_walks;
    peer.swapped
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let relister = Legacy::start(&url, "relister").await;
    assert!(relister.list_all().await.contains(&"search_v2".into()));
    let start = tokio::time::Instant::now();
    while proxy.status().catalog_walks <= walks {
        assert!(start.elapsed() < DEADLINE, "the catalog re-walked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The notification is due; it must not cut the upstream's event. (A window in which a
    // broken proxy would have sent it: the proxy tells within microseconds of the walk.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stream.text(), first, "nothing inside the upstream's event");
    let rest = "\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n";
    events.send(rest.as_bytes().to_vec()).await.unwrap();
    let text = stream
        .until("the injected event after the upstream's", |t, _| {
            t.contains(LIST_CHANGED)
        })
        .await;
    assert_eq!(
        text,
        format!(
            "{first}{rest}event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"{LIST_CHANGED}\"}}\n\n"
        )
    );
    let m = Scrape::parse(&telemetry.render());
    assert_eq!(m.v("mcp_proxy_heal_notifications_total", &c("stale")), 1.0);
    assert_eq!(
        m.v("mcp_proxy_heal_notifications_total", &c("relister")),
        0.0
    );
}
