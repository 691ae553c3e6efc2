//! Resumable POST answers (2025-11-25 transports, SEP-1699): a server may close an answer stream
//! after a priming event, and the client resumes it with a GET carrying `Last-Event-ID`.
//!
//! Against the lab (`resumable_posts`, which primes and closes every answer, `initialize`
//! included) and against small scripted servers for what the lab never does: no priming id, a
//! resumption that never delivers, one that keeps closing.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::series::C0;
use common::{Harness, Scrape, start_lab, target};
use mcp_client::mcp::http::MAX_RESUMPTIONS;
use mcp_client::mcp::{HttpTransport, Inbox, Limits, McpError, ProtocolVersion, Reason, Session};
use mcp_lab::{Behaviour, Lab, ResumeCounts};
use serde_json::{Value, json};

/// The lab profile every test here uses.
const RP: &str = "rp";

/// A lab serving `b` with resumable POST answers as profile [`RP`], and that profile's URL.
async fn resumable_lab(b: Behaviour) -> (Lab, url::Url) {
    // Resumable answers (SEP-1699) exist in the legacy era only: the modern era has none.
    let b = Behaviour {
        resumable_posts: true,
        era: mcp_lab::Era::Legacy,
        ..b
    };
    let lab = start_lab([(RP, b)]).await;
    let url = lab.url(RP);
    (lab, url)
}

async fn session(url: url::Url, timeout: Duration) -> Session {
    let transport = HttpTransport::new(url, &[], Limits::default()).expect("transport");
    let (inbox, _requests) = Inbox::new();
    Session::open(
        Arc::new(transport),
        ProtocolVersion::V2025_11_25,
        Arc::new(inbox),
        timeout,
    )
    .await
    .expect("session opens")
}

/// `tools/list` on `url`, bounded well above the session timeout so a hang fails the test.
async fn list_tools(url: url::Url, timeout: Duration) -> Result<Value, McpError> {
    let s = session(url, timeout).await;
    tokio::time::timeout(timeout * 10, s.request("tools/list", None))
        .await
        .expect("the request ends within its deadline")
}

/// Every `mcp_probe_request_failures_total` sample of `target` that is not zero.
fn request_failures(s: &Scrape, target: &str) -> Vec<String> {
    let label = format!("target=\"{target}\"");
    s.text
        .lines()
        .filter(|l| l.starts_with("mcp_probe_request_failures_total{") && l.contains(&label))
        .filter(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) != Some(0.0))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_is_resumed_once_with_the_priming_id() {
    let (lab, url) = resumable_lab(Behaviour::default()).await;
    let page = list_tools(url, Duration::from_secs(5))
        .await
        .expect("the first page arrives on the resumption GET");
    assert_eq!(page["tools"].as_array().map(Vec::len), Some(8));
    assert!(page["nextCursor"].is_string(), "{page}");
    assert_eq!(
        lab.resume_counts(RP),
        ResumeCounts {
            primed: 2,
            resumed: 2,
            unknown: 0,
            sent_whole: 0,
        },
        "initialize and tools/list, each resumed once"
    );
}

/// The lab's side of the session rule the client must follow: a resumption GET without the
/// session id is refused (400), one with another session's id is not found (404), and a stream
/// is replayed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lab_resumes_only_inside_the_session_and_only_once() {
    let (lab, url) = resumable_lab(Behaviour::default()).await;
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}});
    let resp = http
        .post(url.clone())
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    let sid = resp.headers()["mcp-session-id"].clone();
    let priming = resp.text().await.unwrap();
    assert!(priming.starts_with("id: 1-0\n"), "{priming}");
    assert!(!priming.contains("protocolVersion"), "{priming}");
    let get = |session: Option<&str>| {
        let mut req = http
            .get(url.clone())
            .header("accept", "text/event-stream")
            .header("last-event-id", "1-0");
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        req.send()
    };
    assert_eq!(get(None).await.unwrap().status(), 400);
    assert_eq!(get(Some("lab-other")).await.unwrap().status(), 404);
    let replayed = get(Some(sid.to_str().unwrap())).await.unwrap();
    assert_eq!(replayed.status(), 200);
    let body = replayed.text().await.unwrap();
    assert!(
        body.contains("id: 1-1\n") && body.contains("protocolVersion"),
        "{body}"
    );
    let again = get(Some(sid.to_str().unwrap())).await.unwrap();
    assert_eq!(again.status(), 400, "a replayed stream is forgotten");
    let counts = lab.resume_counts(RP);
    assert_eq!((counts.primed, counts.resumed, counts.unknown), (1, 1, 1));
}

/// SEP-1699 on `initialize`: the answer is primed and closed, and the client resumes it with the
/// session id the POST response just handed out (the lab refuses a GET without it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_initialize_answer_is_resumed_inside_the_new_session_and_the_session_walks() {
    let (lab, url) = resumable_lab(Behaviour::default()).await;
    let s = session(url, Duration::from_secs(5)).await;
    assert_eq!(s.info().protocol_version, "2025-11-25");
    let first = s.request("tools/list", None).await.expect("page 1");
    let cursor = first["nextCursor"].clone();
    let second = s
        .request("tools/list", Some(json!({"cursor": cursor})))
        .await
        .expect("page 2");
    let names = |p: &Value| p["tools"].as_array().map_or(0, Vec::len);
    assert_eq!(names(&first) + names(&second), 14);
    assert!(second.get("nextCursor").is_none(), "{second}");
    assert_eq!(
        lab.resume_counts(RP),
        ResumeCounts {
            primed: 3,
            resumed: 3,
            unknown: 0,
            sent_whole: 0,
        }
    );
    assert_eq!(lab.initializes(RP), 1);
}

/// The lab's replay store is bounded: an answer too large to keep (it echoes a 100 KiB tool
/// name) is sent whole on its POST stream, never primed nor replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_answer_is_sent_whole_without_replay() {
    let (lab, url) = resumable_lab(Behaviour::default()).await;
    let s = session(url, Duration::from_secs(5)).await;
    let name = "x".repeat(100 * 1024);
    let err = s
        .request("tools/call", Some(json!({"name": name, "arguments": {}})))
        .await
        .unwrap_err();
    assert_eq!(err.reason, Reason::JsonrpcError, "{err}");
    assert!(err.detail.contains("Unknown tool: xxx"), "{err}");
    assert_eq!(
        lab.resume_counts(RP),
        ResumeCounts {
            primed: 1,
            resumed: 1,
            unknown: 0,
            sent_whole: 1,
        },
        "only initialize was primed and resumed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_walks_a_resumable_server_without_request_failures() {
    let (lab, url) = resumable_lab(Behaviour::default()).await;
    let mut h = Harness::new();
    h.apply(vec![target(RP, url)]);
    let t = ("target", RP);
    let s = h
        .until("a walk of both pages and a few pings, all resumed", |s| {
            s.v("mcp_probe_tools", &[t, C0, ("view", "cache")]) == 14.0
                && s.v("mcp_probe_tools_list_pages", &[t, C0]) == 2.0
                && s.v("mcp_probe_up", &[t]) == 1.0
                && lab.resume_counts(RP).resumed >= 5
        })
        .await;
    assert_eq!(s.v("mcp_probe_tools", &[t, C0, ("view", "server")]), 14.0);
    assert_eq!(request_failures(&s, RP), Vec::<String>::new(), "{}", s.text);
    let counts = lab.resume_counts(RP);
    assert_eq!(
        counts.unknown, 0,
        "every Last-Event-ID named a primed stream"
    );
    assert!(counts.primed >= counts.resumed, "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_get_stream_fails_the_resumption_as_http_4xx() {
    let (lab, url) = resumable_lab(Behaviour {
        get_stream: false,
        ..Behaviour::default()
    })
    .await;
    // Already the `initialize` answer cannot be resumed.
    let transport = HttpTransport::new(url, &[], Limits::default()).expect("transport");
    let (inbox, _requests) = Inbox::new();
    let opened = Session::open(
        Arc::new(transport),
        ProtocolVersion::V2025_11_25,
        Arc::new(inbox),
        Duration::from_secs(5),
    )
    .await;
    let Err(err) = opened else {
        panic!("initialize cannot complete without its resumption GET");
    };
    assert_eq!(err.reason, Reason::Http4xx, "{err}");
    assert!(err.detail.contains("405"), "{err}");
    assert_eq!(lab.resume_counts(RP).resumed, 0);
    assert_eq!(lab.resume_counts(RP).primed, 1);
}

/// How a scripted server answers a request after `initialize`, and the GETs that resume it.
#[derive(Clone, Copy)]
enum Script {
    /// The answer stream carries no id and closes: nothing to resume.
    NoPrimingId,
    /// Priming id `s-0`; every resumption GET opens a stream that never delivers.
    GetNeverDelivers,
    /// Priming id `s-0`; resumption GET number `n` sends id `g<n>` and closes.
    GetKeepsClosing,
}

struct Scripted {
    script: Script,
    /// `Last-Event-ID` of every GET, in order (`-` for none).
    gets: Mutex<Vec<String>>,
}

async fn scripted(script: Script) -> (url::Url, Arc<Scripted>) {
    let state = Arc::new(Scripted {
        script,
        gets: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/mcp", post(scripted_post).get(scripted_get))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = url::Url::parse(&format!("http://{}/mcp", listener.local_addr().unwrap())).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, state)
}

fn sse(body: String) -> Response {
    ([("content-type", "text/event-stream")], body).into_response()
}

async fn scripted_post(State(state): State<Arc<Scripted>>, body: Bytes) -> Response {
    let msg: Value = serde_json::from_slice(&body).expect("JSON body");
    let Some(id) = msg.get("id") else {
        return StatusCode::ACCEPTED.into_response();
    };
    if msg["method"] == "initialize" {
        let result = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "1"},
        });
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
        return ([("mcp-session-id", "scripted-1")], axum::Json(answer)).into_response();
    }
    match state.script {
        Script::NoPrimingId => sse("retry: 10\ndata: \n\n: bye\n\n".into()),
        Script::GetNeverDelivers | Script::GetKeepsClosing => {
            sse("id: s-0\nretry: 10\ndata: \n\n".into())
        }
    }
}

async fn scripted_get(State(state): State<Arc<Scripted>>, headers: HeaderMap) -> Response {
    let last = headers
        .get("last-event-id")
        .map_or("-".to_string(), |v| v.to_str().unwrap_or("?").to_string());
    let n = {
        let mut gets = state.gets.lock().unwrap();
        gets.push(last);
        gets.len()
    };
    match state.script {
        Script::NoPrimingId => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        Script::GetNeverDelivers => {
            let body = axum::body::Body::from_stream(futures_util::stream::pending::<
                Result<Bytes, std::io::Error>,
            >());
            ([("content-type", "text/event-stream")], body).into_response()
        }
        Script::GetKeepsClosing => sse(format!("id: g{n}\ndata: \n\n")),
    }
}

fn gets(state: &Scripted) -> Vec<String> {
    state.gets.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_closed_without_an_event_id_is_stream_closed() {
    let (url, state) = scripted(Script::NoPrimingId).await;
    let err = list_tools(url, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(err.reason, Reason::StreamClosed, "{err}");
    assert_eq!(gets(&state), Vec::<String>::new(), "nothing to resume");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumption_that_never_delivers_times_out_within_the_request_deadline() {
    let (url, state) = scripted(Script::GetNeverDelivers).await;
    let err = list_tools(url, Duration::from_secs(2)).await.unwrap_err();
    assert_eq!(err.reason, Reason::Timeout, "{err}");
    assert_eq!(gets(&state), vec!["s-0".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumptions_are_bounded_and_each_carries_the_last_id_seen() {
    let (url, state) = scripted(Script::GetKeepsClosing).await;
    let err = list_tools(url, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(err.reason, Reason::StreamClosed, "{err}");
    let expected: Vec<String> = std::iter::once("s-0".to_string())
        .chain((1..MAX_RESUMPTIONS).map(|n| format!("g{n}")))
        .collect();
    assert_eq!(gets(&state), expected);
}
