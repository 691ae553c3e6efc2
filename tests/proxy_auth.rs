//! The proxy's catalog session authenticates like a target, and only it: in front of an upstream
//! that wants credentials (the lab behind a gate that checks `Authorization`), the catalog walks
//! with the proxy's own `http_config` / `headers` (`--http-config` / `--header` on the command
//! line) while each client's own `Authorization` passes through unchanged; the catalog's secret
//! never rides on a client's forwarded request, nor shows in /metrics, the status page or logs.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use common::proxy_lab::{bare_proxy, until_scraped};
use common::{DEADLINE, Exporter, Scrape, free_port, start_lab};
use mcp_exporter::config::parse_http_config;
use mcp_exporter::proxy::Proxy;
use mcp_exporter::telemetry::Telemetry;
use mcp_lab::{Behaviour, Lab};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

const PROFILE: &str = "kb";
/// The catalog's credential: must never leave the catalog session.
const CATALOG_SECRET: &str = "catalog-s3cr3t-7f1d";
/// A client's own credential.
const CLIENT_TOKEN: &str = "client-token-92ab";

/// One request the gate saw.
#[derive(Debug, Clone)]
struct Seen {
    authorization: Vec<String>,
    /// The JSON-RPC method of a POST, if its body is one.
    rpc: Option<String>,
    /// The catalog secret appears in some header value or the body.
    carries_secret: bool,
    /// `X-Tenant`, the header the command-line test configures with `--header`.
    tenant: Option<String>,
}

/// The lab behind a gate that forwards only requests with one of `accepted` as their one
/// `Authorization` header, and refuses the rest as a bearer-protected resource does (401).
struct Gate {
    url: url::Url,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn gate(lab: &Lab, accepted: Vec<String>) -> Gate {
    let upstream = lab.url(PROFILE);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let app = axum::Router::new().fallback({
        let seen = seen.clone();
        move |req: Request<Body>| {
            let (seen, accepted, http, upstream) = (
                seen.clone(),
                accepted.clone(),
                http.clone(),
                upstream.clone(),
            );
            async move {
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20)
                    .await
                    .unwrap_or_default();
                let authorization: Vec<String> = parts
                    .headers
                    .get_all("authorization")
                    .iter()
                    .map(|v| v.to_str().unwrap_or("").to_string())
                    .collect();
                let carries_secret = parts
                    .headers
                    .values()
                    .any(|v| String::from_utf8_lossy(v.as_bytes()).contains(CATALOG_SECRET))
                    || String::from_utf8_lossy(&body).contains(CATALOG_SECRET)
                    || authorization.iter().any(|a| basic_has_secret(a));
                let rpc = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v.get("method").and_then(|m| m.as_str()).map(String::from));
                let tenant = parts
                    .headers
                    .get("x-tenant")
                    .map(|v| v.to_str().unwrap_or("").to_string());
                seen.lock().unwrap().push(Seen {
                    authorization: authorization.clone(),
                    rpc,
                    carries_secret,
                    tenant,
                });
                if authorization.len() != 1 || !accepted.contains(&authorization[0]) {
                    return Response::builder()
                        .status(StatusCode::UNAUTHORIZED)
                        .header("www-authenticate", "Bearer realm=\"mcp\"")
                        .body(Body::empty())
                        .unwrap();
                }
                let mut out = http.request(parts.method, upstream.clone());
                for (name, value) in &parts.headers {
                    if !matches!(name.as_str(), "host" | "content-length" | "authorization") {
                        out = out.header(name, value);
                    }
                }
                let resp = match out.body(body).send().await {
                    Ok(r) => r,
                    Err(_) => {
                        return Response::builder()
                            .status(StatusCode::BAD_GATEWAY)
                            .body(Body::empty())
                            .unwrap();
                    }
                };
                let mut answer = Response::builder().status(resp.status());
                for (name, value) in resp.headers() {
                    if !matches!(
                        name.as_str(),
                        "content-length" | "transfer-encoding" | "connection"
                    ) {
                        answer = answer.header(name, value);
                    }
                }
                answer.body(Body::from_stream(resp.bytes_stream())).unwrap()
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Gate {
        url: format!("http://{addr}/{PROFILE}/mcp").parse().unwrap(),
        seen,
    }
}

/// A `Basic` credential whose decoded pair holds the catalog secret.
fn basic_has_secret(authorization: &str) -> bool {
    use base64::Engine as _;
    authorization
        .strip_prefix("Basic ")
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .is_some_and(|pair| String::from_utf8_lossy(&pair).contains(CATALOG_SECRET))
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// An rmcp client on `url` sending `Authorization: Bearer <token>` (none: no header).
async fn client(
    url: &str,
    name: &str,
    token: Option<&str>,
) -> Result<RunningService<RoleClient, ClientConfig>, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(token) = token {
        config = config.auth_header(token.to_string());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(name, "1.0"),
    );
    let client = info.serve(transport).await.map_err(|e| e.to_string())?;
    client
        .set_response_cache_config(rmcp::ClientCacheConfig::disabled())
        .await;
    Ok(client)
}

async fn call(client: &RunningService<RoleClient, ClientConfig>, tool: &str) -> bool {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(
        json!({"query": "q"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    client.call_tool(params).await.is_ok()
}

/// A proxy in front of `upstream` whose catalog session has the http_config `http`.
async fn start_proxy(upstream: url::Url, http: &str) -> (Proxy, Arc<Telemetry>) {
    bare_proxy(upstream, |c| {
        c.http = parse_http_config(http, "http.yml", None, &|_| None).expect("http config");
        c.catalog_refresh_interval = Duration::from_secs(1);
    })
    .await
}

const UP: &str = "mcp_proxy_upstream_up";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_uses_its_own_credentials_and_each_client_its_own() {
    let lab = start_lab([(PROFILE, Behaviour::default())]).await;
    let gate = gate(&lab, vec![bearer(CATALOG_SECRET), bearer(CLIENT_TOKEN)]).await;
    let (proxy, telemetry) = start_proxy(
        gate.url.clone(),
        &format!("authorization:\n  credentials: {CATALOG_SECRET}\n"),
    )
    .await;
    until_scraped(&telemetry, "the catalog up behind the gate", |m| {
        m.v(UP, &[("proxy", "kb")]) == 1.0
    })
    .await;
    assert_eq!(proxy.status().upstream_tools, Some(14));
    assert_eq!(proxy.status().catalog_failure, None);

    let url = format!("http://{}/{PROFILE}/mcp", proxy.addr());
    // A client with its own token: forwarded with it, unchanged.
    let own = client(&url, "own-token", Some(CLIENT_TOKEN))
        .await
        .expect("a client with its own token gets through");
    let tools = own.list_all_tools().await.expect("all pages");
    assert!(tools.iter().any(|t| t.name == "search_legacy"));
    // The upstream swaps a tool; the catalog (with its credentials) sees it, so the cached
    // search_legacy call is judged stale.
    let walks = proxy.status().catalog_walks;
    lab.churn();
    let start = tokio::time::Instant::now();
    while proxy.status().catalog_walks <= walks + 1 {
        assert!(start.elapsed() < DEADLINE, "the catalog never re-walked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !call(&own, "search_legacy").await,
        "the upstream refuses it"
    );
    until_scraped(&telemetry, "the stale call counted", |m| {
        m.v(
            "mcp_proxy_stale_tool_calls_total",
            &[
                ("proxy", "kb"),
                ("client", "own-token"),
                ("tool", "search_legacy"),
            ],
        ) == 1.0
    })
    .await;

    // A client without credentials is refused by the upstream: the catalog's are never lent.
    let bare = client(&url, "no-token", None).await;
    assert!(
        bare.is_err(),
        "a client without a token got through the gate"
    );

    let seen = gate.seen.lock().unwrap().clone();
    let calls: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.rpc.as_deref() == Some("tools/call"))
        .collect();
    assert!(!calls.is_empty(), "{seen:?}");
    for s in &seen {
        assert!(
            s.authorization.len() <= 1,
            "two Authorization headers: {s:?}"
        );
    }
    for c in &calls {
        assert_eq!(c.authorization, [bearer(CLIENT_TOKEN)], "{c:?}");
        assert!(!c.carries_secret, "{c:?}");
    }
    // Every request that carried the catalog's secret is one the catalog makes (it never calls
    // tools), and every request carrying no credentials (the bare client's) went unchanged.
    assert!(seen.iter().any(|s| s.carries_secret));
    assert!(
        seen.iter()
            .any(|s| s.authorization.is_empty() && s.rpc.as_deref() == Some("initialize")),
        "the bare client's initialize was forwarded without credentials: {seen:?}"
    );
    for s in seen
        .iter()
        .filter(|s| s.authorization == [bearer(CLIENT_TOKEN)])
    {
        assert!(!s.carries_secret, "{s:?}");
    }
    let exposed = telemetry.render() + &serde_json::to_string(&proxy.status()).unwrap();
    assert!(!exposed.contains(CATALOG_SECRET), "{exposed}");
    own.cancel().await.ok();
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credentials_the_catalog_is_down_with_a_reason_and_clients_still_pass() {
    let lab = start_lab([(PROFILE, Behaviour::default())]).await;
    let gate = gate(&lab, vec![bearer(CATALOG_SECRET), bearer(CLIENT_TOKEN)]).await;
    let (proxy, telemetry) = start_proxy(gate.url.clone(), "{}").await;
    until_scraped(&telemetry, "a catalog walk tried", |_| {
        proxy.status().catalog_walks >= 1
    })
    .await;
    let m = Scrape::parse(&telemetry.render());
    assert_eq!(m.v(UP, &[("proxy", "kb")]), 0.0);
    let why = proxy.status().catalog_failure.expect("a reason");
    assert!(why.starts_with("auth: ") && why.contains("401"), "{why}");
    // The proxy still forwards a client's own credentials.
    let url = format!("http://{}/{PROFILE}/mcp", proxy.addr());
    let own = client(&url, "own-token", Some(CLIENT_TOKEN))
        .await
        .expect("a client with its own token gets through");
    assert_eq!(own.list_all_tools().await.expect("all pages").len(), 14);
    own.cancel().await.ok();
    proxy.stop().await;
}

/// `mcp_exporter proxy --http-config FILE --header …`, as `check` takes them: basic auth from a
/// file for the catalog; a wrong password reads as a clear reason in the log; the secret is in
/// neither the logs nor /metrics nor the status page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_subcommand_takes_checks_flags_and_never_shows_the_secret() {
    use base64::Engine as _;
    let lab = start_lab([(PROFILE, Behaviour::default())]).await;
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("catalog:{CATALOG_SECRET}"))
    );
    let gate = gate(&lab, vec![basic]).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("password"), format!("{CATALOG_SECRET}\n")).unwrap();
    std::fs::write(dir.path().join("wrong"), "catalog-wrong-password\n").unwrap();
    let http = |password: &str| {
        let path = dir.path().join(format!("{password}.yml"));
        std::fs::write(
            &path,
            format!("basic_auth:\n  username: catalog\n  password_file: {password}\n"),
        )
        .unwrap();
        path.display().to_string()
    };
    let run = |file: String| {
        Exporter::spawn(
            &[
                "proxy".into(),
                "--upstream".into(),
                gate.url.to_string(),
                "--listen".into(),
                format!("127.0.0.1:{}", free_port()),
                "--http-config".into(),
                file,
                "--header".into(),
                "X-Tenant: ${PROXY_AUTH_TEST_TENANT}".into(),
            ],
            &[("PROXY_AUTH_TEST_TENANT", "blue")],
        )
    };
    let good = run(http("password"));
    good.until_metrics("the catalog up with basic auth", |m| {
        m.v(UP, &[("proxy", "default")]) == 1.0
    })
    .await;
    let bad = run(http("wrong"));
    let logs = {
        let start = tokio::time::Instant::now();
        loop {
            let logs = bad.logs();
            if logs.contains("proxy catalog session to the upstream is down") {
                break logs;
            }
            assert!(start.elapsed() < DEADLINE, "no reason logged:\n{logs}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    assert!(logs.contains("reason=auth"), "{logs}");
    bad.until_metrics("the catalog down with a wrong password", |m| {
        m.get(UP, &[("proxy", "default")]) == Some(0.0)
    })
    .await;
    let page = common::get(&format!("{}/proxy", bad.base))
        .await
        .unwrap_or_default();
    assert!(page.contains("catalog session down: auth"), "{page}");
    let seen = gate.seen.lock().unwrap().clone();
    assert!(
        seen.iter().any(|s| s.carries_secret),
        "the catalog never sent its credentials"
    );
    assert!(
        seen.iter().all(|s| s.tenant.as_deref() == Some("blue")),
        "the catalog sends its --header on every request: {seen:?}"
    );
    for e in [&good, &bad] {
        let shown = [
            e.logs(),
            common::get(&format!("{}/metrics", e.base))
                .await
                .unwrap_or_default(),
            common::get(&format!("{}/proxy.json", e.base))
                .await
                .unwrap_or_default(),
            common::get(&format!("{}/proxy", e.base))
                .await
                .unwrap_or_default(),
        ]
        .concat();
        assert!(!shown.contains(CATALOG_SECRET), "secret shown:\n{shown}");
        assert!(
            !shown.contains("catalog-wrong-password"),
            "secret shown:\n{shown}"
        );
    }
}
