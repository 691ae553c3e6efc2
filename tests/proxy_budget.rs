//! The proxy's file-descriptor budget, against the release of the issue-22 attack: the binary
//! under `ulimit -n 1024`, a hanging upstream on loopback, ~1,000 client requests held through the
//! proxy, and the exporter's own `/metrics` scraped meanwhile. Every scrape must answer 200: the
//! proxy's connection cap is lowered at start so a reserve of descriptors stays for the
//! exporter's port (see `src/proxy/budget.rs`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Exporter, free_port};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Client requests held through the proxy.
const HELD: usize = 1000;
/// Scrapes of `/metrics` while they are held.
const SCRAPES: usize = 50;
/// Time for the attack to be in place (every request held upstream or turned away).
const SETTLE_DEADLINE: Duration = Duration::from_secs(90);
/// Time one scrape may take before it counts as failed.
const SCRAPE_DEADLINE: Duration = Duration::from_secs(10);

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"held","version":"1"}}}"#;

/// Raise this process's soft open-files limit (it holds the clients and the upstream's side);
/// `false` when the hard limit does not allow enough.
fn raise_own_limit(want: u64) -> bool {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write one `rlimit` local.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return false;
        }
        if r.rlim_cur >= want {
            return true;
        }
        if r.rlim_max < want {
            return false;
        }
        r.rlim_cur = want;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r) == 0
    }
}

/// An upstream that reads each request head and never answers; counts the heads it holds.
async fn hanging_upstream() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let held = Arc::new(AtomicUsize::new(0));
    let counted = held.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
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
                counted.fetch_add(1, Ordering::SeqCst);
                // Hold until the proxy gives up on it.
                while matches!(conn.read(&mut buf).await, Ok(n) if n > 0) {}
                counted.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (format!("http://{addr}/mcp"), held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answers_while_the_proxy_holds_a_thousand_requests_at_ulimit_1024() {
    if !raise_own_limit(8192) {
        eprintln!("skipped: this test needs a hard open-files limit of at least 8192");
        return;
    }
    let (upstream, held) = hanging_upstream().await;
    let proxy_port = free_port();
    // The proxy with every default but its addresses (as `proxy --upstream` makes it).
    let config = tempfile::NamedTempFile::new().expect("config file");
    std::fs::write(
        config.path(),
        format!(
            "proxies:\n  - name: kb\n    listen: 127.0.0.1:{proxy_port}\n    upstream: {upstream}\n"
        ),
    )
    .expect("config written");
    let e = Exporter::spawn_under(
        &["sh", "-c", "ulimit -n 1024 && exec \"$0\" \"$@\""],
        &[format!("--config.file={}", config.path().display())],
        &[],
    );
    e.until_metrics("the proxy's series", |s| {
        s.get("mcp_proxy_upstream_up", &[("proxy", "kb")]).is_some()
    })
    .await;

    // The attack: every request complete, none answered by the upstream.
    let settled = Arc::new(AtomicUsize::new(0));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: proxy\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{INIT}",
        INIT.len()
    );
    for _ in 0..HELD {
        let settled = settled.clone();
        let request = request.clone();
        tokio::spawn(async move {
            let sent = async {
                let mut c = tokio::net::TcpStream::connect(("127.0.0.1", proxy_port)).await?;
                c.write_all(request.as_bytes()).await?;
                let mut buf = [0u8; 1024];
                // Returns when the proxy answers (502, 504) or closes the connection.
                c.read(&mut buf).await
            };
            let _ = sent.await;
            settled.fetch_add(1, Ordering::SeqCst);
        });
    }
    // In place when each request is held upstream or was answered / turned away by the proxy.
    let start = tokio::time::Instant::now();
    loop {
        let (h, s) = (held.load(Ordering::SeqCst), settled.load(Ordering::SeqCst));
        if h + s >= HELD {
            break;
        }
        assert!(
            start.elapsed() < SETTLE_DEADLINE,
            "the attack did not settle: {h} held upstream, {s} answered or closed of {HELD}\n{}",
            e.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let held_now = held.load(Ordering::SeqCst);
    assert!(held_now > 0, "no request is held upstream: not the attack");

    let scraper = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(SCRAPE_DEADLINE)
        .build()
        .expect("client");
    let mut failed = Vec::new();
    for i in 0..SCRAPES {
        match scraper.get(format!("{}/metrics", e.base)).send().await {
            Ok(r) if r.status() == 200 => {}
            Ok(r) => failed.push(format!("scrape {i}: {}", r.status())),
            Err(err) => failed.push(format!("scrape {i}: {err}")),
        }
    }
    let still = held.load(Ordering::SeqCst);
    eprintln!(
        "held upstream: {held_now} at the start, {still} at the end; scrapes failed: {} of {SCRAPES}",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {SCRAPES} scrapes failed while {still} requests were held: {:?}\n{}",
        failed.len(),
        &failed[..failed.len().min(5)],
        e.logs()
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(still > 0, "the requests were still held during the scrapes");
}
