//! The lab speaks the 2026-07-28 modern era on the same URL as its legacy sessions: raw HTTP
//! against a lab started in-process, one rule of the published spec per test (validation and its
//! error table, `server/discover`, pages with `ttlMs`/`cacheScope`, `subscriptions/listen`), and
//! the era knob (dual, modern only, legacy only).

mod common;

use std::net::SocketAddr;

use common::DEADLINE;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use mcp_lab::{Behaviour, CacheScope, Era, Lab};
use reqwest::StatusCode;
use serde_json::{Value, json};

const V: &str = "2026-07-28";
const SUB: &str = "io.modelcontextprotocol/subscriptionId";

async fn lab(profiles: Vec<(&str, Behaviour)>) -> Lab {
    Lab::start(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        profiles
            .into_iter()
            .map(|(n, b)| (n.to_string(), b))
            .collect(),
    )
    .await
    .expect("lab starts")
}

fn meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "lab-modern-test", "version": "0"},
    })
}

/// A modern request body: `params` plus the required `_meta`.
fn body(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta(V);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The headers a conforming client sends with `body`.
fn headers_for(body: &Value) -> Vec<(&'static str, String)> {
    let method = body["method"].as_str().unwrap().to_string();
    let mut h = vec![
        ("MCP-Protocol-Version", V.to_string()),
        ("Mcp-Method", method.clone()),
    ];
    let named = match method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(field) = named {
        h.push(("Mcp-Name", body["params"][field].as_str().unwrap().into()));
    }
    h
}

async fn post_with(
    client: &reqwest::Client,
    url: &url::Url,
    body: &Value,
    headers: &[(&str, String)],
) -> reqwest::Response {
    let mut req = client
        .post(url.clone())
        .header("Accept", "application/json, text/event-stream")
        .json(body);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    tokio::time::timeout(DEADLINE, req.send())
        .await
        .expect("answer within the deadline")
        .expect("request sent")
}

/// POST with the given headers; status and JSON body.
async fn raw(url: &url::Url, body: &Value, headers: &[(&str, String)]) -> (StatusCode, Value) {
    let resp = post_with(&reqwest::Client::new(), url, body, headers).await;
    let status = resp.status();
    let text = resp.text().await.expect("body");
    let json = serde_json::from_str(&text).unwrap_or_else(|_| json!({"not_json": text}));
    (status, json)
}

/// POST a conforming modern request.
async fn call(url: &url::Url, body: &Value) -> (StatusCode, Value) {
    raw(url, body, &headers_for(body)).await
}

fn error_code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or_else(|| panic!("{v}"))
}

fn names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn discover_names_both_eras_capabilities_and_cache_fields() {
    let no_lc = Behaviour {
        list_changed_capability: false,
        ..Behaviour::default()
    };
    let lab = lab(vec![("kb", Behaviour::default()), ("quiet", no_lc)]).await;
    let (status, v) = call(
        &lab.url("kb"),
        &body(json!("d-1"), "server/discover", json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["id"], "d-1");
    let r = &v["result"];
    assert_eq!(
        r["supportedVersions"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
    assert_eq!(r["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "kb-lab"
    );
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["ttlMs"], 60_000);
    assert_eq!(r["cacheScope"], "public");
    let (_, v) = call(
        &lab.url("quiet"),
        &body(json!(1), "server/discover", json!({})),
    )
    .await;
    assert_eq!(v["result"]["capabilities"]["tools"], json!({}), "{v}");
    assert_eq!(lab.modern_requests("kb"), 1);
}

#[tokio::test]
async fn tools_list_walks_two_pages_with_the_profile_ttl_and_scope() {
    let b = Behaviour {
        ttl_ms: 1234,
        cache_scope: CacheScope::Private,
        ..Behaviour::default()
    };
    let lab = lab(vec![("kb", b)]).await;
    let url = lab.url("kb");
    let (status, p1) = call(&url, &body(json!(1), "tools/list", json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{p1}");
    let p1 = &p1["result"];
    let cursor = p1["nextCursor"].clone();
    assert!(cursor.is_string(), "{p1}");
    let (_, p2) = call(
        &url,
        &body(json!(2), "tools/list", json!({"cursor": cursor})),
    )
    .await;
    let p2 = &p2["result"];
    assert_eq!(names(p1).len() + names(p2).len(), 14);
    assert!(p2.get("nextCursor").is_none(), "{p2}");
    for page in [p1, p2] {
        assert_eq!(page["ttlMs"], 1234);
        assert_eq!(page["cacheScope"], "private");
        assert_eq!(page["resultType"], "complete");
        assert_eq!(
            page["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "kb-lab"
        );
    }
    // A cursor the lab never issued is invalid params, as HTTP 400.
    let (status, v) = call(&url, &body(json!(3), "tools/list", json!({"cursor": "x"}))).await;
    assert_eq!((status, error_code(&v)), (StatusCode::BAD_REQUEST, -32602));
}

#[tokio::test]
async fn an_empty_string_cursor_is_a_cursor_in_the_modern_era() {
    let b = Behaviour {
        empty_cursor: true,
        ..Behaviour::default()
    };
    let lab = lab(vec![("kb", b)]).await;
    let url = lab.url("kb");
    let (_, p1) = call(&url, &body(json!(1), "tools/list", json!({}))).await;
    assert_eq!(p1["result"]["nextCursor"], "", "{p1}");
    let (status, p2) = call(&url, &body(json!(2), "tools/list", json!({"cursor": ""}))).await;
    assert_eq!(status, StatusCode::OK, "{p2}");
    assert_eq!(names(&p1["result"]).len() + names(&p2["result"]).len(), 14);
}

#[tokio::test]
async fn headers_must_match_the_body_and_meta_must_be_complete() {
    let lab = lab(vec![("kb", Behaviour::default())]).await;
    let url = lab.url("kb");
    let list = body(json!(1), "tools/list", json!({}));
    let good = headers_for(&list);
    let without = |name: &str| -> Vec<(&'static str, String)> {
        good.iter().filter(|(k, _)| *k != name).cloned().collect()
    };
    let with = |name: &'static str, value: &str| -> Vec<(&'static str, String)> {
        let mut h = without(name);
        h.push((name, value.to_string()));
        h
    };
    let expect = |(status, v): (StatusCode, Value), code: StatusCode, rpc: i64| {
        assert_eq!((status, error_code(&v)), (code, rpc), "{v}");
        assert_eq!(v["id"], 1, "{v}");
    };
    let bad = StatusCode::BAD_REQUEST;
    // The version header differs from _meta, or is missing.
    expect(
        raw(&url, &list, &with("MCP-Protocol-Version", "2025-11-25")).await,
        bad,
        -32020,
    );
    expect(
        raw(&url, &list, &without("MCP-Protocol-Version")).await,
        bad,
        -32020,
    );
    // Mcp-Method missing or naming another method.
    expect(raw(&url, &list, &without("Mcp-Method")).await, bad, -32020);
    expect(
        raw(&url, &list, &with("Mcp-Method", "tools/call")).await,
        bad,
        -32020,
    );
    // Required _meta fields missing.
    let mut no_version = list.clone();
    no_version["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/protocolVersion");
    expect(raw(&url, &no_version, &good).await, bad, -32602);
    let mut no_caps = list.clone();
    no_caps["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    expect(raw(&url, &no_caps, &good).await, bad, -32602);
    // tools/call needs Mcp-Name equal to params.name (after the base64 sentinel is decoded).
    let stats = body(
        json!(1),
        "tools/call",
        json!({"name": "kb_stats", "arguments": {}}),
    );
    let call_headers = headers_for(&stats);
    let mut no_name = call_headers.clone();
    no_name.retain(|(k, _)| *k != "Mcp-Name");
    expect(raw(&url, &stats, &no_name).await, bad, -32020);
    let mut other = no_name.clone();
    other.push(("Mcp-Name", "ticket_get".into()));
    expect(raw(&url, &stats, &other).await, bad, -32020);
    let mut encoded = no_name.clone();
    encoded.push(("Mcp-Name", "=?base64?a2Jfc3RhdHM=?=".into()));
    let (status, v) = raw(&url, &stats, &encoded).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["structuredContent"]["status"], "ok", "{v}");
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    // An unknown tool is invalid params, as HTTP 400.
    let gone = body(
        json!(1),
        "tools/call",
        json!({"name": "nope", "arguments": {}}),
    );
    expect(call(&url, &gone).await, bad, -32602);
}

#[tokio::test]
async fn an_unsupported_version_names_what_is_served() {
    let lab = lab(vec![("kb", Behaviour::default())]).await;
    let mut req = body(json!(7), "tools/list", json!({}));
    req["params"]["_meta"] = meta("1900-01-01");
    let headers = [
        ("MCP-Protocol-Version", "1900-01-01".to_string()),
        ("Mcp-Method", "tools/list".to_string()),
    ];
    let (status, v) = raw(&lab.url("kb"), &req, &headers).await;
    assert_eq!(
        (status, error_code(&v)),
        (StatusCode::BAD_REQUEST, -32022),
        "{v}"
    );
    assert_eq!(v["id"], 7);
    let data = &v["error"]["data"];
    assert_eq!(data["requested"], "1900-01-01");
    assert_eq!(
        data["supported"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
}

#[tokio::test]
async fn ping_is_gone_and_there_is_no_get_or_delete_without_a_session() {
    let lab = lab(vec![("kb", Behaviour::default())]).await;
    let url = lab.url("kb");
    let (status, v) = call(&url, &body(json!("p"), "ping", json!({}))).await;
    assert_eq!(
        (status, error_code(&v)),
        (StatusCode::NOT_FOUND, -32601),
        "{v}"
    );
    let client = reqwest::Client::new();
    let get = client
        .get(url.clone())
        .header("Accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    let delete = client.delete(url.clone()).send().await.unwrap();
    assert_eq!(delete.status(), StatusCode::METHOD_NOT_ALLOWED);
}

/// An open `subscriptions/listen` stream: its JSON-RPC messages one by one, each within the
/// deadline.
struct Listen {
    events: std::pin::Pin<Box<dyn futures_util::Stream<Item = Option<Value>> + Send>>,
}

impl Listen {
    async fn open(url: &url::Url, id: Value, filter: Value) -> Listen {
        let req = body(id, "subscriptions/listen", json!({"notifications": filter}));
        let resp = post_with(&reqwest::Client::new(), url, &req, &headers_for(&req)).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        assert_eq!(resp.headers()["x-accel-buffering"], "no");
        let events = resp.bytes_stream().eventsource().map(|e| {
            e.ok()
                .map(|e| serde_json::from_str(&e.data).expect("JSON data"))
        });
        Listen {
            events: Box::pin(events),
        }
    }

    /// The next message, or `None` when the stream ended.
    async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(DEADLINE, self.events.next())
            .await
            .expect("a message or the end within the deadline")
            .map(|m| m.expect("a well-formed event"))
    }
}

#[tokio::test]
async fn listen_acknowledges_announces_changes_and_closes_gracefully() {
    let lab = lab(vec![("kb", Behaviour::default())]).await;
    let mut listen = Listen::open(
        &lab.url("kb"),
        json!("listen-1"),
        json!({"toolsListChanged": true, "promptsListChanged": true}),
    )
    .await;
    let ack = listen.next().await.expect("acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "promptsListChanged": true})
    );
    assert_eq!(ack["params"]["_meta"][SUB], "listen-1");
    lab.churn();
    // One notification per list asked for, the tools first; none for the resources, not asked.
    for method in [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
    ] {
        let changed = listen.next().await.expect("list_changed");
        assert_eq!(changed["method"], method, "{changed}");
        assert_eq!(changed["params"]["_meta"][SUB], "listen-1");
    }
    // The server ends the subscription: the listen request's result, then the end.
    lab.expire_sessions("kb");
    let done = listen.next().await.expect("the listen result");
    assert_eq!(done["id"], "listen-1");
    assert_eq!(done["result"]["resultType"], "complete");
    assert_eq!(done["result"]["_meta"][SUB], "listen-1");
    assert_eq!(listen.next().await, None);
}

/// Changes, then the graceful end: what a listen stream carries in between.
async fn after_a_change(lab: &Lab, profile: &str, listen: &mut Listen) -> Vec<Value> {
    lab.churn();
    lab.expire_sessions(profile);
    let mut seen = Vec::new();
    for _ in 0..16 {
        match listen.next().await {
            Some(m) if m.get("result").is_some() => return seen,
            Some(m) => seen.push(m),
            None => panic!("stream ended without its result after {seen:?}"),
        }
    }
    panic!("no result after {seen:?}")
}

#[tokio::test]
async fn silent_and_lossy_servers_acknowledge_what_they_honour() {
    let quiet = Behaviour {
        list_changed_capability: false,
        ..Behaviour::default()
    };
    let lossy = Behaviour {
        deliver_list_changed: false,
        ..Behaviour::default()
    };
    let lab = lab(vec![("quiet", quiet), ("lossy", lossy)]).await;
    let filter = json!({"toolsListChanged": true});
    // No listChanged (F2): the filter is acknowledged without toolsListChanged.
    let mut listen = Listen::open(&lab.url("quiet"), json!(5), filter.clone()).await;
    let ack = listen.next().await.unwrap();
    assert_eq!(ack["params"]["notifications"], json!({}), "{ack}");
    assert_eq!(ack["params"]["_meta"][SUB], 5);
    assert_eq!(
        after_a_change(&lab, "quiet", &mut listen).await,
        Vec::<Value>::new()
    );
    // A lossy gateway (F1): honoured, but the notification never arrives.
    let mut listen = Listen::open(&lab.url("lossy"), json!(6), filter).await;
    let ack = listen.next().await.unwrap();
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(
        after_a_change(&lab, "lossy", &mut listen).await,
        Vec::<Value>::new()
    );
}

#[tokio::test]
async fn stream_faults_apply_to_the_listen_stream() {
    let cut = Behaviour {
        stream_close_after: Some(std::time::Duration::from_millis(200)),
        change_in_stream_gap: true,
        ..Behaviour::default()
    };
    let no_stream = Behaviour {
        get_stream: false,
        ..Behaviour::default()
    };
    let lab = lab(vec![("cut", cut), ("none", no_stream)]).await;
    // F4: a proxy cuts the stream (no result: an unexpected disconnect); the list changed in the
    // gap.
    let before = lab.generation();
    let mut listen =
        Listen::open(&lab.url("cut"), json!(1), json!({"toolsListChanged": true})).await;
    assert!(listen.next().await.is_some(), "acknowledgement");
    assert_eq!(listen.next().await, None);
    assert_eq!(lab.generation(), before + 1);
    // F3: listChanged declared, but no notification channel: the method is not implemented.
    let req = body(
        json!(2),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let (status, v) = call(&lab.url("none"), &req).await;
    assert_eq!(
        (status, error_code(&v)),
        (StatusCode::NOT_FOUND, -32601),
        "{v}"
    );
    let (_, d) = call(
        &lab.url("none"),
        &body(json!(3), "server/discover", json!({})),
    )
    .await;
    assert_eq!(d["result"]["capabilities"]["tools"]["listChanged"], true);
}

#[tokio::test]
async fn spurious_notifications_and_failing_relists_apply_to_the_modern_era() {
    let spurious = Behaviour {
        spurious_list_changed: Some(std::time::Duration::from_millis(50)),
        ..Behaviour::default()
    };
    let flaky = Behaviour {
        failing_lists_after_change: 1,
        ..Behaviour::default()
    };
    let lab = lab(vec![("noisy", spurious), ("flaky", flaky)]).await;
    // F14: list_changed on the listen stream although nothing was redeployed.
    let mut listen = Listen::open(
        &lab.url("noisy"),
        json!(1),
        json!({"toolsListChanged": true}),
    )
    .await;
    assert!(listen.next().await.is_some(), "acknowledgement");
    let changed = listen.next().await.expect("a spurious list_changed");
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(changed["params"]["_meta"][SUB], 1);
    assert_eq!(lab.generation(), 0);
    // F5: the first tools/list after a redeploy fails with 503, the next one is answered.
    lab.churn();
    let list = body(json!(2), "tools/list", json!({}));
    let (status, _) = call(&lab.url("flaky"), &list).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (status, v) = call(&lab.url("flaky"), &list).await;
    assert_eq!(status, StatusCode::OK, "{v}");
}

#[tokio::test]
async fn divergent_instances_pin_tcp_connections_in_the_modern_era() {
    let b = Behaviour {
        instances: mcp_lab::Instances::PinnedDivergent,
        ..Behaviour::default()
    };
    let lab = lab(vec![("split", b)]).await;
    let url = lab.url("split");
    let req = body(json!(1), "tools/list", json!({}));
    let mut lists = Vec::new();
    for _ in 0..2 {
        // A client of its own: its own TCP connection.
        let client = reqwest::Client::new();
        let mut first = None;
        for _ in 0..2 {
            let resp = post_with(&client, &url, &req, &headers_for(&req)).await;
            let v: Value = resp.json().await.unwrap();
            let tools = v["result"]["tools"].clone();
            assert!(
                first.get_or_insert(tools.clone()) == &tools,
                "a connection stays on its instance"
            );
        }
        lists.push(first.unwrap());
    }
    assert_ne!(
        lists[0], lists[1],
        "the two connections land on different instances"
    );
}

#[tokio::test]
async fn a_modern_only_endpoint_refuses_initialize_and_names_its_version() {
    let b = Behaviour {
        era: Era::Modern,
        ..Behaviour::default()
    };
    let lab = lab(vec![("m", b)]).await;
    let url = lab.url("m");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "0"}}});
    let (status, v) = raw(&url, &init, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["id"], 0);
    assert_eq!(error_code(&v), -32022);
    assert_eq!(v["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(v["error"]["data"]["requested"], "2025-11-25");
    assert_eq!(lab.initializes("m"), 0);
    // A legacy request: its header names a version the endpoint does not serve.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let headers = [
        ("MCP-Protocol-Version", "2025-11-25".to_string()),
        ("Mcp-Session-Id", "lab-anything".to_string()),
    ];
    let (status, v) = raw(&url, &list, &headers).await;
    assert_eq!(
        (status, error_code(&v)),
        (StatusCode::BAD_REQUEST, -32022),
        "{v}"
    );
    assert_eq!(v["error"]["data"]["requested"], "2025-11-25");
    let (_, d) = call(&url, &body(json!(1), "server/discover", json!({}))).await;
    assert_eq!(
        d["result"]["supportedVersions"],
        json!(["2026-07-28"]),
        "{d}"
    );
    let get = reqwest::Client::new()
        .get(url.clone())
        .header("Mcp-Session-Id", "lab-anything")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_legacy_only_endpoint_answers_a_modern_request_as_python_1x_does() {
    let b = Behaviour {
        era: Era::Legacy,
        ..Behaviour::default()
    };
    let lab = lab(vec![("l", b)]).await;
    let url = lab.url("l");
    let (status, v) = call(&url, &body(json!(1), "server/discover", json!({}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_code(&v), -32600, "{v}");
    assert_eq!(v["id"], "server-error");
    assert_eq!(lab.modern_requests("l"), 1);
    // Its legacy path is untouched.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "0"}}});
    let (status, v) = raw(&url, &init, &[]).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn a_dual_era_endpoint_still_opens_legacy_sessions() {
    let lab = lab(vec![("kb", Behaviour::default())]).await;
    let url = lab.url("kb");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "0"}}});
    let resp = post_with(&reqwest::Client::new(), &url, &init, &[]).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let session = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["result"]["protocolVersion"], "2025-06-18");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let headers = [
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-06-18".to_string()),
    ];
    let (status, v) = raw(&url, &list, &headers).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert!(
        v["result"].get("ttlMs").is_none(),
        "legacy results carry no cache fields"
    );
    assert_eq!(names(&v["result"]).len(), 8);
    assert_eq!(lab.modern_requests("kb"), 0);
}

#[tokio::test]
async fn prompts_and_resources_are_listed_cached_and_retired_like_tools() {
    let lab = lab(vec![("kb", Behaviour::default())]).await;
    let url = lab.url("kb");
    let (_, v) = call(&url, &body(json!(1), "server/discover", json!({}))).await;
    for cap in ["tools", "prompts", "resources"] {
        assert_eq!(v["result"]["capabilities"][cap]["listChanged"], true, "{v}");
    }
    // Every listing is a complete, cacheable result, paged alike.
    let (status, p1) = call(&url, &body(json!(2), "resources/list", json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{p1}");
    let p1 = &p1["result"];
    assert_eq!(p1["resources"].as_array().unwrap().len(), 8, "{p1}");
    assert_eq!(
        (p1["ttlMs"].clone(), p1["resultType"].clone()),
        (json!(60_000), json!("complete"))
    );
    let (_, p2) = call(
        &url,
        &body(
            json!(3),
            "resources/list",
            json!({"cursor": p1["nextCursor"]}),
        ),
    )
    .await;
    assert_eq!(
        p2["result"]["resources"].as_array().unwrap().len(),
        4,
        "{p2}"
    );
    let (_, t) = call(&url, &body(json!(4), "resources/templates/list", json!({}))).await;
    assert_eq!(
        t["result"]["resourceTemplates"].as_array().unwrap().len(),
        3,
        "{t}"
    );
    assert_eq!(t["result"]["cacheScope"], "public", "{t}");
    let (_, p) = call(&url, &body(json!(5), "prompts/list", json!({}))).await;
    assert_eq!(p["result"]["prompts"][0]["name"], "summarize_legacy", "{p}");

    // A listen stream that asks for every list hears a change of each, once per method.
    let filter =
        json!({"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true});
    let mut listen = Listen::open(&url, json!("all"), filter.clone()).await;
    let ack = listen.next().await.unwrap();
    assert_eq!(ack["params"]["notifications"], filter);
    let methods: Vec<Value> = after_a_change(&lab, "kb", &mut listen)
        .await
        .iter()
        .map(|m| m["method"].clone())
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed"
        ]
    );

    // Retired by the redeploy: unknown prompt, and resource not found, both -32602 in this era.
    let (status, v) = call(
        &url,
        &body(json!(6), "prompts/get", json!({"name": "summarize_legacy"})),
    )
    .await;
    assert_eq!((status, error_code(&v)), (StatusCode::BAD_REQUEST, -32602));
    let (status, v) = call(
        &url,
        &body(
            json!(7),
            "resources/read",
            json!({"uri": "kb://collections/legacy-index"}),
        ),
    )
    .await;
    assert_eq!((status, error_code(&v)), (StatusCode::BAD_REQUEST, -32602));
    let (status, v) = call(
        &url,
        &body(
            json!(8),
            "resources/read",
            json!({"uri": "kb://docs/faq.md"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["contents"][0]["mimeType"], "text/markdown");
    assert_eq!(v["result"]["ttlMs"], 60_000, "a read result is cacheable");
    // Mcp-Name must mirror the resource's URI.
    let read = body(
        json!(9),
        "resources/read",
        json!({"uri": "kb://docs/faq.md"}),
    );
    let mut wrong = headers_for(&read);
    wrong.retain(|(k, _)| *k != "Mcp-Name");
    wrong.push(("Mcp-Name", "kb://docs/other.md".into()));
    let (status, _) = raw(&url, &read, &wrong).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
