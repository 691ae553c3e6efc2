//! The two transports where all messages share one ordered channel, against real peers: stdio
//! with the official Rust SDK (`examples/rmcp_stdio_peer.rs`) and a fault peer for what no real
//! server does on demand (`examples/stdio_fault_peer.rs`); HTTP+SSE (2024-11-05) with a
//! spec-following server (`tests/common/sse_peer.rs`).
//!
//! Every wait is bounded by [`DEADLINE`]; the few "nothing answers" cases use a short caller
//! timeout because that timeout is the behaviour under test.

#[path = "common/sse_peer.rs"]
mod sse_peer;

use std::sync::Arc;
use std::time::Duration;

use mcp_client::mcp::duplex::Duplex;
use mcp_client::mcp::legacy_sse::connect_sse;
use mcp_client::mcp::stdio::{Command, connect_stdio};
use mcp_client::mcp::{Client, Dialer, Era, Inbox, Limits, McpError, Reason, jsonrpc};
use mcp_client::target_http::TargetHttp;
use serde_json::{Value, json};
use sse_peer::{Options, SsePeer};

const DEADLINE: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Wait until `cond` holds, polling; panics after [`DEADLINE`].
async fn until(what: &str, cond: impl Fn() -> bool) {
    within(what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

fn command(name: &str, args: &[&str]) -> Command {
    Command {
        program: example(name).to_string_lossy().into_owned(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: vec![],
        cwd: None,
    }
}

/// The fault peer in `mode`, connected.
async fn fault(mode: &[&str], inbox: Arc<Inbox>, limits: Limits) -> Duplex {
    let cmd = command("stdio_fault_peer", mode);
    within("connect", connect_stdio(&cmd, inbox, limits))
        .await
        .unwrap()
}

fn inbox() -> (Arc<Inbox>, mcp_client::mcp::Requests) {
    let (inbox, rx) = Inbox::new();
    (Arc::new(inbox), rx)
}

fn limits(max_message: usize) -> Limits {
    Limits {
        max_body_bytes: max_message,
        ..Limits::default()
    }
}

/// One request over the channel, bounded by the test deadline.
async fn call(d: &Duplex, id: u64, method: &str, params: Option<Value>) -> Result<Value, McpError> {
    let body = jsonrpc::request(id, method, params);
    let (outcome, _bytes) = within(method, d.request(id, body, usize::MAX)).await?;
    outcome.map_err(McpError::from)
}

/// The legacy handshake, as the session layer will run it over a duplex.
async fn handshake(d: &Duplex, version: &str) -> Value {
    let params = json!({
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "transports-test", "version": "0"},
    });
    let result = call(d, 0, "initialize", Some(params)).await.unwrap();
    d.send(jsonrpc::notification("notifications/initialized"))
        .await
        .unwrap();
    result
}

/// Walk `tools/list` to the end; the names and the number of pages.
async fn list_all(d: &Duplex, first_id: u64) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..10u64 {
        let params = cursor.as_ref().map(|c| json!({"cursor": c}));
        let result = call(d, first_id + page, "tools/list", params)
            .await
            .unwrap();
        for t in result["tools"].as_array().unwrap() {
            names.push(t["name"].as_str().unwrap().to_string());
        }
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(c) => cursor = Some(c.to_string()),
            None => return (names, page as usize + 1),
        }
    }
    panic!("more than 10 pages");
}

// ---- stdio ----

#[tokio::test]
async fn stdio_rmcp_pages_and_list_changed() {
    let (inbox, _rq) = inbox();
    let d = connect_stdio(
        &command("rmcp_stdio_peer", &[]),
        inbox.clone(),
        Limits::default(),
    )
    .await
    .unwrap();
    let init = handshake(&d, "2025-11-25").await;
    assert_eq!(init["serverInfo"]["name"], "rmcp-stdio-peer");
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true);

    let (names, pages) = list_all(&d, 1).await;
    assert_eq!(names, ["alpha", "beta", "gamma", "add_tool"]);
    assert_eq!(pages, 2);

    // rmcp sends list_changed before the tool's result, on the same ordered stdout.
    let added = call(
        &d,
        10,
        "tools/call",
        Some(json!({"name": "add_tool", "arguments": {}})),
    )
    .await
    .unwrap();
    assert_eq!(added["content"][0]["text"], "added_4");
    until("list_changed reaches the inbox", || {
        inbox.list_changed_count() == 1
    })
    .await;
    let (names, pages) = list_all(&d, 20).await;
    assert_eq!(names.len(), 5);
    assert_eq!(pages, 3);

    // Requests in flight at once are told apart by id.
    let (a, b, c) = within("three at once", async {
        tokio::join!(
            call(&d, 30, "ping", None),
            call(&d, 31, "tools/list", None),
            call(&d, 32, "ping", None)
        )
    })
    .await;
    assert_eq!(a.unwrap(), json!({}));
    assert_eq!(b.unwrap()["tools"].as_array().unwrap().len(), 2);
    assert_eq!(c.unwrap(), json!({}));

    // close() closes stdin (rmcp exits on it); later requests fail at once.
    within("close", d.close()).await;
    assert_eq!(
        within("closed", d.closed()).await.reason,
        Reason::StreamClosed
    );
    let after = call(&d, 40, "ping", None).await.unwrap_err();
    assert_eq!(after.reason, Reason::StreamClosed);
}

#[tokio::test]
async fn stdio_a_process_that_exits_ends_the_channel_with_its_status() {
    let (inbox, _rq) = inbox();
    let d = fault(&["exit", "3"], inbox, Limits::default()).await;
    let why = within("closed", d.closed()).await;
    assert_eq!(why.reason, Reason::StreamClosed);
    assert!(why.detail.contains("exit status: 3"), "{why}");
    let e = call(&d, 1, "ping", None).await.unwrap_err();
    assert_eq!(e.reason, Reason::StreamClosed);
    assert!(e.detail.contains("exit status: 3"), "{e}");
}

#[tokio::test]
async fn stdio_a_line_over_the_cap_fails_the_channel() {
    let (inbox, _rq) = inbox();
    let d = fault(&["huge", "10485760"], inbox, limits(1 << 20)).await;
    handshake(&d, "2025-11-25").await;
    let e = call(&d, 1, "tools/list", None).await.unwrap_err();
    assert_eq!(e.reason, Reason::StreamClosed);
    let why = within("closed", d.closed()).await;
    assert_eq!(why.reason, Reason::BodyTooLarge, "{why}");
    within("close", d.close()).await;
}

#[tokio::test]
async fn stdio_an_answer_over_the_callers_cap_fails_only_that_request() {
    let (inbox, _rq) = inbox();
    let d = fault(&["huge", "4096"], inbox, Limits::default()).await;
    handshake(&d, "2025-11-25").await;
    let body = jsonrpc::request(1, "tools/list", None);
    let e = within("capped", d.request(1, body, 1024))
        .await
        .unwrap_err();
    assert_eq!(e.reason, Reason::BodyTooLarge);
    let body = jsonrpc::request(2, "tools/list", None);
    let (outcome, bytes) = within("uncapped", d.request(2, body, 8192)).await.unwrap();
    assert!(outcome.is_ok() && bytes > 4096 && bytes <= 8192, "{bytes}");
    within("close", d.close()).await;
}

#[tokio::test]
async fn stdio_garbage_on_stdout_fails_the_channel_with_a_clear_reason() {
    let (inbox, _rq) = inbox();
    let d = fault(&["garbage"], inbox, Limits::default()).await;
    let body = jsonrpc::request(0, "ping", None);
    let e = within("ping", d.request(0, body, usize::MAX))
        .await
        .unwrap_err();
    assert_eq!(e.reason, Reason::StreamClosed);
    let why = within("closed", d.closed()).await;
    assert_eq!(why.reason, Reason::InvalidJson);
    assert!(why.detail.contains("hello from a server"), "{why}");
    within("close", d.close()).await;
}

#[tokio::test]
async fn stdio_a_notification_flood_is_counted_not_queued() {
    let (inbox, _rq) = inbox();
    let d = fault(&["flood", "100000"], inbox.clone(), Limits::default()).await;
    // The flood comes before the answer on the one ordered stdout, so it is all in by then.
    assert_eq!(call(&d, 1, "ping", None).await.unwrap(), json!({}));
    assert_eq!(inbox.list_changed_count(), 100_000);
    assert_eq!(call(&d, 2, "ping", None).await.unwrap(), json!({}));
    assert_eq!(inbox.list_changed_count(), 200_000);
    within("close", d.close()).await;
}

#[tokio::test]
async fn stdio_a_server_that_never_answers_is_bounded_by_the_caller() {
    let (inbox, _rq) = inbox();
    let d = fault(&["silent"], inbox, Limits::default()).await;
    let body = jsonrpc::request(1, "tools/list", None);
    let r = tokio::time::timeout(Duration::from_millis(200), d.request(1, body, usize::MAX)).await;
    assert!(r.is_err(), "a silent server cannot answer");
    // The id is free again, and the channel is still open.
    let body = jsonrpc::request(1, "tools/list", None);
    let r = tokio::time::timeout(Duration::from_millis(50), d.request(1, body, usize::MAX)).await;
    assert!(r.is_err());
    assert!(!d.is_closed());
    within("close", d.close()).await;
    assert!(d.is_closed());
}

fn alive(pid: u32) -> bool {
    // A zombie has exited: only a running process counts.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The stubborn peer, handshaken, and the pids it reports on stderr: itself and its grandchild.
async fn stubborn() -> (Duplex, Vec<u32>) {
    let (inbox, _rq) = inbox();
    let d = fault(&["stubborn"], inbox, Limits::default()).await;
    handshake(&d, "2025-11-25").await;
    until("the peer reports its pids on stderr", || {
        d.stderr_tail(4096).is_some_and(|t| t.contains("pids "))
    })
    .await;
    let tail = d.stderr_tail(4096).unwrap();
    let pids: Vec<u32> = tail
        .split("pids ")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .take(2)
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{tail}");
    assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");
    (d, pids)
}

#[tokio::test]
async fn stdio_close_ends_the_whole_process_group() {
    let (d, pids) = stubborn().await;
    // It ignores the end of stdin: close() escalates to the group signal.
    within("close", d.close()).await;
    until("peer and grandchild are gone", || {
        pids.iter().all(|&p| !alive(p))
    })
    .await;
}

#[tokio::test]
async fn stdio_a_dropped_channel_still_ends_the_process_group() {
    let (d, pids) = stubborn().await;
    drop(d);
    until("peer and grandchild are gone", || {
        pids.iter().all(|&p| !alive(p))
    })
    .await;
}

#[tokio::test]
async fn stdio_stderr_is_kept_as_a_bounded_escaped_tail() {
    let (inbox, _rq) = inbox();
    let d = fault(&["stderr", "100000"], inbox, Limits::default()).await;
    assert_eq!(call(&d, 1, "ping", None).await.unwrap(), json!({}));
    until("the last log line is in the tail", || {
        d.stderr_tail(20_000)
            .is_some_and(|t| t.contains("log line at byte 99"))
    })
    .await;
    let tail = d.stderr_tail(20_000).unwrap();
    assert!(tail.len() <= 20_000);
    assert!(
        !tail.contains("log line at byte 0\\"),
        "only the end is kept"
    );
    assert!(!tail.contains('\n'), "newlines are escaped");
    assert!(d.stderr_tail(100).unwrap().len() <= 100);
    within("close", d.close()).await;
}

#[tokio::test]
async fn stdio_a_program_that_cannot_start_is_a_connect_failure() {
    let (inbox, _rq) = inbox();
    let cmd = Command {
        program: "/nonexistent/mcp-server".into(),
        args: vec![],
        env: vec![],
        cwd: None,
    };
    let e = connect_stdio(&cmd, inbox, Limits::default())
        .await
        .unwrap_err();
    assert_eq!(e.reason, Reason::Connect);
}

/// A program slower to start than the request timeout (a shell that waits 2 s, then becomes the
/// Rust SDK peer; as an interpreter loading its SDK or `npx` fetching a package) still gets its
/// session: the initialize after the start has the start-up allowance, not the 300 ms request
/// timeout, which would kill it and start it again, just as slowly, for ever.
#[tokio::test]
async fn stdio_a_slow_start_is_not_taken_for_a_dead_server() {
    let peer = example("rmcp_stdio_peer").to_string_lossy().into_owned();
    let dialer = Dialer::Stdio {
        command: Command {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "sleep 2; exec \"$0\"".into(), peer],
            env: vec![],
            cwd: None,
        },
        limits: Limits::default(),
    };
    let (inbox, _rq) = inbox();
    let observe = |_: &'static str, _: Duration, _: Result<(), Reason>| {};
    let timeout = Duration::from_millis(300);
    let client = within(
        "connect",
        Client::connect(&dialer, None, inbox, timeout, &observe),
    )
    .await
    .expect("a slow start opens a session");
    assert_eq!(client.era(), Era::Legacy);
    within("ping", client.liveness()).await.unwrap();
    within("close", client.close()).await;
}

// ---- HTTP+SSE (2024-11-05) ----

async fn sse(peer: &SsePeer, inbox: Arc<Inbox>, limits: Limits) -> Result<Duplex, McpError> {
    let headers = [("Authorization".to_string(), "Bearer s3cret".to_string())];
    within(
        "connect",
        connect_sse(
            TargetHttp::plain(),
            peer.url.clone(),
            &headers,
            inbox,
            limits,
            Duration::from_secs(10),
        ),
    )
    .await
}

/// A peer with `options`, a channel to it under `limits`, after the handshake.
async fn sse_session(
    options: Options,
    limits: Limits,
) -> (SsePeer, Duplex, Arc<Inbox>, mcp_client::mcp::Requests) {
    let peer = SsePeer::start(options).await;
    let (inbox, requests) = inbox();
    let d = sse(&peer, inbox.clone(), limits).await.unwrap();
    handshake(&d, "2024-11-05").await;
    (peer, d, inbox, requests)
}

#[tokio::test]
async fn sse_pages_notifications_and_headers_on_every_request() {
    let peer = SsePeer::start(Options::default()).await;
    let (inbox, _rq) = inbox();
    let d = sse(&peer, inbox.clone(), Limits::default()).await.unwrap();
    let init = handshake(&d, "2024-11-05").await;
    assert_eq!(init["serverInfo"]["name"], "sse-peer");

    let (names, pages) = list_all(&d, 1).await;
    assert_eq!(names, sse_peer::TOOLS);
    assert_eq!(pages, 2);

    peer.announce_list_changed().await;
    until("list_changed reaches the inbox", || {
        inbox.list_changed_count() == 1
    })
    .await;

    let seen = peer.seen();
    assert_eq!(seen[0].0, "GET");
    assert!(seen.iter().filter(|(m, _)| m == "POST").count() >= 4);
    assert!(
        seen.iter()
            .all(|(_, auth)| auth.as_deref() == Some("Bearer s3cret")),
        "{seen:?}"
    );
    let methods: Vec<String> = peer
        .received()
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/list"
        ]
    );
    within("close", d.close()).await;
}

#[tokio::test]
async fn sse_a_lost_stream_closes_the_channel() {
    let (peer, d, _inbox, _rq) = sse_session(Options::default(), Limits::default()).await;
    peer.drop_streams();
    let why = within("closed", d.closed()).await;
    assert_eq!(why.reason, Reason::StreamClosed, "{why}");
    let e = call(&d, 1, "tools/list", None).await.unwrap_err();
    assert_eq!(e.reason, Reason::StreamClosed);
}

#[tokio::test]
async fn sse_an_endpoint_on_another_origin_is_refused() {
    let peer = SsePeer::start(Options {
        foreign_endpoint: true,
        ..Options::default()
    })
    .await;
    let (inbox, _rq) = inbox();
    let e = sse(&peer, inbox, Limits::default()).await.unwrap_err();
    assert_eq!(e.reason, Reason::InvalidResponse);
    assert!(e.detail.contains("another origin"), "{e}");
    assert!(
        peer.seen().iter().all(|(m, _)| m == "GET"),
        "nothing was posted"
    );
}

#[tokio::test]
async fn sse_an_oversized_event_fails_the_channel() {
    let (peer, d, _inbox, _rq) = sse_session(Options::default(), limits(64 * 1024)).await;
    let big = json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"data": "x".repeat(100 * 1024)}});
    peer.send_event("message", &big.to_string()).await;
    let why = within("closed", d.closed()).await;
    assert_eq!(why.reason, Reason::BodyTooLarge, "{why}");
    let e = call(&d, 1, "ping", None).await.unwrap_err();
    assert_eq!(e.reason, Reason::StreamClosed);
}

#[tokio::test]
async fn sse_a_server_request_is_answered_through_send() {
    let (peer, d, _inbox, mut requests) = sse_session(Options::default(), Limits::default()).await;
    peer.send_event(
        "message",
        r#"{"jsonrpc":"2.0","id":"srv-1","method":"ping"}"#,
    )
    .await;
    let req = within("server request", requests.recv()).await.unwrap();
    assert_eq!(req.method, "ping");
    d.send(jsonrpc::response(&req.id, Ok(json!({}))))
        .await
        .unwrap();
    until("the answer reaches the server", || {
        peer.received()
            .iter()
            .any(|m| m["id"] == "srv-1" && m["result"] == json!({}))
    })
    .await;
    within("close", d.close()).await;
}

#[tokio::test]
async fn sse_a_forgotten_session_fails_the_post_and_ends_the_channel() {
    let (peer, d, _inbox, _rq) = sse_session(Options::default(), Limits::default()).await;
    peer.forget_sessions();
    let e = call(&d, 1, "tools/list", None).await.unwrap_err();
    assert_eq!(e.reason, Reason::SessionExpired, "{e}");
    assert_eq!(
        within("closed", d.closed()).await.reason,
        Reason::SessionExpired
    );
    let e = call(&d, 2, "ping", None).await.unwrap_err();
    assert_eq!(e.reason, Reason::StreamClosed);
}

#[tokio::test]
async fn sse_posts_accepted_with_200_are_tolerated() {
    let (_peer, d, _inbox, _rq) = sse_session(
        Options {
            accept_with_200: true,
            ..Options::default()
        },
        Limits::default(),
    )
    .await;
    assert_eq!(list_all(&d, 1).await.1, 2);
    within("close", d.close()).await;
}

/// For CI against the SDKs' own HTTP+SSE servers (Python `SseServerTransport`, TypeScript
/// `SSEServerTransport`): `MCP_SSE_URL=http://127.0.0.1:PORT/sse cargo test --test transports
/// -- --ignored external_sse`.
#[tokio::test]
#[ignore = "needs MCP_SSE_URL: a running HTTP+SSE server"]
async fn external_sse_server_handshake_walk_and_ping() {
    let url = std::env::var("MCP_SSE_URL").expect("MCP_SSE_URL names the SSE endpoint");
    let (inbox, _rq) = inbox();
    let d = within(
        "connect",
        connect_sse(
            TargetHttp::plain(),
            url::Url::parse(&url).unwrap(),
            &[],
            inbox,
            Limits::default(),
            Duration::from_secs(10),
        ),
    )
    .await
    .unwrap();
    handshake_walk_ping_close(d, "2024-11-05").await;
}

/// For CI against the SDKs' stdio servers: `MCP_STDIO_COMMAND="python3 server.py" cargo test
/// --test transports -- --ignored external_stdio` (split on whitespace, no shell).
#[tokio::test]
#[ignore = "needs MCP_STDIO_COMMAND: a stdio MCP server to launch"]
async fn external_stdio_server_handshake_walk_and_ping() {
    let line = std::env::var("MCP_STDIO_COMMAND").expect("MCP_STDIO_COMMAND names the server");
    let mut words = line.split_whitespace().map(String::from);
    let cmd = Command {
        program: words.next().expect("a program"),
        args: words.collect(),
        env: vec![],
        cwd: None,
    };
    let (inbox, _rq) = inbox();
    let d = within("connect", connect_stdio(&cmd, inbox, Limits::default()))
        .await
        .unwrap();
    handshake_walk_ping_close(d, "2025-11-25").await;
}

/// What the external tests check of a server the SDKs wrote.
async fn handshake_walk_ping_close(d: Duplex, version: &str) {
    let init = handshake(&d, version).await;
    assert!(init["protocolVersion"].is_string(), "{init}");
    let (names, pages) = list_all(&d, 1).await;
    assert!(!names.is_empty(), "{pages} pages, no tools");
    assert_eq!(call(&d, 100, "ping", None).await.unwrap(), json!({}));
    let start = std::time::Instant::now();
    within("close", d.close()).await;
    eprintln!(
        "{} tools in {pages} pages; close took {:?}",
        names.len(),
        start.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// The exporter's probe on these transports: the same metrics and detection as Streamable HTTP
// ---------------------------------------------------------------------------------------------

mod common;

use common::example;
use common::series::{C0, counter, t, walks};
use common::{Harness, Scrape};
use mcp_exporter::config::{CommandSpec, Endpoint, HttpTransportKind, TargetConfig};

fn legacy_era(s: &Scrape, name: &str) -> bool {
    s.get("mcp_probe_session_info", &[t(name), ("era", "legacy")]) == Some(1.0)
}

fn tools(s: &Scrape, name: &str) -> f64 {
    s.v("mcp_probe_tools", &[t(name), C0, ("view", "server")])
}

/// A `transport: sse` target, and an `auto` one at the same URL (the SSE endpoint refuses the
/// Streamable HTTP POSTs with 405, so the probe falls back as the spec's compatibility section
/// says): both up in the legacy era, both pages walked, a list_changed on the stream re-walks,
/// and a lost stream is a new session and a re-walk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_targets_are_probed_like_streamable_ones() {
    let peer = sse_peer::SsePeer::start(sse_peer::Options::default()).await;
    let mut h = Harness::new();
    let mut sse = common::target("sse", peer.url.clone());
    sse.endpoint = Endpoint::Http {
        url: peer.url.clone(),
        transport: HttpTransportKind::Sse,
    };
    let auto = common::target("auto", peer.url.clone());
    h.apply(vec![sse, auto]);
    let s = h
        .until("both up with the listing", |s| {
            ["sse", "auto"].iter().all(|n| {
                s.v("mcp_probe_up", &[t(n)]) == 1.0 && tools(s, n) == sse_peer::TOOLS.len() as f64
            })
        })
        .await;
    for n in ["sse", "auto"] {
        assert!(legacy_era(&s, n), "{n}\n{}", s.text);
        assert_eq!(s.v("mcp_probe_tools_list_pages", &[t(n), C0]), 2.0);
        assert_eq!(
            s.v("mcp_probe_notification_stream_up", &[t(n), C0]),
            1.0,
            "{n}: the session's own channel carries notifications"
        );
    }
    peer.announce_list_changed().await;
    h.until("a notification re-walk on both", |s| {
        ["sse", "auto"]
            .iter()
            .all(|n| walks(s, n, "notification") >= 1.0)
    })
    .await;
    peer.drop_streams();
    let s = h
        .until(
            "new sessions and re-walks after the streams were lost",
            |s| {
                ["sse", "auto"].iter().all(|n| {
                    counter(s, "mcp_probe_sessions_started_total", n) >= 2.0
                        && walks(s, n, "reconnect") >= 1.0
                        && s.v("mcp_probe_up", &[t(n)]) == 1.0
                })
            },
        )
        .await;
    assert_eq!(
        counter(&s, "mcp_probe_unannounced_changes_total", "sse"),
        0.0
    );
}

/// A stdio target (the official Rust SDK as a child process): up in the legacy era, 2 pages of
/// 4 tools, a tool call that adds a tool announces it and the cache follows; the process is
/// killed when the target is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_targets_are_started_probed_and_stopped() {
    let mut h = Harness::new();
    let mut cfg: TargetConfig = common::target("local", "http://unused.invalid/".parse().unwrap());
    cfg.endpoint = Endpoint::Command(CommandSpec {
        command: example("rmcp_stdio_peer"),
        args: vec![],
        env: vec![],
        cwd: None,
    });
    cfg.probes = vec![mcp_exporter::config::ProbeConfig {
        tool: "add_tool".into(),
        arguments: Default::default(),
        interval: Duration::from_secs(3600),
        timeout: Duration::from_secs(5),
        expect: Default::default(),
        allow_side_effects: true,
    }];
    h.apply(vec![cfg]);
    let s = h
        .until(
            "up, walked, and the added tool announced and re-listed",
            |s| {
                s.v("mcp_probe_up", &[t("local")]) == 1.0
                    && walks(s, "local", "notification") >= 1.0
                    && s.v("mcp_probe_tools", &[t("local"), C0, ("view", "cache")]) == 5.0
            },
        )
        .await;
    assert!(legacy_era(&s, "local"), "{}", s.text);
    assert_eq!(s.v("mcp_probe_tools_list_pages", &[t("local"), C0]), 3.0);
    assert_eq!(
        s.v(
            "mcp_probe_cache_drift_tools",
            &[t("local"), C0, ("kind", "extra")]
        ),
        0.0
    );
    h.apply(vec![]);
    h.until("the target is gone", |s| !s.has_target("local"))
        .await;
}
