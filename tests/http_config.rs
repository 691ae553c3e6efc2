//! A target's `http_config` against real peers: mutual TLS with a private CA made here (the lab
//! behind a TLS terminator that demands a client certificate), rotation of the CA and client
//! certificate files without a restart, `server_name`, static credentials re-read from a file
//! when they are rotated, and the auth failure counters.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{DEADLINE, Harness, start_lab};
use mcp_client::net::refusal::AuthStep;
use mcp_client::target_http::{SendError, TargetHttp};
use mcp_exporter::config::{Config, load_http_config, parse_http_config};
use mcp_lab::Behaviour;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::net::{TcpListener, TcpStream};

/// A private CA and what it signed.
struct Ca {
    pem: String,
    der: CertificateDer<'static>,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

/// A certificate and its key, as PEM.
struct Leaf {
    cert: String,
    key: String,
}

fn ca() -> Ca {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test CA");
    let cert = params.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        der: cert.der().clone(),
        issuer: rcgen::Issuer::new(params, key),
    }
}

fn leaf(ca: &Ca, names: &[&str]) -> Leaf {
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    Leaf {
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A server configuration presenting a certificate for `mcp.internal` only, and requiring a
/// client certificate signed by `ca`.
fn server_config(ca: &Ca) -> Arc<rustls::ServerConfig> {
    let server = leaf(ca, &["mcp.internal"]);
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der.clone()).unwrap();
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .unwrap();
    let chain = vec![CertificateDer::from_pem_slice(server.cert.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(server.key.as_bytes()).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// A TLS terminator in front of `upstream`: mutual TLS with the current server configuration,
/// then bytes copied both ways. Counts completed handshakes per configuration generation.
struct Front {
    addr: SocketAddr,
    config: Arc<Mutex<(usize, Arc<rustls::ServerConfig>)>>,
    handshakes: Arc<[AtomicU64; 2]>,
}

impl Front {
    async fn start(upstream: SocketAddr, config: Arc<rustls::ServerConfig>) -> Front {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let current = Arc::new(Mutex::new((0usize, config)));
        let handshakes: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let (c, h) = (current.clone(), handshakes.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (generation, config) = c.lock().unwrap().clone();
                let h = h.clone();
                tokio::spawn(async move {
                    let acceptor = tokio_rustls::TlsAcceptor::from(config);
                    let accepted =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await;
                    let Ok(Ok(mut tls)) = accepted else { return };
                    h[generation].fetch_add(1, Ordering::Relaxed);
                    let Ok(mut up) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                });
            }
        });
        Front {
            addr,
            config: current,
            handshakes,
        }
    }

    fn switch(&self, config: Arc<rustls::ServerConfig>) {
        *self.config.lock().unwrap() = (1, config);
    }

    fn handshakes(&self, generation: usize) -> u64 {
        self.handshakes[generation].load(Ordering::Relaxed)
    }
}

/// A proxy in front of an upstream that demands mutual TLS with a private CA: the hop to the
/// upstream is the proxy's own connection, so its `tls_config` carries the clients' forwarded
/// requests too (with the platform's roots and no certificate, none could pass), and the
/// catalog walks over the same TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxys_tls_config_carries_its_clients_and_its_catalog_to_a_mutual_tls_upstream() {
    let lab = start_lab([("kb", Behaviour::default())]).await;
    let ca = ca();
    let front = Front::start(lab.addr(), server_config(&ca)).await;
    let dir = tempfile::tempdir().unwrap();
    let client = leaf(&ca, &["proxy"]);
    put(dir.path(), "ca.pem", &ca.pem);
    put(dir.path(), "client.pem", &client.cert);
    put(dir.path(), "client.key", &client.key);
    let http = "tls_config:\n  ca_file: ca.pem\n  cert_file: client.pem\n  key_file: client.key\n  server_name: mcp.internal\n";
    let upstream =
        url::Url::parse(&format!("https://127.0.0.1:{}/kb/mcp", front.addr.port())).unwrap();
    let telemetry = mcp_exporter::telemetry::Telemetry::new();
    let mut config =
        mcp_exporter::config::McpProxyConfig::new("kb", "127.0.0.1:0".parse().unwrap(), upstream);
    config.http =
        parse_http_config(http, "http.yml", Some(dir.path()), &|_| None).expect("http config");
    let proxy = mcp_exporter::proxy::Proxy::start(config, telemetry.clone())
        .await
        .expect("proxy starts");

    // A client that speaks plain HTTP to the proxy reaches the upstream through it.
    let answer = reqwest::Client::new()
        .post(format!("http://{}/kb/mcp", proxy.addr()))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tls-client","version":"1"}}}"#)
        .send()
        .await
        .expect("the proxy answers");
    assert_eq!(
        answer.status(),
        200,
        "forwarded over the proxy's mutual TLS"
    );
    let body = answer.text().await.unwrap();
    assert!(body.contains("serverInfo"), "{body}");

    let start = tokio::time::Instant::now();
    loop {
        let s = common::Scrape::parse(&telemetry.render());
        if s.get("mcp_proxy_upstream_up", &[("proxy", "kb")]) == Some(1.0) {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "catalog up over mutual TLS\n{}",
            s.text
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        front.handshakes(0) >= 2,
        "the client's request and the catalog both shook hands"
    );
}

/// Write `content` to `dir/name` through a rename, as rotation tools do.
fn put(dir: &Path, name: &str, content: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

fn failures(s: &common::Scrape, target: &str, reason: &str) -> f64 {
    s.get(
        "mcp_probe_session_failures_total",
        &[("target", target), ("reason", reason)],
    )
    .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_a_private_ca_rotated_without_a_restart() {
    let lab = start_lab([("kb", Behaviour::default())]).await;
    let first = ca();
    let front = Front::start(lab.addr(), server_config(&first)).await;
    let dir = tempfile::tempdir().unwrap();
    let client = leaf(&first, &["probe"]);
    put(dir.path(), "ca.pem", &first.pem);
    put(dir.path(), "client.pem", &client.cert);
    put(dir.path(), "client.key", &client.key);
    let url = format!("https://127.0.0.1:{}/kb/mcp", front.addr.port());
    let yaml = format!(
        "global:
  audit_interval: 2s
  ping_interval: 500ms
  request_timeout: 500ms
targets:
  - name: kb
    url: {url}
    tls_config:
      ca_file: ca.pem
      cert_file: client.pem
      key_file: client.key
      server_name: mcp.internal
  - name: nocert
    url: {url}
    tls_config:
      ca_file: ca.pem
      server_name: mcp.internal
  - name: noname
    url: {url}
    tls_config:
      ca_file: ca.pem
      cert_file: client.pem
      key_file: client.key
"
    );
    let path = dir.path().join("config.yml");
    std::fs::write(&path, yaml).unwrap();
    let config = Config::load(&path).expect("config loads");
    let mut h = Harness::new();
    h.supervisor.apply(&config);

    // The notification stream rides a socket of its own (net::stream_socket), over the same
    // TLS configuration: client certificate, private CA, server_name.
    h.until(
        "kb up over mutual TLS with its notification stream; nocert and noname refused in the handshake",
        |s| {
            s.v("mcp_probe_up", &[("target", "kb")]) == 1.0
                && s.v("mcp_probe_notification_stream_up", &[("target", "kb")]) == 1.0
                && failures(s, "nocert", "tls") >= 1.0
                && failures(s, "noname", "tls") >= 1.0
        },
    )
    .await;
    assert!(front.handshakes(0) >= 1);
    let s = h.scrape();
    assert_eq!(s.v("mcp_probe_up", &[("target", "nocert")]), 0.0);
    assert_eq!(s.v("mcp_probe_up", &[("target", "noname")]), 0.0);
    // a client certificate is a credential: its failures are counted (nocert has none)
    assert_eq!(
        s.get(
            "mcp_probe_auth_failures_total",
            &[("target", "kb"), ("reason", "credentials")]
        ),
        Some(0.0)
    );
    assert!(
        !s.text
            .contains("mcp_probe_auth_failures_total{target=\"nocert\"")
    );

    // Rotation: a new CA signs the server and the client; the old ones are no longer accepted
    // (nor is the old CA trusted by anyone), so a handshake of the new generation proves the
    // exporter read the new files.
    let second = ca();
    front.switch(server_config(&second));
    let renewed = leaf(&second, &["probe"]);
    put(dir.path(), "ca.pem", &second.pem);
    put(dir.path(), "client.pem", &renewed.cert);
    put(dir.path(), "client.key", &renewed.key);
    let start = tokio::time::Instant::now();
    while front.handshakes(1) == 0 {
        assert!(
            start.elapsed() < DEADLINE,
            "no handshake with the rotated files"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pings = |s: &common::Scrape| {
        s.get("mcp_probe_ping_duration_seconds_count", &[("target", "kb")])
            .unwrap_or(0.0)
    };
    let before = pings(&h.scrape());
    h.until("kb answers liveness checks after the rotation", |s| {
        pings(s) >= before + 2.0 && s.v("mcp_probe_up", &[("target", "kb")]) == 1.0
    })
    .await;

    // A rotation gone wrong (a key of another certificate): refused, counted, and the working
    // client stays in use.
    put(dir.path(), "client.key", &leaf(&second, &["other"]).key);
    let credentials = |s: &common::Scrape| {
        s.v(
            "mcp_probe_auth_failures_total",
            &[("target", "kb"), ("reason", "credentials")],
        )
    };
    let s = h
        .until("the unusable key counted as a credentials failure", |s| {
            credentials(s) >= 1.0
        })
        .await;
    let before = pings(&s);
    h.until("kb still answers with the previous files", |s| {
        pings(s) >= before + 2.0 && s.v("mcp_probe_up", &[("target", "kb")]) == 1.0
    })
    .await;
    h.supervisor.shutdown().await;
}

/// A server that wants `Authorization: Bearer two`. When it sees `Bearer one` it rotates the
/// credentials file to `two` (as a secret manager would, mid-request) and refuses.
async fn rotating_server(file: std::path::PathBuf, seen: Arc<Mutex<Vec<String>>>) -> url::Url {
    use axum::http::{HeaderMap, StatusCode};
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::get(move |headers: HeaderMap| {
            let file = file.clone();
            let seen = seen.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                seen.lock().unwrap().push(auth.clone());
                match auth.as_str() {
                    "Bearer two" => (StatusCode::OK, [("www-authenticate", "")], "ok"),
                    "Bearer one" => {
                        put(file.parent().unwrap(), "token", "two\n");
                        (
                            StatusCode::UNAUTHORIZED,
                            [("www-authenticate", "Bearer")],
                            "",
                        )
                    }
                    _ => (
                        StatusCode::UNAUTHORIZED,
                        [("www-authenticate", "Bearer")],
                        "",
                    ),
                }
            }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp").parse().unwrap()
}

#[tokio::test]
async fn a_rotated_credentials_file_is_sent_on_the_retry_of_the_refused_request() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "token", "one\n");
    let http = dir.path().join("http.yml");
    std::fs::write(&http, "authorization:\n  credentials_file: token\n").unwrap();
    let cfg = load_http_config(&http).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let url = rotating_server(dir.path().join("token"), seen.clone()).await;
    let net = TargetHttp::new("kb", &cfg, &url).unwrap();
    let counted = Arc::new(Mutex::new(Vec::new()));
    let c = counted.clone();
    net.count_failures(Arc::new(move |step| c.lock().unwrap().push(step)));

    let resp = net.send(|c| c.get(url.clone())).await.expect("sent");
    assert_eq!(resp.status(), 200);
    assert_eq!(*seen.lock().unwrap(), ["Bearer one", "Bearer two"]);
    assert!(counted.lock().unwrap().is_empty());

    // A value the server never accepts: refused once, no retry (the file did not change).
    put(dir.path(), "token", "three\n");
    let err = net.send(|c| c.get(url.clone())).await.unwrap_err();
    let SendError::Auth { error, status } = err else {
        panic!("auth error expected, got {err:?}")
    };
    assert_eq!((error.step, status), (AuthStep::Unauthorized, Some(401)));
    assert!(!error.to_string().contains("three"), "{error}");
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert_eq!(*counted.lock().unwrap(), [AuthStep::Unauthorized]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_failure_counters_exist_at_zero_for_targets_with_an_auth_block() {
    let lab = start_lab([("kb", Behaviour::default())]).await;
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "token", "t0k3n\n");
    let yaml = format!(
        "targets:\n  - name: kb\n    url: {}\n    authorization:\n      credentials_file: token\n",
        lab.url("kb")
    );
    let path = dir.path().join("config.yml");
    std::fs::write(&path, yaml).unwrap();
    let config = Config::load(&path).unwrap();
    let mut h = Harness::new();
    h.supervisor.apply(&config);
    let s = h
        .until("kb up with its authorization header", |s| {
            s.v("mcp_probe_up", &[("target", "kb")]) == 1.0
        })
        .await;
    for step in AuthStep::ALL {
        assert_eq!(
            s.get(
                "mcp_probe_auth_failures_total",
                &[("target", "kb"), ("reason", step.as_str())]
            ),
            Some(0.0),
            "{}",
            step.as_str()
        );
    }
    h.supervisor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_a_bad_credentials_file_keeps_the_running_configuration() {
    let lab = start_lab([("a", Behaviour::default())]).await;
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "token", "t0k3n\n");
    let path = dir.path().join("mcp_exporter.yml");
    let good = format!(
        "global:\n  ping_interval: 500ms\ntargets:\n  - name: a\n    url: {}\n    authorization:\n      credentials_file: token\n",
        lab.url("a")
    );
    std::fs::write(&path, &good).unwrap();
    let e = common::Exporter::spawn(
        &[
            format!("--config.file={}", path.display()),
            "--web.enable-lifecycle".into(),
        ],
        &[],
    );
    e.until_metrics("a up", |s| s.v("mcp_probe_up", &[("target", "a")]) == 1.0)
        .await;

    // The same target, now also with a client key that does not exist.
    let bad = format!(
        "{good}    tls_config:\n      cert_file: client.pem\n      key_file: missing.key\n"
    );
    let client = leaf(&ca(), &["probe"]);
    put(dir.path(), "client.pem", &client.cert);
    std::fs::write(&path, bad).unwrap();
    let s = e
        .refused_reload(&["mcp_exporter.yml: targets[0].tls_config.key_file: cannot read "])
        .await;
    assert_eq!(s.v("mcp_probe_up", &[("target", "a")]), 1.0);
    assert_eq!(
        s.v(
            "mcp_probe_auth_failures_total",
            &[("target", "a"), ("reason", "credentials")]
        ),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reads_an_http_config_file() {
    let lab = start_lab([("kb", Behaviour::default())]).await;
    let pki = ca();
    let front = Front::start(lab.addr(), server_config(&pki)).await;
    let dir = tempfile::tempdir().unwrap();
    let client = leaf(&pki, &["probe"]);
    put(dir.path(), "ca.pem", &pki.pem);
    put(dir.path(), "client.pem", &client.cert);
    put(dir.path(), "client.key", &client.key);
    let tls = "tls_config:\n  ca_file: ca.pem\n  server_name: mcp.internal\n";
    put(
        dir.path(),
        "mtls.yml",
        &format!("{tls}  cert_file: client.pem\n  key_file: client.key\n"),
    );
    put(dir.path(), "nocert.yml", tls);
    let url = format!("https://127.0.0.1:{}/kb/mcp", front.addr.port());
    let check = |file: &str| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
            .args(["check", "--timeout", "5s", "--http-config"])
            .arg(dir.path().join(file))
            .arg(&url)
            .output()
    };
    let out = tokio::time::timeout(DEADLINE, check("mtls.yml"))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("PASS"), "{text}");
    assert!(front.handshakes(0) >= 1);

    let out = tokio::time::timeout(DEADLINE, check("nocert.yml"))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("could not connect: tls"), "{text}");

    // A file that does not load: the error names it and the field.
    put(
        dir.path(),
        "bad.yml",
        "tls_config:\n  key_file: client.key\n",
    );
    let out = tokio::time::timeout(DEADLINE, check("bad.yml"))
        .await
        .unwrap()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.yml: tls_config.cert_file: a client key needs its certificate"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_counted_and_named_on_the_status_page() {
    // A server that refuses every request as a bearer-protected resource does.
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::UNAUTHORIZED,
            [("www-authenticate", "Bearer realm=\"mcp\"")],
            "",
        )
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let yaml = format!(
        "targets:\n  - name: kb\n    url: http://{addr}/mcp\n    transport: streamable_http\n    basic_auth:\n      username: probe\n      password: s3cr3t-sentinel\n"
    );
    let config = Config::parse(&yaml, "test.yml", &|_| None).unwrap();
    let mut h = Harness::new();
    h.supervisor.apply(&config);
    let s = h
        .until("refusals counted", |s| {
            s.v(
                "mcp_probe_auth_failures_total",
                &[("target", "kb"), ("reason", "unauthorized")],
            ) >= 1.0
                && failures(s, "kb", "auth") >= 1.0
        })
        .await;
    assert_eq!(
        s.v(
            "mcp_probe_auth_failures_total",
            &[("target", "kb"), ("reason", "forbidden")]
        ),
        0.0
    );
    let status = h.supervisor.status().snapshot().to_json(1 << 20);
    assert!(
        status.contains(
            "auth: unauthorized: HTTP 401: the target refused the configured credentials"
        ),
        "{status}"
    );
    assert!(!status.contains("s3cr3t-sentinel"));
    h.supervisor.shutdown().await;
}

#[tokio::test]
async fn requests_go_through_proxy_url_except_to_no_proxy_hosts() {
    // A forward proxy that records the request targets it is asked for and answers 503.
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let a = asked.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let a = a.clone();
        async move {
            a.lock().unwrap().push(uri.to_string());
            axum::http::StatusCode::SERVICE_UNAVAILABLE
        }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let target: url::Url = "http://mcp.invalid/mcp".parse().unwrap();
    let send = |yaml: String| {
        let target = target.clone();
        async move {
            let cfg = parse_http_config(&yaml, "http.yml", None, &|_| None).unwrap();
            let net = TargetHttp::new("kb", &cfg, &target).unwrap();
            net.send(|c| c.get(target.clone())).await
        }
    };
    let resp = send(format!("proxy_url: http://{proxy}\n")).await.unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(*asked.lock().unwrap(), ["http://mcp.invalid/mcp"]);

    // Excepted: sent direct, so the name (reserved, never resolving) fails to resolve.
    let err = send(format!(
        "proxy_url: http://{proxy}\nno_proxy: mcp.invalid\n"
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, SendError::Http(_)), "{err:?}");
    assert_eq!(asked.lock().unwrap().len(), 1);
}

/// A server that records every request it is sent (standing in for another host: an attacker's
/// authorization server, or 169.254.169.254) and answers 404.
async fn recorder() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let s = seen.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let s = s.clone();
        async move {
            s.lock().unwrap().push(uri.to_string());
            axum::http::StatusCode::NOT_FOUND
        }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

/// An OAuth-protected MCP server that refuses every request with `www_authenticate` and
/// publishes resource metadata naming `authorization_server`.
async fn protected_by(www_authenticate: String, authorization_server: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let prm = serde_json::json!({
        "resource": format!("http://{addr}/mcp"),
        "authorization_servers": [authorization_server],
    });
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            axum::routing::get(move || async move { axum::Json(prm) }),
        )
        .fallback(move || {
            let www = www_authenticate.clone();
            async move {
                (
                    axum::http::StatusCode::UNAUTHORIZED,
                    [("www-authenticate", www)],
                    "",
                )
            }
        });
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Issue 22, items 1 and 2, through the running probe: a server that names an authorization
/// server on another host gets no request to that host (the secret is never sent), and one that
/// points its challenge's `resource_metadata` at another host gets no fetch there; each is an
/// auth failure with its own reason, named on the status page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_cannot_send_credentials_or_fetches_to_another_host() {
    let (foreign, seen) = recorder().await;
    let hijacked = protected_by("Bearer".into(), format!("http://{foreign}/as")).await;
    let ssrf = protected_by(
        format!(r#"Bearer resource_metadata="http://{foreign}/latest/meta-data""#),
        format!("http://{foreign}/as"),
    )
    .await;
    let oauth = "    transport: streamable_http\n    oauth2:\n      client_id: probe\n      client_secret: s3cr3t-sentinel\n";
    let yaml = format!(
        "targets:\n  - name: hijacked\n    url: http://{hijacked}/mcp\n{oauth}  - name: ssrf\n    url: http://{ssrf}/mcp\n{oauth}"
    );
    let config = Config::parse(&yaml, "test.yml", &|_| None).unwrap();
    let mut h = Harness::new();
    h.supervisor.apply(&config);
    let auth = |s: &common::Scrape, target: &str, reason: &str| {
        s.v(
            "mcp_probe_auth_failures_total",
            &[("target", target), ("reason", reason)],
        )
    };
    let s = h
        .until("both refusals counted", |s| {
            auth(s, "hijacked", "untrusted_authorization_server") >= 1.0
                && auth(s, "ssrf", "untrusted_metadata_origin") >= 1.0
        })
        .await;
    for (target, other) in [
        ("hijacked", "untrusted_metadata_origin"),
        ("ssrf", "untrusted_authorization_server"),
    ] {
        assert_eq!(auth(&s, target, other), 0.0, "{target} {other}");
        assert_eq!(auth(&s, target, "token_endpoint"), 0.0, "{target}");
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "the other host was sent {:?}",
        seen.lock().unwrap()
    );
    let status = h.supervisor.status().snapshot().to_json(1 << 20);
    assert!(
        status.contains("untrusted_authorization_server"),
        "{status}"
    );
    assert!(status.contains("untrusted_metadata_origin"), "{status}");
    assert!(!status.contains("s3cr3t-sentinel"));
    h.supervisor.shutdown().await;
    assert!(seen.lock().unwrap().is_empty());
}
