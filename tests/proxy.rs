//! Passive mode end to end, with real peers: the lab's knowledge-base server (14 tools, pages of
//! 8, a tool swap on every redeploy) behind the proxy, and the official Rust SDK (rmcp) as the
//! client. Correct use leaves the series clean; the careless uses of the source scenario show up
//! attributed to their client; a hostile client gets clear errors while others keep working.

mod common;
#[path = "common/sse_peer.rs"]
mod sse_peer;

use std::sync::Arc;
use std::time::Duration;

use common::proxy_lab::{PROFILE, ProxyLab, bare_proxy, post_legacy, sse_stream};
use common::{DEADLINE, Scrape, start_lab};
use mcp_exporter::config::McpProxyConfig;
use mcp_exporter::telemetry::Telemetry;
use mcp_lab::Behaviour;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

impl ProxyLab {
    async fn client(&self, name: &str) -> RunningService<RoleClient, ClientConfig> {
        rmcp_client(&self.url(), name).await
    }

    /// A churn of the upstream, and the proxy's catalog walked after it.
    async fn churn(&self) {
        let walks = self.proxy.status().catalog_walks;
        self.lab.churn();
        self.until("the catalog re-walked after the churn", |_| {
            self.proxy.status().catalog_walks > walks
        })
        .await;
    }
}

/// An rmcp client named `name` on `url`, its response cache off.
async fn rmcp_client(url: &str, name: &str) -> RunningService<RoleClient, ClientConfig> {
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(name, "1.0"),
    );
    let client = info
        .serve(transport)
        .await
        .expect("rmcp client connects through the proxy");
    client
        .set_response_cache_config(rmcp::ClientCacheConfig::disabled())
        .await;
    client
}

fn c(client: &str) -> [(&'static str, &str); 2] {
    [("proxy", "kb"), ("client", client)]
}

async fn call(
    client: &RunningService<RoleClient, ClientConfig>,
    tool: &str,
    args: serde_json::Value,
) -> bool {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    client.call_tool(params).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_client_leaves_the_series_clean() {
    let s = ProxyLab::new(|_| {}).await;
    let client = s.client("correct").await;
    let tools = client.list_all_tools().await.expect("all pages");
    assert_eq!(tools.len(), 14);
    assert!(call(&client, "kb_stats", json!({})).await);
    // A correct client re-lists when told: wait for the notification the lab sends.
    s.lab.churn();
    s.until("list_changed forwarded", |m| {
        m.v("mcp_proxy_list_changed_forwarded_total", &c("correct")) >= 1.0
    })
    .await;
    let tools = client.list_all_tools().await.expect("re-list");
    assert!(tools.iter().any(|t| t.name == "search_v2"));
    assert!(call(&client, "search_v2", json!({"query": "x"})).await);
    let m = s
        .until("the re-list counted", |m| {
            m.v(
                "mcp_proxy_tools_list_requests_total",
                &[("proxy", "kb"), ("client", "correct"), ("cursor", "false")],
            ) >= 2.0
        })
        .await;
    let issued = m.v("mcp_proxy_cursors_issued_total", &c("correct"));
    assert!(issued >= 2.0, "{}", m.text);
    assert_eq!(
        m.v("mcp_proxy_cursors_followed_total", &c("correct")),
        issued
    );
    assert_eq!(
        m.v("mcp_proxy_first_page_only_sessions_total", &c("correct")),
        0.0
    );
    assert_eq!(
        m.get(
            "mcp_proxy_stale_tool_calls_total",
            &[
                ("proxy", "kb"),
                ("client", "correct"),
                ("tool", "search_legacy")
            ]
        ),
        None
    );
    for after in ["list_changed", "reconnect"] {
        let l = [("proxy", "kb"), ("client", "correct"), ("after", after)];
        assert_eq!(
            m.v("mcp_proxy_sessions_without_relist_total", &l),
            0.0,
            "{after}"
        );
    }
    assert!(m.v("mcp_proxy_relist_lag_seconds_count", &[("proxy", "kb")]) >= 1.0);
    assert!(m.v("mcp_proxy_cursor_age_seconds_count", &[("proxy", "kb")]) >= 2.0);
    assert_eq!(m.v("mcp_proxy_sessions", &c("correct")), 1.0);
    client.cancel().await.ok();
    s.until("the session deleted", |m| {
        m.v(
            "mcp_proxy_sessions_ended_total",
            &[("proxy", "kb"), ("reason", "deleted")],
        ) == 1.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn careless_clients_show_up_under_their_own_label() {
    let s = ProxyLab::new(|_| {}).await;
    // One list without the cursor, then a call: the tool set is certainly incomplete.
    let first = s.client("careless-first-page").await;
    let page = first.list_tools(None).await.expect("first page");
    assert_eq!(page.tools.len(), 8);
    assert!(page.next_cursor.is_some());
    assert!(call(&first, "kb_stats", json!({})).await);
    s.until("first-page-only counted", |m| {
        m.v(
            "mcp_proxy_first_page_only_sessions_total",
            &c("careless-first-page"),
        ) == 1.0
    })
    .await;

    // A list cached across the swap: search_legacy is gone upstream.
    let cached = s.client("careless-cache").await;
    let tools = cached.list_all_tools().await.expect("all pages");
    assert!(tools.iter().any(|t| t.name == "search_legacy"));
    s.churn().await;
    s.until("the churn's list_changed forwarded", |m| {
        m.v(
            "mcp_proxy_list_changed_forwarded_total",
            &c("careless-cache"),
        ) >= 1.0
    })
    .await;
    assert!(
        !call(&cached, "search_legacy", json!({"query": "q"})).await,
        "the upstream refuses it"
    );
    let tool = [
        ("proxy", "kb"),
        ("client", "careless-cache"),
        ("tool", "search_legacy"),
    ];
    let m = s
        .until("a stale-tool call on search_legacy", |m| {
            m.v("mcp_proxy_stale_tool_calls_total", &tool) == 1.0
        })
        .await;
    let after = |a| [("proxy", "kb"), ("client", "careless-cache"), ("after", a)];
    assert_eq!(
        m.v(
            "mcp_proxy_sessions_without_relist_total",
            &after("list_changed")
        ),
        1.0
    );

    // The schema of search_v2 changes at the next redeploy: arguments for the old one.
    s.churn().await;
    // (The lab may accept or refuse it; the proxy judges the arguments against both schemas.)
    let _ = call(&cached, "search_v2", json!({"query": "q", "revision": 1})).await;
    s.until("a stale-schema call on search_v2", |m| {
        m.v(
            "mcp_proxy_stale_schema_calls_total",
            &[
                ("proxy", "kb"),
                ("client", "careless-cache"),
                ("tool", "search_v2"),
            ],
        ) == 1.0
    })
    .await;

    // A new session that calls without listing (a list cached from an earlier session).
    let reconnect = s.client("careless-reconnect").await;
    assert!(call(&reconnect, "kb_stats", json!({})).await);
    let m = s
        .until("a reconnect without re-list", |m| {
            m.v(
                "mcp_proxy_sessions_without_relist_total",
                &[
                    ("proxy", "kb"),
                    ("client", "careless-reconnect"),
                    ("after", "reconnect"),
                ],
            ) == 1.0
        })
        .await;
    // Each careless use is attributed to its own client only.
    assert_eq!(
        m.v(
            "mcp_proxy_first_page_only_sessions_total",
            &c("careless-cache")
        ),
        0.0
    );
    assert_eq!(
        m.v(
            "mcp_proxy_first_page_only_sessions_total",
            &c("careless-reconnect")
        ),
        0.0
    );
    assert_eq!(
        m.get(
            "mcp_proxy_stale_tool_calls_total",
            &[
                ("proxy", "kb"),
                ("client", "careless-first-page"),
                ("tool", "search_legacy")
            ]
        ),
        None
    );
    let status = s.proxy.status();
    assert!(
        status
            .sessions
            .iter()
            .any(|r| r.client == "careless-first-page" && r.first_page_only)
    );
    assert!(
        status
            .sessions
            .iter()
            .any(|r| r.client == "careless-cache" && r.stale_tool_calls == 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relisting_client_teaches_the_catalog_a_swap_nobody_announced() {
    // A server that cannot announce (here: a gateway that drops list_changed), and a catalog
    // refresh far away: only the clients' own listings show the swap to the proxy.
    let unannounced = Behaviour {
        deliver_list_changed: false,
        ..Behaviour::default()
    };
    let s = ProxyLab::with(unannounced, |c| {
        c.catalog_refresh_interval = Duration::from_secs(3600);
    })
    .await;
    let stale = s.client("stale-cache").await;
    let cached = stale.list_all_tools().await.expect("all pages");
    assert!(cached.iter().any(|t| t.name == "search_legacy"));
    let relister = s.client("relister").await;
    relister.list_all_tools().await.expect("all pages");
    let walks = s.proxy.status().catalog_walks;
    s.lab.churn();
    // The correct client re-lists (its own reason: no notification reached anyone) and calls
    // only a tool listed before and after the swap.
    let fresh = relister.list_all_tools().await.expect("re-list");
    assert!(fresh.iter().any(|t| t.name == "search_v2"));
    assert!(!fresh.iter().any(|t| t.name == "search_legacy"));
    assert!(call(&relister, "kb_stats", json!({})).await);
    // Right after, the other client calls the tool it cached: judged against the re-walk.
    assert!(!call(&stale, "search_legacy", json!({"query": "q"})).await);
    let tool = |client| {
        [
            ("proxy", "kb"),
            ("client", client),
            ("tool", "search_legacy"),
        ]
    };
    let m = s
        .until("the stale call counted under its own label", |m| {
            m.v("mcp_proxy_stale_tool_calls_total", &tool("stale-cache")) == 1.0
        })
        .await;
    assert!(
        s.proxy.status().catalog_walks > walks,
        "the catalog re-walked"
    );
    assert_eq!(
        m.get("mcp_proxy_stale_tool_calls_total", &tool("relister")),
        None,
        "{}",
        m.text
    );
    assert_eq!(
        m.v("mcp_proxy_list_changed_forwarded_total", &c("relister")),
        0.0,
        "nothing was announced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstreams_unknown_tool_answers_are_counted_per_client_and_tool() {
    // kb_stats is listed but its backend is down: an isError result of another shape.
    let s = ProxyLab::with(
        Behaviour {
            broken_tools: vec!["kb_stats"],
            ..Behaviour::default()
        },
        |_| {},
    )
    .await;
    let caller = s.client("caller").await;
    let bystander = s.client("bystander").await;
    // (An isError result: whether the SDK calls it a failure does not matter here.)
    let _ = call(&caller, "kb_stats", json!({})).await;
    assert!(
        call(
            &bystander,
            "permission_check",
            json!({"user": "u", "document_id": "d"})
        )
        .await
    );
    // search_legacy was listed, then removed; the lab answers -32602 "Unknown tool: NAME".
    s.churn().await;
    assert!(!call(&caller, "search_legacy", json!({"query": "q"})).await);
    assert!(!call(&caller, "never_listed", json!({})).await);
    let answers = |client, tool| [("proxy", "kb"), ("client", client), ("tool", tool)];
    let m = s
        .until("the unknown-tool answers counted", |m| {
            m.v(
                "mcp_proxy_unknown_tool_answers_total",
                &answers("caller", "search_legacy"),
            ) == 1.0
                && m.v(
                    "mcp_proxy_unknown_tool_answers_total",
                    &answers("caller", "other"),
                ) == 1.0
        })
        .await;
    // The broken tool's answer came before them and is not an unknown-tool answer.
    assert_eq!(
        m.get(
            "mcp_proxy_unknown_tool_answers_total",
            &answers("caller", "kb_stats")
        ),
        None,
        "{}",
        m.text
    );
    assert!(
        !m.text
            .contains("mcp_proxy_unknown_tool_answers_total{proxy=\"kb\",client=\"bystander\""),
        "{}",
        m.text
    );
    let status = s.proxy.status();
    assert!(
        status
            .sessions
            .iter()
            .any(|r| r.client == "caller" && r.unknown_tool_answers == 2)
    );
}

/// An MCP server built with the official Rust SDK's tool router, as its users write one.
mod rmcp_kb {
    use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
    use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
    use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};

    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    pub struct Query {
        pub query: String,
    }

    #[derive(Debug, Clone)]
    pub struct Kb {
        tool_router: ToolRouter<Self>,
    }

    #[tool_router]
    impl Kb {
        pub fn new() -> Self {
            Kb {
                tool_router: Self::tool_router(),
            }
        }

        #[tool(description = "Search the knowledge base.")]
        fn search(&self, Parameters(Query { query }): Parameters<Query>) -> String {
            format!("found {query}")
        }

        #[tool(description = "A tool whose backend is down.")]
        fn reindex(&self) -> Result<CallToolResult, ErrorData> {
            Ok(CallToolResult::error(vec![ContentBlock::text(
                "backend unavailable",
            )]))
        }
    }

    #[tool_handler(router = self.tool_router)]
    impl ServerHandler for Kb {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_servers_tool_not_found_is_counted_and_its_tool_errors_are_not() {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let service = StreamableHttpService::new(
        || Ok(rmcp_kb::Kb::new()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_legacy_session_mode(true),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, axum::Router::new().nest_service("/mcp", service)).await;
    });
    let upstream = url::Url::parse(&format!("http://{addr}/mcp")).expect("url");
    let (proxy, telemetry) = bare_proxy(upstream, |_| {}).await;
    let start = tokio::time::Instant::now();
    while proxy.status().upstream_tools != Some(2) {
        assert!(
            start.elapsed() < DEADLINE,
            "the catalog walks the rmcp server"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let client = rmcp_client(&format!("http://{}/mcp", proxy.addr()), "rmcp-caller").await;
    assert!(call(&client, "search", json!({"query": "q"})).await);
    // An isError result of the tool's own: not "no such tool".
    let _ = call(&client, "reindex", json!({})).await;
    // rmcp's router: -32602 "tool not found"; a name never listed is the `other` tool label.
    assert!(!call(&client, "search_legacy", json!({"query": "q"})).await);
    let l = |tool| [("proxy", "kb"), ("client", "rmcp-caller"), ("tool", tool)];
    let start = tokio::time::Instant::now();
    let m = loop {
        let m = Scrape::parse(&telemetry.render());
        if m.v("mcp_proxy_unknown_tool_answers_total", &l("other")) == 1.0 {
            break m;
        }
        assert!(start.elapsed() < DEADLINE, "not counted:\n{}", m.text);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for tool in ["reindex", "search"] {
        assert_eq!(
            m.get("mcp_proxy_unknown_tool_answers_total", &l(tool)),
            None,
            "{}",
            m.text
        );
    }
    client.cancel().await.ok();
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flatten_pages_answers_one_page_with_every_tool() {
    let s = ProxyLab::new(|c| c.flatten_pages = vec!["flat".into()]).await;
    let flat = s.client("flat").await;
    let page = flat.list_tools(None).await.expect("one page");
    assert_eq!(page.tools.len(), 14);
    assert_eq!(page.next_cursor, None);
    let plain = s.client("plain").await;
    assert_eq!(
        plain
            .list_tools(None)
            .await
            .expect("first page")
            .tools
            .len(),
        8
    );
    let m = s.scrape();
    let l = [("proxy", "kb"), ("client", "flat"), ("result", "success")];
    assert_eq!(m.v("mcp_proxy_flattened_listings_total", &l), 1.0);
    assert_eq!(
        m.v("mcp_proxy_first_page_only_sessions_total", &c("flat")),
        0.0
    );
    assert_eq!(
        m.get(
            "mcp_proxy_flattened_listings_total",
            &[("proxy", "kb"), ("client", "plain"), ("result", "success")]
        ),
        None
    );
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_client_gets_clear_errors_and_others_keep_working() {
    let s = ProxyLab::new(|c| {
        c.max_sessions = 5;
        c.max_request_bytes = 64 * 1024;
    })
    .await;
    let url = s.url();
    let garbage = post_legacy(&url, None, "{not json").await;
    assert_eq!(garbage.status(), 400);
    let body: serde_json::Value = garbage.json().await.expect("a JSON-RPC error");
    assert_eq!(body["error"]["code"], -32700);
    let big = post_legacy(&url, None, vec![b' '; 1024 * 1024]).await;
    assert_eq!(big.status(), 413);
    let sessions: Vec<String> = {
        let mut out = Vec::new();
        for _ in 0..50 {
            let r = post_legacy(&url, None, INIT).await;
            assert_eq!(r.status(), 200);
            out.push(
                r.headers()["mcp-session-id"]
                    .to_str()
                    .expect("ASCII")
                    .to_string(),
            );
        }
        out
    };
    let forged = post_legacy(
        &url,
        Some("not-a-session-of-yours"),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(forged.status(), 404, "the upstream decides");
    let m = s.scrape();
    let r = |reason| {
        m.v(
            "mcp_proxy_rejected_requests_total",
            &[("proxy", "kb"), ("reason", reason)],
        )
    };
    assert_eq!(r("invalid_json"), 1.0);
    assert_eq!(r("body_too_large"), 1.0);
    assert_eq!(r("unknown_session"), 1.0);
    assert_eq!(m.v("mcp_proxy_sessions", &c("hostile")), 5.0);
    assert_eq!(
        m.v(
            "mcp_proxy_sessions_ended_total",
            &[("proxy", "kb"), ("reason", "evicted")]
        ),
        45.0
    );
    assert_eq!(s.proxy.status().sessions_tracked, 5);
    // The newest sessions are the tracked ones, and they still work upstream.
    let last = sessions.last().expect("50 sessions");
    let ok = post_legacy(
        &url,
        Some(last),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(ok.status(), 200);
    // A well-behaved client is unaffected.
    let client = s.client("bystander").await;
    assert_eq!(client.list_all_tools().await.expect("all pages").len(), 14);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_events_are_forwarded_one_by_one_while_the_stream_stays_open() {
    let s = ProxyLab::new(|_| {}).await;
    let url = s.url();
    let init = post_legacy(&url, None, INIT).await;
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .expect("ASCII")
        .to_string();
    let mut stream = reqwest::Client::new()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .expect("GET stream");
    assert_eq!(stream.status(), 200);
    s.lab.churn();
    // The lab never ends this stream: the event can only arrive if it is forwarded as it comes.
    let got = tokio::time::timeout(DEADLINE, async {
        let mut seen = Vec::new();
        while let Some(chunk) = stream.chunk().await.expect("stream readable") {
            seen.extend_from_slice(&chunk);
            if String::from_utf8_lossy(&seen).contains("notifications/tools/list_changed") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        got,
        Ok(true),
        "the list_changed event arrived on the open stream"
    );
    s.until("list_changed counted for the session's client", |m| {
        m.v("mcp_proxy_list_changed_forwarded_total", &c("hostile")) == 1.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_restarts_changed_proxies_and_removes_stopped_ones_with_their_series() {
    let lab = start_lab([(PROFILE, Behaviour::default())]).await;
    let telemetry = Telemetry::new();
    let proxies = mcp_exporter::proxy::Proxies::new();
    let port = common::free_port();
    let config = |name: &str, port: u16| {
        McpProxyConfig::new(
            name,
            format!("127.0.0.1:{port}").parse().expect("address"),
            lab.url(PROFILE),
        )
    };
    let a = config("a", port);
    let b = config("b", 0);
    assert!(
        proxies
            .apply(&[a.clone(), b.clone()], &telemetry)
            .await
            .is_empty()
    );
    let has = |name: &str| {
        telemetry
            .render()
            .contains(&format!("mcp_proxy_upstream_up{{proxy=\"{name}\"}}"))
    };
    assert!(has("a") && has("b"));
    let first = proxies.addr("a").await.expect("a runs");
    let mut changed = a.clone();
    changed.max_sessions = 7;
    assert!(
        proxies
            .apply(&[changed, b.clone()], &telemetry)
            .await
            .is_empty()
    );
    assert_eq!(
        proxies.addr("a").await,
        Some(first),
        "restarted on its port"
    );
    assert!(proxies.status().iter().any(|p| p.name == "a"));
    assert!(proxies.apply(&[b], &telemetry).await.is_empty());
    assert!(!has("a"), "a removed proxy's series disappear");
    assert!(has("b"));
    assert!(proxies.addr("a").await.is_none());
    assert!(
        tokio::net::TcpStream::connect(first).await.is_err(),
        "a removed proxy stops listening"
    );
    // A taken port is an error that names the proxy; the others still apply.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("address").port();
    let errors = proxies.apply(&[config("c", port)], &telemetry).await;
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("proxy c"), "{errors:?}");
    proxies.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_clients_are_tracked_by_their_reported_name() {
    use mcp_client::mcp::{Client, Inbox, ProtocolVersion};
    let s = ProxyLab::new(|_| {}).await;
    let url = url::Url::parse(&s.url()).expect("URL");
    let net = mcp_client::target_http::TargetHttp::plain();
    let endpoint = mcp_exporter::config::Endpoint::http(url);
    let dialer = mcp_exporter::probe::connection::dialer(&endpoint, &[], &net).expect("dialer");
    let (inbox, _requests) = Inbox::new();
    let observe = |_: &'static str, _, _| {};
    let modern = ProtocolVersion::parse("2026-07-28").expect("modern version");
    let client = Client::connect(&dialer, Some(modern), Arc::new(inbox), DEADLINE, &observe)
        .await
        .expect("a modern session through the proxy");
    assert_eq!(client.era(), mcp_client::mcp::Era::Modern);
    // One page, then a call: the stateless client is one identity, by its clientInfo name.
    let page = client
        .request("tools/list", None)
        .await
        .expect("first page");
    assert!(page.get("nextCursor").is_some());
    client
        .request(
            "tools/call",
            Some(json!({"name": "kb_stats", "arguments": {}})),
        )
        .await
        .expect("a call");
    let m = s
        .until("first-page-only for the modern client", |m| {
            m.v(
                "mcp_proxy_first_page_only_sessions_total",
                &c("mcp_exporter"),
            ) == 1.0
        })
        .await;
    let l = [
        ("proxy", "kb"),
        ("client", "mcp_exporter"),
        ("method", "tools/list"),
    ];
    assert_eq!(m.v("mcp_proxy_requests_total", &l), 1.0);
}

fn rejected(telemetry: &Telemetry, reason: &str) -> f64 {
    Scrape::parse(&telemetry.render()).v(
        "mcp_proxy_rejected_requests_total",
        &[("proxy", "kb"), ("reason", reason)],
    )
}

/// An upstream on a raw socket: reads each request head (at most 64 KiB), then writes `answer`
/// (if any) and keeps the connection open until the test ends. Returns its `/mcp` URL and the
/// number of request heads it has read.
async fn raw_upstream(answer: Option<Vec<u8>>) -> (url::Url, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let heads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let answer = answer.clone();
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if let Some(a) = answer {
                    let _ = conn.write_all(&a).await;
                }
                // Held until the peer goes away.
                let _ = conn.read(&mut buf).await;
                std::future::pending::<()>().await;
            });
        }
    });
    (
        url::Url::parse(&format!("http://{addr}/mcp")).expect("url"),
        heads,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_mcp_path_is_forwarded_other_paths_are_404_and_counted() {
    let lab = start_lab([("ok", Behaviour::default()), ("gb", Behaviour::default())]).await;
    let (proxy, telemetry) = bare_proxy(lab.url("ok"), |_| {}).await;
    let base = format!("http://{}", proxy.addr());
    let ok = post_legacy(&format!("{base}/ok/mcp"), None, INIT).await;
    assert_eq!(ok.status(), 200, "the MCP path is forwarded");
    let mut refused = 0.0;
    for path in [
        "/gb/mcp",
        "/ok/../gb/mcp",
        "/stats",
        "/",
        "/ok/mcp/extra",
        "/.well-known/oauth-protected-resource/ok/mcp",
    ] {
        let r = post_legacy(&format!("{base}{path}"), None, INIT).await;
        assert_eq!(r.status(), 404, "{path} is not the proxy's to serve");
        let body = r.text().await.expect("body");
        assert!(body.contains("only its MCP endpoint"), "{body}");
        refused += 1.0;
        let get = reqwest::get(format!("{base}{path}")).await.expect("answer");
        assert_eq!(get.status(), 404, "GET {path}");
        refused += 1.0;
    }
    assert_eq!(rejected(&telemetry, "unknown_path"), refused);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_metadata_is_forwarded_only_when_configured() {
    let body = b"{\"resource\":\"r\"}";
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(body);
    let (upstream, heads) = raw_upstream(Some(answer)).await;
    let (proxy, telemetry) = bare_proxy(upstream, |c| c.forward_oauth_metadata = true).await;
    let url = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        proxy.addr()
    );
    let before = heads.load(std::sync::atomic::Ordering::SeqCst);
    let r = reqwest::get(&url).await.expect("answer");
    assert_eq!(r.status(), 200);
    assert!(heads.load(std::sync::atomic::Ordering::SeqCst) > before);
    assert_eq!(rejected(&telemetry, "unknown_path"), 0.0);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sse_message_path_named_by_the_endpoint_event_is_forwarded() {
    let peer = sse_peer::SsePeer::start(sse_peer::Options::default()).await;
    let (proxy, telemetry) = bare_proxy(peer.url.clone(), |_| {}).await;
    let base = format!("http://{}", proxy.addr());
    let early = post_legacy(&format!("{base}/messages/?session_id=x"), None, INIT).await;
    assert_eq!(early.status(), 404, "no endpoint event named it yet");
    let (_stream, endpoint) = sse_stream(&base).await;
    let sent = post_legacy(&format!("{base}{endpoint}"), None, INIT).await;
    assert_eq!(sent.status(), 202, "the message path is forwarded");
    assert_eq!(rejected(&telemetry, "unknown_path"), 1.0);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_upstream_answer_is_a_502_that_says_so() {
    let mut answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n".to_vec();
    for i in 0..120 {
        answer.extend_from_slice(format!("x-extra-{i}: {i}\r\n").as_bytes());
    }
    answer.extend_from_slice(b"content-length: 2\r\n\r\n{}");
    let (upstream, _) = raw_upstream(Some(answer)).await;
    let (proxy, telemetry) = bare_proxy(upstream, |_| {}).await;
    let r = post_legacy(&format!("http://{}/mcp", proxy.addr()), None, INIT).await;
    assert_eq!(r.status(), 502);
    let body: serde_json::Value = r.json().await.expect("a JSON-RPC error");
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(
        message.contains("could not be read") && message.contains("too many"),
        "{message}"
    );
    assert_eq!(rejected(&telemetry, "upstream_invalid_response"), 1.0);
    assert_eq!(rejected(&telemetry, "upstream_unavailable"), 0.0);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_upstream_request_ends_at_upstream_timeout_with_504() {
    let (upstream, _) = raw_upstream(None).await;
    let (proxy, telemetry) = bare_proxy(upstream, |c| {
        c.upstream_timeout = Duration::from_millis(300);
    })
    .await;
    let r = tokio::time::timeout(
        DEADLINE,
        post_legacy(&format!("http://{}/mcp", proxy.addr()), None, INIT),
    )
    .await
    .expect("the proxy answers a held request");
    assert_eq!(r.status(), 504);
    let body: serde_json::Value = r.json().await.expect("a JSON-RPC error");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("upstream_timeout")),
        "{body}"
    );
    assert!(rejected(&telemetry, "upstream_timeout") >= 1.0);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_body_that_never_ends_is_cut_at_upstream_timeout() {
    let answer =
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"jsonrpc\":"
            .to_vec();
    let (upstream, _) = raw_upstream(Some(answer)).await;
    let (proxy, _telemetry) = bare_proxy(upstream, |c| {
        c.upstream_timeout = Duration::from_millis(300);
    })
    .await;
    let r = post_legacy(&format!("http://{}/mcp", proxy.addr()), None, INIT).await;
    assert_eq!(r.status(), 200, "the head came in time");
    let body = tokio::time::timeout(DEADLINE, r.bytes())
        .await
        .expect("the body ends (cut) rather than hangs");
    assert!(body.is_err(), "a cut body is not a complete answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_stream_ends_after_stream_idle_timeout() {
    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\n: hi\n\n\r\n".to_vec();
    let (upstream, _) = raw_upstream(Some(answer)).await;
    let (proxy, _telemetry) = bare_proxy(upstream, |c| {
        c.stream_idle_timeout = Duration::from_millis(300);
    })
    .await;
    let mut r = reqwest::Client::new()
        .get(format!("http://{}/mcp", proxy.addr()))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET stream");
    assert_eq!(r.status(), 200);
    let ended = tokio::time::timeout(DEADLINE, async {
        let mut seen = Vec::new();
        while let Ok(Some(chunk)) = r.chunk().await {
            seen.extend_from_slice(&chunk);
        }
        seen
    })
    .await
    .expect("the quiet stream ends rather than hangs");
    assert_eq!(ended, b": hi\n\n");
}
