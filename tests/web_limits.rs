//! The exporter's own port against slow, idle and numerous clients, through the binary with
//! short limits set by flags: a request head that never ends and an idle keep-alive connection
//! are closed by the server, and a scrape is served while slow clients fill the connection cap
//! and while idle clients exhaust the open-file limit.

mod common;

use common::{DEADLINE, Exporter, Scrape, closed_by_server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CLOSED: &str = "mcp_exporter_web_connections_closed_total";

/// An exporter with no targets and `flags`; returns once it serves `/metrics`.
async fn exporter(flags: &[&str], dir: &tempfile::TempDir) -> Exporter {
    exporter_under(&[], flags, dir).await
}

async fn exporter_under(wrapper: &[&str], flags: &[&str], dir: &tempfile::TempDir) -> Exporter {
    let config = dir.path().join("mcp_exporter.yml");
    std::fs::write(&config, "targets: []\n").unwrap();
    let mut args = vec![format!("--config.file={}", config.display())];
    args.extend(flags.iter().map(|f| f.to_string()));
    let e = Exporter::spawn_under(wrapper, &args, &[]);
    e.until_metrics("the exporter serves", |s| {
        s.v("mcp_exporter_config_last_reload_successful", &[]) == 1.0
    })
    .await;
    e
}

fn address(e: &Exporter) -> &str {
    e.base.trim_start_matches("http://")
}

/// A scrape on a new connection, with the test's deadline.
async fn scrape(e: &Exporter) -> Scrape {
    let resp = reqwest::Client::new()
        .get(format!("{}/metrics", e.base))
        .timeout(DEADLINE)
        .send()
        .await
        .unwrap_or_else(|err| panic!("scrape failed: {err}\n--- logs ---\n{}", e.logs()));
    assert_eq!(resp.status(), 200);
    Scrape::parse(&resp.text().await.unwrap())
}

fn lines_with(logs: &str, needle: &str) -> usize {
    logs.lines().filter(|l| l.contains(needle)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_that_never_ends_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(
        &["--web.header-read-timeout=300ms", "--web.idle-timeout=1h"],
        &dir,
    )
    .await;
    let conn = TcpStream::connect(address(&e)).await.unwrap();
    let (mut rd, mut wr) = conn.into_split();
    // Slowloris: the head goes on forever, one byte every 50 ms, so the connection is never
    // idle; only the header-read timeout can end it.
    let trickle = tokio::spawn(async move {
        let _ = wr
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nX-Slow: ")
            .await;
        while wr.write_all(b"x").await.is_ok() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
    assert!(
        closed_by_server(&mut rd).await,
        "a request head trickled for {DEADLINE:?} was not closed"
    );
    trickle.abort();
    e.until_metrics("the close counted", |s| {
        s.v(CLOSED, &[("reason", "header_read_timeout")]) >= 1.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let e = exporter(
        &["--web.idle-timeout=300ms", "--web.header-read-timeout=1h"],
        &dir,
    )
    .await;
    let mut conn = TcpStream::connect(address(&e)).await.unwrap();
    conn.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&answer).contains("Healthy\n") {
        let n = tokio::time::timeout(DEADLINE, conn.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "closed before answering");
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(
        closed_by_server(&mut conn).await,
        "an idle keep-alive connection stayed open for {DEADLINE:?}"
    );
    e.until_metrics("the close counted", |s| {
        s.v(CLOSED, &[("reason", "idle_timeout")]) >= 1.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_is_served_while_slow_clients_fill_the_connection_cap() {
    const CAP: usize = 4;
    const SLOW: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let cap = format!("--web.max-connections={CAP}");
    // Timeouts out of the way: only the cap's eviction can make room.
    let mut e = exporter(
        &[
            &cap,
            "--web.header-read-timeout=1h",
            "--web.idle-timeout=1h",
        ],
        &dir,
    )
    .await;
    let mut slow = Vec::new();
    for _ in 0..SLOW {
        let mut c = TcpStream::connect(address(&e)).await.unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n")
            .await
            .unwrap();
        slow.push(c);
    }
    let s = scrape(&e).await;
    // The scrape was accepted after every slow client: each beyond the cap evicted one.
    let evicted = s.v(CLOSED, &[("reason", "evicted")]);
    assert!(evicted >= (SLOW + 1 - CAP) as f64, "evicted {evicted}");
    assert_eq!(s.v(CLOSED, &[("reason", "refused")]), 0.0);
    let logs = e.logs();
    let warned = lines_with(&logs, "connection limit (--web.max-connections) reached");
    assert!(
        (1..=2).contains(&warned),
        "{warned} warnings for {evicted} evictions (one per 30 s expected)\n{logs}"
    );
    // Shutdown is not held up by clients that never finish a request.
    let status = e.terminate();
    assert!(status.success(), "exit status {status:?}");
    drop(slow);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_is_served_when_idle_clients_exhaust_the_open_file_limit() {
    const IDLE: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    // 64 open files, the default cap of 512 connections, no timeouts in reach: only freeing a
    // descriptor on the accept error can let the scrape in.
    let e = exporter_under(
        &["sh", "-c", "ulimit -n 64 && exec \"$0\" \"$@\""],
        &["--web.header-read-timeout=1h", "--web.idle-timeout=1h"],
        &dir,
    )
    .await;
    let mut idle = Vec::new();
    for _ in 0..IDLE {
        idle.push(TcpStream::connect(address(&e)).await.unwrap());
    }
    let s = scrape(&e).await;
    assert!(s.v(CLOSED, &[("reason", "evicted")]) >= 1.0, "{}", s.text);
    let logs = e.logs();
    let warned = lines_with(&logs, "cannot accept connections on --web.listen-address");
    assert!(
        (1..=2).contains(&warned),
        "{warned} accept-error warnings (one per 30 s expected)\n{logs}"
    );
    drop(idle);
}
