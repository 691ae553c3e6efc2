//! Hostile servers next to a healthy one. Each test runs one misbehaving MCP endpoint (raw
//! HTTP/1.1 on a tokio `TcpListener`) beside the lab's healthy `kb`, both probed by one harness,
//! and asserts three things: the failure is classified with the right `reason`, the hostile
//! target's `mcp_probe_up` says what it should, and the healthy target keeps auditing on its own
//! schedule while the hostile one misbehaves (no cross-target delay). Nothing here measures time.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::series::{C0, checks, counter, t, walks};
use common::{Harness, Scrape, start_lab, target};
use mcp_exporter::config::TargetConfig;
use mcp_lab::{Behaviour, Lab};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

const HOSTILE: &str = "hostile";
const SESSION_ID: &str = "hostile-7f3a9c";
const PROTOCOL_VERSION: &str = "2025-11-25";
/// A sanity bound on the whole test process, not a tight budget: a probe that buffered a 64 MiB
/// body or an unbounded event (or a queue per notification) would cross it.
const RSS_BOUND_MIB: u64 = 512;

const REQUEST_FAILURES: &str = "mcp_probe_request_failures_total";
const WALK_FAILURES: &str = "mcp_probe_tools_list_walk_failures_total";
const SESSION_FAILURES: &str = "mcp_probe_session_failures_total";

// ---------------------------------------------------------------------------------------------
// Scrape helpers
// ---------------------------------------------------------------------------------------------

fn list_changed(s: &Scrape, name: &str) -> f64 {
    counter(s, "mcp_probe_list_changed_notifications_total", name)
}

/// Failure counters are registered on first use: absent reads as 0 here.
fn failures(s: &Scrape, metric: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut all = vec![t(name), C0];
    all.extend_from_slice(labels);
    s.get(metric, &all).unwrap_or(0.0)
}

fn list_failures(s: &Scrape, name: &str, reason: &str) -> f64 {
    failures(
        s,
        REQUEST_FAILURES,
        name,
        &[("method", "tools/list"), ("reason", reason)],
    )
}

/// Session failures are counted per target (all connections).
fn session_failures(s: &Scrape, name: &str, reason: &str) -> f64 {
    s.get(SESSION_FAILURES, &[t(name), ("reason", reason)])
        .unwrap_or(0.0)
}

/// The `reason` values (with a non-zero count) of `metric` for `name`, among samples that also
/// carry all of `labels`.
fn reasons(s: &Scrape, metric: &str, name: &str, labels: &[(&str, &str)]) -> BTreeMap<String, f64> {
    let parsed = prometheus_parse::Scrape::parse(s.text.lines().map(|l| Ok(l.to_string())))
        .expect("exposition parses");
    parsed
        .samples
        .into_iter()
        .filter(|x| x.metric == metric && x.labels.get("target") == Some(name))
        .filter(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .filter_map(|x| {
            let v = match x.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
                _ => return None,
            };
            let reason = x.labels.get("reason")?.to_string();
            (v > 0.0).then_some((reason, v))
        })
        .collect()
}

fn only(reason: &str) -> Vec<String> {
    vec![reason.to_string()]
}

fn keys(m: &BTreeMap<String, f64>) -> Vec<String> {
    m.keys().cloned().collect()
}

/// Resident set size of this test process, from `/proc/self/status`.
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS line");
    kb / 1024
}

fn assert_rss_bounded(when: &str) {
    let rss = rss_mib();
    assert!(
        rss < RSS_BOUND_MIB,
        "RSS {rss} MiB {when}: over the {RSS_BOUND_MIB} MiB sanity bound"
    );
}

// ---------------------------------------------------------------------------------------------
// The scene: the healthy lab target `kb` and the hostile targets in one harness
// ---------------------------------------------------------------------------------------------

struct Scene {
    _lab: Lab,
    h: Harness,
}

async fn scene(hostile: Vec<TargetConfig>) -> Scene {
    let lab = start_lab([("kb", Behaviour::default())]).await;
    let mut h = Harness::new();
    let mut targets = vec![target("kb", lab.url("kb"))];
    targets.extend(hostile);
    h.apply(targets);
    Scene { _lab: lab, h }
}

/// A hostile target: short request timeout so time-based failures show quickly.
fn hostile_target(name: &str, url: url::Url) -> TargetConfig {
    let mut c = target(name, url);
    c.settings.request_timeout = Duration::from_secs(1);
    c
}

/// A listing budget above the transport's own 8 MiB body cap, so that cap is what a huge answer
/// meets (with the default 256 KiB budget the walk would fail as `listing_too_large` first).
fn with_room_for_a_huge_listing(mut c: TargetConfig) -> TargetConfig {
    c.settings.max_listing_bytes = 64 * 1024 * 1024;
    c
}

fn url(s: &str) -> url::Url {
    url::Url::parse(s).expect("valid URL")
}

/// Called once the hostile behaviour has begun: the healthy target completes three more audits
/// (and `also` holds, typically "the hostile target failed again meanwhile"), without a single
/// failure of its own.
async fn healthy_keeps_auditing(h: &Harness, also: impl Fn(&Scrape) -> bool) -> Scrape {
    let before = checks(&h.scrape(), "kb");
    let s = h
        .until("healthy kb completes 3 more audits meanwhile", |s| {
            checks(s, "kb") >= before + 3.0 && also(s)
        })
        .await;
    assert_eq!(s.v("mcp_probe_up", &[t("kb")]), 1.0, "kb down\n{}", s.text);
    for (metric, labels) in [
        (REQUEST_FAILURES, vec![]),
        (SESSION_FAILURES, vec![]),
        (WALK_FAILURES, vec![]),
    ] {
        assert!(
            reasons(&s, metric, "kb", &labels).is_empty(),
            "kb has {metric}\n{}",
            s.text
        );
    }
    assert_eq!(
        counter(&s, "mcp_probe_cache_consistency_check_failures_total", "kb"),
        0.0
    );
    assert_eq!(counter(&s, "mcp_probe_ping_failures_total", "kb"), 0.0);
    s
}

/// `initialize` and pings work, `tools/list` fails with `reason`, every time and only with it.
async fn assert_list_fault(h: &Harness, name: &str, reason: &str) -> Scrape {
    h.until(&format!("{name}: tools/list fails with {reason}"), |s| {
        list_failures(s, name, reason) >= 1.0
            && failures(
                s,
                WALK_FAILURES,
                name,
                &[("trigger", "initial"), ("reason", reason)],
            ) >= 1.0
    })
    .await;
    let f0 = list_failures(&h.scrape(), name, reason);
    let s = healthy_keeps_auditing(h, |s| list_failures(s, name, reason) > f0).await;
    assert_eq!(
        keys(&reasons(
            &s,
            REQUEST_FAILURES,
            name,
            &[("method", "tools/list")]
        )),
        only(reason),
        "{name}: tools/list failure reasons\n{}",
        s.text
    );
    assert_eq!(
        keys(&reasons(&s, WALK_FAILURES, name, &[])),
        only(reason),
        "{name}: walk failure reasons\n{}",
        s.text
    );
    // The session itself is fine: the target is up, pings pass, no session failed.
    assert_eq!(
        s.v("mcp_probe_up", &[t(name)]),
        1.0,
        "{name} up\n{}",
        s.text
    );
    assert_eq!(counter(&s, "mcp_probe_ping_failures_total", name), 0.0);
    assert_eq!(counter(&s, "mcp_probe_sessions_started_total", name), 1.0);
    assert!(reasons(&s, SESSION_FAILURES, name, &[]).is_empty());
    // Nothing ever reached the cache.
    assert_eq!(
        s.count(
            "mcp_probe_cache_refreshes_total",
            &[t(name), C0, ("trigger", "initial")]
        ),
        0.0
    );
    s
}

/// The first request of a connection in `protocol_version: auto`: era detection.
const DETECT: &str = "server/discover";

/// Connecting fails with `reason` on `method`, every attempt and only with it; the target is
/// down. `method` is `initialize` for a server that fails it, and `server/discover` (the first
/// request of `protocol_version: auto`, era detection) when nothing answers at all.
async fn assert_session_fault(h: &Harness, name: &str, method: &str, reason: &str) -> Scrape {
    h.until(&format!("{name}: initialize fails with {reason}"), |s| {
        session_failures(s, name, reason) >= 1.0
    })
    .await;
    let f0 = session_failures(&h.scrape(), name, reason);
    let s = healthy_keeps_auditing(h, |s| session_failures(s, name, reason) > f0).await;
    assert_eq!(
        keys(&reasons(&s, SESSION_FAILURES, name, &[])),
        only(reason),
        "{name}: session failure reasons\n{}",
        s.text
    );
    assert_eq!(
        keys(&reasons(&s, REQUEST_FAILURES, name, &[("method", method)])),
        only(reason),
        "{name}: {method} failure reasons\n{}",
        s.text
    );
    assert_eq!(
        s.v("mcp_probe_up", &[t(name)]),
        0.0,
        "{name} up\n{}",
        s.text
    );
    assert_eq!(counter(&s, "mcp_probe_sessions_started_total", name), 0.0);
    s
}

// ---------------------------------------------------------------------------------------------
// A minimal legacy (Streamable HTTP) MCP responder on raw HTTP/1.1, with one injected fault
// ---------------------------------------------------------------------------------------------

/// What the hostile server does instead of answering the faulted method.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// `application/json` with `Content-Length: 64 MiB`; the body is streamed until the client
    /// hangs up (never allocated).
    DeclaredHuge,
    /// `application/json`, chunked, a valid JSON prefix then whitespace past 8 MiB (up to 64 MiB).
    ChunkedHuge,
    /// `text/event-stream` that sends keep-alive comments and unrelated notifications, never the
    /// response.
    SseNeverAnswers,
    /// Headers at once, then the (valid) body one byte per 100 ms.
    TrickleBody,
    /// The whole response, status line included, one byte per 100 ms.
    TrickleAll,
    /// `application/json` whose body is truncated JSON.
    InvalidJson,
    /// A well-formed response carrying another id.
    WrongId,
    /// `200 text/html`: a login page where JSON was expected.
    Html,
    /// `302 Found` to another port on 127.0.0.1.
    Redirect(SocketAddr),
    /// The correct answer, after a delay.
    Slow(Duration),
    /// `tools/list` in `pages` pages (cursor `p1`, `p2` …) of `per_page` tools whose names are
    /// `name_bytes` long and distinct. Each page is built when asked for: a client that refuses
    /// it early costs the server little.
    LongNames {
        pages: u32,
        per_page: u32,
        name_bytes: usize,
    },
    /// One page of this many small tools.
    ManyTools(u32),
    /// A different list on every `tools/list` (300 tools renamed each time), never announced.
    Churn,
}

/// What happens to a session after `initialize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AfterInit {
    /// Requests are answered (or faulted as `fault` says).
    Serve,
    /// Every request and GET carrying the session id gets 404: a load balancer without session
    /// affinity. Notifications are accepted.
    NotFound,
    /// Requests are read and never answered (the connection stays open).
    Silent,
}

/// What a GET (the notification stream) gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GetStream {
    /// 405: no stream offered.
    Refuse,
    /// The first stream floods notifications, later ones only keep alive.
    Flood,
    /// Every stream starts one `data:` line that never ends, streamed up to 64 MiB.
    HugeEvent,
    /// The first stream sends 6 MiB of keep-alive comments (many tiny events) then one
    /// list_changed; later ones only keep alive.
    CommentFlood,
}

const LC_EVENT: &str =
    "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
/// list_changed flood: this many writes of this many events, 100 ms apart (~10 000/s for 3 s).
const LC_ROUNDS: u64 = 30;
const LC_BATCH: u64 = 1000;
const LC_TOTAL: u64 = LC_ROUNDS * LC_BATCH;
/// Then other notifications: this many writes of this many, 50 ms apart.
const OTHER_ROUNDS: u64 = 20;
const OTHER_BATCH: u64 = 1000;
/// And server-to-client pings, which a correct client answers (through a bounded queue).
const SERVER_PINGS: u64 = 200;

#[derive(Default)]
struct Stats {
    posts: Mutex<HashMap<String, u64>>,
    gets: AtomicU64,
    /// Responses the client POSTed to our requests (server pings).
    answers: AtomicU64,
    tools_list_in_flight: AtomicU64,
    tools_list_max_in_flight: AtomicU64,
    flood_started: AtomicBool,
    flood_done: AtomicBool,
    /// Bytes of the current never-ending event written so far.
    huge_event_bytes: AtomicU64,
    /// Lists served by `Fault::Churn`.
    churn: AtomicU64,
}

struct Spec {
    fault_on: &'static str,
    fault: Option<Fault>,
    get: GetStream,
    after_init: AfterInit,
}

struct Hostile {
    addr: SocketAddr,
    stats: Arc<Stats>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every connection task.
        self.task.abort();
    }
}

impl Hostile {
    async fn start(fault_on: &'static str, fault: Option<Fault>, get: GetStream) -> Hostile {
        Self::start_with(Spec {
            fault_on,
            fault,
            get,
            after_init: AfterInit::Serve,
        })
        .await
    }

    /// A server that accepts `initialize` and then behaves as `after_init` says.
    async fn after_init(after_init: AfterInit) -> Hostile {
        Self::start_with(Spec {
            fault_on: "",
            fault: None,
            get: GetStream::Refuse,
            after_init,
        })
        .await
    }

    async fn start_with(spec: Spec) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let stats = Arc::new(Stats::default());
        let spec = Arc::new(spec);
        let st = stats.clone();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((sock, _)) = accepted else { continue };
                        let (spec, st) = (spec.clone(), st.clone());
                        conns.spawn(async move {
                            let _ = serve_connection(sock, &spec, &st).await;
                        });
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Hostile { addr, stats, task }
    }

    fn url(&self) -> url::Url {
        url(&format!("http://{}/mcp", self.addr))
    }

    fn posts(&self, method: &str) -> u64 {
        let posts = self.stats.posts.lock().unwrap();
        posts.get(method).copied().unwrap_or(0)
    }
}

struct Request {
    method: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Read one request (`Content-Length` bodies only; reqwest sends nothing else here).
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<Request>> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let method = lines
                .next()
                .and_then(|l| l.split(' ').next())
                .unwrap_or_default()
                .to_string();
            let headers: HashMap<String, String> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let len: usize = headers
                .get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let start = end + 4;
            while buf.len() < start + len {
                let n = sock.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(None);
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[start..start + len].to_vec();
            buf.drain(..start + len);
            return Ok(Some(Request {
                method,
                headers,
                body,
            }));
        }
        if buf.len() > 64 * 1024 {
            return Ok(None);
        }
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn head(status: &str, headers: &[(&str, &str)]) -> String {
    let mut h = format!("HTTP/1.1 {status}\r\n");
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    h
}

async fn respond(
    sock: &mut TcpStream,
    status: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> io::Result<()> {
    let len = body.len().to_string();
    let mut all = vec![("Content-Length", len.as_str())];
    all.extend_from_slice(headers);
    let mut out = head(status, &all).into_bytes();
    out.extend_from_slice(body);
    sock.write_all(&out).await?;
    sock.flush().await
}

async fn respond_json(sock: &mut TcpStream, extra: &[(&str, &str)], msg: &Value) -> io::Result<()> {
    let mut headers = vec![("Content-Type", "application/json")];
    headers.extend_from_slice(extra);
    respond(sock, "200 OK", &headers, msg.to_string().as_bytes()).await
}

async fn respond_raw_json(sock: &mut TcpStream, body: &[u8]) -> io::Result<()> {
    respond(
        sock,
        "200 OK",
        &[("Content-Type", "application/json")],
        body,
    )
    .await
}

/// One HTTP/1.1 chunk.
async fn chunk(sock: &mut TcpStream, data: &[u8]) -> io::Result<()> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    sock.write_all(&out).await?;
    sock.flush().await
}

async fn sse_head(sock: &mut TcpStream) -> io::Result<()> {
    let h = head(
        "200 OK",
        &[
            ("Content-Type", "text/event-stream"),
            ("Cache-Control", "no-cache"),
            ("Transfer-Encoding", "chunked"),
        ],
    );
    sock.write_all(h.as_bytes()).await?;
    sock.flush().await
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn tools_page() -> Value {
    json!({"tools": [{
        "name": "echo",
        "description": "Echo the text back",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}
    }]})
}

fn initialize_result() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {"tools": {"listChanged": true}},
        "serverInfo": {"name": "hostile", "version": "0.0.1"}
    })
}

async fn serve_connection(mut sock: TcpStream, spec: &Spec, stats: &Stats) -> io::Result<()> {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await? {
        let keep = match req.method.as_str() {
            "POST" => post(&mut sock, &req, spec, stats).await?,
            "GET" => get(&mut sock, &req, spec, stats).await?,
            "DELETE" => {
                respond(&mut sock, "200 OK", &[], b"").await?;
                true
            }
            _ => {
                respond(
                    &mut sock,
                    "405 Method Not Allowed",
                    &[("Allow", "GET, POST, DELETE")],
                    b"",
                )
                .await?;
                true
            }
        };
        if !keep {
            return Ok(());
        }
    }
    Ok(())
}

fn has_session(req: &Request) -> bool {
    req.headers.get("mcp-session-id").map(String::as_str) == Some(SESSION_ID)
}

/// Handle one POST. Returns whether the connection can be reused.
async fn post(sock: &mut TcpStream, req: &Request, spec: &Spec, stats: &Stats) -> io::Result<bool> {
    let Ok(msg) = serde_json::from_slice::<Value>(&req.body) else {
        respond(sock, "400 Bad Request", &[], b"").await?;
        return Ok(true);
    };
    let method = msg
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string);
    let id = msg.get("id").cloned();
    let Some(method) = method else {
        // A response to one of our requests (a server ping).
        if msg.get("result").is_some() {
            stats.answers.fetch_add(1, Ordering::Relaxed);
        }
        respond(sock, "202 Accepted", &[], b"").await?;
        return Ok(true);
    };
    if method != "initialize" && !has_session(req) {
        respond(sock, "400 Bad Request", &[], b"").await?;
        return Ok(true);
    }
    if method != "initialize" && id.is_some() {
        match spec.after_init {
            AfterInit::Serve => {}
            AfterInit::NotFound => {
                respond(sock, "404 Not Found", &[], b"").await?;
                return Ok(true);
            }
            AfterInit::Silent => {
                // Hold the request until the client gives up and closes the connection.
                let mut sink = [0u8; 1024];
                while sock.read(&mut sink).await? > 0 {}
                return Ok(false);
            }
        }
    }
    *stats
        .posts
        .lock()
        .unwrap()
        .entry(method.clone())
        .or_default() += 1;
    let Some(id) = id else {
        // notifications/initialized and any other notification.
        respond(sock, "202 Accepted", &[], b"").await?;
        return Ok(true);
    };
    if method == spec.fault_on
        && let Some(fault) = spec.fault
    {
        return inject(sock, &method, &id, msg.get("params"), fault, stats).await;
    }
    answer(sock, &method, &id).await?;
    Ok(true)
}

/// The correct answer to a request.
async fn answer(sock: &mut TcpStream, method: &str, id: &Value) -> io::Result<()> {
    match method {
        "initialize" => {
            respond_json(
                sock,
                &[("Mcp-Session-Id", SESSION_ID)],
                &result(id, initialize_result()),
            )
            .await
        }
        "ping" => respond_json(sock, &[], &result(id, json!({}))).await,
        "tools/list" => respond_json(sock, &[], &result(id, tools_page())).await,
        _ => {
            let err = json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found"}});
            respond_json(sock, &[], &err).await
        }
    }
}

/// The part of `{"jsonrpc":"2.0","id":…,"result":{"tools":[` before whitespace padding.
fn padded_prefix(id: &Value) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":["#)
}

const PADDED_SUFFIX: &str = "]}}";
const HUGE: usize = 64 * 1024 * 1024;

async fn inject(
    sock: &mut TcpStream,
    method: &str,
    id: &Value,
    params: Option<&Value>,
    fault: Fault,
    stats: &Stats,
) -> io::Result<bool> {
    let spaces = vec![b' '; 64 * 1024];
    match fault {
        Fault::DeclaredHuge => {
            let len = HUGE.to_string();
            let h = head(
                "200 OK",
                &[
                    ("Content-Type", "application/json"),
                    ("Content-Length", &len),
                ],
            );
            sock.write_all(h.as_bytes()).await?;
            let prefix = padded_prefix(id);
            sock.write_all(prefix.as_bytes()).await?;
            let mut left = HUGE - prefix.len() - PADDED_SUFFIX.len();
            while left > 0 {
                let n = left.min(spaces.len());
                sock.write_all(&spaces[..n]).await?;
                left -= n;
            }
            sock.write_all(PADDED_SUFFIX.as_bytes()).await?;
            Ok(false)
        }
        Fault::ChunkedHuge => {
            let h = head(
                "200 OK",
                &[
                    ("Content-Type", "application/json"),
                    ("Transfer-Encoding", "chunked"),
                ],
            );
            sock.write_all(h.as_bytes()).await?;
            chunk(sock, padded_prefix(id).as_bytes()).await?;
            for _ in 0..HUGE / spaces.len() {
                chunk(sock, &spaces).await?;
            }
            chunk(sock, PADDED_SUFFIX.as_bytes()).await?;
            sock.write_all(b"0\r\n\r\n").await?;
            Ok(false)
        }
        Fault::SseNeverAnswers => {
            sse_head(sock).await?;
            // The 2025-11-25 priming event (an id, empty data), then keep-alives and unrelated
            // notifications, forever (until the client hangs up).
            chunk(sock, b"id: 0\ndata:\n\n").await?;
            for i in 0u64..1200 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let ev = if i % 2 == 0 {
                    ": keep-alive\n\n".to_string()
                } else {
                    let n = json!({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "logger": "hostile", "data": format!("working {i}")}});
                    format!("data: {n}\n\n")
                };
                chunk(sock, ev.as_bytes()).await?;
            }
            Ok(false)
        }
        Fault::TrickleBody | Fault::TrickleAll => {
            sock.set_nodelay(true)?;
            // A valid answer, padded so that even a client without a deadline would wait minutes.
            let mut body = result(id, tools_page()).to_string().into_bytes();
            body.extend(std::iter::repeat_n(b' ', 2000));
            let len = body.len().to_string();
            let h = head(
                "200 OK",
                &[
                    ("Content-Type", "application/json"),
                    ("Content-Length", &len),
                ],
            );
            let mut bytes = h.into_bytes();
            if matches!(fault, Fault::TrickleBody) {
                sock.write_all(&bytes).await?;
                sock.flush().await?;
                bytes.clear();
            }
            bytes.extend_from_slice(&body);
            for b in bytes {
                sock.write_all(&[b]).await?;
                sock.flush().await?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(false)
        }
        Fault::InvalidJson => {
            let body =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"echo","#);
            respond(
                sock,
                "200 OK",
                &[("Content-Type", "application/json")],
                body.as_bytes(),
            )
            .await?;
            Ok(true)
        }
        Fault::WrongId => {
            let wrong = json!(id.as_u64().unwrap_or(0) + 1000);
            respond_json(sock, &[], &result(&wrong, tools_page())).await?;
            Ok(true)
        }
        Fault::Html => {
            let body =
                b"<!doctype html><html><body><form action=/login>Sign in</form></body></html>";
            respond(
                sock,
                "200 OK",
                &[("Content-Type", "text/html; charset=utf-8")],
                body,
            )
            .await?;
            Ok(true)
        }
        Fault::Redirect(to) => {
            let location = format!("http://{to}/mcp");
            respond(sock, "302 Found", &[("Location", &location)], b"").await?;
            Ok(true)
        }
        Fault::LongNames {
            pages,
            per_page,
            name_bytes,
        } => {
            let page: u32 = params
                .and_then(|p| p.get("cursor"))
                .and_then(Value::as_str)
                .and_then(|c| c.strip_prefix('p'))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            // Built as text: a JSON tree of this size is slow to build in a debug test binary.
            let mut body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":["#);
            for i in 0..per_page {
                if i > 0 {
                    body.push(',');
                }
                let name = format!("p{page}t{i}_");
                body.push_str(r#"{"name":""#);
                body.push_str(&name);
                body.push_str(&"n".repeat(name_bytes.saturating_sub(name.len())));
                body.push_str(r#"","inputSchema":{"type":"object"}}"#);
            }
            body.push(']');
            if page + 1 < pages {
                body.push_str(&format!(r#","nextCursor":"p{}""#, page + 1));
            }
            body.push_str("}}");
            respond_raw_json(sock, body.as_bytes()).await?;
            Ok(true)
        }
        Fault::ManyTools(n) => {
            let mut body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":["#);
            for i in 0..n {
                if i > 0 {
                    body.push(',');
                }
                body.push_str(&format!(r#"{{"name":"t{i}"}}"#));
            }
            body.push_str("]}}");
            respond_raw_json(sock, body.as_bytes()).await?;
            Ok(true)
        }
        Fault::Churn => {
            let round = stats.churn.fetch_add(1, Ordering::SeqCst);
            let tools: Vec<Value> = (0..300)
                .map(|i| {
                    let name = format!("churn_{round}_{i}_{}", "x".repeat(100));
                    json!({"name": name, "inputSchema": {"type": "object"}})
                })
                .collect();
            respond_json(sock, &[], &result(id, json!({ "tools": tools }))).await?;
            Ok(true)
        }
        Fault::Slow(delay) => {
            let tracked = method == "tools/list";
            if tracked {
                let now = stats.tools_list_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                stats
                    .tools_list_max_in_flight
                    .fetch_max(now, Ordering::SeqCst);
            }
            tokio::time::sleep(delay).await;
            if tracked {
                stats.tools_list_in_flight.fetch_sub(1, Ordering::SeqCst);
            }
            answer(sock, method, id).await?;
            Ok(true)
        }
    }
}

/// Handle a GET. Returns whether the connection can be reused.
async fn get(sock: &mut TcpStream, req: &Request, spec: &Spec, stats: &Stats) -> io::Result<bool> {
    if spec.after_init == AfterInit::NotFound && has_session(req) {
        respond(sock, "404 Not Found", &[], b"").await?;
        return Ok(true);
    }
    if spec.get == GetStream::Refuse {
        respond(
            sock,
            "405 Method Not Allowed",
            &[("Allow", "POST, DELETE")],
            b"",
        )
        .await?;
        return Ok(true);
    }
    if !has_session(req) {
        respond(sock, "400 Bad Request", &[], b"").await?;
        return Ok(true);
    }
    stats.gets.fetch_add(1, Ordering::Relaxed);
    sse_head(sock).await?;
    match spec.get {
        GetStream::Refuse => unreachable!(),
        GetStream::Flood if !stats.flood_started.swap(true, Ordering::SeqCst) => {
            flood(sock, stats).await?;
        }
        GetStream::HugeEvent => {
            stats.huge_event_bytes.store(0, Ordering::SeqCst);
            chunk(sock, b"data: ").await?;
            // 16 KiB writes: each reaches the client as its own chunk.
            let xs = vec![b'x'; 16 * 1024];
            for _ in 0..HUGE / xs.len() {
                chunk(sock, &xs).await?;
                stats
                    .huge_event_bytes
                    .fetch_add(xs.len() as u64, Ordering::SeqCst);
            }
            chunk(sock, b"\n\n").await?;
        }
        GetStream::CommentFlood if !stats.flood_started.swap(true, Ordering::SeqCst) => {
            // 6 MiB of keep-alive comments in 64 KiB writes: every comment is its own complete
            // (empty) event, none anywhere near the 4 MiB event cap.
            let comments = ": keep-alive\n\n".repeat(64 * 1024 / 14);
            let mut sent = 0;
            while sent < 6 * 1024 * 1024 {
                chunk(sock, comments.as_bytes()).await?;
                sent += comments.len();
            }
            chunk(sock, LC_EVENT.as_bytes()).await?;
            stats.flood_done.store(true, Ordering::SeqCst);
        }
        _ => {}
    }
    // Then keep the stream alive until the client hangs up.
    loop {
        chunk(sock, b": idle\n\n").await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn flood(sock: &mut TcpStream, stats: &Stats) -> io::Result<()> {
    let batch = LC_EVENT.repeat(LC_BATCH as usize);
    for _ in 0..LC_ROUNDS {
        chunk(sock, batch.as_bytes()).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for round in 0..OTHER_ROUNDS {
        let mut out = String::new();
        for i in 0..OTHER_BATCH {
            let n = match i % 3 {
                0 => json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "debug", "logger": "flood", "data": format!("{round}/{i}")}}),
                1 => json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": round, "progress": i, "total": OTHER_BATCH}}),
                _ => json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}),
            };
            out.push_str(&format!("data: {n}\n\n"));
        }
        if round < SERVER_PINGS / 10 {
            for i in 0..10 {
                let p =
                    json!({"jsonrpc": "2.0", "id": format!("srv-{round}-{i}"), "method": "ping"});
                out.push_str(&format!("data: {p}\n\n"));
            }
        }
        chunk(sock, out.as_bytes()).await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stats.flood_done.store(true, Ordering::SeqCst);
    Ok(())
}

/// A listener that counts the connections it accepts and drops them.
async fn counting_listener() -> (SocketAddr, Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            drop(sock);
        }
    });
    (addr, count, task)
}

/// A plain-TCP server that reads whatever the client sends first (a TLS ClientHello) and answers
/// `reply` (or nothing), then closes.
async fn plain_tcp_server(
    reply: Option<&'static [u8]>,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                if let Some(reply) = reply {
                    let _ = sock.write_all(reply).await;
                    let _ = sock.flush().await;
                }
            });
        }
    });
    (addr, task)
}

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

/// 1a. `tools/list` declares a 64 MiB JSON body: refused on the header, nothing buffered. (With
/// the default listing budget the same answer is refused even sooner: see
/// `hostile_huge_listing_is_refused_by_the_listing_budget`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_body_over_cap() {
    assert_rss_bounded("before");
    let hostile = Hostile::start("tools/list", Some(Fault::DeclaredHuge), GetStream::Refuse).await;
    let sc = scene(vec![with_room_for_a_huge_listing(hostile_target(
        HOSTILE,
        hostile.url(),
    ))])
    .await;
    assert_list_fault(&sc.h, HOSTILE, "body_too_large").await;
    assert!(hostile.posts("tools/list") >= 2);
    assert_rss_bounded("after");
}

/// 1b. `tools/list` streams a chunked body with no length, past 8 MiB: cut at the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_chunked_body_over_cap() {
    assert_rss_bounded("before");
    let hostile = Hostile::start("tools/list", Some(Fault::ChunkedHuge), GetStream::Refuse).await;
    let sc = scene(vec![with_room_for_a_huge_listing(hostile_target(
        HOSTILE,
        hostile.url(),
    ))])
    .await;
    assert_list_fault(&sc.h, HOSTILE, "body_too_large").await;
    assert!(hostile.posts("tools/list") >= 2);
    assert_rss_bounded("after");
}

/// 2. `tools/list` answers with an SSE stream that never carries the response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_sse_answer_never_responds() {
    let hostile = Hostile::start(
        "tools/list",
        Some(Fault::SseNeverAnswers),
        GetStream::Refuse,
    )
    .await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    assert_list_fault(&sc.h, HOSTILE, "timeout").await;
}

/// 3. Slowloris: the answer to `tools/list` arrives one byte per 100 ms, the body only (headers
/// complete at once) on `hostile`, everything from the status line on `hostile-head`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_slowloris() {
    let body = Hostile::start("tools/list", Some(Fault::TrickleBody), GetStream::Refuse).await;
    let all = Hostile::start("tools/list", Some(Fault::TrickleAll), GetStream::Refuse).await;
    let sc = scene(vec![
        hostile_target(HOSTILE, body.url()),
        hostile_target("hostile-head", all.url()),
    ])
    .await;
    tokio::join!(
        assert_list_fault(&sc.h, HOSTILE, "timeout"),
        assert_list_fault(&sc.h, "hostile-head", "timeout"),
    );
}

/// 4. `tools/list` answers truncated JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_invalid_json() {
    let hostile = Hostile::start("tools/list", Some(Fault::InvalidJson), GetStream::Refuse).await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    assert_list_fault(&sc.h, HOSTILE, "invalid_json").await;
}

/// 5. `tools/list` answers a well-formed response with another id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_wrong_jsonrpc_id() {
    let hostile = Hostile::start("tools/list", Some(Fault::WrongId), GetStream::Refuse).await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    assert_list_fault(&sc.h, HOSTILE, "invalid_response").await;
}

/// 6. `200 text/html` (a login page): on `tools/list` for `hostile`, on `initialize` for
/// `hostile-init`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_wrong_content_type() {
    let list = Hostile::start("tools/list", Some(Fault::Html), GetStream::Refuse).await;
    let init = Hostile::start("initialize", Some(Fault::Html), GetStream::Refuse).await;
    let sc = scene(vec![
        hostile_target(HOSTILE, list.url()),
        hostile_target("hostile-init", init.url()),
    ])
    .await;
    tokio::join!(
        assert_list_fault(&sc.h, HOSTILE, "content_type"),
        assert_session_fault(&sc.h, "hostile-init", "initialize", "content_type"),
    );
}

/// 7. `initialize` answers 302 to another port: not followed (the redirect target never sees a
/// connection, so the target's credentials never travel there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_redirect_on_initialize() {
    let (elsewhere, connections, _task) = counting_listener().await;
    let hostile = Hostile::start(
        "initialize",
        Some(Fault::Redirect(elsewhere)),
        GetStream::Refuse,
    )
    .await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    assert_session_fault(&sc.h, HOSTILE, "initialize", "redirect").await;
    assert!(hostile.posts("initialize") >= 2);
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
}

/// 8. Nothing listens on the port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_connection_refused() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let sc = scene(vec![hostile_target(
        HOSTILE,
        url(&format!("http://{dead}/mcp")),
    )])
    .await;
    assert_session_fault(&sc.h, HOSTILE, DETECT, "connect").await;
}

/// 9. `https://` to a plain-TCP server: one answers plain-text HTTP to the ClientHello
/// (`hostile`), the other closes without a word (`hostile-eof`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_tls_handshake_failure() {
    let (garbage, _g) = plain_tcp_server(Some(
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\nConnection: close\r\n\r\nBad Request",
    ))
    .await;
    let (eof, _e) = plain_tcp_server(None).await;
    let sc = scene(vec![
        hostile_target(HOSTILE, url(&format!("https://{garbage}/mcp"))),
        hostile_target("hostile-eof", url(&format!("https://{eof}/mcp"))),
    ])
    .await;
    tokio::join!(
        assert_session_fault(&sc.h, HOSTILE, DETECT, "tls"),
        assert_session_fault(&sc.h, "hostile-eof", DETECT, "tls"),
    );
}

/// 10. The name does not resolve (`.invalid` never does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_dns_failure() {
    let sc = scene(vec![hostile_target(
        HOSTILE,
        url("http://nonexistent.invalid/mcp"),
    )])
    .await;
    assert_session_fault(&sc.h, HOSTILE, DETECT, "dns").await;
}

/// 11. The GET stream floods: 30 000 list_changed (~10 000/s), then 20 000 other notifications
/// and 200 server pings. Every list_changed is counted, walks stay single-flight and few, the
/// stream survives, memory stays bounded, the healthy target keeps auditing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_notification_flood() {
    assert_rss_bounded("before");
    // Each tools/list takes 50 ms, so a walk is in flight for most of the flood.
    let hostile = Hostile::start(
        "tools/list",
        Some(Fault::Slow(Duration::from_millis(50))),
        GetStream::Flood,
    )
    .await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    let h = &sc.h;
    h.until("flood began", |s| list_changed(s, HOSTILE) >= 1.0)
        .await;
    healthy_keeps_auditing(h, |_| true).await;
    let s = h
        .until("every list_changed counted, flood over", |s| {
            list_changed(s, HOSTILE) == LC_TOTAL as f64
                && hostile.stats.flood_done.load(Ordering::SeqCst)
        })
        .await;
    // Walks never overlap and a pending notification walk runs before a due audit, so two more
    // completed audits mean the walk owed to the last notifications has completed too.
    let audits = checks(&s, HOSTILE);
    let s = healthy_keeps_auditing(h, |s| checks(s, HOSTILE) >= audits + 2.0).await;
    assert!(
        s.count(
            "mcp_probe_cache_refreshes_total",
            &[t(HOSTILE), C0, ("trigger", "notification")],
        ) >= 1.0
    );
    let walked = walks(&s, HOSTILE, "notification");
    assert!(walked >= 1.0, "no walk for {LC_TOTAL} notifications");
    assert!(
        walked < LC_TOTAL as f64 / 10.0,
        "{walked} notification walks for {LC_TOTAL} notifications: not coalesced"
    );
    assert_eq!(
        list_changed(&s, HOSTILE),
        LC_TOTAL as f64,
        "list_changed miscounted"
    );
    assert_eq!(
        hostile
            .stats
            .tools_list_max_in_flight
            .load(Ordering::SeqCst),
        1,
        "tools/list walks overlapped"
    );
    assert_eq!(
        counter(&s, "mcp_probe_notification_stream_up", HOSTILE),
        1.0
    );
    assert_eq!(
        counter(
            &s,
            "mcp_probe_notification_stream_reconnects_total",
            HOSTILE
        ),
        0.0
    );
    assert_eq!(s.v("mcp_probe_up", &[t(HOSTILE)]), 1.0);
    assert!(
        reasons(&s, REQUEST_FAILURES, HOSTILE, &[]).is_empty(),
        "{}",
        s.text
    );
    let answers = hostile.stats.answers.load(Ordering::SeqCst);
    assert!(
        (1..=SERVER_PINGS).contains(&answers),
        "{answers} answers to {SERVER_PINGS} server pings"
    );
    assert_eq!(hostile.stats.gets.load(Ordering::SeqCst), 1);
    assert_rss_bounded("after the flood");
}

/// 12. The GET stream sends one `data:` line that never ends (16 KiB writes, up to 64 MiB): the
/// stream must be cut at the 4 MiB event cap and re-opened, memory stays bounded, nothing else
/// suffers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_sse_event_over_cap() {
    assert_rss_bounded("before");
    let hostile = Hostile::start("", None, GetStream::HugeEvent).await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    let h = &sc.h;
    h.until("the huge event began", |_| {
        hostile.stats.huge_event_bytes.load(Ordering::SeqCst) > 0
    })
    .await;
    h.until(
        "the stream is cut at the 4 MiB event cap and re-opened",
        |s| counter(s, "mcp_probe_notification_stream_reconnects_total", HOSTILE) >= 1.0,
    )
    .await;
    let s = healthy_keeps_auditing(h, |_| true).await;
    assert!(hostile.stats.gets.load(Ordering::SeqCst) >= 2);
    assert_eq!(s.v("mcp_probe_up", &[t(HOSTILE)]), 1.0);
    assert!(
        reasons(&s, REQUEST_FAILURES, HOSTILE, &[]).is_empty(),
        "{}",
        s.text
    );
    assert_eq!(counter(&s, "mcp_probe_ping_failures_total", HOSTILE), 0.0);
    assert_rss_bounded("after the huge events");
}

/// 12, the part that holds today: while the never-ending event streams in, memory stays bounded,
/// the hostile session stays up (its pings pass) and the healthy target keeps auditing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_sse_event_over_cap_spares_memory_and_neighbours() {
    assert_rss_bounded("before");
    let hostile = Hostile::start("", None, GetStream::HugeEvent).await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    let h = &sc.h;
    h.until("the huge event began", |_| {
        hostile.stats.huge_event_bytes.load(Ordering::SeqCst) > 0
    })
    .await;
    let pings = |s: &Scrape| s.v("mcp_probe_ping_duration_seconds_count", &[t(HOSTILE)]);
    let p0 = pings(&h.scrape());
    let s = healthy_keeps_auditing(h, |s| pings(s) >= p0 + 2.0).await;
    assert_eq!(s.v("mcp_probe_up", &[t(HOSTILE)]), 1.0);
    assert_eq!(counter(&s, "mcp_probe_ping_failures_total", HOSTILE), 0.0);
    assert!(
        reasons(&s, REQUEST_FAILURES, HOSTILE, &[]).is_empty(),
        "{}",
        s.text
    );
    assert_rss_bounded("while the huge event streams");
}

/// Beyond the brief's cases: 6 MiB of keep-alive comments on the GET stream are thousands of
/// tiny complete events, none over the 4 MiB cap. The stream must stay up and deliver the
/// list_changed that follows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_keepalive_comments_are_not_one_big_event() {
    let hostile = Hostile::start("", None, GetStream::CommentFlood).await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    let h = &sc.h;
    let s = h
        .until(
            "the list_changed after the comments arrives, or the stream breaks",
            |s| {
                list_changed(s, HOSTILE) >= 1.0
                    || counter(s, "mcp_probe_notification_stream_reconnects_total", HOSTILE) >= 1.0
            },
        )
        .await;
    assert_eq!(
        counter(
            &s,
            "mcp_probe_notification_stream_reconnects_total",
            HOSTILE
        ),
        0.0,
        "the stream was cut although no event came near the cap"
    );
    assert_eq!(list_changed(&s, HOSTILE), 1.0);
    let s = healthy_keeps_auditing(h, |_| true).await;
    assert_eq!(
        counter(&s, "mcp_probe_notification_stream_up", HOSTILE),
        1.0
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 9: memory, logs, reconnects and liveness against servers that are hostile by accident
// ---------------------------------------------------------------------------------------------

/// 64 pages of 150 tools with 50 KB names: every page (7.5 MB) is under the 8 MiB body cap, so
/// only the listing budget stops it. Before, two connections held 6.2 GB; now the first page is
/// refused on its declared length, the walk fails as `listing_too_large`, and the session stays
/// up (its pings pass).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_huge_listing_is_refused_by_the_listing_budget() {
    assert_rss_bounded("before");
    let fault = Fault::LongNames {
        pages: 64,
        per_page: 150,
        name_bytes: 50_000,
    };
    let hostile = Hostile::start("tools/list", Some(fault), GetStream::Refuse).await;
    let mut target = hostile_target(HOSTILE, hostile.url());
    target.settings.connections = 2;
    let sc = scene(vec![target]).await;
    let h = &sc.h;
    let too_large = |s: &Scrape, c: &str| {
        s.get(
            WALK_FAILURES,
            &[
                t(HOSTILE),
                ("connection", c),
                ("trigger", "initial"),
                ("reason", "listing_too_large"),
            ],
        )
        .unwrap_or(0.0)
    };
    h.until("both connections refuse the listing", |s| {
        too_large(s, "0") >= 1.0 && too_large(s, "1") >= 1.0
    })
    .await;
    let s = healthy_keeps_auditing(h, |s| {
        s.v("mcp_probe_ping_duration_seconds_count", &[t(HOSTILE)]) >= 1.0
    })
    .await;
    assert_eq!(s.v("mcp_probe_up", &[t(HOSTILE)]), 1.0, "{}", s.text);
    assert_eq!(
        keys(&reasons(&s, WALK_FAILURES, HOSTILE, &[])),
        only("listing_too_large")
    );
    eprintln!(
        "measured: test process RSS {} MiB after the huge listings",
        rss_mib()
    );
    assert_rss_bounded("after the huge listings");
}

/// 100 000 tools in one page (~1.9 MB, under the body cap): refused before it is parsed (it is
/// over the listing budget), so nothing of it is kept or even built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_page_of_a_hundred_thousand_tools() {
    assert_rss_bounded("before");
    let hostile = Hostile::start(
        "tools/list",
        Some(Fault::ManyTools(100_000)),
        GetStream::Refuse,
    )
    .await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    let h = &sc.h;
    h.until("the page is refused", |s| {
        failures(
            s,
            WALK_FAILURES,
            HOSTILE,
            &[("trigger", "initial"), ("reason", "listing_too_large")],
        ) >= 1.0
    })
    .await;
    let s = healthy_keeps_auditing(h, |_| true).await;
    assert_eq!(
        keys(&reasons(&s, WALK_FAILURES, HOSTILE, &[])),
        only("listing_too_large")
    );
    assert_rss_bounded("after");
}

/// Names over the spec's 128 characters inside the budget (2 pages of 20 names of 5 000 bytes):
/// the walk completes, each name is a finding, and what is kept of each is short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_long_names_are_counted_and_kept_short() {
    let fault = Fault::LongNames {
        pages: 2,
        per_page: 20,
        name_bytes: 5_000,
    };
    let hostile = Hostile::start("tools/list", Some(fault), GetStream::Refuse).await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    let s =
        sc.h.until("the listing of long names completes", |s| {
            s.get("mcp_probe_tools", &[t(HOSTILE), C0, ("view", "server")]) == Some(40.0)
        })
        .await;
    assert!(counter(&s, "mcp_probe_tools_list_long_names_total", HOSTILE) >= 40.0);
    assert_eq!(s.v("mcp_probe_tools_list_pages", &[t(HOSTILE), C0]), 2.0);
    let status = serde_json::to_string(&sc.h.supervisor.status().snapshot()).expect("json");
    assert!(
        !status.contains(&"n".repeat(200)),
        "a long name reached the status board whole"
    );
}

/// A load balancer without session affinity: `initialize` works, every later request gets 404.
/// Sessions must back off exponentially (before: ~100 new sessions per second), and the target
/// is never up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_sessions_lost_at_once_back_off() {
    let hostile = Hostile::after_init(AfterInit::NotFound).await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    let h = &sc.h;
    let seen_up = AtomicBool::new(false);
    h.until("three sessions expired", |s| {
        if s.get("mcp_probe_up", &[t(HOSTILE)]) == Some(1.0) {
            seen_up.store(true, Ordering::SeqCst);
        }
        counter(s, "mcp_probe_session_expiries_total", HOSTILE) >= 3.0
    })
    .await;
    // Ten more audits of the healthy target take four seconds at least. Backing off from 0.5 s
    // with doubling (jitter 0.5-1), the hostile target opens a handful of sessions in that time;
    // without backoff it opened hundreds.
    let before = hostile.posts("initialize");
    let checks0 = checks(&h.scrape(), "kb");
    h.until("the healthy target completes 10 audits", |s| {
        if s.get("mcp_probe_up", &[t(HOSTILE)]) == Some(1.0) {
            seen_up.store(true, Ordering::SeqCst);
        }
        checks(s, "kb") >= checks0 + 10.0
    })
    .await;
    let opened = hostile.posts("initialize") - before;
    eprintln!("measured: {opened} sessions opened during 10 audits of the healthy target");
    assert!(
        opened <= 8,
        "{opened} sessions opened during 10 audits of the healthy target: no backoff"
    );
    assert!(
        !seen_up.load(Ordering::SeqCst),
        "a session that never answered a request after initialize showed as up"
    );
}

/// A server that answers `initialize` and then nothing (pings and pages time out): the target is
/// never up, whatever the moment of the scrape (before: up ~45 % of the time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_silent_after_initialize_is_never_up() {
    let hostile = Hostile::after_init(AfterInit::Silent).await;
    let sc = scene(vec![hostile_target(HOSTILE, hostile.url())]).await;
    let seen_up = AtomicBool::new(false);
    let s =
        sc.h.until("two sessions died of failed pings", |s| {
            if s.get("mcp_probe_up", &[t(HOSTILE)]) == Some(1.0) {
                seen_up.store(true, Ordering::SeqCst);
            }
            counter(s, "mcp_probe_sessions_started_total", HOSTILE) >= 2.0
                && counter(s, "mcp_probe_ping_failures_total", HOSTILE) >= 4.0
        })
        .await;
    assert!(
        !seen_up.load(Ordering::SeqCst),
        "up was 1 for a server that never answered a ping\n{}",
        s.text
    );
    assert_eq!(s.v("mcp_probe_up", &[t(HOSTILE)]), 0.0);
}

/// Session failures are written from their first event: a target that never failed exports
/// no `mcp_probe_session_failures_total` series (17 reasons at 0 were a sixth of a healthy
/// target's bytes; no alert reads them, see docs/scaling.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_failure_series_wait_for_the_first_failure() {
    let sc = scene(vec![]).await;
    let s =
        sc.h.until("kb is up", |s| {
            s.get("mcp_probe_up", &[t("kb")]) == Some(1.0)
        })
        .await;
    assert!(
        !s.text.contains(SESSION_FAILURES),
        "a target that never failed has no session failure series\n{}",
        s.text
    );
}

/// Logs bounded: a server whose list changes on every audit (300 renamed tools, 110-byte names,
/// never announced) made one "cache differs" line per audit listing every name (1.9 GB in 80 s at
/// default intervals). Now: names per line are capped, and the repeated state is logged once,
/// then summarised at most every five minutes. A list that changes faster than
/// `notification_grace` is still counted as unannounced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_churn_logs_once_per_state_change() {
    let hostile = Hostile::start("tools/list", Some(Fault::Churn), GetStream::Refuse).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("churn.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  audit_interval: 200ms\n  ping_interval: 200ms\n  request_timeout: 200ms\n  notification_grace: 1s\n\
             targets:\n  - name: churny\n    url: {}\n",
            hostile.url()
        ),
    )
    .expect("config");
    let exporter = common::Exporter::spawn(&[format!("--config.file={}", config.display())], &[]);
    exporter
        .until_metrics("20 audits of the churning server", |s| {
            s.get(
                "mcp_probe_cache_consistency_checks_total",
                &[t("churny"), C0],
            )
            .is_some_and(|n| n >= 20.0)
        })
        .await;
    // The list changes every 200 ms, within the 1 s grace of the change before: the grace of the
    // first change still runs out, so the churn is unannounced (it was never counted before).
    exporter
        .until_metrics("the churn counted as unannounced", |s| {
            s.get("mcp_probe_unannounced_changes_total", &[t("churny"), C0])
                .is_some_and(|n| n >= 2.0)
        })
        .await;
    let logs = exporter.logs();
    eprintln!(
        "measured: {} bytes, {} lines of logs over 20 audits of a churning server",
        logs.len(),
        logs.lines().count()
    );
    for line in logs.lines() {
        assert!(
            line.matches(" target=").count() <= 1,
            "a logfmt line with two target keys: {line}"
        );
    }
    let differs: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("cache differs from server"))
        .collect();
    assert_eq!(
        differs.len(),
        1,
        "one line for one ongoing state:\n{}",
        differs.join("\n")
    );
    assert!(differs[0].contains("and 295 more"), "{}", differs[0]);
    assert!(differs[0].len() < 2_000, "{} bytes", differs[0].len());
    let unannounced = logs
        .lines()
        .filter(|l| l.contains("without list_changed"))
        .count();
    assert_eq!(unannounced, 1, "{logs}");
    assert!(
        logs.len() < 64 * 1024,
        "{} bytes of logs for 20 audits",
        logs.len()
    );
}
