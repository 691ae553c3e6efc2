//! A proxy in front of the lab's knowledge-base server (14 tools, pages of 8), in-process, for
//! the passive-mode tests: started, its catalog walked, its series scraped and waited on with a
//! deadline. One harness for `tests/proxy*.rs`, each adding the clients it needs.

use std::sync::Arc;
use std::time::Duration;

use mcp_exporter::config::McpProxyConfig;
use mcp_exporter::proxy::Proxy;
use mcp_exporter::telemetry::Telemetry;
use mcp_lab::{Behaviour, Lab};

use super::{DEADLINE, Scrape, start_lab};

/// The lab profile behind the proxy (its path is `/kb/mcp`).
pub const PROFILE: &str = "kb";

pub struct ProxyLab {
    pub lab: Lab,
    pub proxy: Proxy,
    pub telemetry: Arc<Telemetry>,
}

impl ProxyLab {
    /// A proxy `kb` with every default but what `adjust` changes.
    pub async fn new(adjust: impl FnOnce(&mut McpProxyConfig)) -> ProxyLab {
        ProxyLab::with(Behaviour::default(), adjust).await
    }

    /// A proxy in front of a lab that behaves as `behaviour` says, once its catalog walked.
    pub async fn with(behaviour: Behaviour, adjust: impl FnOnce(&mut McpProxyConfig)) -> ProxyLab {
        let lab = start_lab([(PROFILE, behaviour)]).await;
        let (proxy, telemetry) = bare_proxy(lab.url(PROFILE), adjust).await;
        let s = ProxyLab {
            lab,
            proxy,
            telemetry,
        };
        s.until("the catalog walked", |_| {
            s.proxy.status().upstream_tools == Some(14)
        })
        .await;
        s
    }

    /// The MCP endpoint through the proxy.
    pub fn url(&self) -> String {
        format!("http://{}/{PROFILE}/mcp", self.proxy.addr())
    }

    pub fn scrape(&self) -> Scrape {
        Scrape::parse(&self.telemetry.render())
    }

    pub async fn until(&self, what: &str, cond: impl Fn(&Scrape) -> bool) -> Scrape {
        until_scraped(&self.telemetry, what, cond).await
    }
}

/// A proxy `kb` in front of `upstream`, without waiting for its catalog (the upstream may not be
/// MCP, or may need what `adjust` gives it).
pub async fn bare_proxy(
    upstream: url::Url,
    adjust: impl FnOnce(&mut McpProxyConfig),
) -> (Proxy, Arc<Telemetry>) {
    let telemetry = Telemetry::new();
    let mut config = McpProxyConfig::new("kb", "127.0.0.1:0".parse().expect("address"), upstream);
    adjust(&mut config);
    let proxy = Proxy::start(config, telemetry.clone())
        .await
        .expect("proxy starts");
    (proxy, telemetry)
}

/// Scrape `telemetry` until `cond` holds, within [`DEADLINE`] (the scrape is printed if not).
pub async fn until_scraped(
    telemetry: &Telemetry,
    what: &str,
    cond: impl Fn(&Scrape) -> bool,
) -> Scrape {
    let start = tokio::time::Instant::now();
    loop {
        let s = Scrape::parse(&telemetry.render());
        if cond(&s) {
            return s;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out waiting for: {what}\n{}",
            s.text
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A legacy (2025-06-18) client's POST of `body` to `url`, in `session` if given.
pub async fn post_legacy(
    url: &str,
    session: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(id) = session {
        r = r.header("mcp-session-id", id);
    }
    r.body(body).send().await.expect("the proxy answers")
}

/// An HTTP+SSE client's `GET /sse` on `base` (through a proxy), read up to its `endpoint` event:
/// the stream, to read on, and the endpoint's data.
pub async fn sse_stream(base: &str) -> (reqwest::Response, String) {
    let mut stream = reqwest::Client::new()
        .get(format!("{base}/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET /sse");
    assert_eq!(stream.status(), 200);
    let endpoint = sse_endpoint(&mut stream).await;
    (stream, endpoint)
}

/// Read an HTTP+SSE stream up to its `endpoint` event (within [`DEADLINE`]) and return its data.
async fn sse_endpoint(stream: &mut reqwest::Response) -> String {
    tokio::time::timeout(DEADLINE, async {
        let mut seen = String::new();
        while let Some(chunk) = stream.chunk().await.expect("stream readable") {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(rest) = seen.split("event: endpoint").nth(1)
                && let Some(data) = rest.split("data: ").nth(1)
                && let Some((line, _)) = data.split_once('\n')
            {
                return line.trim().to_string();
            }
        }
        panic!("the stream ended before its endpoint event: {seen}");
    })
    .await
    .expect("the endpoint event arrives")
}
