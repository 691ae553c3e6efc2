//! Proxy benchmark (not a test: it prints numbers and asserts nothing). What passive mode costs the
//! clients it sits in front of, measured side by side with direct calls in one run:
//!
//! 1. **Added latency.** `mcp_exporter lab --scenario paginated` (a process of its own) is the
//!    upstream; the exporter (another process) runs a proxy in front of it. Two legacy sessions,
//!    one direct and one through the proxy, each get `tools/call kb_stats` and `tools/list` at
//!    `--rate` requests/s per side (default 1,000), open loop, interleaved (direct, proxied,
//!    direct, …), for `--seconds` per round, `--rounds` rounds. Latency is the client's, from
//!    sending the request to the whole answer read. Per round: p50 and p99 of each side and their
//!    difference (what the proxy adds); reported: the median over rounds.
//! 2. **SSE forwarding delay.** An SSE source in this process streams an event every millisecond,
//!    each stamped with the instant it was written; a second proxy forwards it. One reader
//!    directly and one through the proxy read at the same time; an event's delay is its arrival
//!    minus its stamp (one process, one clock). What the proxy adds: the difference.
//! 3. **Idle sessions.** `--sessions` (10,000) legacy sessions opened through the proxy and left
//!    idle: the exporter's RSS before and after, per session; then every one of them answers a
//!    `ping` through the proxy, to show that many concurrent sessions are served.
//!
//! ```sh
//! cargo bench --bench proxy
//! cargo bench --bench proxy -- --rate 1000 --seconds 5 --rounds 3 --sessions 10000
//! cargo bench --bench proxy -- --exporter /path/to/other/mcp_exporter   # before/after
//! ```
//!
//! Every wait is bounded; the lab and the exporter are killed when the run ends. On a shared box
//! the numbers move with the load: read medians, run before/after side by side.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

mod common;
use common::{args_or_exit, free_port, proc_sample, quantile, runtime, spawn_exporter, sum};

struct Args {
    rate: u32,
    seconds: u64,
    rounds: usize,
    sessions: usize,
    sse_seconds: u64,
    exporter: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        rate: 1000,
        seconds: 5,
        rounds: 3,
        sessions: 10_000,
        sse_seconds: 5,
        exporter: PathBuf::from(env!("CARGO_BIN_EXE_mcp_exporter")),
    };
    let mut it = common::bench_args();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--rate" => a.rate = number(value()?)?.clamp(1, 20_000) as u32,
            "--seconds" => a.seconds = number(value()?)?.max(1),
            "--rounds" => a.rounds = number(value()?)?.max(1) as usize,
            "--sessions" => a.sessions = number(value()?)? as usize,
            "--sse-seconds" => a.sse_seconds = number(value()?)?.max(1),
            "--exporter" => a.exporter = PathBuf::from(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn main() {
    let args = args_or_exit("proxy bench", parse_args());
    // Two workers: the client side must keep up with 2,000 requests/s without queueing.
    runtime(2).block_on(run(args));
}

/// A child process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (at most 30 s) until 127.0.0.1:`port` accepts connections.
async fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not listen on 127.0.0.1:{port} within 30 s");
}

async fn run(args: Args) {
    let dir = std::env::temp_dir().join(format!("mcp_exporter_proxy_bench_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    // The upstream: the lab binary, 14 tools over two pages, no churn.
    let lab_port = free_port();
    let mut lab = Proc(
        Command::new(&args.exporter)
            .args(["lab", "--scenario", "paginated", "--era", "legacy"])
            .arg(format!("--listen=127.0.0.1:{lab_port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("lab starts"),
    );
    let mut line = String::new();
    BufReader::new(lab.0.stdout.take().expect("lab stdout"))
        .read_line(&mut line)
        .expect("lab prints its URL");
    let upstream = line.trim().to_string();
    wait_listening(lab_port, "the lab").await;

    // The SSE source, in this process (one clock for stamps and arrivals).
    let base = Instant::now();
    let sse_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let sse_port = sse_listener.local_addr().expect("addr").port();
    tokio::spawn(serve_sse(sse_listener, base));
    let sse_upstream = format!("http://127.0.0.1:{sse_port}/sse/mcp");

    // The exporter with two proxies.
    let (proxy_port, sse_proxy_port, web_port) = (free_port(), free_port(), free_port());
    let config = dir.join("proxy.yml");
    std::fs::write(
        &config,
        format!(
            "proxies:\n  - name: lab\n    listen: 127.0.0.1:{proxy_port}\n    upstream: {upstream}\n    max_sessions: {}\n  - name: sse\n    listen: 127.0.0.1:{sse_proxy_port}\n    upstream: {sse_upstream}\n",
            args.sessions.max(1000) * 2
        ),
    )
    .expect("config written");
    let exporter = Proc(spawn_exporter(&args.exporter, &config, web_port));
    let pid = exporter.0.id();
    wait_listening(proxy_port, "the proxy").await;
    wait_listening(sse_proxy_port, "the SSE proxy").await;
    let proxied = upstream.replacen(&lab_port.to_string(), &proxy_port.to_string(), 1);
    let metrics = format!("http://127.0.0.1:{web_port}/metrics");

    println!(
        "# proxy bench: {} requests/s per side, {} s x {} rounds; SSE {} s; {} idle sessions; exporter {}\n",
        args.rate,
        args.seconds,
        args.rounds,
        args.sse_seconds,
        args.sessions,
        args.exporter.display()
    );
    println!("load average at start: {}\n", load_average());

    // 1. Added latency, per method.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("client");
    let direct = Session::open(&http, &upstream, "bench-direct")
        .await
        .expect("a direct session");
    let through = Session::open(&http, &proxied, "bench-proxied")
        .await
        .expect("a session through the proxy");
    println!("## Added latency (loopback, open loop, interleaved)\n");
    println!(
        "| request | round | direct p50 | proxied p50 | added p50 | direct p99 | proxied p99 | added p99 | p50 ratio | errors |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (label, method, params) in [
        (
            "tools/call",
            "tools/call",
            serde_json::json!({"name": "kb_stats", "arguments": {}}),
        ),
        ("tools/list", "tools/list", serde_json::Value::Null),
    ] {
        let mut rounds = Vec::new();
        // A warm-up second (connections opened, caches filled), not counted.
        side_by_side(&http, &direct, &through, method, &params, args.rate, 1).await;
        for round in 1..=args.rounds {
            let r = side_by_side(
                &http,
                &direct,
                &through,
                method,
                &params,
                args.rate,
                args.seconds,
            )
            .await;
            println!(
                "| {label} | {round} | {} | {} | {} | {} | {} | {} | {:.2} | {} |",
                ms(r.direct_p50),
                ms(r.proxied_p50),
                ms(r.proxied_p50 - r.direct_p50),
                ms(r.direct_p99),
                ms(r.proxied_p99),
                ms(r.proxied_p99 - r.direct_p99),
                r.proxied_p50 / r.direct_p50,
                r.errors
            );
            rounds.push(r);
        }
        let med = |f: fn(&Latency) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
        println!(
            "| **{label}** | median | {} | {} | **{}** | {} | {} | **{}** | {:.2} | {} |",
            ms(med(|r| r.direct_p50)),
            ms(med(|r| r.proxied_p50)),
            ms(med(|r| r.proxied_p50 - r.direct_p50)),
            ms(med(|r| r.direct_p99)),
            ms(med(|r| r.proxied_p99)),
            ms(med(|r| r.proxied_p99 - r.direct_p99)),
            med(|r| r.proxied_p50 / r.direct_p50),
            rounds.iter().map(|r| r.errors).sum::<usize>()
        );
    }

    // 2. SSE forwarding delay.
    let sse_direct = tokio::spawn(read_sse(sse_upstream.clone(), base, args.sse_seconds));
    let sse_through = tokio::spawn(read_sse(
        format!("http://127.0.0.1:{sse_proxy_port}/sse/mcp"),
        base,
        args.sse_seconds,
    ));
    let (d, p) = (
        sse_direct.await.expect("join"),
        sse_through.await.expect("join"),
    );
    println!("\n## SSE event forwarding delay (an event every ms, stamped at the source)\n");
    println!("| path | events | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    for (label, v) in [("direct", &d), ("through the proxy", &p)] {
        println!(
            "| {label} | {} | {} | {} | {} |",
            v.len(),
            ms(quantile(v, 0.5)),
            ms(quantile(v, 0.99)),
            ms(v.iter().cloned().fold(f64::NAN, f64::max))
        );
    }
    println!(
        "| **added by the proxy** | | **{}** | **{}** | |",
        ms(quantile(&p, 0.5) - quantile(&d, 0.5)),
        ms(quantile(&p, 0.99) - quantile(&d, 0.99))
    );

    // 3. Idle sessions.
    if args.sessions > 0 {
        idle_sessions(&http, &proxied, &metrics, pid, args.sessions).await;
    }
    println!("\nload average at end: {}", load_average());
    drop(exporter);
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A legacy session: its URL and id.
struct Session {
    url: String,
    id: String,
}

impl Session {
    async fn open(http: &reqwest::Client, url: &str, name: &str) -> Result<Session, String> {
        let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": name, "version": "1"}}});
        let resp = post(http, url, None, init.to_string())
            .await
            .map_err(|e| e.to_string())?;
        let id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or("no session id")?
            .to_string();
        resp.bytes().await.map_err(|e| e.to_string())?;
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        post(http, url, Some(&id), note.into())
            .await
            .map_err(|e| e.to_string())?
            .bytes()
            .await
            .map_err(|e| e.to_string())?;
        Ok(Session {
            url: url.to_string(),
            id,
        })
    }

    /// One request, answered whole: its latency, or `None` on any failure.
    async fn time(&self, http: &reqwest::Client, body: String) -> Option<f64> {
        let t = Instant::now();
        let resp = post(http, &self.url, Some(&self.id), body).await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        resp.bytes().await.ok()?;
        Some(t.elapsed().as_secs_f64())
    }
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: String,
) -> reqwest::Result<reqwest::Response> {
    let mut b = http
        .post(url)
        .timeout(Duration::from_secs(10))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(id) = session {
        b = b.header("mcp-session-id", id);
    }
    b.body(body).send().await
}

struct Latency {
    direct_p50: f64,
    proxied_p50: f64,
    direct_p99: f64,
    proxied_p99: f64,
    errors: usize,
}

/// `rate` requests/s to each side for `seconds`, interleaved, open loop: each request starts at
/// its scheduled time whether or not the previous one has answered.
async fn side_by_side(
    http: &reqwest::Client,
    direct: &Session,
    through: &Session,
    method: &str,
    params: &serde_json::Value,
    rate: u32,
    seconds: u64,
) -> Latency {
    let n = rate as u64 * seconds * 2;
    let step = Duration::from_secs_f64(1.0 / (rate as f64 * 2.0));
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(n as usize);
    for i in 0..n {
        tokio::time::sleep_until(start + step * i as u32).await;
        let mut req = serde_json::json!({"jsonrpc": "2.0", "id": i + 1, "method": method});
        if !params.is_null() {
            req["params"] = params.clone();
        }
        let (http, s) = (http.clone(), if i % 2 == 0 { direct } else { through });
        let (url, id) = (s.url.clone(), s.id.clone());
        tasks.push(tokio::spawn(async move {
            let s = Session { url, id };
            (i % 2 == 1, s.time(&http, req.to_string()).await)
        }));
    }
    let (mut d, mut p, mut errors) = (Vec::new(), Vec::new(), 0);
    for t in tasks {
        match t.await.expect("join") {
            (false, Some(v)) => d.push(v),
            (true, Some(v)) => p.push(v),
            (_, None) => errors += 1,
        }
    }
    Latency {
        direct_p50: quantile(&d, 0.5),
        proxied_p50: quantile(&p, 0.5),
        direct_p99: quantile(&d, 0.99),
        proxied_p99: quantile(&p, 0.99),
        errors,
    }
}

/// The SSE source: a GET is answered with an endless event stream, an event a millisecond, each
/// carrying the nanoseconds since `base` at which it was written. Anything else is 405 (the
/// proxy's catalog walk fails, which this bench does not need).
async fn serve_sse(listener: TcpListener, base: Instant) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            if !head.starts_with(b"GET ") {
                let _ = conn
                    .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
                return;
            }
            let hdr = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
            if conn.write_all(hdr.as_bytes()).await.is_err() {
                return;
            }
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            for _ in 0..600_000u32 {
                tick.tick().await;
                let t = base.elapsed().as_nanos();
                let event = format!(
                    "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"level\":\"info\",\"data\":{t}}}}}\n\n"
                );
                if conn.write_all(event.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Reads the SSE stream at `url` for `seconds`; the delay of each event (arrival minus stamp).
async fn read_sse(url: String, base: Instant, seconds: u64) -> Vec<f64> {
    use futures_util::StreamExt;
    let http = reqwest::Client::new();
    let Ok(resp) = http
        .get(&url)
        .header("accept", "text/event-stream")
        .timeout(Duration::from_secs(seconds + 10))
        .send()
        .await
    else {
        eprintln!("proxy bench: cannot open {url}");
        return Vec::new();
    };
    let mut stream = resp.bytes_stream();
    let mut pending = Vec::new();
    let mut delays = Vec::new();
    let end = Instant::now() + Duration::from_secs(seconds);
    // The first events (the stream opening) are not counted.
    let skip_until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < end {
        let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(2), stream.next()).await
        else {
            break;
        };
        let now = base.elapsed().as_nanos() as f64;
        pending.extend_from_slice(&chunk);
        while let Some(pos) = pending.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = pending.drain(..pos + 2).collect();
            let text = String::from_utf8_lossy(&event);
            let stamp = text
                .rsplit("\"data\":")
                .next()
                .and_then(|s| s.split(['}', ',']).next())
                .and_then(|s| s.trim().parse::<f64>().ok());
            if let (Some(stamp), true) = (stamp, Instant::now() > skip_until) {
                delays.push((now - stamp) / 1e9);
            }
        }
        if pending.len() > 1 << 20 {
            pending.clear();
        }
    }
    delays
}

/// Opens `n` sessions through the proxy (16 at a time), measures the exporter's RSS before and
/// after, then has every one of them answer a ping.
async fn idle_sessions(http: &reqwest::Client, url: &str, metrics: &str, pid: u32, n: usize) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss0 = proc_sample(pid).map(|s| s.0).unwrap_or(0);
    let tracked0 = tracked(http, metrics).await;
    let t = Instant::now();
    let workers = 16;
    let url: Arc<str> = url.into();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (http, url) = (http.clone(), url.clone());
        let count = n / workers + usize::from(w < n % workers);
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::with_capacity(count);
            for _ in 0..count {
                if let Ok(s) = Session::open(&http, &url, "bench-idle").await {
                    ids.push(s.id);
                }
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.extend(t.await.expect("join"));
    }
    let opened_in = t.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss1 = proc_sample(pid).map(|s| s.0).unwrap_or(0);
    let tracked1 = tracked(http, metrics).await;

    let t = Instant::now();
    let ids: Arc<Vec<String>> = Arc::new(ids);
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (http, url, ids) = (http.clone(), url.clone(), ids.clone());
        tasks.push(tokio::spawn(async move {
            let mut ok = 0usize;
            for (i, id) in ids.iter().enumerate().filter(|(i, _)| i % workers == w) {
                let s = Session {
                    url: url.to_string(),
                    id: id.clone(),
                };
                let ping = format!(r#"{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#, i + 1);
                ok += usize::from(s.time(&http, ping).await.is_some());
            }
            ok
        }));
    }
    let mut answered = 0;
    for t in tasks {
        answered += t.await.expect("join");
    }
    let pinged_in = t.elapsed();
    let rss2 = proc_sample(pid).map(|s| s.0).unwrap_or(0);
    println!("\n## Idle client sessions through the proxy\n");
    println!(
        "| sessions opened | tracked (mcp_proxy_sessions) | opened in | exporter RSS before | after | per idle session | pings answered | pinged in | RSS after pings |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {:.1} s | {:.1} MiB | {:.1} MiB | **{:.0} B** | {} of {} | {:.1} s | {:.1} MiB |",
        ids.len(),
        tracked1 - tracked0,
        opened_in.as_secs_f64(),
        mib(rss0),
        mib(rss1),
        (rss1 as f64 - rss0 as f64) / ids.len().max(1) as f64,
        answered,
        ids.len(),
        pinged_in.as_secs_f64(),
        mib(rss2)
    );
}

async fn tracked(http: &reqwest::Client, metrics: &str) -> f64 {
    match http.get(metrics).send().await {
        Ok(r) => sum(
            &r.text().await.unwrap_or_default(),
            "mcp_proxy_sessions",
            "proxy=\"lab\"",
        ),
        Err(_) => f64::NAN,
    }
}

fn median(values: &[f64]) -> f64 {
    quantile(values, 0.5)
}

fn ms(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
