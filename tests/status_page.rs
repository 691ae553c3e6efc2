//! The status page and `/status.json` through the binary: after a redeploy behind a lossy
//! gateway they name the stale tool, carry the notify → list → replace timeline of the healthy
//! target and the unannounced change of the lossy one, and never show a secret. With the demo's
//! seven gateways they list the worst targets first, each with up/ready, its cause in words and a
//! sticky "since", the same in both. A hostile server's 1 MiB tool names and control and bidi
//! characters reach neither raw, and neither grows past its byte cap.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{DEADLINE, Exporter, get, start_lab};
use mcp_client::text::is_hostile;
use mcp_exporter::demo;
use mcp_exporter::probe::status::MAX_RESPONSE_BYTES;
use mcp_lab::{Behaviour, Lab};
use serde_json::{Value, json};

const SENTINEL: &str = "status-s3cr3t-sentinel";

fn config(lab: &Lab) -> String {
    let mut y = String::from(
        "global:\n  audit_interval: 500ms\n  ping_interval: 500ms\n  request_timeout: 400ms\n  notification_grace: 300ms\ntargets:\n",
    );
    for name in ["healthy", "lossy"] {
        let mut url = lab.url(name);
        url.set_query(Some(&format!("token={SENTINEL}")));
        let _ = url.set_password(Some(SENTINEL));
        let _ = url.set_username("probe");
        y.push_str(&format!(
            "  - name: {name}\n    url: {url}\n    headers:\n      Authorization: \"Bearer ${{STATUS_TEST_TOKEN}}\"\n    probes:\n      - tool: search_legacy\n        interval: 300ms\n        timeout: 200ms\n"
        ));
    }
    y
}

fn target<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["targets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .unwrap_or(&Value::Null)
}

fn kinds(t: &Value) -> Vec<String> {
    t["connections"][0]["events"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|e| e["kind"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_the_stale_tool_and_tells_the_story() {
    let lab = start_lab([
        ("healthy", Behaviour::default()),
        (
            "lossy",
            Behaviour {
                deliver_list_changed: false,
                ..Behaviour::default()
            },
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(&path, config(&lab)).unwrap();
    let e = Exporter::spawn(
        &[format!("--config.file={}", path.display())],
        &[("STATUS_TEST_TOKEN", SENTINEL)],
    );
    let json_url = format!("{}/status.json", e.base);

    // Both caches hold the first deploy, and the probes pass.
    let start = tokio::time::Instant::now();
    loop {
        let s: Value = match get(&json_url).await {
            Some(body) => serde_json::from_str(&body).expect("status.json is JSON"),
            None => Value::Null,
        };
        let ready = ["healthy", "lossy"].iter().all(|n| {
            let t = target(&s, n);
            t["connections"][0]["cache"]["tools"] == 14 && t["probes"][0]["success"] == true
        });
        if ready {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "never ready: {s}\n{}", e.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    lab.churn();
    let s = loop {
        let body = get(&json_url).await.unwrap_or_default();
        let s: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let lossy = target(&s, "lossy");
        let healthy = target(&s, "healthy");
        let stale = lossy["connections"][0]["drift"]["extra"]
            .as_array()
            .is_some_and(|x| x.iter().any(|n| n == "search_legacy"));
        let told = kinds(lossy).contains(&"unannounced_change".to_string())
            && lossy["probes"][0]["reason"] == "unknown_tool";
        let refreshed = healthy["connections"][0]["cache"]["replaced_by"] == "notification";
        if stale && told && refreshed {
            break s;
        }
        assert!(
            start.elapsed() < DEADLINE * 2,
            "status never showed the story: {s}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // The healthy connection's timeline reads notify → list → replace, in that order.
    let k = kinds(target(&s, "healthy"));
    let at = |kind: &str| k.iter().rposition(|x| x == kind);
    let (n, w, c) = (
        at("list_changed"),
        at("walk_finished"),
        at("cache_replaced"),
    );
    assert!(n.is_some() && n < w && w < c, "healthy timeline: {k:?}");
    // The lossy one never heard of the change.
    assert!(
        !kinds(target(&s, "lossy")).contains(&"list_changed".to_string()),
        "{s}"
    );

    let page = get(&format!("{}/", e.base)).await.expect("status page");
    assert!(page.contains("<meta http-equiv=\"refresh\""));
    assert!(page.contains("<code>search_legacy</code>"), "{page}");
    assert!(page.contains("unannounced_change") && page.contains("cache_replaced"));
    for (what, text) in [
        ("page", &page),
        ("json", &s.to_string()),
        ("logs", &e.logs()),
    ] {
        assert!(!text.contains(SENTINEL), "a secret leaked into the {what}");
    }
}

/// Poll `/status.json` until `cond` holds; panics with the logs after `deadline`.
async fn until_status(
    e: &Exporter,
    deadline: Duration,
    what: &str,
    cond: impl Fn(&Value) -> bool,
) -> Value {
    let json = |t: &str| serde_json::from_str(t).ok();
    e.until_get("/status.json", deadline, what, json, cond)
        .await
}

fn severity_rank(s: &str) -> usize {
    [
        "down",
        "not_ready",
        "stale",
        "at_risk",
        "no_promise",
        "healthy",
    ]
    .iter()
    .position(|x| *x == s)
    .unwrap_or_else(|| panic!("unknown severity {s:?}"))
}

fn names(s: &Value) -> Vec<String> {
    s["targets"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn causes(t: &Value) -> Vec<String> {
    t["causes"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The demo's gateways and probes (`--demo`), with intervals short enough for a test and the
/// redeploy in the test's hands.
fn demo_config(lab: &Lab) -> String {
    let mut y = String::from(
        "global:\n  audit_interval: 1s\n  ping_interval: 1s\n  request_timeout: 1s\n  notification_grace: 300ms\ntargets:\n",
    );
    for (name, _) in demo::profiles() {
        y.push_str(&format!(
            "  - name: {name}\n    url: {}\n    probes:\n      - tool: kb_stats\n        interval: 500ms\n        timeout: 500ms\n",
            lab.url(&name)
        ));
        if name == "kb_lossy_gateway" {
            y.push_str(
                "      - tool: search_legacy\n        interval: 500ms\n        timeout: 500ms\n",
            );
        }
    }
    y
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_reads_worst_first_with_causes_in_the_page_and_the_json() {
    let lab = start_lab(demo::profiles()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(&path, demo_config(&lab)).unwrap();
    let e = Exporter::spawn(&[format!("--config.file={}", path.display())], &[]);

    // Before the redeploy every cache is current and every probe passes.
    until_status(&e, DEADLINE, "every target ready with 14 tools", |s| {
        let ts = s["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        ts.len() == 7
            && ts
                .iter()
                .all(|t| t["ready"] == true && t["connections"][0]["cache"]["tools"] == 14)
    })
    .await;
    lab.churn();
    let settled = |s: &Value| {
        let sev = |n: &str| target(s, n)["severity"].as_str().unwrap_or("").to_string();
        sev("kb_lossy_gateway") == "not_ready"
            && sev("kb_no_list_changed") == "stale"
            && sev("kb_no_stream") == "stale"
            && sev("kb_healthy") == "healthy"
            && sev("kb_modern") == "healthy"
            && sev("kb_no_promise") == "no_promise"
            && target(s, "kb_flaky_relist")["connections"][0]["cache"]["replaced_by"]
                == "notification"
            && causes(target(s, "kb_lossy_gateway"))
                .iter()
                .any(|c| c.starts_with("unannounced change "))
    };
    let s = until_status(&e, DEADLINE * 2, "the redeploy's story", settled).await;

    // Worst first: the order is by severity, and the two stale gateways are up, ready and stale.
    let ranks: Vec<usize> = s["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| severity_rank(t["severity"].as_str().unwrap()))
        .collect();
    assert!(
        ranks.windows(2).all(|w| w[0] <= w[1]),
        "not worst first: {s}"
    );
    let order = names(&s);
    assert_eq!(order[0], "kb_lossy_gateway", "{s}");
    assert_eq!(
        order[1..3],
        ["kb_no_list_changed".to_string(), "kb_no_stream".to_string()],
        "{s}"
    );
    for (name, why) in [
        (
            "kb_no_list_changed",
            "no listChanged capability; cache differs: ",
        ),
        (
            "kb_no_stream",
            // The demo's lab serves both eras; the probe speaks the modern one.
            "no notification stream: server does not implement subscriptions/listen; cache differs: ",
        ),
    ] {
        let t = target(&s, name);
        assert_eq!(
            (&t["up"], &t["ready"], &t["stale"]),
            (&json!(true), &json!(true), &json!(true)),
            "{name}: {t}"
        );
        assert!(causes(t)[0].starts_with(why), "{name}: {:?}", causes(t));
        assert_eq!(
            t["since"], t["connections"][0]["contract"]["broken_since"],
            "stale since the promise broke: {name}: {t}"
        );
    }
    let lossy = causes(target(&s, "kb_lossy_gateway"));
    assert_eq!(
        lossy[0], "probe search_legacy failing: unknown_tool",
        "{lossy:?}"
    );

    // The page: the same order, the cause in the summary row, stale never green.
    let page = get(&format!("{}/", e.base)).await.expect("status page");
    let rows: Vec<&str> = page
        .split("<tr class=\"target\">")
        .skip(1)
        .map(|r| r.split("</tr>").next().unwrap())
        .collect();
    let page_order: Vec<String> = rows
        .iter()
        .map(|r| {
            let start = r.find("#target-").unwrap() + "#target-".len();
            r[start..].split('"').next().unwrap().to_string()
        })
        .collect();
    let json_now = until_status(&e, DEADLINE, "the story still", settled).await;
    assert_eq!(
        page_order,
        names(&json_now),
        "page and JSON disagree on the order"
    );
    for (row, name) in rows.iter().zip(&page_order) {
        if name == "kb_no_list_changed" || name == "kb_no_stream" {
            assert!(
                row.contains("<span class=\"sev stale\">stale</span>"),
                "{row}"
            );
            assert!(row.contains("<td class=\"warn\">stale</td>"), "{row}");
            assert!(row.contains("<td class=\"ok\">ready</td>"), "{row}");
            let since = row.split("<td class=\"since\">").nth(1).unwrap_or("");
            assert!(
                since.contains(" UTC<br><small>") && since.contains(" ago</small>"),
                "{row}"
            );
        }
    }
    assert!(
        page.contains("<b>stale since "),
        "no sticky since in the details"
    );
    assert!(page.contains("no listChanged capability; cache differs: "));
    assert!(
        page.contains("no notification stream: server does not implement subscriptions/listen")
    );
}

// ---------------------------------------------------------------------------------------------
// A hostile server: 1 MiB tool names, control and bidi characters in names and serverInfo
// ---------------------------------------------------------------------------------------------

const RAW: &str = "\0\x1b[2J\x07\u{202e}";

/// A minimal Streamable HTTP MCP server (JSON answers, no GET stream) whose first `tools/list`
/// is harmless and every later one lists seven 1 MiB names and names full of control and bidi
/// characters, so the audit finds them as drift. Its `serverInfo` carries the same characters.
async fn hostile_server(lists: Arc<AtomicU64>) -> SocketAddr {
    use axum::Json;
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    use axum::routing::post;

    let handler = move |Json(req): Json<Value>| {
        let lists = lists.clone();
        async move {
            let Some(id) = req.get("id").cloned() else {
                return StatusCode::ACCEPTED.into_response();
            };
            let result = match req["method"].as_str().unwrap_or("") {
                "initialize" => json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {"listChanged": true}},
                    "serverInfo": {"name": format!("evil{RAW}name"), "version": format!("1{RAW}0")},
                }),
                "tools/list" => {
                    let tool = |n: String| json!({"name": n, "inputSchema": {"type": "object"}});
                    let tools: Vec<Value> = if lists.fetch_add(1, Ordering::SeqCst) == 0 {
                        vec![tool("ok".into())]
                    } else {
                        (0..7)
                            .map(|i| tool(format!("{i}{}", "n".repeat(1 << 20))))
                            .chain((0..3).map(|i| tool(format!("t{i}{RAW}x"))))
                            .collect()
                    };
                    json!({"tools": tools})
                }
                _ => json!({}),
            };
            let mut h = HeaderMap::new();
            h.insert("mcp-session-id", "hostile-1".parse().unwrap());
            (
                h,
                Json(json!({"jsonrpc": "2.0", "id": id, "result": result})),
            )
                .into_response()
        }
    };
    let app = axum::Router::new().route(
        "/mcp",
        post(handler).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Every string in a JSON value, keys included.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(o) => o.iter().for_each(|(k, v)| {
            out.push(k.clone());
            strings(v, out)
        }),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_reach_neither_page_nor_json_raw_or_large() {
    let lists = Arc::new(AtomicU64::new(0));
    let addr = hostile_server(lists.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(
        &path,
        format!(
            "global:\n  audit_interval: 4s\n  ping_interval: 4s\n  request_timeout: 4s\ntargets:\n  - name: hostile\n    url: http://{addr}/mcp\n"
        ),
    )
    .unwrap();
    let e = Exporter::spawn(&[format!("--config.file={}", path.display())], &[]);

    // Wait until an audit has read the hostile list (as drift, or as a refused walk).
    let lists_seen = lists.clone();
    let s = until_status(&e, DEADLINE, "an audit of the hostile list", move |s| {
        let c = &target(s, "hostile")["connections"][0];
        lists_seen.load(Ordering::SeqCst) >= 3
            && c["session"]["server_name"].is_string()
            && (c["drift"]["counts"]["missing"].as_u64() > Some(0)
                || c["last_walk"]["complete"] == false)
    })
    .await;
    let page = get(&format!("{}/", e.base)).await.expect("status page");
    let json = get(&format!("{}/status.json", e.base))
        .await
        .expect("status.json");
    for (what, body) in [("page", &page), ("json", &json)] {
        // Far under the cap: every stored string is bounded; the cap is the last line.
        assert!(
            body.len() < MAX_RESPONSE_BYTES / 4,
            "{what}: {} bytes",
            body.len()
        );
        let raw: Vec<char> = body
            .chars()
            .filter(|c| is_hostile(*c) && *c != '\n')
            .collect();
        assert!(raw.is_empty(), "{what} carries raw {raw:?}");
    }
    let v: Value = serde_json::from_str(&json).expect("valid JSON");
    let mut all = Vec::new();
    strings(&v, &mut all);
    let raw: Vec<&String> = all.iter().filter(|s| s.chars().any(is_hostile)).collect();
    assert!(
        raw.is_empty(),
        "JSON strings decode to raw control/bidi: {raw:?}"
    );
    let c = &target(&v, "hostile")["connections"][0];
    assert_eq!(
        c["session"]["server_name"], "evil\\u{0}\\u{1b}[2J\\u{7}\\u{202e}name",
        "{c}"
    );
    assert!(page.contains("evil\\u{0}\\u{1b}[2J\\u{7}\\u{202e}name"));
    drop(s);
}

/// Issue 22 item 8: a token in a target URL's path (`/mcp/sk-…/`) was shown on `/` and in
/// `/status.json`. The one URL redaction rule (`config::redact_url`) hides token-like path
/// segments wherever a URL is shown: page, JSON, logs (at debug) and `--config.check`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_the_url_path_is_shown_nowhere() {
    const PATH_TOKEN: &str = "sk-path7ok3n4711";
    let dead = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(
        &path,
        format!(
            "global:\n  ping_interval: 500ms\n  request_timeout: 400ms\ntargets:\n  - name: kb\n    url: http://127.0.0.1:{dead}/mcp/{PATH_TOKEN}/\n"
        ),
    )
    .unwrap();
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
        .arg("--config.check")
        .arg(format!("--config.file={}", path.display()))
        .output()
        .expect("the exporter runs");
    let listed = String::from_utf8_lossy(&checked.stdout);
    assert!(
        listed.contains(&format!("kb: http://127.0.0.1:{dead}/mcp/<redacted>/")),
        "{listed}"
    );
    // (at --log.level=debug)
    let e = Exporter::spawn(&[format!("--config.file={}", path.display())], &[]);
    let start = tokio::time::Instant::now();
    let s = loop {
        let body = get(&format!("{}/status.json", e.base))
            .await
            .unwrap_or_default();
        let s: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        // Shown, and a connection attempt logged.
        if target(&s, "kb")["url"].is_string() && e.logs().contains("session failed") {
            break s;
        }
        assert!(start.elapsed() < DEADLINE, "no status: {s}\n{}", e.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        target(&s, "kb")["url"],
        format!("http://127.0.0.1:{dead}/mcp/<redacted>/")
    );
    let page = get(&format!("{}/", e.base)).await.expect("status page");
    assert!(page.contains("/mcp/&lt;redacted&gt;/"), "{page}");
    for (what, text) in [
        ("page", &page),
        ("json", &s.to_string()),
        ("logs", &e.logs()),
        ("--config.check", &listed.to_string()),
    ] {
        assert!(
            !text.contains(PATH_TOKEN),
            "the path token leaked into the {what}"
        );
    }
}
